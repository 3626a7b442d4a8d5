// Package cli is ghclaim, the operator's command line: list jobs, show one
// (record, history, the GitHub job's status), retry a failed or abandoned
// job, redrive the dead-letter queue through the normal path, show each
// installation's rate reading and its age, and check a deployment (doctor).
// cmd/ghclaim only wires it to the default AWS configuration
// (config.LoadDefaultConfig: profiles, AWS_REGION, AWS_ENDPOINT_URL for
// moto or LocalStack).
//
// Decisions:
//   - The deployment's resources come from flags or, with --stack, from the
//     CloudFormation stack: outputs TableName, ClaimsQueueUrl,
//     DeadLetterQueueUrl, WebhookSecretArn, GitHubAppPrivateKeyArn,
//     WebhookUrl, and parameters GitHubAppId, GitHubApiUrl, RunnerPools,
//     SweepShards. A flag overrides the stack.
//   - The pools doctor checks are the stack's RunnerPools parameter (or, when
//     it is empty, the runner scaffold's two pools on its launch-template
//     outputs), or --pools. Not the claimer's environment: that needs the
//     Lambda API and a read of every variable of the function, and the
//     parameter is what the environment is made from.
//   - jobs is a paged, filtered Scan: it reads (and is billed for) the whole
//     table, which is acceptable for an operator's occasional listing and
//     the only way to list terminal records (the sweep index holds only live
//     ones). A line on stderr reports progress after each page.
//   - retry writes first, then sends: the record moves to queued at a new
//     version (conditional on the state and version read) and stays in the
//     sweep index, so a send that fails leaves a queued record the
//     reclaimer re-sends after its grace; a message sent before a write that
//     fails would only be a stale version, dropped.
//   - redrive deletes a DLQ message only after its copy reached the claims
//     queue; the copy is the same job and version, so the record decides
//     (a job already done or retried drops it). It first checks that the
//     DLQ is the claims queue's dead-letter queue (its RedrivePolicy):
//     swapped URLs would drain live claims into the DLQ. Whatever stops a
//     run (Ctrl-C, a refused call), it reports what it moved and shows
//     what it did not move again, so a second run picks it up.
//   - Exit codes: 0 done, 1 failed (unknown job, a refused write, a doctor
//     check), 2 bad arguments (the usage names the flag).
//   - No secret, key, token or JIT config is ever printed: doctor says
//     "set" or why not, never a value.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/ghclaim/ghclaim/shared/awsenv"
	"github.com/ghclaim/ghclaim/shared/clock"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/job"
	"github.com/ghclaim/ghclaim/shared/queue"
	"github.com/ghclaim/ghclaim/shared/random"
	"github.com/ghclaim/ghclaim/shared/redact"
	"github.com/ghclaim/ghclaim/shared/secret"
	"github.com/ghclaim/ghclaim/shared/store"
)

// AWSConfig is the default AWS configuration (profiles, AWS_REGION,
// AWS_ENDPOINT_URL), refused without a region: each call would otherwise
// fail with the SDK's "endpoint rule error, Invalid Configuration: Missing
// Region" (or, against an emulator, an answer that cannot be read), which
// does not say what to set.
func AWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set AWS_REGION, or a region in the AWS profile (AWS_PROFILE), to the stack's region")
	}
	cfg.HTTPClient = awsenv.OwnBodies(cfg.HTTPClient) // an answer is never cut under the SDK (see OwnBodies)
	return cfg, nil
}

// Exit codes.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

// DynamoDB is the part of the DynamoDB API the commands use.
type DynamoDB interface {
	store.DynamoDB
	store.Scanner
}

// SQS is the part of the SQS API the commands use.
type SQS interface {
	queue.SQS
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// CloudFormation is the part of the CloudFormation API --stack uses.
type CloudFormation interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, optFns ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// EC2 is the part of the EC2 API doctor uses.
type EC2 interface {
	DescribeLaunchTemplates(ctx context.Context, in *ec2api.DescribeLaunchTemplatesInput) (*ec2api.DescribeLaunchTemplatesOutput, error)
	DescribeLaunchTemplateVersions(ctx context.Context, in *ec2api.DescribeLaunchTemplateVersionsInput) (*ec2api.DescribeLaunchTemplateVersionsOutput, error)
}

// Config is what New needs: the clients (built once by main, or by a test
// against the emulator), the clock, the operator's name and the outputs.
type Config struct {
	DynamoDB       DynamoDB
	SQS            SQS
	SecretsManager secret.SecretsManager
	CloudFormation CloudFormation
	EC2            EC2
	// HTTP carries GitHub calls and doctor's ping; default a clone of
	// http.DefaultTransport.
	HTTP http.RoundTripper
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Sleep waits on Now's clock (redrive's pace); default clock.Sleep.
	Sleep func(context.Context, time.Duration) error
	// Rand jitters redrive's pace; default random.Global.
	Rand random.Source
	// User names the operator in a retry's record; default $USER.
	User string
	// Stdin feeds "retry -"; default os.Stdin.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// CLI runs ghclaim commands.
type CLI struct {
	cfg Config
}

// New returns a CLI with cfg's defaults filled.
func New(cfg Config) *CLI {
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultTransport.(*http.Transport).Clone()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = clock.Sleep
	}
	cfg.Rand = random.Or(cfg.Rand)
	if cfg.User == "" {
		cfg.User = os.Getenv("USER")
	}
	if cfg.User == "" {
		cfg.User = "unknown"
	}
	if cfg.Stdin == nil {
		cfg.Stdin = os.Stdin
	}
	if cfg.Stdout == nil {
		cfg.Stdout = io.Discard
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	return &CLI{cfg: cfg}
}

const usage = `usage: ghclaim COMMAND [flags] [args]

Commands:
  jobs            list job records (filters: --state, --pool, --older-than); a paged Scan of the whole table
  job ID          one job: its record, its history and the GitHub job's status
  retry ID...     failed or abandoned jobs back to queued (new version, ladder reset), as the operator's act;
                  "retry -" reads the ids from standard input; several are paced (≤ 2 a second)
  redrive         move the dead-letter queue's messages back to the claims queue
  rate            each installation's GitHub rate reading and its age
  doctor          check the deployment: secrets, GitHub App, launch templates, webhook

Every command takes --stack NAME (resources from the CloudFormation stack) or the resource flags,
and --json for scripts. "ghclaim COMMAND -h" lists a command's flags.
`

type command struct {
	name, args, help string
	run              func(c *CLI, ctx context.Context, o *opts, args []string) error
	flags            func(fs *flag.FlagSet, o *opts)
	nargs            int // -1: one or more
}

var commands = []command{
	{name: "jobs", help: "list job records (a paged Scan with a filter: reads the whole table)", run: (*CLI).jobs, flags: jobsFlags},
	{name: "job", args: "ID", nargs: 1, help: "show one job: record, history, GitHub status", run: (*CLI).job},
	{name: "retry", args: "ID... | -", nargs: -1, help: "retry failed or abandoned jobs (ids as arguments, or - to read them from standard input), paced", run: (*CLI).retry, flags: retryFlags},
	{name: "redrive", help: "move DLQ messages back to the claims queue", run: (*CLI).redrive, flags: redriveFlags},
	{name: "rate", help: "each installation's rate reading and its age", run: (*CLI).rate},
	{name: "doctor", help: "check the deployment", run: (*CLI).doctor},
}

// opts are the flags of one invocation.
type opts struct {
	json bool
	dep  deployment
	// from flags, before the stack fills the rest
	stack string
	appID int64

	// jobs
	states    string
	pool      string
	olderThan time.Duration
	pageSize  int
	// retry
	by string
	// redrive
	max        int
	visibility time.Duration
}

// usageError is a bad argument: exit 2 with the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// failure is an expected failure whose message is the whole story (exit 1).
type failure struct{ msg string }

func (e *failure) Error() string { return e.msg }

func failf(format string, a ...any) error { return &failure{msg: fmt.Sprintf(format, a...)} }

// Run runs one command line (without the program name) and returns the
// exit code.
func (c *CLI) Run(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(c.cfg.Stderr, usage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == args[0] {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(c.cfg.Stderr, "ghclaim: unknown command %q\n\n%s", args[0], usage)
		return ExitUsage
	}
	o := &opts{}
	fs := flag.NewFlagSet("ghclaim "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	commonFlags(fs, o)
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	printUsage := func(msg string) int {
		fmt.Fprintf(c.cfg.Stderr, "ghclaim %s: %s\nusage: ghclaim %s [flags] %s\n  %s\n\nflags:\n", cmd.name, msg, cmd.name, cmd.args, cmd.help)
		fs.SetOutput(c.cfg.Stderr)
		fs.PrintDefaults()
		return ExitUsage
	}
	pos, err := parseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printUsage("help")
		return ExitOK
	}
	if err != nil {
		return printUsage(err.Error())
	}
	if cmd.nargs < 0 && len(pos) == 0 {
		return printUsage(fmt.Sprintf("want one or more arguments (%s)", cmd.args))
	}
	if cmd.nargs >= 0 && len(pos) != cmd.nargs {
		if cmd.nargs == 0 {
			return printUsage(fmt.Sprintf("unexpected argument %q", pos[0]))
		}
		return printUsage(fmt.Sprintf("want %d argument(s) (%s), got %d", cmd.nargs, cmd.args, len(pos)))
	}
	err = cmd.run(c, ctx, o, pos)
	var ue *usageError
	var fe *failure
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return printUsage(ue.msg)
	case errors.As(err, &fe):
		fmt.Fprintln(c.cfg.Stderr, redact.String(fe.msg))
		return ExitFail
	default:
		// An error from GitHub or AWS may quote a credential.
		fmt.Fprintf(c.cfg.Stderr, "ghclaim %s: %v\n", cmd.name, redact.Error(err))
		return ExitFail
	}
}

// duration is a time.Duration flag whose refusal says what is wanted: the
// flag package's own says only "parse error" for "5", a number without its
// unit.
type duration time.Duration

func (d *duration) String() string { return time.Duration(*d).String() }

func (d *duration) Set(v string) error {
	x, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want a duration with its unit, such as 90s, 30m or 2h")
	}
	*d = duration(x)
	return nil
}

// parseInterleaved parses flags anywhere among the positional arguments
// ("job 7 --json" as well as "job --json 7"). A negative number that is
// not a flag's value is an argument, so that "job -5" is refused as a job
// id, not as an unknown flag -5.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		cut := len(args)
		for i, a := range args {
			if negative(a) && (i == 0 || !takesValue(fs, args[i-1])) {
				cut = i
				break
			}
		}
		if err := fs.Parse(args[:cut]); err != nil {
			return nil, err
		}
		args = append(fs.Args(), args[cut:]...)
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// negative reports whether a is a negative integer.
func negative(a string) bool {
	_, err := strconv.ParseInt(a, 10, 64)
	return err == nil && strings.HasPrefix(a, "-")
}

// takesValue reports whether a is a flag of fs that takes the next
// argument as its value ("--max", not "--json" nor "--max=3").
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	if name == a || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

func commonFlags(fs *flag.FlagSet, o *opts) {
	fs.BoolVar(&o.json, "json", false, "print JSON (for scripts)")
	fs.StringVar(&o.stack, "stack", "", "CloudFormation stack to read the resources from (outputs and parameters)")
	fs.StringVar(&o.dep.Table, "table", "", "DynamoDB table (default: the stack's TableName)")
	fs.StringVar(&o.dep.QueueURL, "queue-url", "", "claims queue URL (default: the stack's ClaimsQueueUrl)")
	fs.StringVar(&o.dep.DLQURL, "dlq-url", "", "dead-letter queue URL (default: the stack's DeadLetterQueueUrl)")
	fs.StringVar(&o.dep.WebhookSecretARN, "webhook-secret-arn", "", "webhook secret (default: the stack's WebhookSecretArn)")
	fs.StringVar(&o.dep.AppKeyARN, "app-key-arn", "", "GitHub App private key secret (default: the stack's GitHubAppPrivateKeyArn)")
	fs.Int64Var(&o.appID, "app-id", 0, "GitHub App id (default: the stack's GitHubAppId)")
	fs.StringVar(&o.dep.GitHubAPI, "github-api-url", "", "GitHub REST API root (default: the stack's GitHubApiUrl, else https://api.github.com)")
	fs.StringVar(&o.dep.WebhookURL, "webhook-url", "", "webhook URL (default: the stack's WebhookUrl)")
	fs.StringVar(&o.dep.Pools, "pools", "", "RUNNER_POOLS JSON (default: the stack's RunnerPools, else the runner scaffold's pools)")
	fs.IntVar(&o.dep.Shards, "sweep-shards", 0, "the deployment's SweepShards (default: the stack's)")
}

// deployment is where ghclaim's resources are.
type deployment struct {
	Table, QueueURL, DLQURL      string
	WebhookSecretARN, AppKeyARN  string
	GitHubAPI, WebhookURL, Pools string
	// PoolsParameter is the stack's RunnerPoolsParameter: the SSM
	// parameter the functions read RUNNER_POOLS from, winning over
	// RunnerPools.
	PoolsParameter             string
	AppID                      int64
	Shards                     int
	scaffoldX64, scaffoldArm64 string
}

// resolve fills o.dep from the stack where a flag left a field empty.
func (c *CLI) resolve(ctx context.Context, o *opts) error {
	d := &o.dep
	if o.appID < 0 {
		return usagef("invalid value %d for flag --app-id: want the GitHub App's id, a positive number", o.appID)
	}
	d.AppID = o.appID
	if o.stack == "" {
		return nil
	}
	if c.cfg.CloudFormation == nil {
		return errors.New("--stack: no CloudFormation client")
	}
	out, err := c.cfg.CloudFormation.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(o.stack)})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationError" && strings.Contains(api.ErrorMessage(), "does not exist") {
		// The usual cause: a typo, or another region than the stack's.
		return failf("stack %s not found: no such CloudFormation stack in this account and region (AWS_REGION, or the profile's)", o.stack)
	}
	if err != nil {
		return failf("stack %s: %v", o.stack, err)
	}
	if len(out.Stacks) == 0 {
		return failf("stack %s not found", o.stack)
	}
	st := out.Stacks[0]
	outputs, params := map[string]string{}, map[string]string{}
	for _, x := range st.Outputs {
		outputs[aws.ToString(x.OutputKey)] = aws.ToString(x.OutputValue)
	}
	for _, x := range st.Parameters {
		params[aws.ToString(x.ParameterKey)] = aws.ToString(x.ParameterValue)
	}
	fill := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	fill(&d.Table, outputs["TableName"])
	fill(&d.QueueURL, outputs["ClaimsQueueUrl"])
	fill(&d.DLQURL, outputs["DeadLetterQueueUrl"])
	fill(&d.WebhookSecretARN, outputs["WebhookSecretArn"])
	fill(&d.AppKeyARN, outputs["GitHubAppPrivateKeyArn"])
	fill(&d.WebhookURL, outputs["WebhookUrl"])
	fill(&d.GitHubAPI, params["GitHubApiUrl"])
	if p := params["RunnerPoolsParameter"]; p != "" && d.Pools == "" {
		d.PoolsParameter = p // the functions' pools: not RunnerPools
	} else {
		fill(&d.Pools, params["RunnerPools"])
	}
	d.scaffoldX64, d.scaffoldArm64 = outputs["RunnerLaunchTemplateX64"], outputs["RunnerLaunchTemplateArm64"]
	if d.AppID == 0 && params["GitHubAppId"] != "" {
		id, err := strconv.ParseInt(params["GitHubAppId"], 10, 64)
		if err != nil {
			return failf("stack %s: parameter GitHubAppId %q is not a number", o.stack, params["GitHubAppId"])
		}
		d.AppID = id
	}
	if d.Shards == 0 {
		// CloudFormation lists every parameter, defaults included; a
		// stack that lists none had the template's default.
		d.Shards = job.DefaultShards
		if s, err := strconv.Atoi(params["SweepShards"]); err == nil {
			d.Shards = s
		}
	}
	return nil
}

// need reports a usage error for the first empty resource among the named.
func need(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return usagef("flag --%s (or --stack) is required", pairs[i])
		}
	}
	return nil
}

func (c *CLI) store(d deployment) *store.Store {
	return store.New(c.cfg.DynamoDB, d.Table, store.Options{Shards: d.Shards})
}

func (c *CLI) printJSON(v any) error {
	enc := json.NewEncoder(c.cfg.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *CLI) progress(format string, a ...any) {
	fmt.Fprintf(c.cfg.Stderr, "ghclaim: "+format+"\n", a...)
}

// parseID reads a job id argument.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef("job ID %q: want a positive integer (GitHub's job id)", s)
	}
	return id, nil
}

// ago renders how long before now ms was, to the second.
func ago(now time.Time, ms int64) string {
	if ms == 0 {
		return "-"
	}
	return now.Sub(time.UnixMilli(ms)).Truncate(time.Second).String()
}

func stamp(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// oneLine is s on one line, cut to at most max characters (runes, so a
// cut never splits one), the last an ellipsis.
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
