//! Per-tenant claim caps: which rows of a kind one claim may take per tenant, from the kinds'
//! [`ClaimBudget::PerTenant`] answers. Plain arithmetic over plain data; the executor asks it
//! before a claim and tells it what the claim took.
//!
//! Must not know: SQL, the pool, or how a budget is computed.

use std::collections::BTreeMap;

use super::kind::ClaimBudget;
use crate::store::outbox::{ClaimedRow, TenantCaps};

/// The per-tenant caps of one claim, by kind (kinds without caps are not in it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Caps {
    pub(super) kinds: BTreeMap<&'static str, KindCaps>,
}

/// One kind's per-tenant caps for one claim (from [`ClaimBudget::PerTenant`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct KindCaps {
    /// The cap of every tenant not in `tenants`.
    pub(super) others: u32,
    /// Tenants with their own cap, never equal to `others`. The key "" stands for the actions
    /// without a tenant, once a claim took some (adapters cannot list it: see `new`).
    pub(super) tenants: BTreeMap<String, u32>,
}

impl KindCaps {
    /// Caps for a claim that can take at most `bound` actions of the kind, or `None` when no
    /// cap can bind such a claim (every tenant may have all `bound`): then the kind is claimed
    /// by the cheap uncapped statement. Caps above `bound` are lowered to it, a tenant listed
    /// twice keeps its smaller cap, an empty tenant name (no action has one) is dropped, and of
    /// more than [`ClaimBudget::TENANTS_MAX`] tenants the tightest caps are kept.
    pub(super) fn new(others: u32, tenants: Vec<(String, u32)>, bound: u32) -> Option<KindCaps> {
        let others = others.min(bound);
        let mut listed: BTreeMap<String, u32> = BTreeMap::new();
        for (tenant, n) in tenants {
            if tenant.is_empty() {
                continue;
            }
            let n = n.min(bound);
            listed
                .entry(tenant)
                .and_modify(|m| *m = (*m).min(n))
                .or_insert(n);
        }
        listed.retain(|_, n| *n != others);
        if listed.len() > ClaimBudget::TENANTS_MAX {
            let mut tightest: Vec<(String, u32)> = listed.into_iter().collect();
            tightest.sort_by_key(|(_, n)| *n);
            tightest.truncate(ClaimBudget::TENANTS_MAX);
            listed = tightest.into_iter().collect();
        }
        if listed.is_empty() && others >= bound {
            return None;
        }
        Some(KindCaps {
            others,
            tenants: listed,
        })
    }

    /// Whether any tenant may have an action claimed.
    pub(super) fn allows_any(&self) -> bool {
        self.others > 0 || self.tenants.values().any(|n| *n > 0)
    }

    /// One action of `tenant` was claimed: its tenant may have one fewer.
    pub(super) fn spend(&mut self, tenant: Option<&str>) {
        let others = self.others;
        let n = self
            .tenants
            .entry(tenant.unwrap_or_default().to_owned())
            .or_insert(others);
        *n = n.saturating_sub(1);
    }
}

impl Caps {
    /// The claimed `rows` spent their tenants' caps.
    pub(super) fn spend(&mut self, rows: &[ClaimedRow]) {
        for row in rows {
            if let Some(kind_caps) = self.kinds.get_mut(row.kind.as_str()) {
                kind_caps.spend(row.tenant_id.as_deref());
            }
        }
    }

    /// The caps as `claim_capped.sql` takes them.
    pub(super) fn to_store(&self) -> TenantCaps {
        let mut caps = TenantCaps::default();
        let mut push = |kind: &str, tenant: Option<&str>, n: u32| {
            caps.kinds.push(kind.to_owned());
            caps.tenants.push(tenant.map(str::to_owned));
            caps.rows.push(i32::try_from(n).unwrap_or(i32::MAX));
        };
        for (kind, kind_caps) in &self.kinds {
            push(kind, None, kind_caps.others);
            for (tenant, n) in &kind_caps.tenants {
                push(kind, Some(tenant), *n);
            }
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(pairs: &[(&str, u32)]) -> Vec<(String, u32)> {
        pairs.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect()
    }

    fn caps(others: u32, pairs: &[(&str, u32)]) -> Option<KindCaps> {
        Some(KindCaps {
            others,
            tenants: pairs.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect(),
        })
    }

    #[test]
    fn caps_that_cannot_bind_are_not_sent() {
        // (others, listed, bound) ⇒ caps.
        let check = |others, pairs: &[(&str, u32)], bound, want: Option<KindCaps>| {
            assert_eq!(
                KindCaps::new(others, listed(pairs), bound),
                want,
                "{others} {pairs:?} {bound}"
            );
        };
        // Nobody limited, and a full bucket covers the whole claim: the cheap statement.
        check(400, &[], 100, None);
        check(100, &[], 100, None);
        check(u32::MAX, &[("a", 100), ("b", 500)], 100, None);
        // A full bucket smaller than the claim binds every tenant.
        check(4, &[], 100, caps(4, &[]));
        // Listed tenants under the bound bind; those at the bound equal the others and go.
        check(
            400,
            &[("a", 0), ("b", 3), ("c", 250)],
            100,
            caps(100, &[("a", 0), ("b", 3)]),
        );
        // Listed at the others' cap: nothing to say about them.
        check(4, &[("a", 4), ("b", 2)], 100, caps(4, &[("b", 2)]));
        // Twice listed keeps the smaller; an empty name is no tenant's and is dropped.
        check(4, &[("a", 3), ("a", 1), ("", 0)], 100, caps(4, &[("a", 1)]));
        // Nobody but a listed tenant may start anything.
        check(0, &[("a", 2)], 10, caps(0, &[("a", 2)]));
    }

    #[test]
    fn a_kind_nobody_may_start_is_not_claimed() {
        assert!(
            !KindCaps::new(0, listed(&[("a", 0)]), 10)
                .unwrap()
                .allows_any()
        );
        assert!(!KindCaps::new(0, vec![], 10).unwrap().allows_any());
        assert!(
            KindCaps::new(0, listed(&[("a", 1)]), 10)
                .unwrap()
                .allows_any()
        );
        assert!(
            KindCaps::new(1, listed(&[("a", 0)]), 10)
                .unwrap()
                .allows_any()
        );
    }

    #[test]
    fn too_many_tenants_keep_the_tightest_caps() {
        let many: Vec<(String, u32)> = (0..ClaimBudget::TENANTS_MAX + 2)
            .map(|i| (format!("t{i:05}"), if i < 2 { 3 } else { 0 }))
            .collect();
        let kept = KindCaps::new(5, many, 100).unwrap();
        assert_eq!(kept.tenants.len(), ClaimBudget::TENANTS_MAX);
        assert!(kept.tenants.values().all(|n| *n == 0), "the zeros stay");
    }

    #[test]
    fn a_second_look_spends_what_the_first_took() {
        let mut kind_caps = KindCaps::new(3, listed(&[("a", 1)]), 100).unwrap();
        kind_caps.spend(Some("a"));
        kind_caps.spend(Some("a"));
        kind_caps.spend(Some("b"));
        kind_caps.spend(None);
        assert_eq!(kind_caps, caps(3, &[("", 2), ("a", 0), ("b", 2)]).unwrap());

        let mut all = Caps::default();
        all.kinds.insert("envelope", kind_caps);
        let store = all.to_store();
        assert_eq!(store.kinds, vec!["envelope"; 4]);
        assert_eq!(
            store.tenants,
            vec![
                None,
                Some(String::new()),
                Some("a".into()),
                Some("b".into())
            ]
        );
        assert_eq!(store.rows, vec![3, 2, 0, 2]);
    }
}
