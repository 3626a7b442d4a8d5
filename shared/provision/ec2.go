package provision

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/pool"
)

// Tag keys put on every instance and volume the EC2 adapter launches. The
// boot script reads TagRunnerName through IMDS; operators and the
// existing-instance lookup use TagJobID.
const (
	TagJobID      = "ghclaim:job-id"
	TagRunID      = "ghclaim:run-id"
	TagRepo       = "ghclaim:repo"
	TagRunnerName = "ghclaim:runner-name"
	TagPool       = "ghclaim:pool"
)

// Instances is the part of the EC2 API the EC2 adapter uses.
type Instances interface {
	RunInstances(ctx context.Context, params *ec2.RunInstancesInput, optFns ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, params *ec2.DescribeInstancesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, params *ec2.TerminateInstancesInput, optFns ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// Parameters is the part of the SSM API the EC2 adapter uses.
type Parameters interface {
	PutParameter(ctx context.Context, params *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	DeleteParameter(ctx context.Context, params *ssm.DeleteParameterInput, optFns ...func(*ssm.Options)) (*ssm.DeleteParameterOutput, error)
}

// EC2 launches one instance per job from the pool's launch template. The
// launch template carries the AMI, the instance profile, security groups and
// infra/runner/boot.sh as user data; this adapter adds only what is per job.
//
// Steps, each safe to repeat:
//  1. Look for a pending or running instance tagged with the job id; if one
//     exists, use it (Reused). This outlives the ClientToken's lifetime and
//     also covers emulators that ignore ClientToken. Stopping, stopped and
//     shutting-down machines are not reused: an ephemeral runner's machine
//     only powers off after its runner has exited, so it cannot take the job.
//  2. Otherwise RunInstances with ClientToken IdempotencyKey(pool, job): EC2
//     answers a repeated token with the first call's instance instead of a
//     second one. Every other argument is derived from the job and the pool
//     only, because EC2 rejects a reused token with different arguments
//     (IdempotentParameterMismatch). The pool can still change between two
//     attempts (an operator edits its subnets or instance types): then,
//     once the tag lookup confirms again that no machine of the job is
//     alive, it launches under LaunchKey, derived from the job, the old
//     token and the new arguments (see launch). When the token answers with a machine
//     that is already gone (the token outlives its instance by at least
//     24 h), it launches once more under RegistrationKey, a token of this
//     request's fresh registration, rather than report the dead machine.
//  3. Put the JIT config in the SSM SecureString ParameterName(runner name),
//     tagged TagInstanceARN = the instance's ARN (see putConfig for a
//     repeated attempt, which holds a freshly generated config and replaces
//     the stale one). Launching first is what makes the tag possible: the
//     runner role may read and delete a parameter only where that tag
//     equals ec2:SourceInstanceARN, the ARN of the instance whose role
//     credentials sign the request (IAM global condition keys,
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html,
//     "ec2:SourceInstanceArn"; ssm:GetParameter and ssm:DeleteParameter
//     accept aws:ResourceTag / ssm:resourceTag conditions on the parameter
//     resource, Service Authorization Reference, "Actions, resources, and
//     condition keys for AWS Systems Manager"). So a job on one runner
//     cannot read another runner's config, though parameter names are
//     predictable. The instance boots meanwhile and waits for its
//     parameter (infra/runner/boot.sh). PutParameter with Tags needs
//     ssm:AddTagsToResource as well (template.yaml grants it for this tag key only).
//     The tier is Intelligent-Tiering: GitHub's config carries a 2048-bit RSA
//     key and is 4.1-4.3 KB, over the Standard tier's 4,096 characters, which
//     AWS refuses with a ValidationException (a claim failed for good), so
//     SSM stores it as an Advanced parameter (8 KB). An Advanced parameter
//     costs $0.05 a month, prorated, while it exists; the instance deletes
//     it at boot and Cleanup on a failed claim, so each lives minutes.
//     Intelligent-Tiering rather than Advanced keeps a config that fits in
//     4 KB free.
//
// The instance shuts itself down when the runner exits, and
// InstanceInitiatedShutdownBehavior is set to terminate, so nothing is left
// running. Cleanup (a claim that ended without a runner, an abandoned
// attempt) terminates the job's pending or running instances itself rather
// than wait for one to find no config and power off: a machine whose
// runner is gone would otherwise boot and idle at the instance's price.
// The functions may terminate only instances that carry the TagJobID tag
// (template.yaml: an aws:ResourceTag condition). IMDSv2 is required and instance metadata tags are enabled on every
// launch (these three metadata options override the launch template's),
// because the boot script finds its runner name in its tags.
type EC2 struct {
	instances  Instances
	parameters Parameters
	region     string // of the EC2 client: the instances' ARNs
	log        *slog.Logger
}

var (
	_ Provisioner = (*EC2)(nil)
	_ Instances   = (*ec2.Client)(nil)
	_ Parameters  = (*ssm.Client)(nil)
)

// NewEC2 returns the EC2 adapter. log may be nil. The instances' Region,
// part of the ARN their JIT configs are tagged with, is the client's
// (instances has an Options method, as *ec2.Client does); Provision refuses
// to run without one.
func NewEC2(instances Instances, parameters Parameters, log *slog.Logger) *EC2 {
	e := &EC2{instances: instances, parameters: parameters, log: orDiscard(log)}
	if o, ok := instances.(interface{ Options() ec2.Options }); ok {
		e.region = o.Options().Region
	}
	return e
}

// Provision starts (or finds) the job's instance, then puts the JIT config
// in SSM tagged with that instance's ARN.
func (e *EC2) Provision(ctx context.Context, req Request) (Result, error) {
	if err := req.Validate(); err != nil {
		return Result{}, err
	}
	if req.Pool.Provisioner.Type != pool.ProvisionerEC2 {
		return Result{}, fmt.Errorf("%w: pool %q has provisioner type %q, want %q",
			ErrInvalidRequest, req.Pool.Name, req.Pool.Provisioner.Type, pool.ProvisionerEC2)
	}
	if e.region == "" {
		return Result{}, fmt.Errorf("%w: the EC2 client has no region, so the instance ARN its JIT config is tagged with is unknown", ErrInvalidRequest)
	}
	inst, reused, err := e.instance(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if err := e.putConfig(ctx, req, inst); err != nil {
		return Result{}, err
	}
	e.logged(ctx, req, inst.id, reused)
	return Result{InstanceID: inst.id, Reused: reused}, nil
}

// instance returns the job's live instance, launching it when there is none.
func (e *EC2) instance(ctx context.Context, req Request) (launched, bool, error) {
	if inst, err := e.existing(ctx, req.JobID); err != nil {
		return launched{}, false, fmt.Errorf("provision job %d: look for an existing instance: %w", req.JobID, err)
	} else if inst.id != "" {
		return inst, true, nil
	}

	in := runInstancesInput(req)
	inst, state, reused, err := e.launch(ctx, req, in)
	if err != nil {
		return launched{}, false, err
	}
	if !reused && !alive(state) {
		// The job's token already launched a machine that is gone (EC2
		// answers a repeated token with its first instance, in its current
		// state, for at least 24 h after termination), and the lookup found
		// no live one. This request carries a fresh registration, so launch
		// under a token of that registration: a repeat of this very
		// request still starts nothing new.
		dead := inst.id
		in.ClientToken = aws.String(RegistrationKey(req.Pool.Name, req.JobID, req.JITConfig))
		if inst, state, reused, err = e.launch(ctx, req, in); err != nil {
			return launched{}, false, err
		}
		if !reused && !alive(state) {
			return launched{}, false, fmt.Errorf("provision job %d: the instances of its client tokens are gone (%s, %s is %s)", req.JobID, dead, inst.id, state)
		}
	}
	return inst, reused, nil
}

// TagInstanceARN is the tag of a JIT config parameter naming the one
// instance allowed to read it (the runner role's IAM condition).
const TagInstanceARN = "ghclaim:instance-arn"

// putConfig writes the JIT config, tagged with inst's ARN, in one
// PutParameter: value and tag appear together, so the parameter is never
// readable by another instance, nor untagged. SSM refuses Tags with
// Overwrite, so a parameter left by an earlier attempt of the job
// (ParameterAlreadyExists) is deleted and written again; the instance
// waits for its parameter meanwhile. Retagging in place (AddTagsToResource
// then an overwrite) was not chosen: between the two calls the parameter
// carries either a stale config or a stale tag.
func (e *EC2) putConfig(ctx context.Context, req Request, inst launched) error {
	name := ParameterName(req.RunnerName)
	arn := e.instanceARN(inst)
	in := &ssm.PutParameterInput{
		Name:        aws.String(name),
		Value:       aws.String(req.JITConfig),
		Type:        ssmtypes.ParameterTypeSecureString,
		Tier:        ssmtypes.ParameterTierIntelligentTiering,
		Description: aws.String(fmt.Sprintf("ghclaim JIT runner config for job %d (%s); read and deleted by %s at boot", req.JobID, req.Repo, inst.id)),
		Tags:        []ssmtypes.Tag{{Key: aws.String(TagInstanceARN), Value: aws.String(arn)}},
	}
	_, err := e.parameters.PutParameter(ctx, in)
	var exists *ssmtypes.ParameterAlreadyExists
	if errors.As(err, &exists) {
		_, err = e.parameters.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)})
		var notFound *ssmtypes.ParameterNotFound
		if err != nil && !errors.As(err, &notFound) {
			return fmt.Errorf("provision job %d: replace parameter %s: delete: %w", req.JobID, name, err)
		}
		_, err = e.parameters.PutParameter(ctx, in)
	}
	if err != nil {
		return fmt.Errorf("provision job %d: put parameter %s: %w", req.JobID, name, err)
	}
	return nil
}

// launched is an instance of the job: its id and its owner account.
type launched struct{ id, owner string }

// instanceARN is the ARN that ec2:SourceInstanceARN carries in the
// instance's own requests: partition and Region from the client, account
// from the launch or lookup answer, so it costs no extra call.
func (e *EC2) instanceARN(inst launched) string {
	return "arn:" + Partition(e.region) + ":ec2:" + e.region + ":" + inst.owner + ":instance/" + inst.id
}

// Partition returns the AWS partition of region.
func Partition(region string) string {
	for _, p := range []struct{ prefix, partition string }{
		{"cn-", "aws-cn"}, {"us-gov-", "aws-us-gov"}, {"us-isob-", "aws-iso-b"}, {"us-iso-", "aws-iso"},
		{"eu-isoe-", "aws-iso-e"}, {"us-isof-", "aws-iso-f"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			return p.partition
		}
	}
	return "aws"
}

// codeIdempotentParameterMismatch is EC2's answer to a ClientToken used
// before with other arguments.
const codeIdempotentParameterMismatch = "IdempotentParameterMismatch"

// launch runs in. When EC2 refuses its ClientToken because an earlier call
// used it with other arguments (the pool's subnets, instance types or
// launch template changed between two attempts of the job), it looks for a
// live machine of the job once more, because the tag lookup before the
// launch may have missed a machine started moments ago (DescribeInstances
// is eventually consistent), and reuses it (reused). Only when there is
// none does it launch under LaunchKey, a token of the job's old token and
// the new arguments: every attempt with these arguments computes the same
// one, so a repeat still starts nothing new, and a machine under the old
// token is not alive, so the job still has at most one.
func (e *EC2) launch(ctx context.Context, req Request, in *ec2.RunInstancesInput) (inst launched, state ec2types.InstanceStateName, reused bool, err error) {
	inst, state, err = e.run(ctx, req, in)
	var api smithy.APIError
	if err == nil || !errors.As(err, &api) || api.ErrorCode() != codeIdempotentParameterMismatch {
		return inst, state, false, err
	}
	live, lerr := e.existing(ctx, req.JobID)
	if lerr != nil {
		return launched{}, "", false, fmt.Errorf("provision job %d: look for an instance after a client token mismatch: %w", req.JobID, lerr)
	}
	if live.id != "" {
		return live, "", true, nil
	}
	old := aws.ToString(in.ClientToken)
	token, kerr := LaunchKey(req.JobID, old, in)
	if kerr != nil {
		return launched{}, "", false, fmt.Errorf("provision job %d: %w", req.JobID, kerr)
	}
	in.ClientToken = aws.String(token)
	e.log.LogAttrs(ctx, slog.LevelInfo, "client token reused with other launch arguments: new token",
		slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
		slog.String("old_token", old), slog.String("token", aws.ToString(in.ClientToken)))
	inst, state, err = e.run(ctx, req, in)
	return inst, state, false, err
}

// LaunchKey is the ClientToken of a launch of jobID whose earlier token
// was used with other arguments: "ghclaim-<job_id>-<digest of the old
// token and the arguments of in, ClientToken aside>". It is a function of
// the job and the launch only, so every attempt agrees on it.
func LaunchKey(jobID int64, oldToken string, in *ec2.RunInstancesInput) (string, error) {
	args := *in
	args.ClientToken = nil
	b, err := json.Marshal(&args)
	if err != nil {
		return "", fmt.Errorf("encode launch arguments: %w", err)
	}
	return "ghclaim-" + strconv.FormatInt(jobID, 10) + "-" + shortHash(oldToken+"\n"+string(b)), nil
}

// run calls RunInstances and returns the instance and its state ("" when
// EC2 did not say).
func (e *EC2) run(ctx context.Context, req Request, in *ec2.RunInstancesInput) (launched, ec2types.InstanceStateName, error) {
	out, err := e.instances.RunInstances(ctx, in)
	if err != nil {
		return launched{}, "", fmt.Errorf("provision job %d: run instances from %s: %w", req.JobID, req.Pool.Provisioner.LaunchTemplate, err)
	}
	if len(out.Instances) == 0 || aws.ToString(out.Instances[0].InstanceId) == "" || aws.ToString(out.OwnerId) == "" {
		return launched{}, "", fmt.Errorf("provision job %d: run instances returned no instance or no owner", req.JobID)
	}
	i := out.Instances[0]
	var state ec2types.InstanceStateName
	if i.State != nil {
		state = i.State.Name
	}
	return launched{id: aws.ToString(i.InstanceId), owner: aws.ToString(out.OwnerId)}, state, nil
}

// alive reports whether a launched instance can still run the job; an
// unknown state is trusted (a fresh launch is pending).
func alive(s ec2types.InstanceStateName) bool {
	return s == "" || s == ec2types.InstanceStateNamePending || s == ec2types.InstanceStateNameRunning
}

// Cleanup deletes the job's SSM parameter, then terminates the job's
// pending or running instances (found by TagJobID, as Running finds them):
// the claim ended without a runner, so a machine of the job has nothing to
// run. Both steps are safe to repeat (nothing left is success). The caller
// must not clean up while the job's runner is busy: its machine is at work.
// With req.KeepMachines (the runner's state is unknown) only the parameter
// goes.
func (e *EC2) Cleanup(ctx context.Context, req Request) error {
	name := ParameterName(req.RunnerName)
	if !runnerNameRE.MatchString(req.RunnerName) {
		return fmt.Errorf("%w: runner name %q", ErrInvalidRequest, req.RunnerName)
	}
	_, err := e.parameters.DeleteParameter(ctx, &ssm.DeleteParameterInput{Name: aws.String(name)})
	var notFound *ssmtypes.ParameterNotFound
	if errors.As(err, &notFound) {
		err = nil // already read by the instance, or never written
	}
	if err != nil {
		return fmt.Errorf("clean up job %d: delete parameter %s: %w", req.JobID, name, err)
	}
	if req.KeepMachines {
		e.log.LogAttrs(ctx, slog.LevelInfo, "provision cleaned up",
			slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
			slog.String("runner_name", req.RunnerName), slog.String("parameter", name), slog.Bool("machines_kept", true))
		return nil
	}
	live, err := e.live(ctx, req.JobID)
	if err != nil {
		return fmt.Errorf("clean up job %d: find instances: %w", req.JobID, err)
	}
	ids := make([]string, 0, len(live))
	for _, inst := range live {
		ids = append(ids, inst.id)
	}
	if len(ids) > 0 {
		if _, err := e.instances.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
			return fmt.Errorf("clean up job %d: terminate %v: %w", req.JobID, ids, err)
		}
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "provision cleaned up",
		slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
		slog.String("runner_name", req.RunnerName), slog.String("parameter", name),
		slog.Any("terminated", ids))
	return nil
}

// Running returns the id of a pending or running instance of req's job, or "".
func (e *EC2) Running(ctx context.Context, req Request) (string, error) {
	inst, err := e.existing(ctx, req.JobID)
	if err != nil {
		return "", fmt.Errorf("find instance of job %d: %w", req.JobID, err)
	}
	return inst.id, nil
}

var _ Finder = (*EC2)(nil)

// existing returns a pending or running instance tagged with jobID, or the
// zero launched when there is none. With several (which only a launch
// outside ClientToken protection can cause) it picks the smallest id, so
// every attempt agrees.
func (e *EC2) existing(ctx context.Context, jobID int64) (launched, error) {
	all, err := e.live(ctx, jobID)
	if err != nil || len(all) == 0 {
		return launched{}, err
	}
	return slices.MinFunc(all, func(a, b launched) int { return strings.Compare(a.id, b.id) }), nil
}

// live returns every pending or running instance tagged with jobID.
func (e *EC2) live(ctx context.Context, jobID int64) ([]launched, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagJobID), Values: []string{strconv.FormatInt(jobID, 10)}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}}
	var all []launched
	for {
		out, err := e.instances.DescribeInstances(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if id := aws.ToString(i.InstanceId); id != "" {
					all = append(all, launched{id: id, owner: aws.ToString(r.OwnerId)})
				}
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	return all, nil
}

func (e *EC2) logged(ctx context.Context, req Request, instanceID string, reused bool) {
	e.log.LogAttrs(ctx, slog.LevelInfo, "provisioned",
		slog.Int64("job_id", req.JobID), slog.Int64("run_id", req.RunID),
		slog.String("pool", req.Pool.Name), slog.String("provisioner", pool.ProvisionerEC2),
		slog.String("runner_name", req.RunnerName), slog.String("instance_id", instanceID),
		slog.Bool("reused", reused))
}

// runInstancesInput builds the launch request. It is a pure function of the
// request so that a repeated attempt sends byte-identical arguments with the
// same ClientToken. It sets no UserData: the launch template's boot script
// stays in force, and the JIT config travels through SSM only.
func runInstancesInput(req Request) *ec2.RunInstancesInput {
	p := req.Pool.Provisioner
	lt := &ec2types.LaunchTemplateSpecification{Version: aws.String(cmp.Or(p.LaunchTemplateVersion, "$Default"))}
	if strings.HasPrefix(p.LaunchTemplate, "lt-") {
		lt.LaunchTemplateId = aws.String(p.LaunchTemplate)
	} else {
		lt.LaunchTemplateName = aws.String(p.LaunchTemplate)
	}
	tags := []ec2types.Tag{
		{Key: aws.String("Name"), Value: aws.String(req.RunnerName)},
		{Key: aws.String(TagJobID), Value: aws.String(strconv.FormatInt(req.JobID, 10))},
		{Key: aws.String(TagRunID), Value: aws.String(strconv.FormatInt(req.RunID, 10))},
		{Key: aws.String(TagRepo), Value: aws.String(req.Repo)},
		{Key: aws.String(TagRunnerName), Value: aws.String(req.RunnerName)},
		{Key: aws.String(TagPool), Value: aws.String(req.Pool.Name)},
	}
	in := &ec2.RunInstancesInput{
		MinCount:                          aws.Int32(1),
		MaxCount:                          aws.Int32(1),
		LaunchTemplate:                    lt,
		ClientToken:                       aws.String(IdempotencyKey(req.Pool.Name, req.JobID)),
		InstanceInitiatedShutdownBehavior: ec2types.ShutdownBehaviorTerminate,
		MetadataOptions: &ec2types.InstanceMetadataOptionsRequest{
			HttpEndpoint:         ec2types.InstanceMetadataEndpointStateEnabled,
			HttpTokens:           ec2types.HttpTokensStateRequired,
			InstanceMetadataTags: ec2types.InstanceMetadataTagsStateEnabled,
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: slices.Clone(tags)},
		},
	}
	if len(p.InstanceTypes) > 0 {
		in.InstanceType = ec2types.InstanceType(p.InstanceTypes[0])
	}
	if s := Subnet(p.Subnets, req.JobID); s != "" {
		in.SubnetId = aws.String(s)
	}
	return in
}

// Subnet picks one of subnets by job id (job id mod len), so consecutive jobs
// spread over the pool's subnets (and their availability zones) while every
// attempt for one job lands in the same subnet, as ClientToken requires.
// It returns "" when subnets is empty (the launch template decides).
func Subnet(subnets []string, jobID int64) string {
	if len(subnets) == 0 {
		return ""
	}
	i := jobID % int64(len(subnets))
	if i < 0 {
		i = -i
	}
	return subnets[i]
}
