#!/usr/bin/env bash
# Side by side: CLIO's W1-W4 against pinned peers, interleaved in rounds (see README.md).
#
#   bench/peers/run.sh [ROUNDS] [SYSTEMS]
#
# ROUNDS: 3 by default. SYSTEMS: comma-separated, from clio, clio-py, clio-cli, clio-postgres
# (which also reports clio-postgres-ungrouped), dbos-sqlite, dbos-postgres, langgraph,
# restate, temporal; all by default. The peers are installed on
# first use into $CLIO_PEERS_CACHE (default ~/.cache/clio-peers): a Python venv with
# requirements.txt, and node_modules with package.json, both pinned. Not part of .ci/run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CLIO_PEERS_CACHE:-$HOME/.cache/clio-peers}
rounds=${1:-3}
systems=${2:-all}
mkdir -p "$cache/node"

# Reinstall when the pins change: each install is stamped with its pin file's checksum.
stamp() { sha256sum "$1" | cut -d' ' -f1; }
if [ "$(cat "$cache/venv/.pins" 2>/dev/null)" != "$(stamp "$here/requirements.txt")" ]; then
    echo "installing the Python peers into $cache/venv" >&2
    rm -rf "$cache/venv"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install -q -r "$here/requirements.txt" || echo "pip install failed: the Python peers will be skipped" >&2
    stamp "$here/requirements.txt" >"$cache/venv/.pins"
fi
if [ "$(cat "$cache/node/.pins" 2>/dev/null)" != "$(stamp "$here/package.json")" ]; then
    if command -v npm >/dev/null; then
        echo "installing the Node peers into $cache/node" >&2
        rm -rf "$cache/node/node_modules"
        cp "$here/package.json" "$cache/node/"
        (cd "$cache/node" && npm install --no-audit --no-fund --silent) || echo "npm install failed: Restate will be skipped" >&2
        stamp "$here/package.json" >"$cache/node/.pins"
    else
        echo "no npm: Restate will be skipped" >&2
    fi
fi

# CLIO's benches, built once before the first round (release profile).
(cd "$here/../.." && cargo bench -q -p clio-flow --bench flow --no-run \
    && cargo bench -q -p clio-flow --bench postgres --no-run \
    && cargo bench -q -p clio-cli --bench cli --no-run)

exec python3 "$here/peers.py" "$cache" "$rounds" "$systems"
