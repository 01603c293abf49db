//! Canonical JSON on arbitrary bytes: the closed parser never panics, and what it accepts has
//! one canonical form that is a fixed point, in both forms.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wharf_core::canonical::{canonicalize, parse_closed, to_canonical, to_canonical_legacy_go};

fuzz_target!(|data: &[u8]| {
    let Ok(value) = parse_closed(data) else {
        return;
    };
    let canonical = to_canonical(&value).expect("a parsed value is integer-only");
    assert_eq!(
        parse_closed(&canonical).expect("canonical text parses"),
        value
    );
    assert_eq!(
        canonicalize(&canonical).expect("canonical text canonicalizes"),
        canonical
    );
    let legacy = to_canonical_legacy_go(&value).expect("the legacy form exists");
    assert_eq!(parse_closed(&legacy).expect("legacy text parses"), value);
    // What serde_json reads of the same text is the same value (it may only be more lenient).
    let lenient: serde_json::Value =
        serde_json::from_slice(&canonical).expect("serde_json reads it");
    assert_eq!(lenient, value);
});
