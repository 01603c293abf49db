//! Checked models of wharf's two protocols, explored exhaustively for small bounds.
//!
//! - [`explore`]: a breadth-first explorer over a model's states with a visited set. It checks
//!   every invariant in every reachable state and returns the shortest path to the first
//!   violation it finds.
//! - [`outbox`]: the claim / lease / fence / complete protocol of SPEC §2.3 — workers that
//!   crash at every step, a database clock that moves within the lease, erasure at every step,
//!   the non-at-most-once fast path (the claim's commit as the fence, judged by the worker's
//!   monotonic clock taken before the claim was sent), and the at-most-once durable fence.
//! - [`inbox`]: the inbox cursor and replay floor (SPEC §3.5): out-of-order, repeated and lost
//!   deliveries, crashes between commit and answer, operator skips and floor advances; the
//!   decisions and the cursor walk are `wharf_core::inbox`'s own functions.
//!
//! Each model can be built in a known-bad variant (a completion without the epoch check, a
//! claim that ignores lane exclusivity, a reclaim of an at-most-once action whose write
//! started, …), and the tests show that the explorer finds each: a model that cannot fail
//! proves nothing.
//!
//! Why a crate of its own: the models state the protocol as SPEC says it, across SQL, the
//! executor and the inbox service, which no single product crate owns; they need nothing but
//! `wharf-core` (whose transition table and inbox decisions they call), do no IO, and nothing
//! depends on them, so they add nothing to any product build.
//!
//! Must not know: SQL, tokio, or any adapter.

pub mod explore;
pub mod inbox;
pub mod outbox;
