# pilot-agent: every target installs what it needs first (Debian packages, npm packages).
SHELL := /bin/bash
.DEFAULT_GOAL := build
NODE_TESTS = $(shell find dist/test -name '*.test.js' 2>/dev/null | sort)

.PHONY: deps build test differential demo bench docs clean

# Debian packages (iptables, iproute2, shells for the completion tests) and node_modules.
deps: node_modules/.package-lock.json
	@scripts/install-deps.sh

node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# bin/pilot-agent runs the compiled library in dist/.
build: deps
	rm -rf dist
	npx tsc -p tsconfig.json
	node scripts/bundle.mjs
	node scripts/build-info.mjs
	@echo "built: bin/pilot-agent ($$(bin/pilot-agent version))"

test: build
	@scripts/proxy-uid-access.sh
	node --test --test-reporter=spec --test-timeout=300000 $(NODE_TESTS)

# The differential test of the HTTP/1 path with a long corpus; DIFFERENTIAL_SEED replays one (the seed is printed).
# The HTTP/2 frame layer of our own fuzzed where outside bytes meet it (CODEC_FUZZ_CASES, CODEC_FUZZ_SEED).
# Then the disconnect soak: DISCONNECT_SOAK_SECONDS (180) of every way a client or upstream goes away, through
# two meshed sidecars and the gateway; descriptors, RSS and active counters before, at the peak and 10 s after.
differential: build
	@scripts/proxy-uid-access.sh
	DIFFERENTIAL_CASES=$${DIFFERENTIAL_CASES:-60000} node --test --test-reporter=spec --test-timeout=3600000 dist/test/integration/proxy/differential.test.js
	CODEC_FUZZ_CASES=$${CODEC_FUZZ_CASES:-200000} node --test --test-reporter=spec --test-timeout=3600000 dist/test/proxy/http2/codec-fuzz.test.js
	DISCONNECT_SOAK_SECONDS=$${DISCONNECT_SOAK_SECONDS:-180} node --test --test-reporter=spec --test-timeout=3600000 dist/test/integration/proxy/disconnects.test.js

demo: build
	@scripts/proxy-uid-access.sh
	scripts/demo.sh

# Every bench (scripts/bench-all.sh). BENCH_ONLY=proxy,h2 runs those alone; PILOT_AGENT_BASELINE=DIR (another
# built checkout) runs its proxies too, alternated round by round, and prints the differences.
bench: build
	scripts/bench-all.sh

# Regenerates the files derived from the code (a test fails while they are stale).
docs: build
	node scripts/gen-docs.mjs

clean:
	rm -rf dist node_modules
