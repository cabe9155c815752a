//! Lanes (docs/lanes.md): limits a step's or a host's calls share across
//! flows, rate limits that pause the lane, the breaker, and the operator's
//! view and controls.

mod cluster;
mod limits;
mod operate;
mod pauses;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{json_reply, StepServer};

/// A step server that answers after `delay`, counting the calls in flight
/// at once (the most seen) and recording when each came.
pub(super) struct Counting {
    pub(super) server: StepServer,
    pub(super) most: Arc<AtomicUsize>,
    pub(super) times: Arc<Mutex<Vec<Instant>>>,
}

pub(super) async fn counting(delay: Duration) -> Counting {
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let (n, m, t) = (now.clone(), most.clone(), times.clone());
    let server = StepServer::start_async(move |_, _| {
        let (n, m) = (n.clone(), m.clone());
        t.lock().unwrap().push(Instant::now());
        let running = n.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(running, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            n.fetch_sub(1, Ordering::SeqCst);
            json_reply(200, json!({"y": "done"}))
        })
    })
    .await;
    Counting { server, most, times }
}
