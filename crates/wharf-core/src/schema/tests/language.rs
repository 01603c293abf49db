//! The schema language's own refusals: documents are closed, bounded and known-keyword only.

use super::super::*;
use serde_json::json;

/// Wraps a property schema in a closed root object.
fn root_with(prop: Value) -> String {
    json!({"type": "object", "properties": {"p": prop}, "required": ["p"], "additionalProperties": false}).to_string()
}

fn load_problem(text: &str) -> Result<(), (String, String)> {
    Schema::parse(text).map(|_| ()).map_err(|e| match e {
        SchemaDocError::Invalid { pointer, problem } => (pointer, problem.to_owned()),
        other => (String::new(), other.to_string()),
    })
}

#[test]
fn schema_documents_are_closed_and_bounded() {
    let check = |doc: String, expected: Option<(&str, &str)>| {
        let got = load_problem(&doc);
        match expected {
            None => assert_eq!(got, Ok(()), "{doc}"),
            Some((pointer, problem_part)) => match got {
                Err((p, problem)) => {
                    assert_eq!(p, pointer, "{doc}: {problem}");
                    assert!(problem.contains(problem_part), "{doc}: {problem}");
                }
                Ok(()) => panic!("accepted {doc}"),
            },
        }
    };
    let s = |extra: Value| {
        let mut v = json!({"type": "string", "maxLength": 8});
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        root_with(v)
    };
    check(s(json!({})), None);
    check(
        root_with(json!({"type": "string"})),
        Some(("/properties/p", "maxLength")),
    );
    check(
        root_with(json!({"type": "string", "maxLength": STRING_BYTES_MAX})),
        None,
    );
    check(
        root_with(json!({"type": "string", "maxLength": STRING_BYTES_MAX + 1})),
        Some(("/properties/p/maxLength", "maximum")),
    );
    check(
        s(json!({"minLength": 9})),
        Some(("/properties/p/minLength", "above maxLength")),
    );
    check(
        s(json!({"maxLenght": 9})),
        Some(("/properties/p/maxLenght", "keyword not allowed")),
    );
    check(
        s(json!({"minimum": 1})),
        Some(("/properties/p/minimum", "keyword not allowed")),
    );
    check(s(json!({"pattern": "^[a-z]+$"})), None);
    check(
        s(json!({"pattern": "[a-z]+"})),
        Some(("/properties/p/pattern", "anchored")),
    );
    check(
        s(json!({"pattern": "^[a-z]+\\$"})),
        Some(("/properties/p/pattern", "anchored")),
    );
    check(
        s(json!({"pattern": "^(unclosed$"})),
        Some(("/properties/p/pattern", "compile")),
    );
    check(
        s(json!({"pattern": format!("^{}$", "a".repeat(SCHEMA_TEXT_BYTES_MAX - 2))})),
        None,
    );
    check(
        s(json!({"pattern": format!("^{}$", "a".repeat(SCHEMA_TEXT_BYTES_MAX - 1))})),
        Some(("/properties/p/pattern", "longer")),
    );
    check(s(json!({"format": "date-time"})), None);
    check(
        s(json!({"format": "email"})),
        Some(("/properties/p/format", "date-time or base64-bytes")),
    );
    check(s(json!({"format": "base64-bytes", "byteLength": 6})), None);
    check(
        s(json!({"format": "base64-bytes", "byteLength": 7})),
        Some(("/properties/p/maxLength", "shorter")),
    );
    check(
        s(json!({"format": "base64-bytes"})),
        Some(("/properties/p", "byteLength")),
    );
    check(
        s(json!({"byteLength": 3})),
        Some(("/properties/p/byteLength", "base64-bytes")),
    );
    check(
        root_with(
            json!({"type": "string", "maxLength": 100_000, "format": "base64-bytes", "byteLength": BYTE_LENGTH_MAX}),
        ),
        None,
    );
    check(
        root_with(
            json!({"type": "string", "maxLength": 100_000, "format": "base64-bytes", "byteLength": BYTE_LENGTH_MAX + 1}),
        ),
        Some(("/properties/p/byteLength", "maximum")),
    );

    check(
        root_with(json!({"type": "integer", "minimum": 0, "maximum": 5})),
        None,
    );
    check(
        root_with(json!({"type": "integer", "minimum": 0})),
        Some(("/properties/p", "minimum and maximum")),
    );
    check(
        root_with(json!({"type": "integer", "minimum": 6, "maximum": 5})),
        Some(("/properties/p/minimum", "above maximum")),
    );
    check(
        root_with(json!({"type": "integer", "minimum": "0", "maximum": 5})),
        Some(("/properties/p/minimum", "integer")),
    );
    check(
        root_with(json!({"type": "number"})),
        Some(("/properties/p/type", "type must be")),
    );

    let arr = |extra: Value| {
        let mut v = json!({"type": "array", "items": {"type": "null"}, "maxItems": 3});
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        root_with(v)
    };
    check(arr(json!({})), None);
    check(arr(json!({"maxItems": ITEMS_MAX})), None);
    check(
        arr(json!({"maxItems": ITEMS_MAX + 1})),
        Some(("/properties/p/maxItems", "maximum")),
    );
    check(
        arr(json!({"minItems": 4})),
        Some(("/properties/p/minItems", "above maxItems")),
    );
    check(
        arr(json!({"uniqueItems": "yes"})),
        Some(("/properties/p/uniqueItems", "boolean")),
    );
    check(
        arr(json!({"items": {"type": "string"}})),
        Some(("/properties/p/items", "maxLength")),
    );
    check(
        root_with(json!({"type": "array", "items": {"type": "null"}})),
        Some(("/properties/p", "maxItems")),
    );
    check(
        root_with(json!({"type": "array", "maxItems": 1})),
        Some(("/properties/p", "items")),
    );

    check(
        root_with(json!({"type": "object", "properties": {}})),
        Some(("/properties/p", "additionalProperties")),
    );
    check(
        root_with(json!({"type": "object", "additionalProperties": true})),
        Some(("/properties/p/additionalProperties", "closed")),
    );
    check(
        root_with(json!({"type": "object", "additionalProperties": {}})),
        Some(("/properties/p/additionalProperties", "closed")),
    );
    check(
        root_with(json!({"type": "object", "additionalProperties": false})),
        None,
    );
    check(
        json!({"type": "object", "properties": {}, "required": ["x"], "additionalProperties": false}).to_string(),
        Some(("/required/0", "undeclared")),
    );
    check(
        json!({"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x", "x"], "additionalProperties": false}).to_string(),
        Some(("/required/1", "twice")),
    );

    check(root_with(json!({"enum": ["a", "b"]})), None);
    check(
        root_with(json!({"enum": []})),
        Some(("/properties/p/enum", "1 to 256")),
    );
    check(
        root_with(json!({"enum": ["a", "a"]})),
        Some(("/properties/p/enum/1", "repeats")),
    );
    check(
        root_with(json!({"enum": [1]})),
        Some(("/properties/p/enum/0", "strings")),
    );
    check(
        root_with(json!({"enum": (0..ENUM_VALUES_MAX).map(|i| i.to_string()).collect::<Vec<_>>()})),
        None,
    );
    check(
        root_with(
            json!({"enum": (0..=ENUM_VALUES_MAX).map(|i| i.to_string()).collect::<Vec<_>>()}),
        ),
        Some(("/properties/p/enum", "1 to 256")),
    );
    check(
        root_with(json!({"enum": ["a"], "type": "string"})),
        Some(("/properties/p", "exactly one")),
    );
    check(root_with(json!({"const": {"k": [1, "x"]}})), None);
    check(
        root_with(json!({"const": "x".repeat(SCHEMA_TEXT_BYTES_MAX - 2)})),
        None,
    );
    check(
        root_with(json!({"const": "x".repeat(SCHEMA_TEXT_BYTES_MAX - 1)})),
        Some(("/properties/p/const", "4096")),
    );

    check(
        root_with(
            json!({"oneOf": [{"type": "null"}, {"type": "integer", "minimum": 0, "maximum": 1}]}),
        ),
        None,
    );
    check(
        root_with(
            json!({"oneOf": [{"type": "integer", "minimum": 0, "maximum": 1}, {"type": "null"}]}),
        ),
        None,
    );
    check(
        root_with(json!({"oneOf": [{"type": "null"}, {"type": "null"}]})),
        Some(("/properties/p/oneOf", "nullable")),
    );
    check(
        root_with(json!({"oneOf": [{"type": "null"}]})),
        Some(("/properties/p/oneOf", "nullable")),
    );
    check(
        root_with(
            json!({"oneOf": [{"enum": ["a"]}, {"type": "integer", "minimum": 0, "maximum": 1}]}),
        ),
        Some(("/properties/p/oneOf", "nullable")),
    );
    check(
        root_with(json!({"oneOf": [{"type": "null"}, {"type": "string"}]})),
        Some(("/properties/p/oneOf/1", "maxLength")),
    );

    check(root_with(json!({"type": "null", "description": "x"})), None);
    check(
        root_with(json!({"type": "null", "description": 5})),
        Some(("/properties/p/description", "annotation")),
    );
    check(
        root_with(json!({"type": "null", "description": "x".repeat(SCHEMA_TEXT_BYTES_MAX + 1)})),
        Some(("/properties/p/description", "annotation")),
    );
    check(
        root_with(json!("string")),
        Some(("/properties/p", "must be an object")),
    );
    check(
        json!({"type": "string", "maxLength": 1}).to_string(),
        Some(("", "root must be an object")),
    );
    check(
        "{\"type\":\"object\",\"type\":\"object\"}".into(),
        Some(("", "duplicate object key")),
    );
    check(
        root_with(json!({"type": "integer", "minimum": 0.5, "maximum": 1})),
        Some(("", "fraction")),
    );
}

#[test]
fn cross_field_order_rule_is_checked_at_load() {
    let dt = json!({"type": "string", "format": "date-time", "maxLength": 64});
    let doc = |before: Value, required: Value| {
        json!({"type": "object", "properties": {"a": dt, "b": dt, "c": {"type": "string", "maxLength": 64}},
            "required": required, "additionalProperties": false, "x-wharf-before": before})
        .to_string()
    };
    let all = json!(["a", "b", "c"]);
    assert_eq!(load_problem(&doc(json!([["a", "b"]]), all.clone())), Ok(()));
    for bad in [
        json!([["a", "c"]]),
        json!([["a", "a"]]),
        json!([["a"]]),
        json!([["a", "x"]]),
        json!(["a"]),
    ] {
        assert_eq!(
            load_problem(&doc(bad.clone(), all.clone())).map_err(|(p, _)| p),
            Err("/x-wharf-before/0".to_owned()),
            "{bad}"
        );
    }
    // Both must be required: an absent earlier/later would silently skip the rule.
    assert!(load_problem(&doc(json!([["a", "b"]]), json!(["a", "c"]))).is_err());
    assert!(load_problem(&doc(json!({"a": "b"}), all)).is_err());
}

#[test]
fn schema_depth_is_bounded_at_the_edge() {
    // The root object is level 1; each array adds one.
    let nested = |levels: usize| {
        let mut node = json!({"type": "null"});
        for _ in 0..levels - 2 {
            node = json!({"type": "array", "items": node, "maxItems": 1});
        }
        root_with(node)
    };
    assert_eq!(load_problem(&nested(SCHEMA_DEPTH_MAX)), Ok(()));
    assert!(load_problem(&nested(SCHEMA_DEPTH_MAX + 1)).is_err_and(|(_, p)| p.contains("deeper")));

    // Validation of the deepest schema works, and a payload deeper than it is a type error.
    let schema = Schema::parse(&nested(SCHEMA_DEPTH_MAX)).expect("loads");
    let mut payload = json!(null);
    for _ in 0..SCHEMA_DEPTH_MAX - 2 {
        payload = json!([payload]);
    }
    assert_eq!(schema.validate(&json!({ "p": payload.clone() })), Ok(()));
    let deeper = json!({ "p": [payload] });
    assert!(matches!(
        schema.validate(&deeper),
        Err(SchemaError::Violation {
            rule: Rule::Type { .. },
            ..
        })
    ));
}

#[test]
fn properties_and_document_size_are_bounded_at_the_edge() {
    let with_props = |n: usize| {
        let props: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "null"})))
            .collect();
        json!({"type": "object", "properties": props, "additionalProperties": false}).to_string()
    };
    assert_eq!(load_problem(&with_props(PROPERTIES_MAX)), Ok(()));
    assert!(load_problem(&with_props(PROPERTIES_MAX + 1)).is_err());

    let mut text = root_with(json!({"type": "null"}));
    text.push_str(&" ".repeat(SCHEMA_BYTES_MAX - text.len()));
    assert_eq!(load_problem(&text), Ok(()));
    text.push(' ');
    assert!(matches!(
        Schema::parse(&text),
        Err(SchemaDocError::TooLarge { .. })
    ));
}

#[test]
fn catalog_add_schema_rules() {
    let mut catalog = Catalog::with_builtin();
    let doc = root_with(json!({"type": "string", "maxLength": 3}));
    assert_eq!(catalog.add_schema("custom_thing", &doc), Ok(()));
    assert!(catalog.contains("custom_thing"));
    assert_eq!(
        catalog.validate("custom_thing", &json!({"p": "abc"})),
        Ok(())
    );
    assert_eq!(
        catalog.add_schema("custom_thing", &doc),
        Err(SchemaDocError::AlreadyRegistered {
            event_type: "custom_thing".into()
        })
    );
    assert_eq!(
        catalog.add_schema("installation", &doc),
        Err(SchemaDocError::AlreadyRegistered {
            event_type: "installation".into()
        })
    );
    assert_eq!(
        catalog.add_schema("Bad-Name", &doc),
        Err(SchemaDocError::EventTypeName)
    );
    assert_eq!(
        catalog.add_schema(&"a".repeat(65), &doc),
        Err(SchemaDocError::EventTypeName)
    );
    assert!(catalog.add_schema(&"a".repeat(64), &doc).is_ok());
    assert!(matches!(
        catalog.add_schema("broken", "{"),
        Err(SchemaDocError::Json(_))
    ));
    assert!(!catalog.contains("broken"));

    let mut full = Catalog::new();
    for i in 0..CATALOG_TYPES_MAX {
        full.add_schema(&format!("t{i}"), &doc).expect("room");
    }
    assert_eq!(full.len(), CATALOG_TYPES_MAX);
    assert_eq!(
        full.add_schema("one_more", &doc),
        Err(SchemaDocError::CatalogFull {
            types_max: CATALOG_TYPES_MAX
        })
    );
}

#[test]
fn strings_never_hold_nul_and_unique_items_compare_canonically() {
    let schema = Schema::parse(&root_with(json!({
        "type": "array", "maxItems": 4, "uniqueItems": true,
        "items": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}, "b": {"type": "integer", "minimum": 0, "maximum": 9}}, "additionalProperties": false}
    })))
    .expect("loads");
    assert_eq!(schema.validate(&json!({"p": [{"a": 1}, {"b": 1}]})), Ok(()));
    assert_eq!(
        schema.validate(&json!({"p": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]})),
        Err(SchemaError::Violation {
            pointer: "/p/1".into(),
            rule: Rule::Duplicate
        })
    );
    let strings =
        Schema::parse(&root_with(json!({"type": "string", "maxLength": 8}))).expect("loads");
    assert_eq!(
        strings.validate(&json!({"p": "\u{0}"})),
        Err(SchemaError::Violation {
            pointer: "/p".into(),
            rule: Rule::Nul
        })
    );
}
