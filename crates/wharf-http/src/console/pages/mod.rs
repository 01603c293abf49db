//! The console's read pages: overview, actions (list and detail), lanes, in doubt, dead
//! letters, inbox (tenants, a tenant, a project's streams, keys and audit), and the operator
//! audit. Each reads through `wharf::console` (or `wharf::outbox::get` /
//! `wharf::outbound::dead_letters`, as the API does) in one bounded read-only transaction.
//!
//! Must not know: SQL. Never shows a payload, a token, a token hash or key material: an
//! action's payload appears only as "kept" or "gone", a key only by id and state.
//!
//! One module per page (`overview`, `actions`, `lanes`, `in_doubt`, `dead_letters`, `inbox`,
//! `audit`); this one holds what they share: the page size, the notice after an action, the
//! page frame, per-minute series and page cursors.

mod actions;
mod audit;
mod dead_letters;
mod in_doubt;
mod inbox;
mod lanes;
mod overview;

pub(super) use actions::{action, actions};
pub(super) use audit::audit;
pub(super) use dead_letters::dead_letters;
pub(super) use in_doubt::in_doubt;
pub(super) use inbox::{inbox, project, tenant};
pub(super) use lanes::lanes;
pub(super) use overview::overview;

use axum::response::Html;
use chrono::{DateTime, Duration, DurationRound, Utc};

use super::act::Params;
use super::html::{self, esc, link};
use super::{Console, Failure, Signed};
use crate::error::CorrelationId;

/// Rows on a console page.
pub const PAGE_ROWS: i64 = 50;

/// A count in one minute.
type PerMinute = (DateTime<Utc>, i64);

fn notice(p: &Params) -> String {
    let text = match p.text("notice") {
        "admitted" => "The proposal was admitted.".to_owned(),
        "refused" => "The proposal was refused.".to_owned(),
        "erased" => format!(
            "Erased: {} actions deleted.",
            p.number::<u64>("deleted").ok().flatten().unwrap_or(0)
        ),
        "skipped" => "The gap was skipped.".to_owned(),
        "floor-advanced" => "The replay floor was advanced.".to_owned(),
        "cancelled" => "The action was cancelled.".to_owned(),
        "paused" => "Paused: replicas stop claiming it within a second.".to_owned(),
        "resumed" => "Resumed: replicas claim it again within a second.".to_owned(),
        "redriven" => format!(
            "Redriven: {} dead letters go out again as new actions.",
            p.number::<u64>("redriven").ok().flatten().unwrap_or(0)
        ),
        _ => return String::new(),
    };
    format!("<p class=\"notice\" id=\"notice\">{}</p>", esc(&text))
}

fn render(c: &Console, signed: &Signed, title: &str, live: bool, body: &str) -> Html<String> {
    Html(html::page(
        &c.base,
        title,
        Some(&signed.viewer()),
        live,
        body,
    ))
}

fn bad<'a>(c: &'a Console, correlation: &'a CorrelationId) -> impl Fn(String) -> Failure + 'a {
    move |e| Failure::bad_request(c, e, correlation)
}

/// Per-minute values for the last hour, oldest first, from (minute, n) pairs.
fn per_minute(now: DateTime<Utc>, rows: impl Iterator<Item = (DateTime<Utc>, i64)>) -> Vec<i64> {
    let end = now.duration_trunc(Duration::minutes(1)).unwrap_or(now);
    let mut out = vec![0i64; 60];
    for (minute, n) in rows {
        let back = (end - minute).num_minutes();
        if (0..60).contains(&back) {
            out[59 - back as usize] += n;
        }
    }
    out
}

fn action_link(c: &Console, id: i64) -> String {
    link(&format!("{}/actions/{id}", c.base), &id.to_string())
}

fn parse_time_cursor(text: &str) -> Result<(DateTime<Utc>, i64), String> {
    let bad = || format!("a page cursor is <RFC 3339 time>,<id>, not {text:?}");
    let (at, id) = text.rsplit_once(',').ok_or_else(bad)?;
    let at = DateTime::parse_from_rfc3339(at)
        .map_err(|_| bad())?
        .with_timezone(&Utc);
    Ok((at, id.parse().map_err(|_| bad())?))
}

fn identity_or_bad(
    c: &Console,
    what: &str,
    value: &str,
    correlation: &CorrelationId,
) -> Result<(), Failure> {
    if wharf::core::envelope::is_identity(value) {
        Ok(())
    } else {
        Err(Failure::bad_request(
            c,
            format!("{what} is not an identity: {value:?}"),
            correlation,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_minute_puts_each_count_in_its_minute_of_the_last_hour() {
        let now: DateTime<Utc> = "2026-01-01T10:30:40Z".parse().unwrap();
        let at = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let v = per_minute(
            now,
            [
                (at("2026-01-01T10:30:00Z"), 3),
                (at("2026-01-01T10:29:00Z"), 2),
                (at("2026-01-01T09:30:00Z"), 9),
            ]
            .into_iter(),
        );
        assert_eq!(v.len(), 60);
        assert_eq!((v[59], v[58], v.iter().sum::<i64>()), (3, 2, 5));
    }

    #[test]
    fn a_time_cursor_round_trips() {
        let at: DateTime<Utc> = "2026-01-01T10:30:40.123456Z".parse().unwrap();
        assert_eq!(
            parse_time_cursor(&format!("{},42", at.to_rfc3339())),
            Ok((at, 42))
        );
        assert!(parse_time_cursor("yesterday,1").is_err());
        assert!(parse_time_cursor("2026-01-01T10:30:40Z").is_err());
    }
}
