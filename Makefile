# The two commands: `make run` (gateway, demo mode without keys) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: run test lint typecheck pytest bench clean soak soak-short chromium agents

# Two markers, one venv: `make run` needs only the runtime dependencies
# (pyproject's `dependencies`, ~200 MB); the dev extras (pytest, mypy, Playwright,
# schemathesis, ...: ~700 MB in all) come in only for the targets that use them.
$(BIN)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(BIN)/.installed: $(BIN)/.runtime
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# `make run PORT=4100 HOST=0.0.0.0 CONFIG=tiergate.yaml`: each one optional.
run: $(BIN)/.runtime
	$(BIN)/tiergate serve $(if $(CONFIG),--config $(CONFIG)) $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BIN)/.installed
	$(BIN)/mypy

# Browser tests drive Debian's Chromium (Playwright's own browser download is
# not used); install it once when missing and we are allowed to (root).
chromium:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the dashboard browser tests will skip"; }

# The agent CLIs tests/test_agents_*.py drive (docs/agents.md): npm and PyPI
# packages under .agents/, pinned, each Python agent in its own venv. Idempotent.
agents:
	PYTHON=$(PYTHON) bash .ci/install-agents.sh

pytest: $(BIN)/.installed chromium agents
	$(BIN)/pytest -q

test: lint typecheck pytest

# Soak: mixed agent sessions through two gateways on Redis + PostgreSQL (docs/reliability.md).
soak: $(BIN)/.installed
	$(BIN)/python bench/soak.py --minutes 30 --out bench/out/soak.json

soak-short: $(BIN)/.installed
	TIERGATE_SOAK_SECONDS=120 $(BIN)/pytest -q tests/test_soak.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .agents
