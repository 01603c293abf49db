//! The lanes page: the busiest lanes, each with its head, depth, what it is blocked on and who
//! holds it.
//!
//! Must not know: SQL, or how a lane is chosen as busy (that is `wharf::console::lanes`).

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use wharf::console as read;

use super::{PAGE_ROWS, action_link, bad, render};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt_time, query, state, table};
use crate::console::{Console, Failure};
use crate::error::CorrelationId;

/// `GET /lanes?lane=&kind=&tenant=&after=<depth>,<lane>` — a page of the busiest lanes, their
/// heads and holders.
pub(in crate::console) async fn lanes(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    for name in ["lane", "kind", "tenant", "after"] {
        if p.get(name).is_some_and(|v| v.contains('\0')) {
            return Err(Failure::bad_request(
                &c,
                format!("{name} must not contain U+0000"),
                &correlation,
            ));
        }
    }
    let after = p
        .get("after")
        .map(parse_lane_cursor)
        .transpose()
        .map_err(bad(&c, &correlation))?;
    let filter = read::LaneFilter {
        lane: p.get("lane"),
        kind: p.get("kind"),
        tenant_id: p.get("tenant"),
        after,
    };
    let mut tx = c.read(&correlation).await?;
    let lanes = read::lanes(&mut *tx, PAGE_ROWS, filter, None)
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
    let input = |name: &str| {
        format!(
            "<label>{name}<input name=\"{name}\" value=\"{}\"></label>",
            esc(p.text(name))
        )
    };
    let mut body = format!(
        "<form class=\"filters\" method=\"get\" action=\"{}/lanes\">{}{}{}<button type=\"submit\">Show</button></form>{}<p class=\"hint\">Busiest lanes by unstarted actions, among the first {} unstarted actions read in lane order (every page reads the same ones); kind and tenant keep the lanes with an unstarted action of theirs.</p>",
        esc(&c.base),
        input("lane"),
        input("kind"),
        input("tenant"),
        table(
            &["lane", "unstarted", "head", "blocked on", "holder"],
            &rows
        ),
        read::COUNT_ROWS_MAX
    );
    // A full page may have more after it; the cursor is its last row's place in the order.
    if lanes.len() as i64 == PAGE_ROWS
        && let Some(last) = lanes.last()
    {
        let more = query(&[
            ("lane", p.text("lane")),
            ("kind", p.text("kind")),
            ("tenant", p.text("tenant")),
            ("after", &format!("{},{}", last.depth, last.lane_key)),
        ]);
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(&format!("{}/lanes{more}", c.base), "Next →")
        ));
    }
    Ok(render(&c, &signed, "Lanes", true, &body))
}

/// `<depth>,<lane key>`: the depth has no comma, the lane key may.
fn parse_lane_cursor(text: &str) -> Result<(i64, &str), String> {
    let bad = || format!("a lanes page cursor is <depth>,<lane key>, not {text:?}");
    let (depth, lane) = text.split_once(',').ok_or_else(bad)?;
    let depth = depth.parse().map_err(|_| bad())?;
    if lane.is_empty() {
        return Err(bad());
    }
    Ok((depth, lane))
}

#[cfg(test)]
mod tests {
    use super::parse_lane_cursor;

    #[test]
    fn a_lane_cursor_keeps_commas_in_the_lane_key() {
        assert_eq!(parse_lane_cursor("3,email:a,b"), Ok((3, "email:a,b")));
        assert!(parse_lane_cursor("x,lane").is_err());
        assert!(parse_lane_cursor("3,").is_err());
        assert!(parse_lane_cursor("3").is_err());
    }
}
