package emulator

import (
	"reflect"
	"slices"
	"testing"
)

func TestDecodeTemplateRewritesShortFormIntrinsics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want any
	}{
		{"Ref", `v: !Ref Table`, map[string]any{"Ref": "Table"}},
		{"Ref keeps a numeric-looking name as text", `v: !Ref 123`, map[string]any{"Ref": "123"}},
		{"GetAtt scalar", `v: !GetAtt Queue.Arn`, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"GetAtt nested attribute", `v: !GetAtt Fn.Url.FunctionUrl`, map[string]any{"Fn::GetAtt": []any{"Fn", "Url.FunctionUrl"}}},
		{"GetAtt list", `v: !GetAtt [Queue, Arn]`, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"Sub scalar", `v: !Sub "${Table.Arn}/index/sweep"`, map[string]any{"Fn::Sub": "${Table.Arn}/index/sweep"}},
		{"Sub with variables", "v: !Sub\n  - ${A}-${B}\n  - B: !Ref P", map[string]any{"Fn::Sub": []any{"${A}-${B}", map[string]any{"B": map[string]any{"Ref": "P"}}}}},
		{"Join of Ref", `v: !Join ["", !Ref L]`, map[string]any{"Fn::Join": []any{"", map[string]any{"Ref": "L"}}}},
		{"Not Equals", `v: !Not [!Equals [!Ref P, ""]]`, map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "P"}, ""}}}}},
		{"If with NoValue", `v: !If [C, 1, !Ref "AWS::NoValue"]`, map[string]any{"Fn::If": []any{"C", 1, map[string]any{"Ref": "AWS::NoValue"}}}},
		{"Select Split", `v: !Select [0, !Split [",", !Ref L]]`, map[string]any{"Fn::Select": []any{0, map[string]any{"Fn::Split": []any{",", map[string]any{"Ref": "L"}}}}}},
		{"Condition", `v: !And [!Condition A, !Condition B]`, map[string]any{"Fn::And": []any{map[string]any{"Condition": "A"}, map[string]any{"Condition": "B"}}}},
		{"GetAZs Base64 FindInMap", `v: [!GetAZs "", !Base64 x, !FindInMap [M, k, v]]`, []any{map[string]any{"Fn::GetAZs": ""}, map[string]any{"Fn::Base64": "x"}, map[string]any{"Fn::FindInMap": []any{"M", "k", "v"}}}},
		{"long form untouched", `v: {"Fn::GetAtt": ["Q", "Arn"]}`, map[string]any{"Fn::GetAtt": []any{"Q", "Arn"}}},
		{"plain scalars keep their types", `v: [1, true, "x", 2.5]`, []any{1, true, "x", 2.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeTemplate([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got["v"], tt.want) {
				t.Errorf("got %#v, want %#v", got["v"], tt.want)
			}
		})
	}
}

func TestDecodeTemplateRejectsGetAttWithoutAttribute(t *testing.T) {
	t.Parallel()
	if _, err := decodeTemplate([]byte(`v: !GetAtt Queue`)); err == nil {
		t.Fatal("got nil error for !GetAtt without an attribute")
	}
}

// A SAM template in miniature: what survives is what moto can create and what does not
// (transitively) lean on a function.
const samTemplate = `
Transform: AWS::Serverless-2016-10-31
Parameters:
  AppId: {Type: String}
  Size: {Type: Number, Default: 5}
  Retries: {Type: Number, Default: 3}
  Role: {Type: String, Default: ""}
  Unused: {Type: String, Default: x}
Conditions:
  HasRole: !Not [!Equals [!Ref Role, ""]]
  Big: !Equals [!Ref Size, 10]
  BigAndRole: !And [!Condition Big, !Condition HasRole]
Globals:
  Function: {Timeout: 3}
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    DeletionPolicy: Retain
    UpdateReplacePolicy: Retain
    Properties: {BillingMode: PAY_PER_REQUEST}
  Queue:
    Type: AWS::SQS::Queue
    Condition: BigAndRole
    Properties:
      RedrivePolicy: {deadLetterTargetArn: !GetAtt DLQ.Arn, maxReceiveCount: !Ref Retries}
  DLQ:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment: {Variables: {APP: !Ref AppId, Q: !Ref Queue}}
      Policies: [!If [HasRole, {Statement: []}, !Ref AWS::NoValue]]
  FnAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties: {Dimensions: [{Name: FunctionName, Value: !Ref Fn}]}
  QueueAfterAlarm:
    Type: AWS::SQS::Queue
    DependsOn: FnAlarm
  QueueNamedAfterFn:
    Type: AWS::SQS::Queue
    Properties: {QueueName: !Sub "${Fn}-q"}
  QueueWithLocalSub:
    Type: AWS::SQS::Queue
    Properties: {QueueName: !Sub ["${Local}-${AWS::StackName}-${!Literal}", {Local: !GetAtt DLQ.QueueName}]}
Outputs:
  Url: {Value: !GetAtt FnUrl.FunctionUrl}
  TableName: {Value: !Ref Table}
  FnName: {Value: !Sub "${Fn}"}
  DLQArn: {Value: !GetAtt DLQ.Arn, Condition: Big}
`

func TestEmulatableDropsFunctionsAndEverythingLeaningOnThem(t *testing.T) {
	t.Parallel()
	tmpl, err := decodeTemplate([]byte(samTemplate))
	if err != nil {
		t.Fatal(err)
	}
	got, dropped, err := emulatable(tmpl, func(typ string) bool { return slices.Contains(Kept, typ) })
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		section string
		want    []string
	}{
		{"resources of kept types that use no function", "Resources", []string{"DLQ", "Queue", "QueueWithLocalSub", "Table"}},
		{"outputs that use only kept resources", "Outputs", []string{"DLQArn", "TableName"}},
		{"conditions the kept parts use, transitively", "Conditions", []string{"Big", "BigAndRole", "HasRole"}},
		{"parameters the kept parts and their conditions use", "Parameters", []string{"Retries", "Role", "Size"}},
		{"no SAM sections", "Transform", nil},
		{"no SAM globals", "Globals", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			section, _ := got[tt.section].(map[string]any)
			if keys := sortedKeys(section); !slices.Equal(keys, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.section, keys, tt.want)
			}
		})
	}
	t.Run("dropped resources are reported", func(t *testing.T) {
		want := []string{"Fn", "FnAlarm", "QueueAfterAlarm", "QueueNamedAfterFn"}
		if !slices.Equal(dropped, want) {
			t.Errorf("dropped: got %v, want %v", dropped, want)
		}
	})
	t.Run("retention policies are stripped from the scratch stack only", func(t *testing.T) {
		table := got["Resources"].(map[string]any)["Table"].(map[string]any)
		for _, k := range []string{"DeletionPolicy", "UpdateReplacePolicy"} {
			if _, ok := table[k]; ok {
				t.Errorf("Table still has %s", k)
			}
		}
		orig := tmpl["Resources"].(map[string]any)["Table"].(map[string]any)
		if orig["DeletionPolicy"] != "Retain" {
			t.Errorf("input template modified: DeletionPolicy = %v", orig["DeletionPolicy"])
		}
	})
}

func TestEmulatableRejectsUndefinedCondition(t *testing.T) {
	t.Parallel()
	tmpl, err := decodeTemplate([]byte("Resources:\n  Q: {Type: AWS::SQS::Queue, Condition: Nope}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := emulatable(tmpl, func(string) bool { return true }); err == nil {
		t.Fatal("got nil error for a resource using an undefined condition")
	}
}

func TestReplaceRefs(t *testing.T) {
	t.Parallel()
	in := map[string]any{
		"a": map[string]any{"Ref": "Secret"},
		"b": []any{map[string]any{"Ref": "Other"}, map[string]any{"Fn::Join": []any{",", []any{map[string]any{"Ref": "Secret"}}}}},
	}
	want := map[string]any{
		"a": "arn:s",
		"b": []any{map[string]any{"Ref": "Other"}, map[string]any{"Fn::Join": []any{",", []any{"arn:s"}}}},
	}
	if got := replaceRefs(in, map[string]string{"Secret": "arn:s"}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}
