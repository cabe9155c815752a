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
    /// When each call came and how many were in flight with it.
    pub(super) loads: Arc<Mutex<Vec<(Instant, usize)>>>,
}

pub(super) async fn counting(delay: Duration) -> Counting {
    let now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let times: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let loads: Arc<Mutex<Vec<(Instant, usize)>>> = Arc::default();
    let (n, m, t, l) = (now.clone(), most.clone(), times.clone(), loads.clone());
    let server = StepServer::start_async(move |_, _| {
        let came = Instant::now();
        t.lock().unwrap().push(came);
        let in_flight = InFlight::enter(&n);
        l.lock().unwrap().push((came, in_flight.count));
        m.fetch_max(in_flight.count, Ordering::SeqCst);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            drop(in_flight);
            json_reply(200, json!({"y": "done"}))
        })
    })
    .await;
    Counting {
        server,
        most,
        times,
        loads,
    }
}

/// One call in flight at the step server. Counted out when dropped: a
/// caller that goes away (an engine killed mid-call) drops the handler
/// before its reply, and the call is over then too.
struct InFlight {
    counter: Arc<AtomicUsize>,
    count: usize,
}

impl InFlight {
    fn enter(counter: &Arc<AtomicUsize>) -> InFlight {
        let count = counter.fetch_add(1, Ordering::SeqCst) + 1;
        InFlight {
            counter: counter.clone(),
            count,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.counter.fetch_sub(1, Ordering::SeqCst);
    }
}
