//! The overview page: actions by state and kind, due depth and oldest-due age per kind, ends
//! per minute over the last hour, recent UNCERTAIN ends, inbox answers by outcome, and the
//! pauses in force with the form that pauses a kind.
//!
//! Must not know: SQL. Every figure comes from `wharf::console::overview` (capped counts over
//! fixed windows) and `wharf::outbox::pauses`.

use std::collections::BTreeMap;

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use wharf::console as read;

use super::{action_link, notice, per_minute, render};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt, query, state, table, time};
use crate::console::{Console, Failure};
use crate::error::{ApiError, CorrelationId};

/// `GET /` — the overview.
pub(in crate::console) async fn overview(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let mut tx = c.read(&correlation).await?;
    let o = read::overview(&mut tx, None)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    let pauses = wharf::outbox::pauses(&mut *tx).await.map_err(|e| match e {
        wharf::outbox::Error::Database(e) => {
            Failure::api(&c, ApiError::not_committed(&e, &correlation))
        }
        other => Failure::api(&c, ApiError::internal(&other, &correlation)),
    })?;
    drop(tx);
    let now = Utc::now();
    let mut body = notice(&p);
    body.push_str(&pauses_section(&c, &pauses));

    // Actions by state and kind: the live states from their indexes, the ended ones of the last
    // hour from the ends index.
    let mut by: BTreeMap<(String, String), i64> = BTreeMap::new();
    for l in &o.live {
        *by.entry((l.state.clone(), l.kind.clone())).or_default() += l.n;
    }
    for e in &o.ended {
        *by.entry((e.state.clone(), e.kind.clone())).or_default() += e.n;
    }
    let rows: Vec<Vec<String>> = by
        .iter()
        .map(|((s, k), n)| {
            let capped = if matches!(s.as_str(), "PROPOSED" | "ADMITTED" | "EXECUTING") {
                o.live_capped
            } else {
                o.ended_capped
            };
            vec![
                state(s),
                esc(k),
                link(
                    &format!("{}/actions{}", c.base, query(&[("state", s), ("kind", k)])),
                    &html::count(*n, capped),
                ),
            ]
        })
        .collect();
    body.push_str("<div class=\"grid\"><section><h2>Actions by state and kind</h2>");
    body.push_str(&table(&["state", "kind", "actions"], &rows));
    body.push_str("<p class=\"hint\">Unstarted and executing: all of them; ended: those of the last hour.</p></section>");

    let due: Vec<Vec<String>> = o
        .due
        .iter()
        .map(|d| {
            vec![
                esc(&d.kind),
                html::count(d.due, o.due_capped),
                html::age((now - d.oldest_run_at).num_seconds()),
            ]
        })
        .collect();
    body.push_str("<section><h2>Due now</h2>");
    body.push_str(&table(&["kind", "due lane heads", "oldest due for"], &due));
    body.push_str("</section></div>");

    // Attempts keep no row of their own: the series counts each action's latest attempt at the
    // minute its provider call started, which is all the rows remember (see
    // `wharf::console::Overview::attempts`); the hint says so rather than pass it off as every
    // attempt.
    let attempts = per_minute(now, o.attempts.iter().map(|a| (a.minute, a.n)));
    body.push_str(&format!(
        "<h2>Attempts per minute, last hour</h2><p>{}</p><p class=\"hint\" id=\"attempts\">{} attempts: the latest of each action that ended in the last hour or is executing, at the minute its provider call started. Earlier attempts of a retried action keep no time and are not counted.</p>",
        html::sparkline(&attempts, "attempts per minute"),
        html::count(attempts.iter().sum(), o.attempts_capped),
    ));

    body.push_str("<h2>Ends per minute, last hour</h2><table><tbody>");
    for s in ["DONE", "FAILED", "UNCERTAIN", "CANCELLED"] {
        let values = per_minute(
            now,
            o.ended
                .iter()
                .filter(|e| e.state == s)
                .map(|e| (e.minute, e.n)),
        );
        body.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>",
            state(s),
            html::sparkline(&values, &format!("{s} per minute"))
        ));
    }
    body.push_str("</tbody></table>");

    let uncertain: Vec<Vec<String>> = o
        .uncertain
        .iter()
        .map(|u| {
            vec![
                action_link(&c, u.id),
                esc(&u.kind),
                esc(&u.lane_key),
                esc(&u.stop_reason),
                opt(&u.error_code),
                time(&u.ended_at),
            ]
        })
        .collect();
    body.push_str(&format!(
        "<h2>Recent UNCERTAIN ends</h2>{}<p>{}</p>",
        table(
            &["id", "kind", "lane", "stop reason", "error code", "ended"],
            &uncertain
        ),
        link(&format!("{}/in-doubt", c.base), "All in doubt →")
    ));

    let mut answers: BTreeMap<(String, String), i64> = BTreeMap::new();
    for a in &o.answers {
        *answers
            .entry((a.outcome.clone(), a.reason.clone()))
            .or_default() += a.n;
    }
    let rows: Vec<Vec<String>> = answers
        .iter()
        .map(|((outcome, reason), n)| {
            vec![esc(outcome), esc(reason), html::count(*n, o.answers_capped)]
        })
        .collect();
    let values = per_minute(now, o.answers.iter().map(|a| (a.minute, a.n)));
    body.push_str(&format!(
        "<h2>Inbox answers by outcome</h2><p>{}</p>{}<p class=\"hint\">The newest {} answers at most.</p>",
        html::sparkline(&values, "inbox answers per minute"),
        table(&["outcome", "reason", "answers"], &rows),
        read::COUNT_ROWS_MAX
    ));
    Ok(render(&c, &signed, "Overview", true, &body))
}

/// The pauses in force, each with its Resume link, and the form that pauses a kind (or one
/// tenant of it); both go through the confirmation.
fn pauses_section(c: &Console, pauses: &[wharf::outbox::Pause]) -> String {
    let rows: Vec<Vec<String>> = pauses
        .iter()
        .map(|pause| {
            let tenant = pause.tenant_id.as_deref().unwrap_or_default();
            let resume = format!(
                "{}/confirm{}",
                c.base,
                query(&[("op", "resume"), ("kind", &pause.kind), ("tenant", tenant)])
            );
            vec![
                esc(&pause.kind),
                pause
                    .tenant_id
                    .as_deref()
                    .map_or_else(|| "every tenant".to_owned(), esc),
                time(&pause.paused_at),
                esc(&pause.actor),
                esc(&pause.note),
                link(&resume, "Resume…"),
            ]
        })
        .collect();
    let mut kinds: Vec<&str> = c.registry.kinds().collect();
    kinds.sort_unstable();
    let options: String = kinds
        .iter()
        .map(|k| format!("<option value=\"{0}\">{0}</option>", esc(k)))
        .collect();
    let mut out = String::from("<h2>Paused kinds</h2>");
    if rows.is_empty() {
        out.push_str("<p class=\"hint\">Nothing is paused: every kind is claimed.</p>");
    } else {
        out.push_str(&table(
            &["kind", "tenant", "since", "by", "note", ""],
            &rows,
        ));
    }
    out.push_str(&format!(
        "<form class=\"filters\" method=\"get\" action=\"{}/confirm\"><input type=\"hidden\" name=\"op\" value=\"pause\"><label>kind<select name=\"kind\" id=\"pause-kind\">{options}</select></label><label>tenant (empty: every tenant)<input name=\"tenant\" id=\"pause-tenant\"></label><label>note<input name=\"note\" maxlength=\"512\"></label><button type=\"submit\">Pause…</button></form>",
        esc(&c.base)
    ));
    out
}
