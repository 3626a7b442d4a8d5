// Package iamcheck makes the AWS emulator as strict as IAM about who may
// call what. moto (and LocalStack by default) enforce no IAM: a function
// whose role in template.yaml lacks an action it calls passes every local
// test and fails only on AWS, often silently (a rate write that only logs
// a warning). A Client (for a function wired in-process) or a Proxy (for a
// function binary given an endpoint) refuses each request its function's
// role would not allow, with the error AWS answers, and records it, so a
// test can fail on any refusal.
//
// What a role allows is read from the function's inline policy statements
// in template.yaml, as SAM deploys them: an Fn::If statement counts with
// either branch (a deployment may take either), and a function with an SQS
// event also gets the poller actions SAM adds. Checked: the IAM action of
// each request (its operation, under the documented names: SendMessageBatch
// is authorised as sqs:SendMessage, a PutParameter with tags also as
// ssm:AddTagsToResource, a launch with tags also as ec2:CreateTags),
// DynamoDB's dynamodb:LeadingKeys condition against the partition keys a
// request names, and, given the stack's Values, the resource ARN of each
// DynamoDB, SQS, Secrets Manager and SSM request against the statement's
// resolved Resource (an empty list parameter, such as DispatchQueueArns
// left out, allows nothing). Not checked: EC2's resources and every other
// condition key; those stay with the template tests (infra/emulator's
// policy tests).
package iamcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/ghclaim/ghclaim/infra/emulator"
)

// Policy is what one function's role allows.
type Policy struct {
	// Function is the template's logical id, e.g. JanitorFunction.
	Function string
	grants   []grant
	values   *Values // nil: resources not checked
}

// grant is one Allow statement's action pattern, and the partition keys
// it is limited to (nil: any).
type grant struct {
	action    string   // "dynamodb:UpdateItem"; may hold IAM's * and ?
	resources []string // ARN patterns; nil when not checked
	keys      []string // dynamodb:LeadingKeys patterns (ForAllValues:StringLike)
}

// pollerActions are what SAM's SQS event source adds to a function's role
// (the AWSLambdaSQSQueueExecutionRole managed policy); not
// sqs:ChangeMessageVisibility, which a function that calls it must grant
// itself.
var pollerActions = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// Load reads the role of function logicalID from the template at path.
// With v, the statements' resources are resolved with it and checked for
// the services Values names; with nil, only actions and keys are.
func Load(templatePath, logicalID string, v *Values) (*Policy, error) {
	tmpl, err := emulator.LoadTemplate(templatePath)
	if err != nil {
		return nil, err
	}
	res, _ := tmpl["Resources"].(map[string]any)
	fn, _ := res[logicalID].(map[string]any)
	if fn == nil {
		return nil, fmt.Errorf("iamcheck: no resource %s in %s", logicalID, templatePath)
	}
	props, _ := fn["Properties"].(map[string]any)
	p := &Policy{Function: logicalID, values: v}
	params, _ := tmpl["Parameters"].(map[string]any)
	rs := resolver{v: v, params: params}
	for _, doc := range emulator.AsList(props["Policies"]) {
		d, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("iamcheck: %s: policy %v is not an inline document (a SAM policy template is not modelled)", logicalID, doc)
		}
		for _, s := range emulator.PolicyStatements(d) {
			if s["Effect"] != "Allow" {
				return nil, fmt.Errorf("iamcheck: %s: statement %v is not an Allow (not modelled)", logicalID, s)
			}
			keys := leadingKeys(s)
			for _, a := range emulator.AsList(s["Action"]) {
				name, ok := a.(string)
				if !ok {
					return nil, fmt.Errorf("iamcheck: %s: action %v is not a string", logicalID, a)
				}
				g := grant{action: strings.ToLower(name), keys: keys}
				if svc, _, _ := strings.Cut(g.action, ":"); v != nil && slices.Contains(checked, svc) {
					if g.resources, err = rs.resolve(s["Resource"]); err != nil {
						return nil, fmt.Errorf("iamcheck: %s: resource of %s: %w", logicalID, name, err)
					}
					if g.resources == nil {
						g.resources = []string{} // an empty list parameter: no resource at all
					}
				}
				p.grants = append(p.grants, g)
			}
		}
	}
	events, _ := props["Events"].(map[string]any)
	for _, e := range events {
		if m, ok := e.(map[string]any); ok && m["Type"] == "SQS" {
			var queue []string
			if v != nil {
				ep, _ := m["Properties"].(map[string]any)
				if queue, err = rs.resolve(ep["Queue"]); err != nil {
					return nil, fmt.Errorf("iamcheck: %s: event queue: %w", logicalID, err)
				}
			}
			for _, a := range pollerActions {
				p.grants = append(p.grants, grant{action: strings.ToLower(a), resources: queue})
			}
		}
	}
	return p, nil
}

// leadingKeys returns a statement's dynamodb:LeadingKeys patterns, nil
// when it has none.
func leadingKeys(s map[string]any) []string {
	cond, _ := s["Condition"].(map[string]any)
	like, _ := cond["ForAllValues:StringLike"].(map[string]any)
	var keys []string
	for _, k := range emulator.AsList(like["dynamodb:LeadingKeys"]) {
		if ks, ok := k.(string); ok {
			keys = append(keys, ks)
		}
	}
	return keys
}

// Allows reports whether the role allows action (e.g. "dynamodb:UpdateItem")
// on resource (an ARN; "" when not checked) and on items whose partition
// keys are keys (nil when the request names none).
func (p *Policy) Allows(action, resource string, keys []string) bool {
	for _, g := range p.grants {
		if !glob(g.action, action, true) {
			continue
		}
		if resource != "" && g.resources != nil && !slices.ContainsFunc(g.resources, func(pat string) bool { return glob(pat, resource, false) }) {
			continue
		}
		if g.keys == nil {
			return true
		}
		// ForAllValues: every key the request names matches a pattern;
		// a request naming none cannot be shown to (IAM then allows it
		// vacuously, but none of ours does that on a conditioned action).
		if len(keys) > 0 && !slices.ContainsFunc(keys, func(k string) bool {
			return !slices.ContainsFunc(g.keys, func(pat string) bool { return glob(pat, k, false) })
		}) {
			return true
		}
	}
	return false
}

// request is what IAM authorises of one AWS request.
type request struct {
	// Service is the signing name from the credential scope ("dynamodb").
	Service string
	// Operation is the API operation ("UpdateItem").
	Operation string
	// Actions are the IAM actions it needs, its own first.
	Actions []string
	// Keys are the DynamoDB partition keys (pk) it names.
	Keys []string

	body []byte
	form url.Values // a Query protocol request's parameters (EC2)
}

// read reads what r asks for. Its body is read and put back.
func read(r *http.Request) (request, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return request{}, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	q := request{body: body}
	auth := r.Header.Get("Authorization")
	if i := strings.Index(auth, "Credential="); i >= 0 {
		scope := strings.Split(strings.SplitN(auth[i+len("Credential="):], ",", 2)[0], "/")
		if len(scope) == 5 {
			q.Service = scope[3]
		}
	}
	if q.Service == "" {
		return request{}, fmt.Errorf("iamcheck: %s %s: no SigV4 credential scope", r.Method, r.URL.Path)
	}
	form := url.Values{}
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		q.Operation = t[strings.LastIndex(t, ".")+1:]
	} else if f, err := url.ParseQuery(string(body)); err == nil && f.Get("Action") != "" {
		form, q.Operation = f, f.Get("Action")
	}
	if q.Operation == "" {
		return request{}, fmt.Errorf("iamcheck: %s %s to %s: no operation named", r.Method, r.URL.Path, q.Service)
	}
	q.form = form
	q.Actions = []string{q.Service + ":" + authorisedAs(q.Operation)}
	switch q.Service {
	case "ssm":
		if q.Operation == "PutParameter" && bytes.Contains(body, []byte(`"Tags"`)) {
			q.Actions = append(q.Actions, "ssm:AddTagsToResource")
		}
	case "ec2":
		if (q.Operation == "RunInstances" || q.Operation == "CreateFleet") && hasPrefix(form, "TagSpecification") {
			q.Actions = append(q.Actions, "ec2:CreateTags")
		}
		if q.Operation == "CreateFleet" {
			q.Actions = append(q.Actions, "ec2:RunInstances")
		}
	case "dynamodb":
		q.Keys = partitionKeys(body)
	}
	return q, nil
}

// authorisedAs is the action an operation is authorised as: SQS's batch
// operations are authorised as their single forms.
func authorisedAs(op string) string {
	switch op {
	case "SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch":
		return strings.TrimSuffix(op, "Batch")
	}
	return op
}

func hasPrefix(form url.Values, prefix string) bool {
	for k := range form {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// partitionKeys returns the pk values a DynamoDB request body names. Only
// pk is decoded: an item's other attributes take every type.
func partitionKeys(body []byte) []string {
	type attrs map[string]json.RawMessage
	var in struct {
		Key, Item    attrs
		RequestItems map[string]json.RawMessage
	}
	if json.Unmarshal(body, &in) != nil {
		return nil
	}
	var keys []string
	add := func(a attrs) {
		var pk struct{ S *string }
		if raw, ok := a["pk"]; ok && json.Unmarshal(raw, &pk) == nil && pk.S != nil {
			keys = append(keys, *pk.S)
		}
	}
	add(in.Key)
	add(in.Item)
	for _, raw := range in.RequestItems {
		var get struct{ Keys []attrs }
		if json.Unmarshal(raw, &get) == nil {
			for _, k := range get.Keys {
				add(k)
			}
		}
		var write []struct {
			PutRequest    *struct{ Item attrs }
			DeleteRequest *struct{ Key attrs }
		}
		if json.Unmarshal(raw, &write) == nil {
			for _, w := range write {
				if w.PutRequest != nil {
					add(w.PutRequest.Item)
				}
				if w.DeleteRequest != nil {
					add(w.DeleteRequest.Key)
				}
			}
		}
	}
	return keys
}

// Checker decides and records. It is safe for concurrent use.
type Checker struct {
	policy *Policy
	mu     sync.Mutex
	denied []string
}

// NewChecker checks requests against p.
func NewChecker(p *Policy) *Checker { return &Checker{policy: p} }

// Denied returns the refusals so far, one line each: function, action, keys.
func (c *Checker) Denied() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.denied)
}

// check returns the refusal for r, or nil when its role allows it.
func (c *Checker) check(r *http.Request) *http.Response {
	q, err := read(r)
	if err != nil {
		return c.refuse(r, request{Service: "unknown", Actions: []string{err.Error()}}, err.Error())
	}
	for _, a := range q.Actions {
		resources := c.policy.values.resourcesOf(q, a)
		if resources == nil {
			resources = []string{""}
		}
		for _, res := range resources {
			if !c.policy.Allows(a, res, q.Keys) {
				if res != "" {
					a += " on " + res
				}
				return c.refuse(r, q, a)
			}
		}
	}
	return nil
}

func (c *Checker) refuse(r *http.Request, q request, action string) *http.Response {
	line := fmt.Sprintf("%s: %s (%s", c.policy.Function, action, q.Operation)
	if len(q.Keys) > 0 {
		line += " of " + strings.Join(q.Keys, ", ")
	}
	line += ")"
	c.mu.Lock()
	c.denied = append(c.denied, line)
	c.mu.Unlock()
	msg := fmt.Sprintf("User: arn:aws:sts::000000000000:assumed-role/%s-role/%s is not authorized to perform: %s because no identity-based policy allows the %s action",
		c.policy.Function, c.policy.Function, action, action)
	h := http.Header{}
	var body string
	status := http.StatusBadRequest
	switch q.Service {
	case "ec2":
		status = http.StatusForbidden
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		body = `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation. ` +
			escapeXML(msg) + `</Message></Error></Errors><RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>`
	default:
		code := "AccessDeniedException"
		if q.Service == "sqs" {
			code = "AccessDenied"
		}
		h.Set("Content-Type", "application/x-amz-json-1.0")
		h.Set("X-Amzn-Errortype", code)
		b, _ := json.Marshal(map[string]string{"__type": code, "message": msg})
		body = string(b)
	}
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
	}
}

func escapeXML(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HTTPDoer is the SDK's aws.HTTPClient.
type HTTPDoer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client is an aws.HTTPClient for a function wired in-process: it sends a
// request its role allows through Next, and answers any other as AWS does.
type Client struct {
	*Checker
	Next HTTPDoer
}

// Do checks r, then sends it.
func (c *Client) Do(r *http.Request) (*http.Response, error) {
	if resp := c.check(r); resp != nil {
		return resp, nil
	}
	return c.Next.Do(r)
}
