//! Shared support: a scriptable recording adapter and small helpers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use sqlx::PgPool;
use wharf::outbox::{
    ActionRequest, ActionView, Adapter, Attempt, Backoff, ClaimBudget, ErrorCode, Executor,
    ExecutorConfig, KindSpec, Outcome, Registry,
};

pub const KIND: &str = "fake";
pub const AMO_KIND: &str = "fake.amo";
pub const INSTANCE_KIND: &str = "fake.instance";

/// One step of a scripted attempt.
#[derive(Debug, Clone)]
pub enum Step {
    /// Pass the fence, then answer with this outcome (Abandoned if the fence refuses).
    Fenced(Outcome),
    /// Answer without passing the fence.
    Unfenced(Outcome),
    /// Panic before the fence.
    PanicBefore,
    /// Pass the fence, then panic.
    PanicAfter,
    /// Pass the fence, then hang past the call timeout.
    HangAfter,
    /// Run SQL (e.g. erase, shorten the lease) on this pool, as another party would, then try
    /// the fence and report what it said.
    SqlThenFence(PgPool, &'static str),
    /// Erase this subject through this pool, then try the fence and report what it said.
    EraseThenFence(PgPool, &'static str),
    /// Try a write through the attempt's read-only connection, record what PostgreSQL said
    /// (`read-only: <SQLSTATE>` or `wrote`), then pass the fence and answer Done.
    WriteThroughReadOnly,
    /// Sleep this many milliseconds, then try the fence and report what it said.
    SleepThenFence(u64),
}

/// What the adapter saw, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub action_id: i64,
    pub lane_key: String,
    pub attempt: u32,
    pub epoch: i64,
    pub enqueued_at: chrono::DateTime<chrono::Utc>,
    pub write_started: bool,
    pub fence: Option<String>,
}

/// A fake adapter: follows a script per action (by idempotency key; default: Done), records
/// every call.
pub struct Fake {
    pub spec: KindSpec,
    pub scripts: Mutex<std::collections::HashMap<String, VecDeque<Step>>>,
    pub seen: Mutex<Vec<Seen>>,
    pub budget: Mutex<ClaimBudget>,
    /// The tenants `claimed` was told, one entry per call.
    pub claimed: Mutex<Vec<Vec<Option<String>>>>,
    /// What `claim_may_fence` answers.
    pub claim_may_fence: std::sync::atomic::AtomicBool,
}

impl Fake {
    pub fn new(name: &'static str, at_most_once: bool, instance_level: bool) -> Arc<Fake> {
        Arc::new(Fake {
            spec: KindSpec {
                name,
                at_most_once,
                instance_level,
                max_attempts_default: 3,
                backoff: Backoff::default(),
                // Generous: a loaded CI machine must not turn a slow fence into a timeout.
                call_timeout_ms: 2_000,
            },
            scripts: Mutex::new(Default::default()),
            seen: Mutex::new(Vec::new()),
            budget: Mutex::new(ClaimBudget::Unlimited),
            claimed: Mutex::new(Vec::new()),
            claim_may_fence: std::sync::atomic::AtomicBool::new(true),
        })
    }

    pub fn with_call_timeout(name: &'static str, call_timeout_ms: u64) -> Arc<Fake> {
        let mut fake = Fake::new(name, false, false);
        Arc::get_mut(&mut fake).unwrap().spec.call_timeout_ms = call_timeout_ms;
        fake
    }

    pub fn script(&self, key: &str, steps: Vec<Step>) {
        self.scripts
            .lock()
            .unwrap()
            .insert(key.to_owned(), steps.into());
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

#[async_trait]
impl Adapter for Fake {
    fn spec(&self) -> KindSpec {
        self.spec.clone()
    }

    fn validate(&self, payload: &Value) -> Result<(), String> {
        if payload.get("refuse").is_some() {
            return Err("payload asks to be refused".into());
        }
        Ok(())
    }

    fn claim_budget(&self) -> ClaimBudget {
        self.budget.lock().unwrap().clone()
    }

    fn claim_may_fence(&self) -> bool {
        self.claim_may_fence
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    fn claimed(&self, tenants: &[Option<&str>]) {
        self.claimed
            .lock()
            .unwrap()
            .push(tenants.iter().map(|t| t.map(str::to_owned)).collect());
    }

    async fn execute(&self, attempt: &mut Attempt) -> Outcome {
        let step = self
            .scripts
            .lock()
            .unwrap()
            .get_mut(attempt.idempotency_key())
            .and_then(|s| s.pop_front())
            .unwrap_or(Step::Fenced(Outcome::Done {
                readback_ref: Some(format!("ref-{}", attempt.action_id())),
            }));
        let mut seen = Seen {
            action_id: attempt.action_id(),
            lane_key: attempt.lane_key().to_owned(),
            attempt: attempt.attempt(),
            epoch: attempt.epoch(),
            enqueued_at: attempt.enqueued_at(),
            write_started: attempt.write_started(),
            fence: None,
        };
        let record = |seen: Seen| self.seen.lock().unwrap().push(seen);
        match step {
            Step::Unfenced(outcome) => {
                record(seen);
                outcome
            }
            Step::PanicBefore => {
                record(seen);
                panic!("scripted panic before the fence");
            }
            Step::Fenced(outcome) => match attempt.fence().begin_write().await {
                Ok(()) => {
                    seen.fence = Some("ok".into());
                    record(seen);
                    outcome
                }
                Err(refused) => {
                    seen.fence = Some(format!("{refused:?}"));
                    record(seen);
                    Outcome::Abandoned
                }
            },
            Step::PanicAfter => {
                attempt.fence().begin_write().await.expect("fence");
                seen.fence = Some("ok".into());
                record(seen);
                panic!("scripted panic after the fence");
            }
            Step::HangAfter => {
                attempt.fence().begin_write().await.expect("fence");
                seen.fence = Some("ok".into());
                record(seen);
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Outcome::Done { readback_ref: None }
            }
            Step::SqlThenFence(pool, sql) => {
                sqlx::query(sqlx::AssertSqlSafe(
                    sql.replace("$ID", &attempt.action_id().to_string()),
                ))
                .execute(&pool)
                .await
                .expect("scripted SQL");
                let answer = attempt.fence().begin_write().await;
                seen.fence = Some(match &answer {
                    Ok(()) => "ok".into(),
                    Err(refused) => format!("{refused:?}"),
                });
                record(seen);
                match answer {
                    Ok(()) => Outcome::Done { readback_ref: None },
                    Err(_) => Outcome::Abandoned,
                }
            }
            Step::WriteThroughReadOnly => {
                let mut conn = attempt.read_only().await.expect("a read-only connection");
                let read: i64 = sqlx::query_scalar("SELECT count(*) FROM wharf.action")
                    .fetch_one(&mut *conn)
                    .await
                    .expect("a read through the read-only connection");
                assert!(read >= 1, "the attempt's own action is there to read");
                let wrote =
                    sqlx::query("UPDATE wharf.action_live SET lane_key = lane_key WHERE id = $1")
                        .bind(attempt.action_id())
                        .execute(&mut *conn)
                        .await;
                drop(conn);
                seen.fence = Some(match wrote {
                    Ok(_) => "wrote".into(),
                    Err(sqlx::Error::Database(e)) => {
                        format!("read-only: {}", e.code().unwrap_or_default())
                    }
                    Err(e) => format!("other: {e}"),
                });
                record(seen);
                attempt.fence().begin_write().await.expect("fence");
                Outcome::Done { readback_ref: None }
            }
            Step::EraseThenFence(..) | Step::SleepThenFence(_) => {
                match step {
                    Step::EraseThenFence(pool, subject) => {
                        wharf::outbox::erase_subject(&pool, subject)
                            .await
                            .expect("erase");
                    }
                    Step::SleepThenFence(ms) => {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    _ => unreachable!("matched above"),
                }
                let answer = attempt.fence().begin_write().await;
                seen.fence = Some(match &answer {
                    Ok(()) => "ok".into(),
                    Err(refused) => format!("{refused:?}"),
                });
                record(seen);
                match answer {
                    Ok(()) => Outcome::Done { readback_ref: None },
                    Err(_) => Outcome::Abandoned,
                }
            }
        }
    }
}

/// A registry with the three fake kinds.
pub fn registry() -> (Arc<Registry>, Arc<Fake>, Arc<Fake>, Arc<Fake>) {
    let fake = Fake::new(KIND, false, false);
    let amo = Fake::new(AMO_KIND, true, false);
    let inst = Fake::new(INSTANCE_KIND, false, true);
    let mut r = Registry::new();
    r.register(fake.clone()).unwrap();
    r.register(amo.clone()).unwrap();
    r.register(inst.clone()).unwrap();
    (Arc::new(r), fake, amo, inst)
}

/// Test settings: short lease and margin, no NOTIFY unless asked.
pub fn config() -> ExecutorConfig {
    let mut c = ExecutorConfig::default();
    c.lease_ms = 20_000;
    c.fence_margin_ms = 5_000;
    c.notify = false;
    c.poll_interval_ms_min = 5;
    c.poll_interval_ms_max = 50;
    c
}

pub fn executor(pool: &PgPool, registry: &Arc<Registry>) -> Executor {
    Executor::new(pool.clone(), registry.clone(), config()).unwrap()
}

/// [`config`] with every attempt fencing on its own statement (`fence_with_claim` off): for the
/// tests of the durable fence itself, which the claim replaces for kinds that are not
/// at-most-once.
pub fn durable_fence_config() -> ExecutorConfig {
    let mut c = config();
    c.fence_with_claim = false;
    c
}

pub fn durable_fence_executor(pool: &PgPool, registry: &Arc<Registry>) -> Executor {
    Executor::new(pool.clone(), registry.clone(), durable_fence_config()).unwrap()
}

pub fn req(lane: &str, key: &str) -> ActionRequest {
    ActionRequest::new(KIND, lane, key, json!({"n": key})).tenant("t1")
}

pub async fn view(pool: &PgPool, id: i64) -> ActionView {
    wharf::outbox::get(pool, id)
        .await
        .unwrap()
        .expect("action exists")
}

pub async fn enqueue(pool: &PgPool, registry: &Registry, r: ActionRequest) -> i64 {
    let mut conn = pool.acquire().await.unwrap();
    wharf::outbox::enqueue(&mut conn, registry, r)
        .await
        .unwrap()
        .id
}

pub fn code(s: &'static str) -> ErrorCode {
    ErrorCode::new(s).unwrap()
}

/// Expires every lease now (instead of waiting for it).
pub async fn expire_leases(pool: &PgPool) {
    sqlx::query("UPDATE wharf.action_live SET lease_expires_at = now() - interval '1 second' WHERE state = 'EXECUTING'")
        .execute(pool)
        .await
        .unwrap();
}

/// Makes every UPDATE of `wharf.action_live` whose text matches `pattern` (LIKE) fail, after letting
/// `skip` of them through. A statement-level trigger, so it fires even when no row matches.
pub async fn fail_updates_matching(pool: &sqlx::PgPool, pattern: &str, skip: i32) {
    for sql in [
        "CREATE TABLE public.fail_ctl (pattern text PRIMARY KEY, skip integer NOT NULL)",
        "CREATE FUNCTION public.fail_matching() RETURNS trigger LANGUAGE plpgsql AS $$
         DECLARE r record;
         BEGIN
           -- Only the client's statement, not the updates its own triggers make.
           IF pg_trigger_depth() > 1 THEN RETURN NULL; END IF;
           FOR r IN SELECT * FROM public.fail_ctl LOOP
             IF current_query() LIKE r.pattern THEN
               IF r.skip > 0 THEN
                 UPDATE public.fail_ctl SET skip = skip - 1 WHERE pattern = r.pattern;
               ELSE
                 RAISE EXCEPTION 'injected failure';
               END IF;
             END IF;
           END LOOP;
           RETURN NULL;
         END $$",
        "CREATE TRIGGER zz_fail BEFORE UPDATE ON wharf.action_live
           FOR EACH STATEMENT EXECUTE FUNCTION public.fail_matching()",
    ] {
        sqlx::query(sql).execute(pool).await.unwrap();
    }
    sqlx::query("INSERT INTO public.fail_ctl VALUES ($1, $2)")
        .bind(pattern)
        .bind(skip)
        .execute(pool)
        .await
        .unwrap();
}

/// Every row of `tables` (name, ORDER BY), as text: equal before and after means a refused
/// request changed nothing there.
pub async fn rows_of(pool: &PgPool, tables: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (table, order) in tables {
        let rows: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT string_agg(t::text, E'\\n' ORDER BY {order}) FROM wharf.{table} t"
        )))
        .fetch_one(pool)
        .await
        .unwrap();
        out.push_str(&format!("{table}:\n{}\n", rows.unwrap_or_default()));
    }
    out
}
