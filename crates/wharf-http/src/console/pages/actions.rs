//! The actions pages: the filtered, keyset-paginated list and one action's detail (every field
//! but its payload, its lane's position, and the links to the operator actions it allows).
//!
//! Must not know: SQL. Never shows a payload: only whether it is kept or gone.

use axum::extract::{Path, RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use wharf::console::{self as read, WindowFilter};

use super::{PAGE_ROWS, action_link, bad, notice, render};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt, opt_time, query, state, table, time};
use crate::console::{Console, Failure};
use crate::error::{ApiError, CorrelationId};

/// `GET /actions?state=&kind=&tenant=&lane=&key=&below=` — the actions list.
pub(in crate::console) async fn actions(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let state_filter = p
        .get("state")
        .map(|s| {
            s.parse::<wharf::core::action::ActionState>()
                .map(|s| s.as_str())
        })
        .transpose()
        .map_err(|e| Failure::bad_request(&c, format!("state: {e}"), &correlation))?;
    let below = p.number::<i64>("below").map_err(bad(&c, &correlation))?;
    let filter = WindowFilter {
        state: state_filter,
        kind: p.get("kind"),
        tenant_id: p.get("tenant"),
        lane_key: p.get("lane"),
    };
    for (name, value) in [
        ("kind", filter.kind),
        ("tenant", filter.tenant_id),
        ("lane", filter.lane_key),
        ("key", p.get("key")),
    ] {
        if value.is_some_and(|v| v.contains('\0')) {
            return Err(Failure::bad_request(
                &c,
                format!("{name} must not contain U+0000"),
                &correlation,
            ));
        }
    }
    let mut tx = c.read(&correlation).await?;
    let window = read::actions(&mut tx, below, PAGE_ROWS, filter, p.get("key"))
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);

    let mut body = notice(&p);
    let mut states = String::from("<option value=\"\">any</option>");
    for s in wharf::core::action::ActionState::ALL {
        let sel = if state_filter == Some(s.as_str()) {
            " selected"
        } else {
            ""
        };
        states.push_str(&format!("<option{sel}>{}</option>", s.as_str()));
    }
    let input = |name: &str, label: &str| {
        format!(
            "<label>{label}<input name=\"{name}\" value=\"{}\"></label>",
            esc(p.text(name))
        )
    };
    body.push_str(&format!(
        "<form class=\"filters\" method=\"get\" action=\"{}/actions\"><label>state<select name=\"state\">{states}</select></label>{}{}{}{}<button type=\"submit\">Filter</button></form>",
        esc(&c.base),
        input("kind", "kind"),
        input("tenant", "tenant"),
        input("lane", "lane"),
        input("key", "idempotency key"),
    ));
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
                state(&a.state),
                opt(&a.stop_reason),
                format!("{}/{}", a.attempt, a.max_attempts),
                opt(&a.error_code),
                time(&a.created_at),
            ]
        })
        .collect();
    body.push_str(&format!(
        "<p class=\"hint\" id=\"window\">{} matched among the {} newest actions read{}.</p>",
        window.items.len(),
        window.scanned,
        match (window.items.first(), window.scanned_low) {
            (_, Some(low)) => format!(" (ids down to {low})"),
            _ => String::new(),
        }
    ));
    body.push_str(&table(
        &[
            "id",
            "kind",
            "tenant",
            "lane",
            "idempotency key",
            "state",
            "stop reason",
            "attempts",
            "error code",
            "enqueued",
        ],
        &rows,
    ));
    // The next page starts below the last match when the page is full, else below the window.
    let next = if window.items.len() as i64 == PAGE_ROWS {
        window.items.last().map(|a| a.id)
    } else if window.scanned == read::SCAN_ROWS_MAX {
        window.scanned_low
    } else {
        None
    };
    if let Some(next) = next {
        let more = query(&[
            ("state", p.text("state")),
            ("kind", p.text("kind")),
            ("tenant", p.text("tenant")),
            ("lane", p.text("lane")),
            ("below", &next.to_string()),
        ]);
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(&format!("{}/actions{more}", c.base), "Older →")
        ));
    }
    body.push_str(&format!(
        "<h2>Erase a subject</h2><form class=\"filters\" method=\"get\" action=\"{}/confirm\"><input type=\"hidden\" name=\"op\" value=\"erase\"><label>subject account<input name=\"account\" id=\"erase-account\" required></label><button type=\"submit\">Erase…</button></form>",
        esc(&c.base)
    ));
    Ok(render(&c, &signed, "Actions", true, &body))
}

/// `GET /actions/{id}` — every field of one action (never its payload) and its lane position.
pub(in crate::console) async fn action(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let id: i64 = id.parse().map_err(|_| {
        Failure::bad_request(
            &c,
            format!("action id must be a number, not {id:?}"),
            &correlation,
        )
    })?;
    let mut tx = c.read(&correlation).await?;
    let view = wharf::outbox::get(&mut *tx, id)
        .await
        .map_err(|e| Failure::api(&c, ApiError::not_committed(&e, &correlation)))?
        .ok_or_else(|| {
            Failure::page(
                &c,
                axum::http::StatusCode::NOT_FOUND,
                "not-found",
                format!("no action {id} (never enqueued, erased, or deleted by retention)"),
                &correlation,
            )
        })?;
    let position = read::lane_position(&mut *tx, &view.lane_key, id)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let p = Params::from_query(raw);
    let mut body = notice(&p);
    let payload = match &view.payload {
        Some(_) => "kept until the action ends (not shown)",
        None => "gone (an ended action keeps no payload)",
    };
    body.push_str(&html::fields(&[
        ("id", view.id.to_string()),
        ("kind", esc(&view.kind)),
        ("state", state(view.state.as_str())),
        (
            "stop reason",
            view.stop_reason
                .map(|r| esc(r.as_str()))
                .unwrap_or_else(|| "—".into()),
        ),
        ("error code", opt(&view.error_code)),
        ("tenant", opt(&view.tenant_id)),
        ("project", opt(&view.project_id)),
        (
            "lane",
            link(
                &format!("{}/lanes{}", c.base, query(&[("lane", &view.lane_key)])),
                &view.lane_key,
            ),
        ),
        (
            "idempotency key",
            format!("<span class=\"mono\">{}</span>", esc(&view.idempotency_key)),
        ),
        (
            "content digest",
            format!("<span class=\"mono\">{}</span>", esc(&view.content_digest)),
        ),
        ("at most once", view.at_most_once.to_string()),
        ("instance level", view.instance_level.to_string()),
        (
            "attempts",
            format!("{} of {}", view.attempt, view.max_attempts),
        ),
        ("epoch", view.epoch.to_string()),
        ("subject", opt(&view.subject_account_id)),
        ("payload", payload.to_owned()),
        ("run at", time(&view.run_at)),
        ("expires at", opt_time(&view.expires_at)),
        ("lease expires at", opt_time(&view.lease_expires_at)),
        ("write started at", opt_time(&view.write_started_at)),
        ("readback ref", opt(&view.readback_ref)),
        ("enqueued", time(&view.created_at)),
        ("ended", opt_time(&view.ended_at)),
    ]));
    body.push_str("<h2>Its lane</h2>");
    let holder = match position.holder_id {
        Some(h) if h == id => "this action holds the lane (it is executing)".to_owned(),
        Some(h) => format!(
            "held by action {} (epoch {}, lease until {})",
            action_link(&c, h),
            position.holder_epoch.unwrap_or(0),
            opt_time(&position.holder_lease_expires_at)
        ),
        None => "nobody holds the lane (no action of it is executing)".to_owned(),
    };
    let ahead = if view.state.is_ended() {
        "— (ended)".to_owned()
    } else {
        html::count(position.ahead, position.ahead >= read::COUNT_ROWS_MAX)
    };
    body.push_str(&html::fields(&[
        ("unstarted actions ahead", ahead),
        ("holder", holder),
    ]));
    let confirm = |op: &str| {
        format!(
            "{}/confirm{}",
            c.base,
            query(&[("op", op), ("id", &id.to_string())])
        )
    };
    if view.state == wharf::core::action::ActionState::Proposed {
        body.push_str(&format!(
            "<h2>Proposal</h2><p><a id=\"admit\" href=\"{}\">Admit…</a> · <a id=\"refuse\" href=\"{}\">Refuse…</a></p>",
            esc(&confirm("admit")),
            esc(&confirm("refuse"))
        ));
    }
    if matches!(
        view.state,
        wharf::core::action::ActionState::Proposed | wharf::core::action::ActionState::Admitted
    ) {
        body.push_str(&format!(
            "<p><a id=\"cancel\" href=\"{}\">Cancel this action…</a></p>",
            esc(&confirm("cancel"))
        ));
    }
    Ok(render(&c, &signed, &format!("Action {id}"), true, &body))
}
