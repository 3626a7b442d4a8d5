package iamcheck

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// Values are what a role's Resource expressions resolve to: the
// deployment's parameters and the stack's resources. With Values, a Policy
// checks the resource of each DynamoDB, SQS, Secrets Manager and SSM
// request too (EC2's stay with the template's policy tests).
type Values struct {
	Partition, Region, Account string
	// Params are the deployment's parameters (a CommaDelimitedList
	// comma-joined); a parameter not named takes the template's default.
	Params map[string]string
	// Refs are !Ref values of resources, by logical id.
	Refs map[string]string
	// Attrs are !GetAtt values, keyed "LogicalId.Attribute".
	Attrs map[string]string
}

// StackValues are the Values of stack, deployed with params, on the
// emulator (Region us-east-1, the account of its queue's ARN).
func StackValues(s *emulator.Stack, params map[string]string) *Values {
	v := &Values{Partition: "aws", Region: emulator.Region, Params: params,
		Refs: map[string]string{}, Attrs: map[string]string{}}
	if parts := strings.Split(s.QueueARN, ":"); len(parts) == 6 {
		v.Account = parts[4]
	}
	for id, phys := range s.Resources {
		v.Refs[id] = phys
	}
	v.Refs["Table"], v.Refs["ClaimsQueue"] = s.TableName, s.QueueURL
	v.Refs["WebhookSecret"], v.Refs["GitHubAppPrivateKey"] = s.WebhookSecretARN, s.GitHubAppPrivateKeyARN
	v.Refs["AWS::StackName"] = s.Name
	v.Attrs["Table.Arn"] = fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", v.Partition, v.Region, v.Account, s.TableName)
	v.Attrs["ClaimsQueue.Arn"], v.Attrs["DeadLetterQueue.Arn"] = s.QueueARN, s.DLQARN
	return v
}

// resolver resolves a template's expressions with Values.
type resolver struct {
	v      *Values
	params map[string]any // the template's Parameters
}

// resolve returns the values expr stands for: a list parameter, or each
// branch of an Fn::If (a deployment may take either), gives several.
func (r resolver) resolve(expr any) ([]string, error) {
	switch e := expr.(type) {
	case string:
		return []string{e}, nil
	case []any:
		var out []string
		for _, x := range e {
			vs, err := r.resolve(x)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		}
		return out, nil
	case map[string]any:
		if len(e) != 1 {
			break
		}
		for fn, arg := range e {
			return r.intrinsic(fn, arg)
		}
	}
	return nil, fmt.Errorf("cannot resolve %v", expr)
}

func (r resolver) intrinsic(fn string, arg any) ([]string, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return r.ref(name)
	case "Fn::GetAtt":
		parts := emulator.AsList(arg)
		if len(parts) == 2 {
			if v, ok := r.v.Attrs[fmt.Sprint(parts[0])+"."+fmt.Sprint(parts[1])]; ok {
				return []string{v}, nil
			}
		}
		return nil, fmt.Errorf("no value for !GetAtt %v", arg)
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::If":
		branches := emulator.AsList(arg)
		if len(branches) != 3 {
			return nil, fmt.Errorf("malformed Fn::If %v", arg)
		}
		var out []string
		for _, b := range branches[1:] {
			if m, ok := b.(map[string]any); ok && m["Ref"] == "AWS::NoValue" {
				continue
			}
			vs, err := r.resolve(b)
			if err != nil {
				return nil, err
			}
			out = append(out, vs...)
		}
		return out, nil
	case "Fn::Join":
		args := emulator.AsList(arg)
		if len(args) != 2 {
			return nil, fmt.Errorf("malformed Fn::Join %v", arg)
		}
		parts, err := r.resolve(args[1])
		if err != nil {
			return nil, err
		}
		return []string{strings.Join(parts, fmt.Sprint(args[0]))}, nil
	}
	return nil, fmt.Errorf("%s is not resolved here", fn)
}

// ref resolves !Ref name: a pseudo parameter, a parameter (a
// CommaDelimitedList gives its elements), or a resource.
func (r resolver) ref(name string) ([]string, error) {
	switch name {
	case "AWS::Partition":
		return []string{r.v.Partition}, nil
	case "AWS::Region":
		return []string{r.v.Region}, nil
	case "AWS::AccountId":
		return []string{r.v.Account}, nil
	}
	if p, ok := r.params[name].(map[string]any); ok {
		val, set := r.v.Params[name]
		if !set {
			val = fmt.Sprint(p["Default"])
			if p["Default"] == nil {
				val = ""
			}
		}
		if p["Type"] == "CommaDelimitedList" {
			var out []string
			for _, x := range strings.Split(val, ",") {
				if x = strings.TrimSpace(x); x != "" {
					out = append(out, x)
				}
			}
			return out, nil
		}
		return []string{val}, nil
	}
	if v, ok := r.v.Refs[name]; ok {
		return []string{v}, nil
	}
	return nil, fmt.Errorf("no value for !Ref %s", name)
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// sub resolves Fn::Sub's one-value forms: ${Param}, ${Res.Attr}, pseudo
// parameters.
func (r resolver) sub(arg any) ([]string, error) {
	tmpl, vars := "", map[string]any{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) == 2 {
			tmpl, _ = a[0].(string)
			vars, _ = a[1].(map[string]any)
		}
	}
	var err error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		var vs []string
		var e error
		switch {
		case vars[name] != nil:
			vs, e = r.resolve(vars[name])
		case strings.Contains(name, "."):
			res, attr, _ := strings.Cut(name, ".")
			vs, e = r.intrinsic("Fn::GetAtt", []any{res, attr})
		default:
			vs, e = r.ref(name)
		}
		if e == nil && len(vs) != 1 {
			e = fmt.Errorf("${%s} has %d values", name, len(vs))
		}
		if e != nil {
			err = e
			return m
		}
		return vs[0]
	})
	if err != nil {
		return nil, err
	}
	return []string{out}, nil
}

// checked are the services whose requests' resources a Policy with Values
// checks.
var checked = []string{"dynamodb", "sqs", "secretsmanager", "ssm", "ec2"}

// resourcesOf returns the ARNs IAM authorises action (one of q.Actions)
// against, nil when they are not checked. EC2 authorises one request's
// actions on different resources (the Service Authorization Reference,
// "Actions, resources, and condition keys for Amazon EC2"): CreateFleet on
// the fleet and the instance it creates (both required resource types),
// plus the launch template and subnets the request names (the template's
// own resources are authorised under RunInstances only); the CreateTags of
// tag-on-create on each resource type a TagSpecification tags;
// TerminateInstances on each instance. Created resources have no id yet:
// their ARN ends in "*", which only a grant on every resource of the type
// matches. The fleet's RunInstances, whose grants carry conditions
// (ec2:LaunchTemplate) that are not modelled, is not checked here.
func (v *Values) resourcesOf(q request, action string) []string {
	if v == nil || q.Service != "ec2" {
		return v.resources(q)
	}
	arn := func(rest string) string {
		return fmt.Sprintf("arn:%s:ec2:%s:%s:%s", v.Partition, v.Region, v.Account, rest)
	}
	var out []string
	switch {
	case q.Operation == "CreateFleet" && action == "ec2:CreateFleet":
		out = append(out, arn("fleet/*"), arn("instance/*"))
		for k, vals := range q.form {
			switch {
			case strings.HasSuffix(k, ".LaunchTemplateSpecification.LaunchTemplateId"):
				out = append(out, arn("launch-template/"+vals[0]))
			case strings.HasSuffix(k, ".LaunchTemplateSpecification.LaunchTemplateName"):
				out = append(out, arn("launch-template/*")) // an id only EC2 knows
			case strings.HasPrefix(k, "LaunchTemplateConfigs.") && strings.HasSuffix(k, ".SubnetId"):
				out = append(out, arn("subnet/"+vals[0]))
			}
		}
	case (q.Operation == "CreateFleet" || q.Operation == "RunInstances") && action == "ec2:CreateTags":
		for k, vals := range q.form {
			if strings.HasPrefix(k, "TagSpecification.") && strings.HasSuffix(k, ".ResourceType") {
				out = append(out, arn(vals[0]+"/*"))
			}
		}
	case q.Operation == "TerminateInstances" && action == "ec2:TerminateInstances":
		for k, vals := range q.form {
			if strings.HasPrefix(k, "InstanceId.") {
				out = append(out, arn("instance/"+vals[0]))
			}
		}
	default:
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resources returns the ARNs request q acts on, from its body; nil when
// its service's resources are not checked.
func (v *Values) resources(q request) []string {
	if v == nil || !slices.Contains(checked, q.Service) {
		return nil
	}
	arn := func(service, rest string) string {
		return fmt.Sprintf("arn:%s:%s:%s:%s:%s", v.Partition, service, v.Region, v.Account, rest)
	}
	var in struct {
		TableName, IndexName, QueueUrl, SecretId, Name, ResourceId string
		Names                                                      []string
		RequestItems                                               map[string]json.RawMessage
	}
	_ = json.Unmarshal(q.body, &in)
	var out []string
	switch q.Service {
	case "dynamodb":
		table := func(name string) string {
			if strings.HasPrefix(name, "arn:") {
				return name
			}
			return arn("dynamodb", "table/"+name)
		}
		if in.TableName != "" {
			a := table(in.TableName)
			if in.IndexName != "" {
				a += "/index/" + in.IndexName
			}
			out = append(out, a)
		}
		for name := range in.RequestItems {
			out = append(out, table(name))
		}
	case "sqs":
		if u, err := url.Parse(in.QueueUrl); err == nil && in.QueueUrl != "" {
			parts := strings.Split(strings.Trim(u.Path, "/"), "/")
			if len(parts) == 2 {
				out = append(out, fmt.Sprintf("arn:%s:sqs:%s:%s:%s", v.Partition, v.Region, parts[0], parts[1]))
			}
		}
	case "secretsmanager":
		// By ARN, as every function names its secrets; a secret named by
		// name is not resolved to its ARN here (it then matches only "*").
		if in.SecretId != "" {
			out = append(out, in.SecretId)
		}
	case "ssm":
		param := func(name string) string { return arn("ssm", "parameter/"+strings.TrimPrefix(name, "/")) }
		switch {
		case in.Name != "":
			out = append(out, param(in.Name))
		case in.ResourceId != "":
			out = append(out, param(in.ResourceId))
		case len(in.Names) > 0:
			for _, n := range in.Names {
				out = append(out, param(n))
			}
		default:
			out = append(out, arn("ssm", "*")) // DescribeParameters and the like
		}
	}
	if len(out) == 0 {
		out = []string{"(none named)"} // matches only a grant on "*"
	}
	return out
}

var (
	globMu    sync.Mutex
	globCache = map[string]*regexp.Regexp{}
)

// glob is IAM's wildcard match: * is any run of characters (slashes
// included), ? one character. Actions compare case-insensitively (fold),
// ARNs exactly.
func glob(pattern, s string, fold bool) bool {
	key := pattern
	if fold {
		key = "(?i)" + pattern
	}
	globMu.Lock()
	re, ok := globCache[key]
	if !ok {
		var b strings.Builder
		if fold {
			b.WriteString("(?i)")
		}
		b.WriteString("^")
		for _, r := range pattern {
			switch r {
			case '*':
				b.WriteString(".*")
			case '?':
				b.WriteString(".")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		b.WriteString("$")
		re = regexp.MustCompile(b.String())
		globCache[key] = re
	}
	globMu.Unlock()
	return re.MatchString(s)
}
