package awsrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
)

// clockedService is an AWS service with a clock of its own, offset from
// the true time: it refuses a signature dated over window from its clock
// (SigV4's 5 minutes; EC2 says RequestExpired at 15), as AWS does, and
// dates every answer (HTTP's Date, to the second). The client's clock is
// the true time, which a request may take elapse of.
type clockedService struct {
	mu      sync.Mutex
	now     time.Time // the true time, the client's clock
	offset  time.Duration
	window  time.Duration
	code    string // the code of a refusal of the request's time
	refuse  bool   // refuse every signature (a wrong key), whatever its time
	noDate  bool
	age     bool // answer as a cache: with an Age header
	elapse  time.Duration
	signedT []time.Time
}

func (s *clockedService) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *clockedService) Do(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	signed, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return nil, fmt.Errorf("unsigned request: %w", err)
	}
	s.signedT = append(s.signedT, signed)
	theirs := s.now.Add(s.offset)
	s.now = s.now.Add(s.elapse)
	status, body := 200, ""
	switch {
	case s.refuse:
		status, body = 400, "InvalidSignatureException: The request signature we calculated does not match the signature you provided."
	case signed.Before(theirs.Add(-s.window)):
		status, body = 400, fmt.Sprintf("%s: Signature expired: %s is now earlier than %s (%s - 5 min.)", s.code,
			signed.Format("20060102T150405Z"), theirs.Add(-s.window).Format("20060102T150405Z"), theirs.Format("20060102T150405Z"))
	case signed.After(theirs.Add(s.window)):
		status, body = 400, fmt.Sprintf("%s: Signature not yet current: %s is still later than %s (%s + 5 min.)", s.code,
			signed.Format("20060102T150405Z"), theirs.Add(s.window).Format("20060102T150405Z"), theirs.Format("20060102T150405Z"))
	}
	h := http.Header{"X-Amzn-Requestid": {"req-1"}}
	if !s.noDate {
		h.Set("Date", s.now.Add(s.offset).UTC().Format(http.TimeFormat))
	}
	if s.age {
		h.Set("Age", "12")
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// signed is the times the service saw requests signed at since the last
// call, as offsets from t0.
func (s *clockedService) signed(t0 time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d []time.Duration
	for _, at := range s.signedT {
		d = append(d, at.Sub(t0))
	}
	s.signedT = nil
	return d
}

// A client whose clock is off the service's is refused once, signs again
// at the service's time, and signs its later calls there too, as the SDK's
// clients do (the Clock Skew Correction SEP); a refusal with the clocks in
// step, or with no trustworthy Date to measure them by, is not retried.
func TestClockSkewIsMeasuredAndCorrected(t *testing.T) {
	t.Parallel()
	const sigv4 = 5 * time.Minute
	type call struct {
		offset   time.Duration   // the service's clock, from the true time, during the call
		signed   []time.Duration // when its requests were signed, from the true time
		wantCode string          // the error's code; "" for success
	}
	tests := []struct {
		name    string
		svc     *clockedService
		disable bool
		calls   []call
	}{
		{name: "service ahead: refused once, then every call signed at its time",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0, 10 * time.Minute}},
				{offset: 10 * time.Minute, signed: []time.Duration{10 * time.Minute}},
			}},
		{name: "service behind",
			svc: &clockedService{code: "SignatureDoesNotMatch", window: sigv4},
			calls: []call{
				{offset: -7 * time.Minute, signed: []time.Duration{0, -7 * time.Minute}},
				{offset: -7 * time.Minute, signed: []time.Duration{-7 * time.Minute}},
			}},
		{name: "clocks realign: the stale offset is refused once and dropped",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0, 10 * time.Minute}},
				{offset: 0, signed: []time.Duration{10 * time.Minute, 0}},
				{offset: 0, signed: []time.Duration{0}},
			}},
		{name: "a small skew the service accepts is still taken up",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4},
			calls: []call{
				{offset: 2 * time.Minute, signed: []time.Duration{0}},
				{offset: 2 * time.Minute, signed: []time.Duration{2 * time.Minute}},
			}},
		{name: "EC2's RequestExpired, 15 minutes off",
			svc: &clockedService{code: "RequestExpired", window: 15 * time.Minute},
			calls: []call{
				{offset: -20 * time.Minute, signed: []time.Duration{0, -20 * time.Minute}},
			}},
		{name: "clocks in step: a refused signature is the key's, not retried",
			svc: &clockedService{refuse: true},
			calls: []call{
				{offset: time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
			}},
		{name: "skewed and a wrong key: retried once, then refused for good",
			svc: &clockedService{refuse: true},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0, 10 * time.Minute}, wantCode: "InvalidSignatureException"},
			}},
		{name: "no Date: nothing to measure by, not retried",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4, noDate: true},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
				{offset: 10 * time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
			}},
		{name: "a cached answer (Age) measures nothing",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4, age: true},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
			}},
		{name: "an answer after 15 minutes measures nothing",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4, elapse: 16 * time.Minute},
			calls: []call{
				{offset: 10 * time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
			}},
		{name: "turned off (AWS_DISABLE_CLOCK_SKEW_CORRECTION)",
			svc: &clockedService{code: "InvalidSignatureException", window: sigv4}, disable: true,
			calls: []call{
				{offset: 2 * time.Minute, signed: []time.Duration{0}},
				{offset: 10 * time.Minute, signed: []time.Duration{0}, wantCode: "InvalidSignatureException"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
			s := tt.svc
			s.now = t0
			cfg := aws.Config{
				Region:      "eu-west-1",
				Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret-key-example", ""),
				HTTPClient:  s, DisableClockSkewCorrection: tt.disable,
			}
			c := awsrpc.New(plain, cfg, func(o *awsrpc.Options) {
				o.Now = s.clock
				o.Sleep = func(context.Context, time.Duration) error { return nil }
			})
			for i, call := range tt.calls {
				s.mu.Lock()
				s.offset = call.offset
				start := s.now
				s.mu.Unlock()
				err := c.Call(context.Background(), "Do", nil, []byte("x"), nil)
				got := s.signed(start)
				if fmt.Sprint(got) != fmt.Sprint(call.signed) {
					t.Errorf("call %d: requests signed at %v from the true time, want %v", i+1, got, call.signed)
				}
				switch {
				case call.wantCode == "" && err != nil:
					t.Errorf("call %d: %v, want success", i+1, err)
				case call.wantCode != "" && awsrpc.Code(err) != call.wantCode:
					t.Errorf("call %d: got %v, want the service's %s", i+1, err, call.wantCode)
				}
				var skew *awsrpc.ClockSkewError
				if errors.As(err, &skew) {
					t.Errorf("call %d: got %v, want no skew error (the retry was signed at the service's time)", i+1, err)
				}
			}
		})
	}
}
