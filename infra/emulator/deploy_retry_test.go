package emulator

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// A CreateStack the SDK retries after it took effect finds the stack its first try created:
// Deploy recognises it by its own token and goes on (under load this failed tests with
// "Stack ... already exists").
func TestDeployRecognisesItsRetriedCreateStack(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	lossy := &LoseFirstAnswer{Next: http.DefaultTransport.(*http.Transport).Clone(), Action: "CreateStack"}
	cfg.HTTPClient = &http.Client{Transport: lossy}
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	st, err := Deploy(context.Background(), cfg, path, StackName(t.Name()), nil)
	if err != nil {
		t.Fatalf("Deploy with its first CreateStack answer lost: %v", err)
	}
	defer st.Delete(context.Background())
	if lossy.Lost() != 1 {
		t.Fatalf("the CreateStack answer was lost %d times, want 1 (the test did not exercise the retry)", lossy.Lost())
	}
	if st.TableName == "" || st.QueueURL == "" {
		t.Fatalf("stack outputs missing after a retried create: %+v", st.Outputs)
	}
}

// A stack of the same name that this Deploy did not create is still an error.
func TestDeployRefusesAStackItDidNotCreate(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	name := StackName(t.Name())
	if _, err := cloudformation.NewFromConfig(cfg).CreateStack(context.Background(), &cloudformation.CreateStackInput{
		StackName:    aws.String(name),
		TemplateBody: aws.String(`{"Resources":{"Q":{"Type":"AWS::SQS::Queue"}}}`),
	}); err != nil {
		t.Fatal(err)
	}
	_, err = Deploy(context.Background(), cfg, path, name, nil)
	var exists *cftypes.AlreadyExistsException
	if !errors.As(err, &exists) {
		t.Fatalf("Deploy over another's stack: got %v, want AlreadyExistsException", err)
	}
}
