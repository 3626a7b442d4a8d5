package ec2api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// answer is one canned HTTP answer of the fake EC2 endpoint.
type answer struct {
	status int
	body   string
}

// endpoint is an aws.HTTPClient that records each request and answers
// from a script (the last answer repeats).
type endpoint struct {
	mu      sync.Mutex
	script  []answer
	reqs    []*http.Request
	bodies  []url.Values
	delays  []time.Duration
	sendErr error
}

func (e *endpoint) Do(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(b))
	e.reqs, e.bodies = append(e.reqs, r), append(e.bodies, form)
	if e.sendErr != nil {
		return nil, e.sendErr
	}
	a := e.script[min(len(e.reqs), len(e.script))-1]
	return &http.Response{
		StatusCode: a.status, Status: http.StatusText(a.status),
		Header: http.Header{"Content-Type": {"text/xml;charset=UTF-8"}, "X-Amzn-Requestid": {"hdr-request-id"}},
		Body:   io.NopCloser(strings.NewReader(a.body)), Request: r,
	}, nil
}

var signedAt = time.Date(2026, 12, 1, 19, 30, 0, 0, time.UTC)

// setup returns a client of region whose requests go to a scripted
// endpoint, signed at signedAt, with every retry delay recorded instead of
// slept.
func setup(t *testing.T, region string, script ...answer) (*ec2api.Client, *endpoint) {
	t.Helper()
	e := &endpoint{script: script}
	cfg := aws.Config{
		Region:      region,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", "session-token-example"),
		HTTPClient:  e,
	}
	c := ec2api.New(cfg, func(o *ec2api.Options) {
		o.Now = func() time.Time { return signedAt }
		o.Sleep = func(_ context.Context, d time.Duration) error { e.delays = append(e.delays, d); return nil }
	})
	return c, e
}

const createFleetAnswer = `<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>5a9dc04d-7d1e-4b9d-8b0f-example</requestId>
    <fleetId>fleet-12a34b55-67cd-8ef9-ba9b-9208dexample</fleetId>
    <errorSet>
        <item>
            <launchTemplateAndOverrides>
                <launchTemplateSpecification><launchTemplateName>runners</launchTemplateName><version>$Default</version></launchTemplateSpecification>
                <overrides><instanceType>c5.large</instanceType><subnetId>subnet-0a</subnetId><priority>0.0</priority></overrides>
            </launchTemplateAndOverrides>
            <lifecycle>on-demand</lifecycle>
            <errorCode>InsufficientInstanceCapacity</errorCode>
            <errorMessage>We currently do not have sufficient c5.large capacity in the Availability Zone you requested.</errorMessage>
        </item>
    </errorSet>
    <fleetInstanceSet>
        <item>
            <launchTemplateAndOverrides>
                <launchTemplateSpecification><launchTemplateName>runners</launchTemplateName><version>$Default</version></launchTemplateSpecification>
                <overrides><instanceType>m5.large</instanceType><subnetId>subnet-0b</subnetId><priority>1.0</priority></overrides>
            </launchTemplateAndOverrides>
            <lifecycle>on-demand</lifecycle>
            <instanceIds><item>i-1234567890abcdef0</item></instanceIds>
            <instanceType>m5.large</instanceType>
        </item>
    </fleetInstanceSet>
</CreateFleetResponse>`

func TestCreateFleetRequestAndAnswer(t *testing.T) {
	t.Parallel()
	c, e := setup(t, "eu-west-1", answer{200, createFleetAnswer})
	zero, one := 0.0, 1.0
	out, err := c.CreateFleet(context.Background(), &ec2api.CreateFleetInput{
		ClientToken: "ghclaim-linux-42-abc",
		Type:        ec2api.FleetTypeInstant,
		TargetCapacitySpecification: ec2api.TargetCapacitySpecification{
			TotalTargetCapacity: 1, DefaultTargetCapacityType: ec2api.CapacitySpot,
		},
		LaunchTemplateConfigs: []ec2api.FleetLaunchTemplateConfig{{
			LaunchTemplateSpecification: ec2api.LaunchTemplateSpecification{LaunchTemplateName: "runners", Version: "$Default"},
			Overrides: []ec2api.FleetOverride{
				{InstanceType: "c5.large", SubnetID: "subnet-0a", Priority: &zero},
				{InstanceType: "m5.large", SubnetID: "subnet-0b", Priority: &one},
			},
		}},
		TagSpecifications: []ec2api.TagSpecification{{ResourceType: ec2api.ResourceTypeInstance, Tags: []ec2api.Tag{
			{Key: "Name", Value: "linux-42"}, {Key: "ghclaim:repo", Value: "octo/hello world"},
		}}},
		SpotOptions: &ec2api.SpotOptions{AllocationStrategy: ec2api.SpotPriceCapacityOptimized, InstanceInterruptionBehavior: ec2api.SpotInterruptTerminate},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{
		"Action": {"CreateFleet"}, "Version": {"2016-11-15"},
		"ClientToken": {"ghclaim-linux-42-abc"}, "Type": {"instant"},
		"TargetCapacitySpecification.TotalTargetCapacity":                        {"1"},
		"TargetCapacitySpecification.DefaultTargetCapacityType":                  {"spot"},
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName": {"runners"},
		"LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version":            {"$Default"},
		"LaunchTemplateConfigs.1.Overrides.1.InstanceType":                       {"c5.large"},
		"LaunchTemplateConfigs.1.Overrides.1.SubnetId":                           {"subnet-0a"},
		"LaunchTemplateConfigs.1.Overrides.1.Priority":                           {"0"},
		"LaunchTemplateConfigs.1.Overrides.2.InstanceType":                       {"m5.large"},
		"LaunchTemplateConfigs.1.Overrides.2.SubnetId":                           {"subnet-0b"},
		"LaunchTemplateConfigs.1.Overrides.2.Priority":                           {"1"},
		"TagSpecification.1.ResourceType":                                        {"instance"},
		"TagSpecification.1.Tag.1.Key":                                           {"Name"},
		"TagSpecification.1.Tag.1.Value":                                         {"linux-42"},
		"TagSpecification.1.Tag.2.Key":                                           {"ghclaim:repo"},
		"TagSpecification.1.Tag.2.Value":                                         {"octo/hello world"},
		"SpotOptions.AllocationStrategy":                                         {"price-capacity-optimized"},
		"SpotOptions.InstanceInterruptionBehavior":                               {"terminate"},
	}
	if !reflect.DeepEqual(e.bodies[0], want) {
		t.Errorf("form:\n got %v\nwant %v", e.bodies[0], want)
	}
	r := e.reqs[0]
	if r.Method != http.MethodPost || r.URL.String() != "https://ec2.eu-west-1.amazonaws.com/" {
		t.Errorf("request line: got %s %s, want POST https://ec2.eu-west-1.amazonaws.com/", r.Method, r.URL)
	}
	if got := r.Header.Get("Content-Type"); got != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type: got %q", got)
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-1/ec2/aws4_request, SignedHeaders=") {
		t.Errorf("Authorization: got %q, want SigV4 for ec2 in eu-west-1 on 20261201", auth)
	}
	if got := r.Header.Get("X-Amz-Date"); got != "20261201T193000Z" {
		t.Errorf("X-Amz-Date: got %q, want the injected clock's 20261201T193000Z", got)
	}
	if got := r.Header.Get("X-Amz-Security-Token"); got != "session-token-example" {
		t.Errorf("X-Amz-Security-Token: got %q", got)
	}
	if len(out.Instances) != 1 || !reflect.DeepEqual(out.Instances[0].InstanceIDs, []string{"i-1234567890abcdef0"}) ||
		out.Instances[0].InstanceType != "m5.large" || out.Instances[0].LaunchTemplateAndOverrides.Overrides.SubnetID != "subnet-0b" {
		t.Errorf("instances: got %+v", out.Instances)
	}
	if len(out.Errors) != 1 || out.Errors[0].ErrorCode != "InsufficientInstanceCapacity" ||
		out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "c5.large" ||
		*out.Errors[0].LaunchTemplateAndOverrides.Overrides.Priority != 0 || out.FleetID != "fleet-12a34b55-67cd-8ef9-ba9b-9208dexample" {
		t.Errorf("errors: got %+v (fleet %q)", out.Errors, out.FleetID)
	}
}

const describeInstancesAnswer = `<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>
  <reservationSet>
    <item>
      <reservationId>r-1234567890abcdef0</reservationId>
      <ownerId>123456789012</ownerId>
      <groupSet/>
      <instancesSet>
        <item>
          <instanceId>i-1234567890abcdef0</instanceId>
          <imageId>ami-bff32ccc</imageId>
          <instanceState><code>16</code><name>running</name></instanceState>
          <instanceType>t4g.micro</instanceType>
          <launchTime>2026-12-01T19:20:31.000Z</launchTime>
          <subnetId>subnet-0a</subnetId>
          <tagSet>
            <item><key>ghclaim:job-id</key><value>42</value></item>
            <item><key>ghclaim:runner-name</key><value>linux-42</value></item>
          </tagSet>
        </item>
      </instancesSet>
    </item>
  </reservationSet>
  <nextToken>page-2</nextToken>
</DescribeInstancesResponse>`

func TestDescribeInstancesRequestAndAnswer(t *testing.T) {
	t.Parallel()
	c, e := setup(t, "cn-north-1", answer{200, describeInstancesAnswer})
	out, err := c.DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{
		InstanceIDs: []string{"i-1234567890abcdef0"},
		Filters: []ec2api.Filter{
			{Name: "tag:ghclaim:job-id", Values: []string{"42"}},
			{Name: "instance-state-name", Values: []string{"pending", "running"}},
		},
		NextToken: "page-1", MaxResults: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{
		"Action": {"DescribeInstances"}, "Version": {"2016-11-15"},
		"InstanceId.1":     {"i-1234567890abcdef0"},
		"Filter.1.Name":    {"tag:ghclaim:job-id"},
		"Filter.1.Value.1": {"42"},
		"Filter.2.Name":    {"instance-state-name"},
		"Filter.2.Value.1": {"pending"}, "Filter.2.Value.2": {"running"},
		"NextToken": {"page-1"}, "MaxResults": {"50"},
	}
	if !reflect.DeepEqual(e.bodies[0], want) {
		t.Errorf("form:\n got %v\nwant %v", e.bodies[0], want)
	}
	if got := e.reqs[0].URL.String(); got != "https://ec2.cn-north-1.amazonaws.com.cn/" {
		t.Errorf("endpoint: got %s, want the China partition's", got)
	}
	wantOut := &ec2api.DescribeInstancesOutput{
		Reservations: []ec2api.Reservation{{ReservationID: "r-1234567890abcdef0", OwnerID: "123456789012", Instances: []ec2api.Instance{{
			InstanceID: "i-1234567890abcdef0", ImageID: "ami-bff32ccc", InstanceType: "t4g.micro", SubnetID: "subnet-0a",
			State:      ec2api.InstanceState{Code: 16, Name: ec2api.StateRunning},
			LaunchTime: time.Date(2026, 12, 1, 19, 20, 31, 0, time.UTC),
			Tags:       []ec2api.Tag{{Key: "ghclaim:job-id", Value: "42"}, {Key: "ghclaim:runner-name", Value: "linux-42"}},
		}}}},
		NextToken: "page-2",
	}
	if !reflect.DeepEqual(out, wantOut) {
		t.Errorf("answer:\n got %+v\nwant %+v", out, wantOut)
	}
}

func TestTerminateAndDescribeLaunchTemplates(t *testing.T) {
	t.Parallel()
	c, e := setup(t, "us-east-1",
		answer{200, `<TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><instancesSet><item><instanceId>i-0a</instanceId><currentState><code>32</code><name>shutting-down</name></currentState><previousState><code>16</code><name>running</name></previousState></item></instancesSet></TerminateInstancesResponse>`},
		answer{200, `<DescribeLaunchTemplatesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>y</requestId><launchTemplates><item><launchTemplateId>lt-0a</launchTemplateId><launchTemplateName>runners</launchTemplateName><defaultVersionNumber>1</defaultVersionNumber><latestVersionNumber>3</latestVersionNumber></item></launchTemplates></DescribeLaunchTemplatesResponse>`})
	term, err := c.TerminateInstances(context.Background(), &ec2api.TerminateInstancesInput{InstanceIDs: []string{"i-0a", "i-0b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := term.TerminatingInstances; len(got) != 1 || got[0].InstanceID != "i-0a" || got[0].CurrentState.Name != ec2api.StateShuttingDown || got[0].PreviousState.Code != 16 {
		t.Errorf("terminate answer: got %+v", got)
	}
	lts, err := c.DescribeLaunchTemplates(context.Background(), &ec2api.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"runners"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := lts.LaunchTemplates; len(got) != 1 || got[0].LaunchTemplateID != "lt-0a" || got[0].LaunchTemplateName != "runners" || got[0].LatestVersionNumber != 3 {
		t.Errorf("launch templates: got %+v", got)
	}
	wantForms := []url.Values{
		{"Action": {"TerminateInstances"}, "Version": {"2016-11-15"}, "InstanceId.1": {"i-0a"}, "InstanceId.2": {"i-0b"}},
		{"Action": {"DescribeLaunchTemplates"}, "Version": {"2016-11-15"}, "LaunchTemplateName.1": {"runners"}},
	}
	if !reflect.DeepEqual(e.bodies, wantForms) {
		t.Errorf("forms:\n got %v\nwant %v", e.bodies, wantForms)
	}
}

// ec2Error is EC2's error document.
func ec2Error(code, msg string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>` + code + `</Code><Message>` + msg + `</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>`
}

// TestErrorsAreReadAsTheSDKReadsThem checks EC2's error document (the
// chain and the retries around it are shared/awsrpc's, tested there): an
// empty body is UnknownError, and one that is not XML no API error at all,
// as the SDK's EC2 client reads them (ec2query.GetErrorResponseComponents).
func TestErrorsAreReadAsTheSDKReadsThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		answer    answer
		wantCode  string
		wantMsg   string
		wantClass failure.Class
	}{
		{name: "invalid parameter", answer: answer{400, ec2Error("InvalidParameterValue", "Value (x) for parameter instanceType is invalid.")},
			wantCode: "InvalidParameterValue", wantMsg: "Value (x) for parameter instanceType is invalid.", wantClass: failure.NonRetryable},
		{name: "EC2's throttle", answer: answer{503, ec2Error("RequestLimitExceeded", "Request limit exceeded.")},
			wantCode: "RequestLimitExceeded", wantMsg: "Request limit exceeded.", wantClass: failure.RateLimit},
		{name: "no document", answer: answer{500, ``},
			wantCode: "UnknownError", wantMsg: "UnknownError", wantClass: failure.ServerSide},
		{name: "a proxy's page that is not XML", answer: answer{403, `<html><body>Forbidden`},
			wantClass: failure.NonRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := setup(t, "eu-west-1", tt.answer)
			_, err := c.TerminateInstances(context.Background(), &ec2api.TerminateInstancesInput{InstanceIDs: []string{"i-0a"}})
			var api smithy.APIError
			var op *smithy.OperationError
			var id interface{ ServiceRequestID() string }
			var status interface{ HTTPStatusCode() int }
			switch {
			case !errors.As(err, &status) || status.HTTPStatusCode() != tt.answer.status:
				t.Errorf("got %v, want the answer's status %d in it", err, tt.answer.status)
			case tt.wantCode == "" && errors.As(err, &api):
				t.Errorf("got %v, want no API error: the body is no error document", err)
			case tt.wantCode == "":
			case !errors.As(err, &api) || api.ErrorCode() != tt.wantCode || api.ErrorMessage() != tt.wantMsg:
				t.Errorf("got %v, want an API error %s: %s", err, tt.wantCode, tt.wantMsg)
			case !errors.As(err, &op) || op.Service() != "EC2" || op.Operation() != "TerminateInstances":
				t.Errorf("got %v, want an operation error of EC2 TerminateInstances", err)
			case !errors.As(err, &id) || (tt.answer.body != "" && id.ServiceRequestID() != "ea966190-f9aa-478e-9ede-example"):
				t.Errorf("got %v, want the document's request ID", err)
			}
			if got := failure.Classify(err).Class; got != tt.wantClass {
				t.Errorf("class: got %s, want %s (%v)", got, tt.wantClass, err)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct{ region, base, want string }{
		{region: "us-east-1", want: "https://ec2.us-east-1.amazonaws.com/"},
		{region: "us-gov-west-1", want: "https://ec2.us-gov-west-1.amazonaws.com/"},
		{region: "cn-northwest-1", want: "https://ec2.cn-northwest-1.amazonaws.com.cn/"},
		{region: "us-iso-east-1", want: "https://ec2.us-iso-east-1.c2s.ic.gov/"},
		{region: "eu-west-1", base: "http://127.0.0.1:5000/", want: "http://127.0.0.1:5000/"},
	}
	for _, tt := range tests {
		e := &endpoint{script: []answer{{200, `<DescribeInstancesResponse/>`}}}
		cfg := aws.Config{Region: tt.region, HTTPClient: e, Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
		if tt.base != "" {
			cfg.BaseEndpoint = aws.String(tt.base)
		}
		if _, err := ec2api.New(cfg).DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
		if got := e.reqs[0].URL.String(); got != tt.want {
			t.Errorf("%s (base %q): got %s, want %s", tt.region, tt.base, got, tt.want)
		}
	}
	_, err := ec2api.New(aws.Config{}).DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{})
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION") {
		t.Errorf("without a region: got %v, want an error naming AWS_REGION", err)
	}
}

// An option that leaves Now or Sleep nil gets the defaults, as the other
// constructors' Configs do, instead of a nil func at the first request.
func TestNilOptionsTakeTheDefaults(t *testing.T) {
	t.Parallel()
	e := &endpoint{script: []answer{{503, ec2Error("Unavailable", "try again")}, {200, `<TerminateInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><instancesSet/></TerminateInstancesResponse>`}}}
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", ""),
		HTTPClient:  e,
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
	c := ec2api.New(cfg, func(o *ec2api.Options) { o.Now, o.Sleep = nil, nil })
	before := time.Now().UTC().Add(-time.Minute)
	if _, err := c.TerminateInstances(context.Background(), &ec2api.TerminateInstancesInput{InstanceIDs: []string{"i-0a"}}); err != nil {
		t.Fatal(err)
	}
	if len(e.reqs) != 2 {
		t.Fatalf("requests: got %d, want 2 (one retry after the 503)", len(e.reqs))
	}
	signed, err := time.Parse("20060102T150405Z", e.reqs[0].Header.Get("X-Amz-Date"))
	if err != nil || signed.Before(before) {
		t.Errorf("X-Amz-Date %q: want the wall clock (after %v), err %v", e.reqs[0].Header.Get("X-Amz-Date"), before, err)
	}
}

// unsetEnv removes the SDK's endpoint variables from the process for t:
// the endpoint rules look them up there, as the SDK's clients do.
func unsetEnv(t *testing.T, names ...string) {
	for _, n := range names {
		t.Setenv(n, "") // restores the old value after t
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndpointRules checks the endpoint against the SDK's EC2 client's own
// test vectors (service/ec2 endpoints_test.go), with the settings read
// from the environment by shared/awsenv (the functions) and by the SDK's
// config.EnvConfig (the tools).
func TestEndpointRules(t *testing.T) {
	unsetEnv(t, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2")
	tests := []struct {
		region, fips, dual, base, ec2, ignore string
		want, wantErr                         string
	}{
		{region: "eu-west-1", want: "https://ec2.eu-west-1.amazonaws.com"},
		{region: "eu-west-1", dual: "true", want: "https://ec2.eu-west-1.api.aws"},
		{region: "us-east-1", fips: "true", want: "https://ec2-fips.us-east-1.amazonaws.com"},
		{region: "us-east-1", fips: "TRUE", dual: "true", want: "https://ec2-fips.us-east-1.api.aws"},
		{region: "us-east-1", fips: "false", dual: "false", want: "https://ec2.us-east-1.amazonaws.com"},
		{region: "ca-central-1", fips: "true", want: "https://ec2-fips.ca-central-1.amazonaws.com"},
		{region: "cn-north-1", want: "https://ec2.cn-north-1.amazonaws.com.cn"},
		{region: "cn-north-1", fips: "true", want: "https://ec2-fips.cn-north-1.amazonaws.com.cn"},
		{region: "cn-north-1", dual: "true", want: "https://ec2.cn-north-1.api.amazonwebservices.com.cn"},
		{region: "cn-north-1", fips: "true", dual: "true", want: "https://ec2-fips.cn-north-1.api.amazonwebservices.com.cn"},
		{region: "us-gov-east-1", want: "https://ec2.us-gov-east-1.amazonaws.com"},
		{region: "us-gov-east-1", fips: "true", want: "https://ec2.us-gov-east-1.amazonaws.com"},
		{region: "us-gov-east-1", dual: "true", want: "https://ec2.us-gov-east-1.api.aws"},
		{region: "us-gov-east-1", fips: "true", dual: "true", want: "https://ec2-fips.us-gov-east-1.api.aws"},
		{region: "us-iso-east-1", fips: "true", want: "https://ec2-fips.us-iso-east-1.c2s.ic.gov"},
		{region: "us-isob-east-1", fips: "true", want: "https://ec2-fips.us-isob-east-1.sc2s.sgov.gov"},
		{region: "eusc-de-east-1", want: "https://ec2.eusc-de-east-1.amazonaws.eu"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566/", want: "http://127.0.0.1:4566"},
		{region: "eu-west-1", ec2: "http://127.0.0.1:5001", want: "http://127.0.0.1:5001"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566", ec2: "http://127.0.0.1:5001", want: "http://127.0.0.1:5001"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566", ec2: "http://127.0.0.1:5001", ignore: "true", want: "https://ec2.eu-west-1.amazonaws.com"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566", fips: "true", wantErr: "FIPS"},
		{region: "eu-west-1", ec2: "http://127.0.0.1:5001", dual: "true", wantErr: "dual-stack"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s fips=%s dual=%s base=%s ec2=%s ignore=%s", tt.region, tt.fips, tt.dual, tt.base, tt.ec2, tt.ignore)
		env := map[string]string{
			"AWS_REGION": tt.region, "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET",
			"AWS_USE_FIPS_ENDPOINT": tt.fips, "AWS_USE_DUALSTACK_ENDPOINT": tt.dual,
			"AWS_ENDPOINT_URL": tt.base, "AWS_ENDPOINT_URL_EC2": tt.ec2, "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": tt.ignore,
		}
		cfg, err := awsenv.Load(func(k string) string { return env[k] })
		if err != nil {
			// The functions refuse FIPS or dual-stack with AWS_ENDPOINT_URL
			// at start; the rule's own refusal is checked below.
			if tt.wantErr == "" || tt.base == "" || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		got, err := ec2api.Endpoint(cfg)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: got %q, %v; want an error naming %s", name, got, err, tt.wantErr)
			}
			continue
		case err != nil || got != tt.want:
			t.Errorf("%s: got %q, %v; want %s", name, got, err, tt.want)
		}
		// The same request goes there: a call signs and sends to it.
		e := &endpoint{script: []answer{{200, `<DescribeInstancesResponse/>`}}}
		cfg.HTTPClient = e
		if _, err := ec2api.New(cfg).DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if u := e.reqs[0].URL.String(); u != tt.want+"/" {
			t.Errorf("%s: request to %s, want %s/", name, u, tt.want)
		}
	}

	// The first source that says whether to ignore configured endpoints
	// decides: the environment's false keeps the config file's endpoint.
	cfg := aws.Config{Region: "eu-west-1", ConfigSources: []any{
		config.EnvConfig{IgnoreConfiguredEndpoints: aws.Bool(false)},
		config.SharedConfig{IgnoreConfiguredEndpoints: aws.Bool(true), Services: config.Services{
			ServiceValues: map[string]map[string]string{"ec2": {"endpoint_url": "http://127.0.0.1:5001"}},
		}},
	}}
	if got, err := ec2api.Endpoint(cfg); err != nil || got != "http://127.0.0.1:5001" {
		t.Errorf("ignore=false in the environment, true in the config file: got %q, %v; want the file's endpoint", got, err)
	}

	// The tools' configurations carry the SDK's own EnvConfig.
	cfg = aws.Config{Region: "us-west-2", ConfigSources: []any{config.EnvConfig{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled}}}
	if got, err := ec2api.Endpoint(cfg); err != nil || got != "https://ec2-fips.us-west-2.amazonaws.com" {
		t.Errorf("EnvConfig with FIPS: got %q, %v", got, err)
	}
	// A call with a refused configuration fails with that error, sending nothing.
	e := &endpoint{script: []answer{{200, `<DescribeInstancesResponse/>`}}}
	cfg = aws.Config{Region: "us-west-2", BaseEndpoint: aws.String("http://127.0.0.1:1"), HTTPClient: e,
		Credentials:   credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		ConfigSources: []any{config.EnvConfig{UseFIPSEndpoint: aws.FIPSEndpointStateEnabled}}}
	if _, err := ec2api.New(cfg).DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{}); err == nil || !strings.Contains(err.Error(), "FIPS") || len(e.reqs) != 0 {
		t.Errorf("FIPS with a custom endpoint: got %v after %d requests, want the configuration error and none", err, len(e.reqs))
	}
}
