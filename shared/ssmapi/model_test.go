package ssmapi_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// ssmModel is the part of SSM's botocore model the check reads.
type ssmModel struct {
	Metadata struct {
		TargetPrefix string `json:"targetPrefix"`
		JSONVersion  string `json:"jsonVersion"`
	} `json:"metadata"`
	Operations map[string]struct {
		Input  struct{ Shape string } `json:"input"`
		Output struct{ Shape string } `json:"output"`
	} `json:"operations"`
	Shapes map[string]struct {
		Type    string                            `json:"type"`
		Members map[string]struct{ Shape string } `json:"members"`
		Member  *struct{ Shape string }           `json:"member"`
		Enum    []string                          `json:"enum"`
	} `json:"shapes"`
}

// check reports every JSON member of t (a struct, or a slice or pointer of
// one) that shape does not have, and every member whose kind differs.
func (m *ssmModel) check(t *testing.T, where string, typ reflect.Type, shape string) {
	t.Helper()
	s, ok := m.Shapes[shape]
	if !ok {
		t.Errorf("%s: no shape %s in the model", where, shape)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if typ == reflect.TypeOf(ssmapi.Timestamp{}) {
		if s.Type != "timestamp" {
			t.Errorf("%s: a Timestamp, but the model's %s is a %s", where, shape, s.Type)
		}
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if s.Type != "structure" {
			t.Errorf("%s: a struct, but the model's %s is a %s", where, shape, s.Type)
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s: no JSON name", where, f.Name)
				continue
			}
			mem, ok := s.Members[name]
			if !ok {
				t.Errorf("%s.%s: the model's %s has no member %q", where, f.Name, shape, name)
				continue
			}
			m.check(t, where+"."+name, f.Type, mem.Shape)
		}
	case reflect.Slice:
		if s.Type != "list" || s.Member == nil {
			t.Errorf("%s: a slice, but the model's %s is a %s", where, shape, s.Type)
			return
		}
		m.check(t, where+"[]", typ.Elem(), s.Member.Shape)
	default:
		kinds := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int32: "integer", reflect.Int64: "long"}
		if kinds[typ.Kind()] != s.Type {
			t.Errorf("%s: a %s, but the model's %s is a %s", where, typ.Kind(), shape, s.Type)
		}
	}
}

// TestRequestsAndAnswersMatchSSMsModel checks every member this package
// sends or reads against SSM's published model, and the protocol's names.
func TestRequestsAndAnswersMatchSSMsModel(t *testing.T) {
	t.Parallel()
	b, err := emulator.ServiceModel("ssm", "2014-11-06")
	if err != nil {
		t.Fatal(err)
	}
	var m ssmModel
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Metadata.TargetPrefix != "AmazonSSM" || m.Metadata.JSONVersion != "1.1" {
		t.Errorf("protocol: got target prefix %q, JSON %q; want AmazonSSM, 1.1", m.Metadata.TargetPrefix, m.Metadata.JSONVersion)
	}
	for _, op := range []struct {
		name    string
		in, out any
	}{
		{"GetParameter", ssmapi.GetParameterInput{}, ssmapi.GetParameterOutput{}},
		{"PutParameter", ssmapi.PutParameterInput{}, ssmapi.PutParameterOutput{}},
		{"DeleteParameter", ssmapi.DeleteParameterInput{}, ssmapi.DeleteParameterOutput{}},
		{"DescribeParameters", ssmapi.DescribeParametersInput{}, ssmapi.DescribeParametersOutput{}},
		{"ListTagsForResource", ssmapi.ListTagsForResourceInput{}, ssmapi.ListTagsForResourceOutput{}},
	} {
		o, ok := m.Operations[op.name]
		if !ok {
			t.Errorf("no operation %s in the model", op.name)
			continue
		}
		m.check(t, op.name+" input", reflect.TypeOf(op.in), o.Input.Shape)
		m.check(t, op.name+" output", reflect.TypeOf(op.out), o.Output.Shape)
	}
	// The constants are values of the model's enums.
	for shape, values := range map[string][]string{
		"ParameterType":          {ssmapi.TypeString, ssmapi.TypeSecureString},
		"ParameterTier":          {ssmapi.TierStandard, ssmapi.TierAdvanced, ssmapi.TierIntelligentTiering},
		"ResourceTypeForTagging": {ssmapi.ResourceTypeParameter},
	} {
		for _, v := range values {
			found := false
			for _, e := range m.Shapes[shape].Enum {
				found = found || e == v
			}
			if !found {
				t.Errorf("%s: %q is not one of %v", shape, v, m.Shapes[shape].Enum)
			}
		}
	}
	// The error codes are the model's error shapes.
	for _, code := range []string{ssmapi.CodeParameterNotFound, ssmapi.CodeParameterAlreadyExists, ssmapi.CodeInvalidResourceID} {
		if s, ok := m.Shapes[code]; !ok || s.Type != "structure" {
			t.Errorf("error code %s: no such error shape in the model", code)
		}
	}
}
