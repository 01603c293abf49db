//! The checker: what must hold after a run, decided from the sinks' logs, the harness's own
//! records (what it enqueued, what the inbox acknowledged) and the database's rows.
//!
//! Owns: the rules and the [`Violation`] list. Must not know: how the evidence was gathered
//! (processes, SQL, faults), so its tests feed it rows and logs written by hand.
//!
//! Rules (issue 11):
//! - every enqueued action exists and ended;
//! - an at-most-once effect (email) landed at most once;
//! - any other effect that landed twice is explained: the action ended UNCERTAIN, or its
//!   receiver deduplicates by `webhook-id` (the readback of a webhook);
//! - no two calls of one lane overlapped, and a lane's calls came in id order;
//! - nothing DONE without a delivery, nothing FAILED or CANCELLED after one (where the
//!   receiver does not deduplicate, a delivered effect must not be reported as not done);
//! - `wharf verify` clean;
//! - inbox: every acknowledged envelope stored exactly once with its audit, nothing stored that
//!   was not sent, every envelope sent was acknowledged, and each stream's cursor is the
//!   contiguous prefix of its stored sequences.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::sink::{Answer, Effect};

/// An action the harness enqueued (and the database acknowledged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enqueued {
    /// Its idempotency key.
    pub key: String,
    /// Whether its kind is at-most-once (email).
    pub at_most_once: bool,
    /// Whether its receiver deduplicates by `webhook-id`.
    pub dedupe: bool,
    /// When its enqueue was acknowledged, run microseconds.
    pub enqueued_us: i64,
}

/// An action row as the database has it after the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRow {
    /// `wharf.action.id`.
    pub id: i64,
    /// Its idempotency key.
    pub key: String,
    /// Its lane.
    pub lane: String,
    /// Its state.
    pub state: String,
    /// Its stop reason.
    pub stop_reason: Option<String>,
    /// Its last error code.
    pub error_code: Option<String>,
    /// Attempts it took.
    pub attempt: i32,
}

/// An envelope a producer sent, and whether it was acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentEnvelope {
    /// The producer (device) whose stream it belongs to.
    pub producer: String,
    /// Its sequence.
    pub sequence: u64,
    /// Its event id.
    pub event_id: String,
    /// The outcome the server answered last (`None`: never decided).
    pub outcome: Option<String>,
}

/// A stored inbox identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityRow {
    /// The stream's producer.
    pub producer: String,
    /// The stored sequence.
    pub sequence: u64,
    /// The stored event id.
    pub event_id: String,
}

/// An audit row of an accepted envelope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AuditRow {
    /// The stream's producer.
    pub producer: String,
    /// SHA-256 hex of the event id.
    pub event_id_sha256: String,
    /// The outcome audited.
    pub outcome: String,
}

/// Everything the checker looks at.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Evidence {
    /// Every call the sinks received.
    pub effects: Vec<Effect>,
    /// Every action the harness enqueued.
    pub enqueued: Vec<Enqueued>,
    /// Every action row after the run.
    pub actions: Vec<ActionRow>,
    /// `wharf verify`: the names of failing checks (empty: clean), or why it could not run.
    pub verify_failures: Vec<String>,
    /// Every envelope the producers sent.
    pub sent: Vec<SentEnvelope>,
    /// Every stored identity of the producers' streams.
    pub identities: Vec<IdentityRow>,
    /// Each producer's stream cursor.
    pub cursors: BTreeMap<String, u64>,
    /// Audit rows of accepted envelopes.
    pub audit: Vec<AuditRow>,
}

/// A broken promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Violation {
    /// An enqueue was acknowledged but the action is not in the database.
    Lost {
        /// The key.
        key: String,
    },
    /// An action did not end.
    NotEnded {
        /// The key.
        key: String,
        /// Its state.
        state: String,
    },
    /// An at-most-once effect landed more than once.
    AtMostOnceTwice {
        /// The key.
        key: String,
        /// How often it landed.
        landed: usize,
    },
    /// An effect landed more than once with nothing to explain it.
    UnexplainedDuplicate {
        /// The key.
        key: String,
        /// How often it landed.
        landed: usize,
        /// The action's final state.
        state: String,
    },
    /// Two calls of one lane overlapped in time.
    LaneOverlap {
        /// The lane.
        lane: String,
        /// The earlier call's key.
        first: String,
        /// The overlapping call's key.
        second: String,
    },
    /// As [`Violation::LaneOverlap`], where the overlapping call is a late write of a holder
    /// that had lost its lease: the action ended UNCERTAIN because its lease expired after
    /// its write started, and that write went on (a process paused in the middle of a
    /// provider call finishes the call when it resumes).
    StaleHolderOverlap {
        /// The lane.
        lane: String,
        /// The stale holder's key.
        stale: String,
        /// The key of the call it overlapped.
        other: String,
    },
    /// As [`Violation::LaneOrder`], where the late call is a stale holder's (see
    /// [`Violation::StaleHolderOverlap`]).
    StaleHolderOrder {
        /// The lane.
        lane: String,
        /// The action called earlier, with the higher id.
        earlier: i64,
        /// The stale holder's action, called later, with the lower id.
        later: i64,
    },
    /// A lane's calls did not come in id order.
    LaneOrder {
        /// The lane.
        lane: String,
        /// The action called earlier, with the higher id.
        earlier: i64,
        /// The action called later, with the lower id.
        later: i64,
    },
    /// An action is DONE but no call of it was delivered.
    DoneWithoutDelivery {
        /// The key.
        key: String,
    },
    /// An action's effect was delivered (to a receiver that does not deduplicate) but it ended
    /// as if nothing happened.
    DeliveredButNotDone {
        /// The key.
        key: String,
        /// Its state.
        state: String,
    },
    /// A sink received a call for a key the harness never enqueued.
    UnknownEffect {
        /// The key.
        key: String,
    },
    /// `wharf verify` reported a broken invariant (or did not run).
    VerifyFailed {
        /// The failing check.
        check: String,
    },
    /// An envelope was never acknowledged although its producer kept retrying.
    InboxUnacknowledged {
        /// The producer.
        producer: String,
        /// The sequence.
        sequence: u64,
    },
    /// An envelope of ours was decided with a refusal.
    InboxRefused {
        /// The producer.
        producer: String,
        /// The sequence.
        sequence: u64,
        /// The outcome.
        outcome: String,
    },
    /// An acknowledged envelope is not stored, or stored under another sequence.
    InboxAcknowledgedMissing {
        /// The producer.
        producer: String,
        /// The sequence.
        sequence: u64,
    },
    /// An envelope is stored more than once.
    InboxStoredTwice {
        /// The producer.
        producer: String,
        /// The event id.
        event_id: String,
    },
    /// A stored identity that no producer sent.
    InboxPhantom {
        /// The producer.
        producer: String,
        /// The sequence.
        sequence: u64,
    },
    /// A stream's cursor is not the contiguous prefix of its stored sequences.
    InboxCursor {
        /// The producer.
        producer: String,
        /// The stored cursor.
        cursor: u64,
        /// The contiguous prefix.
        prefix: u64,
    },
    /// An acknowledged envelope has no accepting audit row.
    InboxAuditMissing {
        /// The producer.
        producer: String,
        /// The sequence.
        sequence: u64,
    },
}

const ENDED: [&str; 4] = ["DONE", "UNCERTAIN", "FAILED", "CANCELLED"];

/// Every rule over `evidence`; empty when all hold.
pub fn check(evidence: &Evidence) -> Vec<Violation> {
    let mut out = Vec::new();
    outbox(evidence, &mut out);
    lanes(evidence, &mut out);
    for check in &evidence.verify_failures {
        out.push(Violation::VerifyFailed {
            check: check.clone(),
        });
    }
    inbox(evidence, &mut out);
    out
}

fn outbox(evidence: &Evidence, out: &mut Vec<Violation>) {
    let rows: HashMap<&str, &ActionRow> = evidence
        .actions
        .iter()
        .map(|r| (r.key.as_str(), r))
        .collect();
    let mut by_key: HashMap<&str, Vec<&Effect>> = HashMap::new();
    for effect in &evidence.effects {
        by_key.entry(effect.key.as_str()).or_default().push(effect);
    }
    let enqueued: HashSet<&str> = evidence.enqueued.iter().map(|e| e.key.as_str()).collect();
    for key in by_key.keys() {
        if !enqueued.contains(key) {
            out.push(Violation::UnknownEffect {
                key: (*key).to_owned(),
            });
        }
    }
    for action in &evidence.enqueued {
        let key = action.key.as_str();
        let Some(row) = rows.get(key) else {
            out.push(Violation::Lost {
                key: key.to_owned(),
            });
            continue;
        };
        if !ENDED.contains(&row.state.as_str()) {
            out.push(Violation::NotEnded {
                key: key.to_owned(),
                state: row.state.clone(),
            });
        }
        let calls = by_key.get(key).map(Vec::as_slice).unwrap_or_default();
        let landed = calls.iter().filter(|e| e.answer.landed()).count();
        let delivered = calls.iter().any(|e| e.answer == Answer::Delivered);
        if landed > 1 {
            if action.at_most_once {
                out.push(Violation::AtMostOnceTwice {
                    key: key.to_owned(),
                    landed,
                });
            } else if !action.dedupe && row.state != "UNCERTAIN" {
                out.push(Violation::UnexplainedDuplicate {
                    key: key.to_owned(),
                    landed,
                    state: row.state.clone(),
                });
            }
        }
        if row.state == "DONE" && !delivered {
            out.push(Violation::DoneWithoutDelivery {
                key: key.to_owned(),
            });
        }
        if delivered && !action.dedupe && matches!(row.state.as_str(), "FAILED" | "CANCELLED") {
            out.push(Violation::DeliveredButNotDone {
                key: key.to_owned(),
                state: row.state.clone(),
            });
        }
    }
}

fn lanes(evidence: &Evidence, out: &mut Vec<Violation>) {
    let ids: HashMap<&str, i64> = evidence
        .actions
        .iter()
        .map(|r| (r.key.as_str(), r.id))
        .collect();
    // Actions whose holder lost its lease after its write began: a late call of theirs is a
    // stale holder's write.
    let lease_lost: HashSet<&str> = evidence
        .actions
        .iter()
        .filter(|r| {
            r.state == "UNCERTAIN"
                && (r.stop_reason.as_deref() == Some("LEASE_LOST_AFTER_WRITE")
                    || r.error_code.as_deref() == Some("earlier_attempt_ambiguous"))
        })
        .map(|r| r.key.as_str())
        .collect();
    let mut by_lane: BTreeMap<&str, Vec<&Effect>> = BTreeMap::new();
    for effect in &evidence.effects {
        by_lane
            .entry(effect.lane.as_str())
            .or_default()
            .push(effect);
    }
    for (lane, mut calls) in by_lane {
        calls.sort_by_key(|e| (e.started_us, e.ended_us));
        // The call that ends last among those seen so far: a later call must start after it.
        let mut open: Option<&Effect> = None;
        let mut highest: Option<i64> = None;
        for call in calls {
            if let Some(previous) = open
                && call.started_us < previous.ended_us
            {
                let lost = |c: &Effect| lease_lost.contains(c.key.as_str());
                let stale = if lost(previous) {
                    Some((previous, call))
                } else if lost(call) {
                    Some((call, previous))
                } else {
                    None
                };
                out.push(match stale {
                    Some((stale, other)) => Violation::StaleHolderOverlap {
                        lane: lane.to_owned(),
                        stale: stale.key.clone(),
                        other: other.key.clone(),
                    },
                    None => Violation::LaneOverlap {
                        lane: lane.to_owned(),
                        first: previous.key.clone(),
                        second: call.key.clone(),
                    },
                });
            }
            if open.is_none_or(|p| call.ended_us > p.ended_us) {
                open = Some(call);
            }
            let Some(&id) = ids.get(call.key.as_str()) else {
                continue; // reported as an unknown effect or a lost action
            };
            match highest {
                Some(high) if id < high => out.push(if lease_lost.contains(call.key.as_str()) {
                    Violation::StaleHolderOrder {
                        lane: lane.to_owned(),
                        earlier: high,
                        later: id,
                    }
                } else {
                    Violation::LaneOrder {
                        lane: lane.to_owned(),
                        earlier: high,
                        later: id,
                    }
                }),
                Some(high) if id == high => {}
                _ => highest = Some(id),
            }
        }
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

fn inbox(evidence: &Evidence, out: &mut Vec<Violation>) {
    let mut stored: HashMap<(&str, &str), Vec<u64>> = HashMap::new();
    let mut sequences: BTreeMap<&str, HashSet<u64>> = BTreeMap::new();
    for row in &evidence.identities {
        stored
            .entry((row.producer.as_str(), row.event_id.as_str()))
            .or_default()
            .push(row.sequence);
        sequences
            .entry(row.producer.as_str())
            .or_default()
            .insert(row.sequence);
    }
    let audited: HashSet<(&str, &str)> = evidence
        .audit
        .iter()
        .filter(|a| a.outcome.starts_with("accept-"))
        .map(|a| (a.producer.as_str(), a.event_id_sha256.as_str()))
        .collect();
    let sent: HashSet<(&str, &str)> = evidence
        .sent
        .iter()
        .map(|s| (s.producer.as_str(), s.event_id.as_str()))
        .collect();
    for envelope in &evidence.sent {
        let producer = envelope.producer.clone();
        let sequence = envelope.sequence;
        match envelope.outcome.as_deref() {
            None => out.push(Violation::InboxUnacknowledged { producer, sequence }),
            Some("accept-delayed" | "accept-reordered" | "ignore-duplicate") => {
                let copies = stored
                    .get(&(envelope.producer.as_str(), envelope.event_id.as_str()))
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                if copies.len() > 1 {
                    out.push(Violation::InboxStoredTwice {
                        producer: producer.clone(),
                        event_id: envelope.event_id.clone(),
                    });
                }
                if copies.is_empty() || copies.iter().any(|&s| s != sequence) {
                    out.push(Violation::InboxAcknowledgedMissing {
                        producer: producer.clone(),
                        sequence,
                    });
                }
                let digest = sha256_hex(&envelope.event_id);
                if !audited.contains(&(envelope.producer.as_str(), digest.as_str())) {
                    out.push(Violation::InboxAuditMissing { producer, sequence });
                }
            }
            Some(outcome) => out.push(Violation::InboxRefused {
                producer,
                sequence,
                outcome: outcome.to_owned(),
            }),
        }
    }
    for row in &evidence.identities {
        if !sent.contains(&(row.producer.as_str(), row.event_id.as_str())) {
            out.push(Violation::InboxPhantom {
                producer: row.producer.clone(),
                sequence: row.sequence,
            });
        }
    }
    let producers: HashSet<&str> = evidence
        .sent
        .iter()
        .map(|s| s.producer.as_str())
        .chain(sequences.keys().copied())
        .collect();
    for producer in producers {
        let mut prefix = 0;
        if let Some(present) = sequences.get(producer) {
            while present.contains(&(prefix + 1)) {
                prefix += 1;
            }
        }
        let cursor = evidence.cursors.get(producer).copied().unwrap_or(0);
        if cursor != prefix {
            out.push(Violation::InboxCursor {
                producer: producer.to_owned(),
                cursor,
                prefix,
            });
        }
    }
}

/// Violations counted by rule, for the report.
pub fn by_rule(violations: &[Violation]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for v in violations {
        let rule = serde_json::to_value(v)
            .ok()
            .and_then(|v| v.get("rule").and_then(|r| r.as_str()).map(str::to_owned))
            .unwrap_or_else(|| "unknown".to_owned());
        *out.entry(rule).or_insert(0) += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    //! The checker against seeded violations: a clean baseline, then one broken promise at a
    //! time, each of which must be reported (and nothing else).

    use super::*;
    use crate::sink::Channel;

    fn effect(key: &str, start: i64, end: i64, answer: Answer) -> Effect {
        Effect {
            channel: if key.starts_with("mail") {
                Channel::Smtp
            } else {
                Channel::Http
            },
            key: key.to_owned(),
            lane: crate::sink::lane_of(key).to_owned(),
            message_id: None,
            started_us: start,
            ended_us: end,
            answer,
        }
    }

    fn row(id: i64, key: &str, state: &str) -> ActionRow {
        ActionRow {
            id,
            key: key.to_owned(),
            lane: crate::sink::lane_of(key).to_owned(),
            state: state.to_owned(),
            stop_reason: None,
            error_code: None,
            attempt: 1,
        }
    }

    fn enqueued(key: &str) -> Enqueued {
        Enqueued {
            key: key.to_owned(),
            at_most_once: key.starts_with("mail"),
            dedupe: key.starts_with("dhook"),
            enqueued_us: 0,
        }
    }

    fn sent(producer: &str, sequence: u64, outcome: &str) -> SentEnvelope {
        SentEnvelope {
            producer: producer.to_owned(),
            sequence,
            event_id: format!("{producer}-ev-{sequence}"),
            outcome: Some(outcome.to_owned()),
        }
    }

    /// Two email lanes, a webhook lane and a deduplicating webhook lane, with retries, an
    /// UNCERTAIN duplicate and a deduplicated one; two inbox streams. Nothing wrong in it.
    fn clean() -> Evidence {
        let keys = [
            "mail-1.0000001",
            "mail-1.0000002",
            "mail-2.0000001",
            "hook-1.0000001",
            "hook-1.0000002",
            "hook-1.0000003",
            "dhook-1.0000001",
        ];
        let effects = vec![
            effect("mail-1.0000001", 0, 10, Answer::TempFailed),
            effect("mail-1.0000001", 20, 30, Answer::Delivered),
            effect("mail-1.0000002", 31, 40, Answer::TimedOut),
            effect("mail-2.0000001", 5, 15, Answer::Refused),
            effect("hook-1.0000001", 0, 5, Answer::Delivered),
            // Delivered, the worker died before recording it, and a reclaim found the fence
            // passed: UNCERTAIN; a second landing is explained by that.
            effect("hook-1.0000002", 6, 8, Answer::Delivered),
            effect("hook-1.0000002", 9, 12, Answer::TimedOut),
            effect("hook-1.0000003", 13, 14, Answer::TempFailed),
            effect("hook-1.0000003", 15, 16, Answer::Delivered),
            effect("dhook-1.0000001", 0, 1, Answer::TimedOut),
            effect("dhook-1.0000001", 2, 3, Answer::Delivered),
        ];
        let states = [
            "DONE",
            "UNCERTAIN",
            "FAILED",
            "DONE",
            "UNCERTAIN",
            "DONE",
            "DONE",
        ];
        let mut actions = Vec::new();
        for (i, (key, state)) in keys.iter().zip(states).enumerate() {
            actions.push(row(i as i64 + 1, key, state));
        }
        let sent = vec![
            sent("dev-1", 1, "accept-delayed"),
            sent("dev-1", 2, "accept-delayed"),
            sent("dev-1", 3, "ignore-duplicate"),
            sent("dev-2", 1, "accept-delayed"),
        ];
        let identities = sent
            .iter()
            .map(|s| IdentityRow {
                producer: s.producer.clone(),
                sequence: s.sequence,
                event_id: s.event_id.clone(),
            })
            .collect();
        let audit = sent
            .iter()
            .map(|s| AuditRow {
                producer: s.producer.clone(),
                event_id_sha256: sha256_hex(&s.event_id),
                outcome: "accept-delayed".to_owned(),
            })
            .collect();
        Evidence {
            effects,
            enqueued: keys.iter().map(|k| enqueued(k)).collect(),
            actions,
            verify_failures: Vec::new(),
            sent,
            identities,
            cursors: [("dev-1".to_owned(), 3), ("dev-2".to_owned(), 1)].into(),
            audit,
        }
    }

    fn rules(evidence: &Evidence) -> Vec<String> {
        by_rule(&check(evidence)).into_keys().collect()
    }

    #[track_caller]
    fn only(evidence: &Evidence, rule: &str) {
        let violations = check(evidence);
        assert!(!violations.is_empty(), "{rule} was not reported");
        assert_eq!(rules(evidence), vec![rule.to_owned()], "{violations:#?}");
    }

    #[test]
    fn a_clean_run_passes() {
        assert_eq!(check(&clean()), Vec::new());
    }

    #[test]
    fn a_lost_action_is_reported() {
        let mut e = clean();
        e.actions.retain(|r| r.key != "hook-1.0000001");
        e.effects.retain(|c| c.key != "hook-1.0000001");
        only(&e, "lost");
    }

    #[test]
    fn an_action_that_did_not_end_is_reported() {
        let mut e = clean();
        e.actions[6].state = "EXECUTING".into();
        only(&e, "not_ended");
        e.actions[6].state = "ADMITTED".into();
        only(&e, "not_ended");
    }

    #[test]
    fn an_email_sent_twice_is_reported_whatever_its_state() {
        for state in ["DONE", "UNCERTAIN"] {
            let mut e = clean();
            e.actions[0].state = state.into();
            e.effects
                .push(effect("mail-1.0000001", 50, 51, Answer::TimedOut));
            // The second landing came after the lane's next action: an order break as well,
            // so seed it where the lane is free.
            e.effects.retain(|c| c.key != "mail-1.0000002");
            e.actions[1].state = "FAILED".into();
            only(&e, "at_most_once_twice");
        }
    }

    #[test]
    fn a_webhook_delivered_twice_and_done_is_an_unexplained_duplicate() {
        let mut e = clean();
        e.effects
            .push(effect("hook-1.0000003", 17, 18, Answer::Delivered));
        only(&e, "unexplained_duplicate");
        // Deduplicating receivers explain it.
        let mut e = clean();
        e.effects
            .push(effect("dhook-1.0000001", 4, 5, Answer::Delivered));
        assert_eq!(check(&e), Vec::new());
    }

    #[test]
    fn overlapping_calls_of_one_lane_are_reported() {
        let mut e = clean();
        // hook-1.0000002 starts before hook-1.0000001 answered.
        e.effects[5].started_us = 4;
        only(&e, "lane_overlap");
        // Two calls of the same action at once are an overlap too.
        let mut e = clean();
        e.effects[8].started_us = 13;
        e.effects[7].ended_us = 20;
        only(&e, "lane_overlap");
    }

    #[test]
    fn a_stale_holders_late_write_is_reported_as_such() {
        // mail-1.0000002's holder was paused in the middle of its SMTP session: its lease
        // expired (UNCERTAIN / LEASE_LOST_AFTER_WRITE) and the lane went on, then it resumed
        // and its message arrived during the next action's call.
        let mut e = clean();
        e.actions[1].stop_reason = Some("LEASE_LOST_AFTER_WRITE".into());
        e.enqueued.push(enqueued("mail-1.0000003"));
        e.actions.push(row(8, "mail-1.0000003", "DONE"));
        e.effects[2].ended_us = 60;
        e.effects
            .push(effect("mail-1.0000003", 50, 55, Answer::Delivered));
        only(&e, "stale_holder_overlap");
        // A webhook holder paused before its request: the request comes after the lane's
        // next action, out of id order.
        let mut e = clean();
        e.actions[4].error_code = Some("earlier_attempt_ambiguous".into());
        e.effects[6].started_us = 20;
        e.effects[6].ended_us = 21;
        only(&e, "stale_holder_order");
    }

    #[test]
    fn calls_out_of_id_order_are_reported() {
        let mut e = clean();
        e.actions[3].id = 10; // hook-1.0000001 now has a higher id than the next two
        only(&e, "lane_order");
    }

    #[test]
    fn done_without_a_delivery_is_reported() {
        let mut e = clean();
        e.effects.retain(|c| c.key != "hook-1.0000001");
        only(&e, "done_without_delivery");
        // A timed-out call is no delivery either.
        let mut e = clean();
        e.actions[1].state = "DONE".into();
        only(&e, "done_without_delivery");
    }

    #[test]
    fn a_delivered_effect_ended_failed_is_reported() {
        let mut e = clean();
        e.actions[0].state = "FAILED".into();
        only(&e, "delivered_but_not_done");
    }

    #[test]
    fn a_call_nobody_enqueued_is_reported() {
        let mut e = clean();
        e.effects
            .push(effect("hook-9.0000001", 100, 101, Answer::Delivered));
        only(&e, "unknown_effect");
    }

    #[test]
    fn a_failing_verify_is_reported() {
        let mut e = clean();
        e.verify_failures.push("payload_without_identity".into());
        only(&e, "verify_failed");
    }

    #[test]
    fn inbox_violations_are_reported() {
        let mut e = clean();
        e.sent[1].outcome = None;
        only(&e, "inbox_unacknowledged");

        let mut e = clean();
        e.sent[3].outcome = Some("refuse-tampered".into());
        only(&e, "inbox_refused");

        // Acknowledged, then missing: the cursor cannot stand past it either.
        let mut e = clean();
        e.identities.retain(|r| r.producer != "dev-2");
        assert_eq!(
            rules(&e),
            vec!["inbox_acknowledged_missing", "inbox_cursor"]
        );

        let mut e = clean();
        e.identities.push(e.identities[0].clone());
        only(&e, "inbox_stored_twice");

        let mut e = clean();
        e.identities.push(IdentityRow {
            producer: "dev-2".into(),
            sequence: 2,
            event_id: "someone-else".into(),
        });
        e.cursors.insert("dev-2".into(), 2);
        only(&e, "inbox_phantom");

        let mut e = clean();
        e.cursors.insert("dev-1".into(), 2);
        only(&e, "inbox_cursor");
        // A cursor past a gap is as wrong as one behind.
        let mut e = clean();
        e.identities
            .retain(|r| !(r.producer == "dev-1" && r.sequence == 2));
        e.sent[1].outcome = Some("refuse-replay".into());
        assert_eq!(rules(&e), vec!["inbox_cursor", "inbox_refused"]);

        let mut e = clean();
        e.audit.remove(0);
        only(&e, "inbox_audit_missing");
    }
}
