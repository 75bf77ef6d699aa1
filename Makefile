# web3gate: `make test` runs every test (CI runs it through .ci/run); `make bench` measures.
GO       ?= go
# Execution counts, not durations: a duration races Go's fuzz coordinator at the deadline and
# fails with "context deadline exceeded" having found nothing (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 200000x
GOFILES   = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './e2e/node_modules/*')

.PHONY: build run test test-steps test-engines-selftest deploy-check vet fuzz deps bench clean contracts

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
	WEB3GATE_TEST_STORE=postgres $(GO) test -race -count=1 -timeout 15m . ./wallet/...
	# Under -race internal/rawconn uses syscall's Read and Write (see its sys_race.go): the
	# connections' raw system calls are tested here, without the detector.
	$(GO) test -count=1 ./internal/rawconn ./proxy ./upstreams
	$(MAKE) fuzz

# The fresh-machine path of scripts/test-engines.sh on free ports: private PostgreSQL and Redis
# started, used, started again (no change), stopped and gone. Installs nothing when the
# binaries exist.
test-engines-selftest:
	scripts/test-engines.sh selftest

# deploy/: `docker-compose config` accepts compose.yaml (with deploy/.env.example's values) and
# `haproxy -c` the load balancer's config; installs Debian's docker-compose and haproxy if missing.
deploy-check:
	scripts/deploy-check.sh

# Each fuzz target runs briefly; what it finds lands in the package's testdata/fuzz.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./proxy/jsonrpc
	$(GO) test -run '^$$' -fuzz '^FuzzParseMatchesReference$$' -fuzztime $(FUZZTIME) ./proxy/jsonrpc
	$(GO) test -run '^$$' -fuzz '^FuzzScanReply$$' -fuzztime $(FUZZTIME) ./proxy/jsonrpc
	$(GO) test -run '^$$' -fuzz '^FuzzRouterMatch$$' -fuzztime $(FUZZTIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzRoutePath$$' -fuzztime $(FUZZTIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzWebSocketMessage$$' -fuzztime 20000x ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzParseLogs$$' -fuzztime $(FUZZTIME) ./owners
	$(GO) test -run '^$$' -fuzz '^FuzzPageKey$$' -fuzztime 20000x ./owners
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./products
	$(GO) test -run '^$$' -fuzz '^FuzzParseQuery$$' -fuzztime 20000x ./products
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20000x ./txmgr/txreq
	$(GO) test -run '^$$' -fuzz '^FuzzParseFill$$' -fuzztime 20000x ./txmgr/txreq
	$(GO) test -run '^$$' -fuzz '^FuzzParsePrivateKeyHex$$' -fuzztime 20000x ./wallet
	$(GO) test -run '^$$' -fuzz '^FuzzParseCriteria$$' -fuzztime 20000x ./feeds
	$(GO) test -run '^$$' -fuzz '^FuzzStoredCriteria$$' -fuzztime 20000x ./middleware/filters
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalKeyNeverMerges$$' -fuzztime 20000x ./middleware/cache
	$(GO) test -run '^$$' -fuzz '^FuzzFixed$$' -fuzztime 20000x ./internal/rpchex
	$(GO) test -run '^$$' -fuzz '^FuzzCheckURL$$' -fuzztime 20000x ./webhooks
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime 20000x ./webhooks
	$(GO) test -run '^$$' -fuzz '^FuzzReplaceFees$$' -fuzztime 20000x ./middleware/sign
	$(GO) test -run '^$$' -fuzz '^FuzzParseBasic$$' -fuzztime 20000x ./middleware/auth
	$(GO) test -run '^$$' -fuzz '^FuzzParseScope$$' -fuzztime 20000x ./middleware/auth
	$(GO) test -run '^$$' -fuzz '^FuzzJWTVerifier$$' -fuzztime 20000x ./middleware/auth
	$(GO) test -run '^$$' -fuzz '^FuzzNormalizeToken$$' -fuzztime 20000x ./metadata
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeDataURI$$' -fuzztime 20000x ./metadata
	$(GO) test -run '^$$' -fuzz '^FuzzDecryptKey$$' -fuzztime 20000x ./wallet

# Load benchmark: ratios against baselines measured in the same run (needs Debian's wrk, and
# redis-server for (r)).
bench: deps
	@command -v wrk >/dev/null || (apt-get update && apt-get install -y wrk)
	@command -v redis-server >/dev/null || (apt-get update && apt-get install -y redis-server)
	$(GO) run ./bench

clean:
	rm -rf bin
