//! The lanes' shared state (`LaneStore`), on both backends: slots shared
//! between engines and returned when a lease runs out, start times on the
//! rate, pauses and the breaker.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use tartan_core::lanes::BreakerState;
use tartan_store::{LaneOutcome, LaneTake, Store};

support::store_cases! {
    slots_are_shared_and_come_back_when_a_lease_runs_out,
    start_times_follow_the_rate,
    pauses_and_the_breaker,
}

fn take(node: &str, hold: u32, running: u32, lease_us: i64) -> LaneTake {
    LaneTake {
        lane_id: "step:s".into(),
        node: node.into(),
        limits: r#"{"concurrency":3}"#.into(),
        concurrency: Some(3),
        hold,
        running,
        waiting: hold.saturating_sub(running),
        rate: None,
        starts: 0,
        horizon_us: 0,
        lease_us,
        breaker: false,
    }
}

async fn slots_are_shared_and_come_back_when_a_lease_runs_out(store: Arc<dyn Store>) {
    let a = store.lane_take(&take("a", 2, 0, 60_000_000)).await.unwrap();
    assert_eq!(a.held, 2);
    // b wants 3 but one is left; it learns that a holds the rest.
    let b = store.lane_take(&take("b", 3, 0, 300_000)).await.unwrap();
    assert_eq!((b.held, b.sharers), (1, 2));
    assert!(b.next_free_us.is_some());
    let a = store.lane_take(&take("a", 2, 2, 60_000_000)).await.unwrap();
    assert!(a.contended, "b wants more than it holds");
    assert_eq!(store.lanes().await.unwrap()[0].held, 3);
    // a gives one back: b can take it.
    store.lane_take(&take("a", 1, 1, 60_000_000)).await.unwrap();
    assert_eq!(store.lane_take(&take("b", 3, 1, 300_000)).await.unwrap().held, 2);
    // b dies: when its lease runs out, its slots are a's to take.
    assert_eq!(
        store.lane_take(&take("a", 3, 1, 60_000_000)).await.unwrap().held,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        store.lane_take(&take("a", 3, 1, 60_000_000)).await.unwrap().held,
        3
    );
    // Renewal keeps a's; releasing all frees them.
    store.lane_renew("a", 60_000_000).await.unwrap();
    store.lane_release_all("a").await.unwrap();
    assert_eq!(store.lanes().await.unwrap()[0].held, 0);
}

async fn start_times_follow_the_rate(store: Arc<dyn Store>) {
    let rate = |node: &str, starts: u32| LaneTake {
        concurrency: None,
        limits: r#"{"rate":"10/s","burst":2}"#.into(),
        rate: Some((100_000, 2)),
        starts,
        horizon_us: 1_000_000,
        ..take(node, 0, 0, 1_000_000)
    };
    let first = store.lane_take(&rate("a", 5)).await.unwrap();
    let t = &first.starts;
    assert_eq!(t.len(), 5);
    // Burst 2: two at once, then 100 ms apart.
    assert_eq!(t[1] - t[0], 0);
    for w in t[1..].windows(2) {
        assert_eq!(w[1] - w[0], 100_000);
    }
    // Another engine continues on the same rate.
    let second = store.lane_take(&rate("b", 2)).await.unwrap();
    assert!(
        second.starts[0] >= t[4] + 100_000,
        "{:?} after {:?}",
        second.starts,
        t
    );
    // Nothing past the horizon: the next time is said instead.
    let full = store.lane_take(&rate("b", 50)).await.unwrap();
    assert!(full.starts.len() < 15, "{}", full.starts.len());
    let none = store.lane_take(&rate("c", 1)).await.unwrap();
    assert!(none.starts.is_empty());
    assert!(none.next_start_us.is_some());
}

async fn pauses_and_the_breaker(store: Arc<dyn Store>) {
    let breaker = |node: &str| LaneTake {
        concurrency: None,
        limits: r#"{"breaker":{"failures":2,"cool_down":1000}}"#.into(),
        starts: 1,
        waiting: 1,
        breaker: true,
        ..take(node, 0, 0, 1_000_000)
    };
    // The first pause creates the lane.
    store
        .lane_pause("step:s", "{}", Some(200_000), "HTTP 429")
        .await
        .unwrap();
    // A shorter pause does not cut a longer one.
    store
        .lane_pause("step:s", "{}", Some(1_000), "shorter")
        .await
        .unwrap();
    let lane = &store.lanes().await.unwrap()[0];
    assert_eq!(lane.paused_reason.as_deref(), Some("HTTP 429"));
    assert!(lane.paused_until_us.is_some());
    assert!(store
        .lane_take(&breaker("a"))
        .await
        .unwrap()
        .paused_until_us
        .is_some());
    store.lane_resume("step:s").await.unwrap();
    assert_eq!(store.lanes().await.unwrap()[0].paused_until_us, None);

    let failed = LaneOutcome::Failed {
        failures: 2,
        cool_down_us: 200_000,
    };
    assert_eq!(
        store.lane_outcome("step:s", "{}", failed).await.unwrap(),
        BreakerState::Closed
    );
    assert_eq!(
        store.lane_outcome("step:s", "{}", failed).await.unwrap(),
        BreakerState::Open
    );
    let open = store.lane_take(&breaker("a")).await.unwrap();
    assert_eq!((open.breaker, open.canary), (BreakerState::Open, false));
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    // A lost canary lets the next engine send one at once.
    let lost = store.lane_take(&breaker("c")).await.unwrap();
    assert!(lost.canary);
    assert_eq!(
        store
            .lane_outcome("step:s", "{}", LaneOutcome::CanaryLost)
            .await
            .unwrap(),
        BreakerState::HalfOpen
    );
    let canary = store.lane_take(&breaker("a")).await.unwrap();
    assert_eq!((canary.breaker, canary.canary), (BreakerState::HalfOpen, true));
    let other = store.lane_take(&breaker("b")).await.unwrap();
    assert_eq!((other.breaker, other.canary), (BreakerState::HalfOpen, false));
    assert_eq!(
        store
            .lane_outcome("step:s", "{}", LaneOutcome::Succeeded)
            .await
            .unwrap(),
        BreakerState::Closed
    );
    assert_eq!(store.lanes().await.unwrap()[0].failures, 0);
}
