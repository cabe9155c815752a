//! The places of `max_active_flows` in this process. Each flow being
//! worked on has a slot (its lock and cached state, which `decide` takes).
//! A client's start gets one at once or is refused; flow steps' calls wait
//! for one (to start a child, or to record its end in a parent not in
//! memory), the most urgent first, and idle parents give theirs up: so a
//! tree of sub-flows, however wide, stays within the limit and still
//! finishes (docs/steps.md, "Sub-flows").

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex};

use super::slot::{FlowSlot, Slot};

/// Releases a flow's slot when dropped (`FlowLocks::release`): on every way
/// out of a start or a decision, early returns and errors included.
pub(super) struct Released<'a> {
    flows: &'a Arc<FlowLocks>,
    flow_id: &'a str,
    slot: &'a FlowSlot,
}

impl<'a> Released<'a> {
    pub(super) fn on_exit(flows: &'a Arc<FlowLocks>, flow_id: &'a str, slot: &'a FlowSlot) -> Self {
        Self { flows, flow_id, slot }
    }
}

impl Drop for Released<'_> {
    fn drop(&mut self) {
        self.flows.release(self.flow_id, self.slot);
    }
}

/// One lock (and cached state) per flow that is being worked on; its
/// slot is its place in `max_active_flows`. Flow steps' calls that need a
/// place (to start their child, or to record its end in a parent that is
/// not in memory) wait for one here (`enter`), at most `max_waiting` of
/// them, the most urgent first: every place that frees goes to a waiting
/// call before a client's start can take it. A parent whose only calls
/// wait for its children stays in memory while nobody needs its place,
/// and gives it up to a waiting call (or a client's start) when the
/// places run out: it can be read back when a child ends, and a place
/// held by a flow that cannot go on until others get one could leave a
/// tree wider than the limit stuck.
pub(crate) struct FlowLocks {
    max_active: usize,
    max_waiting: usize,
    table: StdMutex<Table>,
}

#[derive(Default)]
struct Table {
    slots: HashMap<String, Slot>,
    /// By urgency (`Rank`), then by arrival.
    waiting: BTreeMap<(Rank, u64), Waiter>,
    arrivals: u64,
    /// The parents held whose only calls wait for children, longest idle
    /// first: the places given up when none is free.
    idle: BTreeMap<u64, String>,
}

/// How urgent a wait for a place is, most urgent first: recording a
/// child's end (that may finish a flow, freeing places), then starting a
/// child whose own sub-flows nest the least (a child that runs none
/// finishes without needing room for more). So a tree's deeper flows take
/// the places before its shallower ones start more children, and the
/// flows waiting for room stay few.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Rank {
    Record,
    /// The nesting of the child's plan (`ChildOf::nesting`).
    Start(usize),
}

struct Waiter {
    flow_id: String,
    grant: tokio::sync::oneshot::Sender<Place>,
}

/// A flow step's call's wait for a place (`FlowLocks::enter`): leaves the
/// queue when dropped, so that calls that stopped waiting (aborted, or
/// served from a memo) neither fill it nor count in it.
pub(super) struct Waiting {
    locks: Arc<FlowLocks>,
    key: Option<(Rank, u64)>,
    granted: tokio::sync::oneshot::Receiver<Place>,
}

impl Waiting {
    /// The place once granted; `None` when a more urgent call took this
    /// one's turn in a full queue.
    pub(super) async fn granted(&mut self) -> Option<Place> {
        (&mut self.granted).await.ok()
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            // Gone already when it was granted or pushed out.
            self.locks.table().waiting.remove(&key);
        }
    }
}

/// Why a flow step's call got no place in the queue: it is full of calls
/// at least as urgent.
#[derive(Debug)]
pub(super) struct QueueFull;

/// A place in `max_active_flows` given to one flow step's call for a
/// flow (the child it starts, the parent it records the end in): the
/// flow's slot is kept while it is held, and given back when it is
/// dropped (unless the flow then has calls of its own in flight).
pub(super) struct Place {
    locks: Arc<FlowLocks>,
    flow_id: String,
    slot: Slot,
    armed: bool,
}

impl Drop for Place {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut table = crate::sync::lock(&self.locks.table);
        self.slot.reserved.fetch_sub(1, Ordering::Relaxed);
        self.locks.release_in(&mut table, &self.flow_id, &self.slot);
    }
}

impl FlowLocks {
    pub(crate) fn new(max_active: usize, max_waiting: usize) -> Self {
        FlowLocks {
            max_active,
            max_waiting,
            table: StdMutex::default(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        crate::sync::lock(&self.table)
    }

    /// The flow's slot, made when it has none: for a decision on a flow
    /// that exists, which does not wait for a place (it is short, and a
    /// flow left waiting for one could hold up its children).
    pub(super) fn slot(&self, flow_id: &str) -> Slot {
        let mut table = self.table();
        table.slots.entry(flow_id.to_string()).or_default().clone()
    }

    /// The slot of a flow a client starts: refused with the count when
    /// this process already has `max_active` flows in progress (the flow
    /// is new to it). Taken at once or not: a client is answered `503`,
    /// not kept waiting.
    pub(super) fn admit(&self, flow_id: &str) -> Result<Slot, usize> {
        let mut table = self.table();
        if let Some(slot) = table.slots.get(flow_id) {
            return Ok(Arc::clone(slot));
        }
        let active = table.slots.len();
        if active >= self.max_active && !self.give_up_idle(&mut table) {
            return Err(active);
        }
        Ok(table.slots.entry(flow_id.to_string()).or_default().clone())
    }

    /// Wait for a place for `flow_id`: granted on the answer's channel at
    /// once if the flow is held already or a place is free, else when one
    /// frees and no more urgent call waits. A full queue takes the call
    /// only in place of a less urgent one, whose channel then closes;
    /// else it is refused. A caller that stops waiting drops its `Waiting`,
    /// which leaves the queue (a place granted meanwhile is given back).
    pub(super) fn enter(self: &Arc<Self>, flow_id: &str, rank: Rank) -> Result<Waiting, QueueFull> {
        let (grant, granted) = tokio::sync::oneshot::channel();
        let mut waiting = Waiting {
            locks: Arc::clone(self),
            key: None,
            granted,
        };
        let mut table = self.table();
        // Held already: no new place is taken. Unless the places are
        // overdrawn (decisions on flows not in memory take a slot limit or
        // not, `slot`): a place on such a slot would keep it past its
        // decision, and the sweep taking calls over one flow after another
        // would leave the count above the limit by more than the one
        // decision it is making. The call then waits for a place like any.
        if table.slots.len() <= self.max_active {
            if let Some(slot) = table.slots.get(flow_id).cloned() {
                self.give(&mut table, flow_id, slot, grant);
                return Ok(waiting);
            }
        }
        if table.waiting.len() >= self.max_waiting {
            let least = table.waiting.last_key_value().map(|(&(r, _), _)| r);
            if least.is_none_or(|least| least <= rank) {
                return Err(QueueFull);
            }
            // Its channel closes: its call is left to its lease.
            table.waiting.pop_last();
        }
        table.arrivals += 1;
        let key = (rank, table.arrivals);
        table.waiting.insert(
            key,
            Waiter {
                flow_id: flow_id.to_string(),
                grant,
            },
        );
        waiting.key = Some(key);
        self.fill(&mut table);
        Ok(waiting)
    }

    /// Flow steps' calls waiting for a place.
    pub(crate) fn waiting(&self) -> usize {
        self.table().waiting.len()
    }

    /// Give the free places to the most urgent calls waiting, and those of
    /// idle parents when there are no free ones.
    fn fill(self: &Arc<Self>, table: &mut Table) {
        while !table.waiting.is_empty() {
            if table.slots.len() >= self.max_active && !self.give_up_idle(table) {
                return;
            }
            let Some((_, waiter)) = table.waiting.pop_first() else {
                return;
            };
            if waiter.grant.is_closed() {
                continue;
            }
            let slot = table.slots.entry(waiter.flow_id.clone()).or_default().clone();
            self.give(table, &waiter.flow_id, slot, waiter.grant);
        }
    }

    /// Give `slot` to `grant` as a place; given back at once if its
    /// caller stopped waiting.
    fn give(
        self: &Arc<Self>,
        table: &mut Table,
        flow_id: &str,
        slot: Slot,
        grant: tokio::sync::oneshot::Sender<Place>,
    ) {
        slot.reserved.fetch_add(1, Ordering::Relaxed);
        let place = Place {
            locks: Arc::clone(self),
            flow_id: flow_id.to_string(),
            slot,
            armed: true,
        };
        if let Err(mut place) = grant.send(place) {
            // Given back here: its `Drop` would take the lock this holds.
            place.armed = false;
            place.slot.reserved.fetch_sub(1, Ordering::Relaxed);
            self.release_in(table, &place.flow_id, &place.slot);
        }
    }

    /// Drop from memory the parent idle the longest whose only calls wait
    /// for its children, freeing its place: whether there was one. One
    /// being decided on, or with a place or results pending, is passed
    /// over (listed again when let go, if still idle).
    fn give_up_idle(&self, table: &mut Table) -> bool {
        while let Some((since, flow_id)) = table.idle.pop_first() {
            let Some(slot) = table.slots.get(&flow_id).cloned() else {
                continue;
            };
            if slot.idle_since.load(Ordering::Relaxed) != since {
                continue;
            }
            slot.idle_since.store(0, Ordering::Relaxed);
            if slot.reserved.load(Ordering::Relaxed) > 0 || !crate::sync::lock(&slot.pending).is_empty() {
                continue;
            }
            let Ok(mut cached) = slot.cached.try_lock() else {
                continue;
            };
            if cached.as_ref().is_some_and(|c| c.state.has_own_calls()) {
                continue;
            }
            // Its next decision (a child's end) reads it again.
            *cached = None;
            drop(cached);
            table.slots.remove(&flow_id);
            return true;
        }
        false
    }

    /// List the slot among the idle parents, or take it off.
    fn mark_idle(table: &mut Table, flow_id: &str, slot: &FlowSlot, idle: bool) {
        let since = slot.idle_since.load(Ordering::Relaxed);
        if idle && since == 0 {
            table.arrivals += 1;
            let since = table.arrivals;
            table.idle.insert(since, flow_id.to_string());
            slot.idle_since.store(since, Ordering::Relaxed);
        } else if !idle && since != 0 {
            table.idle.remove(&since);
            slot.idle_since.store(0, Ordering::Relaxed);
        }
    }

    /// Whether this process holds `flow_id` active: its slot's cached state,
    /// as of this process's last commit of it, says so (false when it
    /// holds none, or a decision holds it right now).
    pub(super) fn held_active(&self, flow_id: &str) -> bool {
        let slot = self.table().slots.get(flow_id).cloned();
        slot.is_some_and(|slot| {
            slot.cached.try_lock().is_ok_and(|cached| {
                cached
                    .as_ref()
                    .is_some_and(|c| c.state.status == tartan_core::flow::FlowStatus::Active)
            })
        })
    }

    /// `f` of each slot (its flow's id and the slot), where it answers.
    pub(super) fn each_slot<T>(&self, mut f: impl FnMut(&str, &Slot) -> Option<T>) -> Vec<T> {
        let table = self.table();
        table.slots.iter().filter_map(|(id, slot)| f(id, slot)).collect()
    }

    /// Flows with work in progress (their slots are kept only while busy).
    pub(crate) fn len(&self) -> usize {
        self.table().slots.len()
    }

    /// Drop the flow's slot unless it is still needed: a decision holds its
    /// lock (that one releases it when done), results wait in it, a place
    /// on it is held, or its cached state has calls in flight (when they
    /// all wait for children, it is listed as idle, its place given up
    /// when another needs it). Called on every path out of a decision or a
    /// start, so a flow that finished, or was never created, never keeps a
    /// place in `max_active_flows`; the place goes to a call waiting for
    /// one.
    pub(super) fn release(self: &Arc<Self>, flow_id: &str, slot: &FlowSlot) {
        let mut table = self.table();
        self.release_in(&mut table, flow_id, slot);
    }

    fn release_in(self: &Arc<Self>, table: &mut Table, flow_id: &str, slot: &FlowSlot) {
        // A newer slot of the same flow is not this caller's to drop.
        if !table
            .slots
            .get(flow_id)
            .is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), slot))
        {
            return;
        }
        if slot.reserved.load(Ordering::Relaxed) > 0 {
            return;
        }
        let Ok(mut cached) = slot.cached.try_lock() else {
            return;
        };
        let own = cached.as_ref().is_some_and(|c| c.state.has_own_calls());
        let mut children = cached.as_ref().is_some_and(|c| c.state.has_active_work());
        let waiting = !crate::sync::lock(&slot.pending).is_empty();
        if children && !own && !waiting && table.slots.len() > self.max_active {
            // Made without a place (a decision on a flow not held): an
            // idle parent is not kept beyond the limit.
            *cached = None;
            children = false;
        }
        drop(cached);
        Self::mark_idle(table, flow_id, slot, children && !own && !waiting);
        if !children && !waiting {
            table.slots.remove(flow_id);
        }
        self.fill(table);
    }
}
