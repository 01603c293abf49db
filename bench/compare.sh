#!/usr/bin/env bash
# wharf against Graphile Worker (and the PostgreSQL ceiling), A-B-A-B on one database server.
#
# Each round drains the same N no-op jobs twice, first with `wharf bench outbox`, then with
# Graphile Worker through bench/graphile/drain.mjs, and, unless --ceiling-seconds 0, measures the
# pgbench ceiling of the fenced path at the same concurrency (bench/pgbench/run.sh). A round's
# ratio is wharf's jobs/s over Graphile's (and over the ceiling's) from that same round; the
# figure to report is the median ratio over all rounds, because this machine is shared and noisy
# and only figures measured side by side can be compared (bench/README.md).
#
# Human lines go to stderr, as the rounds finish; stdout gets one JSON summary at the end.
#
# Usage: bench/compare.sh [options]
#   --n N                 jobs per drain, the same for both systems [100000]
#   --workers C           wharf --workers, Graphile --concurrency, pgbench --clients [10]
#   --rounds R            A-B pairs; odd gives a clean median [5]
#   --ceiling-seconds S   pgbench run per round; 0 = no ceiling [10]. The model ceiling drains
#                         --n instead, whatever S (> 0) is: the table wharf's drain meets
#   --ceiling-script NAME claim_fence_complete (one action per step, as an unbatched executor)
#                         or claim_fence_complete_batch (--ceiling-batch actions per step), or
#                         claim_complete_batch (the same with the claim as the fence, as wharf
#                         runs a kind that is not at-most-once), all three on the minimal table
#                         of pgbench/setup.sql; or model: wharf's own table (every column,
#                         CHECK, index and trigger WHEN) and claim and completion shapes, drained
#                         by pgbench (pgbench/model.sh --variants moved --drain: the layout of
#                         migration 0060), the ceiling with the same guarantees
#                         [claim_fence_complete]
#   --ceiling-batch B     actions per step for the batch scripts and the model, 1..100 [100]
#   --ceiling-clients C   pgbench clients for the ceiling [--workers; 2 for model, the fastest
#                         of 2, 4, 8 and 24 on 2026-12-07, where 24 gave less than half]
#   --wharf PATH          the wharf binary [target/release/wharf]
#   --wharf-args "…"      more flags for `wharf bench outbox` (e.g. "--lanes 1000")
#   --graphile-args "…"   more flags for drain.mjs (e.g. "--local-queue-size 50
#                         --complete-batch-delay 1" for Graphile's batched best case)
#   --data-dir DIR        embedded cluster's data dir when DATABASE_URL is unset [bench/.wharf];
#                         --data-dir .wharf shares the cluster of `wharf serve`
#   --round-timeout T     seconds one measured command may take [1800]
#   --out FILE            also append every raw JSON line (both systems, all rounds) to FILE
#
# Database: $DATABASE_URL when set (all three use it; wharf keeps to schema wharf, Graphile to
# graphile_worker, the ceiling to wharf_ceiling). Otherwise wharf's own embedded cluster under
# --data-dir: `wharf migrate` creates it the way every wharf command does, then this script keeps
# that server running for all rounds (so both systems use the same server, warmed the same way),
# works in a database of its own on it (wharf_bench, created when missing), and stops the server
# at the end if it started it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

die() { echo "compare.sh: $*" >&2; exit 2; }
say() { echo "$*" >&2; }

n=100000
workers=10
rounds=5
ceiling_seconds=10
ceiling_script=claim_fence_complete
ceiling_batch=100
ceiling_clients=""
wharf="$root/target/release/wharf"
wharf_args=""
graphile_args=""
data_dir="$here/.wharf"
round_timeout=1800
out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --n) n="${2:?}"; shift 2 ;;
        --workers) workers="${2:?}"; shift 2 ;;
        --rounds) rounds="${2:?}"; shift 2 ;;
        --ceiling-seconds) ceiling_seconds="${2:?}"; shift 2 ;;
        --ceiling-script) ceiling_script="${2:?}"; shift 2 ;;
        --ceiling-batch) ceiling_batch="${2:?}"; shift 2 ;;
        --ceiling-clients) ceiling_clients="${2:?}"; shift 2 ;;
        --wharf) wharf="${2:?}"; shift 2 ;;
        --wharf-args) wharf_args="${2?}"; shift 2 ;;
        --graphile-args) graphile_args="${2?}"; shift 2 ;;
        --data-dir) data_dir="${2:?}"; shift 2 ;;
        --round-timeout) round_timeout="${2:?}"; shift 2 ;;
        --out) out="${2:?}"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

is_int() { [[ "$1" =~ ^[0-9]+$ ]] && (( "$1" >= $2 && "$1" <= $3 )); }
is_int "$n" 1 100000000 || die "--n must be 1..100000000"
is_int "$workers" 1 1000 || die "--workers must be 1..1000"
is_int "$rounds" 1 100 || die "--rounds must be 1..100"
is_int "$ceiling_seconds" 0 3600 || die "--ceiling-seconds must be 0..3600"
is_int "$round_timeout" 1 86400 || die "--round-timeout must be 1..86400"
is_int "$ceiling_batch" 1 100 || die "--ceiling-batch must be 1..100"
# The model's own best, not the workers: at 24 clients its claims fight over one window of
# heads, and a ceiling that low would flatter wharf.
[[ $ceiling_script == model ]] && : "${ceiling_clients:=2}"
: "${ceiling_clients:=$workers}"
is_int "$ceiling_clients" 1 1000 || die "--ceiling-clients must be 1..1000"
case "$ceiling_script" in
    claim_fence_complete|claim_fence_complete_batch|claim_complete_batch|model) ;;
    *) die "--ceiling-script must be claim_fence_complete, claim_fence_complete_batch, claim_complete_batch or model" ;;
esac
# What the summary calls the ceiling: the script, its batch where it has one, and its clients.
ceiling_name="$ceiling_script"
[[ $ceiling_script == claim_fence_complete ]] || ceiling_name+=" batch=$ceiling_batch"
ceiling_name+=" clients=$ceiling_clients"
command -v node >/dev/null || die "node is needed (Node 18 or newer) for Graphile Worker"
[[ -x "$wharf" ]] || die "no wharf binary at $wharf (cargo build --release -p wharf-cli, or --wharf PATH)"
if ! "$wharf" bench outbox --help >/dev/null 2>&1; then
    die "$wharf has no 'bench outbox' command yet (see bench/DESIGN.md)"
fi
if [[ ! -d "$here/graphile/node_modules/graphile-worker" ]]; then
    say "installing Graphile Worker (npm ci in bench/graphile)"
    (cd "$here/graphile" && npm ci --silent) || die "npm ci failed in bench/graphile"
fi

# --- The database server ---------------------------------------------------------------------

pg_bin_dir() {
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "${WHARF_PG_BIN_DIR:-}" ]]; then echo "$WHARF_PG_BIN_DIR"
    elif [[ -n "$found" ]]; then echo "$found"
    else dirname "$(command -v pg_ctl || die "cannot find pg_ctl (set WHARF_PG_BIN_DIR)")"
    fi
}

stop_cluster=""
cleanup() {
    if [[ -n "$stop_cluster" ]]; then
        say "stopping the embedded PostgreSQL"
        eval "$stop_cluster" >/dev/null 2>&1 || say "compare.sh: could not stop PostgreSQL ($stop_cluster)"
    fi
}
trap cleanup EXIT

if [[ -n "${DATABASE_URL:-}" ]]; then
    url="$DATABASE_URL"
    say "database: \$DATABASE_URL"
else
    # wharf creates (or finds) its cluster exactly as `wharf serve` would, then stops it again
    # since it started it. The layout is wharf-pg's (crates/wharf-pg/src/lib.rs): dir/data is
    # PGDATA, dir/password the superuser wharf's password, dir/run the socket directory; dir
    # may be a symlink when the server user cannot enter the checkout.
    say "database: wharf's embedded cluster under $data_dir/pg"
    migrate_log="$(mktemp)"
    if ! "$wharf" --data-dir "$data_dir" migrate >"$migrate_log" 2>&1; then
        cat "$migrate_log" >&2
        die "wharf migrate failed"
    fi
    rm -f "$migrate_log"
    cluster="$(readlink -f "$data_dir/pg")"
    pgdata="$cluster/data"
    [[ -f "$pgdata/PG_VERSION" && -f "$cluster/password" ]] || die "no wharf cluster at $cluster"
    owner="$(stat -c %U "$pgdata")"
    as_owner=()
    [[ "$(id -un)" == "$owner" ]] || as_owner=(runuser -u "$owner" --)
    bin="$(pg_bin_dir)"
    if "${as_owner[@]}" "$bin/pg_ctl" status -D "$pgdata" >/dev/null 2>&1; then
        # A wharf process holds it (a `wharf serve`): use it, leave it running. (One started
        # by hand was adopted as an orphan and stopped by the `wharf migrate` above.)
        port="$(sed -n 4p "$pgdata/postmaster.pid")"
    else
        socket="$cluster/run"
        (( ${#socket} <= 100 )) || die "socket path $socket is too long; use a shorter --data-dir"
        # The durable cluster's own settings (wharf_pg::Options::durable).
        port=""
        for _attempt in 1 2 3 4 5; do
            candidate="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
            if "${as_owner[@]}" "$bin/pg_ctl" start -w -t 60 -D "$pgdata" -l "$pgdata/wharf-server.log" \
                -o "-p $candidate -h 127.0.0.1 -k '$socket' -c max_connections=200" >/dev/null; then
                port="$candidate"
                break
            fi
        done
        [[ -n "$port" ]] || die "cannot start PostgreSQL in $pgdata (see $pgdata/wharf-server.log)"
        stop_cluster="$(printf '%q ' "${as_owner[@]}" "$bin/pg_ctl" stop -D "$pgdata" -m fast -w)"
    fi
    # A database of its own, so no benchmark row ever lands in the one `wharf serve` uses.
    admin_url="postgres://wharf:$(cat "$cluster/password")@127.0.0.1:$port/postgres"
    if [[ "$("$(pg_bin_dir)/psql" "$admin_url" -X -At -c \
        "SELECT 1 FROM pg_database WHERE datname = 'wharf_bench'")" != 1 ]]; then
        "$(pg_bin_dir)/psql" "$admin_url" -X -q -c "CREATE DATABASE wharf_bench" \
            || die "cannot create the wharf_bench database"
    fi
    url="postgres://wharf:$(cat "$cluster/password")@127.0.0.1:$port/wharf_bench"
fi

psql="$(pg_bin_dir)/psql"
[[ -x "$psql" ]] || psql="$(command -v psql || die "cannot find psql")"
sql() { "$psql" "$url" -X -q -At -v ON_ERROR_STOP=1 -c "$1"; }
server_version="$(sql "SHOW server_version")" || die "cannot reach PostgreSQL"
server_version="${server_version%% *}"
# Each measured command starts with nothing of the previous one left to flush: a checkpoint
# otherwise lands in whichever run comes next. Needs a superuser or pg_checkpoint; else skipped.
checkpoint() { sql "CHECKPOINT" >/dev/null 2>&1 || true; }

# --- The rounds ------------------------------------------------------------------------------

# The value of a numeric field of the last JSON line a command printed on stdout.
field() {
    node -e '
        const lines = process.argv[1].split("\n").filter((l) => l.trim().startsWith("{"));
        if (lines.length === 0) process.exit(3);
        const v = JSON.parse(lines[lines.length - 1])[process.argv[2]];
        if (typeof v !== "number" || !(v > 0)) process.exit(4);
        console.log(v);' "$1" "$2"
}
record() { [[ -z "$out" ]] || printf '%s\n' "$1" | grep '^{' >>"$out"; }
measure() {
    # measure NAME CMD…: runs CMD with a deadline, prints its stdout; stderr passes through.
    local name="$1"; shift
    checkpoint
    local output status=0
    output="$(timeout --kill-after=10 "$round_timeout" "$@")" || status=$?
    (( status == 0 )) || die "$name failed (exit $status): $*"
    printf '%s' "$output"
}

wharf_rates=(); graphile_rates=(); ceiling_rates=(); ratios_g=(); ratios_c=()
load_start="$(cut -d' ' -f1-3 /proc/loadavg)"
say "n=$n workers=$workers rounds=$rounds server=PostgreSQL $server_version cores=$(nproc) load=$load_start"
(( ceiling_seconds == 0 )) || say "ceiling: $ceiling_name, ${ceiling_seconds} s per round"
for round in $(seq 1 "$rounds"); do
    # shellcheck disable=SC2086 # the extra args are meant to split into flags
    # --runs 1: this script does the rounds; --ceiling-seconds 0: and the ceiling (below).
    w_out="$(measure "wharf bench outbox" env DATABASE_URL="$url" "$wharf" bench outbox \
        --n "$n" --workers "$workers" --runs 1 --ceiling-seconds 0 --json $wharf_args)"
    record "$w_out"
    w="$(field "$w_out" jobs_per_second)" || die "wharf printed no jobs_per_second: $w_out"

    # shellcheck disable=SC2086
    g_out="$(measure "graphile drain" env DATABASE_URL="$url" node "$here/graphile/drain.mjs" \
        --n "$n" --concurrency "$workers" --timeout-seconds "$round_timeout" $graphile_args)"
    record "$g_out"
    g="$(field "$g_out" jobs_per_second)" || die "drain.mjs printed no jobs_per_second: $g_out"

    wharf_rates+=("$w"); graphile_rates+=("$g")
    ratio_g="$(node -e 'console.log((process.argv[1] / process.argv[2]).toFixed(3))' "$w" "$g")"
    ratios_g+=("$ratio_g")
    line="$(printf 'round %d/%d  wharf %10.1f jobs/s  graphile %10.1f jobs/s  wharf/graphile %6.2f' \
        "$round" "$rounds" "$w" "$g" "$ratio_g")"

    if (( ceiling_seconds > 0 )); then
        if [[ $ceiling_script == model ]]; then
            # The drain wharf runs: a backlog of --n, drained to its end by whole claims
            # (--transactions each, so the table has the size wharf's drain meets; until
            # 2026-12-07 a 10 s run over 600,000 rows, a bigger and slower table than wharf's
            # 100,000), and a head window every client's claim fits in (model.sh's rule for
            # --scan).
            c_out="$(measure "pgbench model ceiling" env DATABASE_URL="$url" \
                "$here/pgbench/model.sh" --variants moved --drain --rounds 1 \
                --transactions "$(( n / (ceiling_clients * ceiling_batch) > 0 ? n / (ceiling_clients * ceiling_batch) : 1 ))" \
                --clients "$ceiling_clients" --batch "$ceiling_batch" \
                --rows "$(( n > ceiling_clients * ceiling_batch ? n : ceiling_clients * ceiling_batch + 1 ))" \
                --scan "$(( ceiling_clients * ceiling_batch > 1000 ? ceiling_clients * ceiling_batch : 1000 ))")"
            # The run's own line (the last one is model.sh's summary).
            c_out="$(printf '%s\n' "$c_out" | grep '"variant"')"
        else
            c_out="$(measure "pgbench ceiling" env DATABASE_URL="$url" "$here/pgbench/run.sh" \
                --script "$ceiling_script" --batch "$ceiling_batch" --seconds "$ceiling_seconds" \
                --clients "$ceiling_clients")"
        fi
        record "$c_out"
        c="$(field "$c_out" jobs_per_second)" || die "the ceiling printed no jobs_per_second: $c_out"
        ceiling_rates+=("$c")
        ratio_c="$(node -e 'console.log((process.argv[1] / process.argv[2]).toFixed(3))' "$w" "$c")"
        ratios_c+=("$ratio_c")
        line+="$(printf '  ceiling %10.1f jobs/s  wharf/ceiling %5.2f' "$c" "$ratio_c")"
    fi
    say "$line  load $(cut -d' ' -f1 /proc/loadavg)"
done
load_end="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- The summary -----------------------------------------------------------------------------

json_list() { local IFS=,; printf '[%s]' "$*"; }
node -e '
    const [n, workers, rounds, server, cores, loadStart, loadEnd, wharfArgs, graphileArgs,
           ceilingScript, wharf, graphile, ceiling, ratiosG, ratiosC] = process.argv.slice(1);
    const median = (xs) => {
        if (xs.length === 0) return null;
        const s = [...xs].sort((a, b) => a - b);
        const m = s.length >> 1;
        return Math.round((s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2) * 1000) / 1000;
    };
    const [w, g, c, rg, rc] = [wharf, graphile, ceiling, ratiosG, ratiosC].map((x) => JSON.parse(x));
    const summary = {
        n: +n, workers: +workers, rounds: +rounds,
        median_ratio_wharf_graphile: median(rg),
        median_ratio_wharf_ceiling: median(rc),
        median_wharf_jobs_per_second: median(w),
        median_graphile_jobs_per_second: median(g),
        median_ceiling_jobs_per_second: median(c),
        ratios_wharf_graphile: rg, ratios_wharf_ceiling: rc,
        wharf_jobs_per_second: w, graphile_jobs_per_second: g, ceiling_jobs_per_second: c,
        wharf_args: wharfArgs, graphile_args: graphileArgs, ceiling_script: ceilingScript,
        machine: { cores: +cores, server_version: server, load_start: loadStart, load_end: loadEnd },
    };
    const fmt = (x) => (x === null ? "-" : x.toFixed(2));
    console.error(`median wharf/graphile ${fmt(summary.median_ratio_wharf_graphile)}` +
        `  median wharf/ceiling ${fmt(summary.median_ratio_wharf_ceiling)}  (${rounds} rounds)`);
    console.log(JSON.stringify(summary));
' "$n" "$workers" "$rounds" "$server_version" "$(nproc)" "$load_start" "$load_end" \
    "$wharf_args" "$graphile_args" \
    "$( (( ceiling_seconds == 0 )) || echo -n "$ceiling_name")" \
    "$(json_list "${wharf_rates[@]}")" "$(json_list "${graphile_rates[@]}")" \
    "$(json_list "${ceiling_rates[@]}")" "$(json_list "${ratios_g[@]}")" "$(json_list "${ratios_c[@]}")"
