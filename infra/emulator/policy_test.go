package emulator

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The template's security properties that no emulator can check (moto enforces neither IAM nor
// KMS key policies), read from template.yaml itself.

// resourcesOfType returns the logical ids of the template's resources of type typ, sorted.
func resourcesOfType(tmpl map[string]any, typ string) []string {
	var ids []string
	for id, r := range tmpl["Resources"].(map[string]any) {
		if m, ok := r.(map[string]any); ok && m["Type"] == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// list and statements are AsList and PolicyStatements (template.go), which infra/iamcheck
// reads roles with too.
func list(v any) []any                    { return AsList(v) }
func statements(doc any) []map[string]any { return PolicyStatements(doc) }

// hasAction reports whether a statement's Action names action exactly.
func hasAction(s map[string]any, action string) bool {
	for _, a := range list(s["Action"]) {
		if a == action {
			return true
		}
	}
	return false
}

// ref is {"Ref": name}, as decodeTemplate writes !Ref name.
func ref(name string) map[string]any { return map[string]any{"Ref": name} }

// isServicePrincipal reports whether a statement's principal is exactly the service svc.
func isServicePrincipal(s map[string]any, svc string) bool {
	p, _ := s["Principal"].(map[string]any)
	return len(p) == 1 && slices.Equal(list(p["Service"]), []any{svc})
}

// sourceAccountIsOurs reports whether a statement is conditioned on aws:SourceAccount = this account.
func sourceAccountIsOurs(s map[string]any) bool {
	c, _ := s["Condition"].(map[string]any)
	eq, _ := c["StringEquals"].(map[string]any)
	return fmt.Sprint(eq["aws:SourceAccount"]) == fmt.Sprint(ref("AWS::AccountId"))
}

func TestAlarmTopicLetsCloudWatchPublish(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	res := tmpl["Resources"].(map[string]any)

	// Every topic an alarm notifies.
	topics := map[string]bool{}
	for _, id := range resourcesOfType(tmpl, "AWS::CloudWatch::Alarm") {
		props := res[id].(map[string]any)["Properties"].(map[string]any)
		for _, key := range []string{"AlarmActions", "OKActions", "InsufficientDataActions"} {
			for _, a := range list(props[key]) {
				if m, ok := a.(map[string]any); ok {
					if name, ok := m["Ref"].(string); ok {
						topics[name] = true
					}
				}
			}
		}
	}
	if len(topics) == 0 {
		t.Fatal("no alarm notifies a topic of the template")
	}
	for topic := range topics {
		t.Run(topic, func(t *testing.T) {
			props, _ := res[topic].(map[string]any)["Properties"].(map[string]any)
			kmsKey := props["KmsMasterKeyId"]
			// CloudWatch has no grant on the AWS-managed key alias/aws/sns, whose policy nobody
			// can change: alarms publishing to a topic encrypted with it are dropped silently.
			if s, ok := kmsKey.(string); ok {
				t.Fatalf("KmsMasterKeyId is %q: want a customer-managed key of this template whose policy lets CloudWatch use it", s)
			}
			keyID, _ := kmsKey.(map[string]any)["Ref"].(string)
			key, _ := res[keyID].(map[string]any)
			if keyID == "" || key["Type"] != "AWS::KMS::Key" {
				t.Fatalf("KmsMasterKeyId %v is not a !Ref to an AWS::KMS::Key of the template", kmsKey)
			}
			kp, _ := key["Properties"].(map[string]any)
			if kp["EnableKeyRotation"] != true {
				t.Errorf("key %s: EnableKeyRotation %v, want true", keyID, kp["EnableKeyRotation"])
			}
			var rootAdmin, cloudWatch bool
			for _, s := range statements(kp["KeyPolicy"]) {
				if s["Effect"] != "Allow" {
					continue
				}
				p, _ := s["Principal"].(map[string]any)
				aws, _ := p["AWS"].(map[string]any)
				if root, _ := aws["Fn::Sub"].(string); strings.HasSuffix(root, ":iam::${AWS::AccountId}:root") && hasAction(s, "kms:*") {
					rootAdmin = true
				}
				if isServicePrincipal(s, "cloudwatch.amazonaws.com") && hasAction(s, "kms:Decrypt") && hasAction(s, "kms:GenerateDataKey*") {
					cloudWatch = true
					if !sourceAccountIsOurs(s) {
						t.Errorf("key %s: CloudWatch's grant %v has no aws:SourceAccount condition (confused deputy)", keyID, s)
					}
				}
			}
			if !rootAdmin {
				t.Errorf("key %s: the account root cannot administer the key (kms:*): it would be unmanageable", keyID)
			}
			if !cloudWatch {
				t.Errorf("key %s: no statement lets cloudwatch.amazonaws.com kms:Decrypt and kms:GenerateDataKey*", keyID)
			}

			publish := false
			for _, id := range resourcesOfType(tmpl, "AWS::SNS::TopicPolicy") {
				pp := res[id].(map[string]any)["Properties"].(map[string]any)
				if !slices.ContainsFunc(list(pp["Topics"]), func(v any) bool { return fmt.Sprint(v) == fmt.Sprint(ref(topic)) }) {
					continue
				}
				for _, s := range statements(pp["PolicyDocument"]) {
					if s["Effect"] == "Allow" && isServicePrincipal(s, "cloudwatch.amazonaws.com") && hasAction(s, "sns:Publish") &&
						fmt.Sprint(s["Resource"]) == fmt.Sprint(ref(topic)) && sourceAccountIsOurs(s) {
						publish = true
					}
				}
			}
			if !publish {
				t.Errorf("no AWS::SNS::TopicPolicy lets cloudwatch.amazonaws.com sns:Publish to %s, conditioned on aws:SourceAccount", topic)
			}
		})
	}
}

// subVars matches the ${...} variables of an Fn::Sub string, which contain colons themselves.
var subVars = regexp.MustCompile(`\$\{[^}]*\}`)

// ec2ResourceType returns the resource type of an EC2 ARN given as a string or !Sub
// ("instance" for …:instance/*), or "*" when the ARN covers every type (or is "*").
func ec2ResourceType(t *testing.T, r any) string {
	t.Helper()
	s, ok := r.(string)
	if !ok {
		s, ok = r.(map[string]any)["Fn::Sub"].(string)
	}
	if !ok {
		t.Fatalf("resource %v: want a string or !Sub ARN", r)
	}
	if s == "*" {
		return "*"
	}
	parts := strings.SplitN(subVars.ReplaceAllString(s, "X"), ":", 6)
	if len(parts) != 6 || parts[2] != "ec2" {
		t.Fatalf("resource %q is not an EC2 ARN", s)
	}
	typ, _, _ := strings.Cut(parts[5], "/")
	return typ
}

func TestClaimerEC2PolicyIsLimitedToTheLaunchTemplates(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	var stmts []map[string]any
	for _, p := range list(prop(t, tmpl, "ClaimerFunction", "Properties", "Policies")) {
		stmts = append(stmts, statements(p)...)
	}
	// Created by the launch: allowed only through a launch template (ec2:LaunchTemplate).
	created := []string{"instance", "volume", "network-interface"}
	// Used by the launch, not created: they carry no guarantee that a launch template is used.
	used := []string{"subnet", "security-group", "image", "snapshot", "key-pair", "launch-template", "spot-instances-request"}

	// CreateFleet is authorised against the fleet, the instance (both
	// required in the IAM reference's current CreateFleet row: fleet*,
	// instance*, image, launch-template, placement-group, subnet, volume)
	// and every resource type the fleet's launch uses; one left out fails
	// every launch with UnauthorizedOperation on AWS only, since moto
	// enforces no IAM (instance was missing, from an older row that
	// listed fleet, image, key-pair, launch-template, security-group,
	// snapshot and subnet: those stay allowed, harmless).
	fleetNeeds := []string{"fleet", "instance", "volume", "image", "launch-template", "subnet"}
	fleetMay := append([]string{"key-pair", "security-group", "snapshot", "placement-group"}, fleetNeeds...)
	fleetOn := map[string]bool{}

	launchesInstances := false
	for _, s := range stmts {
		if s["Effect"] != "Allow" {
			continue
		}
		for _, a := range list(s["Action"]) {
			if a == "*" || a == "ec2:*" || a == "iam:*" {
				t.Errorf("statement %v allows %s", s, a)
			}
		}
		cond, _ := s["Condition"].(map[string]any)
		if hasAction(s, "ec2:RunInstances") {
			arnLike, _ := cond["ArnLike"].(map[string]any)
			lt, conditioned := arnLike["ec2:LaunchTemplate"]
			for _, r := range list(s["Resource"]) {
				switch typ := ec2ResourceType(t, r); {
				case typ == "*":
					t.Errorf("RunInstances on every resource type (%v): name the types a launch needs", r)
				case slices.Contains(created, typ):
					if !conditioned || lt == nil {
						t.Errorf("RunInstances creates %s without an ArnLike ec2:LaunchTemplate condition: any AMI, instance profile and user data could be launched", typ)
					} else if typ == "instance" {
						launchesInstances = true
					}
				case !slices.Contains(used, typ):
					t.Errorf("RunInstances on resource type %q, which a launch from a template does not need", typ)
				}
			}
		}
		if hasAction(s, "ec2:CreateFleet") {
			for _, r := range list(s["Resource"]) {
				typ := ec2ResourceType(t, r)
				if !slices.Contains(fleetMay, typ) {
					t.Errorf("CreateFleet on resource type %q: what a fleet creates goes through RunInstances and its launch template condition", typ)
				}
				fleetOn[typ] = true
			}
		}
		if hasAction(s, "ec2:CreateTags") {
			eq, _ := cond["StringEquals"].(map[string]any)
			if a := fmt.Sprint(eq["ec2:CreateAction"]); a != "[RunInstances CreateFleet]" {
				t.Errorf("CreateTags %v: want condition StringEquals ec2:CreateAction = RunInstances or CreateFleet (never retag someone else's resource)", s)
			}
			for _, r := range list(s["Resource"]) {
				if typ := ec2ResourceType(t, r); !slices.Contains(created, typ) {
					t.Errorf("CreateTags on resource type %q: want only what a launch creates %v", typ, created)
				}
			}
		}
		if hasAction(s, "iam:PassRole") {
			// The created runner role, or the operator's own.
			runnerRole := map[string]any{"Fn::If": []any{"CreateRunnerRole",
				map[string]any{"Fn::GetAtt": []any{"RunnerRole", "Arn"}}, ref("RunnerInstanceRoleArn")}}
			if fmt.Sprint(s["Resource"]) != fmt.Sprint(runnerRole) {
				t.Errorf("iam:PassRole on %v, want only the runner role %v", s["Resource"], runnerRole)
			}
			eq, _ := cond["StringEquals"].(map[string]any)
			if eq["iam:PassedToService"] != "ec2.amazonaws.com" {
				t.Errorf("iam:PassRole without iam:PassedToService = ec2.amazonaws.com: %v", s)
			}
		}
	}
	if !launchesInstances {
		t.Error("no statement lets the claimer launch an instance through a launch template: EC2 pools could not provision")
	}
	for _, typ := range fleetNeeds {
		if !fleetOn[typ] {
			t.Errorf("CreateFleet not allowed on %s: every launch would fail with UnauthorizedOperation", typ)
		}
	}
}

// The alarm topic and its key are part of the emulated data plane: dropping the key would
// silently drop the topic too. The topic policy is dropped on purpose (see Kept).
func TestDeployCreatesTheAlarmTopicWithItsKey(t *testing.T) {
	t.Parallel()
	stack := DeployForTest(t, ForTest(t))
	for _, id := range []string{"AlarmTopicKey", "AlarmTopic"} {
		if stack.Resources[id] == "" {
			t.Errorf("resource %s was not created (dropped: %v, created: %v)", id, stack.Dropped, stack.Resources)
		}
	}
	if !slices.Contains(stack.Dropped, "AlarmTopicPolicy") {
		t.Errorf("AlarmTopicPolicy is not among the dropped resources %v", stack.Dropped)
	}
	if stack.Outputs["AlarmTopicArn"] == "" {
		t.Errorf("no AlarmTopicArn output: %v", stack.Outputs)
	}
}

// TestClaimerUsesDispatchKeysThroughSQSOnly: a dispatch queue under a
// customer-managed key needs kms:GenerateDataKey and kms:Decrypt for every
// send (moto checks neither); the claimer gets them on the keys named in
// DispatchQueueKeyArns, and only through SQS.
func TestClaimerUsesDispatchKeysThroughSQSOnly(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	found := false
	for _, p := range list(prop(t, tmpl, "ClaimerFunction", "Properties", "Policies")) {
		for _, s := range statements(p) {
			if !hasAction(s, "kms:GenerateDataKey") {
				continue
			}
			found = true
			if got := fmt.Sprint(list(s["Action"])); got != "[kms:GenerateDataKey kms:Decrypt]" {
				t.Errorf("KMS actions %s, want only kms:GenerateDataKey and kms:Decrypt", got)
			}
			if fmt.Sprint(s["Resource"]) != fmt.Sprint(ref("DispatchQueueKeyArns")) {
				t.Errorf("KMS on %v, want only the keys of DispatchQueueKeyArns", s["Resource"])
			}
			cond, _ := s["Condition"].(map[string]any)
			eq, _ := cond["StringEquals"].(map[string]any)
			if via := fmt.Sprint(eq["kms:ViaService"]); !strings.Contains(via, "sqs.${AWS::Region}.amazonaws.com") {
				t.Errorf("KMS condition %v, want kms:ViaService = sqs.<region>.amazonaws.com", cond)
			}
		}
	}
	if !found {
		t.Error("no statement lets the claimer encrypt to a dispatch queue under a customer-managed key")
	}
}

// TestRateWritersMayUpdateTheRateItems: every function that shares rate
// state (an exhaustion, or a secondary limit's block, through
// rate#<installation>) may UpdateItem that item, the one request the
// store makes for it (shared/store's TestRateWritesAreUpdatesOfTheRateItem);
// moto enforces no IAM, so a role without it would fail only on AWS. None
// keeps a PutItem only for rate items, which nothing sends any more.
func TestRateWritersMayUpdateTheRateItems(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	table := map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}}
	for _, fn := range []string{"ClaimerFunction", "ReclaimerFunction", "JanitorFunction"} {
		var stmts []map[string]any
		for _, p := range list(prop(t, tmpl, fn, "Properties", "Policies")) {
			stmts = append(stmts, statements(p)...)
		}
		update := false
		for _, s := range stmts {
			if s["Effect"] != "Allow" || !slices.ContainsFunc(list(s["Resource"]), func(r any) bool { return fmt.Sprint(r) == fmt.Sprint(table) }) {
				continue
			}
			cond, _ := s["Condition"].(map[string]any)
			like, _ := cond["ForAllValues:StringLike"].(map[string]any)
			keys := list(like["dynamodb:LeadingKeys"])
			rateOnly := len(keys) > 0 && !slices.ContainsFunc(keys, func(k any) bool { return k != "rate#*" })
			switch {
			case hasAction(s, "dynamodb:UpdateItem") && (cond == nil || rateOnly):
				update = true
			case hasAction(s, "dynamodb:PutItem") && rateOnly:
				t.Errorf("%s: PutItem on rate items only, which no rate write sends: %v", fn, s)
			}
		}
		if !update {
			t.Errorf("%s: no statement allows dynamodb:UpdateItem on rate#* items", fn)
		}
	}
}
