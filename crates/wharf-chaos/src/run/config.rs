//! The `wharf.toml` every replica of a run reads.
//!
//! Owns: the settings that make a fault fit in a run (short leases and timeouts, a fence margin
//! past every call timeout), loopback allowed, the limiters out of the way. Must not know: the
//! faults or the load.

use super::Settings;

/// The run's `wharf.toml`: short leases and timeouts so that pauses past the lease and
/// stalls past the timeouts fit in a run, loopback allowed, the limiters out of the way.
pub(crate) fn config_file(settings: &Settings, http_base: &str, smtp_port: u16) -> String {
    // The fence margin must exceed every kind's call timeout (email's is at least 5 s).
    let margin = 6_000.min(settings.lease_ms - 1_000);
    format!(
        r#"log_format = "json"

[executor]
lease_ms = {lease}
fence_margin_ms = {margin}
concurrency_max = 32
poll_interval_ms_max = {poll}
claims_in_flight_max = {claims}
shutdown_grace_ms = 2000

[email]
relay_host = "127.0.0.1"
relay_port = {smtp_port}
tls = "none"
connect_timeout_ms = 1000
command_timeout_ms = 1000
data_timeout_ms = 2000
call_timeout_ms = 5000
from = "chaos <chaos@chaos.test>"
message_id_domain = "chaos.test"

[http]
allow_cidrs = ["127.0.0.0/8"]
dedupe_endpoints = ["{http_base}/dedupe"]
connect_timeout_ms = 1000
total_timeout_ms = 2000

[inbox]
peer_rate_per_s = 1000000.0
peer_burst = 1000000
identity_rate_per_s = 1000000.0
identity_burst = 1000000

[startup]
deadline_ms = 900000
"#,
        lease = settings.lease_ms,
        poll = settings.poll_interval_ms_max,
        claims = settings.claims_in_flight_max,
    )
}
