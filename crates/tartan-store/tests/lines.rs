//! The lines of concurrency keys (`LineStore`, the commits' `line`), on
//! both backends: rows written with the flows' commits, turns given in
//! turn order within the limit, places, and what the sweep finds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use support::{at, commit, start, succeed};
use tartan_store::{Admitted, LineWrite, Store};

/// The flows of a list of those let in.
fn ids(admitted: Vec<Admitted>) -> Vec<String> {
    admitted.into_iter().map(|a| a.flow_id).collect()
}

support::store_cases! {
    turns_follow_the_line_within_the_limit,
}

fn join(key: &str, limit: u32, turn_us: i64) -> Option<LineWrite> {
    Some(LineWrite::Join {
        key: key.into(),
        limit,
        turn_us,
        queued_us: turn_us,
    })
}

async fn turns_follow_the_line_within_the_limit(store: Arc<dyn Store>) {
    // Three flows of one key, limit 1, committed in one batch; `c` came
    // after `b` but its priority puts its turn first. `other` is another key.
    let starts: Vec<_> = ["a", "b", "c", "other"]
        .into_iter()
        .map(|id| (id, start(id, &[], at(0))))
        .collect();
    let batch = starts
        .iter()
        .map(|(id, tx)| {
            let mut c = commit(tx, 0, Some("{}"));
            c.line = match *id {
                "a" => join("k", 1, 100),
                "b" => join("k", 1, 200),
                "c" => join("k", 1, 150),
                _ => join("elsewhere", 2, 100),
            };
            c
        })
        .collect();
    for verdict in store.commit_flows(batch).await {
        verdict.unwrap();
    }
    let b = store.line_place("b").await.unwrap().unwrap();
    assert_eq!(
        (b.state.as_str(), b.place, b.running, b.waiting),
        ("waiting", 3, 0, 3)
    );

    assert_eq!(
        store.line_admit("k", 1_000).await.unwrap(),
        [Admitted {
            flow_id: "a".into(),
            joined_us: 100
        }],
        "let in for its place, joined at 100"
    );
    assert!(
        store.line_admit("k", 1_001).await.unwrap().is_empty(),
        "a holds the one turn"
    );
    assert_eq!(store.line_place("c").await.unwrap().unwrap().place, 1);
    let b = store.line_place("b").await.unwrap().unwrap();
    assert_eq!((b.place, b.running, b.waiting, b.limit), (2, 1, 2, 1));
    assert_eq!(b.key, "k");

    // a was let in, its decision not committed: the sweep sees it once a
    // lease has passed; a key with no room is not stalled.
    let stalled = store.lines_stalled(2_000).await.unwrap();
    assert_eq!(ids(stalled.admitting), ["a"]);
    assert_eq!(stalled.keys, ["elsewhere"], "one waiting, none running");
    assert!(store.lines_stalled(500).await.unwrap().admitting.is_empty());

    // a's turn commits, then a ends: its row goes, and c is next.
    // (The turn's write alone, without its event: the flow stays at 3.)
    let a = &starts[0].1;
    assert_eq!(store.line_place("a").await.unwrap().unwrap().state, "admitting");
    let mut admitted = commit(a, 3, None);
    admitted.events.clear();
    admitted.line = Some(LineWrite::Admitted);
    store.commit_flows(vec![admitted]).await.remove(0).unwrap();
    assert_eq!(store.line_place("a").await.unwrap().unwrap().state, "running");
    assert!(store.lines_stalled(2_000).await.unwrap().admitting.is_empty());
    let ended = succeed(&a.state, at(1));
    let mut done = commit(&ended, 3, None);
    done.line = Some(LineWrite::Leave);
    store.commit_flows(vec![done]).await.remove(0).unwrap();
    assert_eq!(
        store.line_place("a").await.unwrap(),
        None,
        "an ended flow left its line"
    );
    let stalled = store.lines_stalled(2_000).await.unwrap();
    assert!(stalled.keys.contains(&"k".to_string()), "{stalled:?}");
    assert_eq!(ids(store.line_admit("k", 3_000).await.unwrap()), ["c"]);
    assert_eq!(
        store.line_counts().await.unwrap(),
        (2, 1),
        "b and other wait, c runs"
    );
    assert_eq!(
        ids(store.line_admit("elsewhere", 3_000).await.unwrap()),
        ["other"]
    );
}
