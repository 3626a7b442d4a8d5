// Package provisioners builds the provisioners of the three functions
// that start or clean up runners (claimer, reclaimer, janitor) and the
// janitor's listing of what they leave, one way for all three: the EC2
// adapter and the listing scoped to the deployment (GHCLAIM_STACK), so no
// wiring can tag machines with one stack and list them with another. It
// is a package of its own because shared/wire must not link EC2 and SSM
// into the webhook.
package provisioners

import (
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghclaim/ghclaim/shared/ec2api"
	"github.com/ghclaim/ghclaim/shared/pool"
	"github.com/ghclaim/ghclaim/shared/provision"
	"github.com/ghclaim/ghclaim/shared/ssmapi"
	"github.com/ghclaim/ghclaim/shared/wire"
)

// New returns the provisioners by type (EC2 and dispatch) and the listing
// of EC2 machines and JIT configs, both of stack ("" for none). The
// dispatch provisioner sends through sqsClient; the JIT configs go through
// an SSM client with env.SSM's options.
func New(awsCfg aws.Config, env wire.Env, sqsClient *sqs.Client, log *slog.Logger, stack string) (provision.Registry, provision.Leftovers) {
	instances, parameters := ec2api.New(awsCfg), ssmapi.New(awsCfg, env.SSM...)
	return provision.Registry{
			pool.ProvisionerEC2:      provision.NewEC2(instances, parameters, log).InStack(stack),
			pool.ProvisionerDispatch: provision.NewDispatch(sqsClient, log),
		},
		provision.Leftovers{Instances: instances, Parameters: parameters, Stack: stack}
}
