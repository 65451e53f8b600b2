#!/usr/bin/env bash
# CI step for the VS Code extension (clients/vscode). One entry point for .ci/run:
#   bash clients/vscode/ci.sh
# 1. Debian packages (chromium, ripgrep, libkrb5-dev, build-essential, pkg-config, python3, git)
# 2. npm ci   3. typecheck (tsc --strict) and eslint (zero warnings)   4. unit tests (node --test)   5. npm run package (.vsix)
# 6. end-to-end: the .vsix in code-server 4.100.3 (cached in $NAGENT_CS_DIR, default
#    /opt/nagent-code-server) with the real nagent-lsp and the fake model, driven by Chromium.
# Exits non-zero when any step fails; prints a PASS/FAIL summary at the end.
# Env: NAGENT_CS_DIR, NAGENT_LSP_COMMAND (or NAGENT_SERVER), NAGENT_PYTHON, NAGENT_E2E_ARTIFACTS, NAGENT_E2E_ALLOW_MISSING
#      (see test/e2e/run.sh); NAGENT_VSCODE_SKIP_E2E=1 skips step 6.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$HERE"

declare -a NAMES=() STATUS=() TIMES=()
failed=0
step() {
  local name=$1; shift
  local t0=$SECONDS
  echo
  echo "=== vscode: $name"
  if "$@"; then
    STATUS+=("PASS")
  else
    STATUS+=("FAIL"); failed=$((failed + 1))
  fi
  NAMES+=("$name"); TIMES+=($((SECONDS - t0)))
  echo "=== vscode: $name: ${STATUS[-1]} ($((SECONDS - t0)) s)"
}
skip() { NAMES+=("$1"); STATUS+=("SKIP"); TIMES+=(0); echo "=== vscode: $1: SKIP ($2)"; }
last_ok() { [[ "${STATUS[-1]}" == PASS ]]; }

apt_deps() {
  local pkgs=(chromium ripgrep libkrb5-dev build-essential pkg-config python3 git)
  local missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [[ ${#missing[@]} -eq 0 ]]; then echo "Debian packages present: ${pkgs[*]}"; return 0; fi
  echo "installing: ${missing[*]}"
  local sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

node_check() {
  command -v node >/dev/null && command -v npm >/dev/null || { echo "node and npm are required"; return 1; }
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  echo "node $(node --version), npm $(npm --version)"
  [[ "$major" -ge 20 ]] || { echo "Node >= 20 required"; return 1; }
}

npm_install() { npm ci --no-audit --no-fund; }
typecheck() { npm run --silent typecheck && npm run --silent lint; }
unit_tests() {
  # With the project venv present, one test also compares the contributed defaults with the server's.
  if [[ -z "${NAGENT_LSP_PYTHON:-}" && -x "$REPO/.venv/bin/python" ]]; then export NAGENT_LSP_PYTHON="$REPO/.venv/bin/python"; fi
  npm run --silent test:unit
}
package() {
  rm -f nagent-vscode.vsix
  npm run --silent package || return 1
  [[ -s nagent-vscode.vsix ]] || { echo "no .vsix produced"; return 1; }
  python3 - <<'PY'
import sys, zipfile
names = {n.lower() for n in zipfile.ZipFile("nagent-vscode.vsix").namelist()}
need = {"extension/package.json", "extension/dist/extension.js", "extension/readme.md", "extension/license.txt",
        "extension/syntaxes/nagent-conversation.tmlanguage.json", "extension/syntaxes/conversation.language-configuration.json"}
missing = need - names
bad = [n for n in names if n.startswith(("extension/node_modules/", "extension/src/", "extension/test/"))]
print("vsix:", len(names), "files")
if missing or bad:
    print("missing:", sorted(missing), "unexpected:", bad[:5]); sys.exit(1)
PY
}
e2e() { NAGENT_VSIX="$HERE/nagent-vscode.vsix" bash "$HERE/test/e2e/run.sh"; }

step "Debian packages" apt_deps
step "node 20" node_check
if last_ok; then
  step "npm ci" npm_install
else
  skip "npm ci" "no usable node"
fi
if last_ok; then
  step "typecheck + lint" typecheck
  step "unit tests" unit_tests
  step "package .vsix" package
  if ! last_ok; then
    skip "code-server e2e" "no .vsix"
  elif [[ "${NAGENT_VSCODE_SKIP_E2E:-}" == 1 ]]; then
    skip "code-server e2e" "NAGENT_VSCODE_SKIP_E2E=1"
  else
    step "code-server e2e" e2e
  fi
fi

echo
echo "VS Code extension CI summary:"
passed=0
for i in "${!NAMES[@]}"; do
  printf '  %-4s %-18s %4ss\n' "${STATUS[$i]}" "${NAMES[$i]}" "${TIMES[$i]}"
  [[ "${STATUS[$i]}" == PASS ]] && passed=$((passed + 1))
done
echo "vscode: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
