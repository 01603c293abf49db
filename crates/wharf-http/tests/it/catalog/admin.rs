//! The rest of the admin API and the router: admit and refuse, show, erase, the tenant's dead
//! letters, an unknown route and wrong methods. None of it is audited.

use reqwest::Method;

use super::Expect::*;
use super::{Fixture, OPERATOR, Row, SINGLE, post};

pub(super) fn rows(rows: &mut Vec<Row>, fx: &Fixture) {
    let token = || Some(fx.token.clone());
    let op = || Some(OPERATOR.to_owned());
    let unauthorized = Error("unauthorized", "operator token");
    let invalid = |fragment| Error("invalid-request", fragment);

    let admitted = fx.admitted_id;
    for verb in ["admit", "refuse"] {
        post(
            rows,
            &format!("{verb}, no token"),
            &format!("/v1/actions/{admitted}/{verb}"),
            None,
            Vec::new(),
            401,
            unauthorized.clone(),
        );
        post(
            rows,
            &format!("{verb}, not a proposal"),
            &format!("/v1/actions/{admitted}/{verb}"),
            op(),
            Vec::new(),
            409,
            Error("not-proposed", "only a PROPOSED action can"),
        );
        post(
            rows,
            &format!("{verb}, unknown action"),
            &format!("/v1/actions/424242/{verb}"),
            op(),
            Vec::new(),
            404,
            Error("not-found", "no action 424242"),
        );
        post(
            rows,
            &format!("{verb}, id not a number"),
            &format!("/v1/actions/x/{verb}"),
            op(),
            Vec::new(),
            400,
            invalid("`id`"),
        );
    }
    let mut request =
        |name: &str, method: Method, path: &str, bearer: Option<String>, status, expect| {
            rows.push(Row {
                name: name.to_owned(),
                method,
                path: path.to_owned(),
                bearer,
                body: Vec::new(),
                status,
                expect,
                audit: 0,
            })
        };
    request(
        "show, no token",
        Method::GET,
        &format!("/v1/actions/{admitted}"),
        None,
        401,
        unauthorized.clone(),
    );
    request(
        "show, unknown action",
        Method::GET,
        "/v1/actions/424242",
        op(),
        404,
        Error("not-found", "no action 424242"),
    );
    request(
        "show, id a word",
        Method::GET,
        "/v1/actions/abc",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "show, id a fraction",
        Method::GET,
        "/v1/actions/1.5",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "show, id past i64",
        Method::GET,
        "/v1/actions/99999999999999999999",
        op(),
        400,
        invalid("`id`"),
    );
    request(
        "erase, no token",
        Method::DELETE,
        "/v1/subjects/acct/actions",
        None,
        401,
        unauthorized.clone(),
    );
    request(
        "erase, NUL in the account",
        Method::DELETE,
        "/v1/subjects/a%00b/actions",
        op(),
        400,
        invalid("account must not contain U+0000"),
    );
    let dead = "/v1/tenants/acme/projects/web/dead-letters";
    request(
        "dead letters, no credential",
        Method::GET,
        dead,
        None,
        401,
        Error("unauthorized", "credential of this tenant"),
    );
    request(
        "dead letters, another tenant's credential",
        Method::GET,
        dead,
        Some(fx.globex_token.clone()),
        403,
        Error("forbidden", "another tenant"),
    );
    request(
        "dead letters, a revoked credential",
        Method::GET,
        dead,
        Some(fx.revoked_token.clone()),
        401,
        Error("unauthorized", "credential of this tenant"),
    );
    request(
        "dead letters, limit a word",
        Method::GET,
        &format!("{dead}?limit=many"),
        op(),
        400,
        invalid("limit"),
    );
    request(
        "dead letters, limit over 100",
        Method::GET,
        &format!("{dead}?limit=101"),
        op(),
        400,
        invalid("limit"),
    );
    request(
        "dead letters, a cursor nobody made",
        Method::GET,
        &format!("{dead}?after=zzz"),
        op(),
        400,
        invalid("cursor"),
    );
    request(
        "dead letters, an unknown parameter",
        Method::GET,
        &format!("{dead}?colour=red"),
        op(),
        400,
        invalid("colour"),
    );
    request(
        "dead letters, NUL in the tenant",
        Method::GET,
        "/v1/tenants/a%00b/projects/web/dead-letters",
        op(),
        400,
        invalid("U+0000"),
    );
    request(
        "unknown route",
        Method::GET,
        "/v1/nothing",
        op(),
        404,
        Error("not-found", "no such route"),
    );
    request(
        "wrong method",
        Method::PUT,
        "/v1/actions",
        op(),
        405,
        Error("method-not-allowed", "Allow"),
    );
    request(
        "wrong method on ingest",
        Method::GET,
        SINGLE,
        token(),
        405,
        Error("method-not-allowed", "Allow"),
    );
}
