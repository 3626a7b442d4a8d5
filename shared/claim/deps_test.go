package claim_test

import (
	"testing"

	"github.com/ghclaim/ghclaim/infra/contract"
)

// TestNoAWSServiceDependency: the claim flow names its ports in the
// domain's types, so neither it nor anything it imports pulls in an AWS
// service SDK (DynamoDB, SQS, EC2, SSM): the adapters depend on the domain,
// never the other way round.
func TestNoAWSServiceDependency(t *testing.T) {
	t.Parallel()
	contract.DepsFree(t, "github.com/ghclaim/ghclaim/shared/claim")
}
