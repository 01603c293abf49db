#!/usr/bin/env bash
# Every figure of BENCHMARKS.md in one sitting, on one server: the machine, the PostgreSQL
# ceiling, wharf against Graphile Worker (A-B-A-B), the outbox drain against its ceilings, claim
# cost across backlogs and lanes, enqueue→start latency, and inbox ingest.
#
# Every step is a command documented in bench/README.md; this script only runs them in order,
# keeps their raw output, and stops at the first failure (a failed run prints no figure).
#
# Usage: bench/all.sh [options]
#   --out DIR        where the raw output goes [bench/results/<UTC time>]
#   --n N            actions per drain (outbox, compare.sh) [100000]
#   --rounds R       compare.sh rounds and `--runs` of the other commands [5]
#   --backlogs LIST  backlog sweep sizes [10000,1000000]; 10000000 works too, but its prefill
#                    takes about 10 minutes and ~6 GiB of disk on this machine
#   --wharf PATH     the wharf binary [target/release/wharf]
#   --baseline PATH  an earlier wharf binary (e.g. built from the commit before a change): adds
#                    a before/after step, the same drain run A-B-A-B with both binaries
#   --quick          seconds instead of minutes per step: checks the script, measures nothing
#
# Database: as bench/compare.sh — $DATABASE_URL, or wharf's embedded cluster under
# bench/.wharf (started here once, so every command shares one server, and stopped at the end).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$here/results/$(date -u +%Y%m%dT%H%M%SZ)"
n=100000
rounds=5
backlogs=10000,1000000
wharf="$root/target/release/wharf"
baseline=""
csec=10      # pgbench seconds per ceiling measurement
lsec=30      # measured seconds per latency run
lruns=3      # latency and inbox runs
lat_runs=5   # latency runs at 500/s and 2,000/s (the goal: five consecutive runs)
envelopes=50000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?}"; shift 2 ;;
        --n) n="${2:?}"; shift 2 ;;
        --rounds) rounds="${2:?}"; shift 2 ;;
        --backlogs) backlogs="${2:?}"; shift 2 ;;
        --wharf) wharf="${2:?}"; shift 2 ;;
        --baseline) baseline="${2:?}"; shift 2 ;;
        --quick) csec=1; lsec=2; lruns=1; lat_runs=1; envelopes=500; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ -x "$wharf" ]] || { echo "all.sh: no wharf binary at $wharf" >&2; exit 2; }
[[ -z "$baseline" || -x "$baseline" ]] || { echo "all.sh: no baseline binary at $baseline" >&2; exit 2; }
mkdir -p "$out"
say() { echo "== $*" >&2; }

# One server for everything: start the embedded cluster the way compare.sh does and keep it up.
data_dir="$here/.wharf"
stop_cluster=""
if [[ -z "${DATABASE_URL:-}" ]]; then
    "$wharf" --data-dir "$data_dir" migrate >/dev/null
    cluster="$(readlink -f "$data_dir/pg")"
    pgdata="$cluster/data"
    owner="$(stat -c %U "$pgdata")"
    as_owner=()
    [[ "$(id -un)" == "$owner" ]] || as_owner=(runuser -u "$owner" --)
    bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [[ -n "$bin" ]] || bin="$(dirname "$(command -v pg_ctl)")"
    if ! "${as_owner[@]}" "$bin/pg_ctl" status -D "$pgdata" >/dev/null 2>&1; then
        port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
        "${as_owner[@]}" "$bin/pg_ctl" start -w -t 60 -D "$pgdata" -l "$pgdata/wharf-server.log" \
            -o "-p $port -h 127.0.0.1 -k '$cluster/run' -c max_connections=200" >/dev/null
        stop_cluster="$(printf '%q ' "${as_owner[@]}" "$bin/pg_ctl" stop -D "$pgdata" -m fast -w)"
        trap 'eval "$stop_cluster" >/dev/null 2>&1 || true' EXIT
    fi
    port="$(sed -n 4p "$pgdata/postmaster.pid")"
    password="$(cat "$cluster/password")"
    "$bin/psql" "postgres://wharf:$password@127.0.0.1:$port/postgres" -X -q -At -c \
        "SELECT 1 FROM pg_database WHERE datname = 'wharf_bench'" | grep -q 1 \
        || "$bin/psql" "postgres://wharf:$password@127.0.0.1:$port/postgres" -X -q \
            -c "CREATE DATABASE wharf_bench"
    export DATABASE_URL="postgres://wharf:$password@127.0.0.1:$port/wharf_bench"
fi

run() {
    # run NAME CMD…: stdout to NAME.jsonl (or .txt), stderr to NAME.err; the human tables of the
    # wharf commands are printed again from their JSON by nobody — keep both forms for the record.
    local name="$1"; shift
    # Never print a database URL: it carries the cluster's password.
    say "$name: $(printf '%s\n' "$*" | sed -E 's#(postgres(ql)?://[^:/@]+):[^@]*@#\1:***@#g')"
    "$@" >"$out/$name.out" 2>"$out/$name.err"
}

say "machine"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "nproc: $(nproc)"
    grep -m1 'model name' /proc/cpuinfo || true
    free -m
    uptime
    git -C "$root" log -1 --format='checkout: %H %s'
    # Which code each binary is: its own `--version` names the commit its build stamped
    # (bench/README.md); the checkout above need not be it, and a copied baseline never is.
    for bin in "$wharf" ${baseline:+"$baseline"}; do
        version=$("$bin" --version)
        echo "binary: $bin: $version, sha256 $(sha256sum "$bin" | cut -c1-16)"
        [[ $version == *"(commit "* ]] \
            || echo "  (no commit stamped: build it with WHARF_BUILD_COMMIT set, bench/README.md)"
    done
    psql "$DATABASE_URL" -X -At -c "SELECT 'server: ' || version()" \
        -c "SELECT 'fsync=' || current_setting('fsync') || ' synchronous_commit=' || current_setting('synchronous_commit') || ' shared_buffers=' || current_setting('shared_buffers') || ' wal_level=' || current_setting('wal_level')"
} >"$out/machine.txt"

if [[ -n "$baseline" ]]; then
    # Before/after of a change: one drain each, alternating, so both see the same noise. The
    # baseline gets a database of its own on the same server: it may predate a migration, and
    # refuses a schema newer than itself.
    base_url="${DATABASE_URL%/*}/wharf_bench_baseline"
    psql "${DATABASE_URL%/*}/postgres" -X -q -At -c \
        "SELECT 1 FROM pg_database WHERE datname = 'wharf_bench_baseline'" | grep -q 1 \
        || psql "${DATABASE_URL%/*}/postgres" -X -q -c "CREATE DATABASE wharf_bench_baseline"
    for round in $(seq 1 "$rounds"); do
        run "before-after-$round-before" env DATABASE_URL="$base_url" "$baseline" bench outbox \
            --n "$n" --workers 10 --runs 1 --ceiling-seconds 0 --json
        run "before-after-$round-after" "$wharf" bench outbox --n "$n" --workers 10 --runs 1 \
            --ceiling-seconds 0 --json
    done
fi
run ceiling "$wharf" bench ceiling --clients 10,32 --seconds "$csec" --runs "$lruns" --json
# The outbox goals, as the hot-path issue states them: wharf with its defaults (only the
# concurrency set, the same for both) against Graphile Worker at its performance page's
# configuration and at its defaults, with one lane per action and with 1,000 lanes (the bench's
# adapter counts lane overlaps and out-of-order starts; any fails the run), and against two
# pgbench ceilings. With the performance-page comparison, the ceiling with the same guarantees:
# wharf's own tables and claim and completion shapes driven by pgbench (the model's moved
# drain, the layout of migration 0060), at 2 clients: wharf's shape, and the fastest of 2, 4, 8 and 24 (one run each, 2026-12-07).
# With the defaults comparison, the minimal path (claim_complete_batch on pgbench/setup.sql's
# table, the claim as the fence) at 24 clients, as earlier sittings measured it.
perf='--local-queue-size 500 --complete-batch-delay 0'
run compare-w24-perf "$here/compare.sh" --wharf "$wharf" --n "$n" --workers 24 --rounds "$rounds" \
    --ceiling-seconds "$csec" --ceiling-script model --ceiling-clients 2 --ceiling-batch 100 \
    --graphile-args "$perf" --out "$out/compare-w24-perf.jsonl"
run compare-w10-defaults "$here/compare.sh" --wharf "$wharf" --n "$n" --workers 10 --rounds "$rounds" \
    --ceiling-seconds "$csec" --ceiling-script claim_complete_batch --ceiling-batch 100 \
    --ceiling-clients 24 --out "$out/compare-w10-defaults.jsonl"
run compare-w24-lanes1000 "$here/compare.sh" --wharf "$wharf" --n "$n" --workers 24 --rounds "$rounds" \
    --ceiling-seconds 0 --wharf-args "--lanes 1000" --graphile-args "--queues 1000 $perf" \
    --out "$out/compare-w24-lanes1000.jsonl"
# Replicas: two executors (two pools) against one, the same total concurrency.
run outbox-executors-1 "$wharf" bench outbox --n "$n" --workers 24 --executors 1 --runs "$lruns" \
    --ceiling-seconds 0 --json
run outbox-executors-2 "$wharf" bench outbox --n "$n" --workers 24 --executors 2 --runs "$lruns" \
    --ceiling-seconds 0 --json
run backlog "$wharf" bench outbox --n "$n" --backlog "$backlogs" --runs "$lruns" --ceiling-seconds 0 \
    --json
run backlog-lanes "$wharf" bench outbox --n "$n" --backlog "$backlogs" --backlog-lanes 100000 \
    --runs "$lruns" --ceiling-seconds 0 --json
# Enqueue→start at 500/s and 2,000/s with wake-ups on, five consecutive runs each (no collapse).
run latency-500 "$wharf" bench latency --rate 500 --seconds "$lsec" --runs "$lat_runs" --notify on,off --json
run latency-2000 "$wharf" bench latency --rate 2000 --seconds "$lsec" --runs "$lat_runs" --notify on --json
# The inbox-speed issue's shapes, each against its same-run ceiling: single envelopes from 64
# producers on 64 streams (pgbench insert commits), batches of 100 (Ed25519 verifies per core),
# one producer on one stream, and RSS across 1,000 and 100,000 streams. With --baseline, the
# first three alternate with the baseline binary on a database of its own, as the drain above.
inbox_shapes=(
    "singles-64x64|--envelopes $((envelopes * 4 / 5)) --streams 64 --connections 64 --batch 1 --baseline-seconds $((csec / 3 + 1))"
    "batch-100|--envelopes $((envelopes * 2 / 5)) --streams 8 --connections 8 --batch 100 --baseline-seconds $((csec / 3 + 1))"
    "one-stream|--envelopes $((envelopes / 10)) --streams 1 --connections 1 --batch 1 --baseline-seconds 0"
)
for shape in "${inbox_shapes[@]}"; do
    name="${shape%%|*}"
    read -r -a args <<<"${shape#*|}"
    if [[ -n "$baseline" ]]; then
        run "inbox-$name-before" env DATABASE_URL="$base_url" "$baseline" bench inbox "${args[@]}" \
            --runs "$lruns" --json
    fi
    run "inbox-$name" "$wharf" bench inbox "${args[@]}" --runs "$lruns" --json
done
for streams in 1000 100000; do
    run "inbox-rss-streams-$streams" "$wharf" bench inbox --envelopes $((envelopes * 2 > streams ? envelopes * 2 : streams)) \
        --streams "$streams" --connections 64 --batch 1 --baseline-seconds 0 --runs "$lruns" --json
done
say "done: $out"
uptime >>"$out/machine.txt"
