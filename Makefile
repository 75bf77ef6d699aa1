# web3gate: `make test` runs every test (CI runs it through .ci/run); `make bench` measures.
GO       ?= go
# Execution counts, not durations: a duration races Go's fuzz coordinator at the deadline and
# fails with "context deadline exceeded" having found nothing (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 50000x
# Where `make engines` keeps the PostgreSQL and Redis it starts for a working day (apart from
# the ones `make test` starts and stops, so that make test leaves these running).
ENGINES_DIR ?= $(or $(TMPDIR),/tmp)/web3gate-engines
GOFILES   = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')
# What `web3gate version` and web3gate_build_info show (internal/buildinfo): the tag at HEAD
# (v1.2.3; "devel" when HEAD has none), the commit, and whether the checkout has changes.
VERSION  ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
MODIFIED ?= $(shell test -z "$$(git status --porcelain 2>/dev/null)" && echo false || echo true)
BUILDINFO = github.com/web3gate/web3gate/internal/buildinfo
LDFLAGS   = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).revision=$(REVISION) -X $(BUILDINFO).modified=$(MODIFIED)
# The platforms of `make release`.
PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64

.PHONY: image build run test test-steps test-pkg engines engines-stop test-engines-selftest deploy-check monitoring-check cross-check vet fuzz fuzz-long deps bench clean contracts release openapi-lint

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/web3gate .

# Static binaries of every platform of PLATFORMS in dist/, named web3gate-VERSION-OS-ARCH,
# and their SHA256SUMS (docs/releases.md). Tag first (git tag v1.2.3): VERSION is the tag.
release:
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/web3gate-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$out .; \
	done
	cd dist && sha256sum web3gate-* > SHA256SUMS
	@cat dist/SHA256SUMS

run:
	$(GO) run .

# The container image web3gate:VERSION, stamped like `make build` (the Dockerfile's build
# arguments: its context has no .git to read them from).
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) \
		--build-arg MODIFIED=$(MODIFIED) -t web3gate:$(VERSION) .

# Pinned npm packages for the tests: anvil, cast, ethers, viem (e2e/package-lock.json); and
# SoftHSM2, the PKCS#11 token of the HSM tests (Debian's softhsm2, installed when missing;
# the tests make their own tokens).
deps: e2e/node_modules/.package-lock.json softhsm

softhsm:
	@scripts/softhsm.sh >/dev/null

e2e/node_modules/.package-lock.json: e2e/package-lock.json e2e/package.json
	npm ci --prefix e2e
	@touch $@

# The OpenAPI linter, pinned (tools/openapi/package-lock.json): Redocly CLI's rules of
# redocly.yaml on openapi/openapi.yaml; no telemetry, no update check.
tools/openapi/node_modules/.package-lock.json: tools/openapi/package-lock.json tools/openapi/package.json
	npm ci --prefix tools/openapi
	@touch $@

openapi-lint: tools/openapi/node_modules/.package-lock.json
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true tools/openapi/node_modules/.bin/redocly lint --config redocly.yaml

# Test contracts (contracts/src) -> contracts/artifacts, with the pinned solc and OpenZeppelin.
contracts:
	npm ci --prefix contracts
	node contracts/build.mjs

vet:
	@unformatted=$$(gofmt -l $(GOFILES)); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# The tests need PostgreSQL and Redis on loopback: scripts/test-engines.sh starts private
# instances where none answers (installing Debian's packages if missing) and stops what it
# started once the test steps end, pass or fail; make still fails when a step fails.
test: deps vet
	@trap 'scripts/test-engines.sh stop' EXIT; trap 'exit 130' INT TERM; \
	scripts/test-engines.sh start && $(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) test-steps

# The test steps, run with the engines up. New steps go here.
test-steps: test-engines-selftest deploy-check openapi-lint monitoring-check cross-check
	$(GO) test -race -count=1 -timeout 15m ./...
	# The whole-server tests and the nonce manager's again, with their stores on PostgreSQL.
	WEB3GATE_TEST_STORE=postgres $(GO) test -race -count=1 -timeout 15m ./integration ./wallet/... ./txmgr/...
	# Under -race internal/rawconn uses syscall's Read and Write (see its sys_race.go): the
	# connections' raw system calls are tested here, without the detector.
	$(GO) test -count=1 ./internal/rawconn ./proxy ./upstreams
	$(MAKE) fuzz

# A fast loop on one package: `make test-pkg P=./wallet [RUN=TestName] [STORE=postgres]`.
# The engines are started once (make engines) and left running for the next loop.
test-pkg: engines
	@test -n "$(P)" || { echo 'usage: make test-pkg P=./wallet [RUN=TestName] [STORE=postgres]'; exit 2; }
	WEB3GATE_TEST_STORE=$(STORE) $(GO) test -race -count=1 $(if $(RUN),-run '$(RUN)') $(P)

# PostgreSQL and Redis for a working day: private instances started where none answers
# (installing Debian's packages if missing), left running until `make engines-stop`.
engines:
	@WEB3GATE_ENGINES_DIR=$(ENGINES_DIR) scripts/test-engines.sh start

engines-stop:
	@WEB3GATE_ENGINES_DIR=$(ENGINES_DIR) scripts/test-engines.sh stop

# The fresh-machine path of scripts/test-engines.sh on free ports: private PostgreSQL and Redis
# started, used, started again (no change), stopped and gone. Installs nothing when the
# binaries exist.
test-engines-selftest:
	scripts/test-engines.sh selftest

# deploy/: `docker-compose config` accepts compose.yaml (with deploy/.env.example's values) and
# `haproxy -c` the load balancer's config; installs Debian's docker-compose and haproxy if missing.
deploy-check:
	scripts/deploy-check.sh

# deploy/prometheus and deploy/grafana: promtool accepts the alerting rules and Prometheus's
# config; installs Debian's prometheus if missing, for deploy's Go test, which runs every
# dashboard and alert expression on a real Prometheus scraping a real web3gate.
monitoring-check:
	scripts/monitoring-check.sh

# The code builds beyond Linux: vet for Windows (tests included), the binary for macOS.
cross-check:
	GOOS=windows $(GO) vet ./...
	GOOS=darwin $(GO) build -o /dev/null .

# Every fuzz target of the tree (found with `go test -list '^Fuzz'` in the packages whose tests
# declare one) runs FUZZTIME executions; what it finds lands in the package's testdata/fuzz.
fuzz:
	@set -e; for pkg in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
		for target in $$($(GO) test -list '^Fuzz' ./$$pkg | grep '^Fuzz'); do \
			echo "fuzz ./$$pkg $$target"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) ./$$pkg; \
		done; \
	done

# The fuzz targets for longer (outside make test).
fuzz-long:
	$(MAKE) --no-print-directory fuzz FUZZTIME=2000000x

# Load benchmark: ratios against baselines measured in the same run (needs Debian's wrk, and
# redis-server for (r)).
bench: deps
	@command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	@command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)
	$(GO) run ./bench

clean:
	rm -rf bin dist
