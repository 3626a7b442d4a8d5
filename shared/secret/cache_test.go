package secret

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ghclaim/ghclaim/shared/webhook"
)

type manualClock struct{ t time.Time }

func (c *manualClock) now() time.Time          { return c.t }
func (c *manualClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func setupCache(t *testing.T, sm *fakeSM) (*Cache, *manualClock) {
	t.Helper()
	clk := &manualClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	return NewCache(sm, "arn:aws:secretsmanager:us-east-1:1:secret:k", "", CacheOptions{TTL: 5 * time.Minute, Retry: 15 * time.Second, Now: clk.now}), clk
}

func notSet(err error) bool {
	var ns interface{ NotSet() bool }
	return errors.As(err, &ns) && ns.NotSet()
}

func TestCacheRereadsAfterTTL(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{value: aws.String("old")}
	c, clk := setupCache(t, sm)
	ctx := context.Background()
	for _, want := range []string{"old", "old"} {
		if got, err := c.Get(ctx); err != nil || got != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	sm.value = aws.String("new") // rotated
	clk.advance(5*time.Minute - time.Nanosecond)
	if got, _ := c.Get(ctx); got != "old" {
		t.Fatalf("inside the TTL: got %q, want the cached old", got)
	}
	clk.advance(time.Nanosecond)
	if got, _ := c.Get(ctx); got != "new" {
		t.Fatalf("after the TTL: got %q, want new", got)
	}
	if len(sm.asked) != 2 {
		t.Errorf("Secrets Manager asked %d times, want 2", len(sm.asked))
	}
}

func TestCacheNotSetYetThenWritten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sm   *fakeSM
	}{
		{name: "secret without a value", sm: &fakeSM{err: &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "no AWSCURRENT", Fault: smithy.FaultClient}}},
		{name: "template placeholder", sm: &fakeSM{value: aws.String(Placeholders[0])}},
		{name: "empty", sm: &fakeSM{value: aws.String(" ")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, clk := setupCache(t, tt.sm)
			ctx := context.Background()
			_, err := c.Get(ctx)
			if !errors.Is(err, ErrNotSet) || !notSet(err) {
				t.Fatalf("got %v, want ErrNotSet recognisable by NotSet()", err)
			}
			tt.sm.value, tt.sm.err = aws.String("-----BEGIN RSA PRIVATE KEY-----"), nil // make app wrote it
			clk.advance(15*time.Second - time.Nanosecond)
			if _, err := c.Get(ctx); !errors.Is(err, ErrNotSet) {
				t.Fatalf("inside Retry: got %v, want the remembered ErrNotSet", err)
			}
			clk.advance(time.Nanosecond)
			if got, err := c.Get(ctx); err != nil || !strings.HasPrefix(got, "-----BEGIN") {
				t.Fatalf("after Retry: got %q, %v; want the written value", got, err)
			}
			if len(tt.sm.asked) != 2 {
				t.Errorf("Secrets Manager asked %d times, want 2", len(tt.sm.asked))
			}
		})
	}
}

func TestCacheKeepsLastGoodValueThroughABlip(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{value: aws.String("good")}
	c, clk := setupCache(t, sm)
	ctx := context.Background()
	if _, err := c.Get(ctx); err != nil {
		t.Fatal(err)
	}
	sm.err = errors.New("ThrottlingException")
	clk.advance(5 * time.Minute)
	if got, err := c.Get(ctx); err != nil || got != "good" {
		t.Fatalf("during a blip: got %q, %v; want the last good value", got, err)
	}
	sm.err, sm.value = nil, nil // then the secret is emptied: not set, at once
	clk.advance(15 * time.Second)
	if got, err := c.Get(ctx); !errors.Is(err, ErrNotSet) || got != "" {
		t.Fatalf("emptied: got %q, %v; want ErrNotSet", got, err)
	}
}

func TestCachePlain(t *testing.T) {
	t.Parallel()
	c := NewCache(nil, "", " new , old ", CacheOptions{})
	got, err := c.Rotation(context.Background())
	// Each value trimmed, then as written (see TestRotationTriesAValueTrimmedAndAsStored).
	if err != nil || fmt.Sprintf("%q", got) != `["new" " new " "old" " old "]` {
		t.Fatalf("got %q, %v; want [new \" new \" old \" old \"]", got, err)
	}
	if _, err := NewCache(nil, "", " ", CacheOptions{}).Get(context.Background()); !errors.Is(err, ErrNotSet) {
		t.Fatalf("got %v, want ErrNotSet", err)
	}
}

func TestCacheErrorNeverCarriesTheValue(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{value: aws.String("v3ry-s3cret")}
	c, clk := setupCache(t, sm)
	_, _ = c.Get(context.Background())
	sm.value = nil
	clk.advance(time.Hour)
	_, err := c.Get(context.Background())
	if err == nil || strings.Contains(err.Error(), "v3ry-s3cret") {
		t.Fatalf("got %v, want an error without the value", err)
	}
}

// TestPlaceholdersAreTheTemplates keeps Placeholders in step with the
// SecretString template.yaml creates the private key secret with.
func TestPlaceholdersAreTheTemplates(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range Placeholders {
		if !strings.Contains(string(b), "SecretString: "+p) {
			t.Errorf("template.yaml has no secret created with %q", p)
		}
	}
}

// TestCacheStopsServingARevokedSecret: a secret the operator deletes
// (scheduled for deletion: Secrets Manager answers InvalidRequestException
// while the recovery window runs), or that the function may no longer
// read or decrypt, is not served again once its TTL is over: a warm
// webhook kept accepting signatures made with a deleted, perhaps leaked,
// secret for as long as it stayed warm (a review proved it on moto). A
// passing failure keeps the last good value, but for one TTL more at most.
func TestCacheStopsServingARevokedSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		err     error
		notSet  bool
		servedF time.Duration // how long past the TTL the old value is still served
	}{
		{name: "scheduled for deletion", err: &smithy.GenericAPIError{Code: "InvalidRequestException", Message: "You can't perform this operation on the secret because it was marked for deletion.", Fault: smithy.FaultClient}, notSet: true},
		{name: "access denied", err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}},
		{name: "key disabled", err: &smithy.GenericAPIError{Code: "DecryptionFailure", Message: "KMS key disabled", Fault: smithy.FaultClient}},
		{name: "throttled for good", err: &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded"}, servedF: 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sm := &fakeSM{value: aws.String("leaked")}
			c, clk := setupCache(t, sm)
			ctx := context.Background()
			if _, err := c.Get(ctx); err != nil {
				t.Fatal(err)
			}
			sm.err = tt.err
			clk.advance(5 * time.Minute) // the TTL is over
			for left := tt.servedF; left > 0; left -= 15 * time.Second {
				if got, err := c.Get(ctx); err != nil || got != "leaked" {
					t.Fatalf("%s before TTL: got %q, %v; want the last good value through a passing failure", left, got, err)
				}
				clk.advance(15 * time.Second)
			}
			got, err := c.Get(ctx)
			if got != "" || err == nil || notSet(err) != tt.notSet {
				t.Fatalf("got %q, %v; want no value (not set: %v)", got, err, tt.notSet)
			}
		})
	}
}

func sdkShape(api error) error {
	return &smithy.OperationError{ServiceID: "Secrets Manager", OperationName: "GetSecretValue",
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}}, Err: api}}}
}

// TestPassingAsTheSDKSurfacesIt: the errors passing decides on, wrapped
// as the SDK returns them.
func TestPassingAsTheSDKSurfacesIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{sdkShape(&smithy.GenericAPIError{Code: "AccessDeniedException"}), false},
		{sdkShape(&smithy.GenericAPIError{Code: "DecryptionFailure", Message: "x", Fault: smithy.FaultClient}), false},
		{sdkShape(&retry.MaxAttemptsError{Attempt: 3, Err: &smithy.GenericAPIError{Code: "ThrottlingException"}}), true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
	} {
		if got := passing(fmt.Errorf("secret: %w", tc.err)); got != tc.want {
			t.Errorf("passing(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestCallerDeadlineKeepsTheBound: a caller whose context ends during the
// read is served the last good value only while a passing failure could
// keep it (fetched + 2 × TTL): a Secrets Manager that stalls past every
// caller's deadline does not make an old value, perhaps revoked, good for
// ever (a review found it).
func TestCallerDeadlineKeepsTheBound(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{value: aws.String("leaked")}
	c, clk := setupCache(t, sm)
	if _, err := c.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	sm.err = context.DeadlineExceeded // Secrets Manager stalls past every caller's deadline
	for range 12 {
		clk.advance(5 * time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _ = c.Get(ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := c.Get(ctx); got != "" || err == nil {
		t.Fatalf("an hour past its read: got %q, %v; want no value (bound fetched + 2×TTL)", got, err)
	}
}

// TestRotationTriesAValueTrimmedAndAsStored: a webhook secret stored with
// the newline `echo` added signs as GitHub has it (without, as the App's
// one-line settings field took it); one GitHub was given with a space
// around it (typed so, or set through the API) signs with it. Both verify.
func TestRotationTriesAValueTrimmedAndAsStored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, stored, github string
		want                 []string
	}{
		{name: "as typed", stored: "s3cret", github: "s3cret", want: []string{"s3cret"}},
		{name: "echo's newline", stored: "s3cret\n", github: "s3cret", want: []string{"s3cret", "s3cret\n"}},
		{name: "a space typed into GitHub's field", stored: " s3cret ", github: " s3cret ", want: []string{"s3cret", " s3cret "}},
		{name: "a rotation list", stored: "new, old\n", github: "old", want: []string{"new", "old", " old\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, _ := setupCache(t, &fakeSM{value: aws.String(tt.stored)})
			got, err := c.Rotation(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var gotS []string
			for _, g := range got {
				gotS = append(gotS, string(g))
			}
			if fmt.Sprintf("%q", gotS) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("got %q, want %q", gotS, tt.want)
			}
			body := []byte(`{"action":"queued"}`)
			if err := webhook.Verify(body, webhook.SignatureValue(body, []byte(tt.github)), got); err != nil {
				t.Errorf("a delivery GitHub signed: %v, want it verified", err)
			}
		})
	}
}
