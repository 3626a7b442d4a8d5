package emulator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Start launches moto_server itself when no factory answers: the factory is
// a speed-up, never a dependency, so one that is gone (its socket named, no
// process behind it) falls back to the launch, as no factory at all does.
// One launch serves both cases' checks (each costs seconds of CPU).
func TestStartServesTheAWSAPIAndCloseStopsIt(t *testing.T) {
	t.Setenv(EndpointEnv, "") // this test is about the moto_server we launch ourselves
	t.Setenv(FactoryEnv, filepath.Join(t.TempDir(), "gone.sock"))
	ctx := context.Background()
	srv, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if srv.cmd == nil {
		t.Fatal("Start did not launch moto_server when the factory was gone")
	}
	cfg, err := srv.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != Region {
		t.Errorf("region: got %q, want %q", cfg.Region, Region)
	}
	client := sqs.NewFromConfig(cfg)
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("start-test")})
	if err != nil {
		t.Fatalf("CreateQueue through %s: %v", srv.Endpoint, err)
	}
	if aws.ToString(out.QueueUrl) == "" {
		t.Fatal("CreateQueue returned no URL")
	}
	if ids := imageIDs(t, srv); len(ids) != 3 || ids[0] != "ami-03cf127a" {
		t.Errorf("images: got %d %v, want moto_amis.json's 3, ami-03cf127a first", len(ids), ids)
	}

	closedAndStopped(t, srv, client)
	srv.Close() // idempotent
}

// TestLaunchSaysWhyNoPortCame: a server that exits before reporting its port is said to have
// exited, with its exit status; one whose stdout holds no port line it can read (a line longer
// than the reader takes) is not said to have exited, as it may still run. Neither waits for
// the start timeout.
func TestLaunchSaysWhyNoPortCame(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, script, want, not string
	}{
		{name: "exits", script: "echo starting; exit 3", want: "exited (exit status 3) before reporting its port"},
		{name: "a line too long", script: "head -c 100000 /dev/zero | tr '\\0' x; echo; sleep 30", want: "wrote no port line on stdout: bufio.Scanner: token too long", not: "exited"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin := filepath.Join(t.TempDir(), "server")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := launch(ctx, []string{bin}, os.Environ())
			if err == nil {
				s.Close()
				t.Fatalf("launch: got a server at %s, want an error", s.Endpoint)
			}
			if !strings.Contains(err.Error(), tt.want) || (tt.not != "" && strings.Contains(err.Error(), tt.not)) {
				t.Errorf("launch: got %q, want it to say %q", err, tt.want)
			}
			if ctx.Err() != nil {
				t.Errorf("launch waited for its deadline: %v", err)
			}
		})
	}
}

// closedAndStopped closes srv and checks that its server has exited and no longer answers.
func closedAndStopped(t *testing.T, srv *Server, client *sqs.Client) {
	t.Helper()
	srv.Close()
	select {
	case <-srv.exited:
	default:
		t.Fatalf("the server at %s still running after Close", srv.Endpoint)
	}
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err == nil {
		t.Fatalf("ListQueues after Close succeeded; the emulator at %s is still answering", srv.Endpoint)
	}
}

func TestStartAdoptsExternalEndpointAndNeverStopsIt(t *testing.T) {
	inner := ForTest(t)
	t.Setenv(EndpointEnv, inner.Endpoint)
	srv, err := Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if srv.Endpoint != inner.Endpoint {
		t.Fatalf("endpoint: got %q, want %q", srv.Endpoint, inner.Endpoint)
	}
	srv.Close()
	client := sqs.NewFromConfig(inner.ConfigForTest(t))
	if _, err := client.ListQueues(context.Background(), &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("external emulator stopped by Close of an adopted endpoint: %v", err)
	}
}

func TestStartWithoutMotoExplainsHowToGetOne(t *testing.T) {
	t.Setenv(EndpointEnv, "")
	t.Setenv(FactoryEnv, "")
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background())
	if err == nil {
		t.Fatal("Start without moto_server on PATH: got nil error")
	}
	for _, want := range []string{"pip install 'moto[server]'", "AWS_ENDPOINT_URL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// A child process configured only through Env (as the functions' bootstraps are) must reach the
// emulator through the SDK's default configuration chain.
func TestEnvPointsTheDefaultSDKConfigAtTheEmulator(t *testing.T) {
	srv := ForTest(t)
	ctx := context.Background()
	name := StackName(t.Name())
	if _, err := sqs.NewFromConfig(srv.ConfigForTest(t)).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	for k, v := range srv.Env() {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqs.NewFromConfig(cfg).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err != nil {
		t.Fatalf("GetQueueUrl through the default config: %v", err)
	}
}

// Config reads nothing of the host's AWS environment: a region, a service's endpoint or FIPS
// asked for in the shell that runs the tests (a developer's own, aimed at real AWS) changes no
// test's client. And the package that hands configurations to every integration test links
// the SDK's default chain into none of them.
func TestConfigIsTheEmulatorsAlone(t *testing.T) {
	srv := ForTest(t)
	ctx := context.Background()
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:1")
	t.Setenv("AWS_USE_FIPS_ENDPOINT", "true")
	t.Setenv("AWS_PROFILE", "production")
	cfg := srv.ConfigForTest(t)
	if cfg.Region != Region {
		t.Errorf("region %q, want %q", cfg.Region, Region)
	}
	if _, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Fatalf("ListQueues with the host's AWS variables set: %v", err)
	}

	out, err := exec.Command("go", "list", "-deps", "github.com/ghclaim/ghclaim/infra/emulator").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "github.com/aws/aws-sdk-go-v2/config" || strings.HasPrefix(pkg, "github.com/aws/aws-sdk-go-v2/service/sso") {
			t.Errorf("infra/emulator imports %s: every test binary that uses it links the SDK's default chain", pkg)
		}
	}
}

// imageIDs lists the images srv's EC2 serves, with a plain Query API request: the EC2 SDK
// would be the largest package this test binary links, for one call (moto does not check
// signatures).
func imageIDs(t *testing.T, srv *Server) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.Endpoint+"/", strings.NewReader(url.Values{"Action": {"DescribeImages"}, "Version": {"2016-11-15"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/"+Region+"/ec2/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := (&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DescribeImages: %d %v: %.300s", resp.StatusCode, err, body)
	}
	var ids []string
	for _, m := range regexp.MustCompile(`<imageId>([^<]+)</imageId>`).FindAllSubmatch(body, -1) {
		ids = append(ids, string(m[1]))
	}
	return ids
}

// Under RunTests (this binary's TestMain), sequential tests share one moto_server: the first
// test's Cleanup does not stop it.
func TestRunTestsKeepsOneServerForSequentialTests(t *testing.T) {
	var first *Server
	for i := range 2 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			srv := ForTest(t)
			if first == nil {
				first = srv
			} else if srv != first {
				t.Fatalf("second sequential test got a new server %s, want %s kept", srv.Endpoint, first.Endpoint)
			}
		})
	}
}

// TestOwnForTestIsApart: a test's own emulator holds none of the shared
// server's state (a queue made on the shared one is not there), so an
// account-wide listing, as the janitor's, sees only the test's own
// resources; with an external endpoint every test shares that one.
func TestOwnForTestIsApart(t *testing.T) {
	ctx := context.Background()
	shared, own := ForTest(t), OwnForTest(t)
	name := StackName(t.Name())
	if _, err := sqs.NewFromConfig(shared.ConfigForTest(t)).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	_, err := sqs.NewFromConfig(own.ConfigForTest(t)).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if external := os.Getenv(EndpointEnv) != ""; external != (err == nil) {
		t.Errorf("external endpoint %v: the shared server's queue seen on the test's own: %v (err %v)", external, err == nil, err)
	}
}
