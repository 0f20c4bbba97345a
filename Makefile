# Entry points. Each target installs what it needs through ci/setup first
# (`make build` only what building needs; the test servers come with
# `make test` and `make soak`).
#   make soak      the main job: a soak run on the local platform (real etcd
#                  processes, the operator, the chaos monkey, client load)
#   make test      the test suite (unit, property, real-etcd integration,
#                  and the short `smoke` soak)
#   make bench     benchmarks: numbers and ratios, never pass/fail (the
#                  operator, snapshots, the answers to faults, disaster
#                  recovery, the soak load, the history checker)
#   make lint      rustfmt and clippy, as CI runs them
#   make crds      regenerate deploy/base/crd.yaml and the guide's spec reference
#   make docs      build the user guide (docs/, an mdBook) into docs/book/
#   make man       man pages and shell completions of the programs
#   make etcd      etcd 3.4.23 and 3.5.1 into .etcd/ (the tours run them)
#   make image     the operator's image (buildah, else docker)
#   make release-manifest   dist/install.yaml: the install as one file

CARGO ?= cargo
SCENARIO ?= scenarios/kill-one-every-30s.yaml
# On Kubernetes the same soak, its backups taken by Jobs into a claim.
KIND_SCENARIO ?= scenarios/kill-one-every-30s-kube.yaml
SOAK_OUT ?= soak-out

.PHONY: setup setup-build etcd build release test lint bench crds docs man soak soak-kind kind-up \
	image image-builder image-name release-manifest

# Everything the tests and soaks need (the test servers included).
setup:
	@bash ci/setup build etcd test

# What building needs (protoc), nothing more.
setup-build:
	@bash ci/setup build

etcd:
	@bash ci/setup etcd

build: setup-build
	$(CARGO) build --workspace

release: setup-build
	$(CARGO) build --workspace --release

test: setup
	$(CARGO) nextest run --workspace --no-fail-fast
	@$(MAKE) --no-print-directory soak-smoke

lint: setup-build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: setup release
	$(CARGO) bench -q -p etcd-operator --bench operator
	$(CARGO) bench -q -p etcd-operator --bench snapshot
	$(CARGO) bench -q -p etcd-operator --bench object_store
	$(CARGO) bench -q -p etcd-operator --bench handover
	$(CARGO) bench -q -p etcd-operator --bench recovery
	$(CARGO) bench -q -p etcd-operator --bench standby
	$(CARGO) bench -q -p chaos-monkey --bench faults
	$(CARGO) run --release -q -p soak --bin soak -- bench
	$(CARGO) bench -q -p soak --bench checker

crds: build
	$(CARGO) run -q -p etcd-operator -- crd > deploy/base/crd.yaml
	$(CARGO) run -q -p etcd-operator -- crd --reference > docs/src/reference/spec.md

# Man pages and shell completions of the programs (the kubectl plugin: completions), generated from
# their clap definitions: target/man/*.1, target/completions/{bash,zsh,fish}/.
man: build
	target/debug/etcd-operator man target/man
	target/debug/soak man target/man
	target/debug/chaos-monkey --man target/man
	@for sh in bash zsh fish; do mkdir -p target/completions/$$sh; \
	  target/debug/etcd-operator completions $$sh > target/completions/$$sh/etcd-operator; \
	  target/debug/soak completions $$sh > target/completions/$$sh/soak; \
	  target/debug/chaos-monkey --completions $$sh > target/completions/$$sh/chaos-monkey; \
	  target/debug/kubectl-etcd completions $$sh > target/completions/$$sh/kubectl-etcd; done
	@echo "man pages in target/man, completions in target/completions"

# The operator's image, REGISTRY/OWNER/etcd-operator:VERSION, as its one
# place says (the images: of deploy/base/kustomization.yaml); IMAGE=...
# builds another name. From the release binary and the etcd tools
# (kind-config/Dockerfile): with buildah when it is there (no daemon, no
# root needed), else docker; BUILDER=docker or BUILDER=buildah picks one.
# Neither runs on the development machine.
IMAGE ?= $(shell sed -n 's/^ *newName: *//p' deploy/base/kustomization.yaml | head -1):$(shell \
	sed -n 's/^ *newTag: *//p' deploy/base/kustomization.yaml | head -1)

image-name:
	@echo $(IMAGE)

BUILDER ?= $(if $(shell command -v buildah),buildah,docker)

# Says what is missing before the release build, not after.
image-builder:
	@if [ "$(BUILDER)" = buildah ] && command -v buildah >/dev/null; then :; \
	elif [ "$(BUILDER)" = docker ] && docker info >/dev/null 2>&1; then :; \
	else echo "make image: BUILDER=$(BUILDER) is not there: install buildah or start docker" >&2; \
	  exit 2; fi

image: image-builder release
	@if [ "$(BUILDER)" = buildah ]; then \
	  buildah bud --ignorefile kind-config/Dockerfile.dockerignore \
	    -f kind-config/Dockerfile -t $(IMAGE) . ; \
	else docker build -f kind-config/Dockerfile -t $(IMAGE) . ; fi
	@echo "built $(IMAGE)"

# The whole install as one file for a release (CRD, Namespace, RBAC, the
# operator), the image as deploy/base/kustomization.yaml names it:
#   kubectl apply --server-side -f dist/install.yaml
#   kubectl -n etcd-operator-system rollout status deploy/etcd-operator
release-manifest:
	@mkdir -p dist
	kubectl kustomize deploy > dist/install.yaml
	@echo "dist/install.yaml: $$(grep -c '^kind:' dist/install.yaml) objects, image $(IMAGE)"

# The user guide (mdBook, installed into .venv by ci/setup docs): docs/book/.
docs: setup-build
	@bash ci/setup docs
	$(CARGO) run -q -p etcd-operator -- crd --reference > docs/src/reference/spec.md
	.venv/bin/mdbook build docs

# --- soak (owned by the soak crate; see soak/README.md) ---------------------
#   make soak [SCENARIO=scenarios/NAME.yaml] [DURATION=10m] [SEED=N]
#       a soak run on the local platform with release binaries; prints the
#       summary table and where the report is (soak-out/NAME/report.md).
#       Exit 0 only when every bound held.
#   make soak-smoke   scenarios/smoke.yaml and scenarios/smoke-tls.yaml
#       (the same under TLS, certificates renewed during the run) with debug
#       binaries, into soak-out/smoke and soak-out/smoke-tls; prints the
#       summary tables (make test runs it).
#   make kind-up      a kind cluster from kind-config/, the operator image
#       built and loaded as etcd-operator:soak, the CRDs then
#       deploy/overlays/kind (the operator in namespace default).
#   make soak-kind [KIND_SCENARIO=...]   the soak against that cluster
#       (--platform kube; default scenarios/kill-one-every-30s-kube.yaml).
DURATION ?=
SEED ?=
KIND_CLUSTER ?= soak
KIND_NAMESPACE ?= default
# The image deploy/overlays/kind runs (loaded into kind, never pulled).
OPERATOR_IMAGE ?= etcd-operator:soak
SOAK_FLAGS = $(if $(DURATION),--duration $(DURATION)) $(if $(SEED),--seed $(SEED))

.PHONY: soak-smoke

soak: setup release
	$(CARGO) run -q --release -p soak --bin soak -- run $(SCENARIO) \
	  --out $(SOAK_OUT)/$(basename $(notdir $(SCENARIO))) $(SOAK_FLAGS)

# The smoke soaks run the debug binaries built with the tests' features
# (`--bins --tests`: dev-dependencies unify features, so after `nextest run`
# this builds nothing; a plain `cargo build` would build the workspace again).
DEBUG_DIR = $(or $(CARGO_TARGET_DIR),target)/debug

soak-smoke: setup
	$(CARGO) build -q --workspace --bins --tests
	$(DEBUG_DIR)/soak run scenarios/smoke.yaml \
	  --out $(SOAK_OUT)/smoke --no-progress $(SOAK_FLAGS)
	$(DEBUG_DIR)/soak run scenarios/smoke-tls.yaml \
	  --out $(SOAK_OUT)/smoke-tls --no-progress $(SOAK_FLAGS)

kind-up: release
	@command -v kind >/dev/null || { echo "kind-up: install kind and docker first" >&2; exit 2; }
	kind get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)' || \
	  kind create cluster --name $(KIND_CLUSTER) --config kind-config/cluster.yaml --wait 120s
	docker build -q -f kind-config/Dockerfile -t $(OPERATOR_IMAGE) .
	kind load docker-image --name $(KIND_CLUSTER) $(OPERATOR_IMAGE)
	kubectl --context kind-$(KIND_CLUSTER) apply --server-side -k deploy/crds
	kubectl --context kind-$(KIND_CLUSTER) wait --for condition=established crd/etcdclusters.etcdoperator.dev --timeout=60s
	kubectl --context kind-$(KIND_CLUSTER) apply --server-side -k deploy/overlays/kind
	kubectl --context kind-$(KIND_CLUSTER) -n default rollout status deploy/etcd-operator --timeout=180s

soak-kind: setup release
	$(CARGO) run -q --release -p soak --bin soak -- run $(KIND_SCENARIO) --platform kube \
	  --namespace $(KIND_NAMESPACE) --no-progress \
	  --out $(SOAK_OUT)/kind-$(basename $(notdir $(KIND_SCENARIO))) $(SOAK_FLAGS)
