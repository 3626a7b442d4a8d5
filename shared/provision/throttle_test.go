package provision

import (
	"context"
	"errors"
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

// lostThenThrottled is a scripted EC2 endpoint behind the real ec2api.Client: the
// first CreateFleet launches i-0lost but its answer is lost (connection
// reset); the SDK retryer's next two attempts of the same request are
// throttled (RequestLimitExceeded, HTTP 503); later calls of the same
// token get the launch's answer, as EC2 gives it.
type lostThenThrottled struct {
	mu         sync.Mutex
	fleetCalls int
	terminated []string
}

func (a *lostThenThrottled) Do(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	answer := func(status int, body string) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"text/xml"}},
			Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	switch form.Get("Action") {
	case "DescribeInstances":
		if form.Get("InstanceId.1") != "" {
			return answer(200, `<DescribeInstancesResponse><reservationSet><item><ownerId>123456789012</ownerId><instancesSet><item><instanceId>`+form.Get("InstanceId.1")+`</instanceId><instanceState><name>pending</name></instanceState></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`)
		}
		return answer(200, `<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>`)
	case "CreateFleet":
		a.fleetCalls++
		switch a.fleetCalls {
		case 1:
			return nil, errors.New("read tcp 10.0.0.1:443: connection reset by peer") // launched, answer lost
		case 2, 3:
			return answer(503, `<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>x</RequestID></Response>`)
		default:
			return answer(200, `<CreateFleetResponse><fleetId>fleet-1</fleetId><errorSet/><fleetInstanceSet><item><instanceIds><item>i-0lost</item></instanceIds></item></fleetInstanceSet></CreateFleetResponse>`)
		}
	case "TerminateInstances":
		a.terminated = append(a.terminated, form.Get("InstanceId.1"))
		return answer(200, `<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>`)
	}
	return answer(400, `<Response><Errors><Error><Code>InvalidAction</Code><Message>x</Message></Error></Errors></Response>`)
}

// TestThrottleAfterALostLaunchIsSettled: a CreateFleet whose first HTTP
// attempt launched a machine but lost the answer, then was throttled on the
// retryer's later attempts, ends as RequestLimitExceeded; unknownLaunch
// used to take that for "EC2 refused, nothing launched" and never settle
// it: the machine ran without its config.
func TestThrottleAfterALostLaunchIsSettled(t *testing.T) {
	t.Parallel()
	fake := &lostThenThrottled{}
	c := ec2api.New(aws.Config{Region: "eu-west-1", HTTPClient: fake,
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")},
		func(o *ec2api.Options) { o.Sleep = func(context.Context, time.Duration) error { return nil } })
	_, err := NewEC2(c, &fakeParameters{}, nil).Provision(context.Background(), request(ec2Pool(), 42))
	if err == nil {
		t.Fatal("want the launch's error")
	}
	t.Logf("Provision: %v", err)
	if len(fake.terminated) != 1 || fake.terminated[0] != "i-0lost" {
		t.Errorf("CreateFleet calls %d, terminated %v: i-0lost (launched by the first attempt) is left running without a config",
			fake.fleetCalls, fake.terminated)
	}
}
