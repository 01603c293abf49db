#!/usr/bin/env bash
# The clients' CI: both clients' unit tests and the published vectors, then both clients against
# a real `wharf serve` (the debug binary `cargo test` builds), then clean up.
#
#   bash clients/ci.sh            # from anywhere; WHARF_BIN=… to test another binary
#
# - Installs only pinned, hash-checked packages, into a throw-away directory: Python's
#   requirements-dev.txt (pip --require-hashes) into a venv, and the TypeScript package's
#   package-lock.json (npm ci) into a copy of the package. Nothing is written into the checkout.
# - Starts `wharf serve` on a free loopback port with its own data directory (the embedded
#   PostgreSQL) in the same throw-away directory, or on DATABASE_URL when that is set.
# - Every step and every wait has a deadline; the server and the directory are removed on any
#   exit. Works as root (the embedded PostgreSQL then runs as `postgres`) and not.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHARF=${WHARF_BIN:-$ROOT/target/debug/wharf}
# Seconds any one step may take (an install, a test suite); the server start has its own.
STEP_S_MAX=${CLIENTS_STEP_S_MAX:-600}
SERVER_START_S_MAX=120
SERVER_STOP_S_MAX=30
# The identity limiter's burst the interop suites drain to see a 429 (and the batch bound).
IDENTITY_BURST=20

say() { printf '== clients/ci.sh: %s\n' "$*"; }
fail() { printf 'clients/ci.sh: %s\n' "$*" >&2; exit 1; }

for tool in python3 node npm curl timeout; do
  command -v "$tool" >/dev/null || fail "$tool is needed"
done
[ -x "$WHARF" ] || fail "$WHARF is missing: build it first (cargo build -p wharf-cli, or cargo test)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
  || fail "Node 18 or newer is needed"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/wharf-clients-ci.XXXXXX")
# As root the embedded PostgreSQL runs as `postgres`, which must be able to enter this directory.
chmod 755 "$WORK"
# Every temporary file of the test runners (pytest's tmp_path, Node's os.tmpdir()) goes there too.
mkdir "$WORK/tmp"
export TMPDIR="$WORK/tmp"
SERVER_PID=""

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    local waited=0
    while kill -0 "$SERVER_PID" 2>/dev/null && [ "$waited" -lt $((SERVER_STOP_S_MAX * 10)) ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if kill -0 "$SERVER_PID" 2>/dev/null; then
      say "wharf serve did not stop in ${SERVER_STOP_S_MAX}s; killing it"
      kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
  fi
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
}

cleanup() {
  local status=$?
  stop_server
  if [ "$status" -ne 0 ] && [ -f "$WORK/serve.log" ]; then
    echo "--- the last lines wharf serve logged:" >&2
    tail -n 40 "$WORK/serve.log" >&2 || true
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { timeout --kill-after=10 "$STEP_S_MAX" "$@"; }
# Nothing is written into the checkout: no bytecode, no pytest cache.
export PYTHONDONTWRITEBYTECODE=1

started=$(date +%s)

# --- Install, pinned, into the throw-away directory -------------------------------------------
say "installing the Python test tools (requirements-dev.txt, hash-checked)"
python3 -m venv "$WORK/venv"
PY="$WORK/venv/bin/python"
# PIP_FIND_LINKS may point at a machine-local wheel folder; install from the registry only.
step env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_DISABLE_PIP_VERSION_CHECK=1 \
  "$PY" -m pip install --quiet --require-hashes --only-binary=:all: \
  -r "$ROOT/clients/python/requirements-dev.txt"
# The package itself, from a copy (building writes metadata beside the sources).
cp -r "$ROOT/clients/python" "$WORK/python-src"
rm -rf "$WORK/python-src/build" "$WORK/python-src/src/"*.egg-info
step "$PY" -m pip install --quiet --no-deps --no-index --no-build-isolation "$WORK/python-src"

say "installing the TypeScript build tools (package-lock.json, npm ci)"
mkdir -p "$WORK/ts"
for item in package.json package-lock.json tsconfig.json src test interop; do
  cp -r "$ROOT/clients/typescript/$item" "$WORK/ts/"
done
(cd "$WORK/ts" && step npm ci --ignore-scripts --no-audit --no-fund --update-notifier=false --loglevel=error \
  --cache "$WORK/npm-cache" && step npm run --silent build)
export WHARF_VECTORS="$ROOT/crates/wharf-core/testdata/vectors.json"

# --- Unit tests and the published vectors ---------------------------------------------------
say "Python unit tests and vectors"
(cd "$ROOT/clients/python" && step "$PY" -m pytest -q -p no:cacheprovider tests)
say "TypeScript unit tests and vectors"
(cd "$WORK/ts" && step node --test test/)

# --- A real wharf serve -----------------------------------------------------------------------
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
OPERATOR_TOKEN=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(24))')
cat > "$WORK/wharf.toml" <<EOF
data_dir = "$WORK/data"
log_format = "json"

[serve]
listen = "127.0.0.1:$PORT"

[http]
# The interop webhook receivers listen on loopback, which the guard refuses unless listed.
allow_cidrs = ["127.0.0.0/8"]

[inbox]
# Small enough that a test drains it with one batch and sees 429; each test has its own
# credential, so its own bucket. Refilled at 0.5/s: a 429 lasts long enough to be seen.
identity_rate_per_s = 0.5
identity_burst = $IDENTITY_BURST
batch_envelopes_max = $IDENTITY_BURST

[executor]
poll_interval_ms_max = 200
EOF
export WHARF_CONFIG="$WORK/wharf.toml"
export WHARF_OPERATOR_TOKEN="$OPERATOR_TOKEN"
unset WHARF_DATA_DIR WHARF_LISTEN

say "starting wharf serve on $URL (${DATABASE_URL:+DATABASE_URL}${DATABASE_URL:-embedded PostgreSQL under $WORK/data})"
"$WHARF" serve >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
deadline=$(($(date +%s) + SERVER_START_S_MAX))
until curl -fsS --max-time 2 "$URL/readyz" >/dev/null 2>&1; do
  kill -0 "$SERVER_PID" 2>/dev/null || fail "wharf serve exited before it was ready"
  [ "$(date +%s)" -lt "$deadline" ] || fail "wharf serve was not ready in ${SERVER_START_S_MAX}s"
  sleep 0.2
done

say "setting up a tenant, a key and the webhook key"
# A fresh tenant each run, so a DATABASE_URL that outlives runs never meets an old one.
TENANT="interop-$("$PY" -c 'import secrets; print(secrets.token_hex(4))')"
step "$WHARF" tenant create "$TENANT" >/dev/null 2>>"$WORK/setup.log"
SEED=$(step "$WHARF" key generate --tenant "$TENANT" --project p1 --key-id k1 2>>"$WORK/setup.log")
WEBHOOK_KEY=$(step "$WHARF" webhook-key show 2>>"$WORK/setup.log")

export INTEROP_URL="$URL" INTEROP_OPERATOR_TOKEN="$OPERATOR_TOKEN" INTEROP_WHARF="$WHARF" \
  INTEROP_TENANT="$TENANT" INTEROP_PROJECT=p1 INTEROP_KEY_ID=k1 INTEROP_SEED="$SEED" \
  INTEROP_WEBHOOK_KEY="$WEBHOOK_KEY" INTEROP_IDENTITY_BURST="$IDENTITY_BURST"

# --- Interop ----------------------------------------------------------------------------------
say "Python against wharf serve"
(cd "$ROOT/clients/python" && step "$PY" -m pytest -q -p no:cacheprovider interop)
say "TypeScript against wharf serve"
(cd "$WORK/ts" && step node --test interop/)

stop_server
say "done in $(($(date +%s) - started))s"
