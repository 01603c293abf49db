//! Envelope decoding on arbitrary bytes: it never panics, and what it accepts is bounded and
//! round-trips through its canonical form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wharf_core::canonical::Form;
use wharf_core::envelope::{ENVELOPE_BYTES_MAX, PAYLOAD_BYTES_MAX, decode_envelope};
use wharf_core::sign::signing_bytes_in;

fuzz_target!(|data: &[u8]| {
    let Ok(envelope) = decode_envelope(data) else {
        return;
    };
    assert!(data.len() <= ENVELOPE_BYTES_MAX);
    assert!(envelope.validate().is_ok());
    assert!(envelope.producer_sequence >= 1);
    let payload = envelope
        .payload_canonical()
        .expect("an accepted payload has a canonical form");
    assert!(payload.len() <= PAYLOAD_BYTES_MAX);
    // The canonical text of what was accepted decodes to the same envelope.
    let text = envelope
        .to_canonical_json()
        .expect("an accepted envelope has a canonical form");
    assert_eq!(
        decode_envelope(&text).expect("its canonical text decodes"),
        envelope
    );
    // Both signing forms exist and denote the same value.
    let rfc = signing_bytes_in(&envelope, Form::Rfc8785).expect("RFC 8785 bytes");
    let legacy = signing_bytes_in(&envelope, Form::LegacyGo).expect("legacy bytes");
    assert_eq!(
        wharf_core::canonical::parse_closed(&rfc).unwrap(),
        wharf_core::canonical::parse_closed(&legacy).unwrap()
    );
});
