//! What `wharf bench outbox` reports: one JSON row per run, the summary over runs, and the
//! human tables. Owns the shape of the output; must not measure anything itself.

use serde_json::{Value, json};

use super::{Bench, Checked, Drained, Enqueued};
use crate::ceiling::Measured;
use crate::report::{self, Machine};
use crate::stats::{Distribution, Spread, median, ratio};

#[allow(clippy::too_many_arguments)]
pub(super) fn row_json(
    bench: &Bench,
    run: u32,
    backlog: u64,
    enqueued: Option<Enqueued>,
    drained: &Drained,
    checked: &Checked,
    ceilings: &[Measured],
    (rss, rss_peak): (Option<f64>, Option<f64>),
) -> Value {
    let args = &bench.args;
    let jobs_per_second = drained.ended as f64 / drained.seconds;
    let claims = drained.claim_ms.len() as u64;
    let ceiling: Vec<Value> = ceilings
        .iter()
        .map(|m| {
            json!({
                "script": m.script, "clients": m.clients, "rows": m.rows, "batch": m.batch,
                "jobs_per_second": m.rate(), "latency_ms_avg": m.latency_ms_avg,
                "ratio": ratio(jobs_per_second, m.rate()),
            })
        })
        .collect();
    json!({
        "system": "wharf", "command": "outbox", "version": env!("CARGO_PKG_VERSION"), "run": run,
        "n": args.n, "workers": args.workers, "executors": args.executors, "lanes": args.lanes,
        "enqueue_batch": args.enqueue_batch, "enqueue_connections": args.enqueue_connections,
        "claim_batch": args.claim_batch, "claim_scan": args.claim_scan,
        "claim_ahead": args.claim_ahead,
        "completion_batch": args.completion_batch, "notify": args.notify.on(),
        "claims_in_flight": args.claims_in_flight, "fence_with_claim": args.fence_with_claim.on(),
        "vacuum_live": args.vacuum_live.on(),
        "lane_violations": bench.adapter.lane_violations(),
        "backlog": backlog, "backlog_lanes": args.backlog_lanes,
        "backlog_due": !args.backlog_not_due,
        "enqueue_seconds": enqueued.map(|e| e.seconds),
        "enqueue_per_second": enqueued.map(|e| e.count as f64 / e.seconds),
        "drain_seconds": drained.seconds,
        "drained": drained.ended,
        "jobs_per_second": jobs_per_second,
        "claim_ms": Distribution::of(drained.claim_ms.clone()),
        "claims": claims,
        "actions_per_claim": ratio(drained.ended as f64, claims as f64),
        "fence_ms": Distribution::of(drained.fence_ms.clone()),
        "execution_ms": Distribution::of(drained.execution_ms.clone()),
        "completion_ms": {"p50": checked.completion_p50_ms, "p99": checked.completion_p99_ms},
        "rss_before_mib": drained.rss_before_mib, "rss_mib": rss, "rss_peak_mib": rss_peak,
        "rss_growth_mib": rss_peak.zip(drained.rss_before_mib).map(|(p, b)| p - b),
        "ceiling": ceiling,
        "ratio_ceiling": ceilings.first().and_then(|m| ratio(jobs_per_second, m.rate())),
    })
}

/// The numbers at `path` in each row.
pub(super) fn field(rows: &[Value], path: &[&str]) -> Vec<f64> {
    rows.iter()
        .filter_map(|r| path.iter().try_fold(r, |v, k| v.get(k))?.as_f64())
        .collect()
}

/// Per ceiling script: the median ceiling rate and the median of the per-run ratios.
pub(super) fn ceiling_summary(rows: &[Value]) -> Vec<Value> {
    let Some(first) = rows.first() else {
        return Vec::new();
    };
    let count = first["ceiling"].as_array().map_or(0, Vec::len);
    (0..count)
        .map(|i| {
            let at = |key: &str| -> Vec<f64> {
                rows.iter()
                    .filter_map(|r| r["ceiling"].get(i)?.get(key)?.as_f64())
                    .collect()
            };
            json!({
                "script": first["ceiling"][i]["script"],
                "batch": first["ceiling"][i]["batch"],
                "jobs_per_second": Spread::of(&at("jobs_per_second")),
                "ratio": Spread::of(&at("ratio")),
            })
        })
        .collect()
}

pub(super) fn summary_json(bench: &Bench, rows: &[Value], machine: &Machine) -> Value {
    let args = &bench.args;
    let dist = |key: &str| {
        json!({
            "p50": median(&field(rows, &[key, "p50"])),
            "p99": median(&field(rows, &[key, "p99"])),
            "max": median(&field(rows, &[key, "max"])),
        })
    };
    let ceiling = ceiling_summary(rows);
    json!({
        "system": "wharf", "command": "outbox", "summary": true, "runs": rows.len(),
        "version": env!("CARGO_PKG_VERSION"),
        "n": args.n, "workers": args.workers, "executors": args.executors, "lanes": args.lanes,
        "enqueue_batch": args.enqueue_batch, "claim_batch": args.claim_batch,
        "claim_scan": args.claim_scan, "claim_ahead": args.claim_ahead,
        "completion_batch": args.completion_batch,
        "notify": args.notify.on(), "backlog_lanes": args.backlog_lanes,
        "enqueue_per_second": median(&field(rows, &["enqueue_per_second"])),
        "jobs_per_second": median(&field(rows, &["jobs_per_second"])),
        "jobs_per_second_spread": Spread::of(&field(rows, &["jobs_per_second"])),
        "claim_ms": dist("claim_ms"),
        "actions_per_claim": median(&field(rows, &["actions_per_claim"])),
        "fence_ms": dist("fence_ms"),
        "completion_ms": {
            "p50": median(&field(rows, &["completion_ms", "p50"])),
            "p99": median(&field(rows, &["completion_ms", "p99"])),
        },
        "rss_peak_mib": median(&field(rows, &["rss_peak_mib"])),
        "rss_growth_mib": median(&field(rows, &["rss_growth_mib"])),
        "ceiling": ceiling,
        "ratio_ceiling": median(&field(rows, &["ratio_ceiling"])),
        "machine": machine,
    })
}

pub(super) fn get(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

pub(super) fn ceiling_cells(row: &Value, header: &mut Vec<String>, cells: &mut Vec<String>) {
    for c in row["ceiling"].as_array().into_iter().flatten() {
        let name = match c["script"].as_str() {
            Some("claim_fence_complete_batch") => "batch",
            _ => "single",
        };
        header.push(format!("{name} ceiling/s"));
        header.push(format!("×{name}"));
        cells.push(report::cell(c["jobs_per_second"].as_f64(), 0));
        cells.push(report::cell(c["ratio"].as_f64(), 2));
    }
}

pub(super) fn print_plain(bench: &Bench, rows: &[Value], summary: &Value, machine: &Machine) {
    let args = &bench.args;
    println!(
        "wharf bench outbox  n={} workers={} executors={} lanes={} claim_batch={} claim_ahead={} completion_batch={} notify={} vacuum_live={}  ({} runs)",
        args.n,
        args.workers,
        args.executors,
        if args.lanes == 0 {
            "per-action".to_owned()
        } else {
            args.lanes.to_string()
        },
        args.claim_batch,
        args.claim_ahead,
        args.completion_batch,
        if args.notify.on() { "on" } else { "off" },
        if args.vacuum_live.on() { "on" } else { "off" },
        rows.len()
    );
    println!("{}", machine.line());
    let mut header: Vec<String> = [
        "run",
        "enqueue/s",
        "drain jobs/s",
        "claim p50/p99 ms",
        "per claim",
        "fence p50/p99 ms",
        "compl. p50/p99 ms",
        "rss MiB",
    ]
    .map(String::from)
    .to_vec();
    let mut table = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let mut h = Vec::new();
        let mut cells = vec![
            row["run"].to_string(),
            report::cell(get(row, &["enqueue_per_second"]), 0),
            report::cell(get(row, &["jobs_per_second"]), 0),
            report::pair(
                get(row, &["claim_ms", "p50"]),
                get(row, &["claim_ms", "p99"]),
                2,
            ),
            report::cell(get(row, &["actions_per_claim"]), 1),
            report::pair(
                get(row, &["fence_ms", "p50"]),
                get(row, &["fence_ms", "p99"]),
                2,
            ),
            report::pair(
                get(row, &["completion_ms", "p50"]),
                get(row, &["completion_ms", "p99"]),
                2,
            ),
            report::cell(get(row, &["rss_peak_mib"]), 0),
        ];
        ceiling_cells(row, &mut h, &mut cells);
        if i == 0 {
            header.extend(h);
        }
        table.push(cells);
    }
    let mut cells = vec![
        "median".to_owned(),
        report::cell(get(summary, &["enqueue_per_second"]), 0),
        report::cell(get(summary, &["jobs_per_second"]), 0),
        report::pair(
            get(summary, &["claim_ms", "p50"]),
            get(summary, &["claim_ms", "p99"]),
            2,
        ),
        report::cell(get(summary, &["actions_per_claim"]), 1),
        report::pair(
            get(summary, &["fence_ms", "p50"]),
            get(summary, &["fence_ms", "p99"]),
            2,
        ),
        report::pair(
            get(summary, &["completion_ms", "p50"]),
            get(summary, &["completion_ms", "p99"]),
            2,
        ),
        report::cell(get(summary, &["rss_peak_mib"]), 0),
    ];
    for c in summary["ceiling"].as_array().into_iter().flatten() {
        cells.push(report::cell(get(c, &["jobs_per_second", "median"]), 0));
        cells.push(report::cell(get(c, &["ratio", "median"]), 2));
    }
    table.push(cells);
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    report::table(&header, &table);
}

pub(super) fn print_sweep(bench: &Bench, rows: &[Value], backlogs: &[Value], machine: &Machine) {
    let args = &bench.args;
    println!(
        "wharf bench outbox --backlog  n={} workers={} backlog_lanes={} backlog {}  ({} runs each)",
        args.n,
        args.workers,
        if args.backlog_lanes == 0 {
            "per-row".to_owned()
        } else {
            args.backlog_lanes.to_string()
        },
        if args.backlog_not_due {
            "not due"
        } else {
            "due"
        },
        args.runs
    );
    println!("{}", machine.line());
    let mut header: Vec<String> = [
        "backlog",
        "run",
        "drain jobs/s",
        "claim p50/p99 ms",
        "per claim",
        "rss before/peak MiB",
        "table MiB",
    ]
    .map(String::from)
    .to_vec();
    let mut table = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let mut h = Vec::new();
        let mut cells = vec![
            row["backlog"].to_string(),
            row["run"].to_string(),
            report::cell(get(row, &["jobs_per_second"]), 0),
            report::pair(
                get(row, &["claim_ms", "p50"]),
                get(row, &["claim_ms", "p99"]),
                2,
            ),
            report::cell(get(row, &["actions_per_claim"]), 1),
            report::pair(
                get(row, &["rss_before_mib"]),
                get(row, &["rss_peak_mib"]),
                0,
            ),
            report::cell(get(row, &["table_mib"]), 0),
        ];
        ceiling_cells(row, &mut h, &mut cells);
        if i == 0 {
            header.extend(h);
        }
        table.push(cells);
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    report::table(&header, &table);
    println!();
    let summary: Vec<Vec<String>> = backlogs
        .iter()
        .map(|b| {
            vec![
                b["backlog"].to_string(),
                report::cell(get(b, &["jobs_per_second"]), 0),
                report::pair(
                    get(b, &["claim_ms", "p50"]),
                    get(b, &["claim_ms", "p99"]),
                    2,
                ),
                report::cell(get(b, &["claim_p50_ratio"]), 2),
                report::cell(get(b, &["rss_growth_mib"]), 1),
            ]
        })
        .collect();
    report::table(
        &[
            "backlog",
            "median jobs/s",
            "claim p50/p99 ms",
            "claim p50 ×first",
            "rss growth MiB",
        ],
        &summary,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_nested_numbers() {
        let rows = vec![
            json!({"a": {"b": 1.5}}),
            json!({"a": {"b": null}}),
            json!({"a": 3}),
        ];
        assert_eq!(field(&rows, &["a", "b"]), vec![1.5]);
        assert_eq!(field(&rows, &["a"]), vec![3.0]);
    }
}
