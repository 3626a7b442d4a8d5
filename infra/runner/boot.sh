#!/bin/bash
# ghclaim runner boot script: the user data of a pool's EC2 launch template
# (Amazon Linux 2023 or Ubuntu, with the actions runner unpacked in RUNNER_DIR
# and the AWS CLI v2 on the AMI).
#
# The claimer (shared/provision, EC2 adapter) launches this instance with tags
# ghclaim:runner-name, ghclaim:job-id, … and instance metadata tags enabled,
# and leaves the runner's single-use JIT config in the SSM SecureString
# /ghclaim/runners/<runner name>. This script reads its runner name from its
# tags via IMDSv2, takes the config out of SSM (read, then delete), runs the
# runner for exactly one job as a non-root user, and powers the machine off
# when the runner exits. The launch sets InstanceInitiatedShutdownBehavior to
# terminate, so powering off ends the instance. Any failure powers off too:
# a machine without a runner must not linger (the claimer's retry starts anew).
#
# The JIT config is a credential. It never appears in a log: no `set -x`, no
# echo, and it reaches the runner through ACTIONS_RUNNER_INPUT_JITCONFIG (the
# runner reads it exactly like `./run.sh --jitconfig "$JIT"`, as
# actions-runner-controller does) so it is not in any process's command
# line, where `ps` or /proc/*/cmdline would show it.
#
# IAM permissions of the instance profile:
#   ssm:GetParameter, ssm:DeleteParameter
#       on arn:aws:ssm:<region>:<account>:parameter/ghclaim/runners/*
#   kms:Decrypt on the key of the parameters (the AWS managed key aws/ssm by
#       default; its key policy already allows use through SSM within the
#       account, a customer managed key needs the grant explicitly)
#   No ec2:DescribeTags: the tags come from instance metadata, not the EC2 API.
set -euo pipefail
set +x

RUNNER_USER=${RUNNER_USER:-runner}                  # non-root owner of RUNNER_DIR
RUNNER_DIR=${RUNNER_DIR:-/opt/actions-runner}
IMDS=http://169.254.169.254/latest

log() { echo "ghclaim-boot: $*"; }

# Power off however we leave: after the one job, or on any failure.
trap 'log "powering off"; shutdown -h now' EXIT

token=$(curl -fsS --retry 10 --retry-connrefused -X PUT \
	-H 'X-aws-ec2-metadata-token-ttl-seconds: 300' "$IMDS/api/token")
imds() { curl -fsS --retry 10 --retry-connrefused -H "X-aws-ec2-metadata-token: $token" "$IMDS/$1"; }

region=$(imds meta-data/placement/region)
name=$(imds meta-data/tags/instance/ghclaim:runner-name)
if [[ ! $name =~ ^[A-Za-z0-9][A-Za-z0-9_.-]*$ ]]; then
	log "tag ghclaim:runner-name missing or malformed"
	exit 1
fi
param=/ghclaim/runners/$name
log "runner $name, parameter $param"

# Read with a few retries: the instance profile's credentials can take a
# moment to appear right after launch.
jit=
for attempt in 1 2 3 4 5; do
	if jit=$(aws ssm get-parameter --region "$region" --name "$param" \
		--with-decryption --query Parameter.Value --output text 2>/dev/null); then
		break
	fi
	jit=
	sleep $((attempt * 2))
done
if [[ -z $jit ]]; then
	log "cannot read $param (missing: the claim was cleaned up, or access denied)"
	exit 1
fi
# Delete at once: the config is single-use and must not outlive the boot.
# A failed delete is not fatal (the runner can still take the job); the
# claimer's Cleanup or an operator removes leftovers.
aws ssm delete-parameter --region "$region" --name "$param" >/dev/null 2>&1 ||
	log "could not delete $param"

cd "$RUNNER_DIR"
export ACTIONS_RUNNER_INPUT_JITCONFIG=$jit
unset jit
log "starting runner as $RUNNER_USER"
status=0
sudo -u "$RUNNER_USER" --preserve-env=ACTIONS_RUNNER_INPUT_JITCONFIG ./run.sh || status=$?
unset ACTIONS_RUNNER_INPUT_JITCONFIG
log "runner exited with status $status"
