package provision

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ghclaim/ghclaim/shared/ec2api"
)

// freshTerminateEC2 is an EC2 endpoint (Query API, real XML answers)
// behind the real ec2api.Client, with EC2's eventual consistency right
// after a launch: CreateFleet launches i-0fresh, but for the next
// `unknownFor` calls naming it (DescribeInstances by id, TerminateInstances)
// EC2 answers InvalidInstanceID.NotFound, as its documentation warns.
type freshTerminateEC2 struct {
	mu         sync.Mutex
	unknownFor int
	terminated bool
	terminates int
}

func (a *freshTerminateEC2) Do(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	answer := func(status int, body string) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"text/xml;charset=UTF-8"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	notFound := func(id string) (*http.Response, error) {
		return answer(400, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code><Message>The instance ID '`+id+`' does not exist</Message></Error></Errors><RequestID>5b1f4f63-8f2d-4d2a-9a1e-000000000001</RequestID></Response>`)
	}
	switch form.Get("Action") {
	case "DescribeLaunchTemplateVersions":
		return answer(200, fitVersionXML)
	case "CreateFleet":
		return answer(200, `<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r-1</requestId><fleetId>fleet-7f7b5c2e-0000-4000-8000-000000000001</fleetId><errorSet/><fleetInstanceSet><item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>lt-0abc</launchTemplateId><version>1</version></launchTemplateSpecification><overrides><instanceType>c7g.large</instanceType><subnetId>subnet-a</subnetId></overrides></launchTemplateAndOverrides><lifecycle>on-demand</lifecycle><instanceIds><item>i-0fresh</item></instanceIds><instanceType>c7g.large</instanceType></item></fleetInstanceSet></CreateFleetResponse>`)
	case "DescribeInstances":
		if id := form.Get("InstanceId.1"); id != "" {
			if a.unknownFor > 0 {
				a.unknownFor--
				return notFound(id)
			}
			return answer(200, `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet><item><reservationId>r-0</reservationId><ownerId>123456789012</ownerId><instancesSet><item><instanceId>`+id+`</instanceId><instanceState><code>0</code><name>pending</name></instanceState></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`)
		}
		return answer(200, `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><reservationSet/></DescribeInstancesResponse>`)
	case "TerminateInstances":
		a.terminates++
		id := form.Get("InstanceId.1")
		if a.unknownFor > 0 {
			a.unknownFor--
			return notFound(id)
		}
		a.terminated = true
		return answer(200, `<TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><instancesSet><item><instanceId>`+id+`</instanceId><currentState><code>32</code><name>shutting-down</name></currentState><previousState><code>0</code><name>pending</name></previousState></item></instancesSet></TerminateInstancesResponse>`)
	}
	return answer(400, `<Response><Errors><Error><Code>InvalidAction</Code><Message>x</Message></Error></Errors></Response>`)
}

// TestUndoOfAFreshInstanceSurvivesEventualConsistency: the invocation's
// time runs out while the adapter still waits for EC2 to know the instance
// it has just launched (DescribeInstances: InvalidInstanceID.NotFound).
// undo then terminates it, and EC2, just as unaware of it, answers the
// TerminateInstances with InvalidInstanceID.NotFound too. The adapter
// gives up after that one call: the machine boots without a config, and
// the next attempt (409, runner offline, machine up) takes it for one
// booting with its config and records the job claimed.
func TestUndoOfAFreshInstanceSurvivesEventualConsistency(t *testing.T) {
	t.Parallel()
	fake := &freshTerminateEC2{unknownFor: 2} // the describe, then the first terminate
	c := ec2api.New(aws.Config{Region: "eu-west-1", HTTPClient: fake,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")},
		func(o *ec2api.Options) { o.Sleep = func(context.Context, time.Duration) error { return nil } })
	a := NewEC2(c, &fakeParameters{}, nil)
	// The claim's work context ends during the wait for the fresh instance;
	// a wait under any other context (a fix's own, bounded) returns at once.
	work, end := context.WithCancel(context.Background())
	defer end()
	a.sleep = func(ctx context.Context, _ time.Duration) error {
		end()
		return ctx.Err()
	}
	_, err := a.Provision(work, request(ec2Pool(), 42))
	if err == nil {
		t.Fatal("want the launch's error")
	}
	t.Logf("Provision: %v", err)
	if !fake.terminated {
		t.Errorf("TerminateInstances calls %d, none succeeded: i-0fresh, launched without its config, is left running", fake.terminates)
	}
}
