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
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsrpc"
	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// Tag keys put on every instance the EC2 adapter launches (at launch: the
// only moment tags can be set without ec2:CreateTags). The boot script
// reads TagRunnerName through IMDS; the functions' IAM conditions and the
// janitor use TagJobID; the lookup of an attempt's machine uses TagJobID
// and TagRunnerName together (the runner name is per attempt, see
// job.RunnerNameAt); TagReplacement says which attempt, for operators.
// TagStack names the deployment (EC2.InStack): see OfStack. TagScope is
// where the runner was registered (pool.Where: the janitor looks for it
// there, whatever the pool's scope has become).
const (
	TagJobID       = "ghclaim:job-id"
	TagRunID       = "ghclaim:run-id"
	TagRepo        = "ghclaim:repo"
	TagRunnerName  = "ghclaim:runner-name"
	TagPool        = "ghclaim:pool"
	TagReplacement = "ghclaim:replacement"
	TagStack       = "ghclaim:stack"
	TagScope       = "ghclaim:scope"
)

// OfStack reports whether a machine or parameter whose TagStack tag is
// tagged belongs to the deployment named stack. Two stacks in one account
// and Region share EC2 and the /ghclaim/runners/ path, so each stack tags
// what it launches and writes, and its lookups, cleanups and janitor pass
// leave another stack's alone (template.yaml's conditions refuse the
// termination and the deletion too). Untagged ones (launched or written
// before stacks were tagged) count as everyone's, as they did then, so an
// upgrade strands nothing; an unnamed stack ("": a local run without
// GHCLAIM_STACK) sees everything.
func OfStack(tagged, stack string) bool {
	return stack == "" || tagged == "" || tagged == stack
}

// Instances is the part of the EC2 API the EC2 adapter uses
// (shared/ec2api's client).
type Instances interface {
	CreateFleet(ctx context.Context, in *ec2api.CreateFleetInput) (*ec2api.CreateFleetOutput, error)
	DescribeLaunchTemplateVersions(ctx context.Context, in *ec2api.DescribeLaunchTemplateVersionsInput) (*ec2api.DescribeLaunchTemplateVersionsOutput, error)
	DescribeInstances(ctx context.Context, in *ec2api.DescribeInstancesInput) (*ec2api.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2api.TerminateInstancesInput) (*ec2api.TerminateInstancesOutput, error)
}

// Parameters is the part of the SSM API the EC2 adapter uses.
type Parameters interface {
	PutParameter(ctx context.Context, params *ssmapi.PutParameterInput) (*ssmapi.PutParameterOutput, error)
	DeleteParameter(ctx context.Context, params *ssmapi.DeleteParameterInput) (*ssmapi.DeleteParameterOutput, error)
}

// EC2 launches one instance per job from the pool's launch template. The
// launch template carries the AMI, the instance profile, security groups and
// infra/runner/boot.sh as user data; this adapter adds only what is per job.
//
// Steps, each safe to repeat:
//  1. Look for a pending or running instance tagged with the job id and
//     the attempt's runner name; if one exists, use it (Reused). This is
//     the guard across retries of one attempt and also covers emulators
//     that ignore ClientToken. It is per attempt, not per job: a new
//     attempt (job.RunnerNameAt, after a replacement) must not reuse the
//     machine of a runner that another job took, which is at work on that
//     job. Stopping, stopped and
//     shutting-down machines are not reused: an ephemeral runner's machine
//     only powers off after its runner has exited, so it cannot take the job.
//  2. Otherwise CreateFleet type instant, one instance, per market of the
//     pool's capacity (spot, then on-demand) until one answers with an
//     instance, each with ClientToken FleetKey (see the package doc) and
//     arguments derived from the request only (fleetInput); a token reused
//     with other arguments is recovered as launch says. Then
//     DescribeInstances of that instance for its owner (an instant fleet's
//     answer has none), waiting while EC2 does not know it yet.
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
// The instance shuts itself down when the runner exits, and the launch
// template's shutdown behaviour terminate leaves nothing running. Cleanup (a claim that ended without a runner, an abandoned
// attempt) terminates the job's pending or running instances itself rather
// than wait for one to find no config and power off: a machine whose
// runner is gone would otherwise boot and idle at the instance's price.
// Like the lookup, Cleanup ends only the machines of req's attempt (its
// runner name): an earlier attempt's runner taken by another job keeps
// its machine until that job ends.
// The functions may terminate only instances that carry the TagJobID tag
// and no other stack's TagStack (template.yaml: aws:ResourceTag conditions). The launch template must
// require IMDSv2 and enable instance metadata tags (a fleet cannot
// override metadata options), because the boot script finds its runner
// name in its tags.
type EC2 struct {
	instances  Instances
	parameters Parameters
	region     string // of the EC2 client: the instances' ARNs
	stack      string // TagStack of what it launches and writes; "": none
	log        *slog.Logger
	sleep      func(context.Context, time.Duration) error // between reads of a fresh instance
	now        clock.Func

	// fitMu guards fitAt: when each launch template version (template
	// "|" version) was last found fit (fit).
	fitMu sync.Mutex
	fitAt map[string]time.Time
}

var (
	_ Provisioner = (*EC2)(nil)
	_ Instances   = (*ec2api.Client)(nil)
	_ Parameters  = (*ssmapi.Client)(nil)
)

// NewEC2 returns the EC2 adapter. log may be nil. The instances' Region,
// part of the ARN their JIT configs are tagged with, is the client's
// (instances has a Region method, as *ec2api.Client does); Provision
// refuses to run without one.
func NewEC2(instances Instances, parameters Parameters, log *slog.Logger) *EC2 {
	e := &EC2{instances: instances, parameters: parameters, log: orDiscard(log), sleep: clock.Sleep, now: clock.Or(nil), fitAt: map[string]time.Time{}}
	if r, ok := instances.(interface{ Region() string }); ok {
		e.region = r.Region()
	}
	return e
}

// InStack names the deployment (GHCLAIM_STACK): its launches and JIT
// configs are tagged TagStack = stack, and its lookups and cleanups skip
// the machines another stack tagged (OfStack). It returns e.
func (e *EC2) InStack(stack string) *EC2 {
	e.stack = stack
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
		if !reused {
			err = e.undo(ctx, req, inst.id, err)
		}
		return Result{}, err
	}
	e.logged(ctx, req, inst.id, reused)
	return Result{InstanceID: inst.id, Reused: reused}, nil
}

// instance returns the job's live instance, launching it when there is
// none: one instant fleet per purchase option of the pool, in order, until
// one answers with an instance.
func (e *EC2) instance(ctx context.Context, req Request) (launched, bool, error) {
	if inst, err := e.existing(ctx, req); err != nil {
		return launched{}, false, fmt.Errorf("provision job %d: look for an existing instance: %w", req.JobID, err)
	} else if inst.id != "" {
		return inst, true, nil
	}
	if err := e.fit(ctx, req); err != nil {
		return launched{}, false, err
	}
	var failed []ec2api.CreateFleetError
	for _, market := range Markets(req.Pool.Provisioner.Capacity) {
		if err := ctx.Err(); err != nil {
			// Out of time before the call: nothing launched, nothing to
			// settle (a replay would launch a machine only to end it).
			return launched{}, false, fmt.Errorf("provision job %d: launch from %s: %w", req.JobID, req.Pool.Provisioner.LaunchTemplate, err)
		}
		in := fleetInput(req, market, e.stack)
		out, reused, err := e.launch(ctx, req, in)
		if err != nil {
			return launched{}, false, e.unknownLaunch(ctx, req, in, err)
		}
		if reused.id != "" {
			return reused, true, nil
		}
		if id := fleetInstance(out); id != "" {
			inst, err := e.describe(ctx, req, id)
			if err != nil {
				err = e.undo(ctx, req, id, err)
			}
			return inst, false, err
		}
		// No capacity (or no permission) for any option of this market:
		// the fleet tried them all; the next market gets its turn.
		failed = append(failed, out.Errors...)
		e.log.LogAttrs(ctx, slog.LevelInfo, "no instance from fleet",
			slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
			slog.String("market", market), slog.String("errors", fleetErrors(out.Errors)))
	}
	return launched{}, false, fmt.Errorf("provision job %d: launch from %s: %w", req.JobID, req.Pool.Provisioner.LaunchTemplate, &FleetError{Errors: failed})
}

// Markets lists the purchase options tried, in order, for a pool's
// capacity: ec2api.CapacitySpot, ec2api.CapacityOnDemand.
func Markets(capacity string) []string {
	switch capacity {
	case pool.CapacitySpot:
		return []string{ec2api.CapacitySpot}
	case pool.CapacitySpotThenOnDemand:
		return []string{ec2api.CapacitySpot, ec2api.CapacityOnDemand}
	default:
		return []string{ec2api.CapacityOnDemand}
	}
}

// fleetInstance returns the instance an instant fleet launched, or "". An
// answer may carry both errors (options without capacity) and an instance:
// the instance counts.
func fleetInstance(out *ec2api.CreateFleetOutput) string {
	for _, i := range out.Instances {
		for _, id := range i.InstanceIDs {
			if id != "" {
				return id
			}
		}
	}
	return ""
}

// capacityCodes are the per-option errors of a fleet that mean "no
// capacity there now", which another option, market or a later attempt
// may have.
var capacityCodes = []string{
	"InsufficientInstanceCapacity", "InsufficientCapacity", "UnfulfillableCapacity",
	"InsufficientHostCapacity", "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow",
	// The account's on-demand quota (vCPUs, or instances on old accounts)
	// and a subnet out of addresses: both free up as machines end.
	"VcpuLimitExceeded", "InstanceLimitExceeded", "InsufficientFreeAddressesInSubnet",
}

// FleetError is the failure of a launch whose every option (instance type
// × subnet, every market) came back without an instance. It is a
// smithy.APIError: when any option lacked capacity, the code is that
// capacity error and the fault is the server's; otherwise the first
// option's. shared/failure classifies it by every option's code
// (OptionCodes): failed for good only when each option's code is
// (InvalidLaunchTemplateId.*, UnauthorizedOperation), so one type a zone
// does not offer (Unsupported) hides no server error or throttle of the
// others.
type FleetError struct {
	Errors []ec2api.CreateFleetError
}

var _ smithy.APIError = (*FleetError)(nil)

func (f *FleetError) capacity() string {
	for _, e := range f.Errors {
		if c := e.ErrorCode; slices.Contains(capacityCodes, c) {
			return c
		}
	}
	return ""
}

// ErrorCode implements smithy.APIError.
func (f *FleetError) ErrorCode() string {
	if c := f.capacity(); c != "" {
		return c
	}
	if len(f.Errors) > 0 && f.Errors[0].ErrorCode != "" {
		return f.Errors[0].ErrorCode
	}
	return "UnfulfillableCapacity"
}

// OptionCodes is every option's error code, in EC2's order: a launch is
// worth another attempt when any of them is (shared/failure decides).
func (f *FleetError) OptionCodes() []string {
	out := make([]string, 0, len(f.Errors))
	for _, e := range f.Errors {
		if e.ErrorCode != "" {
			out = append(out, e.ErrorCode)
		}
	}
	return out
}

// ErrorMessage implements smithy.APIError.
func (f *FleetError) ErrorMessage() string { return fleetErrors(f.Errors) }

// ErrorFault implements smithy.APIError.
func (f *FleetError) ErrorFault() smithy.ErrorFault {
	if f.capacity() != "" || len(f.Errors) == 0 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

func (f *FleetError) Error() string {
	return "no instance from any option: " + f.ErrorCode() + ": " + f.ErrorMessage()
}

// fleetErrors summarises per-option errors: "code (type in subnet): message; ...".
func fleetErrors(errs []ec2api.CreateFleetError) string {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.ErrorCode)
		if o := e.LaunchTemplateAndOverrides.Overrides; o.InstanceType != "" || o.SubnetID != "" {
			fmt.Fprintf(&b, " (%s in %s)", o.InstanceType, o.SubnetID)
		}
		if m := e.ErrorMessage; m != "" {
			b.WriteString(": " + m)
		}
	}
	return b.String()
}

// describe returns the launched instance's owner (part of its ARN; a fleet
// answer carries none), waiting while EC2's eventually consistent reads do
// not know the fresh instance yet (InvalidInstanceID.NotFound, or no
// reservation), at most describeWait, as the SDK's InstanceExists waiter
// did: the first wait describeMinDelay, doubling up to describeMaxDelay.
// An instance already gone is an error: its token answered with a machine
// launched earlier for the same registration, and a later attempt (a new
// registration, a new token) launches anew.
func (e *EC2) describe(ctx context.Context, req Request, id string) (launched, error) {
	var waited time.Duration
	var throttle error // the last read, when refused for the rate: the error a give-up reports
	for delay := describeMinDelay; ; delay = min(2*delay, describeMaxDelay) {
		out, err := e.instances.DescribeInstances(ctx, &ec2api.DescribeInstancesInput{InstanceIDs: []string{id}})
		before := throttle
		throttle = nil // the last answer decides how a give-up is reported
		if throttled(err) {
			throttle = err
		}
		var api smithy.APIError
		if err != nil && throttle == nil && (!errors.As(err, &api) || api.ErrorCode() != ec2api.CodeInstanceNotFound) {
			// A throttled read (RequestLimitExceeded: a burst of claims
			// spends the account's request tokens) is waited out like an
			// unknown instance: ended for it, the launched machine was lost.
			if before != nil && (ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
				// The claim's time ended inside a throttled read (the
				// client's own retry wait): the throttle is the cause.
				return launched{}, fmt.Errorf("provision job %d: describe launched instance %s: %w (then: %v)", req.JobID, id, before, err)
			}
			return launched{}, fmt.Errorf("provision job %d: describe launched instance %s: %w", req.JobID, id, err)
		}
		if err == nil {
			for _, r := range out.Reservations {
				for _, i := range r.Instances {
					if i.InstanceID != id {
						continue
					}
					if !alive(i.State.Name) {
						return launched{}, fmt.Errorf("provision job %d: the instance of its client token, %s, is %s", req.JobID, id, i.State.Name)
					}
					if r.OwnerID == "" {
						return launched{}, fmt.Errorf("provision job %d: instance %s has no owner", req.JobID, id)
					}
					return launched{id: id, owner: r.OwnerID}, nil
				}
			}
			if len(out.Reservations) > 0 {
				return launched{}, fmt.Errorf("provision job %d: launched instance %s not described", req.JobID, id)
			}
		}
		if waited >= describeWait {
			if throttle != nil {
				// Classified as the throttle (rate_limit: at least a
				// minute), not as an unknown instance.
				return launched{}, fmt.Errorf("provision job %d: describe launched instance %s, throttled, for %s: %w", req.JobID, id, waited, throttle)
			}
			return launched{}, fmt.Errorf("provision job %d: launched instance %s still unknown to DescribeInstances after %s", req.JobID, id, waited)
		}
		d := min(delay, describeWait-waited)
		if serr := e.sleep(ctx, d); serr != nil {
			if throttle != nil {
				// The claim's time ran out while the account's rate was
				// spent: the throttle is the cause (the context's end is
				// kept as text only, or it would classify as network).
				return launched{}, fmt.Errorf("provision job %d: describe launched instance %s: %w (waited %s: %v)", req.JobID, id, throttle, waited, serr)
			}
			return launched{}, fmt.Errorf("provision job %d: describe launched instance %s: %w", req.JobID, id, serr)
		}
		waited += d
	}
}

// describeWait bounds the wait for a fresh instance to be readable;
// describeMinDelay and describeMaxDelay are the SDK waiter's.
const (
	describeWait     = 2 * time.Minute
	describeMinDelay = 5 * time.Second
	describeMaxDelay = 120 * time.Second
)

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
	in := &ssmapi.PutParameterInput{
		Name:        name,
		Value:       req.JITConfig,
		Type:        ssmapi.TypeSecureString,
		Tier:        ssmapi.TierIntelligentTiering,
		Description: (fmt.Sprintf("ghclaim JIT runner config for job %d (%s); read and deleted by %s at boot", req.JobID, req.Repo, inst.id)),
		Tags:        []ssmapi.Tag{{Key: TagInstanceARN, Value: arn}},
	}
	if e.stack != "" {
		in.Tags = append(in.Tags, ssmapi.Tag{Key: TagStack, Value: e.stack})
	}
	put := func() error { _, err := e.parameters.PutParameter(ctx, in); return err }
	err := e.patient(ctx, put)
	if ssmapi.IsCode(err, ssmapi.CodeParameterAlreadyExists) {
		err = e.patient(ctx, func() error {
			_, err := e.parameters.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: name})
			return err
		})
		if err != nil && !ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
			return fmt.Errorf("provision job %d: replace parameter %s: delete: %w", req.JobID, name, err)
		}
		err = e.patient(ctx, put)
	}
	if err != nil {
		return fmt.Errorf("provision job %d: put parameter %s: %w", req.JobID, name, err)
	}
	return nil
}

// throttleWaits are the waits before each further try of an SSM call of
// the claim that met the account's request rate (Parameter Store's is
// shared by every caller in the account and Region, booting machines
// included), after the SDK's own three attempts: a burst of claims
// throttled for seconds once ended each launched machine (undo) and sent
// its job round the ladder to launch another.
var throttleWaits = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}

// patient runs call, and again after each of throttleWaits while it is
// throttled and the context has time; it returns the last error.
func (e *EC2) patient(ctx context.Context, call func() error) error {
	err := call()
	for _, d := range throttleWaits {
		if !throttled(err) || e.sleep(ctx, d) != nil {
			return err
		}
		err = call()
	}
	return err
}

// throttled reports whether err is an AWS service refusing for its request
// rate (SSM ThrottlingException, EC2 RequestLimitExceeded, ...).
func throttled(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "ThrottlingException", "Throttling", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled":
		return true
	}
	return false
}

// undo terminates instance id, which this call launched but could not give
// its config (the describe or the PutParameter after the launch failed, the
// invocation's time ran out, ...), and returns cause, with the termination's
// own failure if it failed. Left running, the machine would wait for a
// config that never comes while the next attempt, meeting the registration
// (409) offline with a machine of the job up, would take the machine for one
// that is booting with it and count the job claimed: the job would wait for
// the liveness check's runner start grace and a replacement. Terminated, the
// next attempt finds no machine, registers afresh and launches anew. The
// termination runs on its own short deadline, since cause is often the
// invocation's own deadline. A parameter the failed put may still have
// stored is replaced by the next attempt's put, or removed by the janitor.
func (e *EC2) undo(ctx context.Context, req Request, id string, cause error) error {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	return e.terminate(tctx, req, id, cause)
}

// terminate is undo's termination of id, under ctx (already bounded).
func (e *EC2) terminate(ctx context.Context, req Request, id string, cause error) error {
	attrs := []slog.Attr{slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
		slog.String("runner_name", req.RunnerName), slog.String("instance_id", id)}
	if err := e.terminateIDs(ctx, []string{id}); err != nil { // on undo's own deadline
		e.log.LogAttrs(ctx, slog.LevelWarn, "provision could not terminate the instance it launched without a config",
			append(attrs, slog.String("error", err.Error()))...)
		return fmt.Errorf("%w (terminating instance %s, launched without its config, failed too: %v)", cause, id, err)
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "provision terminated the instance it launched without a config", attrs...)
	return cause
}

// terminateIDs terminates ids in one call, asked again after each of
// terminateRetries while EC2 answers InvalidInstanceID.NotFound: an
// instance launched a moment ago may be unknown to TerminateInstances
// (EC2's eventual consistency: each API learns of a new resource at its
// own moment), which "does not mean that the instance is or will be
// terminated"; and one unknown id fails the whole call, ending none of the
// others
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_TerminateInstances.html).
func (e *EC2) terminateIDs(ctx context.Context, ids []string) error {
	var err error
	for _, d := range terminateRetries {
		_, err = e.instances.TerminateInstances(ctx, &ec2api.TerminateInstancesInput{InstanceIDs: ids})
		var api smithy.APIError
		if err == nil || !errors.As(err, &api) || api.ErrorCode() != ec2api.CodeInstanceNotFound {
			break
		}
		if e.sleep(ctx, d) != nil {
			break
		}
	}
	return err
}

// unknownLaunch settles a launch that failed without EC2's answer saying
// what happened (the invocation's time ran out, the connection broke, a
// server error after the retries): the fleet may have started a machine
// that nothing will give a config, and the next attempt would take that
// machine for one booting with it (see undo). The identical request, under
// the same ClientToken, gets EC2's first answer again and starts nothing
// new if the first one did; a machine it names is terminated. A refusal
// EC2 answered (a client fault, a throttle) launched nothing and is left
// as it is, unless the client had retried the call: an earlier attempt
// whose answer was lost may have launched. Replay and termination share undo's short deadline, and cause
// is returned either way.
func (e *EC2) unknownLaunch(ctx context.Context, req Request, in *ec2api.CreateFleetInput, cause error) error {
	// A refusal EC2 answered launched nothing, unless the client retried:
	// then an earlier attempt's answer was lost, and that one may have
	// launched (a reset connection, then throttles).
	// Attempts counts them whether they ran out or the client's retry
	// quota cut them short (a throttle storm drains it).
	var api smithy.APIError
	if errors.As(cause, &api) && (api.ErrorFault() == smithy.FaultClient || api.ErrorCode() == "RequestLimitExceeded") &&
		awsrpc.Attempts(cause) <= 1 {
		return cause
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	out, err := e.instances.CreateFleet(tctx, in)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "provision could not learn what a failed launch started",
			slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name), slog.String("runner_name", req.RunnerName),
			slog.String("error", err.Error()))
		return cause
	}
	id := fleetInstance(out)
	if id == "" {
		return cause
	}
	return e.terminate(tctx, req, id, cause)
}

// undoTimeout bounds undo's TerminateInstances: it must leave the
// invocation's reserve to the claim's hand-off.
const undoTimeout = 2 * time.Second

// terminateRetries are the waits after a TerminateInstances that did not
// know the fresh instance yet (InvalidInstanceID.NotFound), before the
// next ask; undoTimeout ends them sooner.
var terminateRetries = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 0}

// launched is an instance of the job: its id and its owner account.
type launched struct{ id, owner string }

// instanceARN is the ARN that ec2:SourceInstanceARN carries in the
// instance's own requests: partition and Region from the client, account
// from the launch or lookup answer, so it costs no extra call.
func (e *EC2) instanceARN(inst launched) string {
	return "arn:" + awsrpc.Partition(e.region) + ":ec2:" + e.region + ":" + inst.owner + ":instance/" + inst.id
}

// launch creates the instant fleet in. When EC2 refuses its ClientToken
// because an earlier call used it with other arguments (the pool's subnets,
// instance types or launch template changed between two calls for the same
// registration), it looks for a live machine of the job once more, because
// the tag lookup before the launch may have missed a machine started
// moments ago (DescribeInstances is eventually consistent), and returns it
// as reused. Only when there is none does it launch under LaunchKey, a
// token of the old token and the new arguments: every call with these
// arguments computes the same one, so a repeat still starts nothing new.
func (e *EC2) launch(ctx context.Context, req Request, in *ec2api.CreateFleetInput) (*ec2api.CreateFleetOutput, launched, error) {
	out, err := e.fleet(ctx, req, in)
	var api smithy.APIError
	if err == nil || !errors.As(err, &api) || api.ErrorCode() != ec2api.CodeIdempotentParameterMismatch {
		return out, launched{}, err
	}
	live, lerr := e.existing(ctx, req)
	if lerr != nil {
		return nil, launched{}, fmt.Errorf("provision job %d: look for an instance after a client token mismatch: %w", req.JobID, lerr)
	}
	if live.id != "" {
		return nil, live, nil
	}
	old := in.ClientToken
	token, kerr := LaunchKey(req.JobID, old, in)
	if kerr != nil {
		return nil, launched{}, fmt.Errorf("provision job %d: %w", req.JobID, kerr)
	}
	in.ClientToken = token
	e.log.LogAttrs(ctx, slog.LevelInfo, "client token reused with other launch arguments: new token",
		slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
		slog.String("old_token", old), slog.String("token", token))
	out, err = e.fleet(ctx, req, in)
	return out, launched{}, err
}

// LaunchKey is the ClientToken of a launch of jobID whose earlier token
// was used with other arguments: "ghclaim-<job_id>-<digest of the old
// token and the arguments of in, ClientToken aside>". It is a function of
// the job and the launch only, so every call agrees on it.
func LaunchKey(jobID int64, oldToken string, in *ec2api.CreateFleetInput) (string, error) {
	args := *in
	args.ClientToken = ""
	b, err := json.Marshal(&args)
	if err != nil {
		return "", fmt.Errorf("encode launch arguments: %w", err)
	}
	return "ghclaim-" + strconv.FormatInt(jobID, 10) + "-" + shortHash(oldToken+"\n"+string(b)), nil
}

// ErrUnfitTemplate is wrapped by the error of a launch from a launch
// template whose machines cannot run a runner of ours, or could never be
// cleaned up: the same template fails every attempt the same way, so the
// job fails at once (shared/failure: Permanent), naming the template and
// what to change, instead of launching machines that power off at boot.
var ErrUnfitTemplate error = permanent("launch template unfit for ghclaim")

// permanent is an error the retry classifier (shared/failure) treats as
// non-retryable through its Permanent method.
type permanent string

func (e permanent) Error() string { return string(e) }

// Permanent reports that retrying cannot help.
func (permanent) Permanent() bool { return true }

// fitTTL is how long a launch template version found fit is trusted: an
// operator who points $Default at an unfit version is caught within it.
const fitTTL = 5 * time.Minute

// fit checks, before a launch, that the pool's launch template version
// gives its machines what the boot script and the clean-up rely on, which
// an instant fleet cannot set: instance metadata tags (the boot script
// reads its runner name from them) and shutdown behaviour terminate (the
// runner powers its machine off when done; a stopped machine is listed by
// no one, and never cleaned up). A template made for the release at
// 674a79e, which set both on RunInstances, has neither. A version found
// fit is trusted for fitTTL; one EC2 read per template version and
// claimer process, at most, meanwhile.
func (e *EC2) fit(ctx context.Context, req Request) error {
	p := req.Pool.Provisioner
	version := cmp.Or(p.LaunchTemplateVersion, "$Default")
	key := p.LaunchTemplate + "|" + version
	now := e.now()
	e.fitMu.Lock()
	at, ok := e.fitAt[key]
	e.fitMu.Unlock()
	if ok && now.Sub(at) < fitTTL && !now.Before(at) {
		return nil
	}
	in := &ec2api.DescribeLaunchTemplateVersionsInput{Versions: []string{version}}
	if strings.HasPrefix(p.LaunchTemplate, "lt-") {
		in.LaunchTemplateID = p.LaunchTemplate
	} else {
		in.LaunchTemplateName = p.LaunchTemplate
	}
	out, err := e.instances.DescribeLaunchTemplateVersions(ctx, in)
	var api smithy.APIError
	if err != nil && errors.As(err, &api) && (api.ErrorCode() == "UnauthorizedOperation" || api.ErrorCode() == "AccessDenied") {
		// The check is ours, not the launch's: a role without the read
		// (an SCP, a hand-made role, IAM's propagation) must not fail
		// every job of the pool. Launched unchecked, and said so.
		e.log.LogAttrs(ctx, slog.LevelWarn, "launch template not checked: the role may not read it (ec2:DescribeLaunchTemplateVersions)",
			slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name), slog.String("launch_template", p.LaunchTemplate),
			slog.String("version", version), slog.String("code", api.ErrorCode()))
		return nil
	}
	if err != nil {
		return fmt.Errorf("provision job %d: read launch template %s version %s: %w", req.JobID, p.LaunchTemplate, version, err)
	}
	if len(out.Versions) != 1 {
		return fmt.Errorf("provision job %d: launch template %s version %s: EC2 described %d versions, want 1", req.JobID, p.LaunchTemplate, version, len(out.Versions))
	}
	if bad := TemplateProblems(out.Versions[0].Data); len(bad) > 0 {
		return fmt.Errorf("%w: launch template %s version %s of pool %s: %s (README: Your own launch templates)",
			ErrUnfitTemplate, p.LaunchTemplate, version, req.Pool.Name, strings.Join(bad, "; "))
	}
	e.fitMu.Lock()
	e.fitAt[key] = now
	e.fitMu.Unlock()
	return nil
}

// TemplateProblems lists what a launch template version's data lacks for a
// runner of ours, each with its fix (none: fit). The claimer refuses to
// launch from such a version; ghclaim doctor reports it.
func TemplateProblems(d ec2api.LaunchTemplateData) []string {
	var bad []string
	if d.MetadataOptions.HTTPEndpoint == "disabled" {
		bad = append(bad, "the instance metadata endpoint is disabled (MetadataOptions.HttpEndpoint: enabled): the boot script reads its runner name there")
	}
	if d.MetadataOptions.InstanceMetadataTags != "enabled" {
		bad = append(bad, "instance metadata tags are off (MetadataOptions.InstanceMetadataTags: enabled): the boot script reads its runner name from its tags")
	}
	if b := d.InstanceInitiatedShutdownBehavior; b != "terminate" {
		bad = append(bad, fmt.Sprintf("shutdown behaviour is %s (InstanceInitiatedShutdownBehavior: terminate): a runner powers its machine off when done, and a stopped machine is never cleaned up",
			cmp.Or(b, "stop, EC2's default")))
	}
	return bad
}

// fleet calls CreateFleet.
func (e *EC2) fleet(ctx context.Context, req Request, in *ec2api.CreateFleetInput) (*ec2api.CreateFleetOutput, error) {
	out, err := e.instances.CreateFleet(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("provision job %d: create fleet from %s: %w", req.JobID, req.Pool.Provisioner.LaunchTemplate, err)
	}
	return out, nil
}

// tagValue is the value of tags' key, or "".
func tagValue(tags []ec2api.Tag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return t.Value
		}
	}
	return ""
}

// alive reports whether a launched instance can still run the job; an
// unknown state is trusted (a fresh launch is pending).
func alive(s string) bool {
	return s == "" || s == ec2api.StatePending || s == ec2api.StateRunning
}

// Cleanup deletes the attempt's SSM parameter, then terminates the
// attempt's pending or running instances (found by TagJobID and
// TagRunnerName, as Running finds them):
// the claim ended without a runner, so a machine of the job has nothing to
// run. Both steps are safe to repeat (nothing left is success). The caller
// must not clean up while the job's runner is busy: its machine is at work.
// With req.KeepMachines (the runner's state is unknown) only the parameter
// goes. A machine launched a moment ago may be listed yet unknown to
// TerminateInstances for a while: asked again, as undo does (terminateIDs).
func (e *EC2) Cleanup(ctx context.Context, req Request) error {
	name := ParameterName(req.RunnerName)
	if !pool.ValidRunnerName(req.RunnerName) {
		return fmt.Errorf("%w: runner name %q", ErrInvalidRequest, req.RunnerName)
	}
	_, err := e.parameters.DeleteParameter(ctx, &ssmapi.DeleteParameterInput{Name: name})
	if ssmapi.IsCode(err, ssmapi.CodeParameterNotFound) {
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
	live, err := e.live(ctx, req)
	if err != nil {
		return fmt.Errorf("clean up job %d: find instances: %w", req.JobID, err)
	}
	ids := make([]string, 0, len(live))
	for _, inst := range live {
		ids = append(ids, inst.id)
	}
	if len(ids) > 0 {
		if err := e.terminateIDs(ctx, ids); err != nil {
			return fmt.Errorf("clean up job %d: terminate %v: %w", req.JobID, ids, err)
		}
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "provision cleaned up",
		slog.Int64("job_id", req.JobID), slog.String("pool", req.Pool.Name),
		slog.String("runner_name", req.RunnerName), slog.String("parameter", name),
		slog.Any("terminated", ids))
	return nil
}

// Running returns the id of a pending or running instance of req's
// attempt (its job and runner name), or "".
func (e *EC2) Running(ctx context.Context, req Request) (string, error) {
	inst, err := e.existing(ctx, req)
	if err != nil {
		return "", fmt.Errorf("find instance of job %d: %w", req.JobID, err)
	}
	return inst.id, nil
}

var _ Finder = (*EC2)(nil)

// existing returns a pending or running instance of req's attempt, or the
// zero launched when there is none. With several (which only a launch
// outside ClientToken protection can cause) it picks the smallest id, so
// every retry agrees.
func (e *EC2) existing(ctx context.Context, req Request) (launched, error) {
	all, err := e.live(ctx, req)
	if err != nil || len(all) == 0 {
		return launched{}, err
	}
	return slices.MinFunc(all, func(a, b launched) int { return strings.Compare(a.id, b.id) }), nil
}

// live returns every pending or running instance tagged with req's job
// and runner name (its attempt) of this stack (OfStack).
func (e *EC2) live(ctx context.Context, req Request) ([]launched, error) {
	in := &ec2api.DescribeInstancesInput{Filters: []ec2api.Filter{
		{Name: "tag:" + TagJobID, Values: []string{strconv.FormatInt(req.JobID, 10)}},
		{Name: "tag:" + TagRunnerName, Values: []string{req.RunnerName}},
		{Name: "instance-state-name", Values: []string{ec2api.StatePending, ec2api.StateRunning}},
	}}
	var all []launched
	for {
		out, err := e.instances.DescribeInstances(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if i.InstanceID != "" && OfStack(tagValue(i.Tags, TagStack), e.stack) {
					all = append(all, launched{id: i.InstanceID, owner: r.OwnerID})
				}
			}
		}
		if out.NextToken == "" {
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

// fleetInput builds the launch request of one market: an instant fleet of
// one instance from the pool's launch template, with one override per
// instance type × subnet. It is a pure function of the request and the
// market so that a repeated call sends identical arguments with the same
// ClientToken. Spot takes price-capacity-optimized (the pools least likely
// to be interrupted, at a low price); on-demand takes the options in order
// (prioritized): the preferred type first, each in the job's subnet
// first. It sets no user data (the launch template's boot script stays in
// force; the JIT config travels through SSM only). A named stack is
// tagged on the instance (TagStack).
func fleetInput(req Request, market, stack string) *ec2api.CreateFleetInput {
	p := req.Pool.Provisioner
	lt := ec2api.LaunchTemplateSpecification{Version: cmp.Or(p.LaunchTemplateVersion, "$Default")}
	if strings.HasPrefix(p.LaunchTemplate, "lt-") {
		lt.LaunchTemplateID = p.LaunchTemplate
	} else {
		lt.LaunchTemplateName = p.LaunchTemplate
	}
	tags := []ec2api.Tag{
		{Key: "Name", Value: req.RunnerName},
		{Key: TagJobID, Value: strconv.FormatInt(req.JobID, 10)},
		{Key: TagRunID, Value: strconv.FormatInt(req.RunID, 10)},
		{Key: TagRepo, Value: req.Repo},
		{Key: TagRunnerName, Value: req.RunnerName},
		{Key: TagPool, Value: req.Pool.Name},
		{Key: TagScope, Value: req.Pool.Scope},
		{Key: TagReplacement, Value: strconv.Itoa(req.Replacement)},
	}
	if stack != "" {
		tags = append(tags, ec2api.Tag{Key: TagStack, Value: stack})
	}
	in := &ec2api.CreateFleetInput{
		Type:        ec2api.FleetTypeInstant,
		ClientToken: FleetKey(req.Pool.Name, req.JobID, req.JITConfig, market),
		TargetCapacitySpecification: ec2api.TargetCapacitySpecification{
			TotalTargetCapacity: 1, DefaultTargetCapacityType: market,
		},
		LaunchTemplateConfigs: []ec2api.FleetLaunchTemplateConfig{{
			LaunchTemplateSpecification: lt,
			Overrides:                   Overrides(p.InstanceTypes, p.Subnets, req.JobID),
		}},
		TagSpecifications: []ec2api.TagSpecification{{ResourceType: ec2api.ResourceTypeInstance, Tags: tags}},
	}
	if market == ec2api.CapacitySpot {
		in.SpotOptions = &ec2api.SpotOptions{
			AllocationStrategy:           ec2api.SpotPriceCapacityOptimized,
			InstanceInterruptionBehavior: ec2api.SpotInterruptTerminate,
		}
	} else {
		in.OnDemandOptions = &ec2api.OnDemandOptions{AllocationStrategy: ec2api.OnDemandPrioritized}
	}
	return in
}

// Overrides lists a launch's options: every instance type (preferred
// first) in every subnet (the job's own first, Subnet), Priority 0 the
// most wanted. Without types or subnets the launch template decides that
// half; without both there is no override.
func Overrides(types, subnets []string, jobID int64) []ec2api.FleetOverride {
	first := 0
	if s := Subnet(subnets, jobID); s != "" {
		first = slices.Index(subnets, s)
	}
	order := append(slices.Clone(subnets[first:]), subnets[:first]...)
	var out []ec2api.FleetOverride
	add := func(typ, subnet string) {
		out = append(out, ec2api.FleetOverride{InstanceType: typ, SubnetID: subnet, Priority: aws.Float64(float64(len(out)))})
	}
	switch {
	case len(types) == 0 && len(order) == 0:
	case len(types) == 0:
		for _, s := range order {
			add("", s)
		}
	case len(order) == 0:
		for _, t := range types {
			add(t, "")
		}
	default:
		for _, t := range types {
			for _, s := range order {
				add(t, s)
			}
		}
	}
	return out
}

// Subnet picks the job's first subnet (job id mod len), so consecutive jobs
// spread over the pool's subnets (and their availability zones) while every
// call for one job sends the same options, as ClientToken requires. It
// returns "" when subnets is empty (the launch template decides).
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
