package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// stackTimeout bounds how long Deploy and Delete wait for the emulator's CloudFormation.
const stackTimeout = 60 * time.Second

// Stack is template.yaml's data plane, created on an emulator by Deploy. The named fields come
// from the template's Outputs of the same names.
type Stack struct {
	// Name is the CloudFormation stack name.
	Name string
	// TableName is output TableName: the DynamoDB table (TABLE_NAME).
	TableName string
	// QueueURL and QueueARN are outputs ClaimsQueueUrl and ClaimsQueueArn (CLAIMS_QUEUE_URL).
	QueueURL, QueueARN string
	// DLQURL and DLQARN are outputs DeadLetterQueueUrl and DeadLetterQueueArn.
	DLQURL, DLQARN string
	// WebhookSecretARN is output WebhookSecretArn (WEBHOOK_SECRET_ARN).
	WebhookSecretARN string
	// GitHubAppPrivateKeyARN is output GitHubAppPrivateKeyArn (GITHUB_APP_PRIVATE_KEY_ARN).
	GitHubAppPrivateKeyARN string
	// Outputs holds every output the emulated stack has.
	Outputs map[string]string
	// Resources maps the logical id of every created resource to its physical id.
	Resources map[string]string
	// Dropped lists the template's resources that were not created, sorted.
	Dropped []string

	cfg     aws.Config
	secrets []string // ARNs of the secrets Deploy created directly
}

// Env returns the function environment variables that point at this stack.
func (s *Stack) Env() map[string]string {
	return map[string]string{
		"TABLE_NAME":                 s.TableName,
		"CLAIMS_QUEUE_URL":           s.QueueURL,
		"GHCLAIM_STACK":              s.Name,
		"WEBHOOK_SECRET_ARN":         s.WebhookSecretARN,
		"GITHUB_APP_PRIVATE_KEY_ARN": s.GitHubAppPrivateKeyARN,
	}
}

// Deploy creates the emulatable part of the template at templatePath (see Kept) as stack
// stackName through the emulator's CloudFormation API, with params overriding parameter
// defaults, and waits (bounded) until it is complete.
//
// Two things are done beside CloudFormation because moto's CloudFormation skips them silently:
// Secrets Manager secrets are created through the Secrets Manager API (SecretString, or a value
// from GetRandomPassword following GenerateSecretString; references to them become their ARNs),
// and a table's TimeToLiveSpecification is applied with UpdateTimeToLive when the emulator did
// not. Both are read from the template, so the template stays the only definition.
func Deploy(ctx context.Context, cfg aws.Config, templatePath, stackName string, params map[string]string) (*Stack, error) {
	data, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", stackName, err)
	}
	full, err := decodeTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %s: %w", stackName, templatePath, err)
	}
	tmpl, dropped, err := emulatable(full, func(t string) bool { return slices.Contains(Kept, t) })
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %s: %w", stackName, templatePath, err)
	}
	cfParams, err := stackParameters(full, tmpl, params)
	if err != nil {
		return nil, fmt.Errorf("deploy %s: %w", stackName, err)
	}

	ctx, cancel := context.WithTimeout(ctx, stackTimeout)
	defer cancel()
	s := &Stack{Name: stackName, Dropped: dropped, cfg: cfg, Resources: map[string]string{}, Outputs: map[string]string{}}
	if err := s.createSecrets(ctx, tmpl); err != nil {
		s.deleteSecrets(ctx)
		return nil, fmt.Errorf("deploy %s: %w", stackName, err)
	}
	if err := s.createStack(ctx, tmpl, cfParams); err != nil {
		_ = s.Delete(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("deploy %s: %w", stackName, err)
	}
	if err := s.applyTTL(ctx, tmpl); err != nil {
		_ = s.Delete(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("deploy %s: %w", stackName, err)
	}
	s.TableName = s.Outputs["TableName"]
	s.QueueURL, s.QueueARN = s.Outputs["ClaimsQueueUrl"], s.Outputs["ClaimsQueueArn"]
	s.DLQURL, s.DLQARN = s.Outputs["DeadLetterQueueUrl"], s.Outputs["DeadLetterQueueArn"]
	s.WebhookSecretARN = s.Outputs["WebhookSecretArn"]
	s.GitHubAppPrivateKeyARN = s.Outputs["GitHubAppPrivateKeyArn"]
	return s, nil
}

// stackParameters checks that every override names a parameter of the template and passes on
// those the emulated stack still uses.
func stackParameters(full, tmpl map[string]any, params map[string]string) ([]cftypes.Parameter, error) {
	all, _ := full["Parameters"].(map[string]any)
	used, _ := tmpl["Parameters"].(map[string]any)
	var out []cftypes.Parameter
	for _, k := range sortedKeys(params) {
		if _, ok := all[k]; !ok {
			return nil, fmt.Errorf("parameter %s: not in the template", k)
		}
		if _, ok := used[k]; ok {
			out = append(out, cftypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(params[k])})
		}
	}
	return out, nil
}

// generateSecretString is the subset of the template's GenerateSecretString that Deploy honours.
type generateSecretString struct {
	PasswordLength          *int64
	ExcludeCharacters       *string
	ExcludeLowercase        *bool
	ExcludeNumbers          *bool
	ExcludePunctuation      *bool
	ExcludeUppercase        *bool
	IncludeSpace            *bool
	RequireEachIncludedType *bool
	SecretStringTemplate    string
	GenerateStringKey       string
}

// createSecrets creates the template's secrets directly and replaces every Ref to them by their ARN.
func (s *Stack) createSecrets(ctx context.Context, tmpl map[string]any) error {
	resources := tmpl["Resources"].(map[string]any)
	arns := map[string]string{}
	client := secretsmanager.NewFromConfig(s.cfg)
	for _, id := range sortedKeys(resources) {
		res := resources[id].(map[string]any)
		if res["Type"] != secretType {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		value, err := secretValue(ctx, client, props)
		if err != nil {
			return fmt.Errorf("secret %s: %w", id, err)
		}
		out, err := client.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
			Name:         aws.String(s.Name + "/" + id),
			SecretString: aws.String(value),
		})
		if err != nil {
			return fmt.Errorf("secret %s: %w", id, err)
		}
		arn := aws.ToString(out.ARN)
		s.secrets = append(s.secrets, arn)
		s.Resources[id] = arn
		arns[id] = arn
		delete(resources, id)
	}
	for k, v := range tmpl {
		tmpl[k] = replaceRefs(v, arns)
	}
	return nil
}

func secretValue(ctx context.Context, client *secretsmanager.Client, props map[string]any) (string, error) {
	if v, ok := props["SecretString"]; ok {
		s, ok := v.(string)
		if !ok {
			return "", errors.New("SecretString: only a literal string is supported on the emulator")
		}
		return s, nil
	}
	var gen generateSecretString
	if g, ok := props["GenerateSecretString"]; ok {
		raw, err := json.Marshal(g)
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(raw, &gen); err != nil {
			return "", fmt.Errorf("GenerateSecretString: %w", err)
		}
	}
	out, err := client.GetRandomPassword(ctx, &secretsmanager.GetRandomPasswordInput{
		PasswordLength:          gen.PasswordLength,
		ExcludeCharacters:       gen.ExcludeCharacters,
		ExcludeLowercase:        gen.ExcludeLowercase,
		ExcludeNumbers:          gen.ExcludeNumbers,
		ExcludePunctuation:      gen.ExcludePunctuation,
		ExcludeUppercase:        gen.ExcludeUppercase,
		IncludeSpace:            gen.IncludeSpace,
		RequireEachIncludedType: gen.RequireEachIncludedType,
	})
	if err != nil {
		return "", fmt.Errorf("generate value: %w", err)
	}
	password := aws.ToString(out.RandomPassword)
	if gen.GenerateStringKey == "" {
		return password, nil
	}
	obj := map[string]any{}
	if gen.SecretStringTemplate != "" {
		if err := json.Unmarshal([]byte(gen.SecretStringTemplate), &obj); err != nil {
			return "", fmt.Errorf("SecretStringTemplate: %w", err)
		}
	}
	obj[gen.GenerateStringKey] = password
	raw, err := json.Marshal(obj)
	return string(raw), err
}

// replaceRefs returns v with every {"Ref": id} for an id in values replaced by values[id].
func replaceRefs(v any, values map[string]string) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = replaceRefs(e, values)
		}
		return out
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok && len(v) == 1 {
			if val, ok := values[ref]; ok {
				return val
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = replaceRefs(e, values)
		}
		return out
	}
	return v
}

func (s *Stack) createStack(ctx context.Context, tmpl map[string]any, params []cftypes.Parameter) error {
	body, err := json.Marshal(tmpl)
	if err != nil {
		return fmt.Errorf("encode template: %w", err)
	}
	cf := cloudformation.NewFromConfig(s.cfg)
	// The SDK retries a CreateStack whose answer it lost (a reset connection on a loaded
	// box); when the first try took effect, the retry finds the stack. CloudFormation
	// recognises a retry by ClientRequestToken; moto does not, so the token is also a tag,
	// and an existing stack that carries ours is the one this call created.
	token := randomHex(16)
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:          aws.String(s.Name),
		TemplateBody:       aws.String(string(body)),
		Parameters:         params,
		ClientRequestToken: aws.String(token),
		Tags:               []cftypes.Tag{{Key: aws.String(deployTokenTag), Value: aws.String(token)}},
	}); err != nil {
		var exists *cftypes.AlreadyExistsException
		if !errors.As(err, &exists) || !stackCarries(ctx, cf, s.Name, token) {
			return fmt.Errorf("create stack: %w", err)
		}
	}
	stack, err := waitStack(ctx, cf, s.Name, cftypes.StackStatusCreateComplete)
	if err != nil {
		return err
	}
	for _, o := range stack.Outputs {
		s.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	res, err := cf.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(s.Name)})
	if err != nil {
		return fmt.Errorf("describe stack resources: %w", err)
	}
	for _, r := range res.StackResources {
		s.Resources[aws.ToString(r.LogicalResourceId)] = aws.ToString(r.PhysicalResourceId)
	}
	return nil
}

// deployTokenTag names the tag that carries a Deploy's own CreateStack token.
const deployTokenTag = "ghclaim:deploy-token"

// stackCarries reports whether stack name exists and carries token in deployTokenTag.
func stackCarries(ctx context.Context, cf *cloudformation.Client, name, token string) bool {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil || len(out.Stacks) != 1 {
		return false
	}
	for _, t := range out.Stacks[0].Tags {
		if aws.ToString(t.Key) == deployTokenTag && aws.ToString(t.Value) == token {
			return true
		}
	}
	return false
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitStack polls until the stack reaches want, fails, or ctx ends.
func waitStack(ctx context.Context, cf *cloudformation.Client, name string, want cftypes.StackStatus) (cftypes.Stack, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
		if err != nil {
			return cftypes.Stack{}, fmt.Errorf("describe stack: %w", err)
		}
		if len(out.Stacks) == 0 {
			return cftypes.Stack{}, errors.New("describe stack: stack not found")
		}
		st := out.Stacks[0]
		switch {
		case st.StackStatus == want:
			return st, nil
		case !strings.HasSuffix(string(st.StackStatus), "_IN_PROGRESS"):
			return st, fmt.Errorf("stack %s: %s: %s", name, st.StackStatus, aws.ToString(st.StackStatusReason))
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("stack %s: still %s: %w", name, st.StackStatus, ctx.Err())
		case <-tick.C:
		}
	}
}

// applyTTL enables each table's templated TTL attribute where the emulator's CloudFormation did not.
func (s *Stack) applyTTL(ctx context.Context, tmpl map[string]any) error {
	ddb := dynamodb.NewFromConfig(s.cfg)
	resources := tmpl["Resources"].(map[string]any)
	for _, id := range sortedKeys(resources) {
		res := resources[id].(map[string]any)
		if res["Type"] != "AWS::DynamoDB::Table" {
			continue
		}
		props, _ := res["Properties"].(map[string]any)
		spec, _ := props["TimeToLiveSpecification"].(map[string]any)
		attr, _ := spec["AttributeName"].(string)
		if enabled, _ := spec["Enabled"].(bool); !enabled || attr == "" {
			continue
		}
		table := s.Resources[id]
		got, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("table %s: describe TTL: %w", id, err)
		}
		if d := got.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attr &&
			(d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling) {
			continue
		}
		if _, err := ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(table),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("table %s: enable TTL on %s: %w", id, attr, err)
		}
	}
	return nil
}

// Delete removes the stack and the secrets Deploy created, and waits (bounded) for the stack to go.
func (s *Stack) Delete(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, stackTimeout)
	defer cancel()
	cf := cloudformation.NewFromConfig(s.cfg)
	var errs []error
	if _, err := cf.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(s.Name)}); err != nil {
		errs = append(errs, fmt.Errorf("delete stack %s: %w", s.Name, err))
	} else if _, err := waitStack(ctx, cf, s.Name, cftypes.StackStatusDeleteComplete); err != nil && !isStackGone(err) {
		errs = append(errs, err)
	}
	errs = append(errs, s.deleteSecrets(ctx))
	return errors.Join(errs...)
}

func isStackGone(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not found"))
}

func (s *Stack) deleteSecrets(ctx context.Context) error {
	client := secretsmanager.NewFromConfig(s.cfg)
	var errs []error
	for _, arn := range s.secrets {
		if _, err := client.DeleteSecret(ctx, &secretsmanager.DeleteSecretInput{
			SecretId:                   aws.String(arn),
			ForceDeleteWithoutRecovery: aws.Bool(true),
		}); err != nil {
			errs = append(errs, fmt.Errorf("delete secret %s: %w", arn, err))
		}
	}
	s.secrets = nil
	return errors.Join(errs...)
}

// DeployForTest deploys the project's template.yaml with its default parameters on srv as a
// stack of its own (a unique name per call, so parallel tests never share a table or queue) and
// deletes it when t ends. It fails t on any error.
func DeployForTest(t testing.TB, srv *Server) *Stack {
	t.Helper()
	path, err := TemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	cfg := srv.ConfigForTest(t)
	stack, err := Deploy(context.Background(), cfg, path, StackName(t.Name()), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stack.Delete(context.Background()); err != nil {
			t.Errorf("delete emulated stack: %v", err)
		}
	})
	return stack
}

// TemplatePath finds template.yaml next to go.mod, walking up from the working directory (a
// test's working directory is its package directory).
func TemplatePath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find template.yaml: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "template.yaml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find template.yaml: no go.mod above the working directory")
		}
		dir = parent
	}
}

var unsafeStackChars = regexp.MustCompile(`[^A-Za-z0-9-]+`)

// StackName returns a unique, valid stack name that starts with a readable form of hint. It is
// short because emulators derive resource names (SQS: at most 80 characters) from it.
func StackName(hint string) string {
	h := strings.Trim(unsafeStackChars.ReplaceAllString(hint, "-"), "-")
	if len(h) > 24 {
		h = h[:24]
	}
	return "t-" + h + "-" + randomHex(4)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
