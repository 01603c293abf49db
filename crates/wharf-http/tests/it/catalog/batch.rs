//! The batch ingest rows: credential and size refusals (nothing audited), bodies that are not
//! a batch (one audit row), and decided batches whose every envelope is refused (one audit row
//! per envelope).

use super::Expect::*;
use super::{
    BATCH, BATCH_BODY_MAX, BATCH_ENVELOPES_MAX, Fixture, IDENTITY_BURST, Row, batch_of, post_into,
};

pub(super) fn rows(rows: &mut Vec<Row>, fx: &Fixture, good: &[u8]) {
    let token = || Some(fx.token.clone());
    let mut ingest = post_into(rows);
    let good = good.to_vec();
    let unauth = Error("unauthenticated", "unauthenticated");
    let too_large = Error("payload-too-large", "body-too-large");
    let payload = Decided("refuse-tampered", "payload");
    let retained = fx.retained.clone();

    ingest(
        "batch, no credential",
        BATCH,
        None,
        batch_of(std::slice::from_ref(&good)),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "batch, revoked credential",
        BATCH,
        Some(fx.revoked_token.clone()),
        batch_of(std::slice::from_ref(&good)),
        401,
        unauth.clone(),
        0,
    );
    ingest(
        "batch over the body limit",
        BATCH,
        token(),
        vec![b' '; BATCH_BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );
    let burst: Vec<Vec<u8>> = (0..=IDENTITY_BURST).map(|_| good.clone()).collect();
    ingest(
        "batch over the identity burst",
        BATCH,
        token(),
        batch_of(&burst),
        413,
        Error("payload-too-large", "batch-over-burst"),
        0,
    );
    for (name, body) in [
        ("batch, empty body", b"".to_vec()),
        ("batch, not JSON", b"{\"envelopes\":".to_vec()),
        ("batch, an array", b"[]".to_vec()),
        ("batch, no list", b"{}".to_vec()),
        ("batch, an empty list", b"{\"envelopes\":[]}".to_vec()),
        ("batch, list is a string", b"{\"envelopes\":\"x\"}".to_vec()),
        (
            "batch, an unknown member",
            [b"{\"colour\":1,\"envelopes\":[".as_slice(), &good, b"]}"].concat(),
        ),
        (
            "batch, more envelopes than allowed",
            batch_of(&vec![b"1".to_vec(); BATCH_ENVELOPES_MAX + 1]),
        ),
    ] {
        ingest(name, BATCH, token(), body, 422, payload.clone(), 1);
    }
    let items = vec![
        fx.edited(|v| v["payload"]["acknowledged_sequence"] = 9.into()),
        fx.signed(|e| e.tenant_id = "globex".into()),
        fx.signed(|e| e.schema_version = 2),
        b"5".to_vec(),
        fx.signed(|e| e.event_type = "weather_report".into()),
    ];
    ingest(
        "batch of five refusals",
        BATCH,
        token(),
        batch_of(&items),
        200,
        Batch(vec![
            ("refuse-tampered", "signature"),
            ("refuse-tampered", "route"),
            ("refuse-incompatible", "schema"),
            ("refuse-tampered", "payload"),
            ("refuse-incompatible", "event-type"),
        ]),
        5,
    );
    ingest(
        "batch of conflicts and a replay",
        BATCH,
        token(),
        batch_of(&[
            fx.signed(|e| e.event_id = retained.event_id.clone()),
            fx.signed(|e| e.producer_sequence = 4),
        ]),
        200,
        Batch(vec![
            ("refuse-tampered", "identity-conflict"),
            ("refuse-replay", "replay"),
        ]),
        2,
    );
    ingest(
        "batch at the wrong tenant",
        "/v1/tenants/globex/projects/web/envelopes:batch",
        token(),
        batch_of(std::slice::from_ref(&good)),
        200,
        Batch(vec![("refuse-tampered", "route")]),
        1,
    );
}
