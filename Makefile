# The two commands of the README: `make demo` (the embedded CPU demo, end to end) and `make test`.
# Both create the virtual environment .venv on first use and reuse it afterwards: the package with its test extras,
# at the exact versions of the demo and CI (requirements/constraints.txt; pyproject.toml holds the supported ranges).
# `make check-install` (CI): the ranges resolve on their own, without the constraints (pip --dry-run).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CORES ?= 2
CONSTRAINTS := requirements/constraints.txt

.PHONY: demo test env check-install clean-demo

env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(CONSTRAINTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(CONSTRAINTS) -e '.[test]'
	touch $@

check-install: env
	$(PY) -m pip install --quiet --dry-run --ignore-installed -e '.[test]'
	@echo "check-install: the constraints installed (make env) and the ranges of pyproject.toml resolve on their own"

demo: env
	$(VENV)/bin/snakemake --cores $(CORES) all --configfile config/demo.yaml
	@echo "Demo tables: results/demo/tables/ (Markdown and LaTeX); figures: results/demo/figures/ (PDF, PNG, CSV)"
	@echo "One page of all of them: $(VENV)/bin/snakemake all --report results/demo/report.html --configfile config/demo.yaml"

test: env
	$(PY) -m pytest -q

clean-demo:
	rm -rf results/demo
