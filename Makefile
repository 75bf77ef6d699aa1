# web3gate: `make test` runs every test (CI runs it through .ci/run); `make bench` measures.
GO       ?= go
# Execution counts, not durations: a duration races Go's fuzz coordinator at the deadline and
# fails with "context deadline exceeded" having found nothing (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 50000x
# Where `make engines` keeps the PostgreSQL and Redis it starts for a working day (apart from
# the ones `make test` starts and stops, so that make test leaves these running).
ENGINES_DIR ?= $(or $(TMPDIR),/tmp)/web3gate-engines
GOFILES   = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')

.PHONY: build run test test-steps test-pkg engines engines-stop test-engines-selftest deploy-check vet fuzz fuzz-long deps bench clean contracts

build:
	$(GO) build -o bin/web3gate .

run:
	$(GO) run .

# Pinned npm packages for the tests: anvil, cast, ethers, viem (e2e/package-lock.json).
deps: e2e/node_modules/.package-lock.json

e2e/node_modules/.package-lock.json: e2e/package-lock.json e2e/package.json
	npm ci --prefix e2e
	@touch $@

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
test-steps: test-engines-selftest deploy-check
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
	rm -rf bin
