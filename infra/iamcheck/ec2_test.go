package iamcheck_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ghclaim/ghclaim/infra/iamcheck"
	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
)

// fakeAWS answers the claimer's launch as EC2 and SSM would: an instant
// fleet with one instance, that instance described, the JIT config put.
type fakeAWS struct{}

func (fakeAWS) Do(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	ctype, answer := "text/xml;charset=UTF-8", ""
	form, _ := url.ParseQuery(string(body))
	switch {
	case r.Header.Get("X-Amz-Target") != "": // SSM PutParameter / DeleteParameter
		ctype, answer = "application/x-amz-json-1.1", `{"Version":1,"Tier":"Advanced"}`
	case form.Get("Action") == "DescribeLaunchTemplateVersions": // the template fit for a runner
		answer = `<DescribeLaunchTemplateVersionsResponse><launchTemplateVersionSet><item><launchTemplateId>lt-0123456789abcdef0</launchTemplateId><versionNumber>1</versionNumber><launchTemplateData><instanceInitiatedShutdownBehavior>terminate</instanceInitiatedShutdownBehavior><metadataOptions><httpTokens>required</httpTokens><instanceMetadataTags>enabled</instanceMetadataTags></metadataOptions></launchTemplateData></item></launchTemplateVersionSet></DescribeLaunchTemplateVersionsResponse>`
	case form.Get("Action") == "CreateFleet":
		answer = `<CreateFleetResponse><fleetId>fleet-1</fleetId><fleetInstanceSet><item><instanceIds><item>i-0123456789abcdef0</item></instanceIds></item></fleetInstanceSet></CreateFleetResponse>`
	case form.Get("Action") == "DescribeInstances" && form.Get("InstanceId.1") != "":
		answer = `<DescribeInstancesResponse><reservationSet><item><ownerId>123456789012</ownerId><instancesSet><item><instanceId>i-0123456789abcdef0</instanceId><instanceState><code>0</code><name>pending</name></instanceState></item></instancesSet></item></reservationSet></DescribeInstancesResponse>`
	default: // the lookup of an existing machine: none
		answer = `<DescribeInstancesResponse><reservationSet/></DescribeInstancesResponse>`
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ctype}},
		Body: io.NopCloser(strings.NewReader(answer)), ContentLength: int64(len(answer)), Request: r}, nil
}

// TestClaimerMayLaunchThroughAnInstantFleet: the claimer's real launch
// (shared/provision's EC2 adapter: DescribeLaunchTemplateVersions,
// CreateFleet, DescribeInstances, PutParameter with tags) judged by its role in template.yaml as IAM
// judges it. The Service Authorization Reference's CreateFleet row
// (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html)
// authorises ec2:CreateFleet against fleet* and instance* (both required),
// and image, launch-template, placement-group, subnet, volume.
func TestClaimerMayLaunchThroughAnInstantFleet(t *testing.T) {
	t.Parallel()
	stack := testStack()
	p, err := iamcheck.Load(mustPath(t), "ClaimerFunction", iamcheck.StackValues(stack, nil))
	if err != nil {
		t.Fatal(err)
	}
	c := &iamcheck.Client{Checker: iamcheck.NewChecker(p), Next: fakeAWS{}}
	ac := cfg(c)
	e := provision.NewEC2(ec2api.New(ac), ssmapi.New(ac), nil).InStack("s")
	req := provision.Request{JobID: 42, RunID: 7, Repo: "octo/hello", RunnerName: "linux-42", JITConfig: "e30=",
		Pool: pool.Pool{Name: "linux", Labels: []string{"self-hosted", "linux"}, Scope: pool.ScopeRepo, RunnerGroupID: 1,
			Provisioner: pool.Provisioner{Type: pool.ProvisionerEC2, LaunchTemplate: "lt-0123456789abcdef0",
				Subnets: []string{"subnet-0a"}, InstanceTypes: []string{"m7g.large"}}}}
	_, perr := e.Provision(context.Background(), req)
	if d := c.Denied(); len(d) > 0 {
		t.Fatalf("the claimer's launch is refused by its role: %q (provision: %v)", d, perr)
	}
	if perr != nil {
		t.Fatalf("provision: %v", perr)
	}
}
