//! `/openapi.json`: the OpenAPI 3.1 document for every route wharf serves, generated from the
//! code with utoipa.
//!
//! Owns: the document's top-level facts (info, tags, the two security schemes), the list of
//! operations it holds (`Api`), and the few schemas no Rust type of the API describes by
//! itself: the tenant/project identity and the envelope, whose bytes a handler passes through
//! untouched (the signature covers them as sent), so no type of this crate parses one. The
//! core's closed sets (outcomes, states, stop reasons) have their schemas in
//! `wharf_core::openapi`, built from their own `ALL` lists.
//!
//! Must not know: what an operation answers. That is written beside its handler
//! (`#[utoipa::path]`), and every body is described by the type the handler serializes or
//! parses (`ToSchema`), the error shape by [`crate::error`]'s own body type. The test
//! `tests/it/openapi.rs` holds the document to the routes the router really serves, and checks
//! its structure (every `$ref` resolves, every operation answers the error shape, every path
//! parameter is declared).

use std::borrow::Cow;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

/// The security scheme of a tenant's producer credential.
pub const TENANT_CREDENTIAL: &str = "tenantCredential";
/// The security scheme of the server's operator token.
pub const OPERATOR_TOKEN: &str = "operatorToken";

/// The document: every operation of the HTTP API (SPEC §4). The console's HTML pages are not
/// part of it: they are a browser's, not a client's.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "wharf",
        version = "1",
        description = "Durable outbox for side effects and signed-envelope inbox. Errors are {code, reason, correlation_id}; every response carries x-correlation-id."
    ),
    paths(
        crate::ingest::single,
        crate::ingest::batch,
        crate::dead_letters::list,
        crate::actions::enqueue,
        crate::operator::list,
        crate::actions::show,
        crate::actions::admit,
        crate::actions::refuse,
        crate::actions::erase,
        crate::webhook_keys::list,
        crate::health::healthz,
        crate::health::ready,
        crate::health::metrics,
        document_json,
        crate::operator::cancel,
        crate::operator::resolve,
        crate::operator::resolutions,
        crate::operator::audit,
        crate::operator::pause,
        crate::operator::resume,
        crate::operator::pauses,
        crate::operator::redrive,
        crate::signing_keys::list,
    ),
    components(schemas(crate::error::ErrorBody)),
    modifiers(&Security),
    tags(
        (name = "inbox", description = "signed controlplane/v1 envelopes in"),
        (name = "outbox", description = "actions: enqueue, inspect, operate"),
        (name = "outbound", description = "the server's own signed envelopes out"),
        (name = "operations", description = "health, readiness, metrics, this document"),
    )
)]
pub(crate) struct Api;

/// Adds the security schemes, which the derive cannot name with their descriptions. No
/// `servers` either way: the document is served by the server it describes, so the relative
/// default (`/`) is right wherever it runs, behind whatever proxy.
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let bearer = |description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(description))
                    .build(),
            )
        };
        components.add_security_scheme(
            TENANT_CREDENTIAL,
            bearer("a tenant credential issued by `wharf credential issue`"),
        );
        components.add_security_scheme(OPERATOR_TOKEN, bearer("the server's operator token"));
        for item in openapi.paths.paths.values_mut() {
            for operation in [
                &mut item.post,
                &mut item.put,
                &mut item.patch,
                &mut item.delete,
            ] {
                if let Some(body) = operation.as_mut().and_then(|o| o.request_body.as_mut()) {
                    optional_is_absent(body);
                }
            }
        }
    }
}

/// An optional body (`Option<T>` in `request_body`) is described by utoipa as "T or `null`",
/// but these handlers take an *absent* body, not the JSON `null` (which they refuse as not an
/// object): keep the request body not required, and describe what a present one must be.
fn optional_is_absent(body: &mut utoipa::openapi::request_body::RequestBody) {
    if body.required == Some(utoipa::openapi::Required::True) {
        return;
    }
    for content in body.content.values_mut() {
        let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema else {
            continue;
        };
        let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == Type::Null.into());
        let mut present = one_of.items.iter().filter(|s| !is_null(s));
        if let (Some(schema), None) = (present.next(), present.next()) {
            content.schema = Some(schema.clone());
        }
    }
}

/// The document as a value.
pub fn document() -> utoipa::openapi::OpenApi {
    Api::openapi()
}

/// `GET /openapi.json`. The document is built once, when the router is, not per request.
pub fn routes() -> Router {
    let text: Arc<str> = document()
        .to_pretty_json()
        .expect("an OpenAPI document always serializes")
        .into();
    Router::new().route(
        "/openapi.json",
        get(move || {
            let text = text.clone();
            async move { document_json(text) }
        }),
    )
}

/// This document, as `routes` serves it.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "operations",
    summary = "This document",
    responses(
        (status = 200, description = "OpenAPI 3.1", content_type = "application/json"),
        (status = 503, description = "`starting`: the server is still waiting for its database", body = crate::error::ErrorBody),
    )
)]
fn document_json(text: Arc<str>) -> impl axum::response::IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        text.to_string(),
    )
}

/// Implements `ToSchema` for a marker type whose schema a function builds.
macro_rules! named_schema {
    ($marker:ident, $name:literal, $schema:expr) => {
        impl PartialSchema for $marker {
            fn schema() -> RefOr<Schema> {
                $schema
            }
        }
        impl ToSchema for $marker {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

/// A tenant or project identity (SPEC §3.1), as `wharf_core::envelope` checks it.
pub(crate) struct Identity;
named_schema!(
    Identity,
    "Identity",
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"))
        .max_length(Some(wharf_core::envelope::IDENTITY_BYTES_MAX))
        .into()
);

/// The only signature algorithm of `controlplane/v1`.
#[derive(ToSchema, serde::Deserialize)]
#[allow(
    dead_code,
    reason = "describes the wire; the inbox parses the bytes itself"
)]
pub(crate) enum Algorithm {
    Ed25519,
}

// The inbox decodes the bytes itself (`wharf_core::envelope`); this type only describes them, and
// a test holds its fields to `wharf_core::envelope::FIELDS`. Doc comments here are the schema's
// descriptions, for clients.
/// A signed `controlplane/v1` envelope, closed at every level (no other field, here or in
/// `integrity`).
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[schema(as = Envelope)]
#[allow(
    dead_code,
    reason = "describes the wire; the inbox parses the bytes itself"
)]
pub(crate) struct EnvelopeSchema {
    /// Must be 1; another value is refused `refuse-incompatible` / `schema`.
    #[schema(minimum = 1, maximum = 1)]
    schema_version: i64,
    /// A registered event type; its payload's schema is closed.
    event_type: String,
    #[schema(value_type = Identity)]
    tenant_id: String,
    #[schema(value_type = Identity)]
    project_id: String,
    /// A ULID, 26 characters of Crockford base32.
    #[schema(pattern = "^[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    event_id: String,
    /// The producer's sequence in its stream, from 1.
    #[schema(minimum = 1)]
    producer_sequence: u64,
    /// RFC 3339.
    #[schema(format = DateTime)]
    occurred_at: String,
    #[schema(min_length = 1, max_length = 256)]
    idempotency_key: String,
    #[schema(min_length = 1, max_length = 64)]
    producer_version: String,
    /// Closed per `event_type`; at most 1 MiB; integers only.
    #[schema(value_type = Object)]
    payload: serde_json::Value,
    integrity: IntegritySchema,
}

/// The envelope's `integrity` member.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[schema(as = Integrity)]
#[allow(
    dead_code,
    reason = "describes the wire; the inbox parses the bytes itself"
)]
pub(crate) struct IntegritySchema {
    algorithm: Algorithm,
    #[schema(min_length = 1, max_length = 128)]
    key_id: String,
    /// Standard base64 of 64 bytes: Ed25519 over the RFC 8785 canonical JSON of the envelope
    /// with `signature` set to `""`.
    signature: String,
}

/// The body of the batch endpoint.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[schema(as = BatchRequest)]
#[allow(
    dead_code,
    reason = "describes the wire; the inbox parses the bytes itself"
)]
pub(crate) struct BatchRequestSchema {
    /// Envelopes of one stream, at most the configured batch bound.
    envelopes: Vec<EnvelopeSchema>,
}
