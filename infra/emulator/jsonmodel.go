package emulator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// JSONModel is a botocore model of an awsJson service (SSM, Secrets
// Manager), read to check a hand-written client's request and answer
// types against it: every JSON member they send or read must be the
// model's, of the model's kind.
type JSONModel struct {
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

// LoadJSONModel reads the model of service's API version (ServiceModel).
func LoadJSONModel(service, version string) (*JSONModel, error) {
	b, err := ServiceModel(service, version)
	if err != nil {
		return nil, err
	}
	var m JSONModel
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("model of %s %s: %w", service, version, err)
	}
	return &m, nil
}

// CheckOperation reports on t every member of in and out (structs, or
// pointers to them) that op's input and output shapes do not have, or
// have of another kind.
func (m *JSONModel) CheckOperation(t testing.TB, op string, in, out any) {
	t.Helper()
	o, ok := m.Operations[op]
	if !ok {
		t.Errorf("no operation %s in the model", op)
		return
	}
	m.check(t, op+" input", reflect.TypeOf(in), o.Input.Shape)
	m.check(t, op+" output", reflect.TypeOf(out), o.Output.Shape)
}

// CheckEnum reports on t each of values that is not one of shape's.
func (m *JSONModel) CheckEnum(t testing.TB, shape string, values ...string) {
	t.Helper()
	for _, v := range values {
		if !slices.Contains(m.Shapes[shape].Enum, v) {
			t.Errorf("%s: %q is not one of %v", shape, v, m.Shapes[shape].Enum)
		}
	}
}

// CheckErrors reports on t each code that is not an error shape of the
// model.
func (m *JSONModel) CheckErrors(t testing.TB, codes ...string) {
	t.Helper()
	for _, c := range codes {
		if s, ok := m.Shapes[c]; !ok || s.Type != "structure" {
			t.Errorf("error code %s: no such error shape in the model", c)
		}
	}
}

var timeType = reflect.TypeOf(time.Time{})

func (m *JSONModel) check(t testing.TB, where string, typ reflect.Type, shape string) {
	t.Helper()
	s, ok := m.Shapes[shape]
	if !ok {
		t.Errorf("%s: no shape %s in the model", where, shape)
		return
	}
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	// A struct embedding a time.Time is a timestamp (its own UnmarshalJSON
	// reads the model's epoch seconds).
	if typ.Kind() == reflect.Struct {
		if f, ok := typ.FieldByName("Time"); ok && f.Anonymous && f.Type == timeType {
			if s.Type != "timestamp" {
				t.Errorf("%s: a timestamp, but the model's %s is a %s", where, shape, s.Type)
			}
			return
		}
	}
	switch {
	case typ.Kind() == reflect.Struct:
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
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Uint8:
		if s.Type != "blob" {
			t.Errorf("%s: bytes, but the model's %s is a %s", where, shape, s.Type)
		}
	case typ.Kind() == reflect.Slice:
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
