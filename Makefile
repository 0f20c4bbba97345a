# Entry points. Each target installs what it needs through ci/setup first.
#   make soak      the main job: a soak run on the local platform (real etcd
#                  processes, the operator, the chaos monkey, client load)
#   make test      the test suite (unit, property, real-etcd integration,
#                  and the short `smoke` soak)
#   make bench     benchmarks: numbers and ratios, never pass/fail
#   make lint      rustfmt and clippy, as CI runs them
#   make crds      regenerate deploy/crd.yaml from the Rust types

CARGO ?= cargo
SCENARIO ?= scenarios/kill-one-every-30s.yaml
SOAK_OUT ?= soak-out

.PHONY: setup build release test lint bench crds soak soak-kind kind-up

setup:
	@bash ci/setup

build: setup
	$(CARGO) build --workspace

release: setup
	$(CARGO) build --workspace --release

test: setup
	$(CARGO) nextest run --workspace --no-fail-fast

lint: setup
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: release
	$(CARGO) run --release -p etcd-operator --bin etcd-operator-bench

crds: build
	$(CARGO) run -q -p etcd-operator -- crd > deploy/crd.yaml
