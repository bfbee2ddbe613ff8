PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install test lint compat-oldest demo bench soak clean

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

clean:
	rm -rf $(VENV) $(VENV)-oldest build *.egg-info
