//! Compensation, a saga that unwinds (examples/saga/README.md): a travel
//! agent books each part of a trip in turn; when one cannot be booked, the
//! step fails and Tartan cancels the bookings already made, through the
//! step's `http.compensate` URL.
//!
//! `cargo run --example saga` serves on 127.0.0.1:8081 (or `STEPS_ADDR`):
//! - `POST /book`    `{"part": "hotel"}` -> `{"booking": "hotel-1a2b3c4d"}`;
//!   a `car` is never available: `409` "no cars left", a permanent failure
//! - `POST /cancel/{booking}` cancels one booking
//! - `GET /bookings` the bookings still held

#[path = "../kit/mod.rs"]
mod kit;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Clone, Default)]
pub struct Bookings(Arc<Mutex<BTreeSet<String>>>);

impl Bookings {
    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub fn app() -> Router {
    Router::new()
        .route("/book", post(book))
        .route("/cancel/{booking}", post(cancel))
        .route("/bookings", get(bookings))
        .with_state(Bookings::default())
}

async fn book(State(bookings): State<Bookings>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let part = body["part"].as_str().unwrap_or_default().to_string();
    if part == "car" {
        return kit::problem(StatusCode::CONFLICT, "no cars left");
    }
    // One booking per work item, whatever the retries: keyed by its token.
    let token = kit::receipt_token(&headers);
    let booking = format!("{part}-{}", &token[..token.len().min(8)]);
    bookings.held().insert(booking.clone());
    println!("booked {booking}");
    Json(json!({ "booking": booking })).into_response()
}

async fn cancel(State(bookings): State<Bookings>, Path(booking): Path<String>) -> Response {
    // Cancelling twice is no error: a compensation may be retried.
    bookings.held().remove(&booking);
    println!("cancelled {booking}");
    Json(json!({ "cancelled": booking })).into_response()
}

async fn bookings(State(bookings): State<Bookings>) -> Json<Value> {
    Json(json!({ "held": *bookings.held() }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("saga", app()).await
}
