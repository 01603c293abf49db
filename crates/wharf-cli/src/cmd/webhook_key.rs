//! `wharf webhook-key show`: the public key that signs this server's webhooks, in the
//! Standard Webhooks form receivers load (`whpk_<base64>`), and the same list for
//! `GET /v1/webhook-keys`.
//!
//! The key is the `[webhook] signing_key` (or `WHARF_WEBHOOK__SIGNING_KEY`), else
//! `<data-dir>/webhook.key`, made on first use exactly as `wharf serve` makes it
//! ([`compose::webhook_key`]), so a receiver can be configured before the first webhook is sent.
//! Only the public half is ever printed. Needs no database.

use wharf_adapters::http::public_key_whpk;

use crate::compose;
use crate::config::Config;

/// `wharf webhook-key` commands.
#[derive(Debug, clap::Args)]
pub struct WebhookKeyArgs {
    #[command(subcommand)]
    command: WebhookKeyCommand,
}

#[derive(Debug, clap::Subcommand)]
enum WebhookKeyCommand {
    /// Print the webhook public key (`whpk_…`), one line per signing key.
    Show {
        /// Print JSON: `{"keys": [{"algorithm": "Ed25519", "public_key": "whpk_…"}]}`, the
        /// same document `GET /v1/webhook-keys` answers.
        #[arg(long)]
        json: bool,
    },
}

/// The `whpk_…` form of every key that signs this process's webhooks. One today (the
/// `webhook` kind signs with one key); a list so that a rotation adds an entry, not a format.
pub fn public_keys(config: &Config) -> anyhow::Result<Vec<String>> {
    let key = compose::webhook_key(config)?;
    Ok(vec![public_key_whpk(&key.verifying_key())])
}

/// `wharf webhook-key …`.
pub async fn run(config: &Config, args: WebhookKeyArgs) -> anyhow::Result<()> {
    match args.command {
        WebhookKeyCommand::Show { json } => {
            let keys = public_keys(config)?;
            if json {
                let keys: Vec<serde_json::Value> = keys
                    .iter()
                    .map(|k| {
                        serde_json::json!({
                            "algorithm": wharf_http::webhook_keys::ALGORITHM,
                            "public_key": k,
                        })
                    })
                    .collect();
                println!("{}", serde_json::json!({ "keys": keys }));
            } else {
                for key in keys {
                    println!("{key}");
                }
            }
            Ok(())
        }
    }
}
