package cli

import (
	"strings"
	"testing"
)

// TestDoctorPoolsFromTheParameterNeedThePoolsFlag: a stack whose pools are
// in an SSM parameter (RunnerPoolsParameter, which the functions read in
// preference to RunnerPools) has doctor say so instead of checking
// RunnerPools or the scaffold's templates, which the functions do not use;
// --pools gives it the parameter's value.
func TestDoctorPoolsFromTheParameterNeedThePoolsFlag(t *testing.T) {
	t.Parallel()
	c := &CLI{}
	d := deployment{PoolsParameter: "/ghclaim/pools", scaffoldX64: "lt-0scaffold"}
	if _, err := c.pools(d); err == nil || !strings.Contains(err.Error(), "/ghclaim/pools") || !strings.Contains(err.Error(), "--pools") {
		t.Fatalf("pools of a stack with RunnerPoolsParameter: %v, want an error naming the parameter and --pools", err)
	}
	d.Pools = `[{"name":"p","labels":["x"],"provisioner":{"type":"ec2","launch_template":"lt-0given"}}]`
	ps, err := c.pools(d)
	if err != nil || len(ps) != 1 || ps[0].Provisioner.LaunchTemplate != "lt-0given" {
		t.Fatalf("with --pools: %v, %v; want the given pool", ps, err)
	}
}
