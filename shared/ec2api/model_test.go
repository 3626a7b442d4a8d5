package ec2api_test

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghclaim/ghclaim/infra/emulator"
	"github.com/ghclaim/ghclaim/shared/ec2api"
)

// model is the part of a botocore service model the checks read.
type model struct {
	Operations map[string]struct {
		Input  struct{ Shape string } `json:"input"`
		Output struct{ Shape string } `json:"output"`
	} `json:"operations"`
	Shapes map[string]shape `json:"shapes"`
}

type shape struct {
	Type    string            `json:"type"`
	Members map[string]member `json:"members"`
	Member  *member           `json:"member"`
}

type member struct {
	Shape        string `json:"shape"`
	LocationName string `json:"locationName"`
	QueryName    string `json:"queryName"`
}

func loadModel(t *testing.T) *model {
	t.Helper()
	b, err := emulator.ServiceModel("ec2", ec2api.APIVersion)
	if err != nil {
		t.Fatal(err)
	}
	var m model
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// requestKeys lists every Query key of shape the way EC2's protocol names
// them (queryName, else locationName capitalised, else the member name;
// lists flattened as .N), to depth levels.
func (m *model) requestKeys(name, prefix string, depth int, out map[string]string) {
	s := m.Shapes[name]
	if depth == 0 {
		return
	}
	switch s.Type {
	case "structure":
		for n, mem := range s.Members {
			k := n
			switch {
			case mem.QueryName != "":
				k = mem.QueryName
			case mem.LocationName != "":
				k = strings.ToUpper(mem.LocationName[:1]) + mem.LocationName[1:]
			}
			if prefix != "" {
				k = prefix + "." + k
			}
			m.requestKeys(mem.Shape, k, depth-1, out)
		}
	case "list":
		m.requestKeys(s.Member.Shape, prefix+".N", depth-1, out)
	default:
		out[prefix] = s.Type
	}
}

// responsePaths lists every element path of shape's XML answer:
// locationName (else the member name) per level, lists wrapped with their
// member's element name.
func (m *model) responsePaths(name, prefix string, depth int, out map[string]string) {
	s := m.Shapes[name]
	if depth == 0 {
		return
	}
	switch s.Type {
	case "structure":
		for n, mem := range s.Members {
			el := n
			if mem.LocationName != "" {
				el = mem.LocationName
			}
			m.responsePaths(mem.Shape, prefix+"/"+el, depth-1, out)
		}
	case "list":
		el := "member"
		if s.Member.LocationName != "" {
			el = s.Member.LocationName
		}
		m.responsePaths(s.Member.Shape, prefix+"/"+el, depth-1, out)
	default:
		out[prefix] = s.Type
	}
}

// xmlPaths lists the element paths the decoding of a value of type t
// reads, from its fields' xml tags.
func xmlPaths(t reflect.Type, prefix string, out map[string]reflect.Kind) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) {
		out[prefix] = t.Kind()
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("xml")
		if tag == "" || tag == "-" {
			continue
		}
		p := prefix + "/" + strings.ReplaceAll(tag, ">", "/")
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String {
			out[p] = reflect.String
			continue
		}
		xmlPaths(ft, p, out)
	}
}

var listIndex = regexp.MustCompile(`\.[0-9]+(\.|$)`)

// TestRequestsAndAnswersMatchEC2sModel checks every Query key the client
// sends and every element it decodes against EC2's published model, so a
// misspelt key (which EC2 would refuse, and moto may ignore) or element
// (which would decode as empty) fails here.
func TestRequestsAndAnswersMatchEC2sModel(t *testing.T) {
	t.Parallel()
	m := loadModel(t)
	prio := 2.0
	calls := []struct {
		op     string
		call   func(*ec2api.Client) error
		output any
	}{
		{op: "CreateFleet", output: ec2api.CreateFleetOutput{}, call: func(c *ec2api.Client) error {
			_, err := c.CreateFleet(context.Background(), &ec2api.CreateFleetInput{
				ClientToken: "t", Type: ec2api.FleetTypeInstant,
				TargetCapacitySpecification: ec2api.TargetCapacitySpecification{TotalTargetCapacity: 1, DefaultTargetCapacityType: ec2api.CapacityOnDemand},
				LaunchTemplateConfigs: []ec2api.FleetLaunchTemplateConfig{{
					LaunchTemplateSpecification: ec2api.LaunchTemplateSpecification{LaunchTemplateID: "lt-0a", LaunchTemplateName: "n", Version: "1"},
					Overrides:                   []ec2api.FleetOverride{{InstanceType: "m5.large", SubnetID: "subnet-0a", AvailabilityZone: "eu-west-1a", Priority: &prio}},
				}},
				TagSpecifications: []ec2api.TagSpecification{{ResourceType: "instance", Tags: []ec2api.Tag{{Key: "k", Value: "v"}}}},
				SpotOptions:       &ec2api.SpotOptions{AllocationStrategy: "price-capacity-optimized", InstanceInterruptionBehavior: "terminate"},
				OnDemandOptions:   &ec2api.OnDemandOptions{AllocationStrategy: "prioritized"},
			})
			return err
		}},
		{op: "DescribeInstances", output: ec2api.DescribeInstancesOutput{}, call: func(c *ec2api.Client) error {
			_, err := c.DescribeInstances(context.Background(), &ec2api.DescribeInstancesInput{
				InstanceIDs: []string{"i-0a"}, Filters: []ec2api.Filter{{Name: "tag-key", Values: []string{"k"}}}, NextToken: "n", MaxResults: 5,
			})
			return err
		}},
		{op: "TerminateInstances", output: ec2api.TerminateInstancesOutput{}, call: func(c *ec2api.Client) error {
			_, err := c.TerminateInstances(context.Background(), &ec2api.TerminateInstancesInput{InstanceIDs: []string{"i-0a"}})
			return err
		}},
		{op: "DescribeLaunchTemplates", output: ec2api.DescribeLaunchTemplatesOutput{}, call: func(c *ec2api.Client) error {
			_, err := c.DescribeLaunchTemplates(context.Background(), &ec2api.DescribeLaunchTemplatesInput{
				LaunchTemplateIDs: []string{"lt-0a"}, LaunchTemplateNames: []string{"n"},
				Filters: []ec2api.Filter{{Name: "tag-key", Values: []string{"k"}}}, NextToken: "n",
			})
			return err
		}},
		{op: "DescribeLaunchTemplateVersions", output: ec2api.DescribeLaunchTemplateVersionsOutput{}, call: func(c *ec2api.Client) error {
			_, err := c.DescribeLaunchTemplateVersions(context.Background(), &ec2api.DescribeLaunchTemplateVersionsInput{
				LaunchTemplateID: "lt-0a", LaunchTemplateName: "n", Versions: []string{"$Default"},
			})
			return err
		}},
	}
	for _, tt := range calls {
		t.Run(tt.op, func(t *testing.T) {
			op, ok := m.Operations[tt.op]
			if !ok {
				t.Fatalf("the model has no operation %s", tt.op)
			}
			c, e := setup(t, "eu-west-1", answer{200, "<R/>"})
			if err := tt.call(c); err != nil {
				t.Fatal(err)
			}
			keys := map[string]string{}
			m.requestKeys(op.Input.Shape, "", 8, keys)
			var sent []string
			for k := range e.bodies[0] {
				if k == "Action" || k == "Version" {
					continue
				}
				norm := k
				for listIndex.MatchString(norm) {
					norm = listIndex.ReplaceAllString(norm, ".N$1")
				}
				sent = append(sent, norm)
				if _, ok := keys[norm]; !ok {
					t.Errorf("%s sends %s (%s), which EC2's model does not have", tt.op, k, norm)
				}
			}
			if len(sent) == 0 {
				t.Errorf("%s sent no parameter: the check checked nothing", tt.op)
			}

			paths := map[string]string{}
			m.responsePaths(op.Output.Shape, "", 8, paths)
			read := map[string]reflect.Kind{}
			xmlPaths(reflect.TypeOf(tt.output), "", read)
			for p, kind := range read {
				typ, ok := paths[p]
				if !ok {
					t.Errorf("%s decodes %s, which EC2's answer does not have", tt.op, p)
					continue
				}
				want := map[string][]reflect.Kind{
					"string": {reflect.String}, "integer": {reflect.Int, reflect.Int32, reflect.Int64},
					"long": {reflect.Int64}, "double": {reflect.Float64}, "timestamp": {reflect.Struct}, "boolean": {reflect.Bool},
				}[typ]
				if !slices.Contains(want, kind) {
					t.Errorf("%s decodes %s (model type %s) into a %s", tt.op, p, typ, kind)
				}
			}
			if len(read) == 0 {
				t.Errorf("%s decodes nothing: the check checked nothing", tt.op)
			}
		})
	}
}
