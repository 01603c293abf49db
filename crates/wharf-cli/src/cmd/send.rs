//! `wharf send`: a producer that builds, signs and sends one envelope (with `wharf-client`),
//! retrying the same bytes until the server decides, and exits non-zero unless it is
//! acknowledged.
//!
//! The stream's next sequence comes from `--sequence`, or from a small JSON state file
//! (`--state`) that continues the stream across runs. With a state file, the envelope is written
//! to it *before* it is sent and cleared only after a decision, so a run that ends without one
//! (network down, killed) leaves it pending and the next run re-sends those same bytes first —
//! never a new envelope under the same sequence.
//!
//! With `--nats URL --subject S` the envelope is published to a JetStream subject instead
//! (credential in `Authorization`, `Nats-Msg-Id` = the event id, a reply subject for the
//! answer): the stream stores it, and the answer of the wharf consuming that stream is printed
//! as over HTTP. No answer within `--answer-timeout-ms` leaves the envelope pending (it is
//! stored in the stream and will be decided when a consumer reads it).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use wharf_client::{Producer, ProducerConfig};

use crate::config::Config;

/// Largest payload file `send` reads (the inbox's payload bound).
const PAYLOAD_FILE_BYTES_MAX: u64 = 1024 * 1024;

/// `wharf send` options.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// The server's base URL.
    #[arg(long, env = "WHARF_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The tenant.
    #[arg(long, env = "WHARF_TENANT")]
    tenant: String,
    /// The project.
    #[arg(long, env = "WHARF_PROJECT")]
    project: String,
    /// The bearer credential (from `wharf credential issue`).
    #[arg(long, env = "WHARF_TOKEN", hide_env_values = true)]
    token: String,
    /// The signing key's id.
    #[arg(long, env = "WHARF_KEY_ID")]
    key_id: String,
    /// The private seed, standard base64 (from `wharf key generate`).
    #[arg(long, env = "WHARF_SIGNING_KEY", hide_env_values = true)]
    key: String,
    /// The event type (a registered payload schema, e.g. `sync_cursor`).
    #[arg(long)]
    event_type: String,
    /// The payload as JSON text, or `@FILE` to read it from a file.
    #[arg(long)]
    payload: String,
    /// The idempotency key [default: the event id].
    #[arg(long)]
    idempotency_key: Option<String>,
    /// The producer sequence to use (overrides --state).
    #[arg(long)]
    sequence: Option<u64>,
    /// A state file holding the next sequence; read before and written after sending.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Most attempts before giving up without a decision.
    #[arg(long, default_value_t = 8)]
    attempts_max: u32,
    /// Print the answer as JSON.
    #[arg(long)]
    json: bool,
    /// Publish to this NATS server's JetStream instead of HTTP (nats://host:port).
    #[arg(long, value_name = "URL", requires = "subject")]
    nats: Option<String>,
    /// The subject to publish to (with --nats), e.g. wharf.inbox.acme.p1.
    #[arg(long, value_name = "SUBJECT", requires = "nats")]
    subject: Option<String>,
    /// A NATS credentials file (with --nats).
    #[arg(long, value_name = "FILE", requires = "nats")]
    nats_credentials: Option<PathBuf>,
    /// How long to wait for wharf's answer on the reply subject (with --nats), in ms.
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..=600_000))]
    answer_timeout_ms: u64,
}

/// An answer, from HTTP or from the reply subject.
struct Decided {
    outcome: String,
    reason: String,
    correlation_id: String,
    acknowledged_sequence: u64,
    attempts: u32,
}

impl Decided {
    fn is_acknowledged(&self) -> bool {
        matches!(
            self.outcome.as_str(),
            "accept-delayed" | "accept-reordered" | "ignore-duplicate"
        )
    }
}

/// Sends one envelope over HTTP, or publishes it to `--subject` on `--nats`.
async fn deliver(
    args: &SendArgs,
    producer: &Producer,
    envelope: &wharf::core::envelope::Envelope,
) -> anyhow::Result<Decided> {
    let (Some(url), Some(subject)) = (&args.nats, &args.subject) else {
        let answer = producer.send(envelope).await?;
        return Ok(Decided {
            outcome: answer.outcome.as_str().to_owned(),
            reason: answer.reason,
            correlation_id: answer.correlation_id,
            acknowledged_sequence: answer.acknowledged_sequence,
            attempts: answer.attempts,
        });
    };
    let nats = wharf_nats::NatsProducer::connect(url, args.nats_credentials.as_deref())
        .await
        .with_context(|| format!("--nats {url}"))?;
    let wait = std::time::Duration::from_millis(args.answer_timeout_ms);
    let (published, answer) = nats
        .send(
            subject,
            &args.token,
            &envelope.event_id,
            envelope.to_canonical_json()?,
            Some(wait),
        )
        .await?;
    let Some(answer) = answer else {
        bail!(
            "stored in JetStream stream {} as message {}{}, but no answer from wharf within {} ms              (is a consumer of that stream running?); it stays pending",
            published.stream,
            published.sequence,
            if published.duplicate {
                " (a duplicate)"
            } else {
                ""
            },
            args.answer_timeout_ms
        );
    };
    let text = |k: &str| answer.body[k].as_str().unwrap_or_default().to_owned();
    let Some(outcome) = answer.body["outcome"].as_str() else {
        bail!(
            "wharf did not decide the envelope: {} {} ({}); correlation id {}",
            answer.status,
            text("code"),
            text("reason"),
            answer.correlation_id
        );
    };
    Ok(Decided {
        outcome: outcome.to_owned(),
        reason: text("reason"),
        correlation_id: text("correlation_id"),
        acknowledged_sequence: answer.body["acknowledged_sequence"].as_u64().unwrap_or(0),
        attempts: 1,
    })
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    next_sequence: u64,
    acknowledged_sequence: u64,
    /// A signed envelope sent without a decision yet.
    #[serde(default)]
    pending: Option<wharf::core::envelope::Envelope>,
}

fn read_state(path: &Path) -> anyhow::Result<State> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a wharf send state file", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State {
            next_sequence: 1,
            ..State::default()
        }),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn write_state(path: &Path, state: &State) -> anyhow::Result<()> {
    // Write then rename, so an interrupted run never leaves half a file (and a reused sequence).
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

fn read_payload(text: &str) -> anyhow::Result<serde_json::Value> {
    let bytes = match text.strip_prefix('@') {
        Some(file) => {
            let len = std::fs::metadata(file)
                .with_context(|| format!("cannot read {file}"))?
                .len();
            if len > PAYLOAD_FILE_BYTES_MAX {
                bail!("{file} is larger than 1 MiB");
            }
            std::fs::read(file).with_context(|| format!("cannot read {file}"))?
        }
        None => text.as_bytes().to_vec(),
    };
    // The strict parser: floats and duplicate keys are refused here rather than by the server.
    wharf::core::canonical::parse_closed(&bytes).context("--payload is not integer-only JSON")
}

/// `wharf send`.
pub async fn run(_config: &Config, args: SendArgs) -> anyhow::Result<()> {
    let seed = wharf::inbox::key_from_base64(&args.key).context("--key")?;
    let payload = read_payload(&args.payload)?;
    let mut state = match &args.state {
        Some(path) => read_state(path)?,
        None => State::default(),
    };
    let Some(sequence) = args
        .sequence
        .or((args.state.is_some()).then_some(state.next_sequence))
    else {
        bail!("give --sequence N, or --state FILE to continue a stream across runs");
    };
    let mut config = ProducerConfig::new(
        args.url.clone(),
        args.tenant.clone(),
        args.project.clone(),
        args.token.clone(),
        args.key_id.clone(),
        seed,
    );
    config.attempts_max = args.attempts_max;
    let producer = Producer::new(config, sequence)?;
    if let (Some(path), Some(pending)) = (&args.state, state.pending.take()) {
        eprintln!(
            "re-sending the envelope of sequence {} left pending by an earlier run",
            pending.producer_sequence
        );
        let answer = deliver(&args, &producer, &pending).await?;
        eprintln!("{} ({})", answer.outcome, answer.reason);
        write_state(path, &state)?;
    }
    let envelope = producer.envelope(&args.event_type, payload, args.idempotency_key.clone())?;
    if let Some(path) = &args.state {
        state.next_sequence = producer.next_sequence();
        state.pending = Some(envelope.clone());
        write_state(path, &state)?;
    }
    let spinner = super::progress::spinner("sending");
    let answer = deliver(&args, &producer, &envelope).await;
    spinner.finish_and_clear();
    let answer = answer?;
    if let Some(path) = &args.state {
        state.pending = None;
        state.acknowledged_sequence = state
            .acknowledged_sequence
            .max(producer.acknowledged_sequence())
            .max(answer.acknowledged_sequence);
        write_state(path, &state)?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::json!({"outcome": answer.outcome, "reason": answer.reason,
                "correlation_id": answer.correlation_id, "event_id": envelope.event_id,
                "producer_sequence": envelope.producer_sequence,
                "acknowledged_sequence": answer.acknowledged_sequence, "attempts": answer.attempts})
        );
    } else {
        println!(
            "{} ({}) event {} sequence {}; acknowledged sequence {}; correlation id {}",
            answer.outcome,
            answer.reason,
            envelope.event_id,
            envelope.producer_sequence,
            answer.acknowledged_sequence,
            answer.correlation_id
        );
    }
    if !answer.is_acknowledged() {
        bail!(
            "the envelope was refused: {} ({})",
            answer.outcome,
            answer.reason
        );
    }
    Ok(())
}
