//! The in-doubt page: UNCERTAIN actions, the ones that need a person, with what each may have
//! done and since when.
//!
//! Must not know: SQL.

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use wharf::console as read;

use super::{PAGE_ROWS, action_link, bad, parse_time_cursor, render};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt, opt_time, query, table, time};
use crate::console::{Console, Failure};
use crate::error::CorrelationId;

/// What an UNCERTAIN action's stop reason says may have happened.
fn what_may_have_happened(stop_reason: &str) -> &'static str {
    match stop_reason {
        "UNCERTAIN_PROVIDER" => {
            "the provider may or may not hold the effect: its answer was lost after the request reached it"
        }
        "LEASE_LOST_AFTER_WRITE" => {
            "a worker lost its lease after its provider call started: the effect may exist, and nothing sends it again"
        }
        _ => "the effect may exist",
    }
}

/// `GET /in-doubt?before=<ended_at>,<id>` — UNCERTAIN actions, the ones that need a person.
pub(in crate::console) async fn in_doubt(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let before = p
        .get("before")
        .map(parse_time_cursor)
        .transpose()
        .map_err(bad(&c, &correlation))?;
    let mut tx = c.read(&correlation).await?;
    let window = read::in_doubt(&mut *tx, before, PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let now = Utc::now();
    let rows: Vec<Vec<String>> = window
        .items
        .iter()
        .map(|a| {
            vec![
                action_link(&c, a.id),
                esc(&a.kind),
                opt(&a.tenant_id),
                esc(&a.lane_key),
                format!("<span class=\"mono\">{}</span>", esc(&a.idempotency_key)),
                format!(
                    "{}<br><span class=\"hint\">{}</span>",
                    esc(&a.stop_reason),
                    esc(what_may_have_happened(&a.stop_reason))
                ),
                opt(&a.error_code),
                format!(
                    "{} (for {})",
                    time(&a.ended_at),
                    html::age((now - a.ended_at).num_seconds())
                ),
                opt_time(&a.write_started_at),
            ]
        })
        .collect();
    let mut body = format!(
        "<p class=\"hint\">An UNCERTAIN action ended and never runs again: whether its effect happened is for a person to find out. {} among the {} most recent ends read.</p>{}",
        window.items.len(),
        window.scanned,
        table(
            &[
                "id",
                "kind",
                "tenant",
                "lane",
                "idempotency key",
                "what may have happened",
                "error code",
                "ended",
                "provider call started"
            ],
            &rows
        )
    );
    let next = if window.items.len() as i64 == PAGE_ROWS {
        window.items.last().map(|a| (a.ended_at, a.id))
    } else if window.scanned == read::SCAN_ROWS_MAX {
        window.scanned_low
    } else {
        None
    };
    if let Some((at, id)) = next {
        let cursor = format!("{},{id}", at.to_rfc3339());
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!("{}/in-doubt{}", c.base, query(&[("before", &cursor)])),
                "Older →"
            )
        ));
    }
    Ok(render(&c, &signed, "In doubt", true, &body))
}
