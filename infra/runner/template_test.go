package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// templateNode parses ../../template.yaml.
func templateNode(t *testing.T) *yaml.Node {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// get walks mapping keys, following aliases.
func get(n *yaml.Node, path ...string) *yaml.Node {
	for _, k := range path {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// The scaffold's launch templates run this very boot.sh: their user data
// embeds it verbatim between the setup and the exec.
func TestTemplateEmbedsBootScript(t *testing.T) {
	t.Parallel()
	boot, err := os.ReadFile("boot.sh")
	if err != nil {
		t.Fatal(err)
	}
	root := templateNode(t)
	for _, lt := range []string{"RunnerLaunchTemplateX64", "RunnerLaunchTemplateArm64"} {
		ud := get(root, "Resources", lt, "Properties", "LaunchTemplateData", "UserData")
		if ud == nil || ud.Tag != "!Base64" {
			t.Fatalf("%s: UserData is not a !Base64", lt)
		}
		parts := get(ud, "Fn::Join")
		if parts == nil || len(parts.Content) != 2 || len(parts.Content[1].Content) != 3 {
			t.Fatalf("%s: UserData is not Fn::Join of setup, boot script, exec", lt)
		}
		seq := parts.Content[1].Content
		if got := seq[1].Value; got != string(boot) {
			t.Errorf("%s: the embedded boot script differs from infra/runner/boot.sh: copy the file into template.yaml", lt)
		}
		// The setup is !Sub [script, {AwsUseFipsEndpoint: ...}].
		sub := seq[0]
		if sub.Tag != "!Sub" || len(sub.Content) != 2 {
			t.Fatalf("%s: the setup is not !Sub [script, variables]", lt)
		}
		setup, vars := sub.Content[0].Value, sub.Content[1]
		if !strings.HasSuffix(setup, "<<'GHCLAIM_BOOT'\n") || !strings.HasPrefix(seq[2].Value, "GHCLAIM_BOOT\n") {
			t.Errorf("%s: the boot script is not inside the quoted here-document", lt)
		}
		// The runner's AWS CLI (its JIT config in SSM) follows AwsEndpoints=fips as the functions do.
		fips := get(vars, "AwsUseFipsEndpoint")
		if !strings.Contains(setup, "export AWS_USE_FIPS_ENDPOINT=${AwsUseFipsEndpoint}\n") ||
			fips == nil || fips.Tag != "!If" || fips.Content[0].Value != "UseFipsEndpoints" {
			t.Errorf("%s: the setup does not export AWS_USE_FIPS_ENDPOINT from !If [UseFipsEndpoints, ...]", lt)
		}
		// EC2 refuses user data over 16 KB (raw, before base64): every
		// launch from the template would fail. Each !Sub variable is
		// counted at 64 bytes rendered (a SHA-256 in hex, the longest).
		rendered := len(setup) + 64*strings.Count(setup, "${")
		if n := rendered + len(boot) + len(seq[2].Value); n > 16*1024 {
			t.Errorf("%s: user data of %d bytes, EC2 allows 16384", lt, n)
		}
	}
}

// With RunnerPools left empty, the functions get the scaffold's pools:
// they must parse, and name the created launch templates and subnets.
func TestTemplateDefaultPoolsParse(t *testing.T) {
	t.Parallel()
	root := templateNode(t)
	v := get(root, "Globals", "Function", "Environment", "Variables", "RUNNER_POOLS")
	if v == nil || v.Tag != "!If" || len(v.Content) != 3 || v.Content[0].Value != "HasRunnerPools" {
		t.Fatal("RUNNER_POOLS is not !If [HasRunnerPools, ...]")
	}
	inner := v.Content[2]
	if inner.Tag != "!If" || inner.Content[0].Value != "CreateRunnerScaffold" || inner.Content[1].Tag != "!Sub" {
		t.Fatal("RUNNER_POOLS's default branch is not !If [CreateRunnerScaffold, !Sub ...]")
	}
	text := inner.Content[1].Content[0].Value
	for k, val := range map[string]string{
		"${X64}": "lt-0aaa", "${Arm64}": "lt-0bbb", "${Subnets}": `subnet-1","subnet-2`,
		"${TypesX64}": `m7i.large","m6i.large`, "${TypesArm64}": `m7g.large`, "${Capacity}": "spot-then-on-demand",
	} {
		if !strings.Contains(text, k) {
			t.Errorf("default pools do not use %s", k)
		}
		text = strings.ReplaceAll(text, k, val)
	}
	pools, err := pool.Parse(text)
	if err != nil {
		t.Fatalf("default pools: %v\n%s", err, text)
	}
	if len(pools) != 2 || pools[0].Provisioner.LaunchTemplate != "lt-0aaa" || pools[1].Provisioner.LaunchTemplate != "lt-0bbb" ||
		len(pools[0].Provisioner.Subnets) != 2 || pools[0].Provisioner.InstanceTypes[1] != "m6i.large" {
		t.Errorf("default pools: got %+v", pools)
	}
	if p, ok := pool.Match(pools, []string{"self-hosted", "linux", "arm64"}); !ok || p.Name != "linux-arm64" {
		t.Errorf("a self-hosted linux arm64 job: got pool %+v %v, want linux-arm64", p, ok)
	}
}
