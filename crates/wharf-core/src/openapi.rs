//! OpenAPI schemas of the core's closed sets (feature `openapi`): action states, stop reasons
//! and inbox outcomes, each a string enum built from the type's own `ALL` list and `as_str`,
//! so the document cannot name a value the code does not have. The JSON they stand for is the
//! `Serialize` of each type (the same `as_str`).
//!
//! Must not know: HTTP. Only the schema of a value; which operation answers it is `wharf-http`'s.

use std::borrow::Cow;

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

use crate::action::{ActionState, StopReason};
use crate::inbox::Outcome;

/// A closed set of strings as a schema.
fn string_enum(values: impl IntoIterator<Item = &'static str>, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values))
        .description(Some(description))
        .into()
}

/// Implements `ToSchema` for a closed set: its name in the document, its values, its description.
macro_rules! closed_set {
    ($type:ty, $name:literal, $description:literal) => {
        impl PartialSchema for $type {
            fn schema() -> RefOr<Schema> {
                string_enum(<$type>::ALL.iter().map(|v| v.as_str()), $description)
            }
        }
        impl ToSchema for $type {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

closed_set!(ActionState, "ActionState", "an action's state (SPEC §2.2)");
closed_set!(StopReason, "StopReason", "why an action ended (SPEC §2.2)");
closed_set!(Outcome, "Outcome", "the inbox's decision (SPEC §3.5)");
