package config

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// SSM is the part of the SSM API the pools parameter needs.
type SSM interface {
	GetParameter(ctx context.Context, in *ssmapi.GetParameterInput) (*ssmapi.GetParameterOutput, error)
}

var _ SSM = (*ssmapi.Client)(nil)

// PoolsParameterVar names the SSM parameter (String or SecureString) that
// holds RUNNER_POOLS when the environment's ~4 KB is too small for the pools.
const PoolsParameterVar = "RUNNER_POOLS_PARAMETER"

// WithPoolsParameter returns get with RUNNER_POOLS read from the SSM
// parameter named by RUNNER_POOLS_PARAMETER, decrypted, when that variable
// is set; the parameter then wins over RUNNER_POOLS. Unset, it returns get
// as is and never calls SSM (client may be nil). It reads once, at start-up:
// a changed parameter reaches the functions at their next cold start (a
// re-read with a TTL would need the flows to take their pools through a
// function instead of a slice).
func WithPoolsParameter(ctx context.Context, client SSM, get Getenv) (Getenv, error) {
	name := strings.TrimSpace(get(PoolsParameterVar))
	if name == "" {
		return get, nil
	}
	fail := func(err error) (Getenv, error) {
		// The name as shownName writes it, in the text and in SSM's own
		// error, which quotes it: a secret pasted into the variable must
		// not reach the start-up error (printed on stderr as it is).
		return nil, &Error{Var: PoolsParameterVar, Err: fmt.Errorf("SSM parameter %s: %w", shownName(name), inputScrubbed{err, name})}
	}
	if client == nil {
		return fail(errors.New("no SSM client"))
	}
	out, err := client.GetParameter(ctx, &ssmapi.GetParameterInput{Name: name, WithDecryption: true})
	if err != nil {
		return fail(err)
	}
	if out.Parameter == nil || strings.TrimSpace(out.Parameter.Value) == "" {
		return fail(errors.New("holds no value"))
	}
	pools := out.Parameter.Value
	return func(k string) string {
		if k == "RUNNER_POOLS" {
			return pools
		}
		return get(k)
	}, nil
}

// StartTimeout bounds the start-up read of RUNNER_POOLS_PARAMETER, and
// StartAttemptTimeout each of its attempts.
const (
	StartTimeout        = 5 * time.Second
	StartAttemptTimeout = 2 * time.Second
)

// Start is a function's start-up read: its AWS config from the environment
// (shared/awsenv), RUNNER_POOLS from the SSM parameter RUNNER_POOLS_PARAMETER
// names when it names one, then its own settings through load (LoadClaimer,
// …). The functions that use pools start through it, so they read the
// parameter alike.
func Start[C any](ctx context.Context, get Getenv, load func(Getenv) (C, error)) (C, aws.Config, error) {
	var zero C
	awsCfg, err := awsenv.Load(get)
	if err != nil {
		return zero, aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	var client SSM
	if strings.TrimSpace(get(PoolsParameterVar)) != "" {
		// Bounded: a cold start has 10 s (Lambda's init limit), the
		// webhook's first delivery GitHub's 10 s; a stalled attempt is
		// cut and retried within StartTimeout.
		client = ssmapi.New(awsCfg, func(o *ssmapi.Options) { o.HTTPClient = awsenv.AttemptBound(StartAttemptTimeout) })
	}
	rctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	get, err = WithPoolsParameter(rctx, client, get)
	if err != nil {
		return zero, aws.Config{}, err
	}
	c, err := load(get)
	return c, awsCfg, err
}

// shownName is an SSM parameter name as a start-up error writes it: each
// '/'-separated part through redact.Input, so a path of ordinary names
// reads as it is, and a secret pasted into the variable (one long run of
// the credential alphabet) is masked.
func shownName(n string) string {
	parts := strings.Split(n, "/")
	for i, p := range parts {
		parts[i] = redact.Input(p)
	}
	return strings.Join(parts, "/")
}

// inputScrubbed is err with each occurrence of s in its text written as
// shownName writes it (AWS quotes the name it was asked for); err stays
// reachable (errors.As).
type inputScrubbed struct {
	err error
	s   string
}

func (e inputScrubbed) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.s, shownName(e.s))
}

func (e inputScrubbed) Unwrap() error { return e.err }
