// Package failure owns the error classifier: one pure function, Classify,
// that turns whatever a claim attempt returned (go-github, shared/ghapp's
// token exchange, the AWS SDK, net/http) into one of DESIGN.md's five error classes, plus
// the facts the backoff policy needs (Retry-After, the rate-limit reset).
//
// It must never do I/O, read the clock, log, or keep state: the same error
// always gives the same Failure, so a test can pin every row of the table.
// It must never put a token, header value or request URL into Reason, which
// is stored on the job record and logged: an upstream message can quote
// one (a proxy echoing the Authorization header, AWS quoting a parameter
// value), so Reason passes through shared/redact.
//
// Decisions written down here:
//   - Order matters. GitHub's typed errors are checked first, then any
//     error carrying an HTTP response (go-github's ErrorResponse, which
//     also carries a failed installation-token exchange, the AWS SDK's
//     response errors), then AWS error codes, then network errors, then
//     messages. *url.Error implements net.Error, so an error carrying a
//     GitHub response must be recognised before the net.Error test.
//   - Rate limits follow GitHub's documented order: Retry-After when present;
//     otherwise, when X-RateLimit-Remaining is 0, X-RateLimit-Reset;
//     otherwise nothing (a secondary limit: the backoff policy then waits at
//     least a minute). go-github's AbuseRateLimitError.RetryAfter is only
//     used when the response carries no headers at all (go-github's own
//     pre-request check), because go-github derives it from the reset with
//     the wall clock, and because GitHub says to ignore the reset of a
//     secondary limit while remaining is above 0.
//   - A 403 is a permission error only when it has no rate-limit signal:
//     no Retry-After, X-RateLimit-Remaining not 0, no secondary-limit
//     documentation URL and no "rate limit" in GitHub's message.
//   - 429 is rate_limit although go-github v62 reports it as a plain
//     *ErrorResponse.
//   - When in doubt, retry: losing a job is worse than an extra attempt, and
//     the maximum age bounds every retry. Only errors that cannot succeed
//     on a later attempt (bad credentials, missing resources, invalid input)
//     are non_retryable. A 409 stays retryable: the claimer resolves
//     "already exists" itself, and a later attempt may succeed.
//   - GitHub refusing the installation-token exchange itself (a 401: the
//     App's JWT, signed with a key GitHub no longer has or for another App
//     id; a 404: no such installation of this App's, or a wrong API URL; a
//     403 without a rate-limit signal: the installation suspended; any
//     other answer DESIGN.md's table calls non_retryable) is a fault of the
//     App's credentials or installation, which an operator fixes, and of no
//     job: it is unknown_retryable with AppRefused set, so every job that
//     meets it is retried on the ladder, bounded by the maximum age, instead
//     of failed one by one. DESIGN.md's 401/404/403 rows are the job's own
//     calls (generate-jitconfig for a repository the App cannot see), which
//     stay non_retryable. A rate limit of the exchange stays rate_limit.
//   - context.DeadlineExceeded is a network timeout; context.Canceled is
//     unknown_retryable (the invocation was cut short, not the network).
//   - Classify(nil) is a programming error: callers classify only failed
//     attempts. It returns UnknownRetryable with Reason "nil error" rather
//     than panicking, so a claim is retried instead of lost.
package failure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	"github.com/google/go-github/v62/github"

	"github.com/ghclaim/ghclaim/shared/redact"
)

// Class is one of DESIGN.md's error classes. Its String form is what the
// job record stores in last_error_class and what logs carry as "class".
type Class int

// The error classes, in DESIGN.md's order.
const (
	// UnknownRetryable is anything not recognised: retried on the ladder.
	// It is the zero value, so a forgotten Class still retries.
	UnknownRetryable Class = iota
	// NonRetryable errors cannot succeed on a later attempt: the job fails.
	NonRetryable
	// RateLimit errors wait for Retry-After or the reset, then retry.
	RateLimit
	// ServerSide errors (5xx, AWS capacity/internal) retry on the ladder.
	ServerSide
	// Network errors (timeouts, resets, refused connections) retry on the ladder.
	Network
)

// String returns the stored name of c, e.g. "rate_limit".
func (c Class) String() string {
	switch c {
	case NonRetryable:
		return "non_retryable"
	case RateLimit:
		return "rate_limit"
	case ServerSide:
		return "server_side"
	case Network:
		return "network"
	case UnknownRetryable:
		return "unknown_retryable"
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether a failure of class c may be retried.
func (c Class) Retryable() bool { return c != NonRetryable }

// Failure is a classified error.
type Failure struct {
	Class Class
	// RetryAfter is the server's Retry-After, 0 when it sent none.
	RetryAfter time.Duration
	// ResetAt is when the exhausted primary rate limit resets, zero when
	// unknown (or when the limit was not exhausted).
	ResetAt time.Time
	// Status is the HTTP status code behind the error, 0 when there was none.
	Status int
	// Reason is short and safe to store and log: no tokens, no URLs, no
	// header values.
	Reason string
	// TokenExchange is true when GitHub refused the installation token
	// exchange itself: a rate limit there is the App's own budget, never
	// the installation's, and must not be recorded as the installation's.
	TokenExchange bool
	// AppRefused is true when GitHub refused the installation token
	// exchange for a reason no retry of the same credentials changes by
	// itself (401, 403 without a rate-limit signal, 404, …): the App's key
	// or id, or its installation, is wrong, which an operator fixes. Class
	// is then UnknownRetryable, never NonRetryable: no job is at fault.
	AppRefused bool
	// GitHub is true when the error is GitHub's answer (a response of its
	// API, or go-github's memory of one), not AWS's or the network's: a
	// rate limit of GitHub's binds every caller of the installation, an AWS
	// throttle only the call.
	GitHub bool
	// Remembered is true when go-github refused the call itself, from its
	// memory of an earlier rate-limited answer, without a request (its
	// stand-in response has no headers). That answer was observed when it
	// came, and may have been the App's token exchange rather than an API
	// call: a remembered refusal says nothing new about the installation.
	// Also true of an App refusal (AppRefused) that shared/ghapp handed
	// from its memory of GitHub's (HeldUntilHeader): ResetAt is then when
	// that memory ends and the next call asks GitHub again.
	Remembered bool
}

// HeldUntilHeader marks a token exchange refusal that shared/ghapp answered
// from its memory of GitHub's refusal, without a request: the value is
// when that memory ends (RFC 3339). GitHub sends no such header.
const HeldUntilHeader = "Ghclaim-Held-Until"

// Retryable reports whether the failure may be retried.
func (f Failure) Retryable() bool { return f.Class.Retryable() }

// Secondary reports whether f is a secondary rate limit of an
// installation's: GitHub's rate limit on an API call (not the App's token
// exchange) that names no reset of an exhausted budget. It binds every
// caller of the installation until its Retry-After, or a minute when it
// names none (shared/ratelimit records it as a block).
func (f Failure) Secondary() bool {
	return f.Class == RateLimit && f.GitHub && !f.TokenExchange && !f.Remembered && f.ResetAt.IsZero()
}

// maxReason bounds Reason so a verbose upstream message cannot bloat the
// job record.
const maxReason = 200

// Classify classifies err. Wrapped errors (fmt.Errorf with %w, url.Error,
// smithy.OperationError, ...) classify like the error they wrap.
func Classify(err error) Failure {
	if err == nil {
		return Failure{Class: UnknownRetryable, Reason: "nil error"}
	}
	f := classify(err)
	f.Reason = clip(redact.String(f.Reason))
	return f
}

func classify(err error) Failure {
	// GitHub's typed errors.
	var rle *github.RateLimitError
	if errors.As(err, &rle) {
		id := ""
		if rle.Response != nil {
			id = requestID(rle.Response.Header)
		}
		msg := rle.Message
		if msg == "" {
			msg = "rate limit exceeded" // the reason's end names the cause, not the id
		}
		f := Failure{Class: RateLimit, Reason: "github rate limit" + id + ": " + msg, TokenExchange: tokenExchange(rle.Response), GitHub: true}
		if f.TokenExchange {
			f.Reason = "github token rate limit" + id + ": " + msg
		}
		if rle.Response != nil {
			f.Status = rle.Response.StatusCode
			f.RetryAfter, f.ResetAt = retryAfter(rle.Response.Header)
			f.Remembered = len(rle.Response.Header) == 0
		}
		if f.RetryAfter == 0 && f.ResetAt.IsZero() {
			f.ResetAt = rle.Rate.Reset.Time
		}
		heldLimit(&f, rle.Response)
		return f
	}
	var are *github.AbuseRateLimitError
	if errors.As(err, &are) {
		id := ""
		if are.Response != nil {
			id = requestID(are.Response.Header)
		}
		msg := are.Message
		if msg == "" {
			msg = "secondary rate limit exceeded"
		}
		f := Failure{Class: RateLimit, Reason: "github secondary rate limit" + id + ": " + msg, TokenExchange: tokenExchange(are.Response), GitHub: true}
		if f.TokenExchange {
			f.Reason = "github token secondary rate limit" + id + ": " + msg
		}
		if are.Response != nil {
			f.Status = are.Response.StatusCode
			f.RetryAfter, f.ResetAt = rateHeaders(are.Response.Header)
			f.Remembered = len(are.Response.Header) == 0
			if f.Remembered && are.RetryAfter != nil && *are.RetryAfter > 0 {
				// go-github's pre-request check: no real response, only its memory.
				f.RetryAfter = *are.RetryAfter
			}
		} else if are.RetryAfter != nil && *are.RetryAfter > 0 {
			f.RetryAfter = *are.RetryAfter
		}
		heldLimit(&f, are.Response)
		return f
	}
	var acc *github.AcceptedError
	if errors.As(err, &acc) {
		// 202: GitHub scheduled the work and asks us to come back later.
		return Failure{Class: ServerSide, Status: http.StatusAccepted, Reason: "github 202: accepted, try again later", GitHub: true}
	}
	var tfa *github.TwoFactorAuthError
	if errors.As(err, &tfa) {
		return Failure{Class: NonRetryable, Status: http.StatusUnauthorized, Reason: "github 401: two-factor authentication required", GitHub: true}
	}
	var ger *github.ErrorResponse
	if errors.As(err, &ger) && ger.Response != nil {
		src := "github"
		exchange := tokenExchange(ger.Response)
		if exchange {
			// The installation token exchange itself failed (shared/ghapp
			// hands its answer to go-github): say so, a 401 here is the App key.
			src = "github token"
		}
		f := fromResponse(src, ger.Response.StatusCode, ger.Response.Header, ger.Message, ger.DocumentationURL)
		f.TokenExchange, f.GitHub = exchange, true
		if exchange && f.Class == NonRetryable {
			// The App's credentials or installation, not the job: see
			// the package doc.
			f.Class, f.AppRefused = UnknownRetryable, true
			if until, err := time.Parse(time.RFC3339Nano, ger.Response.Header.Get(HeldUntilHeader)); err == nil {
				// No request: shared/ghapp's memory of GitHub's refusal.
				f.Remembered, f.ResetAt = true, until
			}
		}
		heldLimit(&f, ger.Response)
		return f
	}

	// Our own adapters' refusals before any call (bad scope, missing name…):
	// the same input fails the same way every time.
	var perm interface{ Permanent() bool }
	if errors.As(err, &perm) && perm.Permanent() {
		return Failure{Class: NonRetryable, Reason: "invalid request: " + err.Error()}
	}

	// AWS.
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() != "" {
		var opts interface{ OptionCodes() []string }
		if errors.As(err, &opts) {
			return fromOptions(api, opts.OptionCodes(), statusOf(err))
		}
		return fromAWS(api, statusOf(err))
	}
	if status := statusOf(err); status != 0 {
		return fromAWSStatus(status)
	}

	// Context and network.
	if errors.Is(err, context.DeadlineExceeded) {
		return Failure{Class: Network, Reason: "timeout: context deadline exceeded"}
	}
	if errors.Is(err, context.Canceled) {
		return Failure{Class: UnknownRetryable, Reason: "context canceled"}
	}
	for _, n := range netErrnos {
		if errors.Is(err, n.errno) {
			return Failure{Class: Network, Reason: "network: " + n.reason}
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Failure{Class: Network, Reason: "network: unexpected EOF"}
	}
	if errors.Is(err, io.EOF) {
		// net/http reports a connection closed before any response as EOF.
		return Failure{Class: Network, Reason: "network: connection closed (EOF)"}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return Failure{Class: Network, Reason: "network: timeout"}
		}
		return Failure{Class: Network, Reason: "network: " + netReason(err)}
	}

	// Last resort: the message. GitHub's proxies answer some failures with
	// bodies that only say so in words.
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"bad gateway", "gateway timeout", "service unavailable"} {
		if strings.Contains(msg, s) {
			return Failure{Class: ServerSide, Reason: s}
		}
	}
	return Failure{Class: UnknownRetryable, Reason: "unknown: " + fmt.Sprintf("%T", unwrapAll(err))}
}

// fromResponse classifies an HTTP status from GitHub with its headers and
// GitHub's message.
func fromResponse(src string, status int, h http.Header, message, docURL string) Failure {
	// The request id before the message: history entries keep a reason's
	// end (job.MaxHistoryError), where the cause is.
	f := Failure{Status: status, Reason: src + " " + strconv.Itoa(status) + requestID(h)}
	switch {
	case message != "":
		f.Reason += ": " + message
	case status != http.StatusForbidden && http.StatusText(status) != "":
		// No message (an HTML error page of GitHub's edge): the status's
		// text, so the reason's end (what history entries keep) names the
		// cause and not the request id.
		f.Reason += ": " + http.StatusText(status)
	}
	switch {
	case status == http.StatusTooManyRequests:
		f.Class = RateLimit
		f.RetryAfter, f.ResetAt = rateHeaders(h)
	case status == http.StatusForbidden:
		f.RetryAfter, f.ResetAt = rateHeaders(h)
		lower := strings.ToLower(message)
		if f.RetryAfter > 0 || !f.ResetAt.IsZero() || h.Get("X-RateLimit-Remaining") == "0" ||
			strings.HasSuffix(docURL, "#abuse-rate-limits") || strings.HasSuffix(docURL, "secondary-rate-limits") ||
			strings.Contains(lower, "rate limit") {
			f.Class = RateLimit
			if message == "" {
				f.Reason += ": rate limit exceeded" // the reason's end names the cause
			}
		} else {
			f.Class = NonRetryable
			if message == "" {
				f.Reason += ": permission denied"
			}
		}
	case status == http.StatusRequestTimeout:
		f.Class = Network
	case status >= 500:
		f.Class = ServerSide
	case status == http.StatusBadRequest, status == http.StatusUnauthorized, status == http.StatusNotFound,
		status == http.StatusGone, status == http.StatusUnprocessableEntity, status == http.StatusUnavailableForLegalReasons:
		f.Class = NonRetryable
	default:
		f.Class = UnknownRetryable
	}
	return f
}

// requestID is GitHub's X-GitHub-Request-Id of an answer, as it goes into
// a reason after the status (" (request C0DE:…)"), or "": what GitHub
// Support asks for about a refused call. Bounded and printable only: it is
// stored and logged.
func requestID(h http.Header) string {
	id := h.Get("X-GitHub-Request-Id")
	if id == "" || len(id) > 64 || strings.IndexFunc(id, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return ""
	}
	return " (request " + id + ")"
}

// heldLimit marks f, a rate limit on the App's token exchange, as held:
// shared/ghapp answered it from its memory of GitHub's limit
// (HeldUntilHeader), without a request, so it is Remembered and ends when
// that memory does (the copy's Retry-After is as old as GitHub's answer).
func heldLimit(f *Failure, resp *http.Response) {
	if f.Class != RateLimit || !f.TokenExchange || resp == nil {
		return
	}
	if until, err := time.Parse(time.RFC3339Nano, resp.Header.Get(HeldUntilHeader)); err == nil {
		f.Remembered, f.RetryAfter, f.ResetAt = true, 0, until
	}
}

// tokenExchange reports whether resp answered the installation token
// exchange (POST /app/installations/{id}/access_tokens).
func tokenExchange(resp *http.Response) bool {
	return resp != nil && resp.Request != nil && resp.Request.URL != nil && strings.HasSuffix(resp.Request.URL.Path, "/access_tokens")
}

// rateHeaders reads GitHub's rate-limit headers in the documented order:
// Retry-After first; the reset only while X-RateLimit-Remaining is 0.
func rateHeaders(h http.Header) (time.Duration, time.Time) {
	if d, t := retryAfter(h); d > 0 || !t.IsZero() {
		return d, t
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if v, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && v > 0 {
			return 0, time.Unix(v, 0)
		}
	}
	return 0, time.Time{}
}

// retryAfter parses Retry-After: delay-seconds (what GitHub sends) or an
// HTTP date, which becomes an absolute time because Classify has no clock.
func retryAfter(h http.Header) (time.Duration, time.Time) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, time.Time{}
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s > 0 {
			// Capped before the multiplication, which would wrap for a
			// garbled value (the retry policy caps the wait at an hour).
			return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, time.Time{}
		}
		return 0, time.Time{}
	}
	if t, err := http.ParseTime(v); err == nil {
		return 0, t
	}
	return 0, time.Time{}
}

// awsThrottle, awsServer and awsNonRetryable are AWS error codes by class.
// Codes ending in '*' match as prefixes.
var (
	awsThrottle = []string{
		"RequestLimitExceeded", "Throttling", "ThrottlingException", "ThrottledException",
		"TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestThrottled",
		"RequestThrottledException", "SlowDown", "PriorRequestNotComplete", "TransactionInProgressException",
	}
	awsServer = []string{
		"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "InternalError", "InternalFailure",
		"InternalServerError", "InternalServiceError", "InternalServerException",
		"ServiceUnavailable", "ServiceUnavailableException", "Unavailable",
	}
	awsNonRetryable = []string{
		"InvalidParameter*", "UnauthorizedOperation", "AccessDenied*", "InvalidLaunchTemplate*",
		"ValidationError", "ValidationException", "MissingParameter", "InvalidAMIID*",
		"InvalidSubnetID*", "InvalidSecurityGroupID*", "InvalidGroup*", "InvalidKeyPair*",
		"InvalidInstanceType", "Unsupported", "UnsupportedOperation", "OptInRequired",
		"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException",
		"AuthFailure", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch",
		// EC2: a ClientToken reused with other launch arguments fails the
		// same way on every retry (the token lives 24 h at least).
		// shared/provision recovers from it with a token of the new
		// arguments, so one that still surfaces cannot be retried away.
		"IdempotentParameterMismatch",
		// EC2 Fleet: the launch's options are refused as a whole (two
		// subnets of one Availability Zone, say); every retry would be.
		"InvalidFleetConfig",
	}
)

func matchCode(code string, list []string) bool {
	for _, c := range list {
		if p, ok := strings.CutSuffix(c, "*"); ok {
			if strings.HasPrefix(code, p) {
				return true
			}
		} else if code == c {
			return true
		}
	}
	return false
}

// fromAWS classifies an AWS API error by its code, then by its fault.
// AWS messages are kept: they name parameters, never credentials.
func fromAWS(api smithy.APIError, status int) Failure {
	code := api.ErrorCode()
	f := Failure{Status: status, Reason: "aws " + code}
	if m := api.ErrorMessage(); m != "" {
		f.Reason += ": " + m
	}
	switch {
	case matchCode(code, awsThrottle):
		// AWS sends no reset: the backoff ladder (with the rate-limit minimum) applies.
		f.Class = RateLimit
	case matchCode(code, awsServer):
		f.Class = ServerSide
	case matchCode(code, awsNonRetryable):
		f.Class = NonRetryable
	case status == http.StatusTooManyRequests:
		f.Class = RateLimit
	case api.ErrorFault() == smithy.FaultServer || status >= 500:
		f.Class = ServerSide
	default:
		// An unknown client-side code may still be a throttle we have not
		// listed (several AWS throttles are plain 400s): retry.
		f.Class = UnknownRetryable
	}
	return f
}

// fromOptions classifies a launch that failed in several options at once
// (EC2 Fleet: one error per instance type × subnet), each with its own code:
// as its most retryable option, since a later attempt can get past any one
// of them ("when in doubt, retry"); failed for good only when every
// option's code is. With no option codes, api's own code decides.
func fromOptions(api smithy.APIError, codes []string, status int) Failure {
	best := fromAWS(api, status)
	for _, c := range codes {
		f := fromAWS(&smithy.GenericAPIError{Code: c, Message: api.ErrorMessage(), Fault: smithy.FaultUnknown}, status)
		if retryRank(f.Class) > retryRank(best.Class) {
			best = f
		}
	}
	return best
}

// retryRank orders the classes an option may get, from failed for good to
// the surest retry.
func retryRank(c Class) int {
	switch c {
	case ServerSide:
		return 3
	case RateLimit:
		return 2
	case NonRetryable:
		return 0
	}
	return 1
}

// fromAWSStatus classifies an AWS response that carried no error code.
func fromAWSStatus(status int) Failure {
	f := Failure{Status: status, Reason: "aws http " + strconv.Itoa(status)}
	switch {
	case status == http.StatusTooManyRequests:
		f.Class = RateLimit
	case status >= 500:
		f.Class = ServerSide
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusNotFound:
		f.Class = NonRetryable
	default:
		f.Class = UnknownRetryable
	}
	return f
}

// statusOf finds an HTTP status in err's chain through the interface that
// smithy-go's ResponseError (and the AWS SDK's, which embeds it) exposes.
func statusOf(err error) int {
	var hs interface{ HTTPStatusCode() int }
	if errors.As(err, &hs) {
		return hs.HTTPStatusCode()
	}
	return 0
}

var netErrnos = []struct {
	errno  syscall.Errno
	reason string
}{
	{syscall.ECONNRESET, "connection reset"},
	{syscall.ECONNREFUSED, "connection refused"},
	{syscall.ECONNABORTED, "connection aborted"},
	{syscall.EPIPE, "broken pipe"},
	{syscall.ETIMEDOUT, "timeout"},
	{syscall.EHOSTUNREACH, "host unreachable"},
	{syscall.ENETUNREACH, "network unreachable"},
}

// netReason names a net.Error without its text, which may hold a URL.
func netReason(err error) string {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return "dns lookup failed"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + " failed"
	}
	return "error"
}

func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxReason {
		return s
	}
	// Cut on a rune boundary.
	cut := maxReason
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
