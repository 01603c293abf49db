#!/usr/bin/env node
// Turns the raw output of one bench/all.sh run into the tables of BENCHMARKS.md, so the document
// is copied from the figures, never typed from memory.
//
// Usage: node bench/summarize.mjs bench/results/<run>   (Markdown on stdout)
import { readFileSync, existsSync, readdirSync } from "node:fs";
import { join } from "node:path";

const dir = process.argv[2];
if (!dir) {
    console.error("usage: node bench/summarize.mjs <results dir>");
    process.exit(2);
}
const lines = (name) => {
    const file = join(dir, name);
    if (!existsSync(file)) return [];
    return readFileSync(file, "utf8")
        .split("\n")
        .filter((l) => l.trim().startsWith("{"))
        .map((l) => JSON.parse(l));
};
const last = (name) => lines(name).at(-1);
// A wharf command's summary over its runs: its last line marked `summary`. A step still running
// has none yet, and is left out of the tables.
const summaryOf = (name) => lines(name).findLast((l) => l.summary);
const f = (x, d = 0) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
const out = [];
const p = (s = "") => out.push(s);
const table = (header, rows) => {
    p(`| ${header.join(" | ")} |`);
    p(`|${header.map(() => "---").join("|")}|`);
    for (const r of rows) p(`| ${r.join(" | ")} |`);
    p();
};

// Machine.
if (existsSync(join(dir, "machine.txt"))) {
    p("```");
    p(readFileSync(join(dir, "machine.txt"), "utf8").trim());
    p("```");
    p();
}

// Ceiling.
const ceiling = summaryOf("ceiling.out");
if (ceiling) {
    p(`### PostgreSQL ceiling (pgbench, ${ceiling.seconds} s × ${ceiling.runs} runs, median [min–max])`);
    p();
    table(
        ["script", "clients", "per second", "latency ms (avg)"],
        ceiling.results.map((r) => [
            r.script,
            r.clients,
            `${f(r.per_second.median)} [${f(r.per_second.min)}–${f(r.per_second.max)}]`,
            f(r.latency_ms_avg, 2),
        ]),
    );
}

// Before/after (all.sh --baseline): the same drain, alternating binaries, round by round.
{
    const rounds = [];
    for (let r = 1; ; r++) {
        const before = summaryOf(`before-after-${r}-before.out`);
        const after = summaryOf(`before-after-${r}-after.out`);
        if (!before || !after) break;
        rounds.push([before, after]);
    }
    if (rounds.length > 0) {
        const median = (xs) => {
            const s = [...xs].sort((a, b) => a - b);
            const m = Math.floor(s.length / 2);
            return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
        };
        const rate = (row) => row.jobs_per_second;
        p(`### Before / after (${rounds.length} rounds, each: baseline drain then this build's)`);
        p();
        table(
            ["round", "baseline jobs/s", "this build jobs/s", "after ÷ before", "fence p50 ms before → after", "actions per claim before → after"],
            rounds.map(([b, a], i) => [
                i + 1,
                f(rate(b)),
                f(rate(a)),
                f(rate(a) / rate(b), 2),
                `${f(b.fence_ms?.p50, 2)} → ${f(a.fence_ms?.p50, 2)}`,
                `${f(b.actions_per_claim, 1)} → ${f(a.actions_per_claim, 1)}`,
            ]),
        );
        p(`Median after ÷ before: **${f(median(rounds.map(([b, a]) => rate(a) / rate(b))), 2)}**`);
        p();
    }
}

// compare.sh.
for (const [name, title] of [
    ["compare-w10.out", "workers 10, Graphile defaults"],
    ["compare-w32.out", "workers 32, Graphile defaults"],
    ["compare-w10-graphile-batched.out", "workers 10, Graphile batched (local queue 10, complete batch 1 ms)"],
    // bench/all.sh since 2026-12-05: the hot-path issue's three comparisons.
    ["compare-w24-perf.out", "workers 24, Graphile at its performance page's configuration (local queue 500, complete batch delay 0)"],
    ["compare-w10-defaults.out", "workers 10, Graphile defaults"],
    ["compare-w24-lanes1000.out", "workers 24, 1,000 lanes against Graphile's 1,000 queues at its performance page's configuration"],
]) {
    const c = last(name);
    if (!c) continue;
    p(`### wharf vs Graphile Worker 0.17.3: ${title} (n=${c.n}, ${c.rounds} rounds A-B)`);
    p();
    // compare.sh --out keeps each round's wharf run, with the bench adapter's count of lane
    // overlaps and out-of-order starts (each fails its run; the count is here for the record).
    const wharfRuns = lines(name.replace(/\.out$/, ".jsonl")).filter((l) => l.command === "outbox" && !l.summary);
    if (wharfRuns.length) {
        const violations = wharfRuns.map((r) => r.lane_violations ?? "–");
        p(`Lane violations in wharf's rounds: ${violations.join(" / ")}.`);
        p();
    }
    const rows = c.wharf_jobs_per_second.map((w, i) => [
        i + 1,
        f(w),
        f(c.graphile_jobs_per_second[i]),
        f(c.ratios_wharf_graphile[i], 2),
        c.ceiling_jobs_per_second.length ? f(c.ceiling_jobs_per_second[i]) : "–",
        c.ratios_wharf_ceiling.length ? f(c.ratios_wharf_ceiling[i], 2) : "–",
    ]);
    rows.push([
        "**median**",
        f(c.median_wharf_jobs_per_second),
        f(c.median_graphile_jobs_per_second),
        `**${f(c.median_ratio_wharf_graphile, 2)}**`,
        f(c.median_ceiling_jobs_per_second),
        `**${f(c.median_ratio_wharf_ceiling, 2)}**`,
    ]);
    table(["round", "wharf jobs/s", "Graphile jobs/s", "wharf/Graphile", `ceiling jobs/s (${c.ceiling_script || "none"})`, "wharf/ceiling"], rows);
}

// Outbox runs.
for (const [name, title] of [
    ["outbox.out", "wharf bench outbox (wake-ups on)"],
    ["outbox-notify-off.out", "wharf bench outbox --notify off"],
    ["outbox-executors-1.out", "wharf bench outbox --executors 1"],
    ["outbox-executors-2.out", "wharf bench outbox --executors 2 (two pools, the same total concurrency)"],
]) {
    const runs = lines(name).filter((l) => !l.summary);
    const s = summaryOf(name);
    if (!s) continue;
    p(`### ${title}: n=${s.n}, workers=${s.workers}, claim batch ${s.claim_batch}, completion batch ${s.completion_batch}`);
    p();
    const header = ["run", "enqueue/s", "drain jobs/s", "claim p50/p99 ms", "actions/claim", "fence p50/p99 ms", "completion p50/p99 ms"];
    const ceilNames = (s.ceiling || []).map((c) => (c.script === "claim_fence_complete_batch" ? "batched" : "single"));
    for (const c of ceilNames) header.push(`${c} ceiling jobs/s`, `× ${c}`);
    const rows = runs.map((r) => {
        const row = [
            r.run,
            f(r.enqueue_per_second),
            f(r.jobs_per_second),
            `${f(r.claim_ms.p50, 2)} / ${f(r.claim_ms.p99, 2)}`,
            f(r.actions_per_claim, 1),
            `${f(r.fence_ms.p50, 2)} / ${f(r.fence_ms.p99, 2)}`,
            `${f(r.completion_ms.p50, 2)} / ${f(r.completion_ms.p99, 2)}`,
        ];
        for (const c of r.ceiling || []) row.push(f(c.jobs_per_second), f(c.ratio, 3));
        return row;
    });
    const med = [
        "**median**",
        f(s.enqueue_per_second),
        f(s.jobs_per_second),
        `${f(s.claim_ms.p50, 2)} / ${f(s.claim_ms.p99, 2)}`,
        f(s.actions_per_claim, 1),
        `${f(s.fence_ms.p50, 2)} / ${f(s.fence_ms.p99, 2)}`,
        `${f(s.completion_ms.p50, 2)} / ${f(s.completion_ms.p99, 2)}`,
    ];
    for (const c of s.ceiling || []) med.push(f(c.jobs_per_second.median), `**${f(c.ratio.median, 3)}**`);
    rows.push(med);
    table(header, rows);
}

// Backlogs.
for (const [name, title] of [
    ["backlog.out", "one lane per row"],
    ["backlog-lanes.out", "100 000 lanes"],
]) {
    const s = summaryOf(name);
    if (!s) continue;
    p(`### Claim cost against backlog, ${title} (due backlog, n=${s.n} drained off its front, ${s.runs / s.backlogs.length} runs per size, medians)`);
    p();
    const header = ["backlog", "drain jobs/s", "claim p50 / p99 ms", "claim p50 ÷ first", "actions/claim", "RSS before drain MiB", "RSS growth in drain MiB", "table MiB"];
    const hasCeiling = s.backlogs.some((b) => (b.ceiling || []).length);
    if (hasCeiling) header.push("ceiling jobs/s at same backlog", "wharf/ceiling");
    table(
        header,
        s.backlogs.map((b) => {
            const row = [
                b.backlog.toLocaleString("en"),
                f(b.jobs_per_second),
                `${f(b.claim_ms.p50, 2)} / ${f(b.claim_ms.p99, 2)}`,
                `**${f(b.claim_p50_ratio, 2)}**`,
                f(b.actions_per_claim, 1),
                f(b.rss_before_mib, 1),
                f(b.rss_growth_mib, 1),
                f(b.table_mib),
            ];
            if (hasCeiling) {
                const c = (b.ceiling || [])[0];
                row.push(c ? f(c.jobs_per_second.median) : "–", c ? f(c.ratio.median, 2) : "–");
            }
            return row;
        }),
    );
}

// Latency.
for (const name of ["latency-200.out", "latency-500.out", "latency-1500.out", "latency-2000.out"]) {
    const s = summaryOf(name);
    if (!s) continue;
    const runs = lines(name).filter((l) => !l.summary);
    const alternate = s.by_notify.length > 1 ? "runs alternate wake-ups on/off" : `wake-ups ${s.by_notify[0]?.notify ? "on" : "off"}`;
    p(`### Enqueue→start latency at ${s.rate} actions/s offered (${s.seconds} s measured per run, ${alternate}, ms)`);
    p();
    const row = (label, b) => [
        label,
        f(b.achieved_per_second),
        f(b.lag_ms.p99, 1),
        f(b.start_ms.p50, 2),
        f(b.start_ms.p90, 1),
        f(b.start_ms.p99, 1),
        f(b.start_ms.max, 1),
        `${f(b.commit_ms.p50, 2)} / ${f(b.commit_ms.p99, 2)}`,
        f(b.ratio_start_commit_p50, 2),
        b.claim_ms ? `${f(b.claim_ms.p50, 2)} / ${f(b.claim_ms.p99, 2)}` : "–",
    ];
    const rows = runs.map((r) => [...row(`${r.notify ? "on" : "off"}, run ${r.run}`, r), "", ""]);
    for (const b of s.by_notify) {
        const r = row(`**${b.notify ? "on" : "off"}, median**`, b);
        // The goal is every one of the runs (no collapse), not the median run.
        const n = runs.filter((x) => x.notify === b.notify).length;
        const verdict = (met, within) => `${met ? "met" : "**not met**"}${within === undefined ? "" : `, ${within} of ${n} runs`}`;
        r.push(verdict(b.goal_p50_met, b.runs_p50_met), verdict(b.goal_p99_met, b.runs_p99_met));
        rows.push(r);
    }
    table(
        ["wake-ups", "achieved/s", "generator lag p99", "start p50", "p90", "p99", "max", "enqueue commit p50 / p99 (baseline)", "start p50 ÷ commit p50", "claim p50 / p99", "p50 ≤ 5", "p99 ≤ 50"],
        rows,
    );
}

// Inbox: the inbox-speed issue's shapes (inbox-<shape>[-before].out, all.sh since 2026-12-05), or
// the one mixed run of earlier sittings (inbox.out).
const inboxNames = existsSync(join(dir, "inbox.out"))
    ? ["inbox.out"]
    : readdirSync(dir).filter((n) => n.startsWith("inbox-") && n.endsWith(".out")).sort();
const inboxRuns = inboxNames.map((n) => [n.replace(/\.out$/, ""), summaryOf(n)]).filter(([, s]) => s);
if (inboxRuns.length) {
    p("### Inbox: the inbox-speed issue's shapes, each against its same-run ceiling");
    p();
    const rows = [];
    for (const [name, s] of inboxRuns) {
        for (const b of s.by_batch) {
            rows.push([
                name,
                `${s.streams} / ${s.connections} / ${b.batch}`,
                s.runs,
                `${f(b.envelopes_per_second.median)} [${f(b.envelopes_per_second.min)}–${f(b.envelopes_per_second.max)}]`,
                `${f(b.request_ms.p50, 2)} / ${f(b.request_ms.p99, 2)}`,
                b.batch === 1 ? f(s.ratio_single_insert, 2) : f(s.ratio_batch_cpu_floor, 2),
                f(b.rss_growth_mib, 1),
                (s.goals ?? []).map((g) => `${g.goal}: ${g.met ? "met" : "**not met**"} (${g.measured})`).join("; ") || "–",
            ]);
        }
    }
    table(
        ["step", "streams / connections / envelopes a request", "runs", "envelopes/s median [min–max]", "request p50 / p99 ms", "÷ ceiling (singles: insert commits; batches: cores × verifies)", "RSS growth MiB", "goals judged by the run"],
        rows,
    );
}

console.log(out.join("\n"));
