//! The single-envelope ingest rows that never get a verified identity — no, unknown, empty,
//! revoked or malformed credentials, and a body over the limit — so nothing is audited.

use super::Expect::*;
use super::{BODY_MAX, Fixture, Row, SINGLE, post_into};

pub(super) fn rows(rows: &mut Vec<Row>, fx: &Fixture, good: &[u8]) {
    let token = || Some(fx.token.clone());
    let mut ingest = post_into(rows);

    let unauth = Error("unauthenticated", "unauthenticated");
    for (name, bearer) in [
        ("no credential", None),
        ("unknown token", Some("wharf_nope".into())),
        ("empty token", Some(String::new())),
        ("revoked credential", Some(fx.revoked_token.clone())),
        ("a token of another form", Some("not-a-wharf-token".into())),
        (
            "token one character short",
            Some(fx.token[..fx.token.len() - 1].to_owned()),
        ),
    ] {
        ingest(name, SINGLE, bearer, good.to_vec(), 401, unauth.clone(), 0);
    }
    let too_large = Error("payload-too-large", "body-too-large");
    ingest(
        "body over the limit",
        SINGLE,
        token(),
        vec![b' '; BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );
    ingest(
        "body over the limit, no credential",
        SINGLE,
        None,
        vec![b' '; BODY_MAX + 1],
        413,
        too_large.clone(),
        0,
    );
}
