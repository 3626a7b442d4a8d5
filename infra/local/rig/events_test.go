package rig_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/ghfake"
	"github.com/ghclaim/ghclaim/infra/local/bootstrap"
	"github.com/ghclaim/ghclaim/infra/local/rie"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/store"
	"gopkg.in/yaml.v3"
)

// Where events/env.json points: the host as seen from sam local's Docker containers.
const (
	envAWS    = "http://host.docker.internal:5000"
	envGitHub = "http://host.docker.internal:8081"
)

// TestEventsUnderTheRuntimeInterfaceEmulator invokes every events/*.json file against its real
// binary running under the AWS Lambda Runtime Interface Emulator (the one pinned in go.mod),
// with events/env.json's environment pointed at moto and the GitHub stand-in: what
// `sam local invoke -e events/<x>.json --env-vars events/env.json` does, without Docker. One
// emulator at a time (each is one function), in an order that tells a story: the webhook
// records the job, the claimer claims it, GitHub reports it in progress and completed, the
// reclaimer sweeps.
func TestEventsUnderTheRuntimeInterfaceEmulator(t *testing.T) {
	root, err := bootstrap.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bin := bootstrap.Dir(root)
	bins, err := bootstrap.Build(ctx, root, bin)
	if err != nil {
		t.Fatal(err)
	}
	rieBin, err := bootstrap.BuildRIE(ctx, root, bin)
	if err != nil {
		t.Fatal(err)
	}

	srv := emulator.ForTest(t)
	stack := emulator.DeployForTest(t, srv)
	cfg := srv.ConfigForTest(t)
	env := loadEnv(t, filepath.Join(root, "events", "env.json"))
	// SAM CLI applies only the variables the template declares for a function; the others
	// are dropped without a word, so env.json may set nothing else.
	decl := declaredVars(t, filepath.Join(root, "template.yaml"))
	for fn, vars := range env {
		for k := range vars {
			if !decl[fn][k] {
				t.Errorf("events/env.json sets %s for %s, which template.yaml does not declare: sam local invoke would ignore it", k, fn)
			}
		}
	}

	// The resources env.json names by name, created on the emulator; the stack's own table and
	// queue replace the names sam local would get from a deployment.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh := ghfake.New(ghfake.WithAppID(atoi(t, env["ClaimerFunction"]["GITHUB_APP_ID"])), ghfake.WithPublicKey(&key.PublicKey))
	ghSrv := httptest.NewServer(gh)
	t.Cleanup(ghSrv.Close)
	sqsc := sqs.NewFromConfig(cfg)
	if arn := env["ClaimerFunction"]["GITHUB_APP_PRIVATE_KEY_ARN"]; arn != "" {
		sm := secretsmanager.NewFromConfig(cfg)
		pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(arn), SecretString: aws.String(string(pemKey))}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(arn), ForceDeleteWithoutRecovery: aws.Bool(true)})
		})
	}
	for fn, vars := range env {
		for k, v := range vars {
			v = strings.ReplaceAll(v, envAWS, srv.Endpoint)
			v = strings.ReplaceAll(v, envGitHub, ghSrv.URL)
			vars[k] = v
		}
		vars["TABLE_NAME"], vars["CLAIMS_QUEUE_URL"] = stack.TableName, stack.QueueURL
		// The region and credentials sam local takes from its own session (--region); not
		// AWS_ENDPOINT_URL, which it never sets: env.json's GHCLAIM_ENDPOINT_URL carries it.
		for k, v := range srv.Env() {
			if _, set := vars[k]; !set && k != emulator.EndpointEnv {
				vars[k] = v
			}
		}
		env[fn] = vars
		// Dispatch queues the pools name.
		for _, name := range dispatchQueues(vars["RUNNER_POOLS"]) {
			out, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
		}
	}

	files, err := filepath.Glob(filepath.Join(root, "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The story's order; a file not listed runs after these, with generic expectations.
	order := []string{
		"webhook-ping", "webhook-bad-signature", "webhook-waiting", "webhook-queued",
		"sqs-claim", "webhook-in-progress", "webhook-completed", "schedule",
	}
	rank := func(f string) int {
		for i, n := range order {
			if n == f {
				return i
			}
		}
		return len(order)
	}
	var names []string
	for _, f := range files {
		if n := strings.TrimSuffix(filepath.Base(f), ".json"); n != "env" {
			names = append(names, n)
		}
	}
	sort.SliceStable(names, func(i, j int) bool {
		if rank(names[i]) != rank(names[j]) {
			return rank(names[i]) < rank(names[j])
		}
		return names[i] < names[j]
	})

	st := store.New(dynamodb.NewFromConfig(cfg), stack.TableName, store.Options{})
	for _, name := range names {
		fn, logical := functionOf(name)
		if fn == "" {
			t.Errorf("events/%s.json: no function takes it (want a webhook-, sqs- or schedule prefix)", name)
			continue
		}
		payload, err := os.ReadFile(filepath.Join(root, "events", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		out, logs, err := invokeUnderRIE(t, rieBin, bins[fn], logical, env[logical], payload)
		t.Run(name, func(t *testing.T) {
			if err != nil {
				t.Fatalf("invoke: %v\n%s", err, logs)
			}
			check(t, name, out, logs, st, gh)
		})
	}

	// The other scheduled functions take events/schedule.json too (README): each makes a pass
	// with its env.json variables, and a configuration error would fail its start.
	payload, err := os.ReadFile(filepath.Join(root, "events", "schedule.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The janitor is not part of the local stack (bootstrap.Functions), and linking its binary
	// here alone would cost make test seconds: its variables go through its configuration
	// loader, which is what its cold start checks first.
	if vars := env["JanitorFunction"]; vars == nil {
		t.Error("events/env.json has no JanitorFunction: sam local invoke would run it with the template's values")
	} else if _, err := config.LoadJanitor(func(k string) string { return vars[k] }); err != nil {
		t.Errorf("events/env.json's JanitorFunction would fail its cold start: %v", err)
	}
	for _, f := range []struct{ fn, logical string }{{"redeliverer", "RedelivererFunction"}} {
		if env[f.logical] == nil {
			t.Errorf("events/env.json has no %s: sam local invoke would run it with the template's values", f.logical)
			continue
		}
		out, logs, err := invokeUnderRIE(t, rieBin, bins[f.fn], f.logical, env[f.logical], payload)
		t.Run("schedule/"+f.fn, func(t *testing.T) {
			if err != nil {
				t.Fatalf("invoke: %v\n%s", err, logs)
			}
			check(t, "schedule", out, logs, st, gh)
		})
	}
}

// check asserts what each event must have done.
func check(t *testing.T, name string, out []byte, logs string, st *store.Store, gh *ghfake.Server) {
	var resp struct {
		StatusCode        *int              `json:"statusCode"`
		BatchItemFailures []json.RawMessage `json:"batchItemFailures"`
	}
	_ = json.Unmarshal(out, &resp)
	status := func(want int) {
		t.Helper()
		if resp.StatusCode == nil || *resp.StatusCode != want {
			t.Fatalf("answer %s, want status %d\n%s", out, want, logs)
		}
	}
	const jobID = 29679449 // the job every events/ file is about
	switch name {
	case "webhook-ping", "webhook-waiting":
		status(http.StatusOK)
	case "webhook-bad-signature":
		status(http.StatusUnauthorized)
	case "webhook-queued":
		status(http.StatusAccepted)
		rec, err := st.Get(context.Background(), jobID)
		if err != nil || rec.State != job.Pending || rec.Version != 1 {
			t.Fatalf("record after queued: %+v, %v; want pending v1 (the webhook sends, the claimer leases it pending)", rec, err)
		}
	case "sqs-claim":
		// The file's receipt handle is an example, so the claimer's own delete of the message
		// fails and it reports the message back; that is the only failure allowed here.
		if len(resp.BatchItemFailures) != 0 && !strings.Contains(logs, "ReceiptHandleIsInvalid") {
			t.Fatalf("answer %s, want an SQS batch response without failures\n%s", out, logs)
		}
		rec, err := st.Get(context.Background(), jobID)
		if err != nil || rec.State != job.Claimed {
			t.Fatalf("record after the claim: %+v, %v; want claimed\n%s", rec, err, logs)
		}
		if _, ok := gh.RunnerByName(rec.RunnerName); !ok {
			t.Fatalf("runner %q is not registered at GitHub", rec.RunnerName)
		}
	case "webhook-in-progress", "webhook-completed":
		status(http.StatusAccepted)
	case "schedule":
		if s := strings.TrimSpace(string(out)); s != "null" && s != "" {
			t.Fatalf("answer %s, want none", out)
		}
	default:
		if resp.StatusCode != nil && *resp.StatusCode >= 500 {
			t.Fatalf("answer %s", out)
		}
	}
}

func functionOf(event string) (fn, logical string) {
	switch {
	case strings.HasPrefix(event, "webhook"):
		return "webhook", "WebhookFunction"
	case strings.HasPrefix(event, "sqs"):
		return "claimer", "ClaimerFunction"
	case strings.HasPrefix(event, "schedule"):
		return "reclaimer", "ReclaimerFunction"
	}
	return "", ""
}

// invokeUnderRIE runs the bootstrap in an execution environment of its own (infra/local/rie),
// invokes it once with payload, closes it, and returns the answer and the output (runtime logs
// included).
func invokeUnderRIE(t *testing.T, rieBin, bootstrapPath, name string, env map[string]string, payload []byte) ([]byte, string, error) {
	t.Helper()
	var logs bytes.Buffer // read once Close has waited for the emulator
	e, err := rie.New(rie.Config{Name: name, Bootstrap: bootstrapPath, RIE: rieBin, Env: env, Timeout: time.Minute, Output: &logs})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Invoke(context.Background(), payload)
	e.Close()
	return out, logs.String(), err
}

func loadEnv(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]map[string]string
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, fn := range []string{"WebhookFunction", "ClaimerFunction", "ReclaimerFunction"} {
		if env[fn] == nil {
			t.Fatalf("%s: no variables for %s", path, fn)
		}
	}
	return env
}

// dispatchQueues are the queue names of the dispatch pools in RUNNER_POOLS.
func dispatchQueues(pools string) []string {
	var ps []struct {
		Provisioner struct {
			Type     string `json:"type"`
			QueueURL string `json:"queue_url"`
		} `json:"provisioner"`
	}
	_ = json.Unmarshal([]byte(pools), &ps)
	var out []string
	for _, p := range ps {
		if p.Provisioner.Type == "dispatch" && p.Provisioner.QueueURL != "" {
			out = append(out, p.Provisioner.QueueURL[strings.LastIndex(p.Provisioner.QueueURL, "/")+1:])
		}
	}
	return out
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

// declaredVars lists, per function (logical id), the environment variables template.yaml
// declares for it: Globals' and its own.
func declaredVars(t *testing.T, path string) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type environment struct {
		Variables map[string]yaml.Node `yaml:"Variables"`
	}
	var doc struct {
		Globals struct {
			Function struct {
				Environment environment `yaml:"Environment"`
			} `yaml:"Function"`
		} `yaml:"Globals"`
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Environment environment `yaml:"Environment"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]map[string]bool{}
	for id, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		out[id] = map[string]bool{}
		for k := range doc.Globals.Function.Environment.Variables {
			out[id][k] = true
		}
		for k := range r.Properties.Environment.Variables {
			out[id][k] = true
		}
	}
	return out
}
