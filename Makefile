# ghclaim: build, test and lint (GNU make).
#
#   make build   the Lambda bootstraps in bin/<function>/bootstrap (linux/arm64, provided.al2023)
#   make test    every test and make lint's checks; integration tests start their own moto_server
#                (pip install 'moto[server]'), forked from one warm factory, or use
#                AWS_ENDPOINT_URL (LocalStack)
#   make lint    gofmt, go vet, cfn-lint template.yaml
#   make app     register the GitHub App and store its secrets in the stack (after sam deploy)
#   sam build    runs the build-<LogicalId> targets below with ARTIFACTS_DIR set

GO ?= go
# Pure Go everywhere, as the functions ship: go vet, the tests and infra/local's builds of the
# function binaries then share one compiled copy of every dependency. With cgo on (the default
# where a C compiler exists), net and everything above it, the AWS SDK included, compiles twice.
export CGO_ENABLED ?= 0
FUNCTIONS := webhook claimer reclaimer janitor redeliverer
TEST_TIMEOUT ?= 10m

# Static, stripped, reproducible arm64 binaries; lambda.norpc drops the legacy Go 1.x RPC
# runtime, which provided.al2023 never uses.
LAMBDA_ENV := CGO_ENABLED=0 GOOS=linux GOARCH=arm64
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags="-s -w"

BOOTSTRAPS := $(FUNCTIONS:%=bin/%/bootstrap)
SAM_TARGETS := build-WebhookFunction build-ClaimerFunction build-ReclaimerFunction build-JanitorFunction build-RedelivererFunction

.PHONY: build test lint gofmt browser run local clean $(BOOTSTRAPS) $(SAM_TARGETS)

build: $(BOOTSTRAPS)

# Always handed to go build: its cache knows better than make what changed.
$(BOOTSTRAPS): bin/%/bootstrap:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $@ ./functions/$*

# sam build (Metadata: BuildMethod: makefile) runs `make build-<LogicalId>` with ARTIFACTS_DIR.
build-WebhookFunction: FUNCTION := webhook
build-ClaimerFunction: FUNCTION := claimer
build-ReclaimerFunction: FUNCTION := reclaimer
build-JanitorFunction: FUNCTION := janitor
build-RedelivererFunction: FUNCTION := redeliverer
$(SAM_TARGETS):
	$(if $(ARTIFACTS_DIR),,$(error ARTIFACTS_DIR is not set: $@ is run by sam build; use make build))
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/$(FUNCTION)

# go vet runs inside go test (-vet=all: every analyser of `go vet`, on every package, those
# without tests too, and on the test files), so each package is analysed as soon as it is
# compiled, on the cores the tests leave idle, instead of in a pass of its own after them.
# -ldflags='-s -w': go test links every test binary afresh (links are not cached) and DWARF is
# a third of that work. -trimpath (also for make lint, make run and infra/local's builds):
# without it a compiled package's cache key holds the clone's directory, so every fresh clone
# (CI's is always one) compiled ghclaim's own packages again; with it, any clone finds them
# compiled.
# withmoto keeps one warm moto factory up for the run: each test binary's emulator is a fresh
# moto_server forked from it instead of one it launches and warms itself (infra/emulator).
# -p 4 on two cores: several test binaries mostly wait (on timers, on the emulator), so four at
# a time keep both cores busy. cfn-lint (seconds of Python) runs beside the tests; its failure
# fails make test all the same.
# go test starts the packages in the order it is given them: the longest-running first
# (TEST_FIRST, then ./... for the rest), so they overlap the many short ones instead of starting
# last and running alone at the end (83 s instead of 93-105 s on two cores, 2026-12-02).
TEST_PARALLEL ?= 4
TEST_FIRST = ./infra/emulator ./infra/chaos ./shared/store ./shared/webhook ./shared/reclaim ./shared/claim
test: gofmt browser
	$(GO) build -trimpath -ldflags="-s -w" -o .build/local/withmoto ./infra/emulator/cmd/withmoto
	@cfn-lint template.yaml & cfn=$$!; \
	echo ".build/local/withmoto $(GO) test -p $(TEST_PARALLEL) -count=1 -vet=all -trimpath -ldflags='-s -w' -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./..."; \
	.build/local/withmoto $(GO) test -p $(TEST_PARALLEL) -count=1 -vet=all -trimpath -ldflags='-s -w' -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./...; rc=$$?; \
	if ! wait $$cfn; then echo "cfn-lint template.yaml failed"; [ $$rc -ne 0 ] || rc=1; fi; \
	exit $$rc

# infra/app's page is tested in a real headless Chromium (Debian's package). make test installs it
# when it is missing, so a fresh machine and CI run that test instead of skipping it.
browser:
	@if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
	  echo "installing chromium (Debian package) for infra/app's browser test"; \
	  $$sudo apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	fi

lint: gofmt
	$(GO) vet -trimpath ./...
	cfn-lint template.yaml

gofmt:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.build/*')); if [ -n "$$out" ]; then printf 'gofmt would change:\n%s\n' "$$out"; exit 1; fi

# The whole pipeline on this machine with the real function binaries (infra/local): moto_server
# (or the emulator AWS_ENDPOINT_URL names), the GitHub stand-in, a scenario of signed deliveries;
# ends with a table of every job and exits 0 only if each ended where it should.
# RUN_FLAGS="-timeout 90s -logs FILE".
run:
	$(GO) build -trimpath -ldflags="-s -w" -o .build/local/ghclaim-local ./infra/local/cmd/ghclaim-local
	.build/local/ghclaim-local run $(RUN_FLAGS)

# The same stack, kept up: prints the webhook URL and secret for curl, a forwarder or sam local;
# Ctrl-C stops everything it started. LOCAL_FLAGS="-addr 127.0.0.1:9000 -env-file FILE".
local:
	$(GO) build -trimpath -ldflags="-s -w" -o .build/local/ghclaim-local ./infra/local/cmd/ghclaim-local
	.build/local/ghclaim-local serve $(LOCAL_FLAGS)

# The accounting run (infra/chaos and its command infra/chaos/cmd/ghclaim-chaos): 500 jobs through the real handlers on moto with
# 20 % faults at every external call (GitHub, DynamoDB, SQS, EC2, SSM; the janitor and redeliverer too),
# claimer kills, machines that never boot, runners that die and a webhook outage only the redeliverer
# recovers. Its last line is the figures; it fails unless every job ran (or was cancelled, taken
# elsewhere, failed with a reason), nothing was claimed twice and no runner or machine was left
# behind (~10-20 min on a shared 2-core box). CHAOS_FLAGS="-jobs 100 -v" to vary.
# The races behind it, repeated: go test -run TestRace -count=20 ./infra/chaos/
CHAOS_FLAGS ?=
.PHONY: chaos
chaos:
	$(GO) run ./infra/chaos/cmd/ghclaim-chaos $(CHAOS_FLAGS)

# A bounded load test of the webhook path on loopback (infra/load): LOAD_FLAGS="-n 2000 -c 16".
LOAD_FLAGS ?=
.PHONY: load
load:
	$(GO) run ./infra/load $(LOAD_FLAGS)

# Setup after the first deploy (infra/app): serves a page on 127.0.0.1:8123 that registers the
# GitHub App from a manifest (webhook URL from the stack's outputs), then stores its private key
# and webhook secret in the stack's Secrets Manager secrets and prints what is left.
# APP_FLAGS="-stack ghclaim -org my-org -name ghclaim-prod" (GHES: -github-url, -api-url).
APP_FLAGS ?=
.PHONY: app
app:
	$(GO) run ./infra/app/cmd/ghclaim-app $(APP_FLAGS)

clean:
	rm -rf bin .build .aws-sam

# Benchmarks against the emulator (bench/): webhook vs its floor, claims, time to claim, cold
# starts, binary sizes, the reclaimer and the cost model. Writes bench/REPORT.md and
# bench/report.json; a few minutes on two cores. Never part of make test.
.PHONY: bench
bench:
	$(GO) run ./bench/cmd/benchreport -command "make bench" $(BENCH_FLAGS)
