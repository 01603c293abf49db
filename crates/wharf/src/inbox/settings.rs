//! The inbox's configuration as an operator writes it (the `[inbox]` table of `wharf.toml`, or
//! `WHARF_INBOX__<KEY>` variables), and its translation into an [`InboxConfig`].
//!
//! Owns: key names, defaults as plain numbers, and loading operator schema files. Must not know
//! where the table comes from (the binary's configuration module reads it).

use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;

use super::error::Error;
use super::retention::{
    HOUSEKEEPING_INTERVAL_MS_DEFAULT, HOUSEKEEPING_INTERVAL_MS_MAX, HOUSEKEEPING_INTERVAL_MS_MIN,
    Housekeeping, PAYLOAD_RETENTION_DAYS_MAX, PAYLOAD_RETENTION_DEFAULT,
};
use super::{InboxConfig, LimitPolicy};
use crate::core::schema::Catalog;

/// Most operator schema files read from `schemas_dir` (the catalog holds at most 1,024 types,
/// the 14 built-ins included).
pub const SCHEMA_FILES_MAX: usize = 1000;

/// The `[inbox]` table. Every key is optional; a missing one keeps [`InboxConfig::default`]'s
/// value. Unknown keys are refused, so a typo is an error rather than a silent default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InboxSettings {
    /// Peer limiter: requests per second per client address.
    pub peer_rate_per_s: Option<f64>,
    /// Peer limiter: burst per client address.
    pub peer_burst: Option<u32>,
    /// Peer limiter: addresses remembered.
    pub peer_keys_max: Option<usize>,
    /// Peer limiter for broker consumers (JetStream): messages per second per consumer.
    pub consumer_rate_per_s: Option<f64>,
    /// Peer limiter for broker consumers: burst per consumer.
    pub consumer_burst: Option<u32>,
    /// Identity limiter (`sync-ingest`): envelopes per second per (tenant, account, device); a
    /// batch costs one per envelope.
    pub identity_rate_per_s: Option<f64>,
    /// Identity limiter: burst, in envelopes. Also the largest batch this limiter can ever
    /// admit; keep it at least `batch_envelopes_max`.
    pub identity_burst: Option<u32>,
    /// Identity limiter: identities remembered.
    pub identity_keys_max: Option<usize>,
    /// Largest single-envelope body, in bytes.
    pub body_bytes_max: Option<usize>,
    /// Largest batch body, in bytes.
    pub batch_body_bytes_max: Option<usize>,
    /// Most envelopes per batch.
    pub batch_envelopes_max: Option<usize>,
    /// A directory of operator payload schemas, one `<event_type>.json` file per type, added to
    /// the 14 built-in v1 types.
    pub schemas_dir: Option<PathBuf>,
    /// Days inbox payloads are kept before `serve`'s housekeeping deletes them (default 90).
    pub payload_retention_days: Option<u64>,
    /// How often `serve` runs the inbox housekeeping, in milliseconds (default one hour).
    pub housekeeping_interval_ms: Option<u64>,
}

impl InboxSettings {
    /// The housekeeping these settings describe ([`Housekeeping`]), checked against its bounds.
    pub fn housekeeping(&self) -> Result<Housekeeping, Error> {
        let days = self
            .payload_retention_days
            .unwrap_or(PAYLOAD_RETENTION_DEFAULT.as_secs() / 86_400);
        if !(1..=PAYLOAD_RETENTION_DAYS_MAX).contains(&days) {
            return Err(Error::invalid(
                "payload_retention_days",
                format!("must be 1..={PAYLOAD_RETENTION_DAYS_MAX}"),
            ));
        }
        let interval_ms = self
            .housekeeping_interval_ms
            .unwrap_or(HOUSEKEEPING_INTERVAL_MS_DEFAULT);
        if !(HOUSEKEEPING_INTERVAL_MS_MIN..=HOUSEKEEPING_INTERVAL_MS_MAX).contains(&interval_ms) {
            return Err(Error::invalid(
                "housekeeping_interval_ms",
                format!("must be {HOUSEKEEPING_INTERVAL_MS_MIN}..={HOUSEKEEPING_INTERVAL_MS_MAX}"),
            ));
        }
        Ok(Housekeeping {
            payload_retention: std::time::Duration::from_secs(days * 86_400),
            interval: std::time::Duration::from_millis(interval_ms),
        })
    }

    /// The [`InboxConfig`] these settings describe, reading `schemas_dir` when set.
    pub fn into_config(self) -> Result<InboxConfig, Error> {
        let mut config = InboxConfig::default();
        let d = config.clone();
        let policy = |rate: Option<f64>, burst: Option<u32>, default: LimitPolicy| {
            let policy = LimitPolicy {
                rate_per_s: rate.unwrap_or(default.rate_per_s),
                burst: burst.unwrap_or(default.burst),
            };
            if policy.rate_per_s.is_nan() || policy.rate_per_s < 0.0 || policy.burst == 0 {
                return Err(Error::invalid("limit", "rate must be ≥ 0 and burst ≥ 1"));
            }
            Ok(policy)
        };
        config.peer_limit = policy(self.peer_rate_per_s, self.peer_burst, d.peer_limit)?;
        config.consumer_limit = policy(
            self.consumer_rate_per_s,
            self.consumer_burst,
            d.consumer_limit,
        )?;
        config.identity_limit = policy(
            self.identity_rate_per_s,
            self.identity_burst,
            d.identity_limit,
        )?;
        config.peer_keys_max = self.peer_keys_max.unwrap_or(d.peer_keys_max).max(1);
        config.identity_keys_max = self.identity_keys_max.unwrap_or(d.identity_keys_max).max(1);
        config.body_bytes_max = self.body_bytes_max.unwrap_or(d.body_bytes_max);
        config.batch_body_bytes_max = self.batch_body_bytes_max.unwrap_or(d.batch_body_bytes_max);
        config.batch_envelopes_max = self.batch_envelopes_max.unwrap_or(d.batch_envelopes_max);
        if config.batch_envelopes_max == 0 || config.body_bytes_max == 0 {
            return Err(Error::invalid("inbox bounds", "must be at least 1"));
        }
        if let Some(dir) = &self.schemas_dir {
            config.catalog = Arc::new(load_schemas(dir)?);
        }
        Ok(config)
    }
}

/// The built-in catalog plus every `<event_type>.json` in `dir`, in name order.
pub fn load_schemas(dir: &std::path::Path) -> Result<Catalog, Error> {
    let io = |e: std::io::Error| Error::invalid("schemas_dir", format!("{}: {e}", dir.display()));
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if files.len() > SCHEMA_FILES_MAX {
        return Err(Error::invalid(
            "schemas_dir",
            format!("more than {SCHEMA_FILES_MAX} schema files"),
        ));
    }
    let mut catalog = Catalog::with_builtin();
    for path in files {
        let event_type = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let bytes = std::fs::metadata(&path).map_err(io)?.len();
        if bytes > crate::core::schema::SCHEMA_BYTES_MAX as u64 {
            return Err(Error::invalid(
                "schema file",
                format!(
                    "{} is larger than {} bytes",
                    path.display(),
                    crate::core::schema::SCHEMA_BYTES_MAX
                ),
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(io)?;
        catalog
            .add_schema(&event_type, &text)
            .map_err(|e| Error::invalid("schema file", format!("{}: {e}", path.display())))?;
    }
    Ok(catalog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_override_defaults_and_refuse_nonsense() {
        let config = InboxSettings {
            peer_rate_per_s: Some(5.0),
            batch_envelopes_max: Some(10),
            ..InboxSettings::default()
        }
        .into_config()
        .unwrap();
        assert_eq!(config.peer_limit.rate_per_s, 5.0);
        assert_eq!(
            config.peer_limit.burst,
            InboxConfig::default().peer_limit.burst
        );
        assert_eq!(config.batch_envelopes_max, 10);
        assert!(
            InboxSettings {
                identity_burst: Some(0),
                ..InboxSettings::default()
            }
            .into_config()
            .is_err()
        );
        assert!(
            InboxSettings {
                peer_rate_per_s: Some(-1.0),
                ..InboxSettings::default()
            }
            .into_config()
            .is_err()
        );
    }

    #[test]
    fn operator_schemas_join_the_builtins() {
        let dir = std::env::temp_dir().join(format!("wharf-schemas-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("deploy_note.json"),
            r#"{"type":"object","properties":{"note":{"type":"string","minLength":1,"maxLength":64}},"required":["note"],"additionalProperties":false}"#,
        )
        .unwrap();
        let catalog = load_schemas(&dir).unwrap();
        assert!(catalog.contains("deploy_note"));
        assert!(catalog.contains("run_summary"));
        assert!(
            catalog
                .validate("deploy_note", &serde_json::json!({"note": "x"}))
                .is_ok()
        );
        assert!(
            catalog
                .validate("deploy_note", &serde_json::json!({"note": "x", "y": 1}))
                .is_err()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
