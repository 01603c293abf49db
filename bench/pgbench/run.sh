#!/usr/bin/env bash
# The PostgreSQL ceiling (bench/README.md): runs pgbench for a fixed time with this folder's
# scripts against $DATABASE_URL, and prints one JSON line per script:
#
#   {"system":"pgbench","script":"claim_fence_complete","clients":4,"threads":2,"seconds":10,
#    "rows":200000,"transactions":…,"tps":…,"jobs_per_second":…,"latency_ms_avg":…,…}
#
# For claim_fence_complete one pgbench transaction is one action claimed, fenced and completed
# (three database transactions), so its tps is reported as jobs_per_second too, the unit wharf and
# Graphile Worker report; for claim_fence_complete_batch one transaction is --batch actions, so
# jobs_per_second = tps × batch. For insert, tps is single-row insert commits per second.
#
# Usage: DATABASE_URL=postgres://… bench/pgbench/run.sh [options]
#   --script NAME   insert, claim_fence_complete, claim_fence_complete_batch,
#                   claim_complete_batch (the claim is the fence), or all (the four) [all]
#   --batch B       actions per step for claim_fence_complete_batch, 1..100 (wharf's claim
#                   maximum) [100]
#   --seconds S     pgbench -T, per script [10]
#   --clients C     pgbench -c; compare at the same concurrency as the system measured [4]
#   --threads J     pgbench -j [min(C, cores)]
#   --rows R        due rows to prefill [max(100000, 20000 × S), 150000 × S with the batch
#                   script]: above what S seconds can drain
#                   on this machine, since running out aborts the run; also the backlog knob
#                   (1000000, 10000000) for claim cost against backlog size
#   --keep          keep the wharf_ceiling schema afterwards (it is dropped by default)
#
# Environment: DATABASE_URL (required); PGBENCH, PSQL to choose the programs (default: the ones on
# PATH, else the newest under /usr/lib/postgresql/*/bin).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "run.sh: $*" >&2; exit 2; }

script=all
batch=100
seconds=10
clients=4
threads=""
rows=""
keep=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --script) script="${2:?--script needs a value}"; shift 2 ;;
        --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
        --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
        --clients) clients="${2:?--clients needs a value}"; shift 2 ;;
        --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
        --rows) rows="${2:?--rows needs a value}"; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

is_int() { [[ "$1" =~ ^[0-9]+$ ]] && (( "$1" >= $2 && "$1" <= $3 )); }
is_int "$seconds" 1 3600 || die "--seconds must be 1..3600"
is_int "$clients" 1 1000 || die "--clients must be 1..1000"
is_int "$batch" 1 100 || die "--batch must be 1..100"
cores="$(nproc 2>/dev/null || echo 2)"
: "${threads:=$(( clients < cores ? clients : cores ))}"
is_int "$threads" 1 "$clients" || die "--threads must be 1..clients"
# Prefill about three times the fastest drain seen on this 2-core machine with fsync on: 6-7 k
# jobs/s single, 47 k batched at 10 clients on 2026-12-05, when 50,000 a second (the old figure)
# ran out at 32 clients within 10 s and failed the sitting. An exhausted prefill is reported as a
# failure anyway, never as a figure; a faster machine raises --rows.
per_second=20000
if [[ "$script" == all || "$script" == *_batch ]]; then
    per_second=150000
fi
: "${rows:=$(( per_second * seconds > 100000 ? per_second * seconds : 100000 ))}"
is_int "$rows" 1 100000000 || die "--rows must be 1..100000000"
case "$script" in
    all) scripts=(insert claim_fence_complete claim_fence_complete_batch claim_complete_batch) ;;
    insert|claim_fence_complete|claim_fence_complete_batch|claim_complete_batch) scripts=("$script") ;;
    *) die "--script must be insert, claim_fence_complete, claim_fence_complete_batch, claim_complete_batch or all" ;;
esac
[[ -n "${DATABASE_URL:-}" ]] || die "DATABASE_URL is not set"

find_program() {
    local name="$1" override="$2"
    if [[ -n "$override" ]]; then echo "$override"; return; fi
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1 || true)"
    [[ -n "$found" ]] || die "cannot find $name (set ${name^^})"
    echo "$found"
}
pgbench="$(find_program pgbench "${PGBENCH:-}")"
psql="$(find_program psql "${PSQL:-}")"

sql() { "$psql" "$DATABASE_URL" -X -q -v ON_ERROR_STOP=1 "$@"; }

cleanup() {
    if (( keep == 0 )); then
        sql -c "DROP SCHEMA IF EXISTS wharf_ceiling CASCADE" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

server_version="$(sql -At -c "SHOW server_version" | awk '{print $1}')"
pgbench_version="$("$pgbench" --version | grep -oE '[0-9]+\.[0-9]+' | head -n 1)"

for name in "${scripts[@]}"; do
    # A fresh prefill per script, so every run starts from the same table state.
    sql -v rows="$rows" -f "$here/setup.sql" >/dev/null
    # The prefill's WAL should not be flushed by a checkpoint in the middle of the measurement.
    # CHECKPOINT needs a superuser or pg_checkpoint; without either the run goes on.
    sql -c "CHECKPOINT" >/dev/null 2>&1 || echo "run.sh: note: CHECKPOINT not allowed, skipped" >&2

    out="$(mktemp)"
    # -n: the scripts' tables are not pgbench's own, there is nothing of pgbench's to vacuum.
    # -M prepared: wharf (sqlx) and Graphile Worker both use prepared statements.
    # timeout: pgbench -T ends the run, the margin only catches a hung connection.
    status=0
    timeout --kill-after=10 "$(( seconds + 60 ))" \
        "$pgbench" -n -M prepared -T "$seconds" -c "$clients" -j "$threads" \
        -D batch="$batch" -f "$here/$name.sql" "$DATABASE_URL" >"$out" 2>&1 || status=$?
    if (( status != 0 )); then
        cat "$out" >&2
        rm -f "$out"
        if [[ "$name" == claim_* ]] && (( status == 2 )); then
            die "pgbench failed on $name (if a claim got no row, the prefill of $rows rows ran out: raise --rows)"
        fi
        die "pgbench failed on $name (exit $status)"
    fi
    tps="$(awk '/^tps = / {print $3; exit}' "$out")"
    transactions="$(awk -F': ' '/^number of transactions actually processed/ {split($2, a, "/"); print a[1]; exit}' "$out")"
    latency="$(awk '/^latency average = / {print $4; exit}' "$out")"
    rm -f "$out"
    [[ -n "$tps" && -n "$transactions" && -n "$latency" ]] || die "cannot read pgbench's report for $name"
    extra=""
    case "$name" in
        claim_fence_complete) extra=",\"jobs_per_second\":$tps" ;;
        claim_fence_complete_batch|claim_complete_batch)
            extra="$(awk -v t="$tps" -v b="$batch" 'BEGIN { printf ",\"batch\":%d,\"jobs_per_second\":%.3f", b, t * b }')" ;;
    esac
    printf '{"system":"pgbench","script":"%s","clients":%d,"threads":%d,"seconds":%d,"rows":%d,"transactions":%d,"tps":%s%s,"latency_ms_avg":%s,"pgbench_version":"%s","server_version":"%s"}\n' \
        "$name" "$clients" "$threads" "$seconds" "$rows" "$transactions" "$tps" "$extra" "$latency" \
        "$pgbench_version" "$server_version"
done
