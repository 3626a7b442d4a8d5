package ssmapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/failure"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// answer is one canned HTTP answer of the fake SSM endpoint.
type answer struct {
	status int
	header http.Header
	body   string
}

// endpoint is an aws.HTTPClient that records each request and answers
// from a script (the last answer repeats).
type endpoint struct {
	mu     sync.Mutex
	script []answer
	reqs   []*http.Request
	bodies []map[string]any
	delays []time.Duration
}

func (e *endpoint) Do(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		body = map[string]any{"unreadable": string(b)}
	}
	e.reqs, e.bodies = append(e.reqs, r), append(e.bodies, body)
	a := e.script[min(len(e.reqs), len(e.script))-1]
	h := http.Header{"Content-Type": {"application/x-amz-json-1.1"}, "X-Amzn-Requestid": {"9e9d6e0e-ssm-request-id"}}
	for k, v := range a.header {
		h[k] = v
	}
	return &http.Response{
		StatusCode: a.status, Status: http.StatusText(a.status), Header: h,
		Body: io.NopCloser(strings.NewReader(a.body)), Request: r,
	}, nil
}

var signedAt = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

// setup returns a client of region whose requests go to a scripted
// endpoint, signed at signedAt, with every retry delay recorded instead of
// slept.
func setup(t *testing.T, script ...answer) (*ssmapi.Client, *endpoint) {
	t.Helper()
	e := &endpoint{script: script}
	cfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", "session-token-example"),
		HTTPClient:  e,
	}
	c := ssmapi.New(cfg, func(o *ssmapi.Options) {
		o.Now = func() time.Time { return signedAt }
		o.Sleep = func(_ context.Context, d time.Duration) error { e.delays = append(e.delays, d); return nil }
	})
	return c, e
}

// checkRequest checks that r is a signed awsJson 1.1 call of op with body.
func checkRequest(t *testing.T, e *endpoint, op string, want map[string]any) {
	t.Helper()
	if len(e.reqs) != 1 {
		t.Fatalf("requests: got %d, want 1", len(e.reqs))
	}
	r := e.reqs[0]
	if got := r.Header.Get("X-Amz-Target"); got != "AmazonSSM."+op {
		t.Errorf("X-Amz-Target: got %q, want AmazonSSM.%s", got, op)
	}
	if got := r.Header.Get("Content-Type"); got != "application/x-amz-json-1.1" {
		t.Errorf("Content-Type: got %q, want application/x-amz-json-1.1", got)
	}
	if got := r.URL.String(); got != "https://ssm.eu-west-1.amazonaws.com/" || r.Method != http.MethodPost {
		t.Errorf("request: %s %s, want POST https://ssm.eu-west-1.amazonaws.com/", r.Method, got)
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261205/eu-west-1/ssm/aws4_request") ||
		!strings.Contains(auth, "x-amz-target") {
		t.Errorf("Authorization: got %q, want SigV4 for ssm in eu-west-1 signing X-Amz-Target", auth)
	}
	if got := r.Header.Get("X-Amz-Security-Token"); got != "session-token-example" {
		t.Errorf("X-Amz-Security-Token: got %q", got)
	}
	if !reflect.DeepEqual(e.bodies[0], want) {
		t.Errorf("body:\n got %v\nwant %v", e.bodies[0], want)
	}
}

func TestGetParameter(t *testing.T) {
	t.Parallel()
	// GetParameter's example answer in the SSM API reference.
	c, e := setup(t, answer{200, nil, `{"Parameter":{"ARN":"arn:aws:ssm:eu-west-1:111122223333:parameter/ghclaim/pools","DataType":"text","LastModifiedDate":1.582657288787E9,"Name":"/ghclaim/pools","Type":"SecureString","Value":"[{\"name\":\"linux\"}]","Version":3}}`})
	out, err := c.GetParameter(context.Background(), &ssmapi.GetParameterInput{Name: "/ghclaim/pools", WithDecryption: true})
	if err != nil {
		t.Fatal(err)
	}
	checkRequest(t, e, "GetParameter", map[string]any{"Name": "/ghclaim/pools", "WithDecryption": true})
	want := &ssmapi.Parameter{
		Name: "/ghclaim/pools", Type: ssmapi.TypeSecureString, Value: `[{"name":"linux"}]`, Version: 3,
		LastModifiedDate: ssmapi.Timestamp{Time: time.UnixMilli(1582657288787).UTC()},
		ARN:              "arn:aws:ssm:eu-west-1:111122223333:parameter/ghclaim/pools", DataType: "text",
	}
	if !reflect.DeepEqual(out.Parameter, want) {
		t.Errorf("got %+v, want %+v", out.Parameter, want)
	}
}

func TestPutAndDeleteParameter(t *testing.T) {
	t.Parallel()
	c, e := setup(t, answer{200, nil, `{"Tier":"Standard","Version":1}`})
	out, err := c.PutParameter(context.Background(), &ssmapi.PutParameterInput{
		Name: "/ghclaim/runners/r-1", Value: "jit", Type: ssmapi.TypeSecureString, Tier: ssmapi.TierIntelligentTiering,
		Description: "job 1", Tags: []ssmapi.Tag{{Key: "ghclaim:instance-arn", Value: "arn:aws:ec2:eu-west-1:1:instance/i-0a"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRequest(t, e, "PutParameter", map[string]any{
		"Name": "/ghclaim/runners/r-1", "Value": "jit", "Type": "SecureString", "Tier": "Intelligent-Tiering",
		"Description": "job 1", "Tags": []any{map[string]any{"Key": "ghclaim:instance-arn", "Value": "arn:aws:ec2:eu-west-1:1:instance/i-0a"}},
	})
	if out.Version != 1 || out.Tier != ssmapi.TierStandard {
		t.Errorf("got %+v, want version 1 in the Standard tier", out)
	}

	c, e = setup(t, answer{200, nil, `{}`})
	if _, err := c.DeleteParameter(context.Background(), &ssmapi.DeleteParameterInput{Name: "/ghclaim/runners/r-1"}); err != nil {
		t.Fatal(err)
	}
	checkRequest(t, e, "DeleteParameter", map[string]any{"Name": "/ghclaim/runners/r-1"})
}

func TestDescribeParametersAndTags(t *testing.T) {
	t.Parallel()
	c, e := setup(t, answer{200, nil, `{"NextToken":"AAEAAQ-token","Parameters":[{"ARN":"arn:aws:ssm:eu-west-1:1:parameter/ghclaim/runners/r-1","DataType":"text","KeyId":"alias/aws/ssm","LastModifiedDate":1.7649e9,"LastModifiedUser":"arn:aws:sts::1:assumed-role/claimer/x","Name":"/ghclaim/runners/r-1","Policies":[],"Tier":"Standard","Type":"SecureString","Version":2}]}`})
	out, err := c.DescribeParameters(context.Background(), &ssmapi.DescribeParametersInput{
		ParameterFilters: []ssmapi.ParameterStringFilter{{Key: "Path", Option: "OneLevel", Values: []string{"/ghclaim/runners"}}},
		MaxResults:       50, NextToken: "AAEAAQ-before",
	})
	if err != nil {
		t.Fatal(err)
	}
	checkRequest(t, e, "DescribeParameters", map[string]any{
		"ParameterFilters": []any{map[string]any{"Key": "Path", "Option": "OneLevel", "Values": []any{"/ghclaim/runners"}}},
		"MaxResults":       float64(50), "NextToken": "AAEAAQ-before",
	})
	want := []ssmapi.ParameterMetadata{{
		Name: "/ghclaim/runners/r-1", ARN: "arn:aws:ssm:eu-west-1:1:parameter/ghclaim/runners/r-1", Type: "SecureString",
		LastModifiedDate: ssmapi.Timestamp{Time: time.Unix(1764900000, 0).UTC()}, Version: 2, Tier: "Standard", DataType: "text",
	}}
	if !reflect.DeepEqual(out.Parameters, want) || out.NextToken != "AAEAAQ-token" {
		t.Errorf("got %+v (next %q), want %+v", out.Parameters, out.NextToken, want)
	}

	c, e = setup(t, answer{200, nil, `{"TagList":[{"Key":"ghclaim:stack","Value":"prod"}]}`})
	tags, err := c.ListTagsForResource(context.Background(), &ssmapi.ListTagsForResourceInput{ResourceType: ssmapi.ResourceTypeParameter, ResourceID: "/ghclaim/runners/r-1"})
	if err != nil {
		t.Fatal(err)
	}
	checkRequest(t, e, "ListTagsForResource", map[string]any{"ResourceType": "Parameter", "ResourceId": "/ghclaim/runners/r-1"})
	if want := []ssmapi.Tag{{Key: "ghclaim:stack", Value: "prod"}}; !reflect.DeepEqual(tags.TagList, want) {
		t.Errorf("tags: got %+v, want %+v", tags.TagList, want)
	}
}

// TestErrorsAreReadAsTheSDKReadsThem checks SSM's awsJson error answers
// (the chain and the retries around them are shared/awsrpc's, tested
// there): the code from X-Amzn-ErrorType, else __type, else code, without
// namespace or URI; the message in either case; an empty body is
// UnknownError, and a body that is not JSON no API error at all, header or
// not (what the SDK's SSM client, v1.83.0, answered to the same bodies).
func TestErrorsAreReadAsTheSDKReadsThem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		answer      answer
		wantCode    string
		wantMessage string
		wantClass   failure.Class
	}{
		// shared/failure classes the codes it does not know as it classes
		// the SDK's typed errors of the same code: unknown, retried on the
		// ladder (the callers act on the codes they expect).
		{name: "__type with its namespace",
			answer:   answer{400, nil, `{"__type":"com.amazonaws.ssm#ParameterNotFound","message":"Parameter /x not found."}`},
			wantCode: ssmapi.CodeParameterNotFound, wantMessage: "Parameter /x not found.", wantClass: failure.UnknownRetryable},
		{name: "the header's code wins, its URI stripped; Message capitalised",
			answer:   answer{400, http.Header{"X-Amzn-Errortype": {"ParameterAlreadyExists:http://internal.amazon.com/coral/com.amazonaws.ssm/"}}, `{"__type":"Other","Message":"The parameter already exists."}`},
			wantCode: ssmapi.CodeParameterAlreadyExists, wantMessage: "The parameter already exists.", wantClass: failure.UnknownRetryable},
		{name: "a code member",
			answer:   answer{400, nil, `{"code":"InvalidResourceId","message":"not a parameter"}`},
			wantCode: ssmapi.CodeInvalidResourceID, wantMessage: "not a parameter", wantClass: failure.UnknownRetryable},
		{name: "SSM's throttle",
			answer:   answer{400, nil, `{"__type":"ThrottlingException","message":"Rate exceeded"}`},
			wantCode: "ThrottlingException", wantMessage: "Rate exceeded", wantClass: failure.RateLimit},
		{name: "a refusal",
			answer:   answer{400, nil, `{"__type":"ValidationException","message":"1 validation error detected"}`},
			wantCode: "ValidationException", wantMessage: "1 validation error detected", wantClass: failure.NonRetryable},
		{name: "an empty body",
			answer:   answer{500, nil, ``},
			wantCode: "UnknownError", wantMessage: "UnknownError", wantClass: failure.ServerSide},
		{name: "a proxy's page, 5xx: no API error, retried",
			answer:    answer{502, nil, `<html>Bad Gateway</html>`},
			wantClass: failure.ServerSide},
		{name: "a proxy's page, 4xx, with the header: still no API error",
			answer:    answer{403, http.Header{"X-Amzn-Errortype": {"AccessDeniedException"}}, `<html>Forbidden</html>`},
			wantClass: failure.NonRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := setup(t, tt.answer)
			_, err := c.DeleteParameter(context.Background(), &ssmapi.DeleteParameterInput{Name: "/x"})
			var api smithy.APIError
			var op *smithy.OperationError
			var de *smithy.DeserializationError
			var status interface{ HTTPStatusCode() int }
			if !errors.As(err, &status) || status.HTTPStatusCode() != tt.answer.status {
				t.Errorf("got %v, want the answer's status %d in it", err, tt.answer.status)
			}
			if tt.wantCode == "" {
				if errors.As(err, &api) || !errors.As(err, &de) {
					t.Errorf("got %v, want no API error: the body could not be read", err)
				}
				if got := failure.Classify(err).Class; got != tt.wantClass {
					t.Errorf("class: got %s, want %s (%v)", got, tt.wantClass, err)
				}
				return
			}
			switch {
			case !errors.As(err, &api) || api.ErrorCode() != tt.wantCode || api.ErrorMessage() != tt.wantMessage:
				t.Errorf("got %v, want an API error %s: %s", err, tt.wantCode, tt.wantMessage)
			case !ssmapi.IsCode(err, tt.wantCode) || ssmapi.IsCode(err, "Other") || ssmapi.IsCode(nil, tt.wantCode):
				t.Errorf("IsCode(%v, %s): want true, and false for another code or no error", err, tt.wantCode)
			case !errors.As(err, &op) || op.Service() != "SSM" || op.Operation() != "DeleteParameter":
				t.Errorf("got %v, want an operation error of SSM DeleteParameter", err)
			}
			if got := failure.Classify(err).Class; got != tt.wantClass {
				t.Errorf("class: got %s, want %s (%v)", got, tt.wantClass, err)
			}
		})
	}
}

// An error's text names the parameter as SSM's message does, and never
// the value sent.
func TestErrorsCarryNoValue(t *testing.T) {
	t.Parallel()
	c, _ := setup(t, answer{400, nil, `{"__type":"ValidationException","message":"1 validation error detected"}`})
	_, err := c.PutParameter(context.Background(), &ssmapi.PutParameterInput{Name: "/ghclaim/runners/r-1", Value: "eyJzZWNyZXQiOiJqaXQtY29uZmlnIn0="})
	if err == nil || strings.Contains(err.Error(), "eyJzZWNyZXQiOiJqaXQtY29uZmlnIn0=") {
		t.Errorf("got %v, want an error without the value", err)
	}
}

// unsetEnv removes the SDK's endpoint variables from the process for t:
// the endpoint rules look them up there, as the SDK's clients do.
func unsetEnv(t *testing.T, names ...string) {
	for _, n := range names {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndpointRules checks the endpoint against the SDK's SSM client's own
// test vectors (service/ssm endpoints_test.go), with the settings read
// from the environment by shared/awsenv, as the functions read them.
func TestEndpointRules(t *testing.T) {
	unsetEnv(t, "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SSM")
	tests := []struct {
		region, fips, dual, base, ssm string
		want, wantErr                 string
	}{
		{region: "us-east-1", want: "https://ssm.us-east-1.amazonaws.com"},
		{region: "us-east-1", fips: "true", want: "https://ssm-fips.us-east-1.amazonaws.com"},
		{region: "us-east-1", fips: "true", dual: "true", want: "https://ssm-fips.us-east-1.api.aws"},
		{region: "us-east-1", dual: "true", want: "https://ssm.us-east-1.api.aws"},
		{region: "cn-northwest-1", want: "https://ssm.cn-northwest-1.amazonaws.com.cn"},
		{region: "cn-north-1", fips: "true", dual: "true", want: "https://ssm-fips.cn-north-1.api.amazonwebservices.com.cn"},
		{region: "cn-north-1", dual: "true", want: "https://ssm.cn-north-1.api.amazonwebservices.com.cn"},
		{region: "us-gov-west-1", fips: "true", want: "https://ssm.us-gov-west-1.amazonaws.com"},
		{region: "us-gov-east-1", fips: "true", dual: "true", want: "https://ssm-fips.us-gov-east-1.api.aws"},
		{region: "us-iso-east-1", fips: "true", want: "https://ssm-fips.us-iso-east-1.c2s.ic.gov"},
		{region: "us-isob-east-1", want: "https://ssm.us-isob-east-1.sc2s.sgov.gov"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566", want: "http://127.0.0.1:4566"},
		{region: "eu-west-1", base: "http://127.0.0.1:4566", ssm: "http://127.0.0.1:5002", want: "http://127.0.0.1:5002"},
		{region: "eu-west-1", ssm: "http://127.0.0.1:5002", dual: "true", wantErr: "dual-stack"},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s fips=%s dual=%s base=%s ssm=%s", tt.region, tt.fips, tt.dual, tt.base, tt.ssm)
		env := map[string]string{
			"AWS_REGION": tt.region, "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET",
			"AWS_USE_FIPS_ENDPOINT": tt.fips, "AWS_USE_DUALSTACK_ENDPOINT": tt.dual,
			"AWS_ENDPOINT_URL": tt.base, "AWS_ENDPOINT_URL_SSM": tt.ssm,
		}
		cfg, err := awsenv.Load(func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := ssmapi.Service.Endpoint(cfg)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "SSM") {
				t.Errorf("%s: got %q, %v; want an error of SSM naming %s", name, got, err, tt.wantErr)
			}
			continue
		case err != nil || got != tt.want:
			t.Errorf("%s: got %q, %v; want %s", name, got, err, tt.want)
		}
		e := &endpoint{script: []answer{{200, nil, `{}`}}}
		cfg.HTTPClient = e
		if _, err := ssmapi.New(cfg).DeleteParameter(context.Background(), &ssmapi.DeleteParameterInput{Name: "/x"}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if u := e.reqs[0].URL.String(); u != tt.want+"/" {
			t.Errorf("%s: request to %s, want %s/", name, u, tt.want)
		}
	}
}
