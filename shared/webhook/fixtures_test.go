package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/queue"
)

//go:generate go test -run TestEventFixtures -update .

// update rewrites events/*.json from testdata/payloads (go generate, or
// go test ./shared/webhook -run TestEventFixtures -update).
var update = flag.Bool("update", false, "rewrite the events/ fixtures from testdata/payloads")

const eventsDir = "../../events"

// eventFixtures are the Function URL events that `sam local invoke -e` and
// these tests share. Their bodies come from testdata/payloads, compacted as
// GitHub sends them, and are signed with localSecret.
var eventFixtures = []struct {
	file    string
	event   string
	guid    string
	payload string
	secret  string // signing secret; localSecret unless the fixture is meant to fail
	code    int    // the handler's answer (fake store, no prior state)
}{
	{file: "webhook-queued.json", event: "workflow_job", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b01", payload: "queued", secret: localSecret, code: 202},
	{file: "webhook-waiting.json", event: "workflow_job", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b02", payload: "waiting", secret: localSecret, code: 200},
	{file: "webhook-in-progress.json", event: "workflow_job", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b03", payload: "in_progress", secret: localSecret, code: 202},
	{file: "webhook-completed.json", event: "workflow_job", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b04", payload: "completed", secret: localSecret, code: 202},
	{file: "webhook-ping.json", event: "ping", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b05", payload: "ping", secret: localSecret, code: 200},
	{file: "webhook-bad-signature.json", event: "workflow_job", guid: "1f0e5a80-cf1f-11f1-8a9e-4e0d6c3a0b06", payload: "queued", secret: "not-the-local-secret", code: 401},
}

// fixtureEvent builds the Function URL event GitHub's delivery becomes.
func fixtureEvent(t testing.TB, event, guid, name, secret string) events.LambdaFunctionURLRequest {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "payloads", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, src); err != nil { // keeps GitHub's key order
		t.Fatal(err)
	}
	body := buf.Bytes()
	sha1Mac := hmac.New(sha1.New, []byte(secret))
	sha1Mac.Write(body)
	return events.LambdaFunctionURLRequest{
		Version:        "2.0",
		RawPath:        "/",
		RawQueryString: "",
		Headers: map[string]string{
			"accept":                                 "*/*",
			"content-length":                         fmt.Sprint(len(body)),
			"content-type":                           "application/json",
			"host":                                   "abcdefghij.lambda-url.us-east-1.on.aws",
			"user-agent":                             "GitHub-Hookshot/6b02022",
			"x-amzn-trace-id":                        "Root=1-692c0a81-0123456789abcdef01234567",
			"x-forwarded-for":                        "140.82.115.10",
			"x-forwarded-port":                       "443",
			"x-forwarded-proto":                      "https",
			"x-github-delivery":                      guid,
			"x-github-event":                         event,
			"x-github-hook-id":                       "512345678",
			"x-github-hook-installation-target-id":   "1234567",
			"x-github-hook-installation-target-type": "integration",
			// GitHub still sends the legacy SHA-1 signature beside the SHA-256 one.
			"x-hub-signature":     "sha1=" + hex.EncodeToString(sha1Mac.Sum(nil)),
			"x-hub-signature-256": SignatureValue(body, []byte(secret)),
		},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID:    "anonymous",
			RequestID:    "c0ffee00-0000-4000-8000-" + guid[len(guid)-12:],
			APIID:        "abcdefghij",
			DomainName:   "abcdefghij.lambda-url.us-east-1.on.aws",
			DomainPrefix: "abcdefghij",
			Time:         testNow.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    testNow.UnixMilli(),
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{
				Method: "POST", Path: "/", Protocol: "HTTP/1.1", SourceIP: "140.82.115.10", UserAgent: "GitHub-Hookshot/6b02022",
			},
		},
		Body:            string(body),
		IsBase64Encoded: false,
	}
}

func indent(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestEventFixtures keeps events/webhook-*.json from rotting: each is exactly
// what its payload signs to, decodes as a Function URL event (unknown fields
// refused), verifies with the local secret (the bad one must not), and gets
// the documented answer from the handler.
func TestEventFixtures(t *testing.T) {
	for _, fx := range eventFixtures {
		t.Run(fx.file, func(t *testing.T) {
			path := filepath.Join(eventsDir, fx.file)
			want := indent(t, fixtureEvent(t, fx.event, fx.guid, fx.payload, fx.secret))
			if *update {
				if err := os.WriteFile(path, want, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (regenerate: go test ./shared/webhook -run TestEventFixtures -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%s is stale or hand-edited; edit testdata/payloads/%s.json and regenerate with -update", path, fx.payload)
			}
			dec := json.NewDecoder(bytes.NewReader(got))
			dec.DisallowUnknownFields()
			var req events.LambdaFunctionURLRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("decode %s as a Function URL event: %v", path, err)
			}
			if !bytes.Equal(indent(t, req), got) {
				t.Fatalf("%s does not round-trip through events.LambdaFunctionURLRequest", path)
			}
			err = Verify([]byte(req.Body), req.Headers["x-hub-signature-256"], [][]byte{[]byte(localSecret)})
			if (err == nil) != (fx.secret == localSecret) {
				t.Fatalf("Verify with the local secret = %v; the fixture is signed with %q", err, fx.secret)
			}
			f := setup(t, nil)
			if resp, _ := f.do(t, req); resp.StatusCode != fx.code {
				t.Fatalf("handler answered %d (%s), want %d", resp.StatusCode, resp.Body, fx.code)
			}
		})
	}
}

// TestOtherEventFixtures checks the claimer's and reclaimer's events and the
// env file against the types and loaders that consume them.
func TestOtherEventFixtures(t *testing.T) {
	t.Parallel()
	read := func(t *testing.T, name string, v any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(eventsDir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("decode %s: %v", name, err)
		}
	}
	t.Run("sqs-claim.json", func(t *testing.T) {
		t.Parallel()
		var ev events.SQSEvent
		read(t, "sqs-claim.json", &ev)
		if len(ev.Records) != 1 {
			t.Fatalf("%d records, want 1", len(ev.Records))
		}
		m, err := queue.Decode(ev.Records[0].Body)
		if err != nil {
			t.Fatal(err)
		}
		if m.JobID != 29679449 || m.Version != 1 || m.Attempt != 0 {
			t.Fatalf("message %+v, want job 29679449 (the queued fixture's) version 1 attempt 0", m)
		}
		// What Lambda's SQS record always carries: the body's MD5, the queue's ARN and region,
		// and the four system attributes, as strings.
		r := ev.Records[0]
		if sum := md5.Sum([]byte(r.Body)); r.Md5OfBody != hex.EncodeToString(sum[:]) {
			t.Errorf("md5OfBody %s, want %x (the body's)", r.Md5OfBody, sum)
		}
		if r.EventSource != "aws:sqs" || !strings.HasPrefix(r.EventSourceARN, "arn:aws:sqs:"+r.AWSRegion+":") {
			t.Errorf("eventSource %q, eventSourceARN %q, awsRegion %q: want aws:sqs and a queue ARN of that region", r.EventSource, r.EventSourceARN, r.AWSRegion)
		}
		for _, a := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
			if r.Attributes[a] == "" {
				t.Errorf("attributes: no %s", a)
			}
		}
	})
	t.Run("schedule.json", func(t *testing.T) {
		t.Parallel()
		var ev events.EventBridgeEvent
		read(t, "schedule.json", &ev)
		if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" {
			t.Fatalf("got %q from %q, want a Scheduled Event from aws.events", ev.DetailType, ev.Source)
		}
		// A rule's event names that rule, and only it.
		rule := "arn:aws:events:" + ev.Region + ":" + ev.AccountID + ":rule/"
		if len(ev.Resources) != 1 || !strings.HasPrefix(ev.Resources[0], rule) || string(ev.Detail) != "{}" {
			t.Errorf("resources %q, detail %s: want one %s… ARN and {}", ev.Resources, ev.Detail, rule)
		}
	})
	t.Run("env.json", func(t *testing.T) {
		t.Parallel()
		var env map[string]map[string]string
		read(t, "env.json", &env)
		get := func(fn string) config.Getenv {
			return func(k string) string { return env[fn][k] }
		}
		wh, err := config.LoadWebhook(get("WebhookFunction"))
		if err != nil {
			t.Fatalf("WebhookFunction: %v", err)
		}
		if wh.Secret != localSecret || wh.SecretARN != "" {
			t.Errorf("WebhookFunction secret: want the local secret in WEBHOOK_SECRET and no ARN")
		}
		if len(wh.Pools) != 1 || wh.Pools[0].Name != "linux-x64" {
			t.Errorf("WebhookFunction pools %+v, want linux-x64", wh.Pools)
		}
		if _, err := config.LoadClaimer(get("ClaimerFunction")); err != nil {
			t.Fatalf("ClaimerFunction: %v", err)
		}
		if _, err := config.LoadReclaimer(get("ReclaimerFunction")); err != nil {
			t.Fatalf("ReclaimerFunction: %v", err)
		}
		// The queued fixture must be accepted by the local pools.
		f := setup(t, func(c *Config) { c.Pools = wh.Pools })
		fx := eventFixtures[0]
		if resp, _ := f.do(t, fixtureEvent(t, fx.event, fx.guid, fx.payload, localSecret)); resp.StatusCode != 202 {
			t.Fatalf("queued fixture under env.json's pools: %d %s, want 202", resp.StatusCode, resp.Body)
		}
	})
}
