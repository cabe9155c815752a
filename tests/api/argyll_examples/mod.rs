//! Argyll's own walkthroughs, run against Tartan as Argyll's documents write
//! them: the step registration and flow starts of `docs/quickstart.md` and
//! `examples/README.md` of kode4food/argyll, and the registrations its
//! example step services send (copied under `data/`; `data/README.md` gives
//! the origin of every file). The example services are stood in for by one
//! HTTP server on 127.0.0.1:0 that answers, path by path, as their source
//! does (`examples/*/main.go`, `examples/payment-processor/main.py`); the
//! registrations' `http://localhost:8081` (the SDKs' default step host) is
//! replaced by its address. Each flow must end as Argyll ends it.
//!
//! What the stand-ins leave out of the services, and why:
//!
//! - **Sleeps.** Every service sleeps 5 to 18 s to look busy; the answers
//!   do not depend on it, so the stand-ins answer at once (the payment's
//!   webhook follows its `200` after 50 ms, still after the answer).
//! - **Randomness.** order-creator fails half its calls with a `503` (a
//!   transient error, retried); its stand-in fails the first call of every
//!   work item so and answers the retry. payment-processor succeeds or
//!   declines at random; its stand-in is told which calls to decline.
//!   Ids and timestamps (`ORDER-<unix>`, `RES-<nanos>`, `PAY-<unix>`) are
//!   made as the services make them and not compared.
//!
//! Where Argyll's README and its services disagree, the services decide: they
//! are what Argyll runs. The README was written with the first examples
//! (2025-11-08); order-creator gained its predicate `$.product_info.name ==
//! "Professional Laptop"` later (Argyll commit 4582004, 2026-02-17), so with
//! today's registrations every order but a laptop is skipped, and what needs
//! an order fails. The `as_registered` tests check what Argyll does with the
//! registrations as they are; the `without_the_predicate` tests register
//! order-creator without its predicate, as the README assumed, and check the
//! README's expected results. Each difference from the README's text is
//! noted where it is asserted. None is a difference between Tartan and
//! Argyll.
//!
//! Left out: `docker compose up` (both documents' first step) and the web
//! UI; `curl http://localhost:8080/engine/flow[/...]` ("Inspect flow
//! state", "Monitoring Flows") is what `TestApp::flow` does.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};
use tartan_testkit::both_backends;

use crate::helpers::{json_reply, spawn_app, Backend, Received, StepServer, TestApp};

mod services;
use services::*;

both_backends!(
    quickstart_hello_flow_completes_with_its_greeting,
    resolver_flows_complete_with_what_they_look_up,
    script_step_flows_end_as_their_scripts_compute,
    as_registered_order_flows_end_as_the_predicate_decides,
    as_registered_the_payment_flow_completes_by_webhook,
    as_registered_a_declined_payment_fails_its_flow,
    as_registered_the_complete_order_flow_runs_its_six_steps,
    as_registered_the_readme_loops_fail_for_want_of_an_order,
    without_the_predicate_order_flows_end_as_the_readme_says,
    without_the_predicate_the_readme_loops_end_as_it_says,
);

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/api/argyll_examples/data");

/// The step host of the registrations: the SDKs' default (`localhost`,
/// `STEP_PORT` 8081), replaced by the stand-ins' address.
const STEP_HOST: &str = "http://localhost:8081";

/// The example step services, in the order `docker compose up` starts them
/// (`simple-step` registers the three script steps).
const EXAMPLE_STEPS: [&str; 9] = [
    "text-formatter",
    "price-calculator",
    "eligibility-checker",
    "user-resolver",
    "inventory-resolver",
    "order-creator",
    "payment-processor",
    "stock-reservation",
    "notification-sender",
];

/// A data file's JSON, its step host replaced by `host`.
fn data(file: &str, host: &str) -> Value {
    let path = format!("{DATA}/{file}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text.replace(STEP_HOST, host)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A flow start of examples/README.md.
fn readme_flow(name: &str) -> Value {
    data(&format!("examples-readme/flow-{name}.json"), STEP_HOST)
}

/// A flow start of a README loop (`for i in {1..n}`), for one `i`.
fn looped_flow(name: &str, i: usize) -> Value {
    let path = format!("{DATA}/examples-readme/flow-{name}.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text.replace("$i", &i.to_string())).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn start(app: &TestApp, flow: &Value) -> String {
    let r = app.start_flow(flow).await;
    assert_eq!(r.status, StatusCode::CREATED, "{flow}: {:?}", r.body);
    flow["id"].as_str().unwrap_or_default().to_string()
}

/// The first value of a flow attribute.
fn value<'a>(flow: &'a Value, name: &str) -> &'a Value {
    &flow["attributes"][name][0]["value"]
}

fn step<'a>(flow: &'a Value, id: &str) -> &'a Value {
    &flow["executions"][id]
}

fn error_of(flow: &Value) -> &str {
    flow["error"].as_str().unwrap_or_default()
}

fn assert_close(actual: &Value, expected: f64, what: &str) {
    let got = actual.as_f64().unwrap_or(f64::NAN);
    assert!(
        (got - expected).abs() < 1e-9,
        "{what}: {actual} is not {expected}"
    );
}

/// An amount as the README prints it (`107.16` for $107.16).
fn dollars(v: &Value) -> String {
    format!("{:.2}", v.as_f64().unwrap_or(f64::NAN))
}

// ---------------------------------------------------------------------------
// docs/quickstart.md
// ---------------------------------------------------------------------------

/// Quickstart, steps 2 to 4: "`status`: should become `completed`",
/// "`attributes`: should include `greeting: "Argyll"`".
async fn quickstart_hello_flow_completes_with_its_greeting(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let r = app
        .register(&data("quickstart/step-hello-script.json", STEP_HOST))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    let id = start(&app, &data("quickstart/flow-hello-flow.json", STEP_HOST)).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(value(&flow, "greeting"), "Argyll", "{flow}");
}

// ---------------------------------------------------------------------------
// examples/README.md
// ---------------------------------------------------------------------------

/// "1. user-resolver" and "2. inventory-resolver": each looks up the id it
/// is given; the headphones "complete with out-of-stock product info".
async fn resolver_flows_complete_with_what_they_look_up(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    let id = start(&app, &readme_flow("user-lookup-test")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(value(&flow, "user_info"), &user("user-456").unwrap(), "{flow}");
    assert_eq!(value(&flow, "user_info")["name"], "Bob Smith");

    let id = start(&app, &readme_flow("inventory-check")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let info = value(&flow, "product_info");
    assert_eq!(info, &product("prod-headphones").unwrap(), "{flow}");
    assert_eq!(info["available_stock"], 0, "out of stock: {info}");

    // Lazy evaluation: only the goal ran (no other service was called; a
    // health round, which a slow machine lets fall inside the test, checks
    // `/health`, which is no service).
    let paths: BTreeSet<String> = svc
        .server
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .filter(|p| p != "/health")
        .collect();
    assert_eq!(
        paths,
        BTreeSet::from(["/inventory-resolver".to_string(), "/user-resolver".to_string()])
    );
}

/// "7. simple-step": text-formatter, price-calculator and
/// eligibility-checker, the scripts of examples/simple-step/main.go.
async fn script_step_flows_end_as_their_scripts_compute(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    // The README's "Expected Output" is `"[ALICE] Welcome to Argyll!"`, which
    // the registered script `(str "[" name "] " text)` cannot produce: it
    // puts the whole name, as written. Argyll answers this.
    let id = start(&app, &readme_flow("format-text")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(
        value(&flow, "formatted_text"),
        "[Alice Johnson] Welcome to Argyll!",
        "{flow}"
    );

    // "Subtotal $89.97, tax $7.20, shipping $9.99 (< 5 qty), total $107.16".
    let id = start(&app, &readme_flow("calc-price")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    for (name, printed, exact) in [
        ("subtotal", "89.97", 3.0 * 29.99),
        ("tax", "7.20", 3.0 * 29.99 * 0.08),
        ("shipping", "9.99", 9.99),
        ("total", "107.16", 3.0 * 29.99 + 3.0 * 29.99 * 0.08 + 9.99),
    ] {
        assert_eq!(dollars(value(&flow, name)), printed, "{name}: {flow}");
        assert_close(value(&flow, name), exact, name);
    }

    // "eligible: true, reason: "all criteria met", risk_level: "medium"".
    let id = start(&app, &readme_flow("check-eligible-pass")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(value(&flow, "eligible"), true, "{flow}");
    assert_eq!(value(&flow, "reason"), "all criteria met", "{flow}");
    assert_eq!(value(&flow, "risk_level"), "medium", "{flow}");

    // "eligible: false, reason: "age below minimum (18)"" (a credit score
    // of 700 is "medium" risk, which the README does not print).
    let id = start(&app, &readme_flow("check-eligible-fail")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(value(&flow, "eligible"), false, "{flow}");
    assert_eq!(value(&flow, "reason"), "age below minimum (18)", "{flow}");
    assert_eq!(value(&flow, "risk_level"), "medium", "{flow}");

    // A health round a slow machine lets fall inside the test checks
    // `/health`, which is no service.
    let called: Vec<String> = svc
        .server
        .requests()
        .into_iter()
        .map(|r| r.path)
        .filter(|p| p != "/health")
        .collect();
    assert!(called.is_empty(), "script steps call no service: {called:?}");
}

/// The order flows with order-creator as registered: its predicate lets only
/// the laptop through. A goal skipped by its predicate completes its flow
/// (Argyll's `StepComplete` counts `skipped`); a step that needs the
/// skipped step's `order` fails with "required input no longer available"
/// (Argyll's `checkUnreachable`), and so does its flow.
async fn as_registered_order_flows_end_as_the_predicate_decides(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    // "Example Flow (Success)": it completes, but with no order: a mouse is
    // not the laptop, so order-creator is skipped.
    let id = start(&app, &readme_flow("create-order-success")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "skipped", "{flow}");
    assert_eq!(step(&flow, "order-creator")["reason"], "predicate returned false");
    assert_eq!(step(&flow, "user-resolver")["status"], "completed");
    assert_eq!(step(&flow, "inventory-resolver")["status"], "completed");
    assert!(flow["attributes"].get("order").is_none(), "{flow}");
    assert_eq!(svc.calls("/order-creator", &id), 0);

    // "Example Flow (Credit Limit Exceeded)": "Flow will fail - Bob
    // (standard account, $1000 limit) cannot afford 2 laptops". A 409 is
    // not retried.
    let id = start(&app, &readme_flow("create-order-credit-fail")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("order total $2820.48 exceeds credit limit $1000.00"),
        "{flow}"
    );
    assert_eq!(svc.calls("/order-creator", &id), 1);

    // "Test Credit Limit Enforcement": "Flow will fail at order-creator with
    // "order total exceeds credit limit"" (one laptop: $1413.99).
    let id = start(&app, &readme_flow("credit-fail")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("order total $1413.99 exceeds credit limit $1000.00"),
        "{flow}"
    );

    // "Example Flow (Out of Stock)": the README says "Flow will fail -
    // headphones are out of stock"; with the predicate, order-creator is
    // skipped before its stock check, and the flow completes.
    let id = start(&app, &readme_flow("create-order-oos")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "skipped", "{flow}");
    assert_eq!(svc.calls("/order-creator", &id), 0);

    // "4. stock-reservation", "Example Flow" (3 mice): no order, so the
    // reservation cannot run and the flow fails.
    let id = start(&app, &readme_flow("reserve-stock")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "skipped", "{flow}");
    assert_eq!(step(&flow, "stock-reservation")["status"], "failed", "{flow}");
    assert_eq!(
        step(&flow, "stock-reservation")["error"],
        "required input no longer available"
    );
    assert_eq!(svc.all_calls("/stock-reservation"), 0);

    // "5. notification-sender", "Example Flow": the README expects "SMS
    // notification to Bob + backup email"; a keyboard is not the laptop,
    // so there is no order, no payment, no reservation: the flow fails
    // and nobody is notified.
    let id = start(&app, &readme_flow("notify-user")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "skipped", "{flow}");
    assert!(
        error_of(&flow).contains("required input no longer available"),
        "{flow}"
    );
    assert_eq!(svc.all_calls("/payment-processor"), 0);
    assert_eq!(svc.all_calls("/notification-sender"), 0);
    assert!(svc.notified().is_empty());
}

/// "6. payment-processor", "Example Flow": a laptop for Alice, so the order
/// is made (after order-creator's transient 503 is retried) and "Payment
/// will complete asynchronously", by webhook.
async fn as_registered_the_payment_flow_completes_by_webhook(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    let id = start(&app, &readme_flow("process-payment")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let order = value(&flow, "order");
    assert_eq!(order["quantity"], 1, "the default quantity: {order}");
    // $1299.99 + shipping 2.5 kg ($10.00) + 8% tax ($104.00).
    assert_close(
        &order["grand_total"],
        1299.99 + 10.0 + 1299.99 * 0.08,
        "grand_total",
    );
    let payment = value(&flow, "payment_result");
    assert_eq!(payment["status"], "completed", "{flow}");
    assert_eq!(payment["order_id"], order["id"]);
    assert_eq!(payment["amount"], order["grand_total"]);
    assert_eq!(svc.calls("/order-creator", &id), 2, "a 503, then the order");
    assert_eq!(svc.calls("/payment-processor", &id), 1);
    assert_eq!(svc.webhook_answers(1).await, [200]);
}

/// The same flow with the payment declined ("Run multiple times to see
/// both success and failure cases"): the service's `fail` is a 422
/// problem, a failure for good, and the flow fails with its reason.
async fn as_registered_a_declined_payment_fails_its_flow(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(|_| Some("card declined")).await;
    svc.register(&app, Predicate::Kept).await;

    let id = start(&app, &readme_flow("process-payment")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "payment-processor")["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("payment failed: card declined"),
        "{flow}"
    );
    assert!(flow["attributes"].get("payment_result").is_none(), "{flow}");
    assert_eq!(svc.calls("/payment-processor", &id), 1, "not retried");
    assert_eq!(svc.webhook_answers(1).await, [200]);
}

/// "Complete E-Commerce Flow": a laptop for Alice runs the README's six
/// steps and no other, and completes; the reservation takes one laptop
/// from stock. The README's step 6 says "Sends email to Alice + backup
/// email"; the service sends the backup only when the preferred channel is
/// not email, and Alice prefers email: one email.
async fn as_registered_the_complete_order_flow_runs_its_six_steps(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    let id = start(&app, &readme_flow("complete-order-flow")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let plan = [
        "user-resolver",
        "inventory-resolver",
        "order-creator",
        "stock-reservation",
        "payment-processor",
        "notification-sender",
    ];
    let ran: BTreeSet<&str> = flow["executions"]
        .as_object()
        .map(|e| e.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(ran, BTreeSet::from(plan), "{flow}");
    for s in plan {
        assert_eq!(step(&flow, s)["status"], "completed", "{s}: {flow}");
    }
    let reservation = value(&flow, "reservation");
    assert_eq!(reservation["product_id"], "prod-laptop", "{flow}");
    assert_eq!(reservation["quantity"], 1);
    assert_eq!(reservation["status"], "reserved");
    assert_eq!(reservation["order_id"], value(&flow, "order")["id"]);
    assert_eq!(value(&flow, "payment_result")["status"], "completed");
    assert_eq!(svc.stock("prod-laptop"), 49);
    assert_eq!(svc.notified(), [("user-123".to_string(), vec!["email"])]);
    for path in ["/stock-reservation", "/payment-processor", "/notification-sender"] {
        assert_eq!(svc.calls(path, &id), 1, "{path}");
    }
}

/// "Test Payment Failure Recovery" (10 × a mouse's payment) and "Test Stock
/// Depletion" (35 × one monitor) with order-creator as registered: neither
/// a mouse nor a monitor is the laptop, so no order is made and every flow
/// fails before payment or reservation. (The README expects ~10% payment
/// failures, and 30 reservations before "insufficient stock".)
async fn as_registered_the_readme_loops_fail_for_want_of_an_order(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Kept).await;

    let mut ids = Vec::new();
    for i in 1..=10 {
        ids.push((start(&app, &looped_flow("order-i", i)).await, "payment-processor"));
    }
    for i in 1..=35 {
        ids.push((
            start(&app, &looped_flow("reserve-i", i)).await,
            "stock-reservation",
        ));
    }
    for (id, goal) in &ids {
        let flow = app.wait_for_flow(id).await;
        assert_eq!(flow["status"], "failed", "{flow}");
        assert_eq!(step(&flow, "order-creator")["status"], "skipped", "{flow}");
        assert_eq!(step(&flow, goal)["status"], "failed", "{flow}");
        assert_eq!(step(&flow, goal)["error"], "required input no longer available");
    }
    for path in ["/order-creator", "/payment-processor", "/stock-reservation"] {
        assert_eq!(svc.all_calls(path), 0, "{path}");
    }
    assert_eq!(svc.stock("prod-monitor"), 30);
}

/// The order flows with order-creator registered without its predicate, as
/// when examples/README.md was written: each ends as the README says.
async fn without_the_predicate_order_flows_end_as_the_readme_says(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(never).await;
    svc.register(&app, Predicate::Dropped).await;

    // "Example Flow (Success)": 2 mice for Alice.
    let id = start(&app, &readme_flow("create-order-success")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let order = value(&flow, "order");
    assert_eq!(order["user_id"], "user-123", "{order}");
    assert_eq!(order["product_id"], "prod-mouse");
    assert_eq!(order["quantity"], 2);
    assert_eq!(order["status"], "pending_payment");
    assert_close(&order["unit_price"], 29.99, "unit_price");
    assert_close(&order["total_amount"], 29.99 * 2.0, "total_amount");
    assert_close(&order["shipping_cost"], 5.0, "shipping_cost");
    assert_close(&order["tax"], 29.99 * 2.0 * 0.08, "tax");
    assert_close(
        &order["grand_total"],
        29.99 * 2.0 + 5.0 + 29.99 * 2.0 * 0.08,
        "grand_total",
    );
    assert_eq!(svc.calls("/order-creator", &id), 2, "a 503, then the order");

    // "Example Flow (Credit Limit Exceeded)": "Flow will fail".
    let id = start(&app, &readme_flow("create-order-credit-fail")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("order total $2820.48 exceeds credit limit $1000.00"),
        "{flow}"
    );

    // "Example Flow (Out of Stock)": "Flow will fail - headphones are out of
    // stock" (a 409, not retried).
    let id = start(&app, &readme_flow("create-order-oos")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert_eq!(step(&flow, "order-creator")["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("product Noise-Canceling Headphones is out of stock"),
        "{flow}"
    );
    assert_eq!(svc.calls("/order-creator", &id), 1);

    // "Test Credit Limit Enforcement": "Flow will fail at order-creator".
    let id = start(&app, &readme_flow("credit-fail")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "failed", "{flow}");
    assert!(
        error_of(&flow).contains("order total $1413.99 exceeds credit limit $1000.00"),
        "{flow}"
    );

    // "4. stock-reservation": 3 mice reserved, "Stock levels decrease with
    // each reservation".
    let id = start(&app, &readme_flow("reserve-stock")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    let reservation = value(&flow, "reservation");
    assert_eq!(reservation["product_id"], "prod-mouse", "{flow}");
    assert_eq!(reservation["quantity"], 3);
    assert_eq!(reservation["status"], "reserved");
    assert_eq!(svc.stock("prod-mouse"), 197);

    // "5. notification-sender": "SMS notification to Bob + backup email".
    let id = start(&app, &readme_flow("notify-user")).await;
    let flow = app.wait_for_flow(&id).await;
    assert_eq!(flow["status"], "completed", "{flow}");
    assert_eq!(step(&flow, "notification-sender")["status"], "completed");
    assert_eq!(
        svc.notified(),
        [("user-456".to_string(), vec!["sms", "email_backup"])]
    );
    assert_eq!(svc.stock("prod-keyboard"), 74);
}

/// "Test Payment Failure Recovery" and "Test Stock Depletion" without the
/// predicate. The README's "~10% will fail at payment processing": the
/// stand-in declines the tenth payment (the service itself declines half,
/// at random). "First 30 will succeed, remaining 5 will fail with
/// "insufficient stock"": the loop starts the flows without waiting, so
/// which 30 succeed is not fixed (in Argyll neither); 30 do, 5 fail.
async fn without_the_predicate_the_readme_loops_end_as_it_says(backend: Backend) {
    let Some(app) = spawn_app(backend).await else {
        return;
    };
    let svc = Examples::start(|n| (n % 10 == 9).then_some("insufficient funds")).await;
    svc.register(&app, Predicate::Dropped).await;

    let mut payments = Vec::new();
    for i in 1..=10 {
        payments.push(start(&app, &looped_flow("order-i", i)).await);
    }
    let mut reservations = Vec::new();
    for i in 1..=35 {
        reservations.push(start(&app, &looped_flow("reserve-i", i)).await);
    }

    let mut paid = 0;
    for id in &payments {
        let flow = app.wait_for_flow(id).await;
        if flow["status"] == "completed" {
            assert_eq!(value(&flow, "payment_result")["status"], "completed", "{flow}");
            paid += 1;
        } else {
            assert_eq!(flow["status"], "failed", "{flow}");
            assert_eq!(step(&flow, "payment-processor")["status"], "failed", "{flow}");
            assert!(
                error_of(&flow).contains("payment failed: insufficient funds"),
                "{flow}"
            );
        }
    }
    assert_eq!(paid, 9, "one payment in ten declined");

    let mut reserved = 0;
    for id in &reservations {
        let flow = app.wait_for_flow(id).await;
        if flow["status"] == "completed" {
            assert_eq!(
                value(&flow, "reservation")["product_id"],
                "prod-monitor",
                "{flow}"
            );
            reserved += 1;
        } else {
            assert_eq!(flow["status"], "failed", "{flow}");
            assert_eq!(step(&flow, "stock-reservation")["status"], "failed", "{flow}");
            assert!(
                error_of(&flow).contains("insufficient stock: requested 1, available 0"),
                "{flow}"
            );
        }
    }
    assert_eq!(reserved, 30, "30 monitors in stock");
    assert_eq!(svc.stock("prod-monitor"), 0);
    assert_eq!(svc.webhook_answers(10).await, [200; 10]);
}
