#!/usr/bin/env bash
# VS Code end-to-end test: code-server 4.100.3 + the packaged .vsix + the real nagent-lsp + the fake
# OpenAI server, driven through the command palette by Debian Chromium (playwright-core).
#
#   clients/vscode/test/e2e/run.sh
#
# Environment (all optional):
#   NAGENT_CS_DIR        where code-server is installed/cached (default /opt/nagent-code-server)
#   NAGENT_VSIX          the .vsix to test (default clients/vscode/nagent-vscode.vsix, built if missing)
#   NAGENT_LSP_COMMAND   server argv (JSON array) or executable (also read from NAGENT_SERVER;
#                        default <repo>/.venv/bin/nagent-lsp, else nagent-lsp on PATH)
#   NAGENT_PYTHON        Python for tests/harness/fake_openai.py (default <repo>/.venv/bin/python)
#   NAGENT_E2E_ARTIFACTS folder for screenshots, logs and the extension's report
#   NAGENT_E2E_ALLOW_MISSING=1  skip steps whose server command is not registered (default: fail)
# Requires: node 20 + npm, chromium, ripgrep, build tools for code-server's native modules (see ci.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EXT_DIR=$(cd "$HERE/../.." && pwd)
REPO=$(cd "$EXT_DIR/../.." && pwd)
export NAGENT_REPO_ROOT="$REPO"

CS_DIR=${NAGENT_CS_DIR:-/opt/nagent-code-server}
if ! mkdir -p "$CS_DIR" 2>/dev/null || [[ ! -w "$CS_DIR" ]]; then
  CS_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/nagent-code-server"   # /opt not writable (not root)
fi
CS_BIN=$("$HERE/install-code-server.sh" "$CS_DIR" | tail -1)
export NAGENT_CS_BIN="$CS_BIN"

if [[ -z "${NAGENT_VSIX:-}" ]]; then
  export NAGENT_VSIX="$EXT_DIR/nagent-vscode.vsix"
  if [[ ! -f "$NAGENT_VSIX" ]]; then
    (cd "$EXT_DIR" && npm run --silent package)
  fi
fi
if [[ -z "${NAGENT_LSP_COMMAND:-}" && -n "${NAGENT_SERVER:-}" ]]; then
  export NAGENT_LSP_COMMAND="$NAGENT_SERVER"      # the name .ci/run and clients/ci-editors.sh use
fi
if [[ -z "${NAGENT_LSP_COMMAND:-}" ]]; then
  if [[ -x "$REPO/.venv/bin/nagent-lsp" ]]; then
    export NAGENT_LSP_COMMAND="$REPO/.venv/bin/nagent-lsp"
  elif command -v nagent-lsp >/dev/null; then
    NAGENT_LSP_COMMAND=$(command -v nagent-lsp)
    export NAGENT_LSP_COMMAND
  else
    echo "e2e: nagent-lsp not found (no $REPO/.venv/bin/nagent-lsp, none on PATH); set NAGENT_LSP_COMMAND" >&2
    exit 1
  fi
fi
[[ -d "$EXT_DIR/node_modules/playwright-core" ]] || (cd "$EXT_DIR" && npm ci --no-audit --no-fund)
cd "$EXT_DIR"
exec node "$HERE/e2e.js"
