package webhook

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/contract"
)

// TestNoAWSServiceDependency: the webhook speaks its ports in shared/job's
// types and never imports an AWS service package, directly or through an
// adapter (shared/store, shared/queue).
func TestNoAWSServiceDependency(t *testing.T) {
	t.Parallel()
	contract.DepsFree(t, "github.com/ghclaim/ghclaim/shared/webhook")
}
