//! The lanes page: the busiest lanes, each with its head, depth, what it is blocked on and who
//! holds it.
//!
//! Must not know: SQL, or how a lane is chosen as busy (that is `wharf::console::lanes`).

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use wharf::console as read;

use super::{PAGE_ROWS, action_link, render};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt_time, query, state, table};
use crate::console::{Console, Failure};
use crate::error::CorrelationId;

/// `GET /lanes?lane=` — the busiest lanes, their heads and holders.
pub(in crate::console) async fn lanes(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    if p.get("lane").is_some_and(|v| v.contains('\0')) {
        return Err(Failure::bad_request(
            &c,
            "lane must not contain U+0000",
            &correlation,
        ));
    }
    let mut tx = c.read(&correlation).await?;
    let lanes = read::lanes(&mut *tx, PAGE_ROWS, p.get("lane"), None)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let rows: Vec<Vec<String>> = lanes
        .iter()
        .map(|l| {
            let blocked = match (l.holder_id, l.head_state.as_str()) {
                (Some(h), _) => format!("held by executing action {}", action_link(&c, h)),
                (None, "PROPOSED") => "its head waits for a decision (admit or refuse)".to_owned(),
                (None, _) if l.head_run_at > l.now => format!(
                    "not due for {}",
                    html::age((l.head_run_at - l.now).num_seconds())
                ),
                (None, _) => "nothing: its head is due and waits for a free worker".to_owned(),
            };
            let holder = match l.holder_id {
                Some(_) => format!(
                    "epoch {}, lease until {}{}",
                    l.holder_epoch.unwrap_or(0),
                    opt_time(&l.holder_lease_expires_at),
                    if l.holder_write_started_at.is_some() {
                        ", provider call fenced"
                    } else {
                        ""
                    }
                ),
                None => "—".into(),
            };
            vec![
                link(
                    &format!("{}/actions{}", c.base, query(&[("lane", &l.lane_key)])),
                    &l.lane_key,
                ),
                html::count(l.depth, l.depth >= read::COUNT_ROWS_MAX),
                format!(
                    "{} {} {}",
                    action_link(&c, l.head_id),
                    esc(&l.head_kind),
                    state(&l.head_state)
                ),
                blocked,
                holder,
            ]
        })
        .collect();
    let body = format!(
        "<form class=\"filters\" method=\"get\" action=\"{}/lanes\"><label>lane<input name=\"lane\" value=\"{}\"></label><button type=\"submit\">Show</button></form>{}<p class=\"hint\">Busiest lanes by unstarted actions, among the first {} unstarted actions read.</p>",
        esc(&c.base),
        esc(p.text("lane")),
        table(
            &["lane", "unstarted", "head", "blocked on", "holder"],
            &rows
        ),
        read::COUNT_ROWS_MAX
    );
    Ok(render(&c, &signed, "Lanes", true, &body))
}
