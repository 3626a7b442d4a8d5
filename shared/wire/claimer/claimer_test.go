package claimer_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/claim"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/claimer"
)

// TestHeldWhileTheAppKeyIsMissing: deployed before make app, the App key's
// secret has no value yet. The claimer as wired starts anyway and holds
// each message (a batch item failure, back after claim.DefaultHoldDelay)
// instead of claiming it or failing at init. On moto: the key is read
// from Secrets Manager and the hold is a real ChangeMessageVisibility.
func TestHeldWhileTheAppKeyIsMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := emulator.ForTest(t)
	awsCfg := srv.ConfigForTest(t)
	sm, sqsc := secretsmanager.NewFromConfig(awsCfg), sqs.NewFromConfig(awsCfg)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)

	key, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("wire-claimer-key-" + suffix)})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("wire-claims-" + suffix)})
	if err != nil {
		t.Fatal(err)
	}
	// Sent once: a second copy from the SDK's retry of a cut answer would
	// come back at once below, as if the hold had not hidden the message.
	if _, err := (emulator.SQSOnce{Client: sqsc}).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(`{"job_id":1}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, VisibilityTimeout: 0, WaitTimeSeconds: 1})
	if err != nil || len(got.Messages) != 1 {
		t.Fatalf("receive: got %d messages, %v; want 1", len(got.Messages), err)
	}
	m := got.Messages[0]

	vars := keyOnly(srv, aws.ToString(q.QueueUrl), aws.ToString(key.ARN))
	// One message: Hold writes its lines one after another.
	out := &bytes.Buffer{}
	h, err := claimer.New(ctx, wire.Env{Getenv: func(k string) string { return vars[k] }, Out: out, Now: time.Now})
	if err != nil {
		t.Fatalf("wiring without the key's value: %v, want a claimer that starts", err)
	}
	resp, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs",
	}}})
	if err != nil {
		t.Fatalf("handler: %v", err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != aws.ToString(m.MessageId) {
		t.Fatalf("got %+v, want the message back as a batch item failure", resp)
	}
	var hold struct {
		Decision string
		Delay    int64 `json:"delay_ms"`
		Error    string
	}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(l, `"decision":"hold"`) {
			if err := json.Unmarshal([]byte(l), &hold); err != nil {
				t.Fatal(err)
			}
		}
	}
	if hold.Decision != "hold" || hold.Delay != claim.DefaultHoldDelay.Milliseconds() || hold.Error != "" {
		t.Errorf("got %+v, want a hold of %s with no retry error; output:\n%s", hold, claim.DefaultHoldDelay, out)
	}
	// Received with no visibility timeout, the message would be visible
	// at once; the hold made it invisible for the hold delay.
	again, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Messages) != 0 {
		t.Errorf("got the message back at once, want it held for %s", claim.DefaultHoldDelay)
	}
}

// TestHoldNamesTheKeysSecretAndWhatIsWrong: the App key's secret holds a
// public key (the wrong half pasted). The claimer holds, and its line says
// which secret and what is wrong with it, never a byte of what it holds.
func TestHoldNamesTheKeysSecretAndWhatIsWrong(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := emulator.ForTest(t)
	awsCfg := srv.ConfigForTest(t)
	sm := secretsmanager.NewFromConfig(awsCfg)
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	key, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String("wire-claimer-pub-" + strconv.FormatInt(time.Now().UnixNano(), 36)), SecretString: aws.String(pub)})
	if err != nil {
		t.Fatal(err)
	}
	vars := keyOnly(srv, "http://127.0.0.1:1/000000000000/claims", aws.ToString(key.ARN))
	out := &bytes.Buffer{}
	h, err := claimer.New(ctx, wire.Env{Getenv: func(k string) string { return vars[k] }, Out: out, Now: time.Now})
	if err != nil {
		t.Fatalf("wiring with a public key for the App's: %v, want a claimer that starts", err)
	}
	if _, err := h(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m1", ReceiptHandle: "r1", Body: `{"job_id":1}`,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs"}}}); err != nil {
		t.Fatalf("handler: %v", err)
	}
	var hold struct{ Decision, Reason string }
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.Contains(l, `"decision":"hold"`) {
			if err := json.Unmarshal([]byte(l), &hold); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The logs mask a long mixed-case run, as moto's and CloudFormation's
	// secret names are: the ARN is named as every log line names it.
	if !strings.Contains(hold.Reason, "private key in "+redact.String(aws.ToString(key.ARN))) || !strings.Contains(hold.Reason, "a public key, not a private key") {
		t.Errorf("got reason %q, want the secret's ARN and what is wrong; output:\n%s", hold.Reason, out)
	}
	if line := strings.Split(pub, "\n")[1]; strings.Contains(out.String(), line) {
		t.Errorf("output quotes the secret's value:\n%s", out)
	}
}

// keyOnly is a claimer's environment on srv whose App key is the secret
// keyARN and whose claims queue is queueURL; its table, GitHub and
// dispatch queue do not exist (nothing in these tests gets that far).
func keyOnly(srv *emulator.Server, queueURL, keyARN string) map[string]string {
	vars := srv.Env()
	for k, v := range map[string]string{
		"TABLE_NAME": "wire-claimer-no-table", "CLAIMS_QUEUE_URL": queueURL,
		"RUNNER_POOLS":  `[{"name":"linux","labels":["self-hosted","linux"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"GITHUB_APP_ID": "42", "GITHUB_APP_PRIVATE_KEY_ARN": keyARN, "GITHUB_API_URL": "http://127.0.0.1:1",
	} {
		vars[k] = v
	}
	return vars
}
