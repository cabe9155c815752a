//! The stand-ins for Argyll's example services (kode4food/argyll,
//! `examples/*`): one HTTP server answering each service's path as its code
//! does (the origin of each is in `data/README.md`).

use super::*;

// ---------------------------------------------------------------------------
// The stand-ins for Argyll's example step services
// ---------------------------------------------------------------------------

/// Which payment-processor calls (counted from 0) are declined, and why:
/// the service declines at random, with one of these reasons.
type Decline = fn(usize) -> Option<&'static str>;

pub(super) fn never(_: usize) -> Option<&'static str> {
    None
}

/// The services, one path each (`/<step id>`, as both SDKs serve a step).
pub(super) struct Examples {
    pub(super) server: StepServer,
    state: Arc<Shared>,
}

/// What the services keep between calls.
pub(super) struct Shared {
    /// stock-reservation's `stockLevels`.
    stock: Mutex<HashMap<String, i64>>,
    /// order-creator: the receipt tokens it has answered once.
    orders_seen: Mutex<HashSet<String>>,
    /// notification-sender: the user notified and the channels used.
    notified: Mutex<Vec<(String, Vec<&'static str>)>>,
    /// payment-processor: which calls it declines, and the engine's
    /// answers to its webhooks.
    decline: Decline,
    webhook_answers: Mutex<Vec<u16>>,
}

impl Examples {
    pub(super) async fn start(decline: Decline) -> Examples {
        let stock = [
            ("prod-laptop", 50),
            ("prod-mouse", 200),
            ("prod-keyboard", 75),
            ("prod-monitor", 30),
            ("prod-headphones", 0),
        ];
        let state = Arc::new(Shared {
            stock: Mutex::new(stock.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()),
            orders_seen: Mutex::default(),
            notified: Mutex::default(),
            decline,
            webhook_answers: Mutex::default(),
        });
        let shared = state.clone();
        let server = StepServer::start(move |r, n| match r.path.as_str() {
            "/user-resolver" => user_resolver(&r.body),
            "/inventory-resolver" => inventory_resolver(&r.body),
            "/order-creator" => order_creator(&shared, r),
            "/stock-reservation" => stock_reservation(&shared, &r.body),
            "/payment-processor" => payment_processor(&shared, r, n),
            "/notification-sender" => notification_sender(&shared, &r.body),
            // Each registration's `http.health_check`, as the SDKs' step
            // services answer it: without it a health round that falls
            // inside a test (a slow machine) defers every call of the step.
            "/health" => json_reply(200, serde_json::json!({"status": "ok"})),
            other => problem(404, &format!("no service at {other}")),
        })
        .await;
        Examples { server, state }
    }

    /// Register every example step, as `docker compose up` does; with
    /// `Predicate::Dropped`, order-creator without its predicate.
    pub(super) async fn register(&self, app: &TestApp, predicate: Predicate) {
        let host = self.server.url("");
        for id in EXAMPLE_STEPS {
            let mut step = data(&format!("example-steps/{id}.json"), &host);
            if id == "order-creator" && predicate == Predicate::Dropped {
                if let Some(fields) = step.as_object_mut() {
                    fields.remove("predicate");
                }
            }
            let r = app.register(&step).await;
            assert_eq!(r.status, StatusCode::CREATED, "{id}: {:?}", r.body);
        }
    }

    /// How many calls `path` had for the flow `flow`.
    pub(super) fn calls(&self, path: &str, flow: &str) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| {
                r.path == path && r.headers.get("argyll-flow-id").and_then(|v| v.to_str().ok()) == Some(flow)
            })
            .count()
    }

    /// How many calls `path` had in all.
    pub(super) fn all_calls(&self, path: &str) -> usize {
        self.server.requests().iter().filter(|r| r.path == path).count()
    }

    pub(super) fn stock(&self, product: &str) -> i64 {
        self.state.stock.lock().unwrap()[product]
    }

    pub(super) fn notified(&self) -> Vec<(String, Vec<&'static str>)> {
        self.state.notified.lock().unwrap().clone()
    }

    /// The engine's answers to the payment webhooks, once there are `n`.
    pub(super) async fn webhook_answers(&self, n: usize) -> Vec<u16> {
        crate::helpers::noted(&self.state.webhook_answers, n).await
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Predicate {
    /// order-creator as its service registers it.
    Kept,
    /// order-creator as it was when examples/README.md was written.
    Dropped,
}

/// The services' error answer (`writeProblem` in sdks/go-builder,
/// `_problem_response` in sdks/python): RFC 9457 problem JSON.
pub(super) fn problem(status: u16, detail: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "type": "about:blank",
        "title": code.canonical_reason().unwrap_or_default(),
        "status": status,
        "detail": detail,
    });
    (
        code,
        [("content-type", "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

pub(super) fn text<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn number(o: &Map<String, Value>, key: &str) -> f64 {
    o.get(key).and_then(Value::as_f64).unwrap_or_default()
}

pub(super) fn now_rfc3339(offset: chrono::Duration) -> String {
    (chrono::Utc::now() + offset).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// examples/user-resolver/main.go, `userDatabase`.
pub(super) fn user(id: &str) -> Option<Value> {
    let (name, email, account_type, credit_limit, member_since, preferred) = match id {
        "user-123" => (
            "Alice Johnson",
            "alice@example.com",
            "premium",
            5000.0,
            "2020-01-15",
            "email",
        ),
        "user-456" => (
            "Bob Smith",
            "bob@example.com",
            "standard",
            1000.0,
            "2023-06-01",
            "sms",
        ),
        "user-789" => (
            "Carol Williams",
            "carol@example.com",
            "premium",
            10000.0,
            "2019-03-20",
            "webhook",
        ),
        _ => return None,
    };
    Some(json!({
        "id": id, "name": name, "email": email, "account_type": account_type,
        "credit_limit": credit_limit, "member_since": member_since, "preferred_method": preferred,
    }))
}

/// examples/inventory-resolver/main.go, `inventoryDB`.
pub(super) fn product(id: &str) -> Option<Value> {
    let (name, price, available, reserved, min, max, category, weight) = match id {
        "prod-laptop" => ("Professional Laptop", 1299.99, 50, 5, 1, 10, "electronics", 2.5),
        "prod-mouse" => ("Wireless Mouse", 29.99, 200, 10, 1, 50, "accessories", 0.2),
        "prod-keyboard" => ("Mechanical Keyboard", 149.99, 75, 8, 1, 25, "accessories", 1.2),
        "prod-monitor" => ("4K Monitor 27\"", 449.99, 30, 3, 1, 5, "electronics", 6.5),
        "prod-headphones" => (
            "Noise-Canceling Headphones",
            249.99,
            0,
            0,
            1,
            10,
            "accessories",
            0.4,
        ),
        _ => return None,
    };
    Some(json!({
        "product_id": id, "name": name, "price": price, "available_stock": available,
        "reserved_stock": reserved, "minimum_order_qty": min, "maximum_order_qty": max,
        "category": category, "shipping_weight_kg": weight,
    }))
}

/// examples/user-resolver/main.go, `handle`.
pub(super) fn user_resolver(args: &Value) -> Response {
    let id = args["user_id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("user-123");
    match user(id) {
        Some(info) => json_reply(200, json!({"user_info": info})),
        None => problem(404, &format!("user not found: {id}")),
    }
}

/// examples/inventory-resolver/main.go, `handle`.
pub(super) fn inventory_resolver(args: &Value) -> Response {
    let id = args["product_id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .unwrap_or("prod-laptop");
    match product(id) {
        Some(info) => json_reply(200, json!({"product_info": info})),
        None => problem(404, &format!("product not found: {id}")),
    }
}

/// examples/order-creator/main.go, `calculateShipping`.
pub(super) fn shipping(weight_kg: f64, quantity: f64) -> f64 {
    let total_weight = weight_kg * quantity;
    let base_rate = 5.0;
    if total_weight < 1.0 {
        base_rate
    } else if total_weight < 5.0 {
        base_rate + total_weight * 2.0
    } else {
        base_rate + total_weight * 1.5
    }
}

/// examples/order-creator/main.go, `handle`: the checks in its order, then
/// its transient failure (the first call of each work item), then the order.
pub(super) fn order_creator(state: &Shared, r: &Received) -> Response {
    let Some(user) = r.body["user_info"].as_object() else {
        return problem(400, "user_info must be an object");
    };
    let Some(product) = r.body["product_info"].as_object() else {
        return problem(400, "product_info must be an object");
    };
    let (user_id, account_type) = (text(user, "id"), text(user, "account_type"));
    let credit_limit = number(user, "credit_limit");
    let (product_id, product_name) = (text(product, "product_id"), text(product, "name"));
    let price = number(product, "price");
    let available = number(product, "available_stock");
    let min = number(product, "minimum_order_qty") as i64;
    let max = number(product, "maximum_order_qty") as i64;
    let weight = number(product, "shipping_weight_kg");
    let quantity = r.body["quantity"].as_f64().map_or(1, |q| q as i64);

    if available <= 0.0 {
        return problem(409, &format!("product {product_name} is out of stock"));
    }
    if quantity < min {
        return problem(
            400,
            &format!("quantity {quantity} below minimum order quantity {min}"),
        );
    }
    if quantity > max {
        return problem(
            400,
            &format!("quantity {quantity} exceeds maximum order quantity {max}"),
        );
    }
    if quantity as f64 > available {
        return problem(
            409,
            &format!(
                "insufficient stock: requested {quantity}, available {}",
                available as i64
            ),
        );
    }
    let total_amount = price * quantity as f64;
    let shipping_cost = shipping(weight, quantity as f64);
    let tax = total_amount * 0.08;
    let grand_total = total_amount + shipping_cost + tax;
    if account_type == "standard" && grand_total > credit_limit {
        return problem(
            409,
            &format!("order total ${grand_total:.2} exceeds credit limit ${credit_limit:.2}"),
        );
    }

    let token = r
        .headers
        .get("argyll-receipt-token")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let first = {
        let mut seen = state.orders_seen.lock().unwrap();
        seen.insert(token).then_some(seen.len())
    };
    if let Some(n) = first {
        let transient = [
            "database connection timeout",
            "inventory service unavailable",
            "rate limit exceeded",
            "network timeout",
        ];
        return problem(503, transient[n % transient.len()]);
    }

    json_reply(
        200,
        json!({"order": {
            "id": format!("ORDER-{}", chrono::Utc::now().timestamp()),
            "user_id": user_id,
            "product_id": product_id,
            "quantity": quantity,
            "unit_price": price,
            "total_amount": total_amount,
            "shipping_cost": shipping_cost,
            "tax": tax,
            "grand_total": grand_total,
            "status": "pending_payment",
            "payment_method": "credit",
            "shipping_method": "standard",
            "created_at": now_rfc3339(chrono::Duration::zero()),
        }}),
    )
}

/// examples/stock-reservation/main.go, `handle`: stock shared by every call.
pub(super) fn stock_reservation(state: &Shared, args: &Value) -> Response {
    let Some(order) = args["order"].as_object() else {
        return problem(400, "order must be an object");
    };
    let (order_id, product_id) = (text(order, "id"), text(order, "product_id"));
    let quantity = number(order, "quantity") as i64;
    let mut stock = state.stock.lock().unwrap();
    let Some(current) = stock.get(product_id).copied() else {
        return problem(404, &format!("product {product_id} not found in stock system"));
    };
    if current < quantity {
        return problem(
            409,
            &format!("insufficient stock: requested {quantity}, available {current}"),
        );
    }
    stock.insert(product_id.to_string(), current - quantity);
    let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
    json_reply(
        200,
        json!({"reservation": {
            "reservation_id": format!("RES-{nanos}"),
            "order_id": order_id,
            "product_id": product_id,
            "quantity": quantity,
            "status": "reserved",
            "reserved_at": now_rfc3339(chrono::Duration::zero()),
            "expires_at": now_rfc3339(chrono::Duration::minutes(30)),
        }}),
    )
}

/// examples/notification-sender/main.go, `handle`: the preferred channel,
/// plus a backup email unless that was email; no outputs.
pub(super) fn notification_sender(state: &Shared, args: &Value) -> Response {
    if !args["payment_result"].is_object() {
        return problem(400, "payment_result must be an object");
    }
    if !args["reservation"].is_object() {
        return problem(400, "reservation must be an object");
    }
    let Some(user) = args["user_info"].as_object() else {
        return problem(400, "user_info must be an object");
    };
    let preferred = text(user, "preferred_method");
    let mut channels = vec![match preferred {
        "sms" => "sms",
        "webhook" => "webhook",
        _ => "email",
    }];
    if preferred != "email" {
        channels.push("email_backup");
    }
    state
        .notified
        .lock()
        .unwrap()
        .push((text(user, "id").to_string(), channels));
    json_reply(200, json!({}))
}

/// examples/payment-processor/main.py, `handle_payment`: accepts at once,
/// then posts the result to the `Argyll-Webhook-URL` (`AsyncContext.success`,
/// or `fail`: a 422 problem).
pub(super) fn payment_processor(state: &Arc<Shared>, r: &Received, n: usize) -> Response {
    let Some(order) = r.body["order"].as_object() else {
        return problem(400, "order must be an object");
    };
    let Some(webhook) = r
        .headers
        .get("argyll-webhook-url")
        .and_then(|v| v.to_str().ok())
        .map(String::from)
    else {
        return problem(400, "Argyll-Webhook-URL header not found");
    };
    let order_id = text(order, "id").to_string();
    let amount = order.get("grand_total").cloned().unwrap_or(json!(0.0));
    let declined = (state.decline)(n);
    let state = state.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (content_type, body) = match declined {
            None => (
                "application/json",
                json!({"payment_result": {
                    "order_id": order_id,
                    "amount": amount,
                    "status": "completed",
                    "payment_id": format!("PAY-{}", chrono::Utc::now().timestamp()),
                    "processed_at": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
                }}),
            ),
            Some(reason) => (
                "application/problem+json",
                json!({
                    "type": "about:blank",
                    "title": "Unprocessable Entity",
                    "status": 422,
                    "detail": format!("payment failed: {reason}"),
                }),
            ),
        };
        let answer = reqwest::Client::new()
            .post(&webhook)
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .map_or(0, |resp| resp.status().as_u16());
        state.webhook_answers.lock().unwrap().push(answer);
    });
    json_reply(200, json!({}))
}
