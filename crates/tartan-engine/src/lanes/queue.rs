//! The calls waiting in one lane, fair across flows: one queue per flow,
//! served round-robin, so that a flow with 10,000 items waiting does not
//! starve a flow with one (docs/lanes.md, "Fairness").

use std::collections::{HashMap, VecDeque};

pub(super) struct FairQueue<T> {
    flows: HashMap<String, VecDeque<T>>,
    /// Flows with waiting entries, in the order they are served next.
    ring: VecDeque<String>,
    len: usize,
}

impl<T> Default for FairQueue<T> {
    fn default() -> Self {
        Self {
            flows: HashMap::new(),
            ring: VecDeque::new(),
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

    pub(super) fn push(&mut self, flow_id: &str, entry: T) {
        match self.flows.get_mut(flow_id) {
            Some(q) => q.push_back(entry),
            None => {
                self.flows.insert(flow_id.to_string(), VecDeque::from([entry]));
                self.ring.push_back(flow_id.to_string());
            }
        }
        self.len += 1;
    }

    /// The next entry: the first of the flow whose turn it is; that flow
    /// goes to the back of the ring.
    pub(super) fn pop(&mut self) -> Option<(String, T)> {
        let flow = self.ring.pop_front()?;
        let q = self.flows.get_mut(&flow)?;
        let entry = q.pop_front()?;
        self.len -= 1;
        if q.is_empty() {
            self.flows.remove(&flow);
        } else {
            self.ring.push_back(flow.clone());
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
            q.push("big", i);
        }
        q.push("small", -1);
        let first: Vec<i32> = (0..3).map(|_| q.pop().unwrap().1).collect();
        assert_eq!(first, vec![0, -1, 1]);
        assert_eq!(q.len(), 998);
        assert_eq!(q.pop().unwrap(), ("big".to_string(), 2));
        assert!(!q.is_empty());
    }
}
