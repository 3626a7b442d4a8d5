package provision

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
)

// jit is a stand-in JIT config distinctive enough that finding it anywhere
// (logs, inputs, errors) is a leak, and as long as GitHub's (4.1-4.3 KB: it
// carries a 2048-bit RSA key), over SSM's 4,096-character Standard tier.
var jit = "eyJKSVQtU0VDUkVULWRvLW5vdC1sb2cifQ" + strings.Repeat("QUJDREVGR0hJSktMTU5PUA", 4250/22)

func ec2Pool() pool.Pool {
	return pool.Pool{
		Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{
			Type: pool.ProvisionerEC2, LaunchTemplate: "lt-0123456789abcdef0", LaunchTemplateVersion: "7",
			Subnets: []string{"subnet-a", "subnet-b", "subnet-c"}, InstanceTypes: []string{"c7g.large", "m7g.large"},
		},
	}
}

func dispatchPool(queueURL string) pool.Pool {
	return pool.Pool{
		Name: "mac", Labels: []string{"self-hosted", "macOS"}, Scope: pool.ScopeOrg, RunnerGroupID: 1,
		Provisioner: pool.Provisioner{Type: pool.ProvisionerDispatch, QueueURL: queueURL},
	}
}

func request(p pool.Pool, jobID int64) Request {
	return Request{
		JobID: jobID, RunID: 9000 + jobID, Repo: "octo/hello", Pool: p,
		RunnerName: fmt.Sprintf("%s-%d", p.Name, jobID), JITConfig: jit,
	}
}

// logBuffer returns a JSON slog logger writing into the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, nil)), &buf
}

func TestRequestRedactsJITConfig(t *testing.T) {
	t.Parallel()
	req := request(ec2Pool(), 42)
	log, buf := logBuffer()
	log.Info("decision", "req", req)
	tests := []struct {
		name string
		got  string
	}{
		{name: "%v", got: fmt.Sprintf("%v", req)},
		{name: "%+v", got: fmt.Sprintf("%+v", req)},
		{name: "%#v", got: fmt.Sprintf("%#v", req)},
		{name: "%s", got: fmt.Sprintf("%s", req)},
		{name: "slog", got: buf.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if strings.Contains(tt.got, jit) {
				t.Fatalf("JIT config leaked: %s", tt.got)
			}
			if !strings.Contains(tt.got, "REDACTED") || !strings.Contains(tt.got, "42") {
				t.Errorf("got %s, want the job id and a redaction marker", tt.got)
			}
		})
	}
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mutate func(*Request)
		ok     bool
	}{
		{name: "valid", mutate: func(*Request) {}, ok: true},
		{name: "zero job id", mutate: func(r *Request) { r.JobID = 0 }},
		{name: "repo without owner", mutate: func(r *Request) { r.Repo = "hello" }},
		{name: "no pool", mutate: func(r *Request) { r.Pool = pool.Pool{} }},
		{name: "runner name with slash", mutate: func(r *Request) { r.RunnerName = "linux/42" }},
		{name: "empty runner name", mutate: func(r *Request) { r.RunnerName = "" }},
		{name: "empty jit config", mutate: func(r *Request) { r.JITConfig = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := request(ec2Pool(), 42)
			tt.mutate(&req)
			err := req.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate: got %v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrInvalidRequest) {
					t.Errorf("got %v, want it to wrap ErrInvalidRequest", err)
				}
				if strings.Contains(err.Error(), jit) {
					t.Errorf("JIT config in error: %v", err)
				}
			}
		})
	}
}

func TestFleetKey(t *testing.T) {
	t.Parallel()
	spot, od := ec2api.CapacitySpot, ec2api.CapacityOnDemand
	long := strings.Repeat("p", 40)
	got := FleetKey(long, 9223372036854775807, jit, spot)
	if len(got) > 64 || !strings.HasPrefix(got, "ghclaim-9223372036854775807-") || !strings.HasSuffix(got, "-spot") {
		t.Errorf("got %q (%d characters), want ghclaim-<job>-<digest>-spot within EC2's 64", got, len(got))
	}
	if again := FleetKey(long, 9223372036854775807, jit, spot); again != got {
		t.Errorf("not stable: %q then %q", got, again)
	}
	for name, other := range map[string]string{
		"on-demand":            FleetKey(long, 9223372036854775807, jit, od),
		"another pool":         FleetKey(long+"x", 9223372036854775807, jit, spot),
		"another job":          FleetKey(long, 1, jit, spot),
		"another registration": FleetKey(long, 9223372036854775807, "fresh-"+jit, spot),
	} {
		if other == got {
			t.Errorf("%s shares the token %q", name, got)
		}
	}
}

// recorder is a Provisioner that records which requests reached it.
type recorder struct{ provisioned, cleaned []int64 }

func (r *recorder) Provision(_ context.Context, req Request) (Result, error) {
	r.provisioned = append(r.provisioned, req.JobID)
	return Result{MessageID: "m"}, nil
}

func (r *recorder) Cleanup(_ context.Context, req Request) error {
	r.cleaned = append(r.cleaned, req.JobID)
	return nil
}

func TestRegistryRoutesByProvisionerType(t *testing.T) {
	t.Parallel()
	ec2Rec, dispatchRec := &recorder{}, &recorder{}
	reg := Registry{pool.ProvisionerEC2: ec2Rec, pool.ProvisionerDispatch: dispatchRec}
	ctx := context.Background()

	if _, err := reg.Provision(ctx, request(ec2Pool(), 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Provision(ctx, request(dispatchPool("q"), 2)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Cleanup(ctx, request(dispatchPool("q"), 3)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ec2Rec.provisioned) != "[1]" || fmt.Sprint(dispatchRec.provisioned) != "[2]" || fmt.Sprint(dispatchRec.cleaned) != "[3]" {
		t.Errorf("routing: ec2 got %v, dispatch got %v/%v; want [1], [2]/[3]", ec2Rec.provisioned, dispatchRec.provisioned, dispatchRec.cleaned)
	}

	odd := ec2Pool()
	odd.Provisioner.Type = "k8s"
	if _, err := reg.Select(odd); !errors.Is(err, ErrNoProvisioner) {
		t.Errorf("Select(k8s): got %v, want ErrNoProvisioner", err)
	}
	if _, err := (Registry{pool.ProvisionerEC2: ec2Rec}).Provision(ctx, request(dispatchPool("q"), 4)); !errors.Is(err, ErrNoProvisioner) {
		t.Errorf("Provision without a dispatch adapter: got %v, want ErrNoProvisioner", err)
	}
}
