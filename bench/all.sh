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
#   --n N            actions per drain (outbox, compare.sh) [20000]
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
n=20000
rounds=5
backlogs=10000,1000000
wharf="$root/target/release/wharf"
baseline=""
csec=10      # pgbench seconds per ceiling measurement
lsec=30      # measured seconds per latency run
lruns=3      # latency and inbox runs
envelopes=50000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="${2:?}"; shift 2 ;;
        --n) n="${2:?}"; shift 2 ;;
        --rounds) rounds="${2:?}"; shift 2 ;;
        --backlogs) backlogs="${2:?}"; shift 2 ;;
        --wharf) wharf="${2:?}"; shift 2 ;;
        --baseline) baseline="${2:?}"; shift 2 ;;
        --quick) csec=1; lsec=2; lruns=1; envelopes=500; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ -x "$wharf" ]] || { echo "all.sh: no wharf binary at $wharf" >&2; exit 2; }
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
    git -C "$root" log -1 --format='commit: %H %s'
    psql "$DATABASE_URL" -X -At -c "SELECT 'server: ' || version()" \
        -c "SELECT 'fsync=' || current_setting('fsync') || ' synchronous_commit=' || current_setting('synchronous_commit') || ' shared_buffers=' || current_setting('shared_buffers') || ' wal_level=' || current_setting('wal_level')"
} >"$out/machine.txt"

if [[ -n "$baseline" ]]; then
    [[ -x "$baseline" ]] || { echo "all.sh: no baseline binary at $baseline" >&2; exit 2; }
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
run compare-w10 "$here/compare.sh" --n "$n" --workers 10 --rounds "$rounds" --ceiling-seconds "$csec" \
    --out "$out/compare-w10.jsonl"
run compare-w32 "$here/compare.sh" --n "$n" --workers 32 --rounds "$rounds" --ceiling-seconds "$csec" \
    --ceiling-script claim_fence_complete_batch --ceiling-batch 32 --out "$out/compare-w32.jsonl"
run compare-w10-graphile-batched "$here/compare.sh" --n "$n" --workers 10 --rounds "$rounds" \
    --ceiling-seconds 0 --graphile-args "--local-queue-size 10 --complete-batch-delay 1" \
    --out "$out/compare-w10-graphile-batched.jsonl"
run outbox "$wharf" bench outbox --n "$n" --workers 10 --runs "$rounds" --ceiling-seconds "$csec" \
    --ceiling-script both --json
run outbox-notify-off "$wharf" bench outbox --n "$n" --workers 10 --runs "$lruns" --notify off \
    --ceiling-seconds 0 --json
run backlog "$wharf" bench outbox --n "$n" --backlog "$backlogs" --runs "$lruns" --ceiling-seconds "$csec" \
    --ceiling-script single --json
run backlog-lanes "$wharf" bench outbox --n "$n" --backlog "$backlogs" --backlog-lanes 100000 \
    --runs "$lruns" --ceiling-seconds 0 --json
run latency-200 "$wharf" bench latency --rate 200 --seconds "$lsec" --runs "$lruns" --notify on,off --json
run latency-500 "$wharf" bench latency --rate 500 --seconds "$lsec" --runs "$lruns" --notify on,off --json
# Offered far above what the executor drains: what is measured is how many single-action
# enqueue transactions per second get through, with NOTIFY on and off (SPEC §2.6: throughput
# must not collapse when NOTIFY is on).
run latency-1500 "$wharf" bench latency --rate 1500 --seconds "$lsec" --warmup-seconds 2 \
    --runs "$lruns" --notify on,off --json
run inbox "$wharf" bench inbox --envelopes "$envelopes" --streams 16 --batch 1,100 --connections 8 \
    --runs "$lruns" --json
say "done: $out"
uptime >>"$out/machine.txt"
