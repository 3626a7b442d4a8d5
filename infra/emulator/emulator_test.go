package emulator

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestStartServesTheAWSAPIAndCloseStopsIt(t *testing.T) {
	t.Setenv(EndpointEnv, "") // this test is about the moto_server we launch ourselves
	ctx := context.Background()
	srv, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
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

	srv.Close()
	select {
	case <-srv.exited:
	default:
		t.Fatal("moto_server still running after Close")
	}
	if _, err := client.ListQueues(ctx, &sqs.ListQueuesInput{}); err == nil {
		t.Fatalf("ListQueues after Close succeeded; the emulator at %s is still answering", srv.Endpoint)
	}
	srv.Close() // idempotent
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
