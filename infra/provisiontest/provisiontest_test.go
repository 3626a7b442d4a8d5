package provisiontest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/infra/provisiontest"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// TestSSMValueLimits is the contract of both stand-ins: the transport in
// front of moto (through the real SDK client) and the in-memory check
// accept and refuse the same puts, with the same code, status and message.
func TestSSMValueLimits(t *testing.T) {
	t.Parallel()
	client := ssmapi.New(emulator.ForTest(t).ConfigForTest(t), provisiontest.StrictSSM)
	tests := []struct {
		name   string
		tier   string
		length int
		want   string // "" when AWS accepts; else a part of its message
	}{
		{name: "standard at its limit", tier: ssmapi.TierStandard, length: 4096},
		{name: "standard over its limit", tier: ssmapi.TierStandard, length: 4097, want: "Standard tier parameters support a maximum parameter value of 4096 characters"},
		{name: "default tier is standard", length: 4300, want: "maximum parameter value of 4096 characters"},
		{name: "advanced holds a jit config", tier: ssmapi.TierAdvanced, length: 4300},
		{name: "advanced at its limit", tier: ssmapi.TierAdvanced, length: 8192},
		{name: "advanced over its limit", tier: ssmapi.TierAdvanced, length: 8193, want: "8192 characters"},
		{name: "intelligent tiering takes advanced", tier: ssmapi.TierIntelligentTiering, length: 4300},
		{name: "intelligent tiering over advanced", tier: ssmapi.TierIntelligentTiering, length: 8193, want: "8192 characters"},
		{name: "unknown tier", tier: "Premium", length: 10, want: "at 'tier' failed to satisfy constraint"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &ssmapi.PutParameterInput{
				Name:  fmt.Sprintf("/provisiontest/limits-%d", i),
				Value: strings.Repeat("x", tt.length),
				Type:  ssmapi.TypeSecureString, Tier: tt.tier, Overwrite: true,
			}
			_, wire := client.PutParameter(context.Background(), in)
			local := provisiontest.CheckPutParameter(in)
			for _, got := range []struct {
				name string
				err  error
			}{{"moto through StrictSSM", wire}, {"CheckPutParameter", local}} {
				if tt.want == "" {
					if got.err != nil {
						t.Errorf("%s: got %v, want the put accepted", got.name, got.err)
					}
					continue
				}
				var api smithy.APIError
				var status interface{ HTTPStatusCode() int }
				switch {
				case !errors.As(got.err, &api) || api.ErrorCode() != "ValidationException":
					t.Errorf("%s: got %v, want a ValidationException", got.name, got.err)
				case !strings.Contains(api.ErrorMessage(), tt.want):
					t.Errorf("%s: message %q, want it to say %q", got.name, api.ErrorMessage(), tt.want)
				case !errors.As(got.err, &status) || status.HTTPStatusCode() != 400:
					t.Errorf("%s: got %v, want HTTP 400", got.name, got.err)
				}
			}
			if tt.want != "" && wire != nil && local != nil {
				var a, b smithy.APIError
				if errors.As(wire, &a) && errors.As(local, &b) && a.ErrorMessage() != b.ErrorMessage() {
					t.Errorf("messages differ:\nwire  %q\nlocal %q", a.ErrorMessage(), b.ErrorMessage())
				}
			}
			if tt.want != "" && wire != nil {
				// Refused means nothing stored, as on AWS.
				if _, err := client.GetParameter(context.Background(), &ssmapi.GetParameterInput{Name: in.Name}); err == nil {
					t.Errorf("parameter %s exists after a refused put", in.Name)
				}
			}
		})
	}
}

func TestEC2KitOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := ec2api.New(emulator.ForTest(t).ConfigForTest(t))
	subnets, err := provisiontest.Subnets(ctx, c)
	if err != nil || len(subnets) == 0 {
		t.Fatalf("Subnets: %v, %v", subnets, err)
	}
	imgs, err := provisiontest.Images(ctx, c)
	if err != nil || len(imgs) == 0 {
		t.Fatalf("Images: %v, %v", imgs, err)
	}
	lt, err := provisiontest.LaunchTemplate(ctx, c, "kit-template", "", "t4g.micro")
	if err != nil {
		t.Fatal(err)
	}
	lts, err := c.DescribeLaunchTemplates(ctx, &ec2api.DescribeLaunchTemplatesInput{LaunchTemplateIDs: []string{lt}})
	if err != nil || len(lts.LaunchTemplates) != 1 || lts.LaunchTemplates[0].LaunchTemplateName != "kit-template" {
		t.Fatalf("DescribeLaunchTemplates(%s): %+v, %v", lt, lts, err)
	}
	id, err := provisiontest.RunInstance(ctx, c, imgs[0], "t3.micro", []ec2api.Tag{{Key: "kit", Value: "yes"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{{Name: "tag:kit", Values: []string{"yes"}}}})
	if err != nil || len(out.Reservations) != 1 || out.Reservations[0].Instances[0].InstanceID != id ||
		out.Reservations[0].Instances[0].ImageID != imgs[0] || out.Reservations[0].OwnerID == "" {
		t.Fatalf("DescribeInstances by tag: %+v, %v; want %s of %s with its owner", out, err, id, imgs[0])
	}
	if _, err := c.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if st, err := provisiontest.State(ctx, c, id); err != nil || (st != ec2api.StateShuttingDown && st != ec2api.StateTerminated) {
		t.Errorf("state after TerminateInstances: %q, %v", st, err)
	}
	_, err = c.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{"i-00000000000000000"}})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != ec2api.CodeInstanceNotFound {
		t.Errorf("unknown instance: got %v, want %s", err, ec2api.CodeInstanceNotFound)
	}
}

// losing returns a configuration for the emulator that loses the answer
// to the first call of action (an SDK retry follows).
func losing(t *testing.T, action string) (aws.Config, *emulator.LoseFirstAnswer) {
	t.Helper()
	cfg := emulator.ForTest(t).ConfigForTest(t)
	lossy := &emulator.LoseFirstAnswer{Next: http.DefaultTransport.(*http.Transport).Clone(), Action: action}
	cfg.HTTPClient = &http.Client{Transport: lossy}
	return cfg, lossy
}

// TestRunInstanceStartsOneThroughARetry: the answer to RunInstance's
// launch is lost after the emulator started the machine. The client's
// retry carries the same ClientToken and starts nothing more, as on EC2
// (moto_atomic.py adds that to moto); before, it started a second machine
// with the same tags, which a test counting a tag's machines found. The
// same token with other arguments is refused, as EC2 refuses it.
func TestRunInstanceStartsOneThroughARetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, lossy := losing(t, "RunInstances")
	c := ec2api.New(cfg)
	tag := ec2api.Tag{Key: "retried", Value: emulator.StackName(t.Name())}
	id, err := provisiontest.RunInstance(ctx, c, "ami-03cf127a", "t3.micro", []ec2api.Tag{tag})
	if err != nil {
		t.Fatalf("RunInstance with its answer lost: %v", err)
	}
	if lossy.Lost() != 1 {
		t.Fatalf("the RunInstances answer was lost %d times, want 1 (the test did not exercise the retry)", lossy.Lost())
	}
	out, err := c.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{{Name: "tag:" + tag.Key, Values: []string{tag.Value}}}})
	var ids []string
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			ids = append(ids, inst.InstanceID)
		}
	}
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Errorf("machines tagged %s: %v, %v; want %s alone", tag.Value, ids, err, id)
	}

	run := func(instanceType string) error {
		p := url.Values{"ClientToken": {tag.Value}, "ImageId": {"ami-03cf127a"}, "InstanceType": {instanceType}, "MinCount": {"1"}, "MaxCount": {"1"}}
		return c.Call(ctx, "RunInstances", p, &struct{}{})
	}
	if err := run("t3.micro"); err != nil {
		t.Fatal(err)
	}
	var api smithy.APIError
	if err := run("t3.small"); !errors.As(err, &api) || api.ErrorCode() != "IdempotentParameterMismatch" {
		t.Errorf("the same ClientToken with another instance type: got %v, want IdempotentParameterMismatch", err)
	}
}

// TestPutParameterThroughARetry: the answer to a put without Overwrite is
// lost after the emulator stored the parameter; the SDK's retry finds it
// (ParameterAlreadyExists), which failed a test's setup. PutParameter
// knows its own first put; another value of the name is still refused.
func TestPutParameterThroughARetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, lossy := losing(t, "PutParameter")
	client := ssmapi.New(cfg)
	in := &ssmapi.PutParameterInput{Name: "/" + emulator.StackName(t.Name()), Value: "jit",
		Type: ssmapi.TypeSecureString, Tags: []ssmapi.Tag{{Key: "k", Value: "v"}}}
	if _, err := client.PutParameter(ctx, in); !ssmapi.IsCode(err, ssmapi.CodeParameterAlreadyExists) || lossy.Lost() != 1 {
		t.Fatalf("the client's put with its answer lost: %v (%d lost), want ParameterAlreadyExists from its retry", err, lossy.Lost())
	}
	if _, err := client.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: in.Name}); err != nil {
		t.Fatal(err)
	}
	cfg, lossy = losing(t, "PutParameter")
	client = ssmapi.New(cfg)
	if err := provisiontest.PutParameter(ctx, client, in); err != nil || lossy.Lost() != 1 {
		t.Fatalf("PutParameter with its answer lost: %v (%d lost), want it put", err, lossy.Lost())
	}
	other := *in
	other.Value = "another"
	if err := provisiontest.PutParameter(ctx, client, &other); !ssmapi.IsCode(err, ssmapi.CodeParameterAlreadyExists) {
		t.Errorf("PutParameter of another value over it: %v, want ParameterAlreadyExists", err)
	}
}

// TestLaunchTemplateThroughARetry: the answer to LaunchTemplate's create
// is lost after the emulator made the template. The client's retry
// carries the same ClientToken and gets the template; before, it failed
// on the name the first try took (AlreadyExistsException).
func TestLaunchTemplateThroughARetry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, lossy := losing(t, "CreateLaunchTemplate")
	c := ec2api.New(cfg)
	name := emulator.StackName(t.Name())
	id, err := provisiontest.LaunchTemplate(ctx, c, name, "ami-03cf127a", "t3.micro")
	if err != nil || lossy.Lost() != 1 {
		t.Fatalf("LaunchTemplate with its answer lost: %q, %v (%d lost), want the template", id, err, lossy.Lost())
	}
	lts, err := c.DescribeLaunchTemplates(ctx, &ec2api.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil || len(lts.LaunchTemplates) != 1 || lts.LaunchTemplates[0].LaunchTemplateID != id {
		t.Errorf("DescribeLaunchTemplates(%s): %+v, %v; want %s", name, lts, err, id)
	}
}
