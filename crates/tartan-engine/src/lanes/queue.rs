//! The calls waiting in one lane, fair across flows: one queue per flow,
//! served in turn, so that a flow with 10,000 items waiting does not
//! starve a flow with one (docs/lanes.md, "Fairness"). A flow's turn comes
//! by turn order (`turns`): among flows of one priority, round-robin; a
//! flow of higher priority is served first, each point of priority worth
//! a second of waiting, so none waits for ever (docs/concurrency.md).

use std::collections::{HashMap, VecDeque};

use crate::turns::TurnQueue;

pub(super) struct FairQueue<T> {
    /// Each flow's priority and waiting entries.
    flows: HashMap<String, (i32, VecDeque<T>)>,
    /// Flows with waiting entries, in the order they are served next: a
    /// flow served re-enters as if it began waiting then.
    ring: TurnQueue<String>,
    len: usize,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        Self {
            flows: HashMap::new(),
            ring: TurnQueue::default(),
            len: 0,
        }
    }
}

impl<T> FairQueue<T> {
    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(super) fn push(&mut self, flow_id: &str, priority: i32, entry: T) {
        match self.flows.get_mut(flow_id) {
            Some((_, q)) => q.push_back(entry),
            None => {
                self.flows
                    .insert(flow_id.to_string(), (priority, VecDeque::from([entry])));
                self.ring.push(priority, flow_id.to_string());
            }
        }
        self.len += 1;
    }

    /// The next entry: the first of the flow whose turn it is; that flow
    /// waits for its next turn if it has more.
    pub(super) fn pop(&mut self) -> Option<(String, T)> {
        let flow = self.ring.pop()?;
        let (priority, q) = self.flows.get_mut(&flow)?;
        let priority = *priority;
        let entry = q.pop_front()?;
        self.len -= 1;
        if q.is_empty() {
            self.flows.remove(&flow);
        } else {
            self.ring.push(priority, flow.clone());
        }
        Some((flow, entry))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_with_many_waiting_does_not_starve_one_with_one() {
        let mut q = FairQueue::default();
        for i in 0..1000 {
            q.push("big", 0, i);
        }
        q.push("small", 0, -1);
        let first: Vec<i32> = (0..3).map(|_| q.pop().unwrap().1).collect();
        assert_eq!(first, vec![0, -1, 1]);
        assert_eq!(q.len(), 998);
        assert_eq!(q.pop().unwrap(), ("big".to_string(), 2));
        assert!(!q.is_empty());
    }

    #[test]
    fn a_flow_of_higher_priority_goes_first() {
        let mut q = FairQueue::default();
        q.push("low", 0, 1);
        q.push("low", 0, 2);
        q.push("high", 10, 100);
        q.push("high", 10, 101);
        let order: Vec<i32> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec![100, 101, 1, 2]);
    }
}
