# fencer's build and test targets. `make test` is the one command CI runs.
GO ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 30s

.PHONY: all build test integ bench lint fuzz clean

all: build

build:
	$(GO) build -o bin/ ./cmd/...

# lint: formatting, vet and staticcheck.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# test: lint, then every test (unit, in-process, integration) with -race.
test: lint
	$(GO) test -race -count=1 -timeout 15m ./...

# integ: the integration tests only (real fencerd processes, redis-cli).
integ:
	$(GO) test -race -count=1 -timeout 10m -v ./integration/...

# demo: the scenario from Kleppmann's "How to do distributed locking" with
# real processes: a client paused with SIGSTOP past its lease writes late;
# fencer's token makes the store refuse it, redsync's Redlock does not.
.PHONY: demo
demo:
	$(GO) test -count=1 -v -run '^TestFencing' ./integration/

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# fuzz: run each fuzz target for FUZZTIME.
fuzz:
	$(GO) test ./fsm -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)

clean:
	rm -rf bin
