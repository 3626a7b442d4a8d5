package wire_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/config"
	"github.com/ghclaim/ghclaim/shared/wire"
	"github.com/ghclaim/ghclaim/shared/wire/claimer"
	"github.com/ghclaim/ghclaim/shared/wire/janitor"
	"github.com/ghclaim/ghclaim/shared/wire/reclaimer"
	"github.com/ghclaim/ghclaim/shared/wire/redeliverer"
	"github.com/ghclaim/ghclaim/shared/wire/webhook"
)

// full is an environment every function starts from. The endpoint is a
// closed port: wiring makes no AWS call, and a test that made one would
// fail instead of reaching out.
func full() map[string]string {
	return map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1",
		"TABLE_NAME":       "jobs", "CLAIMS_QUEUE_URL": "http://127.0.0.1:1/000000000000/claims",
		"RUNNER_POOLS":   `[{"name":"linux","labels":["self-hosted","linux"],"scope":"repo","runner_group_id":1,"provisioner":{"type":"dispatch","queue_url":"http://127.0.0.1:1/000000000000/d"}}]`,
		"WEBHOOK_SECRET": "wire-test-secret",
		"GITHUB_APP_ID":  "42", "GITHUB_APP_PRIVATE_KEY": "not read while wiring",
	}
}

// wiring is one function's wiring, its result reduced to "is there one".
type wiring struct {
	name string
	new  func(context.Context, wire.Env) (bool, error)
	// required: each variable whose absence must fail the wiring, and the
	// variable the error must name (an App key or webhook secret is
	// required as its ARN, the literal being the local-run fallback).
	required map[string]string
}

func wirings() []wiring {
	aws := map[string]string{"AWS_REGION": "AWS_REGION", "AWS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY"}
	with := func(extra ...string) map[string]string {
		m := map[string]string{}
		for k, v := range aws {
			m[k] = v
		}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	const key = "GITHUB_APP_PRIVATE_KEY"
	return []wiring{
		{
			name: "webhook",
			new: func(ctx context.Context, e wire.Env) (bool, error) {
				h, err := webhook.New(ctx, e)
				return h != nil, err
			},
			required: with("TABLE_NAME", "TABLE_NAME", "CLAIMS_QUEUE_URL", "CLAIMS_QUEUE_URL", "RUNNER_POOLS", "RUNNER_POOLS", "WEBHOOK_SECRET", "WEBHOOK_SECRET_ARN"),
		},
		{
			name: "claimer",
			new: func(ctx context.Context, e wire.Env) (bool, error) {
				h, err := claimer.New(ctx, e)
				return h != nil, err
			},
			required: with("TABLE_NAME", "TABLE_NAME", "CLAIMS_QUEUE_URL", "CLAIMS_QUEUE_URL", "RUNNER_POOLS", "RUNNER_POOLS", "GITHUB_APP_ID", "GITHUB_APP_ID", key, key+"_ARN"),
		},
		{
			name: "reclaimer",
			new: func(ctx context.Context, e wire.Env) (bool, error) {
				h, err := reclaimer.New(ctx, e)
				return h != nil, err
			},
			required: with("TABLE_NAME", "TABLE_NAME", "CLAIMS_QUEUE_URL", "CLAIMS_QUEUE_URL", "RUNNER_POOLS", "RUNNER_POOLS", "GITHUB_APP_ID", "GITHUB_APP_ID", key, key+"_ARN"),
		},
		{
			name: "janitor",
			new: func(ctx context.Context, e wire.Env) (bool, error) {
				h, err := janitor.New(ctx, e)
				return h != nil, err
			},
			required: with("TABLE_NAME", "TABLE_NAME", "RUNNER_POOLS", "RUNNER_POOLS", "GITHUB_APP_ID", "GITHUB_APP_ID", key, key+"_ARN"),
		},
		{
			name: "redeliverer",
			new: func(ctx context.Context, e wire.Env) (bool, error) {
				h, err := redeliverer.New(ctx, e)
				return h != nil, err
			},
			required: with("TABLE_NAME", "TABLE_NAME", "GITHUB_APP_ID", "GITHUB_APP_ID", key, key+"_ARN"),
		},
	}
}

func envOf(vars map[string]string, out *bytes.Buffer) wire.Env {
	return wire.Env{
		Getenv: func(k string) string { return vars[k] },
		Out:    out,
		Now:    func() time.Time { return time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC) },
	}
}

// TestWiringStartsFromAFullEnvironment: each function wires from the
// variables it documents, without an AWS call and without writing a line;
// an Env missing a field (main or a test forgot it) fails at wiring, naming
// the field, instead of panicking at the first log line.
func TestWiringStartsFromAFullEnvironment(t *testing.T) {
	t.Parallel()
	for _, w := range wirings() {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			ok, err := w.new(context.Background(), envOf(full(), &out))
			if err != nil || !ok {
				t.Fatalf("got (%v, %v), want a handler and no error", ok, err)
			}
			if out.Len() != 0 {
				t.Errorf("wiring wrote %q, want nothing", out.String())
			}
			e := envOf(full(), &out)
			e.Out, e.Now = nil, nil
			if _, err := w.new(context.Background(), e); err == nil || !strings.Contains(err.Error(), "Env.Out") || !strings.Contains(err.Error(), "Env.Now") {
				t.Errorf("without Env.Out and Env.Now: got %v, want an error naming both", err)
			}
		})
	}
}

// TestWiringNamesAMissingVariable: without a required variable a function
// does not start, and its error names the variable.
func TestWiringNamesAMissingVariable(t *testing.T) {
	t.Parallel()
	for _, w := range wirings() {
		for _, missing := range slices.Sorted(func(yield func(string) bool) {
			for k := range w.required {
				if !yield(k) {
					return
				}
			}
		}) {
			want := w.required[missing]
			t.Run(w.name+"/"+missing, func(t *testing.T) {
				t.Parallel()
				vars := full()
				delete(vars, missing)
				var out bytes.Buffer
				ok, err := w.new(context.Background(), envOf(vars, &out))
				if err == nil || ok {
					t.Fatalf("without %s: got (%v, %v), want an error", missing, ok, err)
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("without %s: error %q does not name %s", missing, err, want)
				}
				var ce *config.Error
				if strings.HasPrefix(want, "AWS_") {
					if !strings.HasPrefix(err.Error(), "aws config: ") {
						t.Errorf("without %s: got %q, want an aws config error", missing, err)
					}
				} else if !errors.As(err, &ce) {
					t.Errorf("without %s: got %T %q, want a *config.Error", missing, err, err)
				}
			})
		}
	}
}

// TestRedelivererReadsNoPoolsParameter: the redeliverer takes no pools, so
// a RUNNER_POOLS_PARAMETER in its environment (a template default) is not
// read: no SSM call at start-up (the endpoint here is a closed port).
func TestRedelivererReadsNoPoolsParameter(t *testing.T) {
	t.Parallel()
	vars := full()
	vars[config.PoolsParameterVar] = "/ghclaim/pools"
	var out bytes.Buffer
	r, err := redeliverer.New(context.Background(), envOf(vars, &out))
	if err != nil || r == nil {
		t.Fatalf("got (%v, %v), want a redeliverer", r, err)
	}
}

// TestAWSHandsTheTransportItsOwnBodies: every client a wiring builds goes
// through Env.AWS, whose HTTP client is behind awsenv.OwnBodies (its
// behaviour is shared/awsenv's tests), whether a test chose the client or
// the SDK's own is used; wrapping it again changes nothing.
func TestAWSHandsTheTransportItsOwnBodies(t *testing.T) {
	t.Parallel()
	chosen := wire.Env{HTTPClient: &http.Client{Transport: &http.Transport{}}}.AWS(aws.Config{}).HTTPClient
	if awsenv.OwnBodies(chosen) != chosen || awsenv.IsDefault(chosen) {
		t.Fatalf("with a client chosen: %T, want it behind awsenv.OwnBodies", chosen)
	}
	own := (wire.Env{}).AWS(aws.Config{}).HTTPClient
	if awsenv.OwnBodies(own) != own || !awsenv.IsDefault(own) {
		t.Fatalf("with no client chosen: %T, want the SDK's own behind awsenv.OwnBodies", own)
	}
}
