# Set-up is part of every target: a fresh clone needs only `make test` or `make demo`.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: test demo lint bench docs clean venv

venv: $(STAMP)

# setup.py builds the optional C hot path in place (src/jitguard/_src/_speedups/ext*.so).
# Its C sources: _speedups/speedups.c and the parts it includes. pip's build is isolated
# (no torch there), so the C++ tensor checker (_torchext/ext*.so, built against the torch
# just installed) is built in place afterwards, by setup.py run in the venv.
SPEEDUPS_SRC := $(wildcard src/jitguard/_src/_speedups/*.c src/jitguard/_src/_speedups/*.h \
	src/jitguard/_src/_torchext/*.cpp)
$(STAMP): pyproject.toml constraints.txt setup.py $(SPEEDUPS_SRC)
	test -x $(VPY) || $(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -c constraints.txt -e '.[dev,torch,models]'
	$(VPY) -m pip install --quiet -c constraints.txt 'setuptools>=77'
	$(VPY) setup.py --quiet build_ext --inplace
	touch $(STAMP)

test: $(STAMP) lint
	$(VPY) -m pytest

lint: $(STAMP)
	$(VPY) -m ruff check src tests bench examples docs
	$(VPY) -m mypy

demo: $(STAMP)
	$(VPY) examples/demo.py

# The reference docs (mkdocs.yml): API pages, design notes and examples, into build/site;
# any warning fails the build.
$(DOCS_STAMP): $(STAMP)
	$(VPY) -m pip install --quiet -c constraints.txt -e '.[dev,torch,models,docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VPY) -m mkdocs build --strict

bench: $(STAMP)
	$(VPY) bench/bench_compiler.py --quick

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
	rm -f src/jitguard/_src/_speedups*.so src/jitguard/_src/_speedups/*.so
