//! The operator audit page: the one trail of every operator action, the console's and those
//! of the admin API and the CLI, newest first, keyset-paginated.
//!
//! Must not know: SQL.

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use wharf::console as read;

use super::{PAGE_ROWS, bad, render};
use crate::console::act::Params;
use crate::console::html::{esc, link, query, table, time};
use crate::console::{Console, Failure};
use crate::error::CorrelationId;

/// `GET /audit?before=` — the operator audit trail.
pub(in crate::console) async fn audit(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let before = p.number::<i64>("before").map_err(bad(&c, &correlation))?;
    let mut tx = c.read(&correlation).await?;
    let rows = read::audit(&mut *tx, before, PAGE_ROWS)
        .await
        .map_err(|e| c.read_failed(e, &correlation))?;
    drop(tx);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|a| {
            vec![
                time(&a.recorded_at),
                esc(&a.operator),
                // The library's rows (admin API, CLI) have no console role.
                a.role
                    .as_deref()
                    .map_or_else(|| "API or CLI".to_owned(), esc),
                esc(&a.action),
                esc(&a.target),
                esc(&a.detail),
                format!("<span class=\"mono\">{}</span>", esc(&a.correlation_id)),
            ]
        })
        .collect();
    let mut body = table(
        &[
            "when",
            "operator",
            "role",
            "action",
            "target",
            "detail",
            "correlation id",
        ],
        &cells,
    );
    if rows.len() as i64 == PAGE_ROWS
        && let Some(last) = rows.last()
    {
        body.push_str(&format!(
            "<p class=\"pager\">{}</p>",
            link(
                &format!(
                    "{}/audit{}",
                    c.base,
                    query(&[("before", &last.audit_id.to_string())])
                ),
                "Older →"
            )
        ));
    }
    Ok(render(&c, &signed, "Operator audit", true, &body))
}
