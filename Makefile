# The two set-up commands of the README. Each installs everything MMO needs
# on a fresh machine (venv, pip packages, the pinned Codex CLI, git identity)
# and then does one thing.
#   make demo   -> runs the offline demo
#   make test   -> runs the test suite (what .ci/run calls)

PYTHON ?= python3
VENV := .venv
CODEX_VERSION := 0.169.0
INSPECTOR_VERSION := 2.12.0
STAMP := $(VENV)/.mmo-installed

.PHONY: demo test setup lint type bench mutate

setup: $(STAMP) .codex-cli/.installed-$(CODEX_VERSION) .mcp-inspector/.installed-$(INSPECTOR_VERSION)
	@git config --global user.name >/dev/null || git config --global user.name "MMO Developer"
	@git config --global user.email >/dev/null || git config --global user.email "mmo@localhost"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test,ui]'
	@touch $(STAMP)

.codex-cli/.installed-$(CODEX_VERSION):
	mkdir -p .codex-cli
	npm install --prefix .codex-cli --no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION)
	@touch $@

# the MCP Inspector CLI: a client nobody here wrote, for the tests of `mmo serve`'s endpoint
.mcp-inspector/.installed-$(INSPECTOR_VERSION):
	mkdir -p .mcp-inspector
	npm install --prefix .mcp-inspector --no-audit --no-fund --loglevel=error @modelcontextprotocol/inspector@$(INSPECTOR_VERSION)
	@touch $@

demo: setup
	$(VENV)/bin/mmo demo

test: setup
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup -q --durations=30

lint: setup
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	$(VENV)/bin/ruff check mmo_kernel plugins tests benchmarks

type: setup
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	$(VENV)/bin/mypy

# Byte-compiled first, as an installed package is: an editable checkout gets no bytecode
# where PYTHONDONTWRITEBYTECODE is set, and every `mmo` would compile its modules again.
bench: setup
	$(VENV)/bin/python -m compileall -q mmo_kernel plugins >/dev/null
	$(VENV)/bin/python benchmarks/run.py

# Mutation testing of the safety modules ([tool.mutmut] in pyproject.toml); not part of CI.
mutate: setup
	$(VENV)/bin/python -m pip install --quiet -e '.[mutate]'
	$(VENV)/bin/python tools/mutate.py
