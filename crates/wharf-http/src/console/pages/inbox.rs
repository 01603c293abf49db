//! The inbox pages: tenants and refusals by reason, a tenant's projects and credentials (never
//! tokens), and a project's streams (cursor, replay floor, gaps, with the skip and floor forms),
//! verification keys (never private parts) and redacted audit.
//!
//! Must not know: SQL, or how gaps are found (`wharf::console::streams`).

use std::collections::BTreeMap;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use chrono::Utc;
use wharf::console as read;

use super::{
    PAGE_ROWS, PerMinute, bad, identity_or_bad, notice, parse_time_cursor, per_minute, render,
};
use crate::console::act::Params;
use crate::console::html::{self, esc, link, opt, opt_time, query, table, time};
use crate::console::{Console, Failure};
use crate::error::CorrelationId;

/// `GET /inbox?after=` — tenants, and refusals by reason over the last hour.
pub(in crate::console) async fn inbox(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let mut tx = c.read(&correlation).await?;
    let tenants = read::tenants(&mut *tx, p.get("after"), PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    let (answers, _) = read::inbox_answers(&mut *tx)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let rows: Vec<Vec<String>> = tenants
        .iter()
        .map(|t| {
            vec![
                link(
                    &format!("{}/inbox/{}", c.base, html::query_value(&t.tenant_id)),
                    &t.tenant_id,
                ),
                time(&t.created_at),
            ]
        })
        .collect();
    let mut body = format!("<h2>Tenants</h2>{}", table(&["tenant", "created"], &rows));
    if tenants.len() as i64 == PAGE_ROWS
        && let Some(last) = tenants.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!("{}/inbox{}", c.base, query(&[("after", &last.tenant_id)])),
                "Next →"
            )
        ));
    }
    let now = Utc::now();
    let mut reasons: BTreeMap<(String, String), Vec<PerMinute>> = BTreeMap::new();
    for a in answers.iter().filter(|a| a.outcome.starts_with("refuse")) {
        reasons
            .entry((a.outcome.clone(), a.reason.clone()))
            .or_default()
            .push((a.minute, a.n));
    }
    let rows: Vec<Vec<String>> = reasons
        .into_iter()
        .map(|((outcome, reason), points)| {
            let values = per_minute(now, points.into_iter());
            vec![
                esc(&outcome),
                esc(&reason),
                html::sparkline(&values, &format!("{reason} per minute")),
            ]
        })
        .collect();
    body.push_str(&format!(
        "<h2>Refusals by reason, last hour</h2>{}",
        table(&["outcome", "reason", "per minute"], &rows)
    ));
    Ok(render(&c, &signed, "Inbox", true, &body))
}

/// `GET /inbox/{tenant}?after=&credentials_after=` — a tenant's projects and credentials.
pub(in crate::console) async fn tenant(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    Path(tenant): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    identity_or_bad(&c, "tenant", &tenant, &correlation)?;
    let p = Params::from_query(raw);
    let credentials_after = p
        .number::<i64>("credentials_after")
        .map_err(bad(&c, &correlation))?;
    let mut tx = c.read(&correlation).await?;
    let projects = read::projects(&mut *tx, &tenant, p.get("after"), PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    let credentials = read::credentials(&mut *tx, &tenant, credentials_after, PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let base = format!("{}/inbox/{}", c.base, html::query_value(&tenant));
    let rows: Vec<Vec<String>> = projects
        .iter()
        .map(|pr| vec![link(&format!("{base}/{}", html::query_value(pr)), pr)])
        .collect();
    let mut body = format!("<h2>Projects</h2>{}", table(&["project"], &rows));
    if projects.len() as i64 == PAGE_ROWS
        && let Some(last) = projects.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(&format!("{base}{}", query(&[("after", last)])), "Next →")
        ));
    }
    let rows: Vec<Vec<String>> = credentials
        .iter()
        .map(|cr| {
            vec![
                cr.credential_id.to_string(),
                esc(&cr.account_id),
                opt(&cr.device_id),
                time(&cr.created_at),
                if cr.revoked_at.is_some() {
                    format!("revoked {}", opt_time(&cr.revoked_at))
                } else {
                    "live".into()
                },
            ]
        })
        .collect();
    body.push_str(&format!(
        "<h2>Credentials</h2>{}<p class=\"hint\">Tokens are never stored (only their hashes), so none can be shown.</p>",
        table(&["id", "account", "device", "issued", "state"], &rows)
    ));
    if credentials.len() as i64 == PAGE_ROWS
        && let Some(last) = credentials.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!(
                    "{base}{}",
                    query(&[("credentials_after", &last.credential_id.to_string())])
                ),
                "More credentials →"
            )
        ));
    }
    Ok(render(
        &c,
        &signed,
        &format!("Tenant {tenant}"),
        false,
        &body,
    ))
}

/// `GET /inbox/{tenant}/{project}` — streams (cursor, floor, gaps, with skip and floor
/// forms), keys, and the redacted audit.
pub(in crate::console) async fn project(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    Path((tenant, project)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    identity_or_bad(&c, "tenant", &tenant, &correlation)?;
    identity_or_bad(&c, "project", &project, &correlation)?;
    let p = Params::from_query(raw);
    let streams_after = p
        .number::<i64>("streams_after")
        .map_err(bad(&c, &correlation))?;
    let audit_before = p
        .get("audit_before")
        .map(parse_time_cursor)
        .transpose()
        .map_err(bad(&c, &correlation))?;
    let mut tx = c.read(&correlation).await?;
    let streams = read::streams(&mut *tx, &tenant, &project, streams_after, PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    let keys = read::keys(&mut *tx, &tenant, &project, p.get("keys_after"), PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    let audit = read::inbox_audit(&mut *tx, &tenant, &project, audit_before, PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let page_base = format!(
        "{}/inbox/{}/{}",
        c.base,
        html::query_value(&tenant),
        html::query_value(&project)
    );
    let mut body = notice(&p);
    let rows: Vec<Vec<String>> = streams
        .iter()
        .map(|s| {
            let gaps = if s.gaps.is_empty() {
                "none".to_owned()
            } else {
                s.gaps
                    .iter()
                    .map(|(a, b)| if a == b { a.to_string() } else { format!("{a}–{b}") })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let form = |op: &str, field: &str, value: u64, label: &str| {
                format!(
                    "<form method=\"get\" action=\"{}/confirm\" class=\"inline\">{}{}{}{}{}<input name=\"{field}\" value=\"{value}\" size=\"6\" aria-label=\"{field}\"><input name=\"reason\" placeholder=\"reason\" required size=\"10\" aria-label=\"reason\"><button type=\"submit\">{label}</button></form>",
                    esc(&c.base),
                    html::hidden("op", op),
                    html::hidden("tenant", &tenant),
                    html::hidden("project", &project),
                    html::hidden("producer_kind", &s.row.producer_kind),
                    html::hidden("producer_id", &s.row.producer_id),
                )
            };
            let first_gap_end = s.gaps.first().map(|g| g.1).unwrap_or(s.cursor);
            vec![
                format!("{} <code>{}</code>", esc(&s.row.producer_kind), esc(&s.row.producer_id)),
                s.cursor.to_string(),
                s.floor.to_string(),
                html::count(s.row.retained_ahead, s.row.retained_ahead >= read::COUNT_ROWS_MAX),
                esc(&gaps),
                time(&s.row.updated_at),
                format!("{} {}", form("skip", "to", first_gap_end.max(s.cursor + 1), "Skip to…"), form("floor", "floor", s.cursor + 1, "Floor to…")),
            ]
        })
        .collect();
    body.push_str(&format!(
        "<h2>Streams</h2>{}",
        table(
            &[
                "producer",
                "cursor",
                "replay floor",
                "retained ahead",
                "gaps (missing)",
                "moved",
                "operator actions"
            ],
            &rows
        )
    ));
    if streams.len() as i64 == PAGE_ROWS
        && let Some(last) = streams.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!(
                    "{page_base}{}",
                    query(&[("streams_after", &last.row.stream_id.to_string())])
                ),
                "More streams →"
            )
        ));
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            vec![
                esc(&k.key_id),
                esc(&k.state),
                time(&k.created_at),
                opt_time(&k.retired_at),
                opt_time(&k.revoked_at),
                format!("{} s", k.replay_window_seconds),
            ]
        })
        .collect();
    body.push_str(&format!("<h2>Verification keys</h2>{}<p class=\"hint\">Public keys only are stored; no private part exists here to show.</p>", table(&["key id", "state", "added", "retired", "revoked", "replay window"], &rows)));
    if keys.len() as i64 == PAGE_ROWS
        && let Some(last) = keys.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!("{page_base}{}", query(&[("keys_after", &last.key_id)])),
                "More keys →"
            )
        ));
    }
    let rows: Vec<Vec<String>> = audit
        .iter()
        .map(|a| {
            let producer = match (&a.producer_kind, &a.producer_id) {
                (Some(k), Some(i)) => format!("{} {}", esc(k), esc(i)),
                _ => "—".into(),
            };
            let change = match (&a.sequence_before, &a.sequence_after) {
                (Some(b), Some(af)) => format!("{} → {}", esc(b), esc(af)),
                _ => opt(&a.producer_sequence),
            };
            vec![
                time(&a.recorded_at),
                esc(&a.action),
                format!(
                    "{}{}",
                    esc(&a.actor_account),
                    a.actor_device
                        .as_deref()
                        .map(|d| format!(" / {}", esc(d)))
                        .unwrap_or_default()
                ),
                producer,
                change,
                esc(&a.outcome),
                esc(&a.reason),
                a.event_id_sha256
                    .as_deref()
                    .map(|h| {
                        format!(
                            "<span class=\"mono\">{}…</span>",
                            esc(&h[..h.len().min(12)])
                        )
                    })
                    .unwrap_or_else(|| "—".into()),
            ]
        })
        .collect();
    body.push_str(&format!(
        "<h2>Audit</h2>{}",
        table(
            &[
                "when",
                "action",
                "actor",
                "producer",
                "sequence",
                "outcome",
                "reason",
                "event id (SHA-256)"
            ],
            &rows
        )
    ));
    if audit.len() as i64 == PAGE_ROWS
        && let Some(last) = audit.last()
    {
        let cursor = format!("{},{}", last.recorded_at.to_rfc3339(), last.audit_id);
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!("{page_base}{}", query(&[("audit_before", &cursor)])),
                "Older audit →"
            )
        ));
    }
    Ok(render(
        &c,
        &signed,
        &format!("{tenant} / {project}"),
        true,
        &body,
    ))
}
