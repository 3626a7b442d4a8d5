package secretscan_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/wire"
)

// The functions are wired by shared/wire's packages, the code their
// main.go runs, with what a test substitutes in wire.Env: the environment
// is a map, "now" is the test's clock, and os.Stdout is the function's own
// buffer. The claimer's SSM client is as strict as AWS (provisiontest) and
// can be told to answer with an error that echoes the value (echoSSM).

type env map[string]string

func (e env) get(k string) string { return e[k] }

// output is one function's stdout (its log and EMF lines), safe for the
// concurrent writers of a claimer batch.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) Bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf.Bytes())
}

// wired is the wire.Env of one function in this test.
func wired(e env, now func() time.Time, stdout io.Writer, ssmOpts ...func(*ssmapi.Options)) wire.Env {
	return wire.Env{Getenv: e.get, Out: stdout, Now: now, SSM: ssmOpts}
}

// echoSSM is an ssm.Options function: while armed, a PutParameter is
// answered with a 400 ValidationException whose message quotes the value,
// the shape of AWS's "1 validation error detected: Value '…' at '…'"
// messages, so the test sees what the functions do with an AWS error that
// carries the JIT config.
type echoSSM struct {
	mu    sync.Mutex
	armed bool
}

func (e *echoSSM) arm(on bool) { e.mu.Lock(); e.armed = on; e.mu.Unlock() }

func (e *echoSSM) option(o *ssmapi.Options) {
	next := o.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	o.HTTPClient = echoClient{e: e, next: next}
}

type echoClient struct {
	e    *echoSSM
	next aws.HTTPClient
}

func (c echoClient) Do(req *http.Request) (*http.Response, error) {
	c.e.mu.Lock()
	armed := c.e.armed
	c.e.mu.Unlock()
	if !armed || req.Header.Get("X-Amz-Target") != "AmazonSSM.PutParameter" || req.Body == nil {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	var in struct{ Value string }
	_ = json.Unmarshal(body, &in)
	msg := "1 validation error detected: Value '" + in.Value + "' at 'value' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[^\\x00]*$"
	out, _ := json.Marshal(map[string]string{"__type": "ValidationException", "message": msg})
	return &http.Response{
		Status: "400 Bad Request", StatusCode: http.StatusBadRequest, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Requestid": {"00000000-0000-4000-8000-secretscan00"}},
		Body:    io.NopCloser(strings.NewReader(string(out))),
		Request: req, ContentLength: int64(len(out)),
	}, nil
}

// strict is the SSM option list of the claimer in this test.
func strict(e *echoSSM) []func(*ssmapi.Options) {
	return []func(*ssmapi.Options){provisiontest.StrictSSM, e.option}
}

// sqsEvent turns received messages into the claimer's event.
func sqsEvent(queueARN string, msgs []sqsMessage) events.SQSEvent {
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.id, ReceiptHandle: m.receipt, Body: m.body,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs", EventSourceARN: queueARN, AWSRegion: "us-east-1",
		})
	}
	return ev
}

type sqsMessage struct{ id, receipt, body string }
