//! The guard trigger against `ActionState::can_transition`, by direct UPDATEs: of live rows
//! (wharf.action_live's guard) and of ended ones (wharf.action_ended's, 0060).

use wharf::outbox::{ActionState, StopReason};
use wharf_testkit::TestDb;

/// Inserts a row directly in `state` (INSERT is not guarded), consistent with the tables'
/// checks: a live state into wharf.action_live, an ended one into wharf.action_ended (0060).
async fn row_in(
    pool: &sqlx::PgPool,
    state: ActionState,
    at_most_once: bool,
    write_started: bool,
) -> i64 {
    if state.is_ended() {
        let reason = StopReason::ALL
            .into_iter()
            .find(|r| r.state() == state)
            .map(|r| r.as_str());
        return sqlx::query_scalar(
            "INSERT INTO wharf.action_ended (id, kind, tenant_id, lane_key, idempotency_key,
                                             content_digest, at_most_once, instance_level, state,
                                             stop_reason, epoch, attempt, max_attempts, run_at,
                                             write_started_at, created_at, ended_at)
             VALUES (nextval('wharf.action_id_seq'), 'k', 't', 'lane-' || gen_random_uuid(),
                     gen_random_uuid()::text, sha256('x'), $1, false, $2, $3, 1, 1, 3, now(),
                     CASE WHEN $4 THEN now() END, now(), now())
             RETURNING id",
        )
        .bind(at_most_once)
        .bind(state.as_str())
        .bind(reason)
        .bind(write_started)
        .fetch_one(pool)
        .await
        .unwrap();
    }
    sqlx::query_scalar(
        "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key, content_digest,
                                        at_most_once, instance_level, state, epoch, attempt,
                                        max_attempts, payload, run_at, lease_expires_at,
                                        write_started_at)
         VALUES ('k', 't', 'lane-' || gen_random_uuid(), gen_random_uuid()::text,
                 sha256('x'), $1, false, $2, $3, $3, 3, '{}'::jsonb, now(),
                 CASE WHEN $2 = 'EXECUTING' THEN now() + interval '1 minute' END,
                 CASE WHEN $4 THEN now() END)
         RETURNING id",
    )
    .bind(at_most_once)
    .bind(state.as_str())
    .bind(if state == ActionState::Executing {
        1i64
    } else {
        0
    })
    .bind(write_started)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// An UPDATE to `to` that satisfies every other rule (checks, epoch movement), so only the
/// transition itself can be refused, of the table `from` lives in.
async fn move_to(
    pool: &sqlx::PgPool,
    id: i64,
    from: ActionState,
    to: ActionState,
) -> Result<(), sqlx::Error> {
    if from.is_ended() {
        let reason = StopReason::ALL
            .into_iter()
            .find(|r| r.state() == to)
            .map_or("DONE", |r| r.as_str());
        return sqlx::query(
            "UPDATE wharf.action_ended SET state = $2, stop_reason = $3 WHERE id = $1",
        )
        .bind(id)
        .bind(to.as_str())
        .bind(reason)
        .execute(pool)
        .await
        .map(|_| ());
    }
    // Every claim raises the epoch by one (the guard checks that separately).
    let epoch_step = i64::from(to == ActionState::Executing);
    sqlx::query(
        "UPDATE wharf.action_live
            SET state = $2,
                epoch = epoch + $3,
                attempt = attempt + $3::integer,
                lease_expires_at = CASE WHEN $2 = 'EXECUTING' THEN now() + interval '1 minute' END
          WHERE id = $1",
    )
    .bind(id)
    .bind(to.as_str())
    .bind(epoch_step)
    .execute(pool)
    .await
    .map(|_| ())
}

/// The action's state, live or ended (the view `wharf.action`).
async fn state_of(pool: &sqlx::PgPool, id: i64) -> String {
    sqlx::query_scalar("SELECT state FROM wharf.action WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn sqlstate(e: &sqlx::Error) -> String {
    e.as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn every_pair_of_states_against_the_trigger() {
    let db = TestDb::new().await;
    let mut checked = 0;
    for from in ActionState::ALL {
        for to in ActionState::ALL {
            let id = row_in(&db.pool, from, false, false).await;
            let result = move_to(&db.pool, id, from, to).await;
            let moved = from.can_transition(to) && to.is_ended();
            if from.can_transition(to) && !moved {
                result.unwrap_or_else(|e| panic!("{from} -> {to} must be allowed: {e}"));
                let state = state_of(&db.pool, id).await;
                assert_eq!(state, to.as_str());
            } else {
                // A legal ending is a move (the row deleted from action_live and inserted into
                // action_ended by complete.sql, the sweeps, refuse.sql, cancel.sql), never an
                // UPDATE: the guard refuses it as an update, and the row stays as it was.
                let e = result.expect_err(&format!("{from} -> {to} must be refused"));
                let code = sqlstate(&e);
                let expected = if from.is_ended() { "WH002" } else { "WH001" };
                assert_eq!(
                    code, expected,
                    "{from} -> {to} (legal as a move: {moved}): {e}"
                );
                let state = state_of(&db.pool, id).await;
                assert_eq!(state, from.as_str());
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 49);
}

#[tokio::test]
async fn an_ended_row_never_changes_even_in_place() {
    let db = TestDb::new().await;
    for state in ActionState::ALL.into_iter().filter(|s| s.is_ended()) {
        let id = row_in(&db.pool, state, false, false).await;
        let e = sqlx::query("UPDATE wharf.action_ended SET readback_ref = 'x' WHERE id = $1")
            .bind(id)
            .execute(&db.pool)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "WH002", "{state}");
        // Deleting (retention, erasure) is not a change of state and stays possible.
        sqlx::query("DELETE FROM wharf.action_ended WHERE id = $1")
            .bind(id)
            .execute(&db.pool)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn an_at_most_once_row_whose_write_started_is_never_claimed_again() {
    let db = TestDb::new().await;
    // EXECUTING -> EXECUTING with a new epoch (a reclaim).
    let id = row_in(&db.pool, ActionState::Executing, true, true).await;
    let e = move_to(&db.pool, id, ActionState::Executing, ActionState::Executing)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "WH003");
    // ADMITTED with a started write (never written by wharf itself, but refused all the same).
    let id = row_in(&db.pool, ActionState::Admitted, true, true).await;
    let e = move_to(&db.pool, id, ActionState::Admitted, ActionState::Executing)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "WH003");
    // Without a started write, or without at-most-once, a reclaim is fine.
    let id = row_in(&db.pool, ActionState::Executing, true, false).await;
    move_to(&db.pool, id, ActionState::Executing, ActionState::Executing)
        .await
        .unwrap();
    let id = row_in(&db.pool, ActionState::Executing, false, true).await;
    move_to(&db.pool, id, ActionState::Executing, ActionState::Executing)
        .await
        .unwrap();
    // Ending it UNCERTAIN is what the lease sweep does, as a move (sweep_lease_lost.sql,
    // tested with the sweep in reclaim.rs), never as an update of the live row.
    let id = row_in(&db.pool, ActionState::Executing, true, true).await;
    let e = move_to(&db.pool, id, ActionState::Executing, ActionState::Uncertain)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "WH001");
}

#[tokio::test]
async fn columns_fixed_at_enqueue_never_change() {
    let db = TestDb::new().await;
    let sets = [
        "kind = 'other'",
        "idempotency_key = 'other'",
        "content_digest = sha256('y')",
        "at_most_once = true",
        "instance_level = true",
        "tenant_id = 'other'",
        "project_id = 'p'",
        "lane_key = 'other'",
        "subject_account_id = 's'",
        "max_attempts = 9",
        "expires_at = now()",
        "created_at = now() - interval '1 day'",
        "payload = '{\"changed\": true}'::jsonb",
    ];
    // An update that breaks several rules is refused for the first of them in the guard's own
    // order (ended, transition, fixed column, epoch): the trigger's WHEN only decides whether
    // the function runs, never which refusal it raises.
    let several = [
        ("state = 'DONE', kind = 'other'", "WH001"),
        ("epoch = epoch + 5, kind = 'other'", "WH004"),
        (
            "epoch = epoch + 5, payload = '{\"changed\": true}'::jsonb",
            "WH004",
        ),
        ("epoch = epoch + 5, run_at = now()", "WH005"),
    ];
    for (set, code) in sets.map(|set| (set, "WH004")).into_iter().chain(several) {
        let id = row_in(&db.pool, ActionState::Admitted, false, false).await;
        let sql = format!("UPDATE wharf.action_live SET {set} WHERE id = $1");
        let e = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .execute(&db.pool)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), code, "{set}");
    }
}

#[tokio::test]
async fn the_epoch_moves_only_as_a_claim_says() {
    let db = TestDb::new().await;
    let check = |sql: &'static str, from: ActionState, ok: bool| {
        let pool = db.pool.clone();
        async move {
            let id = row_in(&pool, from, false, false).await;
            let result = sqlx::query(sql).bind(id).execute(&pool).await;
            match result {
                Ok(_) => assert!(ok, "{sql} must be refused"),
                Err(e) => {
                    assert!(!ok, "{sql} must be allowed: {e}");
                    assert_eq!(sqlstate(&e), "WH005", "{sql}");
                }
            }
        }
    };
    check(
        "UPDATE wharf.action_live SET epoch = epoch - 1 WHERE id = $1",
        ActionState::Executing,
        false,
    )
    .await;
    check(
        "UPDATE wharf.action_live SET epoch = epoch + 2 WHERE id = $1",
        ActionState::Executing,
        false,
    )
    .await;
    check(
        "UPDATE wharf.action_live SET epoch = epoch + 1 WHERE id = $1",
        ActionState::Executing,
        true,
    )
    .await;
    check(
        "UPDATE wharf.action_live SET epoch = epoch WHERE id = $1",
        ActionState::Executing,
        true,
    )
    .await;
    check(
        "UPDATE wharf.action_live SET epoch = epoch + 1 WHERE id = $1",
        ActionState::Admitted,
        false,
    )
    .await;
    check(
        "UPDATE wharf.action_live SET state = 'EXECUTING', lease_expires_at = now() WHERE id = $1",
        ActionState::Admitted,
        false,
    )
    .await;
}

#[tokio::test]
async fn the_table_checks_scope_and_end_columns() {
    let db = TestDb::new().await;
    // A non-instance action without a tenant.
    let e = sqlx::query(
        "INSERT INTO wharf.action_live (kind, lane_key, idempotency_key, content_digest, at_most_once,
                                   instance_level, state, max_attempts, payload, run_at)
         VALUES ('k', 'l', 'key', sha256('x'), false, false, 'ADMITTED', 1, '{}', now())",
    )
    .execute(&db.pool)
    .await
    .unwrap_err();
    assert_eq!(sqlstate(&e), "23514");
    // An instance-level one may leave it out.
    sqlx::query(
        "INSERT INTO wharf.action_live (kind, lane_key, idempotency_key, content_digest, at_most_once,
                                   instance_level, state, max_attempts, payload, run_at)
         VALUES ('k', 'l', 'key', sha256('x'), false, true, 'ADMITTED', 1, '{}', now())",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    // An ended action without a stop reason, or with one of another state; a live table row in
    // an ended state.
    for (state, reason, code) in [
        ("DONE", None, "23502"),
        ("DONE", Some("EXPIRED"), "23514"),
        ("ADMITTED", Some("DONE"), "23514"),
        ("DONE", Some("NOT_A_REASON"), "23514"),
    ] {
        let e = sqlx::query(
            "INSERT INTO wharf.action_ended (id, kind, tenant_id, lane_key, idempotency_key,
                                             content_digest, at_most_once, instance_level, state,
                                             stop_reason, epoch, attempt, max_attempts, run_at,
                                             created_at, ended_at)
             VALUES (nextval('wharf.action_id_seq'), 'k', 't', 'l', gen_random_uuid()::text,
                     sha256('x'), false, false, $1, $2, 0, 0, 1, now(), now(), now())",
        )
        .bind(state)
        .bind(reason)
        .execute(&db.pool)
        .await
        .unwrap_err();
        assert_eq!(sqlstate(&e), code, "{state} {reason:?}");
    }
    for state in ["DONE", "UNCERTAIN", "FAILED", "CANCELLED"] {
        let e = sqlx::query(
            "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key,
                                            content_digest, at_most_once, instance_level, state,
                                            max_attempts, payload, run_at)
             VALUES ('k', 't', 'l', gen_random_uuid()::text, sha256('x'), false, false, $1, 1,
                     '{}', now())",
        )
        .bind(state)
        .execute(&db.pool)
        .await
        .unwrap_err();
        assert_eq!(sqlstate(&e), "23514", "{state}");
        assert_eq!(constraint(&e).as_deref(), Some("ck_action_state"));
    }
}

fn constraint(e: &sqlx::Error) -> Option<String> {
    e.as_database_error()
        .and_then(|d| d.constraint())
        .map(str::to_owned)
}

#[tokio::test]
async fn kinds_and_error_codes_are_checked_at_their_edges() {
    let db = TestDb::new().await;
    let insert = |kind: String, error_code: Option<String>| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO wharf.action_live (kind, tenant_id, lane_key, idempotency_key,
                                           content_digest, at_most_once, instance_level, state,
                                           max_attempts, payload, run_at, error_code)
                 VALUES ($1, 't', 'l', gen_random_uuid()::text, sha256('x'), false, false,
                         'ADMITTED', 1, '{}', now(), $2)",
            )
            .bind(kind)
            .bind(error_code)
            .execute(&pool)
            .await
        }
    };
    let longest = "a".repeat(64);
    for good in ["k", "email.send", "a-b_c.9", longest.as_str()] {
        insert(good.to_owned(), Some(good.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{good:?} refused: {e}"));
    }
    insert("k".to_owned(), None).await.unwrap();
    let too_long = "a".repeat(65);
    for bad in ["", "Email", "a b", "é", "a/b", "ａ", too_long.as_str()] {
        let e = insert(bad.to_owned(), None).await.unwrap_err();
        assert_eq!(sqlstate(&e), "23514", "kind {bad:?}");
        assert_eq!(
            constraint(&e).as_deref(),
            Some("ck_action_kind"),
            "kind {bad:?}"
        );
        let e = insert("k".to_owned(), Some(bad.to_owned()))
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&e), "23514", "error code {bad:?}");
        assert_eq!(constraint(&e).as_deref(), Some("ck_action_error_code"));
    }
    // An update that leaves both alone passes the same checks (every CHECK runs on every UPDATE).
    let n = sqlx::query("UPDATE wharf.action_live SET run_at = now() WHERE state = 'ADMITTED'")
        .execute(&db.pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 5);
}

/// The columns fixed at enqueue are checked once, at insert (0018), each bound at its edge, and
/// a refusal names the check as the CHECK constraint it replaced did.
#[tokio::test]
async fn fixed_columns_are_checked_at_insert_at_their_edges() {
    let db = TestDb::new().await;
    let insert = |tenant: Option<String>, lane: String, key: String, digest_len: i32| {
        let pool = db.pool.clone();
        async move {
            sqlx::query(
                "INSERT INTO wharf.action_live (kind, tenant_id, project_id, subject_account_id,
                                           lane_key, idempotency_key, content_digest,
                                           at_most_once, instance_level, state, max_attempts,
                                           payload, run_at)
                 VALUES ('k', $1, $1, $1, $2, $3, substr(sha512('x'), 1, $4), false, false,
                         'ADMITTED', 1, '{}', now())",
            )
            .bind(tenant)
            .bind(lane)
            .bind(key)
            .bind(digest_len)
            .execute(&pool)
            .await
        }
    };
    let n = |len: usize| "x".repeat(len);
    let mut keys = 0..;
    let mut key = || format!("key-{}", keys.next().unwrap());
    // Every bound at its edge passes.
    insert(Some(n(256)), n(256), n(256), 32).await.unwrap();
    insert(Some(n(1)), n(1), key(), 32).await.unwrap();
    for (tenant, lane, idem, digest, refused_by) in [
        (Some(n(257)), n(1), key(), 32, "ck_action_scope_len"),
        (Some(String::new()), n(1), key(), 32, "ck_action_scope_len"),
        (Some(n(1)), n(257), key(), 32, "ck_action_lane_key"),
        (Some(n(1)), String::new(), key(), 32, "ck_action_lane_key"),
        (Some(n(1)), n(1), n(257), 32, "ck_action_idempotency_key"),
        (
            Some(n(1)),
            n(1),
            String::new(),
            32,
            "ck_action_idempotency_key",
        ),
        (Some(n(1)), n(1), key(), 31, "ck_action_digest"),
        (Some(n(1)), n(1), key(), 33, "ck_action_digest"),
        (None, n(1), key(), 32, "ck_action_tenant"),
    ] {
        let e = insert(tenant, lane, idem, digest).await.unwrap_err();
        assert_eq!(sqlstate(&e), "23514", "{refused_by}");
        assert_eq!(constraint(&e).as_deref(), Some(refused_by));
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(count, 2, "a refused insert writes nothing");
    // And they cannot change afterwards: the guard refuses (WH004), so the check still holds.
    let e = sqlx::query("UPDATE wharf.action_live SET lane_key = '' WHERE lane_key = 'x'")
        .execute(&db.pool)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&e), "WH004");
}
