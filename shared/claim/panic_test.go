package claim_test

import (
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/job"
)

// TestPanicStaysWithItsMessage: a message whose handling panics (here in
// the provisioner) is that message's batch item failure, logged; the other
// messages of the batch are claimed and answered as handled. Unrecovered,
// the panic killed the process and the whole batch came back.
func TestPanicStaysWithItsMessage(t *testing.T) {
	t.Parallel()
	h := setup(t, setupOpt{})
	for id := int64(9801); id <= 9803; id++ {
		h.seed(t, id)
	}
	h.spy.set(func(n int) error {
		if n == 1 {
			panic("provisioner bug")
		}
		return nil
	}, nil)
	msgs := h.receive(t, 3)
	resp := h.invoke(t, h.claimer(t, claimerOpt{concurrency: 1}), msgs...)
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != msgs[0].MessageId {
		t.Fatalf("batch item failures %+v, want the first message's only", resp.BatchItemFailures)
	}
	for _, m := range msgs[1:] {
		if r := h.get(t, jobOf(t, m.Body)); r.State != job.Claimed {
			t.Errorf("job %d: %s, want claimed beside the panicking message", r.JobID, r.State)
		}
	}
	if !strings.Contains(h.logs.String(), `"msg":"claim panic"`) {
		t.Error("the panic was not logged")
	}
}
