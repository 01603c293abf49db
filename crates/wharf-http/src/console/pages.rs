//! The console's read pages: overview, actions (list and detail), lanes, in doubt, dead
//! letters, inbox (tenants, a tenant, a project's streams, keys and audit), and the operator
//! audit. Each reads through `wharf::console` (or `wharf::outbox::get` /
//! `wharf::outbound::dead_letters`, as the API does) in one bounded read-only transaction.
//!
//! Must not know: SQL. Never shows a payload, a token, a token hash or key material: an
//! action's payload appears only as "kept" or "gone", a key only by id and state.

use std::collections::BTreeMap;

use axum::extract::{Path, RawQuery, State};
use axum::http::header::HeaderMap;
use axum::response::Html;
use chrono::{DateTime, Duration, DurationRound, Utc};
use wharf::console::{self as read, WindowFilter};

use super::act::Params;
use super::html::{self, esc, link, opt, opt_time, query, state, table, time};
use super::{Console, Failure, Signed};
use crate::error::{ApiError, CorrelationId};

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

/// `GET /` — the overview.
pub(super) async fn overview(
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

/// `GET /actions?state=&kind=&tenant=&lane=&key=&below=` — the actions list.
pub(super) async fn actions(
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
pub(super) async fn action(
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

/// `GET /lanes?lane=` — the busiest lanes, their heads and holders.
pub(super) async fn lanes(
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
pub(super) async fn in_doubt(
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

fn parse_time_cursor(text: &str) -> Result<(DateTime<Utc>, i64), String> {
    let bad = || format!("a page cursor is <RFC 3339 time>,<id>, not {text:?}");
    let (at, id) = text.rsplit_once(',').ok_or_else(bad)?;
    let at = DateTime::parse_from_rfc3339(at)
        .map_err(|_| bad())?
        .with_timezone(&Utc);
    Ok((at, id.parse().map_err(|_| bad())?))
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

/// `GET /dead-letters?tenant=&project=&after=` — by explicit tenant and project only, as the
/// API.
pub(super) async fn dead_letters(
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

/// `GET /inbox?after=` — tenants, and refusals by reason over the last hour.
pub(super) async fn inbox(
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
pub(super) async fn tenant(
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
pub(super) async fn project(
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

/// `GET /audit?before=` — the operator audit trail.
pub(super) async fn audit(
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
                esc(&a.role),
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
