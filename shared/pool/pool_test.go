package pool

import (
	"time"

	"strings"
	"testing"
)

const twoPools = `[
 {"name":"linux-x64","labels":["self-hosted","linux","x64"],"provisioner":{"type":"ec2","launch_template":"lt-0123"}},
 {"name":"gpu","labels":["self-hosted","linux","x64","gpu"],"scope":"org","runner_group_id":3,"allow_public":true,"provisioner":{"type":"dispatch","queue_url":"https://sqs.example/q"}}
]`

func TestParseFillsDefaults(t *testing.T) {
	t.Parallel()
	ps, err := Parse(twoPools)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := len(ps), 2; got != want {
		t.Fatalf("got %d pools, want %d", got, want)
	}
	if ps[0].Scope != ScopeRepo || ps[0].RunnerGroupID != 1 || ps[0].Provisioner.LaunchTemplateVersion != "$Default" {
		t.Errorf("defaults not filled: %+v", ps[0])
	}
	if ps[0].Provisioner.Capacity != CapacityOnDemand || ps[1].Provisioner.Capacity != "" {
		t.Errorf("capacity: got %q and %q, want on-demand for the ec2 pool and none for dispatch",
			ps[0].Provisioner.Capacity, ps[1].Provisioner.Capacity)
	}
	if ps[1].Scope != ScopeOrg || ps[1].RunnerGroupID != 3 || !ps[1].AllowPublic {
		t.Errorf("explicit values lost: %+v", ps[1])
	}
}

func TestParseErrorsNameTheProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "no pools"},
		{"empty list", `[]`, "no pools"},
		{"not json", `{`, "not a JSON list"},
		{"unknown field", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"},"lables":[]}]`, "lables"},
		{"bad name", `[{"name":"a b","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, `name "a b"`},
		{"no labels", `[{"name":"a","provisioner":{"type":"ec2","launch_template":"lt"}}]`, "labels"},
		{"bad scope", `[{"name":"a","labels":["x"],"scope":"enterprise","provisioner":{"type":"ec2","launch_template":"lt"}}]`, "scope"},
		{"ec2 without template", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2"}}]`, "launch_template"},
		{"dispatch without queue", `[{"name":"a","labels":["x"],"provisioner":{"type":"dispatch"}}]`, "queue_url"},
		{"bad capacity", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","capacity":"reserved"}}]`, `provisioner.capacity "reserved"`},
		{"unknown provisioner", `[{"name":"a","labels":["x"],"provisioner":{"type":"k8s"}}]`, "provisioner.type"},
		{"too many labels", `[{"name":"a","labels":["x"` + strings.Repeat(`,"x"`, 100) + `],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, "101 labels"},
		{"subnet twice", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","subnets":["subnet-1","subnet-2","subnet-1"]}}]`, `provisioner.subnets: "subnet-1" listed twice`},
		{"empty subnet", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","subnets":["subnet-1",""]}}]`, "provisioner.subnets: empty entry"},
		{"instance type twice", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","instance_types":["m7g.large","m7g.large"]}}]`, `provisioner.instance_types: "m7g.large" listed twice`},
		{"padded label", `[{"name":"a","labels":["self-hosted","linux "],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, `labels: "linux " has spaces around it`},
		{"a label twice, in another case", `[{"name":"a","labels":["self-hosted","Linux","linux"],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, `labels: "Linux" and "linux" are one label`},
		{"padded subnet", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","subnets":["subnet-0a1b2c3d "]}}]`, `provisioner.subnets: "subnet-0a1b2c3d " has spaces around it`},
		{"padded instance type", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","instance_types":[" t3.micro"]}}]`, `provisioner.instance_types: " t3.micro" has spaces around it`},
		{"launch template version latest", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","launch_template_version":"latest"}}]`, `provisioner.launch_template_version "latest": want a version number, $Latest or $Default`},
		{"launch template version v2", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","launch_template_version":"v2"}}]`, `provisioner.launch_template_version "v2"`},
		{"launch template version 0", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","launch_template_version":"0"}}]`, `provisioner.launch_template_version "0"`},
		{"text after the list", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"}}], {"name":"b","labels":["y"],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, "text after the list"},
		{"stray closing bracket", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"}}]]`, "text after the list"},
		{"duplicate name", `[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"}},{"name":"a","labels":["y"],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, "used twice"},
		{"names differing only in case", `[{"name":"linux","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt"}},{"name":"Linux","labels":["y"],"provisioner":{"type":"ec2","launch_template":"lt"}}]`, `pool 1 ("Linux"): name used twice, by pool 0 as "linux"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	ps, err := Parse(twoPools)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		labels []string
		want   string // "" = no match
	}{
		{"exact", []string{"self-hosted", "linux", "x64"}, "linux-x64"},
		{"subset", []string{"self-hosted", "linux"}, "linux-x64"},
		{"case-insensitive", []string{"Self-Hosted", "LINUX"}, "linux-x64"},
		{"first match wins over later superset", []string{"linux"}, "linux-x64"},
		{"only the second pool has gpu", []string{"self-hosted", "gpu"}, "gpu"},
		{"label no pool has", []string{"self-hosted", "windows"}, ""},
		{"no labels", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, ok := Match(ps, tt.labels)
			if got := p.Name; ok != (tt.want != "") || got != tt.want {
				t.Fatalf("got %q (matched %v), want %q", got, ok, tt.want)
			}
		})
	}
}

func TestRunnerStartGrace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace string
		want  time.Duration
		ok    bool
	}{
		{name: "unset", grace: "", want: 0, ok: true},
		{name: "minutes", grace: "15m", want: 15 * time.Minute, ok: true},
		{name: "too short", grace: "10s"},
		{name: "too long", grace: "7h"},
		{name: "not a duration", grace: "ten minutes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pools, err := Parse(`[{"name":"linux","labels":["self-hosted"],"provisioner":{"type":"dispatch","queue_url":"q"},"runner_start_grace":"` + tt.grace + `"}]`)
			if (err == nil) != tt.ok {
				t.Fatalf("Parse: got err %v, want ok %v", err, tt.ok)
			}
			if err == nil && pools[0].StartGrace() != tt.want {
				t.Fatalf("StartGrace: got %s, want %s", pools[0].StartGrace(), tt.want)
			}
		})
	}
}

// TestLaunchTemplateVersionsEC2Takes: a version number, $Latest and
// $Default, as EC2's launch template specification takes them.
func TestLaunchTemplateVersionsEC2Takes(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"$Latest", "$Default", "1", "42"} {
		ps, err := Parse(`[{"name":"a","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt","launch_template_version":"` + v + `"}}]`)
		if err != nil || ps[0].Provisioner.LaunchTemplateVersion != v {
			t.Errorf("version %q: %v, want it taken", v, err)
		}
	}
}

// TestTemplateVersionEdges: what the version check takes at its edges, as
// the expression it replaced (^(\$Latest|\$Default|[1-9][0-9]{0,17})$) did.
func TestTemplateVersionEdges(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{
		"$Latest": true, "$Default": true, "1": true, "9": true, "10": true, "123456789012345678": true,
		"": false, "0": false, "01": false, "1234567890123456789": false, "$latest": false, "$Latest\n": false,
		"1\n": false, " 1": false, "1.0": false, "-1": false, "+1": false, "１": false, "$Latest$Default": false,
	} {
		if got := validTemplateVersion(v); got != want {
			t.Errorf("validTemplateVersion(%q) = %v, want %v", v, got, want)
		}
	}
}
