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
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
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
	throttles  int // CreateFleet calls throttled after the lost one (0: 2)
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
	case "DescribeLaunchTemplateVersions":
		return answer(200, fitVersionXML)
	case "DescribeInstances":
		if form.Get("InstanceId.1") != "" {
			return answer(200, `<DescribeInstancesResponse><reservationSet><item><ownerId>123456789012</ownerId><instancesSet><item><instanceId>`+form.Get("InstanceId.1")+`</instanceId><instanceState><name>pending</name></instanceState></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`)
		}
		return answer(200, `<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>`)
	case "CreateFleet":
		a.fleetCalls++
		throttles := a.throttles
		if throttles == 0 {
			throttles = 2
		}
		switch {
		case a.fleetCalls == 1:
			return nil, errors.New("read tcp 10.0.0.1:443: connection reset by peer") // launched, answer lost
		case a.fleetCalls <= 1+throttles:
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
// it: the machine ran without its config. The same when the client's
// retry quota (one token bucket per client, for the container's life,
// drained by a throttle storm) cuts the retries short: the call then ended
// as the raw throttle, with no sign of the lost first attempt (a review
// found it).
func TestThrottleAfterALostLaunchIsSettled(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		retryer   func() aws.Retryer
		throttles int
	}{
		{name: "retries exhausted"},
		{name: "retry quota spent after one retry", throttles: 1, retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.NewTokenRateLimit(14) })
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &lostThenThrottled{throttles: tt.throttles}
			c := ec2api.New(aws.Config{Region: "eu-west-1", HTTPClient: fake, Retryer: tt.retryer,
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
		})
	}
}
