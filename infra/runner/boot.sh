#!/bin/bash
# ghclaim runner boot script, run as root by the user data of a pool's EC2
# launch template (template.yaml's scaffold embeds this very file; a test
# keeps the two equal). It needs the actions runner unpacked in RUNNER_DIR,
# owned by RUNNER_USER, the AWS CLI v2, iptables, curl and base64.
#
# The claimer (shared/provision, EC2 adapter) launches this instance with tags
# ghclaim:runner-name, ghclaim:job-id, … and instance metadata tags enabled,
# then writes the runner's single-use JIT config to the SSM SecureString
# /ghclaim/runners/<runner name>, tagged ghclaim:instance-arn = this
# instance's ARN. The runner role may read and delete such a parameter only
# when that tag equals ec2:SourceInstanceARN, so no other machine can read
# it. This script, in this order:
#  1. reads its runner name from its tags via IMDSv2 and waits (bounded,
#     GHCLAIM_PARAM_WAIT seconds) for its parameter, which the claimer
#     writes only after the launch;
#  2. reads it with decryption, then deletes it: a config is read once;
#  3. rejects the runner user's traffic to the instance metadata service
#     (an iptables owner-match rule), so a job gets neither the instance
#     role's credentials nor anything else IMDS holds, unless the pool's
#     launch template opts in with GHCLAIM_JOBS_USE_INSTANCE_ROLE=true.
#     REJECT, not DROP: an SDK in a job fails at once instead of waiting
#     out its IMDS timeouts. Containers on a bridge network are kept away
#     by the launch template's hop limit of 1 (their packets take a hop);
#     the IPv6 IMDS endpoint is off there;
#  4. runs the runner for exactly one job as RUNNER_USER and powers off when
#     it exits. The launch sets InstanceInitiatedShutdownBehavior to
#     terminate, so powering off ends the instance.
# Any failure powers off too: a machine without a runner must not linger (the
# claimer's reclaim starts anew). So does a runner that has not been
# assigned a job within GHCLAIM_IDLE_LIMIT seconds (0: no limit): it is
# stopped, the machine powers off, and the reclaimer re-attempts the job if
# it is still queued.
#
# The JIT config is a credential. It never appears in a log (no `set -x`, no
# echo), in a command line (/proc/*/cmdline) or in an environment
# (/proc/*/environ, which the job, running as RUNNER_USER, could read for
# the runner's processes). `run.sh --jitconfig X` (or
# ACTIONS_RUNNER_INPUT_JITCONFIG) would put it in one of the two: the
# runner's Listener takes it there, decodes it (base64 of a JSON object
# mapping file names to base64 contents) and writes those files (.runner,
# .credentials, .credentials_rsaparams) into its root directory before
# running (actions/runner src/Runner.Listener/Runner.cs, ExecuteCommand).
# This script writes the same files itself, mode 0600 owned by RUNNER_USER,
# and starts `run.sh` with no argument: the runner takes the path it takes
# after decoding. What the job can still read is only those files, which
# the runner keeps reading for its own session; they are worth this one
# runner, which already runs that job.
#
# IAM permissions of the instance profile (template.yaml, RunnerRole):
#   ssm:GetParameter, ssm:DeleteParameter
#       on arn:aws:ssm:<region>:<account>:parameter/ghclaim/runners/*
#       only where ssm:resourceTag/ghclaim:instance-arn = ${ec2:SourceInstanceARN}
#   nothing for KMS with the AWS managed key aws/ssm (its key policy allows
#       use through SSM within the account; a customer managed key needs
#       kms:Decrypt granted)
#   No ec2:DescribeTags: the tags come from instance metadata, not the EC2 API.
set -euo pipefail
set +x

RUNNER_USER=${RUNNER_USER:-runner}
RUNNER_DIR=${RUNNER_DIR:-/opt/actions-runner}
GHCLAIM_PARAM_WAIT=${GHCLAIM_PARAM_WAIT:-600}
GHCLAIM_DELETE_WAIT=${GHCLAIM_DELETE_WAIT:-120}
GHCLAIM_IDLE_LIMIT=${GHCLAIM_IDLE_LIMIT:-900}
GHCLAIM_JOBS_USE_INSTANCE_ROLE=${GHCLAIM_JOBS_USE_INSTANCE_ROLE:-false}
IMDS_IP=169.254.169.254
IMDS=http://$IMDS_IP/latest
POLL=5 # seconds between two reads of a parameter not yet written

log() { echo "ghclaim-boot: $*"; }

# Power off however we leave: after the one job, or on any failure.
trap 'log "powering off"; shutdown -h now' EXIT

# Whole seconds only, in decimal: bash arithmetic refuses "900.5" and
# reads "0900" as octal (refused too), and a refused idle limit would
# silently mean none.
for v in GHCLAIM_PARAM_WAIT GHCLAIM_DELETE_WAIT GHCLAIM_IDLE_LIMIT; do
	if [[ ! ${!v} =~ ^(0|[1-9][0-9]{0,8})$ ]]; then
		log "$v=${!v} is not a whole number of seconds"
		exit 1
	fi
done

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

# 1-2. The claimer writes the parameter after the launch: wait for it,
# GHCLAIM_PARAM_WAIT seconds by the clock (not a count of polls: each
# call's own time comes on top of a poll's) and as many polls at most,
# each call bounded too (SSM_TIMEOUTS: the CLI's own are a minute to
# connect and a minute to read, three attempts, so an SSM that silently
# drops packets would stretch every poll to minutes and the wait to hours).
SSM_TIMEOUTS=(--cli-connect-timeout 5 --cli-read-timeout 10)
# Parameter Store's request rate is the account's and Region's, shared by
# every machine of a burst booting at once: the CLI's adaptive mode paces
# its own attempts when throttled, and tries a few more than its default 3.
export AWS_RETRY_MODE=adaptive AWS_MAX_ATTEMPTS=6
deadline=$(($(date +%s) + GHCLAIM_PARAM_WAIT))
jit=
polls=0
while :; do
	if jit=$(aws ssm get-parameter --region "$region" --name "$param" \
		--with-decryption --query Parameter.Value --output text "${SSM_TIMEOUTS[@]}" 2>/dev/null) && [[ -n $jit ]]; then
		break
	fi
	jit=
	left=$((deadline - $(date +%s)))
	((left > 0)) || break
	sleep "$((left < POLL ? left : POLL))"
	((++polls * POLL < GHCLAIM_PARAM_WAIT && $(date +%s) < deadline)) || break
done
if [[ -z $jit ]]; then
	log "no readable $param within ${GHCLAIM_PARAM_WAIT}s (cleaned up, or access denied)"
	exit 1
fi
# The delete is tried again while it fails for a passing reason (a
# throttle past the CLI's own attempts, a timeout), with doubling jittered
# waits, for GHCLAIM_DELETE_WAIT seconds and 8 tries at most: one throttled
# delete once powered the machine off with its config read, and the job
# waited for the runner-start grace and a new attempt. A parameter already
# gone (ParameterNotFound) is deleted as far as anyone can read it. A
# refusal (access denied) is for good only while the parameter can still
# be read: the role's tag condition cannot match a parameter that is gone,
# so a delete whose answer was lost (a timeout) and that is tried again
# (by the CLI or here) is refused too; a read refused or not found then
# says it is gone. The CLI's error text names the parameter and the error,
# never the value, and is not logged; the read's value goes nowhere. The
# codes are matched in their parentheses: the text also names the
# parameter, and a runner name may spell a code. The bound is on starting
# a try: each call's own time (its attempts and timeouts) comes on top.
delete_deadline=$(($(date +%s) + GHCLAIM_DELETE_WAIT))
wait=2
tries=0
while :; do
	if err=$(aws ssm delete-parameter --region "$region" --name "$param" "${SSM_TIMEOUTS[@]}" 2>&1 >/dev/null); then
		break
	fi
	case $err in
	*"(ParameterNotFound)"*) break ;;
	*"(AccessDeniedException)"* | *"not authorized"*)
		if err=$(aws ssm get-parameter --region "$region" --name "$param" \
			--query Parameter.Version --output text "${SSM_TIMEOUTS[@]}" 2>&1 >/dev/null); then
			tries=8 # still there and readable: the delete is refused for good
		elif [[ $err == *"(ParameterNotFound)"* || $err == *"(AccessDeniedException)"* || $err == *"not authorized"* ]]; then
			break # gone: nobody can read it any more
		fi
		;; # the read failed otherwise (a throttle): the delete is tried again
	esac
	pause=$((wait + RANDOM % wait))
	if ((++tries >= 8 || $(date +%s) + pause > delete_deadline)); then
		log "cannot delete $param: not running a runner whose config could be read again"
		exit 1
	fi
	log "delete of $param failed, trying again in ${pause}s"
	sleep "$pause"
	wait=$((wait * 2 > 30 ? 30 : wait * 2))
done

# 3.
if [[ $GHCLAIM_JOBS_USE_INSTANCE_ROLE == true ]]; then
	log "the launch template gives jobs the instance role: IMDS stays reachable"
else
	iptables -w -I OUTPUT -d "$IMDS_IP" -m owner --uid-owner "$RUNNER_USER" -j REJECT
	log "IMDS closed to $RUNNER_USER"
fi

# 4. The runner's own files, from the config; a file name is a bare
# dot-name (no path), a content base64.
json=$(base64 -d <<<"$jit")
entry='"(\.[A-Za-z_]+)"[[:space:]]*:[[:space:]]*"([A-Za-z0-9+/=]*)"'
files=0
while [[ $json =~ $entry ]]; do
	dst=$RUNNER_DIR/${BASH_REMATCH[1]}
	rm -f "$dst"
	(umask 077 && base64 -d <<<"${BASH_REMATCH[2]}" >"$dst")
	chown "$RUNNER_USER" "$dst"
	json=${json#*"${BASH_REMATCH[0]}"}
	files=$((files + 1))
done
unset jit json entry
# The runner needs all three; an entry this parser could not read (an
# escape it does not know, say) would start a runner that fails at once.
for f in .runner .credentials .credentials_rsaparams; do
	if [[ ! -s $RUNNER_DIR/$f ]]; then
		log "the JIT config holds no runner file $f that this script can read ($files read)"
		exit 1
	fi
done

# Stops a runner that took no job within the idle limit. Once the
# runner's Listener has acquired a job it writes "<time>: Running job:
# <name>" (to its console and its _diag/Runner_* log), then renews the
# job's lock (a network call, retried), and only then starts a Worker,
# which logs to _diag/Worker_*: a stop in between would cancel a job that
# GitHub does not queue again, so either sign means the job is taken.
took_job() {
	compgen -G "$RUNNER_DIR/_diag/Worker_*" >/dev/null ||
		grep -qs ': Running job: ' "$RUNNER_DIR"/_diag/Runner_*.log
}

idle_watch() {
	sleep "$GHCLAIM_IDLE_LIMIT"
	if took_job; then
		log "runner took a job"
		return
	fi
	log "no job within ${GHCLAIM_IDLE_LIMIT}s: stopping the runner"
	kill -TERM "$1" 2>/dev/null || true
}

cd "$RUNNER_DIR"
log "starting runner as $RUNNER_USER"
sudo -u "$RUNNER_USER" ./run.sh &
runner=$!
watcher=
if ((GHCLAIM_IDLE_LIMIT > 0)); then
	idle_watch "$runner" &
	watcher=$!
fi
status=0
wait "$runner" || status=$?
[[ -z $watcher ]] || kill "$watcher" 2>/dev/null || true
log "runner exited with status $status"
