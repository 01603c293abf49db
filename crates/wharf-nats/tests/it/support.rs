//! The fixture: a tenant with a credential and a key, a stream of its own on the real NATS, a
//! producer that builds signed envelopes, and a consumer task to start and stop.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use serde_json::{Value, json};
use wharf::core::envelope::Envelope;
use wharf::inbox::{self, Inbox, InboxConfig, LimitPolicy};
use wharf_client::{Producer, ProducerConfig};
use wharf_nats::{JetStreamConfig, JetStreamIngest, JetStreamStats};
use wharf_testkit::TestDb;

pub const TENANT: &str = "acme";
pub const PROJECT: &str = "p1";
/// The variable naming the NATS server the tests use.
pub const NATS_URL_VAR: &str = "WHARF_TEST_NATS_URL";
/// How long a test waits for the consumer to settle what it expects.
pub const SETTLE_WAIT_MS: u64 = 30_000;

/// The NATS URL, or `None` after saying on stderr (uncaptured) that `test` did not run.
pub fn nats_url(test: &str) -> Option<String> {
    match std::env::var(NATS_URL_VAR) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            // Straight to the process's stderr: the test harness captures eprintln! of a
            // passing test, and this line must be seen.
            let _ = writeln!(
                std::io::stderr(),
                "wharf-nats: {test} DID NOT RUN: set {NATS_URL_VAR}=nats://127.0.0.1:4222 \
                 (a NATS server with JetStream; .ci/run starts one)"
            );
            None
        }
    }
}

pub struct Fx {
    pub db: TestDb,
    pub nats_url: String,
    pub js: jetstream::Context,
    pub inbox: Arc<Inbox>,
    pub token: String,
    pub producer: Producer,
    /// This test's subject prefix and stream name.
    pub prefix: String,
    pub stream: String,
}

impl Fx {
    pub async fn new(nats_url: String) -> Fx {
        Fx::with_inbox(nats_url, unlimited()).await
    }

    pub async fn with_inbox(nats_url: String, config: InboxConfig) -> Fx {
        let db = TestDb::new().await;
        inbox::create_tenant(&db.pool, TENANT).await.unwrap();
        let credential = inbox::issue_credential(&db.pool, TENANT, "alice", Some("dev-1"))
            .await
            .unwrap();
        let key = inbox::generate_key(
            &db.pool,
            TENANT,
            PROJECT,
            Some("k1"),
            inbox::KEY_REPLAY_WINDOW_DEFAULT,
        )
        .await
        .unwrap();
        let producer = Producer::new(
            ProducerConfig::new(
                "http://127.0.0.1:9",
                TENANT,
                PROJECT,
                credential.token.clone(),
                key.key_id.clone(),
                key.private_seed,
            ),
            1,
        )
        .unwrap();
        let client = async_nats::connect(&nats_url).await.unwrap();
        let unique = ulid::Ulid::new().to_string().to_ascii_lowercase();
        let inbox = Arc::new(Inbox::new(db.pool.clone(), config));
        Fx {
            db,
            nats_url,
            js: jetstream::new(client),
            inbox,
            token: credential.token,
            producer,
            prefix: format!("wt{unique}"),
            stream: format!("WT{}", unique.to_ascii_uppercase()),
        }
    }

    /// This test's consumer configuration: short waits, so redeliveries come quickly.
    pub fn config(&self, consumer: &str) -> JetStreamConfig {
        let mut config = JetStreamConfig::new(self.nats_url.clone(), &self.stream, consumer);
        config.subjects = format!("{}.{{tenant}}.{{project}}", self.prefix);
        config.pipeline_ms_max = 5_000;
        config.ack_wait_ms = 6_000;
        config.nak_delay_ms = 200;
        config
    }

    pub fn subject(&self, tenant: &str, project: &str) -> String {
        format!("{}.{tenant}.{project}", self.prefix)
    }

    /// The next envelope of the producer's stream.
    pub fn envelope(&self) -> Envelope {
        let n = self.producer.next_sequence();
        self.producer
            .envelope("sync_cursor", cursor(n), None)
            .unwrap()
    }

    /// Publishes `body` to `subject` with the credential `token` (none when `None`), and waits
    /// for the stream to store it.
    pub async fn publish_raw(&self, subject: &str, token: Option<&str>, body: Vec<u8>) {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(token) = token {
            headers.insert("Authorization", format!("Bearer {token}").as_str());
        }
        self.js
            .publish_with_headers(subject.to_owned(), headers, body.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// Publishes an envelope to its own tenant and project with the right credential.
    pub async fn publish(&self, envelope: &Envelope) {
        self.publish_raw(
            &self.subject(TENANT, PROJECT),
            Some(&self.token),
            bytes(envelope),
        )
        .await;
    }

    /// Starts a consumer task, and waits until it has set up its stream and durable consumer
    /// (it creates them when they are missing).
    pub async fn start(&self, config: JetStreamConfig) -> Running {
        let name = config.consumer.clone();
        let ingest = Arc::new(JetStreamIngest::new(self.inbox.clone(), config).unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn({
            let ingest = ingest.clone();
            async move {
                ingest
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await
            }
        });
        let started = Instant::now();
        loop {
            if let Ok(stream) = self.js.get_stream(&self.stream).await
                && stream
                    .get_consumer::<jetstream::consumer::pull::Config>(&name)
                    .await
                    .is_ok()
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_millis(SETTLE_WAIT_MS),
                "the consumer did not set up its stream"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Running { ingest, stop, task }
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.db.pool)
            .await
            .unwrap()
    }

    pub async fn identities(&self) -> i64 {
        self.count("SELECT count(*) FROM wharf.inbox_identities")
            .await
    }

    /// The stream's contiguous cursor (0 when it has none yet).
    pub async fn cursor(&self) -> i64 {
        self.count(
            "SELECT coalesce(max(acknowledged_sequence::text::bigint), 0) FROM wharf.inbox_streams",
        )
        .await
    }

    /// `(outcome, reason)` of every audit row, in order.
    pub async fn audit(&self) -> Vec<(String, String)> {
        sqlx::query_as("SELECT outcome, reason FROM wharf.inbox_audit ORDER BY audit_id")
            .fetch_all(&self.db.pool)
            .await
            .unwrap()
    }

    /// Deletes this test's stream (best effort: a failed test leaves it for the server's
    /// own storage limits, under a name no other test uses).
    pub async fn cleanup(&self) {
        let _ = self.js.delete_stream(&self.stream).await;
    }
}

pub struct Running {
    pub ingest: Arc<JetStreamIngest>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), wharf_nats::Error>>,
}

impl Running {
    pub fn stats(&self) -> JetStreamStats {
        self.ingest.stats()
    }

    /// Waits until `done(stats)` holds; panics with the stats after [`SETTLE_WAIT_MS`].
    pub async fn until(&self, what: &str, done: impl Fn(&JetStreamStats) -> bool) {
        let started = Instant::now();
        while !done(&self.stats()) {
            assert!(
                started.elapsed() < Duration::from_millis(SETTLE_WAIT_MS),
                "waited {SETTLE_WAIT_MS} ms for {what}; stats {:?}",
                self.stats()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the consumer and waits for it to finish the messages in hand.
    pub async fn stop(self) -> JetStreamStats {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
        self.ingest.stats()
    }
}

pub fn unlimited() -> InboxConfig {
    InboxConfig {
        peer_limit: LimitPolicy::UNLIMITED,
        consumer_limit: LimitPolicy::UNLIMITED,
        identity_limit: LimitPolicy::UNLIMITED,
        ..InboxConfig::default()
    }
}

pub fn cursor(n: u64) -> Value {
    json!({"producer_id": "dev-1", "acknowledged_sequence": n.saturating_sub(1),
           "acknowledged_event_id": null, "version": 1})
}

pub fn bytes(envelope: &Envelope) -> Vec<u8> {
    envelope.to_canonical_json().unwrap()
}
