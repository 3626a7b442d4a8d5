package rig

import (
	"path/filepath"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// The real template.yaml's environment resolves on an emulated stack: every Ref the local run
// meets, pseudo parameters included.
func TestTemplateEnvironmentResolvesOnTheEmulatedStack(t *testing.T) {
	t.Parallel()
	path, err := emulator.TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	stack := &emulator.Stack{Name: "ghclaim-local-1", TableName: "tbl", QueueURL: "http://q",
		WebhookSecretARN: "arn:ws", GitHubAppPrivateKeyARN: "arn:key"}
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{name: "default: the stack's name", params: map[string]string{"GitHubAppId": "1", "RunnerPools": "[]"}, want: "ghclaim-local-1"},
		{name: "parameter", params: map[string]string{"GitHubAppId": "1", "RunnerPools": "[]", "MetricsNamespace": "ci/runners"}, want: "ci/runners"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fns, err := Functions(filepath.Clean(path), tt.params, stackRefs(stack))
			if err != nil {
				t.Fatal(err)
			}
			if len(fns) == 0 {
				t.Fatal("no functions read")
			}
			for name, fn := range fns {
				if got := fn.Env["METRICS_NAMESPACE"]; got != tt.want {
					t.Errorf("%s: got METRICS_NAMESPACE %q, want %q", name, got, tt.want)
				}
			}
		})
	}
}
