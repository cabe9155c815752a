//! The calls of this process, from admission until their result is
//! recorded: each listed by receipt token with its number (a retry of the
//! same token is a new call) and what aborts it; the call slots they take
//! (`slots`); the outbound client they go through; and how many were left
//! to their lease because the queue was full. `calls::run` drives them;
//! lease renewal, aborts and shutdown read and end them through here.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

use crate::calls::slots::CallSlots;
use crate::sync::lock;

/// One call of this process.
struct Listed {
    /// Which call: a retry of the same token is a new one.
    id: u64,
    /// Aborts it.
    cancel: CancellationToken,
    /// It got a slot and went out; on shutdown, the calls that did not are
    /// handed back at once.
    started: bool,
}

pub(crate) struct InFlight {
    listed: Mutex<HashMap<String, Listed>>,
    /// Numbers the calls.
    ids: AtomicU64,
    /// Calls left to their lease because the queue was full, since start.
    deferred: AtomicU64,
    /// The calls running and those waiting for a slot.
    pub(crate) slots: CallSlots,
    /// Where step calls go out (the step host policy on every address).
    pub(crate) http: reqwest::Client,
    /// What scripts may spend, and the places of those spending it all.
    pub(crate) scripts: crate::calls::scripts::Scripts,
}

impl InFlight {
    pub(crate) fn new(
        slots: CallSlots,
        http: reqwest::Client,
        scripts: crate::calls::scripts::Scripts,
    ) -> Self {
        Self {
            listed: Mutex::default(),
            ids: AtomicU64::new(0),
            deferred: AtomicU64::new(0),
            slots,
            http,
            scripts,
        }
    }

    fn listed(&self) -> MutexGuard<'_, HashMap<String, Listed>> {
        lock(&self.listed)
    }

    /// List a new call of `token` (replacing an older one of the token):
    /// its number and what aborts it.
    pub(crate) fn list(&self, token: &str) -> (u64, CancellationToken) {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        self.listed().insert(
            token.to_string(),
            Listed {
                id,
                cancel: cancel.clone(),
                started: false,
            },
        );
        (id, cancel)
    }

    /// Drop call `id` of `token`, unless a newer call of the token already
    /// took its place.
    pub(crate) fn forget(&self, token: &str, id: u64) {
        let mut listed = self.listed();
        if listed.get(token).is_some_and(|c| c.id == id) {
            listed.remove(token);
        }
    }

    /// Count a call left to its lease because the queue was full.
    pub(crate) fn defer(&self) {
        self.deferred.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn deferred(&self) -> u64 {
        self.deferred.load(Ordering::Relaxed)
    }

    /// Mark call `id` as going out, unless `stopping` has fired. Under the
    /// list's lock, as `started` reads: a call either is marked before the
    /// stop is seen, or does not start.
    pub(crate) fn mark_started(&self, token: &str, id: u64, stopping: &CancellationToken) -> bool {
        let mut listed = self.listed();
        if stopping.is_cancelled() {
            return false;
        }
        if let Some(c) = listed.get_mut(token).filter(|c| c.id == id) {
            c.started = true;
        }
        true
    }

    /// The receipt tokens of the calls that went out and are still running.
    pub(crate) fn started(&self) -> Vec<String> {
        self.listed()
            .iter()
            .filter(|(_, c)| c.started)
            .map(|(token, _)| token.clone())
            .collect()
    }

    /// Every call listed: receipt token and call number.
    pub(crate) fn all(&self) -> Vec<(String, u64)> {
        self.listed()
            .iter()
            .map(|(token, c)| (token.clone(), c.id))
            .collect()
    }

    /// Whether a call of `token` is listed.
    pub(crate) fn contains(&self, token: &str) -> bool {
        self.listed().contains_key(token)
    }

    /// Abort the call of `token`, if one is listed; whether one was.
    pub(crate) fn abort(&self, token: &str) -> bool {
        match self.listed().remove(token) {
            Some(c) => {
                c.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Abort those of `calls` (as `all` read them) whose token is not
    /// among `renewed` and that still run: their lease is gone. A call that
    /// ended, or was replaced by a newer call of its token, is left.
    /// Answers the tokens aborted.
    pub(crate) fn abort_unrenewed(&self, calls: Vec<(String, u64)>, renewed: &[String]) -> Vec<String> {
        let renewed: HashSet<&str> = renewed.iter().map(String::as_str).collect();
        let mut listed = self.listed();
        let mut aborted = Vec::new();
        for (token, id) in calls {
            let running = listed
                .get(&token)
                .is_some_and(|c| c.id == id && !c.cancel.is_cancelled());
            if renewed.contains(token.as_str()) || !running {
                continue;
            }
            if let Some(c) = listed.remove(&token) {
                c.cancel.cancel();
                aborted.push(token);
            }
        }
        aborted
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn calls() -> InFlight {
        InFlight::new(
            CallSlots::new(4, None, 4, 1024),
            reqwest::Client::new(),
            crate::calls::scripts::Scripts::new(Default::default(), 1),
        )
    }

    #[test]
    fn a_newer_call_of_a_token_is_not_forgotten_for_an_older_one() {
        let calls = calls();
        let (old, _) = calls.list("t");
        let (new, _) = calls.list("t");
        calls.forget("t", old);
        assert!(calls.contains("t"));
        assert_eq!(calls.all(), [("t".to_string(), new)]);
        calls.forget("t", new);
        assert!(!calls.contains("t"));
    }

    #[test]
    fn only_calls_marked_before_the_stop_count_as_started() {
        let calls = calls();
        let stopping = CancellationToken::new();
        let (a, _) = calls.list("a");
        let (b, _) = calls.list("b");
        assert!(calls.mark_started("a", a, &stopping));
        stopping.cancel();
        assert!(!calls.mark_started("b", b, &stopping));
        assert_eq!(calls.started(), ["a"]);
    }

    #[test]
    fn an_unrenewed_running_call_is_aborted_and_the_rest_left() {
        let calls = calls();
        let (_, kept) = calls.list("kept");
        let (_, lost) = calls.list("lost");
        let (_, done) = calls.list("done");
        done.cancel();
        let (replaced_id, _) = calls.list("replaced");
        let snapshot = calls.all();
        calls.list("replaced");
        let aborted = calls.abort_unrenewed(snapshot, &["kept".to_string()]);
        assert_eq!(aborted, ["lost"]);
        assert!(lost.is_cancelled() && !kept.is_cancelled());
        assert!(calls.contains("replaced") && calls.contains("done"));
        assert!(calls
            .all()
            .iter()
            .all(|(t, id)| t != "replaced" || *id != replaced_id));
        assert!(calls.abort("kept"));
        assert!(kept.is_cancelled());
        assert!(!calls.abort("kept"));
    }
}
