// Package awsrpc is what ghclaim's own AWS API clients (shared/ec2api,
// shared/ssmapi, shared/secretsapi) share beside the shape of their calls:
// one signed, retried request to a service's regional endpoint, answered
// as the SDK answers.
//
// Decision: those clients replace the SDK's service clients, whose
// packages hold every operation of their service and, for SSM, build the
// schemas of all of them at every cold start (5–6 ms per start on a slow
// 2-CPU machine, a third of a function's package initialisation) and
// compile for tens of CPU-seconds. This package takes from the SDK
// everything that is not the shape of a call: the credentials, SigV4
// signing (aws/signer/v4), the retryer (cfg.Retryer, else the SDK's
// standard or adaptive one as cfg.RetryMode says, with cfg.RetryMaxAttempts:
// the same attempts, backoff with jitter, throttling codes and retry quota;
// a service's X-Amz-Retry-After is taken as the SDK's retry loop takes
// it), the HTTP client (cfg.HTTPClient, else the SDK's), and
// the SDK's error chain (*smithy.OperationError → *awshttp.ResponseError
// with the HTTP status → smithy.APIError with the service's code), so
// shared/failure and errors.As treat its errors exactly as the SDK
// client's.
//
// Endpoint: resolved as the SDK's clients resolve it: a configured
// endpoint (AWS_ENDPOINT_URL_<SERVICE> or the shared config's endpoint_url
// for the service, else cfg.BaseEndpoint: moto, LocalStack), else from the
// region, AWS_USE_FIPS_ENDPOINT and AWS_USE_DUALSTACK_ENDPOINT as
// cfg.ConfigSources give them (config.LoadDefaultConfig's sources, or
// shared/awsenv's in the functions), by the standard regional rule (EC2's
// and SSM's) or the service's own (Service.Regional: Secrets Manager's).
//
// Clock skew: corrected as the SDK's clients correct it (the Clock Skew
// Correction SEP, aws/retry's Attempt middleware): every answer's Date
// header (unless cached: an Age header, or a round trip over 15 minutes)
// measures the service's clock against ours; an answer refusing the
// signature's time (InvalidSignatureException, SignatureDoesNotMatch,
// AuthFailure, RequestTimeTooSkewed, AccessDeniedException, and EC2's
// RequestExpired, which the SDK's list lacks) is retried, signed at the
// service's time, when the two differ by over 4 minutes; and the last
// measured difference signs the client's later calls, until an answer
// measures another. cfg.DisableClockSkewCorrection
// (AWS_DISABLE_CLOCK_SKEW_CORRECTION) turns it off. It matters to the
// operator CLI on a machine whose clock is off; Lambda's clock is synced.
//
// It never logs, and its errors carry no credential and no request body.
package awsrpc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ghclaim/ghclaim/shared/clock"
)

// Service describes an AWS service to its client.
type Service struct {
	// ID is the SDK's service ID ("EC2", "SSM"): the service of an
	// OperationError, and the key of its configured endpoint.
	ID string
	// SigningName is its SigV4 service name ("ec2", "ssm").
	SigningName string
	// EndpointPrefix is the first label of its regional host names
	// ("ec2" → ec2.<region>.amazonaws.com, ec2-fips.…).
	EndpointPrefix string
	// ContentType is the Content-Type of its requests.
	ContentType string
	// Error reads an error answer's code, message and request ID (each
	// may be empty: "UnknownError" stands for no code), or fails when the
	// answer is not the service's error document at all (an HTML page
	// from a proxy): the SDK's client then reports no API error either.
	Error func(header http.Header, body []byte) (code, message, requestID string, err error)
	// Regional, when set, is the service's own rule for its regional
	// endpoint, given the region and whether FIPS and dual-stack are on
	// (Secrets Manager answers dual-stack on its regular names in most
	// partitions); nil: the rule EC2's and SSM's endpoints follow.
	Regional func(region string, fips, dual bool) string
}

// Client sends a service's requests. It is safe for concurrent use.
type Client struct {
	svc      Service
	region   string
	endpoint string
	url      string // the requests' URL: the endpoint, with "/" when it has no path
	// endpointErr is a configuration the endpoint rules refuse (FIPS with
	// a custom endpoint), returned by every call.
	endpointErr error
	http        aws.HTTPClient
	creds       aws.CredentialsProvider
	retryer     aws.Retryer
	signer      *v4.Signer
	now         clock.Func
	sleep       func(context.Context, time.Duration) error
	// skew is the service's clock minus ours, in nanoseconds, as the
	// latest answer measured it; requests are signed at now + skew.
	skew atomic.Int64
	// noSkew is cfg.DisableClockSkewCorrection: sign at now, measure
	// nothing, retry no signature refusal.
	noSkew bool
}

// Options are a client's optional settings.
type Options struct {
	// Now is the clock requests are signed with; time.Now when nil.
	Now clock.Func
	// Sleep waits between attempts, or returns ctx's error; a timer when
	// nil. Tests inject one that records the delays.
	Sleep func(ctx context.Context, d time.Duration) error
	// HTTPClient sends the requests: cfg.HTTPClient when the options are
	// applied (an option may wrap it), else the SDK's default client.
	HTTPClient aws.HTTPClient
}

// New returns a client of svc for cfg's region, credentials, endpoint,
// HTTP client and retryer.
func New(svc Service, cfg aws.Config, opts ...func(*Options)) *Client {
	// As the SDK's clients do, the options start from cfg's HTTP client,
	// so an option can wrap it.
	o := Options{HTTPClient: cfg.HTTPClient}
	for _, f := range opts {
		f(&o)
	}
	if o.Sleep == nil {
		o.Sleep = clock.Sleep
	}
	c := &Client{
		svc: svc, region: cfg.Region, http: o.HTTPClient, creds: cfg.Credentials,
		signer: v4.NewSigner(), now: clock.Or(o.Now), sleep: o.Sleep,
		noSkew: cfg.DisableClockSkewCorrection,
	}
	if c.http == nil {
		c.http = awshttp.NewBuildableClient()
	}
	c.retryer = retryer(cfg)
	c.endpoint, c.endpointErr = svc.Endpoint(cfg)
	c.url = c.endpoint
	if u, err := url.Parse(c.endpoint); err == nil && u.Path == "" {
		c.url += "/" // a configured endpoint's own path is kept, as the SDK keeps it
	}
	return c
}

// retryer is the retryer the SDK's clients build from cfg: cfg.Retryer's,
// else the standard one, or the adaptive one when cfg.RetryMode says so
// (AWS_RETRY_MODE, retry_mode), with cfg.RetryMaxAttempts attempts when
// set (AWS_MAX_ATTEMPTS, max_attempts), over cfg.Retryer's too.
func retryer(cfg aws.Config) aws.Retryer {
	max := func(so *retry.StandardOptions) {
		if cfg.RetryMaxAttempts != 0 {
			so.MaxAttempts = cfg.RetryMaxAttempts
		}
	}
	var r aws.Retryer
	switch {
	case cfg.Retryer != nil:
		r = cfg.Retryer()
	case cfg.RetryMode == aws.RetryModeAdaptive:
		r = retry.NewAdaptiveMode(func(ao *retry.AdaptiveModeOptions) { ao.StandardOptions = append(ao.StandardOptions, max) })
	default:
		r = retry.NewStandard(max)
	}
	if cfg.RetryMaxAttempts != 0 {
		r = retry.AddWithMaxAttempts(r, cfg.RetryMaxAttempts)
	}
	return r
}

// Region is the client's region.
func (c *Client) Region() string { return c.region }

// Call sends operation op: body with header (besides Content-Type and the
// signature's), and hands a 2xx answer's body to decode (nil discards it).
// Retries follow the client's retryer. Errors are the SDK's chain:
// *smithy.OperationError around an *awshttp.ResponseError around a
// smithy.APIError carrying the service's code; a cancelled context gives
// *smithy.CanceledError.
func (c *Client) Call(ctx context.Context, op string, header http.Header, body []byte, decode func(status int, body []byte) error) error {
	if err := c.call(ctx, header, body, decode); err != nil {
		return &smithy.OperationError{ServiceID: c.svc.ID, OperationName: op, Err: err}
	}
	return nil
}

func (c *Client) call(ctx context.Context, header http.Header, body []byte, decode func(int, []byte) error) error {
	if c.region == "" {
		return errors.New("no region: set AWS_REGION")
	}
	if c.endpointErr != nil {
		return c.endpointErr
	}
	if c.creds == nil {
		return errors.New("no credentials")
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])

	var skew time.Duration
	if !c.noSkew {
		skew = time.Duration(c.skew.Load())
	}
	var releaseRetry func(error) error
	for attempt := 1; ; attempt++ {
		releaseAttempt := func(error) error { return nil }
		if v2, ok := c.retryer.(aws.RetryerV2); ok {
			rel, err := v2.GetAttemptToken(ctx)
			if err != nil {
				return fmt.Errorf("attempt token: %w", err)
			}
			releaseAttempt = rel
		}
		measured, ok, err := c.attempt(ctx, header, body, hash, skew, decode)
		if ok && !c.noSkew {
			err = skewed(err, measured, skew)
			skew = measured
			// Kept for the client's later calls, whatever this call's
			// end: the last answer's measure is the newest.
			c.skew.Store(int64(measured))
		}
		_ = releaseAttempt(err)
		if releaseRetry != nil {
			_ = releaseRetry(err)
			releaseRetry = nil
		}
		var api smithy.APIError
		switch max := c.retryer.MaxAttempts(); {
		case err == nil:
			return nil
		case ctx.Err() != nil && !errors.As(err, &api):
			// Cut off without an answer. An answer that came as the
			// context ended is still the call's end, as with the SDK.
			return &smithy.CanceledError{Err: ctx.Err()}
		case !c.retryer.IsErrorRetryable(err):
			return retried(attempt, err)
		case max > 0 && attempt >= max: // 0: no limit, as in the SDK
			return &retry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		delay, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return retried(attempt, err)
		}
		delay = retryAfter(delay, err)
		rel, qerr := c.retryer.GetRetryToken(ctx, err)
		if qerr != nil {
			// The retry quota is spent: no retry storm. Both errors are
			// the call's, as the SDK joins them.
			return retried(attempt, errors.Join(err, qerr))
		}
		releaseRetry = rel
		if serr := c.sleep(ctx, delay); serr != nil {
			return &smithy.CanceledError{Err: serr}
		}
	}
}

// retryAfter is the wait before the next attempt when the service asked
// for one (X-Amz-Retry-After, in milliseconds), as the SDK's retry loop
// takes it: within [backoff, backoff + 5 s] of the retryer's backoff, and
// the backoff when the header is absent or not a count.
func retryAfter(backoff time.Duration, err error) time.Duration {
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return backoff
	}
	ms, perr := strconv.ParseInt(re.Response.Header.Get("X-Amz-Retry-After"), 10, 64)
	if perr != nil || ms < 0 {
		return backoff
	}
	return min(max(time.Duration(ms)*time.Millisecond, backoff), backoff+5*time.Second)
}

// RetriedError is the last attempt's error of a call that made more than
// one: an earlier attempt's answer was lost (a reset connection, a 5xx),
// so it may have taken effect whatever the last one says. A call whose
// attempts ran out ends as *retry.MaxAttemptsError instead, which says as
// much; this is for a call cut short before that (its retry quota spent,
// a later attempt refused outright). Its text and errors.As are the last
// attempt's.
type RetriedError struct {
	Attempts int
	Err      error
}

func (e *RetriedError) Error() string { return e.Err.Error() }
func (e *RetriedError) Unwrap() error { return e.Err }

// retried is err, the error of attempt, marked when attempt is not the
// first (RetriedError).
func retried(attempt int, err error) error {
	if attempt <= 1 {
		return err
	}
	return &RetriedError{Attempts: attempt, Err: err}
}

// Attempts reports how many attempts the call that failed with err made,
// when it made more than one (0 otherwise): an earlier one may have taken
// effect, its answer lost.
func Attempts(err error) int {
	var re *RetriedError
	if errors.As(err, &re) {
		return re.Attempts
	}
	var me *retry.MaxAttemptsError
	if errors.As(err, &me) && me.Attempt > 1 {
		return me.Attempt
	}
	return 0
}

// attempt sends one request signed at now + skew and decodes its answer.
// It also reports the service's clock minus ours as the answer's Date
// header measures it (ok false: no answer, no Date, or not to be trusted).
func (c *Client) attempt(ctx context.Context, header http.Header, body []byte, hash string, skew time.Duration, decode func(int, []byte) error) (measured time.Duration, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("build request: %w", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", c.svc.ContentType)
	req.Header.Set("User-Agent", "ghclaim-"+c.svc.SigningName+"api")
	creds, err := c.creds.Retrieve(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("retrieve credentials: %w", err)
	}
	sent := c.now()
	if err := c.signer.SignHTTP(ctx, creds, req, hash, c.svc.SigningName, c.region, sent.Add(skew).UTC()); err != nil {
		return 0, false, fmt.Errorf("sign request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false, &smithyhttp.RequestSendError{Err: err}
	}
	defer resp.Body.Close()
	measured, ok = serverSkew(resp.Header, sent, c.now())
	// From here on there is an answer, and every error carries its status
	// and request ID (*awshttp.ResponseError), as the SDK's do.
	data, err := io.ReadAll(resp.Body)
	switch {
	case err != nil:
		// Cut off: retried only as the SDK retries it (a reset, a
		// timeout), since the request itself may have taken effect.
		return measured, ok, c.answerError(resp, "", &smithy.DeserializationError{Err: fmt.Errorf("read answer: %w", err)})
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return measured, ok, c.responseError(resp, data)
	case decode == nil:
		return measured, ok, nil
	}
	if err := decode(resp.StatusCode, data); err != nil {
		return measured, ok, c.answerError(resp, "", &smithy.DeserializationError{Err: fmt.Errorf("decode answer (HTTP %d, %d bytes): %w", resp.StatusCode, len(data), err)})
	}
	return measured, ok, nil
}

// answerError is err, about answer resp, in the SDK's wrapping: an
// *awshttp.ResponseError with its status and request ID (id, else the
// header's).
func (c *Client) answerError(resp *http.Response, id string, err error) error {
	if id == "" {
		id = resp.Header.Get("X-Amzn-Requestid")
	}
	return &awshttp.ResponseError{
		RequestID:     id,
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
	}
}

// maxTrustedRoundTrip is the longest round trip whose answer's Date still
// measures the service's clock (the SEP's, as the SDK's).
const maxTrustedRoundTrip = 15 * time.Minute

// skewThreshold is how far the time a request was signed at may be from
// the service's before a refused signature is taken for a clock's fault
// (the SDK's: AWS refuses signatures 5 minutes off).
const skewThreshold = 4 * time.Minute

// serverSkew is the service's clock minus ours by an answer's headers, the
// answer received at received for a request sent at sent: its Date (to
// the second) minus received. None when it has no Date or one that does
// not parse, was served from a cache (Age), or took too long to come.
func serverSkew(h http.Header, sent, received time.Time) (time.Duration, bool) {
	date := h.Get("Date")
	if date == "" || h.Get("Age") != "" || received.Sub(sent) > maxTrustedRoundTrip {
		return 0, false
	}
	at, err := smithyhttp.ParseTime(date)
	if err != nil {
		return 0, false
	}
	return at.Sub(received), true
}

// skewCodes are the codes with which services refuse a signature, some
// of them also for its time: the SDK's (aws/retry) and EC2's RequestExpired
// ("the date stamp on the request is more than 15 minutes" off, AWS's
// common errors).
var skewCodes = map[string]bool{
	"InvalidSignatureException": true, "SignatureDoesNotMatch": true, "AuthFailure": true,
	"RequestTimeTooSkewed": true, "AccessDeniedException": true, "RequestExpired": true,
}

// skewed is err marked retryable (ClockSkewError) when it refuses the
// signature and the request was signed at a time (ours + used) over
// skewThreshold from the service's (ours + measured): signed again at the
// service's time, it may pass. A refusal with the clocks in step is the
// credentials' or the policy's, and is left as it is.
func skewed(err error, measured, used time.Duration) error {
	if err == nil || !skewCodes[Code(err)] {
		return err
	}
	if d := measured - used; d > skewThreshold || d < -skewThreshold {
		return &ClockSkewError{Skew: measured, Err: err}
	}
	return err
}

// ClockSkewError is a signature refused while the request's time was off
// the service's by Skew (the service's clock minus ours): the retryer
// retries it, signed at the service's time. Its errors.As and code are
// the refusal's.
type ClockSkewError struct {
	Skew time.Duration
	Err  error
}

func (e *ClockSkewError) Error() string {
	return fmt.Sprintf("probable clock skew (the service's clock is %s off ours): %v", e.Skew.Round(time.Second), e.Err)
}
func (e *ClockSkewError) Unwrap() error { return e.Err }

// RetryableError tells the SDK's retryer to retry it.
func (e *ClockSkewError) RetryableError() bool { return true }

// responseError is the service's error answer as the SDK returns it: its
// code and message, or, when the answer is not an error document of the
// service, no API error at all.
//
// Decision: the fault is the status's (client for 4xx, server for 5xx)
// where the SDK's clients say "unknown" for every code their model does
// not list (all of EC2's): shared/provision tells a refusal EC2 answered
// (nothing launched) from a failure by it, and shared/failure classes by
// the status as well.
func (c *Client) responseError(resp *http.Response, data []byte) error {
	code, msg, id, err := c.svc.Error(resp.Header, data)
	if err != nil {
		return c.answerError(resp, id, err)
	}
	if code == "" {
		code = "UnknownError"
	}
	if msg == "" {
		msg = code
	}
	fault := smithy.FaultClient
	if resp.StatusCode >= 500 {
		fault = smithy.FaultServer
	}
	return c.answerError(resp, id, &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault})
}

// Code is the service's error code of err ("" when err carries none).
func Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// Partition returns the AWS partition of region.
func Partition(region string) string {
	for _, p := range []struct{ prefix, partition string }{
		{"cn-", "aws-cn"}, {"us-gov-", "aws-us-gov"}, {"us-isob-", "aws-iso-b"}, {"us-iso-", "aws-iso"},
		{"eu-isoe-", "aws-iso-e"}, {"us-isof-", "aws-iso-f"}, {"eusc-", "aws-eusc"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			return p.partition
		}
	}
	return "aws"
}

// DNSSuffix returns the DNS suffix of a partition's regional endpoints.
func DNSSuffix(partition string) string {
	switch partition {
	case "aws-cn":
		return "amazonaws.com.cn"
	case "aws-iso":
		return "c2s.ic.gov"
	case "aws-iso-b":
		return "sc2s.sgov.gov"
	case "aws-iso-e":
		return "cloud.adc-e.uk"
	case "aws-iso-f":
		return "csp.hci.ic.gov"
	case "aws-eusc":
		return "amazonaws.eu"
	default:
		return "amazonaws.com"
	}
}

// DualStackDNSSuffix returns the DNS suffix of a partition's dual-stack
// (IPv4 and IPv6) endpoints.
func DualStackDNSSuffix(partition string) string {
	switch partition {
	case "aws-cn":
		return "api.amazonwebservices.com.cn"
	case "aws-iso":
		return "api.aws.ic.gov"
	case "aws-iso-b":
		return "api.aws.scloud"
	case "aws-iso-e":
		return "api.cloud-aws.adc-e.uk"
	case "aws-iso-f":
		return "api.aws.hci.ic.gov"
	case "aws-eusc":
		return "api.amazonwebservices.eu"
	default: // aws, aws-us-gov
		return "api.aws"
	}
}

// The settings the SDK's clients read from aws.Config.ConfigSources;
// config.EnvConfig, config.SharedConfig and awsenv.Endpoints have them.
type (
	serviceEndpointSource interface {
		GetServiceBaseEndpoint(ctx context.Context, sdkID string) (string, bool, error)
	}
	ignoreEndpointsSource interface {
		GetIgnoreConfiguredEndpoints(ctx context.Context) (bool, bool, error)
	}
	fipsSource interface {
		GetUseFIPSEndpoint(ctx context.Context) (aws.FIPSEndpointState, bool, error)
	}
	dualStackSource interface {
		GetUseDualStackEndpoint(ctx context.Context) (aws.DualStackEndpointState, bool, error)
	}
)

// Endpoint returns the endpoint of s that cfg resolves to, as the SDK's
// client of s would resolve it, without a trailing slash. With no region
// and no configured endpoint it returns "" (a call then asks for
// AWS_REGION).
func (s Service) Endpoint(cfg aws.Config) (string, error) {
	ctx := context.Background()
	base := aws.ToString(cfg.BaseEndpoint)
	// The SDK's order: AWS_ENDPOINT_URL alone keeps cfg.BaseEndpoint;
	// otherwise a service-specific endpoint, unless endpoints configured
	// outside the code are ignored, replaces it.
	_, global := os.LookupEnv("AWS_ENDPOINT_URL")
	_, own := os.LookupEnv("AWS_ENDPOINT_URL_" + strings.ToUpper(strings.ReplaceAll(s.ID, " ", "_")))
	if !global || own {
		if v, ok := s.configuredEndpoint(ctx, cfg.ConfigSources); ok {
			base = v
		}
	}
	// The first source that sets each one decides it, as in the SDK.
	var fips, dual, fipsSet, dualSet bool
	for _, src := range cfg.ConfigSources {
		if s, ok := src.(fipsSource); ok && !fipsSet {
			if v, found, err := s.GetUseFIPSEndpoint(ctx); err == nil && found {
				fips, fipsSet = v == aws.FIPSEndpointStateEnabled, true
			}
		}
		if s, ok := src.(dualStackSource); ok && !dualSet {
			if v, found, err := s.GetUseDualStackEndpoint(ctx); err == nil && found {
				dual, dualSet = v == aws.DualStackEndpointStateEnabled, true
			}
		}
	}
	switch {
	case base != "" && fips:
		return "", fmt.Errorf("%s endpoint: FIPS (AWS_USE_FIPS_ENDPOINT) and a custom endpoint are not supported together", s.ID)
	case base != "" && dual:
		return "", fmt.Errorf("%s endpoint: dual-stack (AWS_USE_DUALSTACK_ENDPOINT) and a custom endpoint are not supported together", s.ID)
	case base != "":
		return strings.TrimSuffix(base, "/"), nil
	case cfg.Region == "":
		return "", nil
	case s.Regional != nil:
		return s.Regional(cfg.Region, fips, dual), nil
	}
	r, p, host := cfg.Region, Partition(cfg.Region), s.EndpointPrefix
	switch {
	case fips && dual:
		return "https://" + host + "-fips." + r + "." + DualStackDNSSuffix(p), nil
	case fips && p == "aws-us-gov": // GovCloud's regional endpoints are FIPS already
		return "https://" + host + "." + r + ".amazonaws.com", nil
	case fips:
		return "https://" + host + "-fips." + r + "." + DNSSuffix(p), nil
	case dual:
		return "https://" + host + "." + r + "." + DualStackDNSSuffix(p), nil
	default:
		return "https://" + host + "." + r + "." + DNSSuffix(p), nil
	}
}

// configuredEndpoint is the first configured endpoint of s among the
// sources, none when configured endpoints are ignored (the first source
// that says whether to ignore them decides, as in the SDK).
func (s Service) configuredEndpoint(ctx context.Context, sources []any) (string, bool) {
	for _, src := range sources {
		if is, ok := src.(ignoreEndpointsSource); ok {
			v, found, err := is.GetIgnoreConfiguredEndpoints(ctx)
			if err == nil && found && v {
				return "", false
			}
			if err != nil || found {
				break
			}
		}
	}
	for _, src := range sources {
		if es, ok := src.(serviceEndpointSource); ok {
			v, found, err := es.GetServiceBaseEndpoint(ctx, s.ID)
			if err != nil {
				return "", false
			}
			if found {
				return v, true
			}
		}
	}
	return "", false
}

// JSONError reads an awsJson error answer as the SDK's awsjson protocol
// does: the code from X-Amzn-ErrorType, else the body's __type, else its
// code; namespace ("com.amazonaws.ssm#") and URI (":http://…") stripped;
// the message from message or Message; an empty body has no code
// (UnknownError). A body that is not JSON (an HTML page from a proxy) is
// no error document, header or not: err, a *smithy.DeserializationError,
// as the SDK fails to decode it too.
func JSONError(header http.Header, body []byte) (code, message, requestID string, err error) {
	var doc struct {
		Type    string `json:"__type"`
		Code    any    `json:"code"`
		Message string `json:"message"`
	}
	// As the SDK reads it: the first JSON value of the body, none when
	// the body is empty; anything else is not an error document.
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&doc); err != nil && err != io.EOF {
		return "", "", header.Get("X-Amzn-Requestid"), &smithy.DeserializationError{Err: fmt.Errorf("failed to decode response body, %w", err)}
	}
	code = header.Get("X-Amzn-ErrorType")
	if code == "" {
		code = doc.Type
	}
	if c, ok := doc.Code.(string); ok && code == "" {
		code = c
	}
	if i := strings.Index(code, ":"); i >= 0 {
		code = code[:i]
	}
	if i := strings.Index(code, "#"); i >= 0 {
		code = code[i+1:]
	}
	return code, doc.Message, header.Get("X-Amzn-Requestid"), nil
}
