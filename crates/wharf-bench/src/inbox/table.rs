//! What `wharf bench inbox` reports: the summary over runs, the inbox-speed issue's goals that a
//! run's shape can judge, and the human tables. Owns the shape of the output; must not measure
//! anything itself.

use serde_json::{Value, json};

use super::InboxArgs;
use crate::report::{self, Machine};
use crate::stats::{Spread, median};

pub(super) fn summary(args: &InboxArgs, rows: &[Value], machine: &Machine) -> Value {
    let per_batch: Vec<Value> = args
        .batch
        .iter()
        .map(|&b| {
            let of = |path: &[&str]| -> Vec<f64> {
                rows.iter()
                    .filter_map(|r| {
                        let item = r["results"]
                            .as_array()?
                            .iter()
                            .find(|x| x["batch"].as_u64() == Some(b))?;
                        path.iter().try_fold(item, |v, k| v.get(k))?.as_f64()
                    })
                    .collect()
            };
            json!({
                "batch": b, "endpoint": if b == 1 { "single" } else { "batch" },
                "envelopes_per_second": Spread::of(&of(&["envelopes_per_second"])),
                "request_ms": {
                    "p50": median(&of(&["request_ms", "p50"])),
                    "p99": median(&of(&["request_ms", "p99"])),
                },
                "sign_per_second": median(&of(&["sign_per_second"])),
                "rss_growth_mib": median(&of(&["rss_mib", "growth"])),
            })
        })
        .collect();
    let top = |path: &[&str]| -> Option<f64> {
        median(
            &rows
                .iter()
                .filter_map(|r| path.iter().try_fold(r, |v, k| v.get(k))?.as_f64())
                .collect::<Vec<_>>(),
        )
    };
    let best = per_batch
        .iter()
        .filter(|b| b["batch"].as_u64() > Some(1))
        .filter_map(|b| b["envelopes_per_second"]["median"].as_f64())
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let mut summary = json!({
        "system": "wharf", "command": "inbox", "summary": true, "runs": rows.len(),
        "version": env!("CARGO_PKG_VERSION"), "transport": args.transport.name(),
        "envelopes": args.envelopes, "streams": args.streams, "connections": args.connections,
        "by_batch": per_batch,
        "envelopes_per_second": best,
        "goal_5k_met": best.map(|b| b >= 5_000.0),
        "ratio_batch_single": top(&["ratio_batch_single"]),
        "jetstream_envelopes_per_second": top(&["jetstream", "envelopes_per_second"]),
        "ratio_jetstream_batch": top(&["ratio_jetstream_batch"]),
        "ratio_single_insert": top(&["ratio_single_insert"]),
        "ratio_batch_cpu_floor": top(&["ratio_batch_cpu_floor"]),
        "baseline": {
            "insert_commits_per_second": top(&["baseline", "insert_commits_per_second"]),
            "healthz_per_second": top(&["baseline", "healthz_per_second"]),
            "verify_per_second_one_core": top(&["baseline", "verify_per_second_one_core"]),
        },
        "machine": machine,
    });
    summary["goals"] = json!(goals(args.streams, args.connections, &summary));
    summary
}

/// One goal of the inbox-speed issue that this run's shape can judge.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
struct Goal {
    goal: &'static str,
    /// The figure judged, as the table prints it.
    measured: String,
    met: bool,
}

/// The goals a run of this shape can judge, from its summary's medians:
/// - single envelopes from 64 producers on 64 streams (`--streams 64 --connections 64
///   --batch 1`): ≥ 5,000 envelopes/s, ≥ 0.4× the same run's insert-commit ceiling, request
///   p99 ≤ 50 ms;
/// - batches (any `--batch` above 1, the best one): ≥ 20,000 envelopes/s and ≥ 0.5× of
///   (cores × verifications per second on one core);
/// - one producer on one stream sending singles (`--streams 1 --connections 1 --batch 1`):
///   ≥ 1,000 envelopes/s.
///
/// Memory independent of streams compares two runs (1,000 and 100,000 streams) and is read
/// from their `RSS growth MiB`, not judged here.
fn goals(streams: u64, connections: u32, summary: &Value) -> Vec<Goal> {
    let num = |v: &Value, path: &[&str]| path.iter().try_fold(v, |v, k| v.get(k))?.as_f64();
    let single = summary["by_batch"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|b| b["batch"].as_u64() == Some(1));
    let mut out = Vec::new();
    let mut judge =
        |goal: &'static str, value: Option<f64>, digits: usize, met: fn(f64) -> bool| {
            if let Some(v) = value.filter(|v| v.is_finite()) {
                out.push(Goal {
                    goal,
                    measured: format!("{v:.digits$}"),
                    met: met(v),
                });
            }
        };
    if let Some(single) = single {
        if streams == 64 && connections == 64 {
            judge(
                "single, 64 producers on 64 streams ≥ 5,000/s",
                num(single, &["envelopes_per_second", "median"]),
                0,
                |v| v >= 5_000.0,
            );
            judge(
                "single ≥ 0.4× insert-commit ceiling",
                num(summary, &["ratio_single_insert"]),
                2,
                |v| v >= 0.4,
            );
            judge(
                "single request p99 ≤ 50 ms",
                num(single, &["request_ms", "p99"]),
                2,
                |v| v <= 50.0,
            );
        }
        if streams == 1 && connections == 1 {
            judge(
                "one stream, one producer ≥ 1,000/s",
                num(single, &["envelopes_per_second", "median"]),
                0,
                |v| v >= 1_000.0,
            );
        }
    }
    judge(
        "batch ≥ 20,000/s",
        num(summary, &["envelopes_per_second"]),
        0,
        |v| v >= 20_000.0,
    );
    judge(
        "batch ≥ 0.5× cores × verifies/s",
        num(summary, &["ratio_batch_cpu_floor"]),
        2,
        |v| v >= 0.5,
    );
    out
}

pub(super) fn print(args: &InboxArgs, rows: &[Value], summary: &Value, machine: &Machine) {
    println!(
        "wharf bench inbox  envelopes={} streams={} connections={} transport={}  ({} runs)",
        args.envelopes,
        args.streams,
        args.connections,
        args.transport.name(),
        args.runs
    );
    println!("{}", machine.line());
    let f = |v: &Value, path: &[&str], d: usize| {
        report::cell(
            path.iter()
                .try_fold(v, |v, k| v.get(k))
                .and_then(Value::as_f64),
            d,
        )
    };
    let mut table = Vec::new();
    for r in rows {
        for x in r["results"].as_array().into_iter().flatten() {
            table.push(vec![
                r["run"].to_string(),
                x["batch"].to_string(),
                f(x, &["envelopes_per_second"], 0),
                format!(
                    "{}/{}",
                    f(x, &["request_ms", "p50"], 2),
                    f(x, &["request_ms", "p99"], 2)
                ),
                f(x, &["sign_per_second"], 0),
                f(x, &["rss_mib", "growth"], 1),
                f(r, &["baseline", "insert_commits_per_second"], 0),
                f(r, &["baseline", "healthz_per_second"], 0),
                f(r, &["baseline", "verify_per_second_one_core"], 0),
            ]);
        }
    }
    for b in summary["by_batch"].as_array().into_iter().flatten() {
        table.push(vec![
            "median".into(),
            b["batch"].to_string(),
            f(b, &["envelopes_per_second", "median"], 0),
            format!(
                "{}/{}",
                f(b, &["request_ms", "p50"], 2),
                f(b, &["request_ms", "p99"], 2)
            ),
            f(b, &["sign_per_second"], 0),
            f(b, &["rss_growth_mib"], 1),
            f(summary, &["baseline", "insert_commits_per_second"], 0),
            f(summary, &["baseline", "healthz_per_second"], 0),
            f(summary, &["baseline", "verify_per_second_one_core"], 0),
        ]);
    }
    report::table(
        &[
            "run",
            "batch",
            "envelopes/s",
            "request p50/p99 ms",
            "signed/s",
            "RSS growth MiB",
            "insert commits/s",
            "healthz/s",
            "verifies/s/core",
        ],
        &table,
    );
    println!(
        "batch/single {}  single/insert {}  batch/(cores × verify) {}  batch ≥ 5000/s: {}",
        f(summary, &["ratio_batch_single"], 2),
        f(summary, &["ratio_single_insert"], 2),
        f(summary, &["ratio_batch_cpu_floor"], 2),
        match summary["goal_5k_met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "-",
        }
    );
    for g in summary["goals"].as_array().into_iter().flatten() {
        println!(
            "goal: {}: {} ({})",
            g["goal"].as_str().unwrap_or_default(),
            if g["met"].as_bool() == Some(true) {
                "met"
            } else {
                "NOT met"
            },
            g["measured"].as_str().unwrap_or_default(),
        );
    }
    if args.jetstream {
        println!(
            "jetstream consumer {}/s (median of {} runs; in flight {}, fetch {})  jetstream/batch {}",
            f(summary, &["jetstream_envelopes_per_second"], 0),
            rows.len(),
            wharf_nats::IN_FLIGHT_MAX_DEFAULT,
            wharf_nats::FETCH_BATCH_MAX_DEFAULT,
            f(summary, &["ratio_jetstream_batch"], 2),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(
        single: Option<(f64, f64)>,
        batch: Option<f64>,
        insert: f64,
        floor: f64,
    ) -> Value {
        let mut by_batch = Vec::new();
        if let Some((rate, p99)) = single {
            by_batch.push(json!({
                "batch": 1, "envelopes_per_second": { "median": rate },
                "request_ms": { "p99": p99 },
            }));
        }
        if let Some(rate) = batch {
            by_batch.push(json!({ "batch": 100, "envelopes_per_second": { "median": rate } }));
        }
        json!({
            "by_batch": by_batch,
            "envelopes_per_second": batch,
            "ratio_single_insert": single.map(|(s, _)| s / insert),
            "ratio_batch_cpu_floor": batch.map(|b| b / floor),
        })
    }

    fn verdicts(goals: &[Goal]) -> Vec<(&'static str, bool)> {
        goals.iter().map(|g| (g.goal, g.met)).collect()
    }

    #[test]
    fn singles_at_64_by_64_are_judged_at_their_edges() {
        // 5,000/s and p99 50 ms are met exactly at the bound; 0.4 of 12,500 is 5,000.
        let at = goals(
            64,
            64,
            &summary_of(Some((5_000.0, 50.0)), None, 12_500.0, 1.0),
        );
        assert_eq!(
            verdicts(&at),
            [
                ("single, 64 producers on 64 streams ≥ 5,000/s", true),
                ("single ≥ 0.4× insert-commit ceiling", true),
                ("single request p99 ≤ 50 ms", true),
            ]
        );
        let below = goals(
            64,
            64,
            &summary_of(Some((4_999.0, 50.01)), None, 12_500.0, 1.0),
        );
        assert!(below.iter().all(|g| !g.met), "{below:?}");
        assert_eq!(below[0].measured, "4999");
        assert_eq!(below[2].measured, "50.01");
    }

    #[test]
    fn a_run_judges_only_the_goals_of_its_shape() {
        // Singles on 8 streams are no goal's shape; the batch is judged whatever the streams.
        let mixed = goals(
            8,
            8,
            &summary_of(Some((9_000.0, 5.0)), Some(19_999.0), 1.0, 40_000.0),
        );
        assert_eq!(
            verdicts(&mixed),
            [
                ("batch ≥ 20,000/s", false),
                ("batch ≥ 0.5× cores × verifies/s", false)
            ]
        );
        let batch = goals(8, 8, &summary_of(None, Some(20_000.0), 1.0, 40_000.0));
        assert_eq!(
            verdicts(&batch),
            [
                ("batch ≥ 20,000/s", true),
                ("batch ≥ 0.5× cores × verifies/s", true)
            ]
        );
        let one = goals(1, 1, &summary_of(Some((999.0, 3.0)), None, 1.0, 1.0));
        assert_eq!(
            verdicts(&one),
            [("one stream, one producer ≥ 1,000/s", false)]
        );
        assert!(goals(64, 64, &json!({})).is_empty());
    }
}
