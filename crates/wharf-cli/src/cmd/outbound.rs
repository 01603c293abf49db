//! `wharf signing-key …` and `wharf emit`: the server's own signing keys and outbound envelopes.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use base64::Engine as _;
use serde_json::json;
use wharf::outbound::{self, Destination, EmitRequest, Scope, SealedKeySource};

use crate::compose;
use crate::config::Config;
use crate::db::{Database, Open};

/// Bytes of a payload file `wharf emit` reads: the envelope payload bound (1 MiB) with room.
const PAYLOAD_FILE_BYTES_MAX: u64 = 2 << 20;

/// `wharf signing-key` commands: the keys this server signs outbound envelopes with.
#[derive(Debug, clap::Args)]
pub struct SigningKeyArgs {
    #[command(subcommand)]
    command: SigningKeyCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SigningKeyCommand {
    /// Make a new signing key for a tenant and project; it becomes the current one and the
    /// previous one is retired (still listed, so its envelopes stay verifiable). `rotate` is
    /// the same command.
    #[command(alias = "rotate")]
    Generate {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        project: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// List a tenant's signing keys with their public keys.
    List {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        project: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `wharf emit` options.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    /// The sending tenant.
    #[arg(long)]
    tenant: String,
    /// The sending project.
    #[arg(long)]
    project: String,
    /// A v1 event type (installation, repository, task_proposal, …).
    #[arg(long)]
    event_type: String,
    /// A file holding the payload as JSON (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    payload: PathBuf,
    /// The envelope's idempotency key: emitting again with it returns the same envelope.
    #[arg(long)]
    idempotency_key: String,
    /// The receiver's ingest URL (`…/v1/tenants/{t}/projects/{p}/envelopes`); an
    /// `[[envelope.destinations]]` entry must cover it (it holds the receiver's credential).
    #[arg(long, value_name = "URL")]
    to: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `wharf signing-key …`.
pub async fn signing_key(config: &Config, args: SigningKeyArgs) -> anyhow::Result<()> {
    let db = Database::open(config, Open::ADMIN).await?;
    let result = match args.command {
        SigningKeyCommand::Generate {
            tenant,
            project,
            json,
        } => {
            let server_key = compose::server_key(config)?;
            let info =
                outbound::generate_signing_key(&db.pool, &server_key, &tenant, &project).await;
            info.map(|info| print_keys(&[info], json))
                .map_err(anyhow::Error::from)
        }
        SigningKeyCommand::List {
            tenant,
            project,
            json,
        } => outbound::list_signing_keys(&db.pool, &tenant, project.as_deref())
            .await
            .map(|keys| print_keys(&keys, json))
            .map_err(anyhow::Error::from),
    };
    db.close().await?;
    result
}

fn print_keys(keys: &[outbound::SigningKeyInfo], json: bool) {
    let b64 = |k: &[u8; 32]| base64::engine::general_purpose::STANDARD.encode(k);
    if json {
        let keys: Vec<_> = keys
            .iter()
            .map(|k| {
                json!({"tenant": k.tenant, "project": k.project, "key_id": k.key_id,
                       "public_key": b64(&k.public_key), "state": format!("{:?}", k.state).to_lowercase()})
            })
            .collect();
        println!("{}", serde_json::Value::Array(keys));
        return;
    }
    for k in keys {
        println!(
            "{} {} {} {:?} public key {}",
            k.tenant,
            k.project,
            k.key_id,
            k.state,
            b64(&k.public_key)
        );
    }
}

/// `wharf emit`: signs an envelope with the tenant's current key and enqueues its delivery.
pub async fn emit(config: &Config, args: EmitArgs) -> anyhow::Result<()> {
    let payload = read_payload(&args.payload)?;
    compose::check_envelope_destination(config, &args.to)?;
    let registry = Arc::new(compose::registry(config)?);
    let keys = SealedKeySource::new(compose::server_key(config)?);
    let db = Database::open(config, Open::ADMIN).await?;
    let request = EmitRequest::new(
        Scope::new(&args.tenant, &args.project),
        &args.event_type,
        payload,
        &args.idempotency_key,
        Destination::new(&args.to),
    );
    let emitted = async {
        let mut tx = db.pool.begin().await?;
        let emitted = outbound::emit_envelope(&mut tx, &registry, &keys, &request).await?;
        tx.commit().await?;
        anyhow::Ok(emitted)
    }
    .await;
    db.close().await?;
    let emitted = emitted?;
    if args.json {
        println!(
            "{}",
            json!({"action_id": emitted.action_id, "created": emitted.created,
                   "event_id": emitted.envelope.event_id,
                   "producer_sequence": emitted.envelope.producer_sequence})
        );
    } else {
        println!(
            "{} envelope {} (sequence {}) as action {}",
            if emitted.created {
                "emitted"
            } else {
                "already emitted:"
            },
            emitted.envelope.event_id,
            emitted.envelope.producer_sequence,
            emitted.action_id
        );
    }
    Ok(())
}

fn read_payload(path: &std::path::Path) -> anyhow::Result<serde_json::Value> {
    use std::io::Read;
    let mut text = String::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .take(PAYLOAD_FILE_BYTES_MAX)
            .read_to_string(&mut text)?;
    } else {
        std::fs::File::open(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .take(PAYLOAD_FILE_BYTES_MAX)
            .read_to_string(&mut text)?;
    }
    serde_json::from_str(&text).context("the payload is not valid JSON")
}
