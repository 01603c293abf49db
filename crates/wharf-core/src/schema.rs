//! The closed payload-schema catalog (SPEC §3.3): schemas as data, loaded, checked, and applied.
//!
//! This module owns the schema language and the 14 built-in `controlplane/v1` schemas
//! (`crates/wharf-core/schemas/<event_type>.json`, compiled in with `include_str!`). It must not
//! know envelopes, signatures, streams or where operator files come from: a caller hands it text.
//!
//! # The schema language
//!
//! A small, closed subset of JSON Schema. Every node is an object with exactly one of `type`,
//! `enum`, `const` or `oneOf`, plus only the keywords its kind allows; annotations (`$schema`,
//! `$id`, `$comment`, `title`, `description`: strings) are allowed anywhere and ignored. Anything
//! else is refused when the schema is loaded, so a typo (`maxLenght`) can never silently loosen
//! a schema.
//!
//! | node | keywords | rules |
//! |---|---|---|
//! | `"type": "object"` | `properties`, `required`, `additionalProperties`, `x-wharf-before` | `additionalProperties` must be present and `false` (closed at every depth). `required` names only declared properties, once each. `x-wharf-before`: a list of `[earlier, later]` pairs of required `date-time` properties; the payload must have `earlier < later` as instants. |
//! | `"type": "string"` | `maxLength` (required), `minLength`, `pattern`, `format`, `byteLength` | Lengths count UTF-8 **bytes**, not characters: bounds are about storage. `pattern` must be written anchored (`^…$`) and always matches the whole string. `format` is `date-time` (RFC 3339) or `base64-bytes`, which needs `byteLength`: standard padded base64 of exactly that many bytes. |
//! | `"type": "integer"` | `minimum`, `maximum` (both required) | Inclusive. A number with a fraction never reaches here (canonical JSON refuses it). |
//! | `"type": "array"` | `items`, `maxItems` (both required), `minItems`, `uniqueItems` | Uniqueness compares canonical JSON. |
//! | `"type": "null"` | — | |
//! | `"enum": [..]` | — | Non-empty list of distinct strings. |
//! | `"const": v` | — | Exactly `v`. |
//! | `"oneOf": [a, b]` | — | Only the nullable form: exactly two branches, one `{"type": "null"}`. |
//!
//! Strings never accept U+0000, whatever the schema says: PostgreSQL `text` and `jsonb` cannot
//! store it, so accepting one would turn a bad payload into a failed commit on every retry.
//!
//! The root must be an object node. Every string and every array must be bounded, every integer
//! range closed; schemas nest at most [`SCHEMA_DEPTH_MAX`] deep, which is also what bounds the
//! depth of validation.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use base64::Engine as _;
use regex::Regex;
use serde_json::Value;

use crate::canonical::{self, CanonicalError};
use crate::envelope::{PAYLOAD_BYTES_MAX, is_event_type};

mod compile;

/// The largest schema document accepted. The built-ins are under 4 KiB each.
pub const SCHEMA_BYTES_MAX: usize = 256 * 1024;
/// The deepest schema nesting (root object = 1). v1 needs 3; validation never recurses deeper.
pub const SCHEMA_DEPTH_MAX: usize = 16;
/// Most properties one object node may declare.
pub const PROPERTIES_MAX: usize = 256;
/// Most values in one `enum`.
pub const ENUM_VALUES_MAX: usize = 256;
/// Longest `enum` value, `pattern`, annotation or canonical `const`, in bytes.
pub const SCHEMA_TEXT_BYTES_MAX: usize = 4 * 1024;
/// Largest compiled regex program, so a hostile pattern cannot eat memory.
pub const REGEX_SIZE_BYTES_MAX: usize = 1024 * 1024;
/// Largest `maxLength`: no string can be longer than the payload that holds it.
pub const STRING_BYTES_MAX: usize = PAYLOAD_BYTES_MAX;
/// Largest `maxItems`. Also bounds the work of `uniqueItems`.
pub const ITEMS_MAX: usize = 65_536;
/// Largest `byteLength` of a `base64-bytes` string.
pub const BYTE_LENGTH_MAX: usize = 65_536;
/// Most event types a catalog holds (built-ins included).
pub const CATALOG_TYPES_MAX: usize = 1024;
/// Longest JSON-pointer token an error repeats from a payload key, so a hostile key cannot
/// flood a log.
pub const POINTER_TOKEN_BYTES_MAX: usize = 64;

/// The v1 event types and their schema files, in SPEC order.
pub const BUILTIN: [(&str, &str); 14] = [
    ("installation", include_str!("../schemas/installation.json")),
    ("repository", include_str!("../schemas/repository.json")),
    (
        "task_proposal",
        include_str!("../schemas/task_proposal.json"),
    ),
    ("run_summary", include_str!("../schemas/run_summary.json")),
    ("approval", include_str!("../schemas/approval.json")),
    (
        "policy_bundle",
        include_str!("../schemas/policy_bundle.json"),
    ),
    ("sync_cursor", include_str!("../schemas/sync_cursor.json")),
    (
        "device_registration",
        include_str!("../schemas/device_registration.json"),
    ),
    (
        "project_registration",
        include_str!("../schemas/project_registration.json"),
    ),
    ("role_bundle", include_str!("../schemas/role_bundle.json")),
    (
        "event_summary",
        include_str!("../schemas/event_summary.json"),
    ),
    ("budget_state", include_str!("../schemas/budget_state.json")),
    ("agent_state", include_str!("../schemas/agent_state.json")),
    (
        "gate_evidence",
        include_str!("../schemas/gate_evidence.json"),
    ),
];

/// Why a schema document was refused at load. All are properties of the document: fix the file;
/// retrying never helps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaDocError {
    /// The document is larger than [`SCHEMA_BYTES_MAX`].
    #[error("schema document is {bytes} bytes, more than {bytes_max}")]
    TooLarge {
        /// Its length.
        bytes: usize,
        /// [`SCHEMA_BYTES_MAX`].
        bytes_max: usize,
    },
    /// The document is not strict JSON (duplicate keys and floats included).
    #[error("schema document is not strict JSON: {0}")]
    Json(#[from] CanonicalError),
    /// The document breaks a rule of the schema language (see the module docs).
    #[error("schema document invalid at `{pointer}`: {problem}")]
    Invalid {
        /// JSON pointer into the schema document.
        pointer: String,
        /// The rule it breaks.
        problem: &'static str,
    },
    /// The event type name is not `^[a-z][a-z0-9_]{0,63}$`.
    #[error("event type name must match ^[a-z][a-z0-9_]{{0,63}}$")]
    EventTypeName,
    /// The catalog already has a schema for this event type. Replacing one at run time would
    /// change what old, retained events mean; build a new catalog instead.
    #[error("event type `{event_type}` already has a schema")]
    AlreadyRegistered {
        /// The event type.
        event_type: String,
    },
    /// The catalog holds [`CATALOG_TYPES_MAX`] types already.
    #[error("catalog is full ({types_max} event types)")]
    CatalogFull {
        /// [`CATALOG_TYPES_MAX`].
        types_max: usize,
    },
}

/// Why a payload was refused. Both are properties of the envelope and the catalog; the same
/// envelope is refused again unless an operator changes the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// No schema is registered for this event type. Reason `event-type`. A newer producer is the
    /// usual cause; it may succeed once the operator adds the schema.
    #[error("unknown event type")]
    UnknownEventType,
    /// The payload breaks its schema at `pointer`. Reason `payload`.
    #[error("payload invalid at `{pointer}`: {rule}")]
    Violation {
        /// JSON pointer into the payload (`""` is the payload itself).
        pointer: String,
        /// What is wrong there.
        rule: Rule,
    },
}

impl SchemaError {
    /// The stable reason: `event-type` or `payload`.
    pub fn reason(&self) -> &'static str {
        match self {
            SchemaError::UnknownEventType => "event-type",
            SchemaError::Violation { .. } => "payload",
        }
    }
}

/// The rule a payload value broke. Carries bounds, never payload content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rule {
    /// The value has the wrong JSON type.
    #[error("must be {expected}")]
    Type {
        /// `object`, `string`, `integer`, `array`, `null`.
        expected: &'static str,
    },
    /// A required property is absent (the pointer names it).
    #[error("required property is missing")]
    Missing,
    /// A property the schema does not declare (the pointer names it).
    #[error("property is not allowed")]
    Unknown,
    /// A string is shorter than `minLength` bytes.
    #[error("must be at least {min} bytes")]
    MinLength {
        /// `minLength`.
        min: usize,
    },
    /// A string is longer than `maxLength` bytes.
    #[error("must be at most {max} bytes")]
    MaxLength {
        /// `maxLength`.
        max: usize,
    },
    /// A string holds U+0000.
    #[error("must not contain U+0000")]
    Nul,
    /// A string does not match `pattern`.
    #[error("does not match the pattern")]
    Pattern,
    /// A string is not an RFC 3339 date-time.
    #[error("must be an RFC 3339 date-time")]
    DateTime,
    /// A string is not standard base64 of `bytes` bytes.
    #[error("must be standard base64 of {bytes} bytes")]
    Base64Bytes {
        /// `byteLength`.
        bytes: usize,
    },
    /// A string is not one of the `enum` values.
    #[error("must be one of the allowed values")]
    Enum,
    /// The value is not the `const`.
    #[error("must be the constant value")]
    Const,
    /// An integer is below `minimum`.
    #[error("must be at least {min}")]
    Minimum {
        /// `minimum`.
        min: i128,
    },
    /// An integer is above `maximum`.
    #[error("must be at most {max}")]
    Maximum {
        /// `maximum`.
        max: i128,
    },
    /// An array has fewer than `minItems` items.
    #[error("must have at least {min} items")]
    MinItems {
        /// `minItems`.
        min: usize,
    },
    /// An array has more than `maxItems` items.
    #[error("must have at most {max} items")]
    MaxItems {
        /// `maxItems`.
        max: usize,
    },
    /// An array with `uniqueItems` repeats an item (the pointer names the repeat).
    #[error("repeats an earlier item")]
    Duplicate,
    /// An `x-wharf-before` pair is not strictly increasing (the pointer names the later one).
    #[error("must be later than the property it follows")]
    Order,
    /// The payload nests deeper than any schema allows.
    #[error("nests too deep")]
    TooDeep,
}

impl Rule {
    /// A stable short name, for metrics and audit details.
    pub fn as_str(&self) -> &'static str {
        match self {
            Rule::Type { .. } => "type",
            Rule::Missing => "required",
            Rule::Unknown => "additional-property",
            Rule::MinLength { .. } => "min-length",
            Rule::MaxLength { .. } => "max-length",
            Rule::Nul => "nul",
            Rule::Pattern => "pattern",
            Rule::DateTime => "date-time",
            Rule::Base64Bytes { .. } => "base64-bytes",
            Rule::Enum => "enum",
            Rule::Const => "const",
            Rule::Minimum { .. } => "minimum",
            Rule::Maximum { .. } => "maximum",
            Rule::MinItems { .. } => "min-items",
            Rule::MaxItems { .. } => "max-items",
            Rule::Duplicate => "unique-items",
            Rule::Order => "order",
            Rule::TooDeep => "depth",
        }
    }
}

/// One compiled, checked schema.
#[derive(Debug, Clone)]
pub struct Schema {
    root: Node,
}

#[derive(Debug, Clone)]
enum Node {
    Object(Box<ObjectNode>),
    String(Box<StringNode>),
    Integer { minimum: i128, maximum: i128 },
    Array(Box<ArrayNode>),
    Null,
    Enum(Vec<String>),
    Const(Value),
    Nullable(Box<Node>),
}

#[derive(Debug, Clone)]
struct ObjectNode {
    properties: BTreeMap<String, Node>,
    required: BTreeSet<String>,
    before: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
struct StringNode {
    min_length: usize,
    max_length: usize,
    pattern: Option<Regex>,
    format: Option<Format>,
}

#[derive(Debug, Clone, Copy)]
enum Format {
    DateTime,
    Base64Bytes(usize),
}

#[derive(Debug, Clone)]
struct ArrayNode {
    items: Node,
    min_items: usize,
    max_items: usize,
    unique: bool,
}

impl Schema {
    /// Loads and checks a schema document (see the module docs for the language).
    pub fn parse(text: &str) -> Result<Schema, SchemaDocError> {
        if text.len() > SCHEMA_BYTES_MAX {
            return Err(SchemaDocError::TooLarge {
                bytes: text.len(),
                bytes_max: SCHEMA_BYTES_MAX,
            });
        }
        let doc = canonical::parse_closed(text.as_bytes())?;
        let root = compile::node(&doc, &mut String::new(), 1)?;
        if !matches!(root, Node::Object(_)) {
            return Err(SchemaDocError::Invalid {
                pointer: String::new(),
                problem: "the root must be an object node",
            });
        }
        Ok(Schema { root })
    }

    /// Validates a payload against this schema.
    pub fn validate(&self, payload: &Value) -> Result<(), SchemaError> {
        let mut path = Vec::new();
        check(&self.root, payload, &mut path, 1).map_err(|(path, rule)| SchemaError::Violation {
            pointer: pointer(&path),
            rule,
        })
    }
}

/// A step of the path to the value being checked.
#[derive(Debug, Clone)]
enum Seg<'a> {
    Key(&'a str),
    Index(usize),
}

/// Renders a JSON pointer (RFC 6901), cutting long keys.
fn pointer(path: &[Seg<'_>]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Index(i) => out.push_str(&i.to_string()),
            Seg::Key(k) => {
                let mut end = k.len().min(POINTER_TOKEN_BYTES_MAX);
                while !k.is_char_boundary(end) {
                    end -= 1;
                }
                out.push_str(&k[..end].replace('~', "~0").replace('/', "~1"));
            }
        }
    }
    out
}

type Fail<'a> = (Vec<Seg<'a>>, Rule);

fn fail<'a>(path: &[Seg<'a>], rule: Rule) -> Result<(), Fail<'a>> {
    Err((path.to_vec(), rule))
}

fn check<'a>(
    node: &'a Node,
    v: &'a Value,
    path: &mut Vec<Seg<'a>>,
    depth: usize,
) -> Result<(), Fail<'a>> {
    // Schemas are at most SCHEMA_DEPTH_MAX deep and this recursion follows the schema, so this
    // guard cannot fire for a loaded schema; it keeps the bound local and obvious.
    if depth > SCHEMA_DEPTH_MAX {
        return fail(path, Rule::TooDeep);
    }
    match node {
        Node::Nullable(inner) => {
            if v.is_null() {
                Ok(())
            } else {
                check(inner, v, path, depth)
            }
        }
        Node::Null => match v {
            Value::Null => Ok(()),
            _ => fail(path, Rule::Type { expected: "null" }),
        },
        Node::Const(c) => {
            if v == c {
                Ok(())
            } else {
                fail(path, Rule::Const)
            }
        }
        Node::Enum(values) => match v {
            Value::String(s) if values.iter().any(|a| a == s) => Ok(()),
            Value::String(_) => fail(path, Rule::Enum),
            _ => fail(path, Rule::Type { expected: "string" }),
        },
        Node::Integer { minimum, maximum } => {
            let n = match v {
                Value::Number(n) => n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from)),
                _ => None,
            };
            match n {
                None => fail(
                    path,
                    Rule::Type {
                        expected: "integer",
                    },
                ),
                Some(n) if n < *minimum => fail(path, Rule::Minimum { min: *minimum }),
                Some(n) if n > *maximum => fail(path, Rule::Maximum { max: *maximum }),
                Some(_) => Ok(()),
            }
        }
        Node::String(s) => match v {
            Value::String(text) => check_string(s, text, path),
            _ => fail(path, Rule::Type { expected: "string" }),
        },
        Node::Array(a) => {
            let Value::Array(items) = v else {
                return fail(path, Rule::Type { expected: "array" });
            };
            if items.len() > a.max_items {
                return fail(path, Rule::MaxItems { max: a.max_items });
            }
            if items.len() < a.min_items {
                return fail(path, Rule::MinItems { min: a.min_items });
            }
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                check(&a.items, item, path, depth + 1)?;
                if a.unique {
                    // Items passed their schema, so they are integer-only and canonicalise.
                    let key = canonical::to_canonical(item).unwrap_or_default();
                    if !seen.insert(key) {
                        return fail(path, Rule::Duplicate);
                    }
                }
                path.pop();
            }
            Ok(())
        }
        Node::Object(o) => {
            let Value::Object(map) = v else {
                return fail(path, Rule::Type { expected: "object" });
            };
            for name in &o.required {
                if !map.contains_key(name) {
                    path.push(Seg::Key(name));
                    return fail(path, Rule::Missing);
                }
            }
            if let Some(extra) = map.keys().find(|k| !o.properties.contains_key(*k)) {
                path.push(Seg::Key(extra));
                return fail(path, Rule::Unknown);
            }
            for (name, child) in &o.properties {
                if let Some(value) = map.get(name) {
                    path.push(Seg::Key(name));
                    check(child, value, path, depth + 1)?;
                    path.pop();
                }
            }
            for (earlier, later) in &o.before {
                // Both are required date-time strings that just passed their format check.
                let at = |name: &str| {
                    map.get(name)
                        .and_then(Value::as_str)
                        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                };
                if let (Some(a), Some(b)) = (at(earlier), at(later))
                    && a >= b
                {
                    path.push(Seg::Key(later));
                    return fail(path, Rule::Order);
                }
            }
            Ok(())
        }
    }
}

fn check_string<'a>(s: &StringNode, text: &str, path: &[Seg<'a>]) -> Result<(), Fail<'a>> {
    if text.len() > s.max_length {
        return fail(path, Rule::MaxLength { max: s.max_length });
    }
    if text.len() < s.min_length {
        return fail(path, Rule::MinLength { min: s.min_length });
    }
    if text.contains('\0') {
        return fail(path, Rule::Nul);
    }
    if let Some(re) = &s.pattern
        && !re.is_match(text)
    {
        return fail(path, Rule::Pattern);
    }
    match s.format {
        None => Ok(()),
        Some(Format::DateTime) => match chrono::DateTime::parse_from_rfc3339(text) {
            Ok(_) => Ok(()),
            Err(_) => fail(path, Rule::DateTime),
        },
        Some(Format::Base64Bytes(bytes)) => {
            match base64::engine::general_purpose::STANDARD.decode(text.as_bytes()) {
                Ok(decoded) if decoded.len() == bytes => Ok(()),
                _ => fail(path, Rule::Base64Bytes { bytes }),
            }
        }
    }
}

/// The payload schemas by event type.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    schemas: BTreeMap<String, Schema>,
}

impl Catalog {
    /// An empty catalog: every event type is unknown.
    pub fn new() -> Catalog {
        Catalog::default()
    }

    /// The 14 built-in v1 schemas.
    pub fn with_builtin() -> Catalog {
        let mut catalog = Catalog::new();
        for (event_type, text) in BUILTIN {
            // The built-in files are part of this crate and a test loads every one of them, so
            // a failure here is a build defect, not an input error.
            catalog
                .add_schema(event_type, text)
                .expect("built-in schemas load (tested)");
        }
        catalog
    }

    /// Adds an operator-supplied schema for `event_type`. Refuses a bad document, a bad name, a
    /// type that already has a schema, and a full catalog.
    pub fn add_schema(&mut self, event_type: &str, json_text: &str) -> Result<(), SchemaDocError> {
        if !is_event_type(event_type) {
            return Err(SchemaDocError::EventTypeName);
        }
        if self.schemas.contains_key(event_type) {
            return Err(SchemaDocError::AlreadyRegistered {
                event_type: event_type.to_owned(),
            });
        }
        if self.schemas.len() >= CATALOG_TYPES_MAX {
            return Err(SchemaDocError::CatalogFull {
                types_max: CATALOG_TYPES_MAX,
            });
        }
        let schema = Schema::parse(json_text)?;
        self.schemas.insert(event_type.to_owned(), schema);
        Ok(())
    }

    /// Whether `event_type` has a schema.
    pub fn contains(&self, event_type: &str) -> bool {
        self.schemas.contains_key(event_type)
    }

    /// The registered event types, sorted.
    pub fn event_types(&self) -> impl Iterator<Item = &str> {
        self.schemas.keys().map(String::as_str)
    }

    /// How many event types have a schema.
    pub fn len(&self) -> usize {
        self.schemas.len()
    }

    /// Whether no event type has a schema.
    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty()
    }

    /// Validates `payload` as the payload of an `event_type` event.
    pub fn validate(&self, event_type: &str, payload: &Value) -> Result<(), SchemaError> {
        self.schemas
            .get(event_type)
            .ok_or(SchemaError::UnknownEventType)?
            .validate(payload)
    }
}

#[cfg(test)]
mod tests;
