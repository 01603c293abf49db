//! Loading a schema document into checked nodes: every keyword known, every bound present.
//!
//! Split from `schema.rs` only for length; it knows nothing the parent does not.

use regex::RegexBuilder;
use serde_json::{Map, Value};

use super::{
    ArrayNode, BYTE_LENGTH_MAX, ENUM_VALUES_MAX, Format, ITEMS_MAX, Node, ObjectNode,
    PROPERTIES_MAX, REGEX_SIZE_BYTES_MAX, SCHEMA_DEPTH_MAX, SCHEMA_TEXT_BYTES_MAX,
    STRING_BYTES_MAX, SchemaDocError, StringNode,
};
use crate::canonical;

/// Keywords every node may carry; they document and never change validation.
const ANNOTATIONS: [&str; 5] = ["$schema", "$id", "$comment", "title", "description"];
const OBJECT_KEYWORDS: [&str; 5] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "x-wharf-before",
];
const STRING_KEYWORDS: [&str; 6] = [
    "type",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "byteLength",
];
const INTEGER_KEYWORDS: [&str; 3] = ["type", "minimum", "maximum"];
const ARRAY_KEYWORDS: [&str; 5] = ["type", "items", "minItems", "maxItems", "uniqueItems"];

fn invalid(ptr: &str, problem: &'static str) -> SchemaDocError {
    SchemaDocError::Invalid {
        pointer: ptr.to_owned(),
        problem,
    }
}

/// Runs `f` with `token` appended to the pointer, then restores it.
fn at<T>(
    ptr: &mut String,
    token: &str,
    f: impl FnOnce(&mut String) -> Result<T, SchemaDocError>,
) -> Result<T, SchemaDocError> {
    let len = ptr.len();
    ptr.push('/');
    ptr.push_str(&token.replace('~', "~0").replace('/', "~1"));
    let result = f(ptr);
    ptr.truncate(len);
    result
}

/// Compiles one schema node at `depth` (the root is 1).
pub(super) fn node(v: &Value, ptr: &mut String, depth: usize) -> Result<Node, SchemaDocError> {
    if depth > SCHEMA_DEPTH_MAX {
        return Err(invalid(
            ptr,
            "schema nests deeper than SCHEMA_DEPTH_MAX (16)",
        ));
    }
    let Value::Object(map) = v else {
        return Err(invalid(ptr, "a schema node must be an object"));
    };
    for name in ANNOTATIONS {
        if let Some(a) = map.get(name) {
            match a {
                Value::String(s) if s.len() <= SCHEMA_TEXT_BYTES_MAX => {}
                _ => {
                    return at(ptr, name, |p| {
                        Err(invalid(
                            p,
                            "an annotation must be a string of at most 4096 bytes",
                        ))
                    });
                }
            }
        }
    }
    let kinds = ["type", "enum", "const", "oneOf"]
        .iter()
        .filter(|k| map.contains_key(**k))
        .count();
    if kinds != 1 {
        return Err(invalid(
            ptr,
            "a schema node needs exactly one of type, enum, const, oneOf",
        ));
    }
    if let Some(values) = map.get("enum") {
        only(map, &["enum"], ptr)?;
        return at(ptr, "enum", |p| enumeration(values, p));
    }
    if let Some(c) = map.get("const") {
        only(map, &["const"], ptr)?;
        let bytes = canonical::to_canonical(c)?.len();
        if bytes > SCHEMA_TEXT_BYTES_MAX {
            return at(ptr, "const", |p| {
                Err(invalid(p, "const is larger than 4096 canonical bytes"))
            });
        }
        return Ok(Node::Const(c.clone()));
    }
    if let Some(branches) = map.get("oneOf") {
        only(map, &["oneOf"], ptr)?;
        return at(ptr, "oneOf", |p| nullable(branches, p, depth));
    }
    match map.get("type") {
        Some(Value::String(t)) => match t.as_str() {
            "object" => {
                only(map, &OBJECT_KEYWORDS, ptr)?;
                object(map, ptr, depth)
            }
            "string" => {
                only(map, &STRING_KEYWORDS, ptr)?;
                string(map, ptr)
            }
            "integer" => {
                only(map, &INTEGER_KEYWORDS, ptr)?;
                integer(map, ptr)
            }
            "array" => {
                only(map, &ARRAY_KEYWORDS, ptr)?;
                array(map, ptr, depth)
            }
            "null" => {
                only(map, &["type"], ptr)?;
                Ok(Node::Null)
            }
            _ => at(ptr, "type", |p| {
                Err(invalid(
                    p,
                    "type must be object, string, integer, array or null",
                ))
            }),
        },
        _ => at(ptr, "type", |p| Err(invalid(p, "type must be a string"))),
    }
}

/// Refuses any keyword outside `allowed` and the annotations.
fn only(
    map: &Map<String, Value>,
    allowed: &[&str],
    ptr: &mut String,
) -> Result<(), SchemaDocError> {
    match map
        .keys()
        .find(|k| !allowed.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()))
    {
        Some(k) => at(ptr, k, |p| {
            Err(invalid(p, "keyword not allowed on this kind of node"))
        }),
        None => Ok(()),
    }
}

fn usize_of(
    map: &Map<String, Value>,
    key: &str,
    ptr: &mut String,
    max: usize,
) -> Result<Option<usize>, SchemaDocError> {
    match map.get(key) {
        None => Ok(None),
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) if n <= max => Ok(Some(n)),
            Some(_) => at(ptr, key, |p| {
                Err(invalid(p, "bound is above this keyword's maximum"))
            }),
            None => at(ptr, key, |p| {
                Err(invalid(p, "must be a non-negative integer"))
            }),
        },
    }
}

fn string(map: &Map<String, Value>, ptr: &mut String) -> Result<Node, SchemaDocError> {
    let Some(max_length) = usize_of(map, "maxLength", ptr, STRING_BYTES_MAX)? else {
        return Err(invalid(ptr, "every string needs maxLength"));
    };
    let min_length = usize_of(map, "minLength", ptr, STRING_BYTES_MAX)?.unwrap_or(0);
    if min_length > max_length {
        return at(ptr, "minLength", |p| {
            Err(invalid(p, "minLength is above maxLength"))
        });
    }
    let pattern = match map.get("pattern") {
        None => None,
        Some(Value::String(p)) => Some(at(ptr, "pattern", |ptr| compile_pattern(p, ptr))?),
        Some(_) => {
            return at(ptr, "pattern", |p| {
                Err(invalid(p, "pattern must be a string"))
            });
        }
    };
    let byte_length = usize_of(map, "byteLength", ptr, BYTE_LENGTH_MAX)?;
    let format = match (map.get("format"), byte_length) {
        (None, None) => None,
        (None, Some(_)) => {
            return at(ptr, "byteLength", |p| {
                Err(invalid(p, "byteLength needs format base64-bytes"))
            });
        }
        (Some(f), byte_length) => match (f.as_str(), byte_length) {
            (Some("date-time"), None) => Some(Format::DateTime),
            (Some("date-time"), Some(_)) => {
                return at(ptr, "byteLength", |p| {
                    Err(invalid(p, "byteLength needs format base64-bytes"))
                });
            }
            (Some("base64-bytes"), Some(0)) | (Some("base64-bytes"), None) => {
                return Err(invalid(
                    ptr,
                    "format base64-bytes needs byteLength of at least 1",
                ));
            }
            (Some("base64-bytes"), Some(n)) => {
                // A schema that can never accept anything is a mistake worth catching at load.
                if max_length < n.div_ceil(3) * 4 {
                    return at(ptr, "maxLength", |p| {
                        Err(invalid(
                            p,
                            "maxLength is shorter than the base64 text of byteLength bytes",
                        ))
                    });
                }
                Some(Format::Base64Bytes(n))
            }
            _ => {
                return at(ptr, "format", |p| {
                    Err(invalid(p, "format must be date-time or base64-bytes"))
                });
            }
        },
    };
    Ok(Node::String(Box::new(StringNode {
        min_length,
        max_length,
        pattern,
        format,
    })))
}

fn compile_pattern(p: &str, ptr: &str) -> Result<regex::Regex, SchemaDocError> {
    if p.len() > SCHEMA_TEXT_BYTES_MAX {
        return Err(invalid(ptr, "pattern is longer than 4096 bytes"));
    }
    // Required so the file means the same in any JSON Schema tool (where `pattern` is a substring
    // search); the wrapping below then makes `^a|b$` a whole-string match too.
    if !p.starts_with('^') || !p.ends_with('$') || p.ends_with("\\$") {
        return Err(invalid(ptr, "pattern must be anchored: ^...$"));
    }
    RegexBuilder::new(&format!("^(?:{p})$"))
        .size_limit(REGEX_SIZE_BYTES_MAX)
        .build()
        .map_err(|_| invalid(ptr, "pattern does not compile (or is too large)"))
}

fn integer_of(
    map: &Map<String, Value>,
    key: &str,
    ptr: &mut String,
) -> Result<i128, SchemaDocError> {
    match map.get(key) {
        Some(Value::Number(n)) => n
            .as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
            .ok_or_else(|| invalid(ptr, "bound must be an integer")),
        Some(_) => at(ptr, key, |p| Err(invalid(p, "bound must be an integer"))),
        None => Err(invalid(ptr, "every integer needs minimum and maximum")),
    }
}

fn integer(map: &Map<String, Value>, ptr: &mut String) -> Result<Node, SchemaDocError> {
    let minimum = integer_of(map, "minimum", ptr)?;
    let maximum = integer_of(map, "maximum", ptr)?;
    if minimum > maximum {
        return at(ptr, "minimum", |p| {
            Err(invalid(p, "minimum is above maximum"))
        });
    }
    Ok(Node::Integer { minimum, maximum })
}

fn array(map: &Map<String, Value>, ptr: &mut String, depth: usize) -> Result<Node, SchemaDocError> {
    let Some(max_items) = usize_of(map, "maxItems", ptr, ITEMS_MAX)? else {
        return Err(invalid(ptr, "every array needs maxItems"));
    };
    let min_items = usize_of(map, "minItems", ptr, ITEMS_MAX)?.unwrap_or(0);
    if min_items > max_items {
        return at(ptr, "minItems", |p| {
            Err(invalid(p, "minItems is above maxItems"))
        });
    }
    let unique = match map.get("uniqueItems") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return at(ptr, "uniqueItems", |p| {
                Err(invalid(p, "uniqueItems must be a boolean"))
            });
        }
    };
    let Some(items) = map.get("items") else {
        return Err(invalid(ptr, "every array needs items"));
    };
    let items = at(ptr, "items", |p| node(items, p, depth + 1))?;
    Ok(Node::Array(Box::new(ArrayNode {
        items,
        min_items,
        max_items,
        unique,
    })))
}

fn object(
    map: &Map<String, Value>,
    ptr: &mut String,
    depth: usize,
) -> Result<Node, SchemaDocError> {
    match map.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(_) => {
            return at(ptr, "additionalProperties", |p| {
                Err(invalid(
                    p,
                    "additionalProperties must be false: objects are closed",
                ))
            });
        }
        None => {
            return Err(invalid(
                ptr,
                "every object needs \"additionalProperties\": false",
            ));
        }
    }
    let mut properties = std::collections::BTreeMap::new();
    match map.get("properties") {
        None => {}
        Some(Value::Object(props)) => {
            if props.len() > PROPERTIES_MAX {
                return at(ptr, "properties", |p| {
                    Err(invalid(p, "more than 256 properties"))
                });
            }
            for (name, schema) in props {
                let child = at(ptr, "properties", |p| {
                    at(p, name, |p| {
                        if name.len() > SCHEMA_TEXT_BYTES_MAX {
                            return Err(invalid(p, "property name is longer than 4096 bytes"));
                        }
                        node(schema, p, depth + 1)
                    })
                })?;
                properties.insert(name.clone(), child);
            }
        }
        Some(_) => {
            return at(ptr, "properties", |p| {
                Err(invalid(p, "properties must be an object"))
            });
        }
    }
    let mut required = std::collections::BTreeSet::new();
    match map.get("required") {
        None => {}
        Some(Value::Array(names)) => {
            for (i, name) in names.iter().enumerate() {
                let problem = match name.as_str() {
                    None => Some("required lists property names (strings)"),
                    Some(n) if !properties.contains_key(n) => {
                        Some("required names an undeclared property")
                    }
                    Some(n) if !required.insert(n.to_owned()) => {
                        Some("required names a property twice")
                    }
                    Some(_) => None,
                };
                if let Some(problem) = problem {
                    return at(ptr, "required", |p| {
                        at(p, &i.to_string(), |p| Err(invalid(p, problem)))
                    });
                }
            }
        }
        Some(_) => {
            return at(ptr, "required", |p| {
                Err(invalid(p, "required must be an array"))
            });
        }
    }
    let mut before = Vec::new();
    match map.get("x-wharf-before") {
        None => {}
        Some(Value::Array(pairs)) if pairs.len() <= PROPERTIES_MAX => {
            for (i, pair) in pairs.iter().enumerate() {
                let names = match pair.as_array().map(Vec::as_slice) {
                    Some([Value::String(a), Value::String(b)]) if a != b => Some((a, b)),
                    _ => None,
                };
                let is_required_date_time = |name: &str| {
                    required.contains(name)
                        && matches!(
                            properties.get(name),
                            Some(Node::String(s)) if matches!(s.format, Some(Format::DateTime))
                        )
                };
                match names {
                    Some((a, b)) if is_required_date_time(a) && is_required_date_time(b) => {
                        before.push((a.clone(), b.clone()));
                    }
                    _ => {
                        return at(ptr, "x-wharf-before", |p| {
                            at(p, &i.to_string(), |p| {
                                Err(invalid(
                                    p,
                                    "each entry is [earlier, later]: two different required date-time properties",
                                ))
                            })
                        });
                    }
                }
            }
        }
        Some(_) => {
            return at(ptr, "x-wharf-before", |p| {
                Err(invalid(
                    p,
                    "x-wharf-before must be an array of at most 256 pairs",
                ))
            });
        }
    }
    Ok(Node::Object(Box::new(ObjectNode {
        properties,
        required,
        before,
    })))
}

fn enumeration(values: &Value, ptr: &mut String) -> Result<Node, SchemaDocError> {
    let Value::Array(values) = values else {
        return Err(invalid(ptr, "enum must be an array of strings"));
    };
    if values.is_empty() || values.len() > ENUM_VALUES_MAX {
        return Err(invalid(ptr, "enum needs 1 to 256 values"));
    }
    let mut out: Vec<String> = Vec::with_capacity(values.len());
    for (i, v) in values.iter().enumerate() {
        let problem = match v.as_str() {
            None => Some("enum values must be strings"),
            Some(s) if s.len() > SCHEMA_TEXT_BYTES_MAX => {
                Some("enum value is longer than 4096 bytes")
            }
            Some(s) if out.iter().any(|o| o == s) => Some("enum repeats a value"),
            Some(s) => {
                out.push(s.to_owned());
                None
            }
        };
        if let Some(problem) = problem {
            return at(ptr, &i.to_string(), |p| Err(invalid(p, problem)));
        }
    }
    Ok(Node::Enum(out))
}

fn nullable(branches: &Value, ptr: &mut String, depth: usize) -> Result<Node, SchemaDocError> {
    let shape = "oneOf is only for nullable values: exactly [{\"type\": \"null\"}, <schema>]";
    let Some([a, b]) = branches.as_array().map(Vec::as_slice) else {
        return Err(invalid(ptr, shape));
    };
    let a = at(ptr, "0", |p| node(a, p, depth))?;
    let b = at(ptr, "1", |p| node(b, p, depth))?;
    match (a, b) {
        (Node::Null, other) | (other, Node::Null)
            if !matches!(other, Node::Null | Node::Nullable(_)) =>
        {
            Ok(Node::Nullable(Box::new(other)))
        }
        _ => Err(invalid(ptr, shape)),
    }
}
