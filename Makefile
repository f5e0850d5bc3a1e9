# The two commands of the README: `make demo` (the embedded CPU demo, end to end) and `make test`.
# Both create the virtual environment .venv on first use (PyTorch 2.14.1 / torchvision 0.29.1, pinned in
# pyproject.toml) and reuse it afterwards.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CORES ?= 2

.PHONY: demo test env clean-demo

env: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

demo: env
	$(VENV)/bin/snakemake --cores $(CORES) all --configfile config/demo.yaml
	@echo "Demo tables: results/demo/tables/ (Markdown and LaTeX); figures: results/demo/figures/ (PDF, PNG, CSV)"
	@echo "One page of all of them: $(VENV)/bin/snakemake all --report results/demo/report.html --configfile config/demo.yaml"

test: env
	$(PY) -m pytest -q

clean-demo:
	rm -rf results/demo
