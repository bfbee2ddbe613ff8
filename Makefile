PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint compat-oldest demo bench soak image clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'

# Three pytest-xdist workers on two cores: most of the suite waits (leases, deadlines,
# subprocesses), so the processes overlap their waits (docs/contributing.md has the figures);
# an idle worker takes tests queued on another (worksteal), so one long scenario does not end
# the run alone. WORKERS=0: one process.
WORKERS ?= 3
test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(WORKERS) --dist worksteal

lint: install
	$(BIN)/ruff check cloudcoil_sync tests examples bench
	$(BIN)/ruff format --check cloudcoil_sync tests examples bench
	$(BIN)/mypy

# The dependency internals in cloudcoil_sync/_compat against the oldest versions we support
# (setup.cfg's lower bounds; urllib3's last 1.x line); `make test` covers the installed newest.
OLDEST ?= requests==2.32.0 urllib3==1.26.20 prometheus-client==0.20.0
compat-oldest:
	$(PYTHON) -m venv $(VENV)-oldest
	$(VENV)-oldest/bin/python -m pip install --quiet $(OLDEST) pytest hypothesis
	PYTHONPATH=. $(VENV)-oldest/bin/python -m pytest -q -p no:cacheprovider -p no:cloudcoil_sync tests/compat

demo: install
	$(BIN)/python examples/demo.py

bench: install
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/run_all.py

soak: install
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python bench/soak.py

# The Widget operator image (docker/Dockerfile) with docker (if its daemon answers), podman or
# buildah, in that order; ENGINE=podman picks one. BASE (runtime) and BUILDER (where pip runs)
# become build args only when set; PIP_CERT (pip's CA bundle file, from the environment too)
# a build secret. podman and buildah read BuildKit's Dockerfile.dockerignore only when told
# (--ignorefile). BUILD_FLAGS go to the engine as they are (e.g. --isolation=chroot where
# podman's OCI runtime cannot run, as on cgroup v1 hybrid hosts). --network=host: the build's
# pip reaches the package index without a bridge network (which would turn on ip_forward).
IMAGE ?= widgets:local
comma := ,
ENGINE ?= $(shell if docker info >/dev/null 2>&1; then echo docker; \
	elif command -v podman >/dev/null; then echo podman; \
	elif command -v buildah >/dev/null; then echo buildah; fi)
IMAGE_ARGS = $(if $(BASE),--build-arg BASE=$(BASE)) $(if $(BUILDER),--build-arg BUILDER=$(BUILDER)) \
	$(if $(PIP_CERT),--secret id=pip-cert$(comma)src=$(PIP_CERT)) \
	$(if $(filter docker,$(ENGINE)),,--ignorefile docker/Dockerfile.dockerignore)
image:
	@test -n "$(ENGINE)" || { echo "make image needs docker (with a daemon), podman or buildah" >&2; exit 1; }
	$(ENGINE) $(if $(filter buildah,$(ENGINE)),build-using-dockerfile,build) --network=host \
		$(IMAGE_ARGS) $(BUILD_FLAGS) -f docker/Dockerfile -t $(IMAGE) .

clean:
	rm -rf $(VENV) $(VENV)-oldest build *.egg-info
