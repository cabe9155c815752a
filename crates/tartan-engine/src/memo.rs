//! Memoized answers (docs/steps.md, "Memoization"): a memoizable step's
//! answer is kept under the SHA-256 of its call's identity
//! (`tartan_core::machine::MemoCall`) and reused for an identical call
//! without calling the step. The store's table is shared by every engine
//! on the database and survives restarts; a bounded LRU in each process
//! (`TARTAN_MEMO_CACHE_SIZE`, or Argyll's `MEMO_CACHE_SIZE`) spares the
//! database a read for what this process saw lately. The table is pruned
//! (expired answers, then the oldest past `TARTAN_MEMO_MAX_ENTRIES`) every
//! so many answers stored, not on a clock.
//!
//! Both are bounded in bytes as well as in answers: an answer of more than
//! [`MAX_ANSWER_BYTES`] of JSON is not memoized (the step is called each
//! time), and the process's layer holds at most [`MAX_CACHE_BYTES`]. So the
//! table holds at most `TARTAN_MEMO_MAX_ENTRIES` × 64 KiB and the layer 64
//! MiB, whatever a step answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use tartan_core::flow::FlowState;
use tartan_core::json::Args;
use tartan_core::machine::MemoCall;
use tartan_store::MemoStore;
use tokio_util::task::TaskTracker;

use crate::clock::Clock;

/// Prune the table after this many answers stored by this process.
const PRUNE_EVERY: u64 = 1000;

/// The largest answer memoized, in bytes of JSON.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What this process's layer holds at most, in bytes of the answers' JSON.
pub const MAX_CACHE_BYTES: usize = 64 * 1024 * 1024;

/// The most answers `TARTAN_MEMO_CACHE_SIZE` may ask this process to keep.
pub const MAX_MEMO_CACHE_SIZE: usize = 10_000_000;

/// An answer, its size and until when it may be reused.
#[derive(Clone)]
struct Entry {
    outputs: Args,
    bytes: usize,
    expires: Option<DateTime<Utc>>,
}

/// The layer's answers, newest used first, and their bytes together.
struct Recent {
    answers: lru::LruCache<String, Entry>,
    bytes: usize,
}

/// This process's layer of the memo.
struct Layer {
    recent: Mutex<Recent>,
    capacity: usize,
    stored: AtomicU64,
}

/// The memo: this process's layer over the store's table.
pub(crate) struct Memo {
    layer: Layer,
    store: Arc<dyn MemoStore>,
    clock: Clock,
    /// Answers the table keeps at most (`TARTAN_MEMO_MAX_ENTRIES`).
    max_entries: u64,
    /// Where answers are stored in the background, awaited on shutdown.
    tasks: TaskTracker,
}

impl Layer {
    fn new(capacity: usize) -> Layer {
        Layer {
            // Grown as answers come, not allocated up front for `capacity`.
            recent: Mutex::new(Recent {
                answers: lru::LruCache::unbounded(),
                bytes: 0,
            }),
            capacity: capacity.clamp(1, MAX_MEMO_CACHE_SIZE),
            stored: AtomicU64::new(0),
        }
    }

    fn recent(&self, key: &str, now: DateTime<Utc>) -> Option<Args> {
        let mut recent = crate::sync::lock(&self.recent);
        match recent.answers.get(key) {
            Some(e) if e.expires.is_none_or(|t| t > now) => Some(e.outputs.clone()),
            Some(_) => {
                if let Some(gone) = recent.answers.pop(key) {
                    recent.bytes -= gone.bytes;
                }
                None
            }
            None => None,
        }
    }

    fn remember(&self, key: String, outputs: Args, bytes: usize, expires: Option<DateTime<Utc>>) {
        let mut recent = crate::sync::lock(&self.recent);
        let entry = Entry {
            outputs,
            bytes,
            expires,
        };
        if let Some((_, replaced)) = recent.answers.push(key, entry) {
            recent.bytes -= replaced.bytes;
        }
        recent.bytes += bytes;
        while recent.answers.len() > self.capacity || recent.bytes > MAX_CACHE_BYTES {
            match recent.answers.pop_lru() {
                Some((_, gone)) => recent.bytes -= gone.bytes,
                None => break,
            }
        }
    }
}

fn key_of(memo: &MemoCall) -> String {
    let digest = Sha256::digest(memo.identity.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn expiry(memo: &MemoCall, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let ms = i64::try_from(memo.ttl_ms?).unwrap_or(i64::MAX);
    Some(
        chrono::Duration::try_milliseconds(ms)
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

impl Memo {
    /// A layer of `capacity` answers (clamped to [`MAX_MEMO_CACHE_SIZE`]).
    pub(crate) fn new(
        capacity: usize,
        store: Arc<dyn MemoStore>,
        clock: Clock,
        max_entries: u64,
        tasks: TaskTracker,
    ) -> Memo {
        Memo {
            layer: Layer::new(capacity),
            store,
            clock,
            max_entries,
            tasks,
        }
    }

    /// The answer kept for this call, if any. A store that cannot be read
    /// is a miss: the step is called.
    pub(crate) async fn lookup(&self, memo: &MemoCall) -> Option<Args> {
        let now = self.clock.now();
        let key = key_of(memo);
        if let Some(hit) = self.layer.recent(&key, now) {
            return Some(hit);
        }
        let text = match self.store.memo_get(&key, now).await {
            Ok(text) => text?,
            Err(e) => {
                tracing::warn!("reading the memo failed, calling the step: {e}");
                return None;
            }
        };
        let outputs: Args = serde_json::from_str(&text).ok()?;
        self.layer
            .remember(key, outputs.clone(), text.len(), expiry(memo, now));
        Some(outputs)
    }

    /// Keep the answer of a memoizable step's item that just succeeded
    /// (`Effect::Memoize`), in the background: the flow does not wait.
    pub(crate) fn memoize(self: &Arc<Self>, state: &FlowState, step_id: &str, token: &str) {
        let Some(memo) = MemoCall::for_item(state, step_id, token) else {
            return;
        };
        let Some(outputs) = state.find_work(step_id, token).and_then(|w| w.outputs.clone()) else {
            return;
        };
        let outputs: Args = tartan_core::json::args_of(&outputs);
        let memo_of = Arc::clone(self);
        let step_id = step_id.to_string();
        self.tasks.spawn(async move {
            let now = memo_of.clock.now();
            let key = key_of(&memo);
            let expires = expiry(&memo, now);
            let Ok(text) = serde_json::to_string(&outputs) else {
                return;
            };
            if text.len() > MAX_ANSWER_BYTES {
                tracing::debug!(%step_id, bytes = text.len(), "an answer too large to memoize");
                return;
            }
            let store = &memo_of.store;
            if let Err(e) = store.memo_put(&key, &step_id, &text, now, expires).await {
                tracing::warn!(%step_id, "storing a memoized answer failed: {e}");
                return;
            }
            // Not remembered here: another process's answer may have been
            // stored first, and the first is the one kept.
            let stored = memo_of.layer.stored.fetch_add(1, Ordering::Relaxed) + 1;
            if stored.is_multiple_of(PRUNE_EVERY) {
                let keep = memo_of.max_entries;
                if let Err(e) = store.memo_prune(now, keep).await {
                    tracing::warn!("pruning the memo failed: {e}");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Args {
        Args::new()
    }

    #[test]
    fn the_layer_is_bounded_in_answers_and_in_bytes() {
        let memo = Layer::new(3);
        for i in 0..5 {
            memo.remember(format!("k{i}"), answer(), 10, None);
        }
        let now = Utc::now();
        assert!(memo.recent("k0", now).is_none() && memo.recent("k1", now).is_none());
        assert!(memo.recent("k4", now).is_some());
        // Three answers fit by count, not by bytes: the oldest go.
        let memo = Layer::new(3);
        memo.remember("a".into(), answer(), MAX_CACHE_BYTES / 2, None);
        memo.remember("b".into(), answer(), MAX_CACHE_BYTES / 2, None);
        memo.remember("c".into(), answer(), 1, None);
        assert!(
            memo.recent("a", now).is_none(),
            "a pushed the layer past its bytes"
        );
        assert!(memo.recent("b", now).is_some() && memo.recent("c", now).is_some());
        // Replacing an answer gives its bytes back.
        memo.remember("c".into(), answer(), 2, None);
        assert_eq!(crate::sync::lock(&memo.recent).bytes, MAX_CACHE_BYTES / 2 + 2);
        // A huge capacity allocates nothing up front.
        let _ = Layer::new(usize::MAX);
    }
}
