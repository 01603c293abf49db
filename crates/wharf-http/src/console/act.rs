//! Sign-in, sign-out, and the operator actions: a confirmation page that says what will
//! happen, then a CSRF-checked POST that runs the action through the same library function and
//! the same error mapping as the HTTP admin API, with the operator audit row in the same
//! transaction.
//!
//! Must not know: SQL, or when an action is allowed (the library decides: a non-proposal is
//! not admitted, a skip must move the cursor forward, …).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Extension;
use axum::extract::connect_info::ConnectInfo;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap};
use axum::response::{Html, IntoResponse, Response};
use wharf::console::{Entry, Role};
use wharf::inbox::streams::{Producer, StreamId};
use wharf::outbox;

use super::html::{self, esc, hidden};
use super::{Console, Failure, Signed, see_other};
use crate::actions;
use crate::error::{ApiError, CorrelationId, console_not_committed, inbox_not_committed};

/// A request's parameters (query or form), last value of a name wins. Empty values count as
/// absent, so an empty filter field filters nothing.
#[derive(Debug, Default)]
pub(crate) struct Params(HashMap<String, String>);

impl Params {
    /// From a query string; one that does not decode gives no parameters.
    pub(crate) fn from_query(raw: Option<String>) -> Params {
        Params::from_bytes(raw.unwrap_or_default().as_bytes())
    }

    /// From an `application/x-www-form-urlencoded` body.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Params {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(bytes).unwrap_or_default();
        Params(pairs.into_iter().collect())
    }

    /// A non-empty value, trimmed.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    /// A non-empty value or "".
    pub(crate) fn text(&self, name: &str) -> &str {
        self.get(name).unwrap_or("")
    }

    /// A number, when given; an error names the field.
    pub(crate) fn number<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        self.get(name)
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| format!("{name} must be a number, not {v:?}"))
            })
            .transpose()
    }

    fn required(&self, name: &str) -> Result<&str, String> {
        self.get(name).ok_or_else(|| format!("{name} is required"))
    }
}

/// An operator action the console offers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Admit(i64),
    Refuse(i64),
    Cancel(i64),
    Pause {
        kind: String,
        tenant: Option<String>,
        note: String,
    },
    Resume {
        kind: String,
        tenant: Option<String>,
    },
    Redrive {
        tenant: String,
        project: String,
        error_code: Option<String>,
    },
    Erase(String),
    Skip {
        stream: StreamId,
        to: u64,
        reason: String,
    },
    Floor {
        stream: StreamId,
        floor: u64,
        reason: String,
    },
}

fn stream_of(p: &Params) -> Result<StreamId, String> {
    let id = p.required("producer_id")?.to_owned();
    let producer = match p.required("producer_kind")? {
        "device" => Producer::Device(id),
        "account" => Producer::Account(id),
        other => {
            return Err(format!(
                "producer_kind must be device or account, not {other:?}"
            ));
        }
    };
    Ok(StreamId {
        tenant: p.required("tenant")?.to_owned(),
        project: p.required("project")?.to_owned(),
        producer,
    })
}

impl Op {
    fn parse(p: &Params) -> Result<Op, String> {
        let id = || {
            p.number::<i64>("id")?
                .ok_or_else(|| "id is required".to_owned())
        };
        match p.required("op")? {
            "admit" => Ok(Op::Admit(id()?)),
            "refuse" => Ok(Op::Refuse(id()?)),
            "cancel" => Ok(Op::Cancel(id()?)),
            // An empty tenant field is "every tenant": what a form left blank sends.
            "pause" => Ok(Op::Pause {
                kind: p.required("kind")?.to_owned(),
                tenant: p.get("tenant").filter(|t| !t.is_empty()).map(str::to_owned),
                note: p.get("note").unwrap_or_default().to_owned(),
            }),
            "resume" => Ok(Op::Resume {
                kind: p.required("kind")?.to_owned(),
                tenant: p.get("tenant").filter(|t| !t.is_empty()).map(str::to_owned),
            }),
            "redrive" => Ok(Op::Redrive {
                tenant: p.required("tenant")?.to_owned(),
                project: p.required("project")?.to_owned(),
                error_code: p
                    .get("error_code")
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned),
            }),
            "erase" => Ok(Op::Erase(p.required("account")?.to_owned())),
            "skip" => Ok(Op::Skip {
                stream: stream_of(p)?,
                to: p.number("to")?.ok_or("to is required")?,
                reason: p.required("reason")?.to_owned(),
            }),
            "floor" => Ok(Op::Floor {
                stream: stream_of(p)?,
                floor: p.number("floor")?.ok_or("floor is required")?,
                reason: p.required("reason")?.to_owned(),
            }),
            other => Err(format!("no operator action {other:?}")),
        }
    }

    /// The form fields that carry this action from the confirmation to the POST.
    fn fields(&self) -> Vec<(&'static str, String)> {
        let stream = |s: &StreamId| {
            vec![
                ("tenant", s.tenant.clone()),
                ("project", s.project.clone()),
                ("producer_kind", s.producer.kind().to_owned()),
                ("producer_id", s.producer.id().to_owned()),
            ]
        };
        match self {
            Op::Admit(id) => vec![("op", "admit".into()), ("id", id.to_string())],
            Op::Refuse(id) => vec![("op", "refuse".into()), ("id", id.to_string())],
            Op::Cancel(id) => vec![("op", "cancel".into()), ("id", id.to_string())],
            Op::Pause { kind, tenant, note } => vec![
                ("op", "pause".into()),
                ("kind", kind.clone()),
                ("tenant", tenant.clone().unwrap_or_default()),
                ("note", note.clone()),
            ],
            Op::Resume { kind, tenant } => vec![
                ("op", "resume".into()),
                ("kind", kind.clone()),
                ("tenant", tenant.clone().unwrap_or_default()),
            ],
            Op::Redrive {
                tenant,
                project,
                error_code,
            } => vec![
                ("op", "redrive".into()),
                ("tenant", tenant.clone()),
                ("project", project.clone()),
                ("error_code", error_code.clone().unwrap_or_default()),
            ],
            Op::Erase(account) => vec![("op", "erase".into()), ("account", account.clone())],
            Op::Skip {
                stream: s,
                to,
                reason,
            } => {
                let mut f = vec![
                    ("op", "skip".into()),
                    ("to", to.to_string()),
                    ("reason", reason.clone()),
                ];
                f.extend(stream(s));
                f
            }
            Op::Floor {
                stream: s,
                floor,
                reason,
            } => {
                let mut f = vec![
                    ("op", "floor".into()),
                    ("floor", floor.to_string()),
                    ("reason", reason.clone()),
                ];
                f.extend(stream(s));
                f
            }
        }
    }

    /// The confirmation's title and what will happen, in HTML.
    fn describe(&self) -> (&'static str, String) {
        let stream = |s: &StreamId| {
            format!(
                "the stream of {} <code>{}</code> in <code>{}/{}</code>",
                s.producer.kind(),
                esc(s.producer.id()),
                esc(&s.tenant),
                esc(&s.project)
            )
        };
        match self {
            Op::Admit(id) => (
                "Admit a proposal",
                format!(
                    "Action <code>{id}</code> leaves PROPOSED and becomes ADMITTED: it runs when it is due, in its lane's order. Only a PROPOSED action can be admitted; anything else is refused and nothing changes."
                ),
            ),
            Op::Refuse(id) => (
                "Refuse a proposal",
                format!(
                    "Action <code>{id}</code> ends CANCELLED with stop reason REFUSED and its payload is dropped. It never runs. An ended action never changes again."
                ),
            ),
            Op::Cancel(id) => (
                "Cancel an action",
                format!(
                    "Action <code>{id}</code> ends CANCELLED with stop reason OPERATOR and its payload is dropped. It never runs. Only a PROPOSED or ADMITTED action can be cancelled: an EXECUTING one may already be at its provider, and is refused."
                ),
            ),
            Op::Pause { kind, tenant, note } => (
                "Pause a kind",
                format!(
                    "Every replica stops claiming <code>{}</code> actions{} within a second. Nothing already running is interrupted, and nothing is lost: the actions wait, in their lanes' order, until it is resumed.{}",
                    esc(kind),
                    for_tenant(tenant.as_deref()),
                    if note.is_empty() {
                        String::new()
                    } else {
                        format!(" Noted with it: <q>{}</q>.", esc(note))
                    }
                ),
            ),
            Op::Resume { kind, tenant } => (
                "Resume a kind",
                format!(
                    "The pause of <code>{}</code>{} ends: replicas claim its actions again within a second.{}",
                    esc(kind),
                    for_tenant(tenant.as_deref()),
                    if tenant.is_none() {
                        " A tenant's own pause of this kind stays in force."
                    } else {
                        ""
                    }
                ),
            ),
            Op::Redrive {
                tenant,
                project,
                error_code,
            } => (
                "Redrive dead letters",
                format!(
                    "The envelope dead letters of <code>{}/{}</code>{} below, at most {} in emission order, are delivered again: the same signed bytes and event id (the receiver deduplicates), each as a new action linked to its original. Redriving twice sends nothing twice.",
                    esc(tenant),
                    esc(project),
                    error_code
                        .as_deref()
                        .map(|c| format!(" with error code <code>{}</code>", esc(c)))
                        .unwrap_or_default(),
                    wharf::outbound::REDRIVE_BATCH_MAX
                ),
            ),
            Op::Erase(account) => (
                "Erase a subject",
                format!(
                    "Every action whose subject is <code>{}</code> is deleted, in every state: a pending one never runs. A provider call already past its fence still reaches the provider. This cannot be undone.",
                    esc(account)
                ),
            ),
            Op::Skip {
                stream: s,
                to,
                reason,
            } => (
                "Skip a gap",
                format!(
                    "The cursor of {} moves forward to <code>{to}</code>, then through every retained sequence contiguous with it. Sequences at or below it that never arrived can still arrive (accept-reordered) until the floor passes them. Recorded in the inbox audit and the operator audit with the reason <q>{}</q>.",
                    stream(s),
                    esc(reason)
                ),
            ),
            Op::Floor {
                stream: s,
                floor,
                reason,
            } => (
                "Advance the replay floor",
                format!(
                    "The replay floor of {} rises to <code>{floor}</code>: new envelopes below it are refused as replays from now on (duplicates of retained ones still answer ignore-duplicate). The floor never goes down again. Recorded with the reason <q>{}</q>.",
                    stream(s),
                    esc(reason)
                ),
            ),
        }
    }

    fn audit_action(&self) -> &'static str {
        match self {
            Op::Admit(_) => "action-admit",
            Op::Refuse(_) => "action-refuse",
            Op::Cancel(_) => "action-cancel",
            Op::Pause { .. } => "kind-pause",
            Op::Resume { .. } => "kind-resume",
            Op::Redrive { .. } => "dead-letters-redrive",
            Op::Erase(_) => "subject-erase",
            Op::Skip { .. } => "stream-skip",
            Op::Floor { .. } => "stream-advance-floor",
        }
    }

    /// The action it is done to, if one: the audit row names it so `wharf audit --action`
    /// finds the console's admit or refuse beside the library's own rows.
    fn action_id(&self) -> Option<i64> {
        match self {
            Op::Admit(id) | Op::Refuse(id) | Op::Cancel(id) => Some(*id),
            _ => None,
        }
    }

    fn target(&self) -> String {
        let stream = |s: &StreamId| {
            format!(
                "{}/{}/{}:{}",
                s.tenant,
                s.project,
                s.producer.kind(),
                s.producer.id()
            )
        };
        match self {
            Op::Admit(id) | Op::Refuse(id) | Op::Cancel(id) => format!("action {id}"),
            Op::Pause { kind, tenant, .. } | Op::Resume { kind, tenant } => match tenant {
                Some(t) => format!("kind {kind} tenant {t}"),
                None => format!("kind {kind}"),
            },
            Op::Redrive {
                tenant, project, ..
            } => format!("dead letters {tenant}/{project}"),
            Op::Erase(account) => format!("subject {account}"),
            Op::Skip { stream: s, .. } | Op::Floor { stream: s, .. } => stream(s),
        }
    }
}

/// `GET /confirm?op=…`: what the action will do, and the form that does it. The read-only role
/// is told it cannot act, and gets no form.
pub(super) async fn confirm(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    RawQuery(raw): RawQuery,
) -> Result<Html<String>, Failure> {
    let signed = c.signed_in(&headers, &correlation).await?;
    let p = Params::from_query(raw);
    let op = Op::parse(&p).map_err(|e| Failure::bad_request(&c, e, &correlation))?;
    if signed.session.role != Role::Operator {
        return Err(c.read_only_refusal(&correlation));
    }
    let (title, mut what) = op.describe();
    if let Op::Redrive {
        tenant,
        project,
        error_code,
    } = &op
    {
        // Dry run first: the confirmation lists what the button would redrive.
        let filter = redrive_filter(tenant, project, error_code.as_deref());
        what.push_str(&redrive_preview(&c, &filter, &signed, &correlation).await?);
    }
    let mut form = format!(
        "<div class=\"confirm\"><p>{what}</p><form method=\"post\" action=\"{}/do\">{}",
        esc(&c.base),
        hidden("csrf", &signed.csrf)
    );
    for (name, value) in op.fields() {
        form.push_str(&hidden(name, &value));
    }
    form.push_str(&format!(
        "<button type=\"submit\" class=\"danger\" id=\"confirm\">Yes, {}</button> <a href=\"{}\">Cancel</a></form></div>",
        esc(&title.to_lowercase()),
        esc(&c.base)
    ));
    Ok(Html(html::page(
        &c.base,
        title,
        Some(&signed.viewer()),
        false,
        &form,
    )))
}

/// The dry run of a redrive, as the list the confirmation shows (nothing is written).
async fn redrive_preview(
    c: &Console,
    filter: &wharf::outbound::RedriveFilter,
    signed: &super::Signed,
    correlation: &CorrelationId,
) -> Result<String, Failure> {
    let api = |e: ApiError| Failure::api(c, e);
    let who = outbox::Operator::new(signed.session.operator.as_str(), correlation.0.clone());
    let mut tx = actions::begin(&c.pool, correlation).await.map_err(api)?;
    let would = wharf::outbound::redrive(&mut tx, &c.registry, &who, filter, true)
        .await
        .map_err(|e| api(crate::operator::redrive_error(e, correlation)))?;
    drop(tx);
    if would.is_empty() {
        return Ok("</p><p><strong>Nothing to redrive</strong>: no envelope dead letter of this scope is waiting (each is redriven at most once).".to_owned());
    }
    let rows: String = would
        .iter()
        .map(|r| {
            format!(
                "<li>action <code>{}</code>, event <code>{}</code>, {}</li>",
                r.original_id,
                esc(&r.event_id),
                esc(r.error_code.as_deref().unwrap_or("-"))
            )
        })
        .collect();
    Ok(format!(
        "</p><p>This would redrive <strong id=\"redrive-count\">{}</strong>:</p><ul>{rows}</ul><p>",
        would.len()
    ))
}

/// `POST /do`: the CSRF token, then the role, then the action and its audit row in one
/// transaction. Answers 303 to the page that shows the result.
pub(super) async fn perform(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Failure> {
    let p = Params::from_bytes(&body);
    let signed = c.may_act(&headers, p.get("csrf"), &correlation).await?;
    let op = Op::parse(&p).map_err(|e| Failure::bad_request(&c, e, &correlation))?;
    let api = |e: ApiError| Failure::api(&c, e);
    let mut tx = actions::begin(&c.pool, &correlation).await.map_err(api)?;
    let base = &c.base;
    let operator = signed.session.operator.as_str();
    let (detail, back) = match &op {
        Op::Admit(id) | Op::Refuse(id) => {
            let (decided, verb) = if matches!(op, Op::Admit(_)) {
                (outbox::admit_proposal(&mut tx, *id).await, "admitted")
            } else {
                (outbox::refuse_proposal(&mut tx, *id).await, "refused")
            };
            decided.map_err(|e| api(actions::before_commit(e, &correlation)))?;
            (
                verb.to_owned(),
                format!("{base}/actions/{id}?notice={verb}"),
            )
        }
        Op::Cancel(id) => {
            let who = outbox::Operator::new(operator, correlation.0.clone());
            let cancelled = outbox::cancel(&mut tx, &who, *id)
                .await
                .map_err(|e| api(crate::operator::before_commit(e, &correlation)))?;
            (
                format!("cancelled (was {})", cancelled.from),
                format!("{base}/actions/{id}?notice=cancelled"),
            )
        }
        Op::Pause { kind, tenant, note } => {
            let who = outbox::Operator::new(operator, correlation.0.clone());
            let paused = outbox::pause(&mut tx, &c.registry, &who, kind, tenant.as_deref(), note)
                .await
                .map_err(|e| api(crate::operator::before_commit(e, &correlation)))?;
            let what = if paused.created {
                "paused"
            } else {
                "already paused"
            };
            (what.to_owned(), format!("{base}?notice=paused"))
        }
        Op::Resume { kind, tenant } => {
            let who = outbox::Operator::new(operator, correlation.0.clone());
            let resumed = outbox::resume(&mut tx, &c.registry, &who, kind, tenant.as_deref())
                .await
                .map_err(|e| api(crate::operator::before_commit(e, &correlation)))?;
            let what = if resumed.ended.is_some() {
                "resumed"
            } else {
                "was not paused"
            };
            (what.to_owned(), format!("{base}?notice=resumed"))
        }
        Op::Redrive {
            tenant,
            project,
            error_code,
        } => {
            let who = outbox::Operator::new(operator, correlation.0.clone());
            let filter = redrive_filter(tenant, project, error_code.as_deref());
            let redriven = wharf::outbound::redrive(&mut tx, &c.registry, &who, &filter, false)
                .await
                .map_err(|e| api(crate::operator::redrive_error(e, &correlation)))?;
            (
                format!(
                    "redrove {}{}",
                    redriven.len(),
                    error_code
                        .as_deref()
                        .map(|c| format!(" with error code {c}"))
                        .unwrap_or_default()
                ),
                format!(
                    "{base}/dead-letters?tenant={}&project={}&notice=redriven&redriven={}",
                    html::query_value(tenant),
                    html::query_value(project),
                    redriven.len()
                ),
            )
        }
        Op::Erase(account) => {
            crate::extract::nul_free("account", account, &correlation).map_err(api)?;
            let deleted = outbox::erase_subject(&mut *tx, account)
                .await
                .map_err(|e| api(actions::before_commit(e, &correlation)))?;
            (
                format!("deleted {deleted} actions"),
                format!("{base}/actions?notice=erased&deleted={deleted}"),
            )
        }
        Op::Skip { stream, to, reason } => {
            let change = wharf::inbox::streams::skip(&mut tx, stream, *to, operator, reason)
                .await
                .map_err(|e| api(inbox_not_committed(e, &correlation)))?;
            (
                format!("cursor {} -> {}: {reason}", change.before, change.after),
                stream_page(base, stream, "skipped"),
            )
        }
        Op::Floor {
            stream,
            floor,
            reason,
        } => {
            let change =
                wharf::inbox::streams::advance_floor(&mut tx, stream, *floor, operator, reason)
                    .await
                    .map_err(|e| api(inbox_not_committed(e, &correlation)))?;
            (
                format!("floor {} -> {}: {reason}", change.before, change.after),
                stream_page(base, stream, "floor-advanced"),
            )
        }
    };
    let target = op.target();
    wharf::console::record(
        &mut *tx,
        Entry {
            session: &signed.session,
            action: op.audit_action(),
            target: &target,
            detail: &detail,
            correlation_id: &correlation.0,
            action_id: op.action_id(),
        },
    )
    .await
    .map_err(|e| api(console_not_committed(e, &correlation)))?;
    actions::commit(tx, &correlation).await.map_err(api)?;
    Ok(see_other(&back))
}

/// " for tenant <code>t</code>", or " for every tenant".
fn for_tenant(tenant: Option<&str>) -> String {
    match tenant {
        Some(t) => format!(" for tenant <code>{}</code>", esc(t)),
        None => " for every tenant".to_owned(),
    }
}

/// The redrive an [`Op::Redrive`] asks for: one batch, the most the library takes.
fn redrive_filter(
    tenant: &str,
    project: &str,
    error_code: Option<&str>,
) -> wharf::outbound::RedriveFilter {
    wharf::outbound::RedriveFilter {
        tenant: tenant.to_owned(),
        project: project.to_owned(),
        error_code: error_code.map(str::to_owned),
        ended_after: None,
        limit: wharf::outbound::REDRIVE_BATCH_MAX,
    }
}

fn stream_page(base: &str, stream: &StreamId, notice: &str) -> String {
    format!(
        "{base}/inbox/{}/{}?notice={notice}",
        html::query_value(&stream.tenant),
        html::query_value(&stream.project)
    )
}

fn sign_in_page(c: &Console, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"error\">{}</p>", esc(e)))
        .unwrap_or_default();
    let body = format!(
        "{error}<form method=\"post\" action=\"{}/sign-in\" class=\"confirm\">\
<p><label>Your name (recorded with everything you do)<br><input name=\"operator\" id=\"operator\" required maxlength=\"128\" pattern=\"[A-Za-z0-9][A-Za-z0-9._:-]*\" autocomplete=\"username\"></label></p>\
<p><label>Operator token, or the read-only token<br><input name=\"token\" id=\"token\" type=\"password\" required autocomplete=\"current-password\"></label></p>\
<p><button type=\"submit\" id=\"sign-in\">Sign in</button></p>\
<p class=\"hint\">The token is the server's <code>operator_token</code> (acts) or <code>operator_token_read_only</code> (only sees). The session ends after {} or when you sign out.</p></form>",
        esc(&c.base),
        html::age((c.session_ms / 1000) as i64)
    );
    html::page(&c.base, "Sign in", None, false, &body)
}

/// `GET /sign-in`.
pub(super) async fn sign_in_form(State(c): State<Console>) -> Html<String> {
    Html(sign_in_page(&c, None))
}

/// `POST /sign-in`: the token decides the role; the name says who. A wrong token answers 401
/// and stores nothing.
pub(super) async fn sign_in(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: Bytes,
) -> Result<Response, Failure> {
    // Without connect info every client shares one bucket: limited too much, never too little.
    let peer = connect.map_or(
        IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        |Extension(ConnectInfo(a))| a.ip(),
    );
    if let Err(wait) = c.sign_ins.check(&peer) {
        let page = sign_in_page(
            &c,
            Some(&format!(
                "Too many sign-in attempts from your address; try again in {} s.",
                wait.as_secs().max(1)
            )),
        );
        return Ok((
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, wait.as_secs().max(1).to_string())],
            Html(page),
        )
            .into_response());
    }
    let p = Params::from_bytes(&body);
    let token = p.text("token");
    let role = if c.operator.matches(token) {
        Role::Operator
    } else if c.read_only.matches(token) {
        Role::ReadOnly
    } else {
        let page = sign_in_page(
            &c,
            Some(
                "That is neither the operator token nor the read-only token (or the server has none configured).",
            ),
        );
        return Ok((StatusCode::UNAUTHORIZED, Html(page)).into_response());
    };
    let api = |e: ApiError| Failure::api(&c, e);
    let mut tx = actions::begin(&c.pool, &correlation).await.map_err(api)?;
    let signed_in = wharf::console::sign_in(&mut tx, p.text("operator"), role, c.session_ms).await;
    let (session_token, session) = match signed_in {
        Ok(s) => s,
        Err(wharf::console::Error::Invalid { what, why }) => {
            let page = sign_in_page(&c, Some(&format!("Your {what} {why}.")));
            return Ok((StatusCode::BAD_REQUEST, Html(page)).into_response());
        }
        Err(e) => return Err(api(console_not_committed(e, &correlation))),
    };
    wharf::console::record(
        &mut *tx,
        Entry {
            session: &session,
            action: "sign-in",
            target: "console",
            detail: &format!("session until {}", html::time(&session.expires_at)),
            correlation_id: &correlation.0,
            action_id: None,
        },
    )
    .await
    .map_err(|e| api(console_not_committed(e, &correlation)))?;
    actions::commit(tx, &correlation).await.map_err(api)?;
    let mut response = see_other(&c.base);
    response.headers_mut().insert(
        header::SET_COOKIE,
        c.cookie(&headers, session_token.expose(), c.session_ms / 1000),
    );
    Ok(response)
}

/// `POST /sign-out` (CSRF-checked; any role may sign out): ends the session, clears the cookie.
pub(super) async fn sign_out(
    State(c): State<Console>,
    correlation: CorrelationId,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Failure> {
    let p = Params::from_bytes(&body);
    let signed: Signed = c.signed_in(&headers, &correlation).await?;
    let csrf_ok = p
        .get("csrf")
        .is_some_and(|g| crate::auth::constant_time_eq(g.as_bytes(), signed.csrf.as_bytes()));
    if !csrf_ok {
        return Err(Failure::page(
            &c,
            StatusCode::FORBIDDEN,
            "csrf",
            "this form did not carry the session's CSRF token",
            &correlation,
        ));
    }
    let api = |e: ApiError| Failure::api(&c, e);
    let mut tx = actions::begin(&c.pool, &correlation).await.map_err(api)?;
    wharf::console::sign_out(&mut *tx, &signed.token)
        .await
        .map_err(|e| api(console_not_committed(e, &correlation)))?;
    wharf::console::record(
        &mut *tx,
        Entry {
            session: &signed.session,
            action: "sign-out",
            target: "console",
            detail: "",
            correlation_id: &correlation.0,
            action_id: None,
        },
    )
    .await
    .map_err(|e| api(console_not_committed(e, &correlation)))?;
    actions::commit(tx, &correlation).await.map_err(api)?;
    let mut response = see_other(&format!("{}/sign-in", c.base));
    response
        .headers_mut()
        .insert(header::SET_COOKIE, c.cookie(&headers, "", 0));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_survives_its_trip_through_the_confirmation_form() {
        let stream = StreamId {
            tenant: "acme".into(),
            project: "p1".into(),
            producer: Producer::Device("d1".into()),
        };
        for op in [
            Op::Admit(7),
            Op::Refuse(8),
            Op::Erase("acct-1".into()),
            Op::Skip {
                stream: stream.clone(),
                to: 9,
                reason: "lost".into(),
            },
            Op::Floor {
                stream,
                floor: 3,
                reason: "old".into(),
            },
        ] {
            let form = serde_urlencoded::to_string(op.fields()).unwrap();
            assert_eq!(
                Op::parse(&Params::from_bytes(form.as_bytes())),
                Ok(op.clone()),
                "{form}"
            );
        }
    }

    #[test]
    fn a_bad_action_names_what_is_wrong() {
        let check = |form: &str, expected: &str| {
            let got = Op::parse(&Params::from_bytes(form.as_bytes())).unwrap_err();
            assert!(got.contains(expected), "{form}: {got}");
        };
        check("", "op is required");
        check("op=launch", "no operator action");
        check("op=admit", "id is required");
        check("op=admit&id=x", "id must be a number");
        check(
            "op=skip&tenant=a&project=p&producer_kind=robot&producer_id=d&to=1&reason=r",
            "producer_kind",
        );
        check(
            "op=floor&tenant=a&project=p&producer_kind=device&producer_id=d&reason=r",
            "floor is required",
        );
    }
}
