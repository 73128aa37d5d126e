#!/usr/bin/env bash
# Install the agent CLIs that tests/test_agents_*.py drive through tiergate
# (docs/agents.md), each pinned to the version the tests were written against.
# npm agents share one project-local prefix; each Python agent gets its own
# venv because their dependency pins conflict with each other and with ours.
# Idempotent: an agent whose pinned version is already present is skipped.
# A failed install is reported and skipped, never fatal: the tests skip (or
# fail under TIERGATE_REQUIRE_SERVICES=1) for an agent that is missing.
set -uo pipefail
cd "$(dirname "$0")/.."

AGENTS_DIR=${TIERGATE_AGENTS_DIR:-.agents}
PYTHON=${PYTHON:-python3}
NPM_PREFIX="$AGENTS_DIR/node"

NPM_PACKAGES=(
  "@anthropic-ai/claude-code@2.1.332"
  "@openai/codex@0.171.0"
  "opencode-ai@1.18.33"
)
PY_PACKAGES=(
  "aider:aider-chat==0.86.2"
  "mini-swe-agent:mini-swe-agent==2.4.6"
)

mkdir -p "$NPM_PREFIX"
for spec in "${NPM_PACKAGES[@]}"; do
  name=${spec%@*}
  version=${spec##*@}
  manifest="$NPM_PREFIX/lib/node_modules/$name/package.json"
  if [ -f "$manifest" ] && grep -q "\"version\": \"$version\"" "$manifest"; then
    continue
  fi
  echo "installing $spec"
  npm install -g --prefix "$NPM_PREFIX" --no-fund --no-audit --loglevel=error "$spec" \
    || echo "WARNING: could not install $spec; its agent test will skip"
done

for entry in "${PY_PACKAGES[@]}"; do
  venv="$AGENTS_DIR/${entry%%:*}"
  requirement=${entry#*:}
  stamp="$venv/.installed-$requirement"
  [ -f "$stamp" ] && continue
  echo "installing $requirement into $venv"
  rm -rf "$venv"
  if "$PYTHON" -m venv "$venv" \
    && "$venv/bin/pip" install -q --disable-pip-version-check "$requirement" 2>&1 \
      | grep -v "^WARNING: Location .* is ignored" >&2; [ "${PIPESTATUS[0]}" = 0 ]; then
    touch "$stamp"
  else
    echo "WARNING: could not install $requirement; its agent test will skip"
  fi
done
