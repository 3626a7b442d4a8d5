package provision

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// describeCounter counts a Catalog's DescribeParameters calls.
type describeCounter struct {
	Catalog
	describes int
}

func (c *describeCounter) DescribeParameters(ctx context.Context, in *ssmapi.DescribeParametersInput) (*ssmapi.DescribeParametersOutput, error) {
	c.describes++
	return c.Catalog.DescribeParameters(ctx, in)
}

// TestConfigsListFiftyAPage: the janitor's listing asks Parameter Store
// for its largest page, 50 (DescribeParameters' MaxResults is 1-50:
// https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_DescribeParameters.html),
// not the default 10: every call spends the account's Parameter Store
// rate, which a burst's booting machines need for their configs. The
// emulator pages as SSM does (moto_atomic.py: moto answered pages of 10
// whatever was asked, and took any MaxResults), and refuses what SSM
// refuses.
func TestConfigsListFiftyAPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Its own emulator: the listing reads every runner parameter of the
	// account, the binary's other tests' too.
	f := setupAWSOn(t, emulator.OwnForTest(t))
	const n = 12
	f.putConfigs(t, "page", n)
	c := &describeCounter{Catalog: f.ssm}
	cs, err := Leftovers{Parameters: c}.Configs(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Parameters) != n || c.describes != 1 {
		t.Errorf("got %d parameters in %d DescribeParameters calls, want %d in 1", len(cs.Parameters), c.describes, n)
	}
	// The largest page is 50: 51 is refused (ssmapi sends no MaxResults
	// of 0; unset, the page is SSM's default).
	_, err = f.ssm.DescribeParameters(ctx, &ssmapi.DescribeParametersInput{MaxResults: configsPage + 1})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Errorf("DescribeParameters with MaxResults %d: got %v, want ValidationException", configsPage+1, err)
	}
}

// putConfigs writes n runner configs named prefix-0 … prefix-<n-1>, each
// tagged with one instance's ARN.
func (f awsFixture) putConfigs(t *testing.T, prefix string, n int) {
	t.Helper()
	for i := range n {
		err := provisiontest.PutParameter(context.Background(), f.ssm, &ssmapi.PutParameterInput{
			Name: ParameterName(fmt.Sprintf("%s-%d", prefix, i)), Value: "x",
			Type: ssmapi.TypeSecureString,
			Tags: []ssmapi.Tag{{Key: TagInstanceARN, Value: "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
