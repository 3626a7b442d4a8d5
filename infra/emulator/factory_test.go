package emulator

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Each Start under a factory gets a server of its own: fresh (the small image catalogue, no
// queues of another's), stopped by its own Close, and stopped with the factory.
func TestFactoryServersAreFreshIsolatedAndStop(t *testing.T) {
	t.Setenv(EndpointEnv, "")
	ctx := context.Background()
	f, err := StartFactory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Setenv(FactoryEnv, f.Path)

	a, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.cmd != nil || b.cmd != nil || a.lifeline == nil || b.lifeline == nil {
		t.Fatal("Start under a factory launched moto_server itself")
	}
	if a.Endpoint == b.Endpoint {
		t.Fatalf("two Starts share %s", a.Endpoint)
	}
	qa, qb := sqs.NewFromConfig(a.ConfigForTest(t)), sqs.NewFromConfig(b.ConfigForTest(t))
	if _, err := qa.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("only-in-a")}); err != nil {
		t.Fatal(err)
	}
	if out, err := qb.ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil || len(out.QueueUrls) != 0 {
		t.Fatalf("the second server's queues: %v, %v; want none (a fresh server)", out.QueueUrls, err)
	}
	if ids := imageIDs(t, b); len(ids) != 3 || ids[0] != "ami-03cf127a" {
		t.Errorf("images: got %d %v, want moto_amis.json's 3, ami-03cf127a first", len(ids), ids)
	}

	closedAndStopped(t, b, qb)
	if _, err := qa.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("only-in-a")}); err != nil {
		t.Fatalf("closing one server stopped another: %v", err)
	}

	f.Close()
	<-a.exited // the factory's Close stops the servers it forked
	if _, err := qa.ListQueues(ctx, &sqs.ListQueuesInput{}); err == nil {
		t.Fatalf("ListQueues after the factory's Close succeeded; %s is still answering", a.Endpoint)
	}
	a.Close() // after its factory: does not hang
}
