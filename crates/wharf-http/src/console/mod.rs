//! The operator console: server-rendered HTML pages at `/console` (configurable), served by
//! `wharf serve` beside the API.
//!
//! Owns: sign-in (the operator token or the read-only token, exchanged for a session cookie
//! that is HttpOnly, SameSite=Strict, Secure when served over TLS, and ends after a bounded
//! lifetime), the CSRF check of every state-changing form, the read-only role's refusal of
//! every change, the confirmation step before each operator action, and the pages themselves
//! (`pages`, `act`, drawn by `html`). Its stylesheet and script are compiled into the
//! binary (`assets/`): nothing is fetched from anywhere else.
//!
//! Must not know: SQL or any business rule. Reads go through `wharf::console` (bounded, in a
//! read-only transaction with a statement timeout); every action goes through the same library
//! function and the same error mapping as the HTTP admin API (`outbox::admit_proposal`, `refuse_proposal`,
//! `erase_subject`; `inbox::streams::skip`, `advance_floor`), in a transaction that also writes
//! the operator audit row, committed with [`wharf::commit::commit`].

mod act;
mod html;
mod pages;

use std::sync::Arc;

use axum::Router;
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use wharf::console::{Role, Session, SessionToken};

use crate::auth::{OperatorToken, constant_time_eq};
use crate::error::{ApiError, CorrelationId};

/// Where the console is served when the configuration says nothing.
pub const PATH_DEFAULT: &str = "/console";
/// The session cookie's name.
pub const COOKIE: &str = "wharf_console";
/// Bytes a console form may have: a few short fields.
pub const FORM_BYTES_MAX: usize = 16 * 1024;
/// Sign-in attempts one client address may make at once, then one every
/// [`SIGN_IN_REFILL_S`] seconds: enough for a person who mistypes, far too few to guess a token.
pub const SIGN_IN_BURST: u32 = 10;
/// Seconds per further sign-in attempt once the burst is spent.
pub const SIGN_IN_REFILL_S: f64 = 6.0;
/// Client addresses the sign-in limiter remembers at most.
pub const SIGN_IN_PEERS_MAX: usize = 10_000;

/// How the console is served.
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// The path prefix (`/console`): starts with `/`, no trailing `/`.
    pub path: String,
    /// Session lifetime in milliseconds (1..=[`wharf::console::SESSION_MS_MAX`]).
    pub session_ms: u64,
    /// Mark the cookie `Secure` always (behind a TLS-terminating proxy that does not say so
    /// with `X-Forwarded-Proto: https`, which marks it too).
    pub secure_cookie: bool,
}

impl Default for ConsoleConfig {
    fn default() -> ConsoleConfig {
        ConsoleConfig {
            path: PATH_DEFAULT.to_owned(),
            session_ms: wharf::console::SESSION_MS_DEFAULT,
            secure_cookie: false,
        }
    }
}

/// Why a console configuration is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The path is not `/` followed by 1..=64 of `[A-Za-z0-9._-/]`, or ends with `/`.
    #[error(
        "console path must look like /console (1..=64 of A-Za-z0-9._-/ after the first /, no trailing /), not {0:?}"
    )]
    Path(String),
    /// The session lifetime is 0 or above the maximum.
    #[error("console session_ms must be 1..={max}, not {0}", max = wharf::console::SESSION_MS_MAX)]
    SessionMs(u64),
}

impl ConsoleConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rest = self.path.strip_prefix('/').unwrap_or("");
        let ok = !rest.is_empty()
            && rest.len() <= 64
            && !rest.ends_with('/')
            && !rest.contains("//")
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b));
        if !ok {
            return Err(ConfigError::Path(self.path.clone()));
        }
        if self.session_ms == 0 || self.session_ms > wharf::console::SESSION_MS_MAX {
            return Err(ConfigError::SessionMs(self.session_ms));
        }
        Ok(())
    }
}

#[derive(Clone)]
pub(crate) struct Console {
    pool: sqlx::PgPool,
    /// The kinds, for pausing and redriving (the library checks a kind against them).
    registry: Arc<wharf::outbox::Registry>,
    base: Arc<str>,
    session_ms: u64,
    secure_cookie: bool,
    operator: OperatorToken,
    read_only: OperatorToken,
    sign_ins: Arc<wharf::inbox::Limiter<std::net::IpAddr>>,
}

/// The console's routes under `config.path`. `operator` signs in with the operator role (the
/// admin API's token), `read_only` with the read-only role; with neither set nobody can sign
/// in.
pub fn routes(
    pool: sqlx::PgPool,
    registry: Arc<wharf::outbox::Registry>,
    operator: OperatorToken,
    read_only: OperatorToken,
    config: ConsoleConfig,
) -> Result<Router, ConfigError> {
    config.validate()?;
    let console = Console {
        pool,
        registry,
        base: Arc::from(config.path.as_str()),
        session_ms: config.session_ms,
        secure_cookie: config.secure_cookie,
        operator,
        read_only,
        sign_ins: Arc::new(wharf::inbox::Limiter::new(
            wharf::inbox::LimitPolicy {
                rate_per_s: 1.0 / SIGN_IN_REFILL_S,
                burst: SIGN_IN_BURST,
            },
            SIGN_IN_PEERS_MAX,
        )),
    };
    let inner = Router::new()
        .route("/", get(pages::overview))
        .route("/sign-in", get(act::sign_in_form).post(act::sign_in))
        .route("/sign-out", post(act::sign_out))
        .route("/actions", get(pages::actions))
        .route("/actions/{id}", get(pages::action))
        .route("/lanes", get(pages::lanes))
        .route("/in-doubt", get(pages::in_doubt))
        .route("/dead-letters", get(pages::dead_letters))
        .route("/inbox", get(pages::inbox))
        .route("/inbox/{tenant}", get(pages::tenant))
        .route("/inbox/{tenant}/{project}", get(pages::project))
        .route("/audit", get(pages::audit))
        .route("/confirm", get(act::confirm))
        .route("/do", post(act::perform))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .with_state(console)
        .layer(axum::extract::DefaultBodyLimit::max(FORM_BYTES_MAX))
        .layer(axum::middleware::map_response(harden));
    Ok(Router::new().nest(&config.path, inner))
}

/// Headers on every console answer: the page may load only its own assets, never be framed,
/// never be cached (it shows live state), and never leak its URL to another site.
async fn harden(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("assets/console.css"),
    )
}

async fn js() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        include_str!("assets/console.js"),
    )
}

/// A signed-in request: its session and the CSRF token its forms carry.
pub(crate) struct Signed {
    token: SessionToken,
    session: Session,
    csrf: String,
}

impl Signed {
    fn viewer(&self) -> html::Viewer<'_> {
        html::Viewer {
            operator: &self.session.operator,
            role: self.session.role.as_str(),
            csrf: &self.csrf,
        }
    }
}

/// A console answer that is not the page asked for: back to sign-in, or an error page.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No live session: see the sign-in page (303).
    SignIn { base: Arc<str> },
    /// An error page.
    Page {
        status: StatusCode,
        code: &'static str,
        message: String,
        correlation: String,
        base: Arc<str>,
    },
}

impl Failure {
    fn page(
        console: &Console,
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
        correlation: &CorrelationId,
    ) -> Failure {
        Failure::Page {
            status,
            code,
            message: message.into(),
            correlation: correlation.0.clone(),
            base: console.base.clone(),
        }
    }

    /// The admin API's answer, as a page: the same status, code and reason.
    fn api(console: &Console, error: ApiError) -> Failure {
        Failure::Page {
            status: error.status,
            code: error.code,
            message: error.reason,
            correlation: error.correlation_id,
            base: console.base.clone(),
        }
    }

    fn bad_request(console: &Console, message: impl Into<String>, c: &CorrelationId) -> Failure {
        Failure::page(
            console,
            StatusCode::BAD_REQUEST,
            "invalid-request",
            message,
            c,
        )
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        match self {
            Failure::SignIn { base } => see_other(&format!("{base}/sign-in")),
            Failure::Page {
                status,
                code,
                message,
                correlation,
                base,
            } => {
                let body = format!(
                    "<p class=\"error\">{}</p><p class=\"hint\">code <code>{}</code> · correlation id <code>{}</code></p><p><a href=\"{}\">Back to the overview</a></p>",
                    html::esc(&message),
                    html::esc(code),
                    html::esc(&correlation),
                    html::esc(&base)
                );
                let title = status.canonical_reason().unwrap_or("Error");
                (
                    status,
                    axum::response::Html(html::page(&base, title, None, false, &body)),
                )
                    .into_response()
            }
        }
    }
}

/// A 303 to `location`.
fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(value) => (StatusCode::SEE_OTHER, [(header::LOCATION, value)]).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// The session cookie's value in a request, when it has a well-formed one.
fn cookie_token(headers: &HeaderMap) -> Option<SessionToken> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| SessionToken::parse(value))
}

impl Console {
    /// The request's live session, or [`Failure::SignIn`].
    async fn signed_in(
        &self,
        headers: &HeaderMap,
        correlation: &CorrelationId,
    ) -> Result<Signed, Failure> {
        let Some(token) = cookie_token(headers) else {
            return Err(Failure::SignIn {
                base: self.base.clone(),
            });
        };
        let session = wharf::console::session(&self.pool, &token)
            .await
            .map_err(|e| self.read_failed(e, correlation))?
            .ok_or_else(|| Failure::SignIn {
                base: self.base.clone(),
            })?;
        let csrf = token.csrf();
        Ok(Signed {
            token,
            session,
            csrf,
        })
    }

    /// A signed-in request allowed to change things: its form's CSRF token is its session's,
    /// and its role is the operator's. Checked in that order, before anything is read.
    async fn may_act(
        &self,
        headers: &HeaderMap,
        form_csrf: Option<&str>,
        correlation: &CorrelationId,
    ) -> Result<Signed, Failure> {
        let signed = self.signed_in(headers, correlation).await?;
        let csrf_ok = form_csrf
            .is_some_and(|given| constant_time_eq(given.as_bytes(), signed.csrf.as_bytes()));
        if !csrf_ok {
            return Err(Failure::page(
                self,
                StatusCode::FORBIDDEN,
                "csrf",
                "this form did not carry the session's CSRF token; reload the page and try again",
                correlation,
            ));
        }
        if signed.session.role != Role::Operator {
            return Err(self.read_only_refusal(correlation));
        }
        Ok(signed)
    }

    fn read_only_refusal(&self, correlation: &CorrelationId) -> Failure {
        Failure::page(
            self,
            StatusCode::FORBIDDEN,
            "read-only",
            "you are signed in with the read-only role, which sees everything and changes nothing; sign in with the operator token to act",
            correlation,
        )
    }

    /// A read failed: nothing was changed, a retry may help.
    fn read_failed(&self, error: wharf::console::Error, correlation: &CorrelationId) -> Failure {
        match error {
            wharf::console::Error::Invalid { .. } => {
                Failure::bad_request(self, error.to_string(), correlation)
            }
            other => Failure::api(self, ApiError::not_committed(&other, correlation)),
        }
    }

    /// A bounded read-only transaction for one page.
    async fn read(
        &self,
        correlation: &CorrelationId,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, Failure> {
        wharf::console::begin_read(&self.pool)
            .await
            .map_err(|e| self.read_failed(e, correlation))
    }

    /// The session cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's
    /// page sends it), scoped to the console's path, `Secure` over TLS, ending with the session.
    fn cookie(&self, headers: &HeaderMap, value: &str, max_age_s: u64) -> HeaderValue {
        let tls = self.secure_cookie
            || headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.eq_ignore_ascii_case("https"));
        let text = format!(
            "{COOKIE}={value}; Path={}; Max-Age={max_age_s}; HttpOnly; SameSite=Strict{}",
            self.base,
            if tls { "; Secure" } else { "" }
        );
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_path_is_checked() {
        let check = |path: &str, ok: bool| {
            let config = ConsoleConfig {
                path: path.into(),
                ..ConsoleConfig::default()
            };
            assert_eq!(config.validate().is_ok(), ok, "{path}");
        };
        check("/console", true);
        check("/ops/console", true);
        check("/", false);
        check("", false);
        check("console", false);
        check("/console/", false);
        check("/a//b", false);
        check("/con sole", false);
        check(&format!("/{}", "a".repeat(65)), false);
    }

    #[test]
    fn only_a_well_formed_cookie_is_taken() {
        let token = "ab".repeat(32);
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}={token}").parse().unwrap(),
        );
        assert_eq!(cookie_token(&headers).unwrap().expose(), token);
        headers.insert(header::COOKIE, format!("{COOKIE}=short").parse().unwrap());
        assert!(cookie_token(&headers).is_none());
    }
}
