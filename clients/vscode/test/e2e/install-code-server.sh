#!/usr/bin/env bash
# Install code-server 4.100.3 (VS Code 1.100.3, the newest release that runs on Node 20) from the
# npm registry only. The plain `npm install code-server` fails offline because a postinstall of
# @vscode/ripgrep downloads a binary from GitHub; this replays code-server's postinstall by hand
# with Debian's ripgrep instead (see shared/reference/clients.md §2.2).
#
# Usage: install-code-server.sh [DIR]   (default $NAGENT_CS_DIR or /opt/nagent-code-server)
# Prints the path of the code-server executable on its last line. Idempotent: an install that
# completed (marker file) is reused; a partial one is removed and redone.
# Needs (Debian): nodejs 20, npm, build-essential, pkg-config, python3, libkrb5-dev, ripgrep.
set -euo pipefail
VERSION=4.100.3
BASE=${1:-${NAGENT_CS_DIR:-/opt/nagent-code-server}}
DEST="$BASE/code-server-$VERSION"
MARKER="$DEST/.nagent-install-complete"
BIN="$DEST/node_modules/.bin/code-server"

if [[ -f "$MARKER" && -x "$BIN" ]]; then
  echo "code-server $VERSION already installed in $DEST" >&2
  echo "$BIN"
  exit 0
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
[[ "$node_major" == 20 ]] || { echo "code-server $VERSION needs Node 20 (found $(node --version))" >&2; exit 1; }
RG=$(command -v rg || true)
[[ -n "$RG" ]] || { echo "ripgrep (rg) is required: apt-get install -y ripgrep" >&2; exit 1; }

t0=$(date +%s)
rm -rf "$DEST"
mkdir -p "$DEST"
cd "$DEST"
echo '{"name":"nagent-code-server","version":"0.0.0","private":true}' > package.json
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
# 1. code-server itself, without its postinstall.sh (that one would download ripgrep)
npm install --ignore-scripts --no-save "code-server@$VERSION" >&2
npm rebuild argon2 >&2
# 2. the VS Code server's dependencies, as postinstall.sh would install them
cd node_modules/code-server/lib/vscode
npm install --omit=dev --ignore-scripts >&2
mkdir -p node_modules/@vscode/ripgrep/bin
cp "$RG" node_modules/@vscode/ripgrep/bin/rg
npm_config_yes=true npm rebuild @parcel/watcher @vscode/spdlog node-pty kerberos native-watchdog @vscode/deviceid >&2
ln -sfn node_modules node_modules.asar
(cd bin/remote-cli && ln -sfn code-linux.sh code-server)
(cd bin/helpers && ln -sfn browser-linux.sh browser.sh)
# 3. the built-in extensions' dependencies
cd extensions
npm install --omit=dev --ignore-scripts >&2
node ./postinstall.mjs >/dev/null
cd "$DEST"
home=$(mktemp -d)
version=$(XDG_CONFIG_HOME=$home XDG_DATA_HOME=$home "$BIN" --version | grep -E "^[0-9]+\.[0-9]+\.[0-9]+ " | head -1)
rm -rf "$home"
case "$version" in
  "$VERSION "*) ;;
  *) echo "unexpected code-server --version output: $version" >&2; exit 1 ;;
esac
date -u +%FT%TZ > "$MARKER"
echo "installed code-server $version in $DEST ($(( $(date +%s) - t0 )) s)" >&2
echo "$BIN"
