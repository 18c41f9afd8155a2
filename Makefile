# casty lab: the commands a user types. Everything sets itself up from nothing (Python + pip).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Jupyter and matplotlib write to $HOME unless told otherwise: keep tests hermetic.
TEST_HOME := $(CURDIR)/.venv/test-home
TEST_ENV  := JUPYTER_CONFIG_DIR=$(TEST_HOME)/jupyter-config \
             JUPYTER_DATA_DIR=$(TEST_HOME)/jupyter-data \
             JUPYTER_RUNTIME_DIR=$(TEST_HOME)/jupyter-runtime \
             IPYTHONDIR=$(TEST_HOME)/ipython \
             MPLCONFIGDIR=$(TEST_HOME)/matplotlib \
             MPLBACKEND=Agg

.PHONY: setup demo test lab bench typecheck clean swarm html

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[notebooks,test]'
	touch $(STAMP)

demo: setup
	MPLBACKEND=Agg MPLCONFIGDIR=$(TEST_HOME)/matplotlib $(PY) -m sim tour --out out/tour
	@echo "open out/tour/summary.md and the PNGs beside it; python -m casty.demo shows the runtime on the real clock"

test: setup
	mkdir -p $(TEST_HOME)
	$(TEST_ENV) $(PY) -m pytest -q --nbmake tests notebooks examples

# Every notebook executed and exported to out/html/, pages that render with no network: the widget manager and
# require.js are fetched once with `npm pack` into out/npm/ and copied beside the pages (notebooks/tools/export_html.py).
# Then every page is scanned once more: one per notebook, nothing fetched from the network, every local script there.
html: setup
	mkdir -p $(TEST_HOME)
	$(TEST_ENV) $(PY) notebooks/tools/export_html.py --out out/html --npm out/npm
	$(TEST_ENV) CASTY_HTML_OUT=$(CURDIR)/out/html $(PY) -m pytest -q -p no:cacheprovider tests/test_html_export.py -k every_exported_page

# JupyterLab on notebooks/, listening on 127.0.0.1 only (LAB_IP=0.0.0.0 to reach it from outside a container) and on
# LAB_PORT; no browser is started (open the URL with the token it prints). Jupyter refuses to run as root unless told:
# --allow-root is passed only when the user is root (a container), never otherwise.
LAB_IP   ?= 127.0.0.1
LAB_PORT ?= 8888
lab: setup
	$(VENV)/bin/jupyter lab --ip=$(LAB_IP) --port=$(LAB_PORT) --no-browser $(if $(filter 0,$(shell id -u)),--allow-root) notebooks/

bench: setup
	$(PY) bench/local.py
	$(PY) bench/sim_throughput.py
	$(PY) bench/loop_speed.py
	$(PY) bench/cluster_sim.py --minutes 5

# The long swarm sweep (not CI: `make test` runs a few swarm seeds only). Each failing seed prints its fault plan
# and the commands that reproduce it; SWARM_SEEDS and SWARM_WORKERS choose the range and the parallelism.
SWARM_SEEDS   ?= 0:2000
SWARM_WORKERS ?= 2
swarm: setup
	$(PY) -m sim sweep swarm --seeds $(SWARM_SEEDS) --workers $(SWARM_WORKERS)

typecheck: setup
	$(PY) -m mypy

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .hypothesis
