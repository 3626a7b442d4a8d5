package redact_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/redact"
)

func TestString(t *testing.T) {
	t.Parallel()
	jit := "eyIuY3JlZGVudGlhbHMiOiJleUpFWVhSaElqcDdJa0YxZEdodmNtbDZZWFJwYjI1VmNtd2lPaUpvZEhSd2N6b3ZMM1p6ZEc5clpXNHVZV04wYVc5dWN5NW5hWFJvZFdKMWMyVnlZMjl"
	tests := []struct {
		name, in, want string
	}{
		{"installation token", "github 422: refused (Authorization: token ghs_000000000000000000000000000000000001)", "github 422: refused (Authorization: token [redacted])"},
		{"personal token", "bad ghp_AbCdEf0123456789abcdefABCDEF0123456789 here", "bad [redacted] here"},
		{"fine-grained token", "github_pat_11ABCDEFG0abcdefghijkl_mnopQRSTUV", "[redacted]"},
		{"app jwt", "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3OTYxMzQxNTYsImV4cCI6MTc5NjEzNDc1NiwiaXNzIjoiNTE1MSJ9.ohcfDlTGZuTqZZUF", "Bearer [redacted]"},
		{"jit config quoted by AWS", "aws ValidationException: Value '" + jit + "' at 'value'", "aws ValidationException: Value '[redacted]' at 'value'"},
		{"pem key", "key -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY----- end", "key [redacted] end"},
		{"cut pem key", "key -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "key [redacted]"},
		{"url path kept", "GET http://127.0.0.1:4/repos/octo/app/actions/runners/generate-jitconfig: 404 Not Found", "GET http://127.0.0.1:4/repos/octo/app/actions/runners/generate-jitconfig: 404 Not Found"},
		{"uuid kept", "message e2c2a976-a5e7-4cd5-88a0-41979c3e51ef", "message e2c2a976-a5e7-4cd5-88a0-41979c3e51ef"},
		{"aws request id kept", "RequestID: 4442587F-A3B1-4C7E-9D0E-1F2A3B4C5D6E, api error", "RequestID: 4442587F-A3B1-4C7E-9D0E-1F2A3B4C5D6E, api error"},
		{"arn kept", "arn:aws:ssm:us-east-1:123456789012:parameter/ghclaim/runner/linux-1001", "arn:aws:ssm:us-east-1:123456789012:parameter/ghclaim/runner/linux-1001"},
		{"short", "ghs_", "ghs_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := redact.String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if strings.Contains(got, "ghs_0") || strings.Contains(got, "eyJhbGci") {
				t.Errorf("String(%q) = %q still holds a credential", tt.in, got)
			}
		})
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	if redact.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
	inner := errors.New("list hook deliveries: 502 (Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiI1MTUxIn0.c2lnbmF0dXJl)")
	err := redact.Error(fmt.Errorf("redeliver: %w", inner))
	if got, want := err.Error(), "redeliver: list hook deliveries: 502 (Authorization: Bearer [redacted])"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, inner) {
		t.Error("errors.Is no longer finds the wrapped error")
	}
}

func TestInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"lower-case hex webhook secret", `"5ec5ca9e0f1b2c3d4e5f60718293a4b5c6d7e8f9" is not an integer ≥ 1`, `"[redacted]" is not an integer ≥ 1`},
		{"pem key", `"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\n-----END RSA PRIVATE KEY-----" is not an integer`, `"[redacted]" is not an integer`},
		{"escaped pem body", `"MIIEpAIBAAKCAQEA0Z3VS5JJcds3xfn\nAbc" bad`, `"[redacted]\nAbc" bad`},
		{"duration kept", `"90x" is not a positive duration like 90m or 30s`, `"90x" is not a positive duration like 90m or 30s`},
		{"level kept", `"verbose": want debug, info, warn or error`, `"verbose": want debug, info, warn or error`},
		{"url kept", `"ghe.example.com/api/v3" is not an http(s) URL`, `"ghe.example.com/api/v3" is not an http(s) URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.Input(tt.in); got != tt.want {
				t.Errorf("Input(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	long := "BuildFarm-Ubuntu22-Large-29679449123"
	tests := []struct {
		name, in, want string
	}{
		{"long runner name", long, long},
		{"long pool name", "Ubuntu22-Large-Gpu-Runners-Fleet1", "Ubuntu22-Large-Gpu-Runners-Fleet1"},
		{"retry's runner name", long + "-r2", long + "-r2"},
		{"short", "linux-x64", "linux-x64"},
		{"repository", "ContosoCorp/Platform-Runner-Images2", "ContosoCorp/Platform-Runner-Images2"},
		{"two slashes", "ContosoCorp/Platform-Runner-Images2/x", "[redacted]"},
		{"empty owner", "/ContosoCorp-Platform-Runner-Images2", "[redacted]"},
		{"empty repository", "ContosoCorp-Platform-Runner-Images2/", "[redacted]"},
		{"token prefix inside a word", "Runners-Highs_Mem-Ubuntu22-Large1", "Runners-Highs_Mem-Ubuntu22-Large1"},
		{"jwt opening inside a word", "HeyJude-Ubuntu22-Large-29679449123", "HeyJude-Ubuntu22-Large-29679449123"},
		{"token after a dash", "BuildFarm-ghs_0000000000000000000000000001", "BuildFarm-[redacted]"},
		{"jwt after a dash", "BuildFarm-eyJhbGciOiJSUzI1NiJ9", "BuildFarm-[redacted]"},
		{"repository named with a leading dot", "ContosoCorp/.github-Private-Runners-Config2024", "ContosoCorp/.github-Private-Runners-Config2024"},
		{"owner with a leading dot", ".ContosoCorp/github-Private-Runners2", ".[redacted]"},
		{"jit config with one slash", "eyIuY3JlZGVudGlhbHMiOiJleUpFWVhSaElqcDdJa0YxZEdodmNtbDZZWFJwYjI1VmNtd2lPaUpvZEhSd2N6b3Zaa0/" + strings.Repeat("Ab1", 40), "[redacted]"},
		{"installation token", "ghs_000000000000000000000000000000000001", "[redacted]"},
		{"personal token", "ghp_AbCdEf0123456789abcdefABCDEF0123456789", "[redacted]"},
		{"fine-grained token", "github_pat_11ABCDEFG0abcdefghijkl_mnopQRSTUV", "[redacted]"},
		{"jwt", "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3OTYxMzQxNTZ9.ohcfDlTGZuTqZZUF", "[redacted]"},
		{"jit config", "eyIuY3JlZGVudGlhbHMiOiJleUpFWVhSaElqcDdJa0YxZEdodmNtbDZZWFJwYjI1VmNtd2lPaUpvZEhSd2N6b3Zaa0==", "[redacted]"},
		{"error text", "runner " + long + " is offline: Authorization: token ghs_0000000000000000000000000000000000001", "runner [redacted] is offline: Authorization: token [redacted]"},
		{"longer than a name", strings.Repeat("Ab1", 34), "[redacted]"},
		{"opening not a letter or digit", "-" + long, "[redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := redact.Name(tt.in); got != tt.want {
				t.Errorf("Name(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}
