package secretscan_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghclaim/ghclaim/infra/chaos"
	"github.com/ghclaim/ghclaim/infra/cli"
	"github.com/ghclaim/ghclaim/infra/clocktest"
	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/iamcheck"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/infra/secretscan"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/obs"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/secretsapi"
	"github.com/ghclaim/ghclaim/shared/store"
	"github.com/ghclaim/ghclaim/shared/wire"
	wireclaimer "github.com/ghclaim/ghclaim/shared/wire/claimer"
	wirejanitor "github.com/ghclaim/ghclaim/shared/wire/janitor"
	wirereclaimer "github.com/ghclaim/ghclaim/shared/wire/reclaimer"
	wireredeliverer "github.com/ghclaim/ghclaim/shared/wire/redeliverer"
	wirehook "github.com/ghclaim/ghclaim/shared/wire/webhook"
)

const (
	appID = 5151
	// Installations: octo's jobs are claimed, acme's budget runs out.
	octo, acme = int64(61), int64(62)
)

// Recognisable secrets. The webhook has two (rotation): the stand-in signs
// with the new one, some deliveries come signed with the old one.
const (
	hookNew      = "SECRETSCAN-webhook-secret-new-7f3a9c1d2e4b"
	hookOld      = "SECRETSCAN-webhook-secret-old-0b8e6d5c4a39"
	hookWrong    = "SECRETSCAN-not-our-secret-attacker-5e1f"
	awsSecretKey = "SECRETSCAN/aws-secret-access-key/9d2c7e1b"
	awsSession   = "SECRETSCAN-aws-session-token-4a6f2b8e0c13"
)

// TestNoSecretInAnyOutput drives every path of the five functions (wired
// as their main.go wire them, on moto and the GitHub stand-in) and the CLI
// with recognisable secrets, and scans everything they wrote: each log and
// EMF line, each answer of the webhook, each error a handler returned (Lambda
// logs it) and the CLI's stdout and stderr. It also checks that decision
// lines carry delivery_id / job_id / attempt / class / version.
func TestNoSecretInAnyOutput(t *testing.T) {
	ctx := context.Background()
	began := time.Now()
	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	t.Logf("emulator and stack: %s", time.Since(began))
	awsCfg := srv.ConfigForTest(t)
	sm := secretsmanager.NewFromConfig(awsCfg)
	sqsc := sqs.NewFromConfig(awsCfg)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	for arn, v := range map[string]string{stack.GitHubAppPrivateKeyARN: keyPEM, stack.WebhookSecretARN: hookNew + "," + hookOld} {
		if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String(v)}); err != nil {
			t.Fatal(err)
		}
	}

	fake := ghfake.New(ghfake.WithAppID(appID), ghfake.WithPublicKey(&key.PublicKey))
	fake.SetInstallation(octo, "octo", true, "app")
	fake.SetInstallation(acme, "acme", true, "app")
	gh := newGitHub(fake)
	ghSrv := httptest.NewServer(gh)
	t.Cleanup(ghSrv.Close)

	dispatch, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("secretscan-dispatch-" + strconv.FormatInt(time.Now().UnixNano(), 36))})
	if err != nil {
		t.Fatal(err)
	}
	dattrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: dispatch.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	dispatchARN := dattrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	lt := launchTemplate(t, ec2api.New(awsCfg))
	pools := fmt.Sprintf(`[
 {"name":"linux","labels":["self-hosted","linux","x64"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"ec2","launch_template":%q}},
 {"name":"gpu","labels":["self-hosted","gpu"],"scope":"org","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":%q}},
 {"name":"broken","labels":["self-hosted","broken"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"ec2","launch_template":"secretscan-no-such-template"}}]`,
		lt, aws.ToString(dispatch.QueueUrl))

	e := env{
		"AWS_REGION": emulator.Region, "AWS_ENDPOINT_URL": srv.Endpoint,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": awsSecretKey, "AWS_SESSION_TOKEN": awsSession,
		"GITHUB_APP_ID": strconv.Itoa(appID), "GITHUB_API_URL": ghSrv.URL, "RUNNER_POOLS": pools,
		"LOG_LEVEL": "debug", "LEASE_DURATION": "2m",
	}
	for k, v := range stack.Env() {
		e[k] = v
	}

	clk := clocktest.New(time.Now().Truncate(time.Millisecond))
	outs := map[string]*output{}
	out := func(name string) *output {
		if outs[name] == nil {
			outs[name] = &output{}
		}
		return outs[name]
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each function's AWS requests are judged by its role in
	// template.yaml, as IAM would (moto enforces none): a refusal fails
	// the test at its end.
	tmplPath, err := emulator.TemplatePath()
	must(err)
	// The deployment these tests stand for: the dispatch pool's queue
	// named in DispatchQueueArns, as a stack with that pool must.
	roleValues := iamcheck.StackValues(stack, map[string]string{"DispatchQueueArns": dispatchARN})
	var roles []*iamcheck.Checker
	// sends counts the SDK's retries of the functions' requests, for receive.
	sends := &emulator.Retries{}
	judged := func(fn string, env wire.Env, expected bool) wire.Env {
		t.Helper()
		p, err := iamcheck.Load(tmplPath, fn, roleValues)
		if err != nil {
			t.Fatal(err)
		}
		c := iamcheck.NewChecker(p)
		if !expected {
			roles = append(roles, c)
		}
		env.HTTPClient = &iamcheck.Client{Checker: c, Next: sends}
		return env
	}
	role := func(fn string, env wire.Env) wire.Env { t.Helper(); return judged(fn, env, false) }
	hook, err := wirehook.New(ctx, role("WebhookFunction", wired(e, clk.Now, out("webhook"))))
	must(err)
	ssmEcho := &echoSSM{}
	claimer, err := wireclaimer.New(ctx, role("ClaimerFunction", wired(e, clk.Now, out("claimer"), strict(ssmEcho)...)))
	must(err)

	// deliver sends one delivery to the webhook and keeps its answer.
	deliver := func(guid, event string, body []byte, secret string) int {
		t.Helper()
		resp, err := hook.Handle(ctx, chaos.Delivery{GUID: guid, Event: event, Body: body}.Request([]byte(secret)))
		if err != nil {
			fmt.Fprintf(out("webhook"), "handler error: %v\n", err)
		}
		fmt.Fprintf(out("webhook answers"), "%d %v %s\n", resp.StatusCode, resp.Headers, resp.Body)
		return resp.StatusCode
	}
	payload := func(action, repo string, id, inst int64, labels []string, runner string) []byte {
		return ghfake.WorkflowJobPayload(ghfake.Delivery{Action: action, Repo: repo, Private: true, JobID: id, RunID: id * 10,
			Labels: labels, RunnerName: runner, Installation: inst})
	}
	linux, gpu, broken := []string{"self-hosted", "linux", "x64"}, []string{"self-hosted", "gpu"}, []string{"self-hosted", "broken"}

	// receive takes every visible claim message. A copy of one (its body)
	// that the SDK's retries of a send explain (an answer a busy emulator
	// cut, sent again) is the one message: it is left out, in flight.
	receive := func() []sqsMessage {
		t.Helper()
		var msgs []sqsMessage
		for range 3 {
			got, err := sqsc.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(stack.QueueURL), MaxNumberOfMessages: 10, VisibilityTimeout: 600})
			must(err)
			for _, m := range got.Messages {
				msgs = append(msgs, sqsMessage{id: aws.ToString(m.MessageId), receipt: aws.ToString(m.ReceiptHandle), body: aws.ToString(m.Body)})
			}
			if len(got.Messages) == 0 {
				break
			}
		}
		msgs, copies := emulator.WithoutRetried(sends, msgs, func(m sqsMessage) string { return m.body }, "SendMessage", "SendMessageBatch")
		if copies > 0 {
			t.Logf("claim messages: %d copied by the SDK's retries of a send", copies)
		}
		return msgs
	}
	st := store.New(dynamodb.NewFromConfig(awsCfg), stack.TableName, store.Options{})
	// claim queues job id and runs the claimer on its message, after
	// arrange (a fault, a rate limit) has run.
	claim := func(id, inst int64, repo string, labels []string, arrange func()) {
		t.Helper()
		if code := deliver(fmt.Sprintf("guid-queued-%d", id), "workflow_job", payload("queued", repo, id, inst, labels, ""), hookNew); code != http.StatusAccepted {
			t.Fatalf("queued delivery of job %d: status %d", id, code)
		}
		msgs := receive()
		if len(msgs) == 0 && sendFailed(out("webhook").Bytes(), id) {
			// The webhook's send failed (a box busy enough that moto
			// outlasted its attempts): the record is pending, the
			// reclaimer's outbox in production. Sent here as the
			// reclaimer would, so the claim's own output is still scanned.
			rec, err := st.Get(ctx, id)
			must(err)
			t.Logf("job %d: the webhook's send failed (pending for the reclaimer); sent by the test", id)
			must(queue.New(sqsc, stack.QueueURL).Send(ctx, job.Message{JobID: id, Version: rec.Version}, 0))
			msgs = receive()
		}
		if len(msgs) != 1 {
			t.Fatalf("job %d: %d claim messages, want 1; the webhook's log:\n%s", id, len(msgs), out("webhook").Bytes())
		}
		if arrange != nil {
			arrange()
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		resp, err := claimer(cctx, sqsEvent(stack.QueueARN, msgs))
		if err != nil {
			fmt.Fprintf(out("claimer"), "handler error: %v\n", err)
		}
		b, _ := json.Marshal(resp)
		fmt.Fprintf(out("claimer answers"), "%s\n", b)
	}
	state := func(id int64) job.State {
		t.Helper()
		rec, err := st.Get(ctx, id)
		if err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
		return rec.State
	}

	// Webhook: ping, bad signature, bad payload, unserved, a delivery
	// signed with the old secret, in_progress / completed below.
	ping := []byte(`{"zen":"Keep it logically awesome.","hook_id":4242,"hook":{"type":"App","id":4242,"active":true,"events":["workflow_job"],"config":{"content_type":"json","insecure_ssl":"0","secret":"********","url":"https://example.invalid/"}}}`)
	wantCode := func(what string, got, want int) {
		t.Helper()
		if got != want && !(want == http.StatusOK && got/100 == 2) {
			t.Fatalf("%s: status %d, want %d", what, got, want)
		}
	}
	wantCode("ping", deliver("guid-ping", "ping", ping, hookNew), http.StatusOK)
	wantCode("bad signature", deliver("guid-forged", "workflow_job", payload("queued", "octo/app", 900, octo, linux, ""), hookWrong), http.StatusUnauthorized)
	wantCode("bad payload", deliver("guid-broken", "workflow_job", []byte(`{"action":"queued","workflow_job":{"id":"ghs_`), hookNew), http.StatusBadRequest)
	wantCode("unserved", deliver("guid-unserved", "workflow_job", payload("queued", "octo/app", 901, octo, []string{"windows"}, ""), hookOld), http.StatusOK)

	// Claimer: success on EC2 (JIT config in SSM) and by dispatch.
	claim(1001, octo, "octo/app", linux, nil)
	claim(1002, octo, "octo/app", gpu, nil)
	// Retryable: GitHub answers 502 with a body that quotes the token.
	claim(1003, octo, "octo/app", linux, func() { gh.echo("generate-jitconfig", http.StatusBadGateway, 1) })
	// Non-retryable: 422 quoting the token.
	claim(1004, octo, "octo/app", linux, func() { gh.echo("generate-jitconfig", http.StatusUnprocessableEntity, 1) })
	// The token exchange refused with the App JWT quoted.
	claim(1005, octo, "octo/app", gpu, func() { gh.echo("access_tokens", http.StatusInternalServerError, 1) })
	// Rate limit: acme's budget is spent; the next acme job is deferred.
	claim(1006, acme, "acme/app", linux, func() { fake.SetRateLimit(acme, 5000, 0, clk.Now().Add(20*time.Minute)) })
	claim(1007, acme, "acme/app", linux, nil)
	// Provisioning fails for good: the registered runner is deleted.
	claim(1008, octo, "octo/app", broken, nil)
	// AWS refuses the JIT config with an error that quotes it.
	claim(1009, octo, "octo/app", linux, func() { ssmEcho.arm(true) })
	ssmEcho.arm(false)
	// Claimed jobs for the reclaimer's liveness check.
	for _, id := range []int64{1011, 1012, 1013, 1014} {
		claim(id, octo, "octo/app", gpu, nil)
	}
	for id, want := range map[int64]job.State{1001: job.Claimed, 1002: job.Claimed, 1003: job.Queued, 1004: job.Failed, 1006: job.Queued, 1008: job.Failed} {
		if got := state(id); got != want {
			t.Errorf("job %d is %s, want %s (the path this test means to drive was not taken)", id, got, want)
		}
	}

	// Webhook: in_progress and completed, out of order, taken runner.
	wantCode("in_progress", deliver("guid-ip-1001", "workflow_job", payload("in_progress", "octo/app", 1001, octo, linux, "linux-1001"), hookNew), http.StatusOK)
	wantCode("completed", deliver("guid-done-1002", "workflow_job", payload("completed", "octo/app", 1002, octo, gpu, "gpu-1002"), hookOld), http.StatusOK)
	wantCode("in_progress first", deliver("guid-ip-1020", "workflow_job", payload("in_progress", "octo/app", 1020, octo, gpu, "gpu-1020"), hookNew), http.StatusOK)
	wantCode("taken", deliver("guid-ip-1021", "workflow_job", payload("in_progress", "octo/app", 1021, octo, gpu, "gpu-1013"), hookNew), http.StatusOK)
	wantCode("duplicate", deliver("guid-queued-1001", "workflow_job", payload("queued", "octo/app", 1001, octo, linux, ""), hookNew), http.StatusOK)

	// Reclaimer, after every grace: a queued job whose message is gone is
	// taken back; claimed jobs nobody took get liveness checks.
	wantCode("queued 1030", deliver("guid-queued-1030", "workflow_job", payload("queued", "octo/app", 1030, octo, gpu, ""), hookNew), http.StatusOK)
	for _, m := range receive() {
		_, err := sqsc.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(stack.QueueURL), ReceiptHandle: aws.String(m.receipt)})
		must(err)
	}
	fake.SetJob("octo", "app", ghfake.Job{ID: 1011, Status: "queued"})      // runner offline: new attempt
	fake.SetJob("octo", "app", ghfake.Job{ID: 1012, Status: "in_progress"}) // at work: done
	fake.SetJob("octo", "app", ghfake.Job{ID: 1013, Status: "queued"})
	must(fake.SetRunner("gpu-1012", "online", true))
	must(fake.SetRunner("gpu-1013", "online", false)) // idle: check again
	clk.Advance(30 * time.Minute)
	rec, err := wirereclaimer.New(ctx, role("ReclaimerFunction", wired(e, clk.Now, out("reclaimer"))))
	must(err)
	// A liveness check's job status answered with an error quoting the
	// token: job 1014's, so the checks the other jobs stand for still run
	// whatever order the pass takes them in.
	fake.SetJob("octo", "app", ghfake.Job{ID: 1014, Status: "queued"})
	gh.echo("/actions/jobs/1014", http.StatusBadGateway, 1)
	for range 2 {
		if err := rec.Handle(ctx, events.CloudWatchEvent{}); err != nil {
			fmt.Fprintf(out("reclaimer"), "handler error: %v\n", err)
		}
	}

	// Janitor, later: runners and machines of finished jobs.
	clk.Advance(2 * time.Hour)
	jan, err := wirejanitor.New(ctx, role("JanitorFunction", wired(e, clk.Now, out("janitor"))))
	must(err)
	gh.echo("/installation/repositories", http.StatusBadGateway, 1)
	// Listing the installations is signed with the App JWT, and that
	// error is the pass's own: Handle returns it and the runtime logs it.
	gh.echo("/app/installations", http.StatusBadGateway, 1)
	for range 2 {
		if err := jan.Handle(ctx); err != nil {
			fmt.Fprintf(out("janitor"), "handler error: %v\n", err)
		}
	}

	// Redeliverer: a delivery that failed is asked again; GitHub sends it
	// to the webhook signed with the new secret.
	fake.SetWebhook(func(ctx context.Context, h http.Header, body []byte) (int, []byte, error) {
		req := chaos.Delivery{GUID: h.Get("X-GitHub-Delivery"), Event: h.Get("X-GitHub-Event"), Body: body}.Request(nil)
		req.Headers["x-hub-signature-256"] = h.Get("X-Hub-Signature-256")
		resp, err := hook.Handle(ctx, req)
		fmt.Fprintf(out("webhook answers"), "%d %v %s\n", resp.StatusCode, resp.Headers, resp.Body)
		return resp.StatusCode, []byte(resp.Body), err
	}, hookNew)
	fake.RecordDelivery(ghfake.HookDelivery{GUID: "guid-lost-1040", Event: "workflow_job", Action: "queued", StatusCode: http.StatusBadGateway,
		InstallationID: octo, DeliveredAt: time.Now().Add(-time.Minute),
		Header: http.Header{"X-Github-Event": {"workflow_job"}, "X-Github-Delivery": {"guid-lost-1040"}},
		Body:   payload("queued", "octo/app", 1040, octo, gpu, "")})
	red, err := wireredeliverer.New(ctx, role("RedelivererFunction", wired(e, clk.Now, out("redeliverer"))))
	must(err)
	gh.echo("/hook/deliveries", http.StatusBadGateway, 1) // the App JWT quoted: a read error, logged (obs redacts), not returned
	for range 2 {
		if err := red.Handle(ctx, events.CloudWatchEvent{}); err != nil {
			fmt.Fprintf(out("redeliverer"), "handler error: %v\n", err)
		}
	}
	// GitHub redelivers after its 202: the webhook's answer to the
	// redelivery is output this test scans.
	fake.Drain()
	redelivered := false
	for _, d := range fake.Deliveries() {
		redelivered = redelivered || d.GUID == "guid-lost-1040" && d.Redelivery && d.OK()
	}
	if !redelivered {
		t.Errorf("no redelivery of guid-lost-1040 answered 2xx by the webhook (the path this test means to drive was not taken)")
	}

	// CLI: every command that reads a secret or talks to GitHub.
	hookSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := chaos.Delivery{GUID: r.Header.Get("X-GitHub-Delivery"), Event: r.Header.Get("X-GitHub-Event"), Body: body}.Request(nil)
		req.Headers["x-hub-signature-256"] = r.Header.Get("X-Hub-Signature-256")
		resp, _ := hook.Handle(r.Context(), req)
		w.WriteHeader(resp.StatusCode)
		io.WriteString(w, resp.Body)
	}))
	t.Cleanup(hookSrv.Close)
	common := []string{"--stack", stack.Name, "--app-id", strconv.Itoa(appID), "--github-api-url", ghSrv.URL}
	// Some commands meet a GitHub that echoes their credential: the token
	// exchange (App JWT) and the job's status (installation token) for
	// `job`, the App and its installations (App JWT) for `doctor`.
	echoes := map[int][]string{2: {"/access_tokens"}, 3: {"/actions/jobs/"}, 8: {"/app"}, 9: {"/app/installations"}}
	for i, args := range [][]string{
		{"jobs"}, {"jobs", "--json"}, {"job", "1001"}, {"job", "1004", "--json"}, {"job", "999999"}, {"rate"}, {"rate", "--json"},
		{"retry", "1004", "--by", "secretscan"}, {"doctor", "--pools", pools, "--webhook-url", hookSrv.URL}, {"doctor", "--json", "--pools", pools, "--webhook-url", hookSrv.URL},
		{"job", "--no-such-flag"},
	} {
		for _, route := range echoes[i] {
			gh.echo(route, http.StatusBadGateway, 1)
		}
		c := cli.New(cli.Config{
			DynamoDB: dynamodb.NewFromConfig(awsCfg), SQS: sqsc, SecretsManager: secretsapi.New(awsCfg),
			CloudFormation: cloudformation.NewFromConfig(awsCfg), EC2: ec2api.New(awsCfg),
			Now: clk.Now, User: "secretscan", Stdout: out("cli stdout"), Stderr: out("cli stderr"),
		})
		fmt.Fprintf(out("cli stdout"), "$ ghclaim %s\n", args[0])
		code := c.Run(ctx, append(append([]string{}, args...), common...))
		fmt.Fprintf(out("cli stdout"), "exit %d\n", code)
	}

	// The claimer's hold path and every function's start-up errors
	// (startup_test.go), with secrets of their own planted.
	kit := startKit{env: e, now: clk.Now, out: out, sm: sm, keyPEM: keyPEM,
		refusing: func(fn string, env wire.Env) wire.Env { t.Helper(); return judged(fn, env, true) },
		queued: func(id int64) events.SQSEvent {
			t.Helper()
			if code := deliver(fmt.Sprintf("guid-queued-%d", id), "workflow_job", payload("queued", "octo/app", id, octo, gpu, ""), hookNew); code != http.StatusAccepted {
				t.Fatalf("queued delivery of job %d: status %d", id, code)
			}
			var mine []sqsMessage
			for _, m := range receive() {
				if strings.Contains(m.body, fmt.Sprintf(`"job_id":%d,`, id)) {
					mine = append(mine, m)
				}
			}
			if len(mine) != 1 {
				t.Fatalf("job %d: %d claim messages, want 1", id, len(mine))
			}
			return sqsEvent(stack.QueueARN, mine)
		},
		record: func(id int64) job.Record {
			t.Helper()
			rec, err := st.Get(ctx, id)
			must(err)
			return rec
		},
	}
	planted := driveHold(t, ctx, kit)
	maps.Copy(planted, driveStartup(t, ctx, kit))

	for _, r := range roles {
		for _, d := range r.Denied() {
			t.Errorf("IAM would refuse %s", d)
		}
	}

	// The secrets: configured, recorded at the stand-in, and derived.
	var set secretscan.Set
	for name, v := range map[string]string{"webhook secret (new)": hookNew, "webhook secret (old)": hookOld,
		"forged webhook secret": hookWrong, "AWS secret access key": awsSecretKey, "AWS session token": awsSession} {
		set.Add(name, v)
	}
	for name, v := range planted {
		set.Add(name, v)
	}
	forms, err := secretscan.KeyForms([]byte(keyPEM))
	must(err)
	for name, v := range forms {
		set.Add(name, v)
	}
	creds, jits := gh.seen()
	for _, c := range creds {
		set.Add("GitHub credential (token or App JWT)", c)
	}
	for _, j := range jits {
		forms, err := secretscan.JITForms(j)
		must(err)
		for name, v := range forms {
			set.Add(name, v)
		}
	}
	set.Marker("installation token (ghs_)", "ghs_")
	set.Marker("JWT header", "eyJhbGciOi")
	set.Marker("private key", "PRIVATE KEY")
	if len(creds) < 3 || len(jits) < 5 {
		t.Fatalf("the stand-in handed out %d credentials and %d JIT configs: the paths did not reach GitHub", len(creds), len(jits))
	}

	for name, o := range outs {
		for _, h := range set.Find(name, o.Bytes()) {
			t.Errorf("secret in output: %s", h)
		}
	}
	checkFields(t, outs)
	if t.Failed() {
		for name, o := range outs {
			t.Logf("--- %s\n%s", name, redact(o.Bytes()))
		}
	}
}

// redact cuts the lines of a failed run's output to a readable length.
func redact(b []byte) string {
	var sb strings.Builder
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 600 {
			l = append(l[:600:600], "…"...)
		}
		sb.Write(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// launchTemplate creates the EC2 launch template of the linux pool.
func launchTemplate(t *testing.T, c *ec2api.Client) string {
	t.Helper()
	name := "secretscan-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := provisiontest.LaunchTemplate(context.Background(), c, name, "", "t4g.micro"); err != nil {
		t.Fatal(err)
	}
	return name
}

// checkFields asserts that each function's decision lines carry the
// fields an operator queries by, and that each kind of decision was seen.
func checkFields(t *testing.T, outs map[string]*output) {
	t.Helper()
	type rule struct {
		function string
		match    func(l map[string]any) bool
		want     []string
	}
	msg := func(prefix string) func(map[string]any) bool {
		return func(l map[string]any) bool { s, _ := l["msg"].(string); return strings.HasPrefix(s, prefix) }
	}
	decision := func(ds ...string) func(map[string]any) bool {
		return func(l map[string]any) bool { d, _ := l["decision"].(string); return slices.Contains(ds, d) }
	}
	and := func(a, b func(map[string]any) bool) func(map[string]any) bool {
		return func(l map[string]any) bool { return a(l) && b(l) }
	}
	has := func(k string) func(map[string]any) bool {
		return func(l map[string]any) bool { _, ok := l[k]; return ok }
	}
	rules := []rule{
		{"webhook", msg("delivery"), []string{obs.KeyDeliveryID}},
		{"webhook", and(msg("delivery"), func(l map[string]any) bool {
			return l["event"] == "workflow_job" && l["status"] != float64(400) && l["status"] != float64(401)
		}), []string{obs.KeyDeliveryID, obs.KeyJobID}},
		{"claimer", decision("claimed"), []string{obs.KeyJobID, obs.KeyVersion, obs.KeyAttempt}},
		{"claimer", decision("retry", "failed"), []string{obs.KeyJobID, obs.KeyVersion, obs.KeyAttempt, obs.KeyClass}},
		{"reclaimer", and(msg("reclaim "), has(obs.KeyJobID)), []string{obs.KeyJobID, obs.KeyAttempt, obs.KeyVersion}},
		{"reclaimer", msg("reclaim liveness: new attempt"), []string{obs.KeyJobID, obs.KeyAttempt, obs.KeyVersion}},
		{"reclaimer", msg("reclaim requeued"), []string{obs.KeyJobID, obs.KeyAttempt, obs.KeyVersion}},
		{"janitor", msg("janitor deleted a runner"), []string{obs.KeyJobID}},
		{"redeliverer", msg("redeliver: redelivery asked"), []string{obs.KeyDeliveryID, obs.KeyAttempt}},
	}
	for _, r := range rules {
		seen := 0
		for _, line := range bytes.Split(outs[r.function].Bytes(), []byte("\n")) {
			var l map[string]any
			if json.Unmarshal(line, &l) != nil || l["msg"] == nil || !r.match(l) {
				continue
			}
			seen++
			for _, k := range r.want {
				if _, ok := l[k]; !ok {
					t.Errorf("%s line lacks %q: %s", r.function, k, line)
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s: no line for a rule wanting %v: the path was not driven", r.function, r.want)
		}
	}
}

// sendFailed reports whether the webhook's log says the claim message of
// job id was not sent (the record left pending for the reclaimer).
func sendFailed(log []byte, id int64) bool {
	for line := range bytes.Lines(log) {
		if bytes.Contains(line, []byte(`"outcome":"pending_send_failed"`)) && bytes.Contains(line, []byte(fmt.Sprintf(`"job_id":%d`, id))) {
			return true
		}
	}
	return false
}
