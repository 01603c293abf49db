//! The backlog sweep of `wharf bench outbox --backlog B1,B2,…`: for each backlog size, top an
//! unstarted backlog up to it (due now or a year ahead, over `--backlog-lanes` lanes), drain N
//! off its front, `--runs` times, and report claim cost against the first size.
//!
//! Owns: the top-ups (their keys and tags) and the sweep's rows. Must not know: how a drain is
//! run or checked, or how rows are printed (the parent module and `table.rs` have those).

use super::*;

/// The backlog sweep: for each backlog size, top the backlog up, drain N, `--runs` times.
pub(super) async fn sweep(bench: &Bench, machine: &mut Machine) -> anyhow::Result<()> {
    let args = &bench.args;
    let scripts = scripts(args);
    let mut rows = Vec::new();
    let mut per_backlog: Vec<(u64, Vec<Value>)> = Vec::new();
    clean(&bench.pool, args.shared_database, args.keep_backlog).await?;
    for &backlog in &args.backlog {
        let mut these = Vec::new();
        for run in 1..=args.runs {
            clean(&bench.pool, args.shared_database, true).await?;
            // A due backlog is the queue: N are drained off its front, so it holds B + N.
            let target = if args.backlog_not_due {
                backlog
            } else {
                backlog + args.n
            };
            let tag = format!("{}:{backlog}:{run}", bench.tag);
            top_up(bench, target, &tag).await?;
            let enqueued = if args.backlog_not_due {
                Some(enqueue_measured(bench, tag, 0).await?)
            } else {
                None
            };
            analyze(&bench.pool).await?;
            crate::checkpoint(&bench.pool).await;
            let drained = drain(bench, args.n).await?;
            let checked =
                check(&bench.pool, &bench.seen, drained.started_db, drained.ended).await?;
            ensure!(
                checked.ended >= args.n,
                "backlog {backlog} run {run}: {} actions ended, {} wanted",
                checked.ended,
                args.n
            );
            let (rss, rss_peak) = report::rss_mib();
            let ceilings = ceilings(bench, &scripts, Some(backlog)).await?;
            let mut row = row_json(
                bench,
                run,
                backlog,
                enqueued,
                &drained,
                &checked,
                &ceilings,
                (rss, rss_peak),
            );
            row["table_mib"] = json!(table_mib(&bench.pool).await?);
            if args.json {
                report::json_line(&row)?;
            }
            these.push(row.clone());
            rows.push(row);
        }
        per_backlog.push((backlog, these));
    }
    if !args.keep_backlog {
        clean(&bench.pool, args.shared_database, false).await?;
    }
    machine.end();
    let first_p50 = per_backlog
        .first()
        .and_then(|(_, r)| median(&field(r, &["claim_ms", "p50"])));
    let backlogs: Vec<Value> = per_backlog
        .iter()
        .map(|(backlog, r)| {
            let claim_p50 = median(&field(r, &["claim_ms", "p50"]));
            json!({
                "backlog": backlog,
                "jobs_per_second": median(&field(r, &["jobs_per_second"])),
                "claim_ms": {
                    "p50": claim_p50,
                    "p99": median(&field(r, &["claim_ms", "p99"])),
                },
                "claim_p50_ratio": claim_p50.zip(first_p50).and_then(|(a, b)| ratio(a, b)),
                "actions_per_claim": median(&field(r, &["actions_per_claim"])),
                "rss_before_mib": median(&field(r, &["rss_before_mib"])),
                "rss_peak_mib": median(&field(r, &["rss_peak_mib"])),
                "rss_growth_mib": median(&field(r, &["rss_growth_mib"])),
                "table_mib": median(&field(r, &["table_mib"])),
                "ceiling": ceiling_summary(r),
            })
        })
        .collect();
    let mut summary = summary_json(bench, &rows, machine);
    summary["backlogs"] = json!(backlogs);
    if args.json {
        report::json_line(&summary)?;
    } else {
        print_sweep(bench, &rows, &backlogs, machine);
    }
    Ok(())
}

/// Tops the unstarted backlog (keys `bench:backlog:…`) up to `target` rows, due now or a year
/// ahead, spread over `--backlog-lanes` lanes. `tag` names this top-up in the keys, and must
/// not repeat within the database: the rows an earlier top-up left unstarted keep their keys.
/// (A tag made of the count found collided whenever two drains left the same count: the third
/// run of a size then found its keys taken by the second's tail and failed.)
async fn top_up(bench: &Bench, target: u64, tag: &str) -> anyhow::Result<()> {
    let args = &bench.args;
    let have: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM wharf.action_live
          WHERE kind = $1 AND state = 'ADMITTED' AND idempotency_key LIKE 'bench:backlog:%'",
    )
    .bind(KIND)
    .fetch_one(&bench.pool)
    .await?;
    let have = have.max(0) as u64;
    if have >= target {
        return Ok(());
    }
    let add = target - have;
    eprintln!(
        "bench: adding {add} backlog rows ({} → {target}, about {} MiB with indexes)",
        have,
        add * ROW_BYTES_ESTIMATE / (1024 * 1024)
    );
    let tag = tag.to_owned();
    let lanes = args.backlog_lanes;
    let run_at = args
        .backlog_not_due
        .then(|| Utc::now() + chrono::Duration::days(365));
    let make = move |i: u64| {
        let position = have + i;
        let lane = if lanes == 0 {
            format!("bench:b:{tag}:{i}")
        } else {
            format!("bench:bl:{}", position % lanes)
        };
        let mut req = ActionRequest::new(KIND, lane, format!("bench:backlog:{tag}:{i}"), json!({}));
        req.run_at = run_at;
        req
    };
    // No wake-up hints for the prefill: nobody listens yet, and it saves a NOTIFY per batch.
    let prefill = registry(bench.adapter.clone(), false)?;
    let bar = report::counter_bar(add, "prefill");
    enqueue(
        &bench.pool,
        &prefill,
        add,
        PREFILL_BATCH,
        PREFILL_CONNECTIONS,
        Arc::new(make),
        &bar,
        &bench.deadline,
    )
    .await?;
    bar.finish_and_clear();
    sqlx::query("VACUUM ANALYZE wharf.action_live, wharf.action_key")
        .execute(&bench.pool)
        .await?;
    Ok(())
}

/// Runs the executors until `target` more `bench.noop` actions have ended (as the executor's
/// own `wharf_action_ended_total` counts them, i.e. after their completion committed), then
/// shuts them down gracefully.
async fn table_mib(pool: &PgPool) -> anyhow::Result<f64> {
    let bytes: i64 = sqlx::query_scalar(
        "SELECT pg_total_relation_size('wharf.action_live')
                + pg_total_relation_size('wharf.action_ended')
                + pg_total_relation_size('wharf.action_key')",
    )
    .fetch_one(pool)
    .await?;
    Ok(bytes as f64 / (1024.0 * 1024.0))
}
