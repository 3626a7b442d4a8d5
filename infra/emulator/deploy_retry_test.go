package emulator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// loseFirstAnswer forwards every request, but the answer to the first call of action
// (CreateStack when empty) is lost on the way back (a connection reset after the emulator
// acted), so the SDK retries it.
type loseFirstAnswer struct {
	next   http.RoundTripper
	action string
	mu     sync.Mutex
	lost   int
}

func (l *loseFirstAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	action := l.action
	if action == "" {
		action = "CreateStack"
	}
	isCreate := strings.HasSuffix(req.Header.Get("X-Amz-Target"), "."+action)
	if req.Body != nil && !isCreate {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
		isCreate = bytes.Contains(b, []byte("Action="+action+"&"))
	}
	resp, err := l.next.RoundTrip(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && isCreate && l.lost == 0 {
		l.lost++
		resp.Body.Close()
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	return resp, err
}

// A CreateStack the SDK retries after it took effect finds the stack its first try created:
// Deploy recognises it by its own token and goes on (under load this failed tests with
// "Stack ... already exists").
func TestDeployRecognisesItsRetriedCreateStack(t *testing.T) {
	t.Parallel()
	srv := ForTest(t)
	cfg := srv.ConfigForTest(t)
	lossy := &loseFirstAnswer{next: http.DefaultTransport}
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
	if lossy.lost != 1 {
		t.Fatalf("the CreateStack answer was lost %d times, want 1 (the test did not exercise the retry)", lossy.lost)
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
