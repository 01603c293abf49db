//! The built-in schemas against the SPEC appendix: every bound at its edge.

use super::super::*;
use serde_json::json;

const V: Kind = Kind::Int(1, 2_147_483_647);
const B: Kind = Kind::Int(0, 2_147_483_647);
const S: Kind = Kind::Int(0, 9_007_199_254_740_991);

/// What the appendix says about one field.
#[derive(Clone, Copy)]
enum Kind {
    /// 1..=n bytes.
    Str(usize),
    /// null or 1..=n bytes.
    NullableStr(usize),
    Int(i128, i128),
    Enum(&'static [&'static str]),
    Date,
    /// `^[0-9a-f]{7,64}$`.
    Commit,
    /// `^[0-9a-f]{64}$`.
    Digest,
    /// Standard base64 of n bytes.
    Base64(usize),
    /// ≤ 64 bytes, semver.
    Semver,
    /// ≤ max items, each a [`Kind::Commit`].
    CommitArray(usize),
    /// ≤ max items; unique?; each item 1..=n bytes.
    StrArray {
        max: usize,
        unique: bool,
        item: usize,
    },
    /// ≤ max items of objects; `item` is a valid item, `fields` its kinds.
    ObjArray {
        max: usize,
        item: fn() -> Value,
        fields: &'static [(&'static str, Kind)],
    },
}

fn samples() -> Vec<(&'static str, Value)> {
    let dt = "2025-01-01T00:00:00Z";
    vec![
        (
            "installation",
            json!({"installation_id": "i", "account_id": "a", "provider": "github", "state": "active", "version": 1}),
        ),
        (
            "repository",
            json!({"repository_id": "r", "installation_id": "i", "owner": "o", "name": "n", "visibility": "private", "version": 1}),
        ),
        (
            "task_proposal",
            json!({"proposal_id": "p", "proposed_by": "u", "title": "t", "base_version": 0, "acceptance": ["x"]}),
        ),
        (
            "run_summary",
            json!({"run_id": "r", "task_id": "t", "agent_id": "a", "status": "succeeded", "started_at": dt, "finished_at": dt, "commit_ids": ["abcdef0"], "checks": [check_item()]}),
        ),
        (
            "approval",
            json!({"approval_id": "a", "subject_id": "s", "decided_by": "u", "subject_type": "task_proposal", "decision": "approved", "base_version": 0}),
        ),
        (
            "policy_bundle",
            json!({"bundle_id": "b", "version": 1, "effective_at": dt, "rules": [rule_item()]}),
        ),
        (
            "sync_cursor",
            json!({"producer_id": "p", "acknowledged_sequence": 0, "acknowledged_event_id": null, "version": 1}),
        ),
        (
            "device_registration",
            json!({"device_id": "d", "user_id": "u", "name": "n", "platform": "linux", "public_key": b64(32), "state": "active", "registered_at": dt, "version": 1}),
        ),
        (
            "project_registration",
            json!({"registration_id": "r", "workspace_id": "w", "repository_id": null, "environment_id": "e", "default_branch": "main", "state": "connected", "version": 1}),
        ),
        (
            "role_bundle",
            json!({"role_id": "r", "signing_key_id": "k", "role_version": "1.0.0", "state": "draft", "digest": "0".repeat(64), "issued_at": dt, "capabilities": ["c"], "runtime_preferences": [runtime_item()], "policy_version": 1, "signature": b64(64)}),
        ),
        (
            "event_summary",
            json!({"summary_id": "s", "object_id": "o", "event_kind": "k", "status": "s", "object_type": "task", "occurred_at": dt, "version": 1}),
        ),
        (
            "budget_state",
            json!({"budget_id": "b", "scope_id": "s", "scope_type": "team", "period_start": dt, "period_end": "2025-02-01T00:00:00Z", "unit": "tokens", "limit": 0, "consumed": 0, "state": "available", "version": 1}),
        ),
        (
            "agent_state",
            json!({"agent_id": "a", "task_id": "t", "role_id": "r", "model": "m", "runtime": "rt", "state": "starting", "started_at": dt, "heartbeat_at": dt, "version": 1}),
        ),
        (
            "gate_evidence",
            json!({"evidence_id": "e", "run_id": "r", "gate": "g", "result": "pass", "commit_id": "abcdef0", "observed_at": dt, "version": 1}),
        ),
    ]
}

fn check_item() -> Value {
    json!({"name": "lint", "result": "pass"})
}
fn rule_item() -> Value {
    json!({"capability": "c", "effect": "allow"})
}
fn runtime_item() -> Value {
    json!({"runtime": "r", "model": "m"})
}

fn b64(n: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(vec![0xfbu8; n])
}

/// The appendix, as a table.
fn appendix() -> Vec<(&'static str, Vec<(&'static str, Kind)>)> {
    use Kind::*;
    let ids =
        |names: &[&'static str], n: usize| names.iter().map(|f| (*f, Str(n))).collect::<Vec<_>>();
    let with = |mut a: Vec<(&'static str, Kind)>, b: Vec<(&'static str, Kind)>| {
        a.extend(b);
        a
    };
    vec![
        (
            "installation",
            with(
                ids(&["installation_id", "account_id"], 128),
                vec![
                    ("provider", Enum(&["github"])),
                    ("state", Enum(&["active", "suspended", "removed"])),
                    ("version", V),
                ],
            ),
        ),
        (
            "repository",
            with(
                ids(&["repository_id", "installation_id"], 128),
                with(
                    ids(&["owner", "name"], 255),
                    vec![
                        ("visibility", Enum(&["private", "internal", "public"])),
                        ("version", V),
                    ],
                ),
            ),
        ),
        (
            "task_proposal",
            with(
                ids(&["proposal_id", "proposed_by"], 128),
                vec![
                    ("title", Str(256)),
                    ("base_version", B),
                    (
                        "acceptance",
                        StrArray {
                            max: 32,
                            unique: true,
                            item: 512,
                        },
                    ),
                ],
            ),
        ),
        (
            "run_summary",
            with(
                ids(&["run_id", "task_id", "agent_id"], 128),
                vec![
                    (
                        "status",
                        Enum(&["succeeded", "failed", "refused", "blocked"]),
                    ),
                    ("started_at", Date),
                    ("finished_at", Date),
                    ("commit_ids", CommitArray(64)),
                    (
                        "checks",
                        ObjArray {
                            max: 64,
                            item: check_item,
                            fields: &[
                                ("name", Str(128)),
                                ("result", Enum(&["pass", "fail", "unverified"])),
                            ],
                        },
                    ),
                ],
            ),
        ),
        (
            "approval",
            with(
                ids(&["approval_id", "subject_id", "decided_by"], 128),
                vec![
                    (
                        "subject_type",
                        Enum(&["task_proposal", "run_summary", "policy_bundle"]),
                    ),
                    ("decision", Enum(&["approved", "rejected"])),
                    ("base_version", B),
                ],
            ),
        ),
        (
            "policy_bundle",
            vec![
                ("bundle_id", Str(128)),
                ("version", V),
                ("effective_at", Date),
                (
                    "rules",
                    ObjArray {
                        max: 64,
                        item: rule_item,
                        fields: &[
                            ("capability", Str(128)),
                            ("effect", Enum(&["allow", "deny"])),
                        ],
                    },
                ),
            ],
        ),
        (
            "sync_cursor",
            vec![
                ("producer_id", Str(128)),
                ("acknowledged_sequence", S),
                ("acknowledged_event_id", NullableStr(128)),
                ("version", V),
            ],
        ),
        (
            "device_registration",
            with(
                ids(&["device_id", "user_id", "name"], 128),
                vec![
                    ("platform", Enum(&["darwin", "linux", "windows"])),
                    ("public_key", Base64(32)),
                    ("state", Enum(&["active", "revoked"])),
                    ("registered_at", Date),
                    ("version", V),
                ],
            ),
        ),
        (
            "project_registration",
            with(
                ids(&["registration_id", "workspace_id"], 128),
                vec![
                    ("repository_id", NullableStr(128)),
                    ("environment_id", Str(64)),
                    ("default_branch", Str(255)),
                    ("state", Enum(&["connected", "disconnected"])),
                    ("version", V),
                ],
            ),
        ),
        (
            "role_bundle",
            with(
                ids(&["role_id", "signing_key_id"], 128),
                vec![
                    ("role_version", Semver),
                    (
                        "state",
                        Enum(&["draft", "released", "deprecated", "revoked"]),
                    ),
                    ("digest", Digest),
                    ("issued_at", Date),
                    (
                        "capabilities",
                        StrArray {
                            max: 64,
                            unique: true,
                            item: 128,
                        },
                    ),
                    (
                        "runtime_preferences",
                        ObjArray {
                            max: 16,
                            item: runtime_item,
                            fields: &[("runtime", Str(64)), ("model", Str(128))],
                        },
                    ),
                    ("policy_version", V),
                    ("signature", Base64(64)),
                ],
            ),
        ),
        (
            "event_summary",
            with(
                ids(&["summary_id", "object_id"], 128),
                with(
                    ids(&["event_kind", "status"], 64),
                    vec![
                        (
                            "object_type",
                            Enum(&[
                                "task", "run", "agent", "approval", "policy", "gate", "release",
                            ]),
                        ),
                        ("occurred_at", Date),
                        ("version", V),
                    ],
                ),
            ),
        ),
        (
            "budget_state",
            with(
                ids(&["budget_id", "scope_id"], 128),
                vec![
                    (
                        "scope_type",
                        Enum(&["organization", "team", "project", "environment", "task"]),
                    ),
                    ("period_start", Date),
                    ("period_end", Date),
                    ("unit", Enum(&["tokens", "usd_micros", "provider_units"])),
                    ("limit", S),
                    ("consumed", S),
                    (
                        "state",
                        Enum(&["available", "warning", "paused", "exhausted"]),
                    ),
                    ("version", V),
                ],
            ),
        ),
        (
            "agent_state",
            with(
                ids(&["agent_id", "task_id", "role_id", "model"], 128),
                vec![
                    ("runtime", Str(64)),
                    (
                        "state",
                        Enum(&[
                            "starting",
                            "running",
                            "waiting",
                            "blocked",
                            "completed",
                            "failed",
                            "stopped",
                        ]),
                    ),
                    ("started_at", Date),
                    ("heartbeat_at", Date),
                    ("version", V),
                ],
            ),
        ),
        (
            "gate_evidence",
            with(
                ids(&["evidence_id", "run_id", "gate"], 128),
                vec![
                    ("result", Enum(&["pass", "fail", "unverified", "skipped"])),
                    ("commit_id", Commit),
                    ("observed_at", Date),
                    ("version", V),
                ],
            ),
        ),
    ]
}

/// `Some(rule name)` for a refusal, `None` for acceptance.
type Expect = Option<&'static str>;

/// Values for a field of `kind` and what the schema must say about each.
fn edges(kind: Kind) -> Vec<(Value, Expect)> {
    let a = |n: usize| Value::String("a".repeat(n));
    match kind {
        Kind::Str(n) => vec![
            (a(1), None),
            (a(n), None),
            (a(n + 1), Some("max-length")),
            (json!(""), Some("min-length")),
            // Bytes, not characters: n/2 two-byte characters fit, one more byte does not.
            (Value::String("é".repeat(n / 2)), None),
            (
                Value::String(format!("{}{}", "é".repeat(n / 2), "a".repeat(n % 2 + 1))),
                Some("max-length"),
            ),
            (json!("a\u{0}b"), Some("nul")),
            (json!(7), Some("type")),
            (json!(null), Some("type")),
        ],
        Kind::NullableStr(n) => vec![
            (json!(null), None),
            (a(n), None),
            (a(n + 1), Some("max-length")),
            (json!(""), Some("min-length")),
            (json!(7), Some("type")),
        ],
        Kind::Int(min, max) => vec![
            (json!(min as i64), None),
            (json!(max as i64), None),
            (json!((min - 1) as i64), Some("minimum")),
            (json!((max + 1) as i64), Some("maximum")),
            (json!(u64::MAX), Some("maximum")),
            (json!(i64::MIN), Some("minimum")),
            (json!("1"), Some("type")),
            (json!(1.0), Some("type")),
        ],
        Kind::Enum(values) => {
            let mut rows: Vec<(Value, Expect)> = values.iter().map(|v| (json!(v), None)).collect();
            rows.push((json!(values[0].to_uppercase()), Some("enum")));
            rows.push((json!(""), Some("enum")));
            rows.push((json!(1), Some("type")));
            rows
        }
        Kind::Date => vec![
            (json!("2025-01-15T12:00:00.123456789+05:30"), None),
            (json!("2025-06-01"), Some("date-time")),
            (json!("2025-06-01T25:00:00Z"), Some("date-time")),
            (json!(""), Some("min-length")),
            (
                Value::String(format!("2025-06-01T12:00:00.{}Z", "1".repeat(44))),
                Some("max-length"),
            ),
        ],
        Kind::Commit => vec![
            (json!("abcdef0"), None),
            (Value::String("f".repeat(64)), None),
            (json!("abcdef"), Some("min-length")),
            (Value::String("f".repeat(65)), Some("max-length")),
            (json!("ABCDEF0"), Some("pattern")),
            (json!("abcdefg"), Some("pattern")),
            (json!("abcdef0\n"), Some("pattern")),
        ],
        Kind::Digest => vec![
            (Value::String("0123456789abcdef".repeat(4)), None),
            (Value::String("0".repeat(63)), Some("min-length")),
            (Value::String("0".repeat(65)), Some("max-length")),
            (Value::String("g".repeat(64)), Some("pattern")),
        ],
        Kind::Base64(n) => vec![
            (json!(b64(n)), None),
            (json!(b64(n - 1)), Some("base64-bytes")),
            (json!(b64(n).trim_end_matches('=')), Some("base64-bytes")),
            (
                json!(b64(n).replace('+', "-").replace('/', "_")),
                Some("base64-bytes"),
            ),
            (json!(b64(n + 3)), Some("max-length")),
        ],
        Kind::Semver => vec![
            (json!("1.2.3"), None),
            (json!("0.0.0-rc.1+build.5"), None),
            (Value::String(format!("1.2.3-{}", "a".repeat(58))), None),
            (
                Value::String(format!("1.2.3-{}", "a".repeat(59))),
                Some("max-length"),
            ),
            (json!("1.2"), Some("pattern")),
            (json!("01.2.3"), Some("pattern")),
            (json!("v1.2.3"), Some("pattern")),
            (json!("1.2.3-"), Some("pattern")),
        ],
        Kind::CommitArray(max) => {
            let mut rows = vec![
                (json!([]), None),
                (Value::Array(vec![json!("abcdef0"); max]), None),
                (
                    Value::Array(vec![json!("abcdef0"); max + 1]),
                    Some("max-items"),
                ),
                (json!("abcdef0"), Some("type")),
            ];
            rows.extend(
                edges(Kind::Commit)
                    .into_iter()
                    .map(|(v, e)| (json!([v]), e)),
            );
            rows
        }
        Kind::StrArray { max, unique, item } => {
            let distinct =
                |n: usize| Value::Array((0..n).map(|i| json!(format!("v{i}"))).collect());
            let mut rows = vec![
                (json!([]), None),
                (distinct(max), None),
                (distinct(max + 1), Some("max-items")),
                (json!([a(item)]), None),
                (json!([a(item + 1)]), Some("max-length")),
                (json!([""]), Some("min-length")),
                (json!([1]), Some("type")),
                (json!("v"), Some("type")),
            ];
            rows.push((
                json!(["v", "v"]),
                if unique { Some("unique-items") } else { None },
            ));
            rows
        }
        Kind::ObjArray { max, item, .. } => {
            let mut extra = item();
            extra["extra"] = json!(1);
            vec![
                (json!([]), None),
                (Value::Array(vec![item(); max]), None),
                (Value::Array(vec![item(); max + 1]), Some("max-items")),
                (json!([extra]), Some("additional-property")),
                (json!([{}]), Some("required")),
                (json!(["x"]), Some("type")),
            ]
        }
    }
}

fn rule_of(result: Result<(), SchemaError>) -> Expect {
    match result {
        Ok(()) => None,
        Err(SchemaError::Violation { rule, .. }) => Some(rule.as_str()),
        Err(e) => panic!("unexpected {e}"),
    }
}

#[test]
fn every_builtin_loads_and_its_sample_is_valid() {
    let catalog = Catalog::with_builtin();
    assert_eq!(catalog.len(), 14);
    for (event_type, payload) in samples() {
        assert_eq!(
            catalog.validate(event_type, &payload),
            Ok(()),
            "{event_type}"
        );
    }
    let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    let sample_names: Vec<&str> = samples().iter().map(|(n, _)| *n).collect();
    assert_eq!(names, sample_names);
}

#[test]
fn every_appendix_bound_at_its_edge() {
    let catalog = Catalog::with_builtin();
    let samples: BTreeMap<_, _> = samples().into_iter().collect();
    let mut rows = 0;
    for (event_type, fields) in appendix() {
        let sample = &samples[event_type];
        // The table covers exactly the schema's fields: no field unchecked, none invented.
        let mut declared: Vec<&str> = sample
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        let mut listed: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
        declared.sort_unstable();
        listed.sort_unstable();
        assert_eq!(declared, listed, "{event_type}");

        for (field, kind) in &fields {
            for (value, expected) in edges(*kind) {
                let mut payload = sample.clone();
                payload[*field] = value.clone();
                let got = rule_of(catalog.validate(event_type, &payload));
                assert_eq!(
                    got,
                    expected,
                    "{event_type}.{field} = {}",
                    truncate_for_message(&value)
                );
                rows += 1;
            }
            if let Kind::ObjArray {
                item,
                fields: item_fields,
                ..
            } = kind
            {
                for (item_field, item_kind) in item_fields.iter() {
                    for (value, expected) in edges(*item_kind) {
                        let mut element = item();
                        element[*item_field] = value;
                        let mut payload = sample.clone();
                        payload[*field] = json!([element]);
                        assert_eq!(
                            rule_of(catalog.validate(event_type, &payload)),
                            expected,
                            "{event_type}.{field}[].{item_field}"
                        );
                        rows += 1;
                    }
                }
            }
            // Every field is required.
            let mut payload = sample.clone();
            payload.as_object_mut().expect("object").remove(*field);
            assert_eq!(
                rule_of(catalog.validate(event_type, &payload)),
                Some("required"),
                "{event_type} without {field}"
            );
        }
        // No other keys.
        let mut payload = sample.clone();
        payload["unexpected"] = json!("x");
        assert_eq!(
            rule_of(catalog.validate(event_type, &payload)),
            Some("additional-property"),
            "{event_type}"
        );
        assert_eq!(
            rule_of(catalog.validate(event_type, &json!([]))),
            Some("type")
        );
    }
    assert!(rows > 700, "only {rows} rows");
}

fn truncate_for_message(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(80).collect()
}

#[test]
fn run_summary_commit_ids_array_edges() {
    let catalog = Catalog::with_builtin();
    let (_, sample) = samples().remove(3);
    let check = |ids: Value, expected: Expect| {
        let mut p = sample.clone();
        p["commit_ids"] = ids;
        assert_eq!(rule_of(catalog.validate("run_summary", &p)), expected);
    };
    check(Value::Array(vec![json!("abcdef0"); 64]), None);
    check(Value::Array(vec![json!("abcdef0"); 65]), Some("max-items"));
    check(json!([]), None);
    check(json!(["abcdef0", "nothex!"]), Some("pattern"));
}

#[test]
fn budget_periods_are_ordered_as_instants() {
    let catalog = Catalog::with_builtin();
    let (_, sample) = samples().remove(11);
    let check = |start: &str, end: &str, expected: Expect| {
        let mut p = sample.clone();
        p["period_start"] = json!(start);
        p["period_end"] = json!(end);
        assert_eq!(
            rule_of(catalog.validate("budget_state", &p)),
            expected,
            "{start} .. {end}"
        );
    };
    check(
        "2025-01-01T00:00:00Z",
        "2025-01-01T00:00:00.000000001Z",
        None,
    );
    check(
        "2025-01-01T00:00:00Z",
        "2025-01-01T00:00:00Z",
        Some("order"),
    );
    check(
        "2025-01-02T00:00:00Z",
        "2025-01-01T00:00:00Z",
        Some("order"),
    );
    // 01:00+02:00 is 23:00Z the day before: earlier, although it reads later.
    check("2025-01-01T01:00:00+02:00", "2025-01-01T00:00:00Z", None);
    check(
        "2025-01-01T00:00:00Z",
        "2025-01-01T01:00:00+02:00",
        Some("order"),
    );
    check("2025-01-01", "2025-01-02T00:00:00Z", Some("date-time"));
}

#[test]
fn errors_name_a_json_pointer() {
    let catalog = Catalog::with_builtin();
    let (_, mut p) = samples().remove(3);
    p["checks"] = json!([check_item(), {"name": "x", "result": "maybe"}]);
    assert_eq!(
        catalog.validate("run_summary", &p),
        Err(SchemaError::Violation {
            pointer: "/checks/1/result".into(),
            rule: Rule::Enum
        })
    );
    let (_, mut p) = samples().remove(0);
    p["a/b~c"] = json!(1);
    assert_eq!(
        catalog.validate("installation", &p),
        Err(SchemaError::Violation {
            pointer: "/a~1b~0c".into(),
            rule: Rule::Unknown
        })
    );
    let (_, mut p) = samples().remove(0);
    p["é".repeat(40)] = json!(1);
    match catalog.validate("installation", &p) {
        Err(SchemaError::Violation { pointer, .. }) => {
            assert_eq!(pointer, format!("/{}", "é".repeat(32)))
        }
        other => panic!("unexpected {other:?}"),
    }
    let (_, mut p) = samples().remove(2);
    p.as_object_mut().expect("object").remove("title");
    assert_eq!(
        catalog.validate("task_proposal", &p),
        Err(SchemaError::Violation {
            pointer: "/title".into(),
            rule: Rule::Missing
        })
    );
    assert_eq!(
        catalog.validate("installation", &json!(null)),
        Err(SchemaError::Violation {
            pointer: "".into(),
            rule: Rule::Type { expected: "object" }
        })
    );
}

#[test]
fn unknown_event_type_is_its_own_error() {
    let catalog = Catalog::with_builtin();
    let err = catalog
        .validate("installation_v2", &json!({}))
        .expect_err("unknown");
    assert_eq!(err, SchemaError::UnknownEventType);
    assert_eq!(err.reason(), "event-type");
    assert_eq!(
        Catalog::new().validate("installation", &json!({})),
        Err(SchemaError::UnknownEventType)
    );
    let (_, p) = samples().remove(0);
    let mut bad = p.clone();
    bad["version"] = json!(0);
    assert_eq!(
        catalog
            .validate("installation", &bad)
            .expect_err("bad")
            .reason(),
        "payload"
    );
}

#[test]
fn the_published_vectors_are_valid_payloads() {
    let catalog = Catalog::with_builtin();
    for (name, env) in crate::sign::tests::vector_envelopes() {
        assert_eq!(
            catalog.validate(&env.event_type, &env.payload),
            Ok(()),
            "{name}"
        );
    }
}
