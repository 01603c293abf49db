#!/usr/bin/env bash
# Would the drain get markedly faster with another layout of wharf.action? A pgbench model of
# wharf.action as it is ("inplace": completion updates the row into DONE) against two other
# designs: "moved", ended rows moved to an append-only table (completion deletes from the live
# table and inserts into `ended`; the idempotency key unique over both through an insert-once key
# table); and "hot", moved with the claim a HOT update of the live row (no index of the live
# table names a column the claim changes; the head candidates and the executing lanes in two
# narrow tables of their own). model_setup.sql says what each design holds and leaves out;
# model_<variant>.sql is one pgbench transaction: enqueue --batch actions, claim up to --batch
# and complete what the claim took, with wharf's own statement shapes (three database
# transactions). A claim may come back short, as wharf's do under contention, so a run counts
# what ended: jobs_per_second = tps × (actions ended ÷ transactions), and mean_claim is the
# second factor.
#
# With --drain the scripts skip the enqueue and drain a prefilled backlog of --rows, as
# bench/compare.sh's drain does (--rows should outlast the run: past the backlog's end claims
# come back empty and the figure falls).
#
# Each round runs every variant of --variants in turn (inplace first), each on a fresh setup
# after a CHECKPOINT, and each is checked afterwards: every claimed action ended (none left
# EXECUTING), the backlog is what the enqueues and the ends leave, every action has its key.
# One JSON line per run, then one summary line:
#
#   {"system":"pgbench-model","variant":"inplace","round":1,…,"tps":…,"jobs_per_second":…,…}
#   {"system":"pgbench-model","summary":true,"rounds":3,…,"median_ratio_moved_over_inplace":…}
#
# A ratio is taken per round (a variant ÷ inplace of the same round), the median over rounds,
# for every variant beside inplace.
#
# Usage: DATABASE_URL=postgres://… bench/pgbench/model.sh [options]
#   --seconds S   pgbench -T per run [10]
#   --transactions T  pgbench -t T per client instead of -T: with --drain and --rows N,
#                 T = N ÷ (clients × batch) drains what N leaves, a table of the size a drain of
#                 N meets (bench/compare.sh's model ceiling; a -T run needs more rows than it
#                 drains, and a bigger table is a slower one)
#   --clients C   pgbench -c [4]
#   --threads J   pgbench -j [min(C, cores)]
#   --batch B     actions per step, 1..100 (wharf's claim maximum) [100]
#   --rounds R    rounds of every variant [3]
#   --variants V  inplace, then any of moved, hot, parted in that order (inplace,moved;
#                 inplace,moved,hot,parted; ...), or moved alone. inplace is wharf's table and
#                 statement shapes before migration 0060, moved those 0060 built (live, ended
#                 and key tables): moved alone is the full-fidelity ceiling bench/compare.sh
#                 measures with --ceiling-script model. parted (--drain only) is inplace's table
#                 partitioned by state (model_parted_setup.sql), its script model_inplace.sql
#                 with the state named where partitions can be pruned by it [inplace,moved]
#   --fillfactor F  hot_live's fillfactor, 10..100 [50]
#   --rows N      due backlog to prefill and keep [50000]; must exceed C × B
#   --history H   ended DONE actions to prefill, as kept until retention [0]
#   --scan W      the claim's head-candidate window (wharf's claim_scan_max) [1000]; must be at
#                 least C × B, or a claim can find its window full of rows other clients hold
#   --drain       claim and complete only, from the prefilled backlog (no enqueue)
#   --keep        keep the wharf_model schema afterwards (it is dropped by default)
#
# Environment: DATABASE_URL (required); PGBENCH, PSQL to choose the programs (default: the ones on
# PATH, else the newest under /usr/lib/postgresql/*/bin). Any failure exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

die() { echo "model.sh: $*" >&2; exit 2; }

seconds=10
per_client=0
clients=4
threads=""
batch=100
rounds=3
rows=50000
history=0
scan=1000
keep=0
variants=inplace,moved
fillfactor=50
drain=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="${2:?--seconds needs a value}"; shift 2 ;;
        --transactions) per_client="${2:?--transactions needs a value}"; shift 2 ;;
        --clients) clients="${2:?--clients needs a value}"; shift 2 ;;
        --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
        --batch) batch="${2:?--batch needs a value}"; shift 2 ;;
        --rounds) rounds="${2:?--rounds needs a value}"; shift 2 ;;
        --rows) rows="${2:?--rows needs a value}"; shift 2 ;;
        --history) history="${2:?--history needs a value}"; shift 2 ;;
        --scan) scan="${2:?--scan needs a value}"; shift 2 ;;
        --variants) variants="${2:?--variants needs a value}"; shift 2 ;;
        --fillfactor) fillfactor="${2:?--fillfactor needs a value}"; shift 2 ;;
        --keep) keep=1; shift ;;
        --drain) drain=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

is_int() { [[ "$1" =~ ^[0-9]+$ ]] && (( "$1" >= $2 && "$1" <= $3 )); }
is_int "$seconds" 1 3600 || die "--seconds must be 1..3600"
is_int "$per_client" 0 100000000 || die "--transactions must be 0..100000000 (0: run --seconds)"
is_int "$clients" 1 1000 || die "--clients must be 1..1000"
is_int "$batch" 1 100 || die "--batch must be 1..100"
is_int "$rounds" 1 100 || die "--rounds must be 1..100"
is_int "$rows" 1 100000000 || die "--rows must be 1..100000000"
is_int "$history" 0 100000000 || die "--history must be 0..100000000"
is_int "$scan" 1 1000000 || die "--scan must be 1..1000000"
is_int "$fillfactor" 10 100 || die "--fillfactor must be 10..100"
[[ "$variants" =~ ^(inplace(,moved)?(,hot)?(,parted)?|moved)$ ]] \
    || die "--variants must be moved alone, or inplace then any of moved, hot, parted in that order"
IFS=, read -r -a variant_list <<<"$variants"
[[ "$variants" != *parted* ]] || (( drain )) \
    || die "parted models a drain only (it has no unique idempotency key to enqueue against): add --drain"
drain_json=$( (( drain )) && echo true || echo false)
cores="$(nproc 2>/dev/null || echo 2)"
: "${threads:=$(( clients < cores ? clients : cores ))}"
is_int "$threads" 1 "$clients" || die "--threads must be 1..clients"
(( rows > clients * batch )) || die "--rows must exceed clients × batch ($(( clients * batch )))"
(( scan >= clients * batch )) || die "--scan must be at least clients × batch ($(( clients * batch )))"
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

out=""
parted_script=""
cleanup() {
    if [[ -n "$out" ]]; then rm -f "$out"; fi
    if [[ -n "$parted_script" ]]; then rm -f "$parted_script"; fi
    if (( keep == 0 )); then
        sql -c "DROP SCHEMA IF EXISTS wharf_model CASCADE" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT

server_version="$(sql -At -c "SHOW server_version" | awk '{print $1}')"
pgbench_version="$("$pgbench" --version | grep -oE '[0-9]+\.[0-9]+' | head -n 1)"

# Ended and backlog counts of a variant's tables, "ended backlog executing keys".
counts() {
    case "$1" in
        inplace|parted) sql -At -F ' ' -c "
            SELECT count(*) FILTER (WHERE state = 'DONE'),
                   count(*) FILTER (WHERE state = 'ADMITTED'),
                   count(*) FILTER (WHERE state NOT IN ('DONE', 'ADMITTED')),
                   count(*)
              FROM wharf_model.action" ;;
        moved) sql -At -F ' ' -c "
            SELECT (SELECT count(*) FROM wharf_model.ended WHERE state = 'DONE'),
                   count(*) FILTER (WHERE state = 'ADMITTED'),
                   count(*) FILTER (WHERE state <> 'ADMITTED'),
                   (SELECT count(*) FROM wharf_model.action_key)
              FROM wharf_model.live" ;;
        # Every unstarted row is a head candidate here, and every executing lane in hot_running.
        hot) sql -At -F ' ' -c "
            SELECT (SELECT count(*) FROM wharf_model.ended WHERE state = 'DONE'),
                   count(*) FILTER (WHERE state = 'ADMITTED'),
                   count(*) FILTER (WHERE state <> 'ADMITTED')
                     + (SELECT count(*) FROM wharf_model.hot_running)
                     + abs((SELECT count(*) FROM wharf_model.hot_ready)
                           - count(*) FILTER (WHERE state = 'ADMITTED')),
                   (SELECT count(*) FROM wharf_model.action_key)
              FROM wharf_model.hot_live" ;;
    esac
}

# parted's script: model_inplace.sql with the state named where the planner can prune the
# partitions by it (inplace writes `state || ''` and a CASE there to keep a partial index out of
# the plan; on a partitioned table that hides the state and every lookup probes both partitions:
# 4.1-4.3 k jobs/s against 13.6-15.7 k in three rounds on 2026-12-07). Each edit must apply.
if [[ "$variants" == *parted* ]]; then
    parted_script="$(mktemp --suffix=.sql)"
    cp "$here/model_inplace.sql" "$parted_script"
    for edit in \
        "s/AND (r.state || '') = 'EXECUTING'/AND r.state = 'EXECUTING'/" \
        "s/WHERE h.id = c.id AND (h.state || '') = 'ADMITTED'/WHERE h.id = c.id AND h.state = 'ADMITTED'/" \
        "s/WHERE a.id = ANY (ARRAY(SELECT id FROM picked))\$/& AND a.state IN ('ADMITTED', 'EXECUTING')/" \
        "s/AND CASE WHEN a.state = 'EXECUTING' THEN true ELSE false END/AND a.state = 'EXECUTING'/"; do
        before="$(cksum <"$parted_script")"
        sed -i "$edit" "$parted_script"
        [[ "$(cksum <"$parted_script")" != "$before" ]] || die "model_inplace.sql no longer has what parted edits ($edit)"
    done
fi

declare -A jps_of ratios_of
for (( round = 1; round <= rounds; round++ )); do
    for variant in "${variant_list[@]}"; do
        # A fresh schema and prefill per run, so every run starts from the same table state.
        sql -v rows="$rows" -v history="$history" -v variant="${variant/parted/inplace}" \
            -v fillfactor="$fillfactor" -f "$here/model_setup.sql" >/dev/null
        [[ "$variant" != parted ]] || sql -f "$here/model_parted_setup.sql" >/dev/null
        script="$here/model_$variant.sql"
        [[ "$variant" != parted ]] || script="$parted_script"
        read -r ended0 backlog0 other0 keys0 <<<"$(counts "$variant")"
        (( ended0 == history && backlog0 == rows && other0 == 0 )) \
            || die "$variant: setup left ended=$ended0 backlog=$backlog0 other=$other0"
        # The prefill's WAL should not be flushed by a checkpoint in the middle of the run.
        sql -c "CHECKPOINT" >/dev/null 2>&1 || echo "model.sh: note: CHECKPOINT not allowed, skipped" >&2

        out="$(mktemp)"
        status=0
        length=(-T "$seconds"); limit=$(( seconds + 60 ))
        (( per_client == 0 )) || { length=(-t "$per_client"); limit=3600; }
        timeout --kill-after=10 "$limit" \
            "$pgbench" -n -M prepared "${length[@]}" -c "$clients" -j "$threads" \
            -D batch="$batch" -D scan="$scan" -D enqueue="$(( 1 - drain ))" -f "$script" "$DATABASE_URL" \
            >"$out" 2>&1 || status=$?
        if (( status != 0 )) || grep -qiE 'error|abort' "$out"; then
            cat "$out" >&2
            die "pgbench failed on $variant, round $round (exit $status)"
        fi
        tps="$(awk '/^tps = / {print $3; exit}' "$out")"
        transactions="$(awk -F': ' '/^number of transactions actually processed/ {split($2, a, "/"); print a[1]; exit}' "$out")"
        latency="$(awk '/^latency average = / {print $4; exit}' "$out")"
        rm -f "$out"; out=""
        [[ -n "$tps" && -n "$transactions" && -n "$latency" ]] \
            || die "cannot read pgbench's report for $variant, round $round"

        # Every claimed action ended; the backlog is what the enqueues and the ends leave.
        read -r ended1 backlog1 other1 keys1 <<<"$(counts "$variant")"
        drained=$(( ended1 - ended0 ))
        (( drained > 0 && drained <= transactions * batch )) \
            || die "$variant, round $round: $drained actions ended in $transactions transactions"
        left=$(( drain ? rows - drained : rows + transactions * batch - drained ))
        (( backlog1 == left && other1 == 0 )) \
            || die "$variant, round $round: backlog $backlog1 (expected $left), $other1 in other states"
        (( keys1 == ended1 + backlog1 )) \
            || die "$variant, round $round: $keys1 keys for $(( ended1 + backlog1 )) actions"
        # The variant's tables (heap + indexes + TOAST after the run, in kB, below) and its live
        # table, whose updates may stay on their page (moved and hot; none of inplace's can,
        # every state change of it names an indexed column).
        case "$variant" in
            inplace) tables="'action'"; live=action ;;
            parted) tables="'action_live', 'action_ended'"; live=action_live ;;
            moved) tables="'live', 'ended', 'action_key'"; live=live ;;
            hot) tables="'hot_live', 'hot_ready', 'hot_running', 'ended', 'action_key'"; live=hot_live ;;
        esac
        read -r updates hot_updates <<<"$(sql -At -F ' ' -c "
            SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
             WHERE schemaname = 'wharf_model' AND relname = '$live'")"
        sizes="$(sql -At -c "
            SELECT string_agg(format('\"%s\":%s', c.relname,
                                     pg_total_relation_size(c.oid) / 1024), ',' ORDER BY c.relname)
              FROM pg_class c
             WHERE c.relnamespace = 'wharf_model'::regnamespace AND c.relname IN ($tables)")"

        jps="$(awk -v t="$tps" -v d="$drained" -v n="$transactions" 'BEGIN { printf "%.3f", t * d / n }')"
        mean_claim="$(awk -v d="$drained" -v n="$transactions" 'BEGIN { printf "%.2f", d / n }')"
        jps_of[$variant]+="$jps "
        # A ratio only against this round's inplace (--variants moved alone has none).
        if [[ "$variant" == inplace ]]; then
            inplace_round="$jps"
        elif [[ -n "${inplace_round:-}" ]]; then
            ratios_of[$variant]+="$(awk -v m="$jps" -v i="$inplace_round" 'BEGIN { printf "%.4f", m / i }') "
        fi
        printf '{"system":"pgbench-model","variant":"%s","round":%d,"clients":%d,"threads":%d,"seconds":%d,"transactions_per_client":%d,"batch":%d,"rows":%d,"history":%d,"scan":%d,"fillfactor":%d,"drain":%s,"transactions":%d,"drained":%d,"mean_claim":%s,"tps":%s,"jobs_per_second":%s,"latency_ms_avg":%s,"live_updates":%d,"live_hot_updates":%d,"table_kb":{%s},"pgbench_version":"%s","server_version":"%s"}\n' \
            "$variant" "$round" "$clients" "$threads" "$seconds" "$per_client" "$batch" "$rows" "$history" \
            "$scan" "$fillfactor" "$drain_json" "$transactions" "$drained" "$mean_claim" "$tps" "$jps" "$latency" \
            "${updates:-0}" "${hot_updates:-0}" "$sizes" "$pgbench_version" "$server_version"
    done
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) printf "%.4f", v[(NR + 1) / 2]; else printf "%.4f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
join() { local IFS=,; echo "$*"; }
fields=""
for variant in "${variant_list[@]}"; do
    # shellcheck disable=SC2086 # the lists are space-separated numbers
    fields+="$(printf ',"median_%s_jobs_per_second":%s' "$variant" "$(median ${jps_of[$variant]})")"
    if [[ "$variant" != inplace && -n "${ratios_of[$variant]:-}" ]]; then
        # shellcheck disable=SC2086
        fields+="$(printf ',"ratios_%s_over_inplace":[%s],"median_ratio_%s_over_inplace":%s' \
            "$variant" "$(join ${ratios_of[$variant]})" "$variant" "$(median ${ratios_of[$variant]})")"
    fi
done
printf '{"system":"pgbench-model","summary":true,"rounds":%d,"clients":%d,"batch":%d,"seconds":%d,"rows":%d,"history":%d,"fillfactor":%d,"drain":%s%s}\n' \
    "$rounds" "$clients" "$batch" "$seconds" "$rows" "$history" "$fillfactor" \
    "$drain_json" "$fields"
