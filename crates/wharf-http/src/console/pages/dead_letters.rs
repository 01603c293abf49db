//! The dead-letters page: for one explicit tenant and project only, as the API shows them, with
//! the link to redrive the scope's envelope dead letters.
//!
//! Must not know: SQL, or the scope rule (`wharf::outbound::dead_letters` holds it).

use axum::extract::{RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;

use super::{PAGE_ROWS, action_link, notice, render};
use crate::console::act::Params;
use crate::console::html::{esc, link, opt, query, table, time};
use crate::console::{Console, Failure};
use crate::error::{ApiError, CorrelationId};

/// `GET /dead-letters?tenant=&project=&after=` — by explicit tenant and project only, as the
/// API.
pub(in crate::console) async fn dead_letters(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let mut body = notice(&p);
    body.push_str(&format!(
        "<form class=\"filters\" method=\"get\" action=\"{}/dead-letters\"><label>tenant<input name=\"tenant\" required value=\"{}\"></label><label>project<input name=\"project\" required value=\"{}\"></label><button type=\"submit\">Show</button></form>",
        esc(&c.base),
        esc(p.text("tenant")),
        esc(p.text("project"))
    ));
    if let (Some(tenant), Some(project)) = (p.get("tenant"), p.get("project")) {
        let after = p
            .get("after")
            .map(str::parse::<wharf::outbound::Cursor>)
            .transpose()
            .map_err(|e| Failure::bad_request(&c, e.to_string(), &correlation))?;
        let mut tx = c.read(&correlation).await?;
        let page = wharf::outbound::dead_letters(
            &mut *tx,
            tenant,
            project,
            after.as_ref(),
            Some(PAGE_ROWS as u32),
        )
        .await
        .map_err(|e| match e {
            wharf::outbound::Error::Database(e) => {
                Failure::api(&c, ApiError::not_committed(&e, &correlation))
            }
            other => Failure::bad_request(&c, other.to_string(), &correlation),
        })?;
        drop(tx);
        let rows: Vec<Vec<String>> = page
            .items
            .iter()
            .map(|d| {
                vec![
                    action_link(&c, d.id),
                    esc(&d.kind),
                    esc(&d.lane_key),
                    format!("<span class=\"mono\">{}</span>", esc(&d.idempotency_key)),
                    esc(d.stop_reason.as_str()),
                    opt(&d.error_code),
                    d.attempt.to_string(),
                    time(&d.ended_at),
                ]
            })
            .collect();
        body.push_str(&table(
            &[
                "id",
                "kind",
                "lane",
                "idempotency key",
                "stop reason",
                "error code",
                "attempts",
                "failed",
            ],
            &rows,
        ));
        let redrive = format!(
            "{}/confirm{}",
            c.base,
            query(&[("op", "redrive"), ("tenant", tenant), ("project", project)])
        );
        body.push_str(&format!(
            "<p><a id=\"redrive\" href=\"{}\">Redrive the envelope dead letters of this scope…</a> (the confirmation lists them first)</p>",
            esc(&redrive)
        ));
        if let Some(next) = page.next {
            let more = query(&[
                ("tenant", tenant),
                ("project", project),
                ("after", &next.to_string()),
            ]);
            body.push_str(&format!(
                "<p class=\"pager\">{}</p>",
                link(&format!("{}/dead-letters{more}", c.base), "Next →")
            ));
        }
    } else {
        body.push_str("<p class=\"hint\">Dead letters are shown for one explicit tenant and project at a time, as the API shows them.</p>");
    }
    Ok(render(&c, &signed, "Dead letters", false, &body))
}
