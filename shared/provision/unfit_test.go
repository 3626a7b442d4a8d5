package provision

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/failure"
)

// TestUnfitLaunchTemplateFailsTheJob: a launch template whose machines
// cannot run a runner of ours (instance metadata tags off: the boot script
// cannot read its runner name) or can never be cleaned up (shutdown
// behaviour stop: a runner powers its machine off, and a stopped machine
// is listed by no one), as one made for the release at 674a79e is (it set
// both on RunInstances, which an instant fleet cannot), fails the job at
// once, naming the template and each fix, and launches nothing. Before,
// every attempt launched machines that powered off at boot and stayed,
// stopped, for ever, and the job was abandoned after its replacements.
func TestUnfitLaunchTemplateFailsTheJob(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		data ec2api.LaunchTemplateData
		want []string
	}{
		{"made for the release", ec2api.LaunchTemplateData{}, []string{"InstanceMetadataTags: enabled", "shutdown behaviour is stop, EC2's default"}},
		{"shutdown stop", ec2api.LaunchTemplateData{InstanceInitiatedShutdownBehavior: "stop", MetadataOptions: fitTemplate.MetadataOptions},
			[]string{"shutdown behaviour is stop (InstanceInitiatedShutdownBehavior: terminate)"}},
		{"metadata endpoint off", ec2api.LaunchTemplateData{InstanceInitiatedShutdownBehavior: "terminate",
			MetadataOptions: ec2api.MetadataOptions{HTTPEndpoint: "disabled", InstanceMetadataTags: "enabled"}}, []string{"HttpEndpoint: enabled"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setupEC2(t)
			f.inst.template = &tt.data
			_, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42))
			if !errors.Is(err, ErrUnfitTemplate) || failure.Classify(err).Class != failure.NonRetryable {
				t.Fatalf("Provision: %v (class %s), want ErrUnfitTemplate, not retryable", err, failure.Classify(err).Class)
			}
			for _, w := range append(tt.want, "lt-0123456789abcdef0", "pool linux") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(f.inst.fleets) != 0 {
				t.Errorf("%d fleets launched from an unfit template", len(f.inst.fleets))
			}
		})
	}
}

// TestFitLaunchTemplateIsReadOncePerTTL: a version found fit is trusted
// for fitTTL (one EC2 read per template version and process), then read
// again, so $Default moved to an unfit version is caught.
func TestFitLaunchTemplateIsReadOncePerTTL(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	f.adapter.now = func() time.Time { return now }
	for id := int64(1); id <= 3; id++ {
		if _, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 100+id)); err != nil {
			t.Fatal(err)
		}
	}
	if f.inst.versionReads != 1 {
		t.Fatalf("%d reads of the template for 3 launches within its TTL, want 1", f.inst.versionReads)
	}
	now = now.Add(fitTTL)
	f.inst.template = &ec2api.LaunchTemplateData{}
	if _, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 200)); !errors.Is(err, ErrUnfitTemplate) || f.inst.versionReads != 2 {
		t.Errorf("after the TTL, an unfit $Default: %v after %d reads, want ErrUnfitTemplate after 2", err, f.inst.versionReads)
	}
}

// TestUncheckedTemplateStillLaunches: a role that may not read the
// template (an SCP, a hand-made role) launches unchecked, with a warning
// naming the permission, instead of failing every job of the pool; a
// template that does not exist still fails the job.
func TestUncheckedTemplateStillLaunches(t *testing.T) {
	t.Parallel()
	f := setupEC2(t)
	f.inst.versionErr = provisiontest.ClientError("EC2", "DescribeLaunchTemplateVersions", "UnauthorizedOperation", "You are not authorized to perform this operation.")
	if res, err := f.adapter.Provision(context.Background(), request(ec2Pool(), 42)); err != nil || res.InstanceID == "" {
		t.Fatalf("Provision without the read: %+v, %v; want launched", res, err)
	}
	if !strings.Contains(f.logs.String(), "ec2:DescribeLaunchTemplateVersions") {
		t.Errorf("no warning names the permission: %s", f.logs.String())
	}
	g := setupEC2(t)
	g.inst.versionErr = provisiontest.ClientError("EC2", "DescribeLaunchTemplateVersions", "InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID lt-0123456789abcdef0, does not exist.")
	_, err := g.adapter.Provision(context.Background(), request(ec2Pool(), 43))
	if err == nil || failure.Classify(err).Class != failure.NonRetryable || len(g.inst.fleets) != 0 {
		t.Errorf("a missing template: %v (class %s), %d fleets; want the job failed, nothing launched", err, failure.Classify(err).Class, len(g.inst.fleets))
	}
}
