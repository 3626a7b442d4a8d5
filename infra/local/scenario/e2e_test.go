package scenario_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/local/rig"
	"github.com/ghclaim/ghclaim/infra/local/scenario"
)

// TestEndToEnd runs the short scenario through the real function binaries: moto, the GitHub
// stand-in, the webhook behind its Function URL, the claimer fed by the SQS mapping and the
// reclaimer on its schedule. It fails when any wiring breaks: a webhook that stopped sending
// to SQS leaves its jobs pending past the time bound (the reclaimer's outbox sweep would only
// send them after the pending grace), a claimer that stopped dispatching leaves no JIT config
// in the dispatch queue, a broken signature check answers 401, and so on.
func TestEndToEnd(t *testing.T) {
	var logs bytes.Buffer
	opts := scenario.Settings()
	opts.FunctionLogs = &logs
	// The bound covers rig.Start, which builds the three functions: on a cold build cache (CI's
	// fresh machine) with other packages' tests compiling on 2 cores that alone took over 3
	// minutes. The scenario's own time limits are sctx (PendingGrace) and the cases' bounds.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r, err := rig.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	p := &scenario.Player{Rig: r, Out: &progress}
	sctx, scancel := context.WithTimeout(ctx, scenario.PendingGrace)
	watched := make(chan struct{})
	go func() { p.Watch(sctx); close(watched) }()
	playErr := scenario.Short(sctx, p)
	scancel()
	<-watched
	results, err := p.Judge(ctx)
	// Stop the functions before reading their output.
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	scenario.Table(&table, results)
	if playErr != nil || !scenario.AllOK(results) {
		t.Errorf("scenario: %v\n%s\n%s\nfunction output (tail):\n%s", playErr, progress.String(), table.String(), tail(logs.String(), 60))
		return
	}
	// moto enforces no IAM: the rig's role proxies refused what AWS would.
	for _, d := range r.Denied() {
		t.Errorf("IAM would refuse %s", d)
	}
	t.Logf("\n%s", table.String())
}

// tail is the last n lines of the functions' output, without the metrics-only (EMF) lines; a
// log line that carries metrics (the webhook's delivery line) stays.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, `"_aws":`) || strings.Contains(l, `"msg":`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
