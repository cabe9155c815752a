//! Call slots: at most `max_calls` calls in flight in this process; one
//! step at most half of the slots the other steps do not hold (at least
//! one), and at most `max_calls_per_step` when that is set; the slots the
//! steps hold beyond their first at most half of all, together; the calls
//! waiting for a slot queued per step and served round-robin across steps,
//! at most `max_queued_calls` of them (docs/durability.md, "Call slots");
//! within a step, a higher priority first (docs/concurrency.md).
//!
//! Why two rules. Half of what the others leave keeps one step from
//! taking every slot (a fixed share, half of all, let two hanging steps
//! take them), but alone its shares halve, so about log2(`max_calls`) + 1
//! hanging steps took every slot. Holding the slots beyond each step's
//! first to half of all keeps the other half for steps' first slots: it
//! takes about `max_calls` / 2 hanging steps to fill them (512 of the
//! default 1024), while a lone step may still hold half. The price: busy
//! steps together make at most half of `max_calls` plus one call each.
//!
//! Besides the slots, the calls share the budget of bytes in flight, their
//! request and response bodies (`budget`, `TARTAN_MAX_INFLIGHT_BYTES`).
//!
//! A waiting call is an entry in a queue, not a task: a task is spawned when
//! it gets its slot. One small mutex guards the counts and the queues; it is
//! held for a few integer updates per call, never across an await.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

use crate::calls::budget::ByteBudget;
use crate::calls::dispatch::Call;
use crate::turns::TurnQueue;

/// A call admitted to this process: its number (to tell it from a later call
/// of the same receipt token) and what aborts it.
pub(crate) struct Admitted {
    pub call: Call,
    pub id: u64,
    pub cancel: CancellationToken,
    /// The call's way through its lanes (docs/lanes.md): its permits, held
    /// until its exchange ends, and how long it waited for them.
    pub passage: crate::lanes::Passage,
}

/// What `CallSlots::admit` did with a call.
pub(crate) enum Admission {
    /// It holds a slot: call it now.
    Run(Admitted),
    /// It waits in its step's queue.
    Queued,
    /// The queue is full: the call is handed back, not made.
    Full(Admitted),
}

pub(crate) struct CallSlots {
    max: usize,
    /// `max_calls_per_step`: a hard cap on top of the rule (`max` when unset).
    cap: usize,
    max_queued: usize,
    state: Mutex<SlotState>,
    /// The bytes of request and response bodies the running calls may hold.
    bytes: ByteBudget,
}

#[derive(Default)]
struct SlotState {
    running: usize,
    /// Slots held beyond each step's first, summed over the steps.
    extra: usize,
    queued: usize,
    /// Steps with calls running or waiting; an entry goes when it has neither.
    steps: HashMap<String, StepCalls>,
    /// Steps with waiting calls, in the order they are served next.
    ring: VecDeque<String>,
}

#[derive(Default)]
struct StepCalls {
    running: usize,
    /// In turn order (`turns`): a higher priority first.
    waiting: TurnQueue<Admitted>,
}

/// Counts for `/health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallCounts {
    /// Calls holding a slot.
    pub running: usize,
    /// Calls waiting for one.
    pub queued: usize,
    /// Bytes of response bodies held (`TARTAN_MAX_INFLIGHT_BYTES`).
    pub response_bytes: usize,
    /// Bytes of request bodies held, the same budget's.
    pub request_bytes: usize,
}

impl CallSlots {
    pub(crate) fn new(max: usize, cap: Option<usize>, max_queued: usize, max_bytes: usize) -> Self {
        let max = max.max(1);
        Self {
            max,
            cap: cap.unwrap_or(max).clamp(1, max),
            max_queued,
            state: Mutex::default(),
            bytes: ByteBudget::new(max_bytes),
        }
    }

    /// The budget of body bytes the calls share.
    pub(crate) fn bytes(&self) -> &ByteBudget {
        &self.bytes
    }

    /// The slots a step holding `own` of `running` may hold: half of those
    /// the other steps leave, at least 1, at most the cap.
    fn share(&self, running: usize, own: usize) -> usize {
        let others = running.saturating_sub(own);
        (self.max.saturating_sub(others) / 2).clamp(1, self.cap)
    }

    /// Whether a step holding `own` slots may take one more now: a free
    /// slot, below its share, and a slot beyond its first only while the
    /// steps' slots beyond their first are fewer than half of all.
    fn may_take(&self, st: &SlotState, own: usize) -> bool {
        st.running < self.max && own < self.share(st.running, own) && (own == 0 || st.extra < self.max / 2)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        crate::sync::lock(&self.state)
    }

    /// Hold the slots: no call gets one until the guard is dropped. Aborts
    /// of many calls land under it, so that a call ending meanwhile cannot
    /// hand its slot to a waiting call about to be aborted too.
    pub(crate) fn hold(&self) -> impl Drop + '_ {
        self.lock()
    }

    pub(crate) fn counts(&self) -> CallCounts {
        let st = self.lock();
        CallCounts {
            running: st.running,
            queued: st.queued,
            response_bytes: self.bytes.held_bytes(),
            request_bytes: self.bytes.sending_bytes(),
        }
    }

    /// Give the call a slot if one is free to its step, else queue it
    /// behind its step's other waiting calls, unless the queue is full.
    pub(crate) fn admit(&self, entry: Admitted) -> Admission {
        let mut st = self.lock();
        let st = &mut *st;
        let own = st.steps.get(&entry.call.spec.step.id);
        let (own, waiting) = own.map_or((0, false), |s| (s.running, !s.waiting.is_empty()));
        if !waiting && self.may_take(st, own) {
            st.take(&entry.call.spec.step.id);
            return Admission::Run(entry);
        }
        if st.queued >= self.max_queued {
            // Aborted calls wait to be skipped when reached; make room first.
            let mut dropped = 0;
            for s in st.steps.values_mut() {
                let before = s.waiting.len();
                s.waiting.retain(|w| !w.cancel.is_cancelled());
                dropped += before - s.waiting.len();
            }
            st.queued -= dropped;
            if st.queued >= self.max_queued {
                let id = entry.call.spec.step.id.clone();
                st.forget_if_idle(&id);
                return Admission::Full(entry);
            }
        }
        let id = entry.call.spec.step.id.clone();
        let step = st.steps.entry(id.clone()).or_default();
        if step.waiting.is_empty() {
            st.ring.push_back(id);
        }
        step.waiting.push(entry.call.spec.priority, entry);
        st.queued += 1;
        Admission::Queued
    }

    /// A call of `step_id` gave its slot back: the calls that get a slot now,
    /// taken round-robin across the steps that wait, each step below its share.
    pub(crate) fn release(&self, step_id: &str) -> Vec<Admitted> {
        let mut st = self.lock();
        let st = &mut *st;
        st.give_back(step_id);
        st.forget_if_idle(step_id);
        let mut start = Vec::new();
        // Steps passed over in a row because they hold their full share:
        // once every waiting step was, no slot can be given now.
        let mut passed = 0;
        while st.running < self.max && passed < st.ring.len() {
            let Some(id) = st.ring.pop_front() else {
                break;
            };
            let Some(own) = st.steps.get(&id).map(|s| s.running) else {
                continue;
            };
            // Shares and the room beyond first slots only shrink as other
            // steps take slots: a step passed over stays so for this round.
            if !self.may_take(st, own) {
                st.ring.push_back(id);
                passed += 1;
                continue;
            }
            let Some(step) = st.steps.get_mut(&id) else {
                continue;
            };
            let mut next_call = None;
            while let Some(next) = step.waiting.pop() {
                st.queued -= 1;
                // Aborted while it waited: nothing to call.
                if !next.cancel.is_cancelled() {
                    next_call = Some(next);
                    break;
                }
            }
            if let Some(next) = next_call {
                st.take(&id);
                start.push(next);
                passed = 0;
            }
            let Some(step) = st.steps.get(&id) else {
                continue;
            };
            if step.waiting.is_empty() {
                st.forget_if_idle(&id);
            } else {
                st.ring.push_back(id);
            }
        }
        start
    }
}

impl SlotState {
    /// A call of `step_id` takes a slot.
    fn take(&mut self, step_id: &str) {
        if !self.steps.contains_key(step_id) {
            self.steps.insert(step_id.to_owned(), StepCalls::default());
        }
        let Some(step) = self.steps.get_mut(step_id) else {
            return;
        };
        if step.running > 0 {
            self.extra += 1;
        }
        step.running += 1;
        self.running += 1;
    }

    /// A call of `step_id` gives its slot back.
    fn give_back(&mut self, step_id: &str) {
        if let Some(step) = self.steps.get_mut(step_id) {
            if step.running > 1 {
                self.extra -= 1;
            }
            step.running = step.running.saturating_sub(1);
            self.running = self.running.saturating_sub(1);
        }
    }

    fn forget_if_idle(&mut self, step_id: &str) {
        if self
            .steps
            .get(step_id)
            .is_some_and(|s| s.running == 0 && s.waiting.is_empty())
        {
            self.steps.remove(step_id);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn call(step: &str, n: usize) -> Admitted {
        let step: tartan_core::step::Step = serde_json::from_value(serde_json::json!({
            "id": step, "name": step, "type": "sync",
            "http": {"endpoint": "http://127.0.0.1:1/x"}, "attributes": {},
        }))
        .unwrap();
        Admitted {
            call: Call {
                spec: tartan_core::machine::Call {
                    kind: tartan_core::machine::CallKind::Step,
                    flow_id: "f".into(),
                    step: Arc::new(step),
                    token: format!("{n}"),
                    attempt: 1,
                    endpoint: String::new(),
                    placeholders: Default::default(),
                    method: tartan_core::machine::CallMethod::Post,
                    body: None,
                    memo: None,
                    bound: tartan_core::machine::AttemptBound {
                        timeout_ms: 1000,
                        scope: tartan_core::timeouts::TimeoutScope::Attempt,
                        limit_ms: 1000,
                        scope_start: chrono::Utc::now(),
                    },
                    expects_webhook: false,
                    priority: 0,
                },
                webhook_url: None,
                trace: None,
                tracestate: None,
            },
            id: n as u64,
            cancel: CancellationToken::new(),
            passage: Default::default(),
        }
    }

    fn started(out: Vec<Admitted>) -> Vec<String> {
        out.iter()
            .map(|a| format!("{}{}", a.call.spec.step.id, a.call.spec.token))
            .collect()
    }

    fn run(slots: &CallSlots, step: &str, n: usize) -> bool {
        matches!(slots.admit(call(step, n)), Admission::Run(_))
    }

    #[test]
    fn a_step_holds_at_most_half_of_what_the_others_leave() {
        let slots = CallSlots::new(8, None, 100, 1 << 20);
        // Alone, a step may hold half of the slots.
        assert!((0..4).all(|n| run(&slots, "a", n)));
        assert!(!run(&slots, "a", 4));
        // b may hold half of the 4 a leaves, c half of the 2 left, d one.
        assert!((0..2).all(|n| run(&slots, "b", n)));
        assert!(!run(&slots, "b", 2));
        assert!(run(&slots, "c", 0));
        assert!(!run(&slots, "c", 1));
        assert!(run(&slots, "d", 0));
        assert!(!run(&slots, "d", 1));
        assert_eq!(
            slots.counts(),
            CallCounts {
                running: 8,
                queued: 4,
                response_bytes: 0,
                request_bytes: 0,
            }
        );
        // A slot a gives back is over every waiting step's share now: it
        // stays free for a step that holds none.
        assert!(slots.release("a").is_empty());
        assert!(run(&slots, "e", 0));
        // c back at none may take one again: its waiting call goes.
        assert_eq!(started(slots.release("c")), ["c1"]);
    }

    /// Steps whose endpoints hang, arriving one after the other, each
    /// taking every slot it may: how many it takes to fill all the slots.
    fn hanging_steps_to_fill(max: usize) -> usize {
        let slots = CallSlots::new(max, None, 1 << 20, 1 << 20);
        let mut steps = 0;
        while slots.counts().running < max {
            let step = format!("s{steps}");
            let mut n = 0;
            while run(&slots, &step, n) {
                n += 1;
            }
            steps += 1;
        }
        steps
    }

    #[test]
    fn the_slots_beyond_first_ones_are_half_of_all_so_hanging_steps_fill_them_slowly() {
        let slots = CallSlots::new(16, None, 100, 1 << 20);
        // Alone, a step still holds half.
        assert!((0..8).all(|n| run(&slots, "a", n)));
        assert!(!run(&slots, "a", 8));
        // b's share is 4, but a holds 7 beyond its first: b gets 2.
        assert!((0..2).all(|n| run(&slots, "b", n)));
        assert!(!run(&slots, "b", 2));
        // From now on every step gets its first slot only.
        assert!(run(&slots, "c", 0));
        assert!(!run(&slots, "c", 1));
        assert_eq!(slots.counts().running, 11);
        // When a gives one back, there is room beyond a first for one
        // call: the first waiting step in turn (b) gets it, then c.
        assert_eq!(started(slots.release("a")), ["b2"]);
        assert_eq!(started(slots.release("a")), ["c1"]);
        assert_eq!(slots.counts().running, 11);
        // Half of the slots take about half as many hanging steps; by
        // halving shares alone, 1024 were full after 11.
        assert_eq!(hanging_steps_to_fill(4), 3);
        assert_eq!(hanging_steps_to_fill(16), 8);
        assert_eq!(hanging_steps_to_fill(1024), 512);
    }

    #[test]
    fn waiting_steps_are_served_in_turn_and_the_cap_holds() {
        let slots = CallSlots::new(6, Some(1), 100, 1 << 20);
        for step in ["a", "b", "c"] {
            assert!(run(&slots, step, 0));
            // The cap, though the rule would allow more.
            assert!(!run(&slots, step, 1));
            assert!(!run(&slots, step, 2));
        }
        assert_eq!(started(slots.release("a")), ["a1"]);
        assert_eq!(started(slots.release("b")), ["b1"]);
        assert_eq!(started(slots.release("c")), ["c1"]);
        assert_eq!(started(slots.release("b")), ["b2"]);
        assert_eq!(
            slots.counts(),
            CallCounts {
                running: 3,
                queued: 2,
                response_bytes: 0,
                request_bytes: 0,
            }
        );
    }

    #[test]
    fn a_step_s_waiting_calls_of_higher_priority_go_first() {
        let slots = CallSlots::new(1, Some(1), 100, 1 << 20);
        assert!(run(&slots, "a", 0));
        let with = |n, priority| {
            let mut c = call("a", n);
            c.call.spec.priority = priority;
            c
        };
        for (n, priority) in [(1, 0), (2, -3), (3, 50), (4, 0)] {
            assert!(matches!(slots.admit(with(n, priority)), Admission::Queued));
        }
        let order: Vec<String> = (0..4).flat_map(|_| started(slots.release("a"))).collect();
        assert_eq!(order, ["a3", "a1", "a4", "a2"]);
    }

    #[test]
    fn the_queue_is_bounded_and_aborted_calls_are_skipped() {
        let slots = CallSlots::new(1, Some(1), 2, 1 << 20);
        assert!(matches!(slots.admit(call("a", 0)), Admission::Run(_)));
        let aborted = call("a", 1);
        let cancel = aborted.cancel.clone();
        assert!(matches!(slots.admit(aborted), Admission::Queued));
        assert!(matches!(slots.admit(call("a", 2)), Admission::Queued));
        assert!(matches!(slots.admit(call("a", 3)), Admission::Full(_)));
        // An aborted call makes room when the queue is full.
        cancel.cancel();
        assert!(matches!(slots.admit(call("a", 3)), Admission::Queued));
        assert_eq!(started(slots.release("a")), ["a2"]);
        assert_eq!(started(slots.release("a")), ["a3"]);
        assert!(slots.release("a").is_empty());
        assert_eq!(
            slots.counts(),
            CallCounts {
                running: 0,
                queued: 0,
                response_bytes: 0,
                request_bytes: 0,
            }
        );
    }
}
