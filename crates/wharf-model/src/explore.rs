//! A breadth-first explorer: every state reachable from the initial ones, each visited once,
//! every invariant checked in each, and the shortest path to the first violation.
//!
//! Must not know: what a state means. A [`Model`] gives the initial states, the steps from a
//! state, and the invariants; states are plain values compared by equality.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A system to explore.
pub trait Model {
    /// One state of the whole system. Two equal states are the same state: put ghost variables
    /// (history a checker needs) in it, and leave out what does not matter (canonicalize).
    type State: Clone + Eq + Hash + std::fmt::Debug;

    /// What one step did, for traces. Cheap to make: every state's every step makes one.
    type Step: Clone + std::fmt::Debug;

    /// Where the system starts.
    fn init(&self) -> Vec<Self::State>;

    /// Every state one step away, each with the step that leads there.
    fn next(&self, state: &Self::State, out: &mut Vec<(Self::Step, Self::State)>);

    /// The invariants, by name: each must hold in every reachable state.
    fn invariants(&self) -> Vec<Invariant<'_, Self::State>>;
}

/// A named predicate over states (it may read the model, e.g. its configuration).
pub type Invariant<'a, S> = (&'static str, Box<dyn Fn(&S) -> bool + 'a>);

/// A violated invariant and the shortest way there.
#[derive(Debug, Clone)]
pub struct Counterexample<T, S> {
    /// The invariant's name.
    pub invariant: &'static str,
    /// The steps from an initial state, as (step, state after it); the initial state has no
    /// step.
    pub trace: Vec<(Option<T>, S)>,
}

/// What an exploration found.
#[derive(Debug, Clone)]
pub struct Report<T, S> {
    /// Distinct states visited.
    pub states: usize,
    /// The first violation met (the shallowest: the search is breadth first), if any.
    pub counterexample: Option<Counterexample<T, S>>,
    /// True when the search stopped at `states_max` before it ran out of states: a report
    /// without a counterexample then proves nothing beyond the states it saw.
    pub truncated: bool,
}

/// A fast, non-cryptographic hash for the visited set (FxHash's mixing): the explorer hashes
/// every successor of every state, and the standard SipHash would be most of the run time.
#[derive(Default)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type Visited<S, T> = HashMap<S, Option<(S, T)>, BuildHasherDefault<FxHasher>>;

/// The report type of a model.
pub type ReportOf<M> = Report<<M as Model>::Step, <M as Model>::State>;

/// Explores `model` breadth first, visiting at most `states_max` distinct states.
pub fn explore<M: Model>(model: &M, states_max: usize) -> ReportOf<M> {
    let invariants = model.invariants();
    // Each state's parent and the step that reached it, for the trace.
    let mut parent: Visited<M::State, M::Step> = HashMap::default();
    let mut queue = VecDeque::new();
    let mut next = Vec::new();
    for s in model.init() {
        if parent.insert(s.clone(), None).is_none() {
            queue.push_back(s);
        }
    }
    while let Some(state) = queue.pop_front() {
        if let Some(&(name, _)) = invariants.iter().find(|(_, holds)| !holds(&state)) {
            return Report {
                states: parent.len(),
                counterexample: Some(Counterexample {
                    invariant: name,
                    trace: trace(&parent, state),
                }),
                truncated: false,
            };
        }
        next.clear();
        model.next(&state, &mut next);
        for (step, s) in next.drain(..) {
            if parent.contains_key(&s) {
                continue;
            }
            if parent.len() >= states_max {
                return Report {
                    states: parent.len(),
                    counterexample: None,
                    truncated: true,
                };
            }
            parent.insert(s.clone(), Some((state.clone(), step)));
            queue.push_back(s);
        }
    }
    Report {
        states: parent.len(),
        counterexample: None,
        truncated: false,
    }
}

/// A predicate a [`Seek`] looks for.
pub type Goal<'a, S> = Box<dyn Fn(&S) -> bool + 'a>;

/// A model searched for a goal instead of checked: its one "invariant" is that the goal is
/// never reached, so the report's counterexample is the shortest way to the goal. Tests use it
/// to show a model's bounds reach the corners that matter (a reclaim, a sweep, an erasure
/// during a write), so that "no violation" is not "nothing happened".
pub struct Seek<'m, M: Model> {
    /// The model.
    pub model: &'m M,
    /// The goal.
    pub goal: Goal<'m, M::State>,
}

impl<M: Model> Model for Seek<'_, M> {
    type State = M::State;
    type Step = M::Step;

    fn init(&self) -> Vec<M::State> {
        self.model.init()
    }

    fn next(&self, state: &M::State, out: &mut Vec<(M::Step, M::State)>) {
        self.model.next(state, out)
    }

    fn invariants(&self) -> Vec<Invariant<'_, M::State>> {
        vec![("the goal is never reached", Box::new(|s| !(self.goal)(s)))]
    }
}

/// Whether some reachable state (within `states_max`) meets `goal`.
pub fn reachable<M: Model>(model: &M, goal: impl Fn(&M::State) -> bool, states_max: usize) -> bool {
    let seek = Seek {
        model,
        goal: Box::new(goal),
    };
    explore(&seek, states_max).counterexample.is_some()
}

fn trace<S: Clone + Eq + Hash, T: Clone>(parent: &Visited<S, T>, last: S) -> Vec<(Option<T>, S)> {
    let mut steps = Vec::new();
    let mut at = last;
    loop {
        match parent.get(&at).cloned().flatten() {
            Some((before, step)) => {
                steps.push((Some(step), at));
                at = before;
            }
            None => {
                steps.push((None, at));
                break;
            }
        }
    }
    steps.reverse();
    steps
}

/// A trace as text, one step a line, for a failing test's message.
pub fn show<T: std::fmt::Debug, S: std::fmt::Debug>(
    counterexample: &Counterexample<T, S>,
) -> String {
    let mut out = format!("invariant `{}` violated:\n", counterexample.invariant);
    for (i, (step, state)) in counterexample.trace.iter().enumerate() {
        match step {
            Some(step) => out.push_str(&format!("{i:>3}. {step:?}\n     {state:?}\n")),
            None => out.push_str(&format!("{i:>3}. init\n     {state:?}\n")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter that may step by 1 or 2 up to 10; "never 7" fails at depth 4 (0→2→4→6→7 or
    /// 0→1→3→5→7 …, four steps at least).
    struct Counter;

    impl Model for Counter {
        type State = u8;
        type Step = u8;
        fn init(&self) -> Vec<u8> {
            vec![0]
        }
        fn next(&self, s: &u8, out: &mut Vec<(u8, u8)>) {
            for step in [1, 2] {
                if s + step <= 10 {
                    out.push((step, s + step));
                }
            }
        }
        fn invariants(&self) -> Vec<Invariant<'_, u8>> {
            vec![("never 7", Box::new(|s| *s != 7))]
        }
    }

    #[test]
    fn finds_the_shortest_counterexample_and_bounds_the_search() {
        let report = explore(&Counter, 1_000);
        let found = report.counterexample.expect("7 is reachable");
        assert_eq!(found.invariant, "never 7");
        assert_eq!(found.trace.len(), 5, "{}", show(&found));
        assert_eq!(found.trace.last().unwrap().1, 7);
        let small = explore(&Counter, 3);
        assert!(small.truncated && small.counterexample.is_none());
    }
}
