package emulator

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// stateful is what a stack loses when CloudFormation replaces or deletes a resource of one type.
type stateful struct {
	// replacing are the properties whose change replaces the resource ("Update requires:
	// Replacement" in the template reference: the registry schema's createOnlyProperties, as
	// cfn-lint ships them, and KeySchema and LocalSecondaryIndexes of a table).
	replacing []string
	// name is the one of them that fixes the physical name: set, a retained resource blocks
	// re-creating a stack of the same name, and a replacement fails on the name it still holds.
	name string
	// rewriting are the properties whose change rewrites the resource's content in place.
	rewriting []string
	// policy is its DeletionPolicy and UpdateReplacePolicy; "" for none required.
	policy string
	doc    string
}

// statefulTypes: the functions are here for the webhook's Function URL, which SAM points at the
// function by name (and at AutoPublishAlias's alias, the URL's Qualifier): a new function is a
// new URL, one the GitHub App's settings do not know. Functions hold no state themselves, so they
// need no policy.
var statefulTypes = map[string]stateful{
	"AWS::DynamoDB::Table": {
		replacing: []string{"TableName", "KeySchema", "LocalSecondaryIndexes", "ImportSourceSpecification"},
		name:      "TableName",
		policy:    "Retain",
		doc:       "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-dynamodb-table.html",
	},
	"AWS::SQS::Queue": {
		replacing: []string{"QueueName", "FifoQueue"},
		name:      "QueueName",
		policy:    "Retain",
		doc:       "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-sqs-queue.html",
	},
	"AWS::SecretsManager::Secret": {
		replacing: []string{"Name"},
		name:      "Name",
		rewriting: []string{"SecretString", "GenerateSecretString"},
		policy:    "Retain",
		doc:       "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-secretsmanager-secret.html",
	},
	"AWS::Logs::LogGroup": {
		replacing: []string{"LogGroupName"},
		name:      "LogGroupName",
		policy:    "Retain",
		doc:       "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-logs-loggroup.html",
	},
	"AWS::Serverless::Function": {
		replacing: []string{"FunctionName", "PackageType", "TenancyConfig", "AutoPublishAlias"},
		name:      "FunctionName",
		doc:       "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lambda-url.html",
	},
}

// deletedWithTheStack are the stateful resources whose policy is Delete, and why.
var deletedWithTheStack = map[string]string{
	"ClaimsQueue": "its messages are attempts of jobs in the table: the reclaimer re-enqueues them after a replacement, and another stack's table knows none of them",
}

// statefulResources returns the logical ids of tmpl's resources of a stateful type, sorted.
func statefulResources(tmpl map[string]any) []string {
	var ids []string
	for typ := range statefulTypes {
		ids = append(ids, resourcesOfType(tmpl, typ)...)
	}
	slices.Sort(ids)
	return ids
}

func resourceOf(tmpl map[string]any, id string) map[string]any {
	res, _ := tmpl["Resources"].(map[string]any)
	r, _ := res[id].(map[string]any)
	return r
}

// TestUpdatesNeverReplaceStatefulResources: no parameter value can replace, create or delete a
// stateful resource (lose the table's jobs, the queues' messages, the secrets' values, the logs,
// or the webhook's URL), and none has a fixed name.
func TestUpdatesNeverReplaceStatefulResources(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	params, _ := tmpl["Parameters"].(map[string]any)
	seen := map[string]int{}
	for _, id := range statefulResources(tmpl) {
		res := resourceOf(tmpl, id)
		typ, _ := res["Type"].(string)
		seen[typ]++
		kind := statefulTypes[typ]
		t.Run(id, func(t *testing.T) {
			if c, ok := res["Condition"]; ok {
				t.Errorf("%s has Condition %v: a parameter change creates or deletes it", id, c)
			}
			props, _ := res["Properties"].(map[string]any)
			for _, p := range kind.replacing {
				v, ok := props[p]
				if !ok {
					continue
				}
				if p == kind.name {
					t.Errorf("%s sets %s: a replacement fails on the name the old one holds, and a retained one blocks re-creating a stack of the same name (%s)", id, p, kind.doc)
				}
				d := newDeps()
				d.walk(v)
				for name := range d.names {
					if _, isParam := params[name]; isParam {
						t.Errorf("%s.%s refers to parameter %s: changing it replaces %s (%s)", id, p, name, id, kind.doc)
					}
				}
				for c := range d.conditions {
					t.Errorf("%s.%s depends on condition %s: a parameter change replaces %s (%s)", id, p, c, id, kind.doc)
				}
			}
		})
	}
	for typ := range statefulTypes {
		if seen[typ] == 0 {
			t.Errorf("template.yaml has no %s: nothing checked for it", typ)
		}
	}
}

// TestStatefulResourcesOutliveTheirStack: what `sam delete` (or an update that replaces a
// resource or drops its logical id) would otherwise destroy is retained, README "Deleting or
// re-creating a stack". CloudFormation deletes a secret without a recovery window.
func TestStatefulResourcesOutliveTheirStack(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	for _, id := range statefulResources(tmpl) {
		res := resourceOf(tmpl, id)
		want := statefulTypes[res["Type"].(string)].policy
		if want == "" {
			continue
		}
		if _, ok := deletedWithTheStack[id]; ok {
			want = "Delete"
		}
		t.Run(id, func(t *testing.T) {
			for _, attr := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
				if got := res[attr]; got != want {
					t.Errorf("%s %s = %v, want %s", id, attr, got, want)
				}
			}
		})
	}
	for id := range deletedWithTheStack {
		if resourceOf(tmpl, id) == nil {
			t.Errorf("deletedWithTheStack names %s, which template.yaml lacks", id)
		}
	}
}

// TestUpgradeFromTheReleaseReplacesNoStatefulResource: a stack of the release updated to this
// version keeps each stateful resource (same logical id and type: a renamed id is a new resource,
// the old one deleted), replaces none (same replacing properties) and rewrites no secret's value.
func TestUpgradeFromTheReleaseReplacesNoStatefulResource(t *testing.T) {
	t.Parallel()
	release, err := LoadTemplate(filepath.Join("testdata", "template-674a79e.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	head := projectTemplate(t)
	ids := statefulResources(release)
	if len(ids) == 0 {
		t.Fatal("the release has no stateful resources: nothing checked")
	}
	for _, id := range ids {
		before := resourceOf(release, id)
		typ, _ := before["Type"].(string)
		kind := statefulTypes[typ]
		t.Run(id, func(t *testing.T) {
			after := resourceOf(head, id)
			if after == nil || after["Type"] != typ {
				t.Fatalf("%s (%s) of the release is gone: an update deletes it (or keeps it, by its DeletionPolicy) and creates its successor empty (a function: behind a new Function URL)", id, typ)
			}
			pb, _ := before["Properties"].(map[string]any)
			pa, _ := after["Properties"].(map[string]any)
			for _, p := range slices.Concat(kind.replacing, kind.rewriting) {
				if !reflect.DeepEqual(pb[p], pa[p]) {
					t.Errorf("%s.%s: release %v, now %v: an update replaces or rewrites it (%s)", id, p, pb[p], pa[p], kind.doc)
				}
			}
		})
	}
}
