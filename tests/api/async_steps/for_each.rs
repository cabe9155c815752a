//! for_each work items and parallelism end to end (docs/work-items.md,
//! "for_each"): one item per element, called in element order within the
//! step's parallelism, outputs aggregated in element order; two for_each
//! inputs expand into their Cartesian product; an empty array completes the
//! step with an empty aggregate; more than ten thousand items are refused
//! at flow start. The real server and real step servers on 127.0.0.1.
//!
//! Every wait is bounded; delays are tens of milliseconds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{json, Value};

use super::support::{
    assert_deactivated_last, assert_problem, for_each_step, header, register, start, work_items,
};
use crate::helpers::{events, json_reply, of_type, spawn_app, sync_step, types, Backend, StepServer};
use tartan_testkit::both_backends;

both_backends!(
    a_for_each_step_runs_one_item_per_element_in_order_within_its_parallelism,
    two_for_each_inputs_expand_into_their_cartesian_product_in_order,
    an_empty_for_each_array_completes_the_step_with_an_empty_aggregate,
    a_for_each_over_more_than_ten_thousand_items_is_refused_at_flow_start,
);

// ---------------------------------------------------------------------------
// for_each work items (docs/work-items.md, "for_each").

async fn a_for_each_step_runs_one_item_per_element_in_order_within_its_parallelism(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    // 20 ms per request; counts the requests in progress at once.
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (c, p) = (current.clone(), peak.clone());
    let svc = StepServer::start_async(move |r, _| {
        let (current, peak) = (c.clone(), p.clone());
        Box::pin(async move {
            let now = current.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            current.fetch_sub(1, Ordering::SeqCst);
            let n = r.body["items"].as_i64().unwrap_or(-1000);
            json_reply(200, json!({"doubled": n * 2}))
        })
    })
    .await;
    let mut step = for_each_step("double", &svc.url("/double"), &["items"], "doubled", 5);
    step["attributes"]["doubled"]["type"] = json!("number");
    register(&app, &step).await;
    let elements: Vec<i64> = (0..100).collect();
    start(
        &app,
        json!({"id": "fe", "goals": ["double"], "init": {"items": [elements]}}),
    )
    .await;
    let flow = app.wait_for_flow("fe").await;
    assert_eq!(flow["status"], "completed", "{flow}");

    let reqs = svc.requests();
    assert_eq!(reqs.len(), 100, "one call per element");
    let seen: Vec<i64> = reqs
        .iter()
        .map(|r| {
            let obj = r.body.as_object().unwrap_or_else(|| panic!("{r:?}"));
            assert_eq!(obj.len(), 1, "only the element: {r:?}");
            obj["items"].as_i64().unwrap_or_else(|| panic!("{r:?}"))
        })
        .collect();
    let mut sorted = seen.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, elements, "each element exactly once");
    let mut first: Vec<i64> = seen[..5].to_vec();
    first.sort_unstable();
    assert_eq!(first, [0, 1, 2, 3, 4], "the first five calls: {seen:?}");
    // Element order: element e starts only after 0..e-1 have started and
    // with at most 4 others in flight, so at least e-4 calls came before it.
    for (position, e) in seen.iter().enumerate() {
        assert!(
            *e <= position as i64 + 4,
            "element {e} arrived at position {position}: {seen:?}"
        );
    }
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 5, "{peak} calls at once, parallelism is 5");
    assert!(
        peak >= 2,
        "the items ran one at a time ({peak}) despite parallelism 5"
    );
    let tokens: std::collections::BTreeSet<String> =
        reqs.iter().map(|r| header(r, "argyll-receipt-token")).collect();
    assert_eq!(tokens.len(), 100, "a token per item");

    // Output aggregation: in element order, each element with its for_each
    // input under the attribute's name and the output under its own.
    let expected: Vec<Value> = elements
        .iter()
        .map(|n| json!({"items": n, "doubled": n * 2}))
        .collect();
    assert_eq!(flow["attributes"]["doubled"][0]["value"], json!(expected));
    assert_eq!(flow["attributes"]["doubled"][0]["step"], "double");
    assert_eq!(
        flow["executions"]["double"]["outputs"],
        json!({"doubled": expected})
    );
    let items = work_items(&flow, "double");
    assert_eq!(items.len(), 100);
    for (token, w) in &items {
        assert!(tokens.contains(token));
        assert_eq!(w["status"], "succeeded", "{w}");
        let n = w["inputs"]["items"].as_i64().unwrap();
        assert_eq!(w["outputs"], json!({"doubled": n * 2}), "{w}");
    }
    let evs = events(&app, "fe").await;
    assert_eq!(of_type(&evs, "step_started").len(), 1);
    assert_eq!(of_type(&evs, "work_started").len(), 100);
    assert_eq!(of_type(&evs, "work_succeeded").len(), 100);
    assert_eq!(of_type(&evs, "step_completed").len(), 1);
    assert_deactivated_last(&app, "fe", "completed").await;
}

async fn two_for_each_inputs_expand_into_their_cartesian_product_in_order(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let label = format!(
            "{}-{}",
            r.body["regions"].as_str().unwrap_or("?"),
            r.body["products"].as_str().unwrap_or("?")
        );
        json_reply(200, json!({"label": label}))
    })
    .await;
    let mut step = for_each_step("label", &svc.url("/label"), &["regions", "products"], "label", 1);
    step["attributes"]["tag"] = json!({"role": "required", "type": "string"});
    register(&app, &step).await;
    start(
        &app,
        json!({
            "id": "cp", "goals": ["label"],
            "init": {"regions": [["US", "EU", "APAC"]], "products": [["A", "B"]], "tag": ["t"]}
        }),
    )
    .await;
    let flow = app.wait_for_flow("cp").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let bodies: Vec<Value> = svc.requests().into_iter().map(|r| r.body).collect();
    // Nested loops, each array in element order. Attributes are keyed by
    // name, so the outer loop is the name that sorts first (`products`);
    // Argyll's guide lists `regions` outer, its declaration order, which
    // Argyll's engine does not keep either (it ranges over a Go map).
    let product = [
        ("US", "A"),
        ("EU", "A"),
        ("APAC", "A"),
        ("US", "B"),
        ("EU", "B"),
        ("APAC", "B"),
    ];
    let expected: Vec<Value> = product
        .iter()
        .map(|(r, p)| json!({"regions": r, "products": p, "tag": "t"}))
        .collect();
    assert_eq!(
        bodies, expected,
        "3 x 2 items, called in product order (parallelism 1)"
    );
    let aggregate: Vec<Value> = product
        .iter()
        .map(|(r, p)| json!({"regions": r, "products": p, "label": format!("{r}-{p}")}))
        .collect();
    assert_eq!(
        flow["attributes"]["label"][0]["value"],
        json!(aggregate),
        "each element carries both for_each inputs, not the plain input"
    );
    assert_eq!(work_items(&flow, "label").len(), 6);
}

async fn an_empty_for_each_array_completes_the_step_with_an_empty_aggregate(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|r, _| {
        let n = r.body["doubled"].as_array().map_or(-1, |a| a.len() as i64);
        json_reply(200, json!({"count": n}))
    })
    .await;
    let mut double = for_each_step("double", &svc.url("/double"), &["items"], "doubled", 3);
    double["attributes"]["doubled"]["type"] = json!("array");
    register(&app, &double).await;
    let mut count = sync_step("count", &svc.url("/count"), &["doubled"], &["count"]);
    count["attributes"]["doubled"]["type"] = json!("array");
    count["attributes"]["count"]["type"] = json!("number");
    register(&app, &count).await;
    start(
        &app,
        json!({"id": "empty", "goals": ["count"], "init": {"items": [[]]}}),
    )
    .await;
    let flow = app.wait_for_flow("empty").await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["double"]["status"], "completed", "{flow}");
    assert_eq!(flow["executions"]["double"]["outputs"], json!({"doubled": []}));
    assert_eq!(flow["attributes"]["doubled"][0]["value"], json!([]));
    assert!(work_items(&flow, "double").is_empty(), "{flow}");
    let paths: Vec<String> = svc.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, ["/count"], "no element, no call");
    assert_eq!(flow["attributes"]["count"][0]["value"], 0);
    let evs = events(&app, "empty").await;
    assert_eq!(
        of_type(&evs, "work_started").len(),
        1,
        "only count: {:?}",
        types(&evs)
    );
    assert_deactivated_last(&app, "empty", "completed").await;
}

async fn a_for_each_over_more_than_ten_thousand_items_is_refused_at_flow_start(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = StepServer::start(|_, _| json_reply(200, json!({"out": 1}))).await;
    register(
        &app,
        &for_each_step("one", &svc.url("/one"), &["items"], "out", 10),
    )
    .await;
    register(
        &app,
        &for_each_step("two", &svc.url("/two"), &["xs", "ys"], "pair", 10),
    )
    .await;
    let many: Vec<i64> = (0..10_001).collect();
    let r = app
        .start_flow(&json!({"id": "big", "goals": ["one"], "init": {"items": [many]}}))
        .await;
    assert_problem(&r, 400);
    let detail = r.body["detail"].as_str().unwrap_or("");
    assert!(detail.contains("items"), "names the attribute: {detail}");
    assert!(detail.contains("10001"), "says how many: {detail}");
    assert_eq!(app.get("/engine/flow/big").await.status, StatusCode::NOT_FOUND);

    // 101 x 100 elements of two attributes: 10,100 items.
    let xs: Vec<i64> = (0..101).collect();
    let ys: Vec<i64> = (0..100).collect();
    let r = app
        .start_flow(&json!({"id": "big2", "goals": ["two"], "init": {"xs": [xs], "ys": [ys]}}))
        .await;
    assert_problem(&r, 400);
    let detail = r.body["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("xs") && detail.contains("ys") && detail.contains("10100"),
        "{detail}"
    );
    assert_eq!(app.get("/engine/flow/big2").await.status, StatusCode::NOT_FOUND);
    assert!(svc.requests().is_empty());
}
