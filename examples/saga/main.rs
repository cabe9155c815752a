//! Compensation, a saga that unwinds (examples/saga/README.md): a travel
//! agent books each part of a trip in turn; when one cannot be booked, the
//! step fails and Tartan cancels the bookings already made, through the
//! step's `http.compensate` URL.
//!
//! `cargo run --example saga` serves on 127.0.0.1:8081 (or `STEPS_ADDR`):
//! - `POST /book`    `{"part": "hotel"}` -> `{"booking": "hotel-1a2b3c4d"}`;
//!   a `car` is never available: `409` "no cars left", a permanent failure
//! - `POST /cancel/{booking}` cancels one booking (the step's compensation)
//! - `GET /bookings` the bookings still held

#[path = "../kit/mod.rs"]
mod kit;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use tartan_step::{Ctx, Service, Step, StepError, Type};

#[derive(Clone, Default)]
pub struct Bookings(Arc<Mutex<BTreeSet<String>>>);

impl Bookings {
    fn held(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One work item's element of `part`.
#[derive(Deserialize)]
struct Part {
    #[serde(default)]
    part: String,
}

pub fn app() -> Router {
    let bookings = Bookings::default();
    let (booked, cancelled) = (bookings.clone(), bookings.clone());
    let book = Step::sync("book", move |input: Part, ctx: Ctx| {
        let booked = booked.clone();
        async move { book(&booked, input, &ctx) }
    });
    // The compensation's body is `{"input", "output"}`; the booking to
    // cancel is in its path, filled in by the engine from the output.
    let book = book
        .name("Book the trip")
        .for_each("part")
        .output("booking", Type::String)
        .compensate("/cancel/{booking}", move |_: Value, ctx: Ctx| {
            let cancelled = cancelled.clone();
            async move { cancel(&cancelled, &ctx) }
        });
    let held = Router::new().route("/bookings", get(held)).with_state(bookings);
    Service::new("saga").step(book).router().merge(held)
}

fn book(bookings: &Bookings, input: Part, ctx: &Ctx) -> Result<Value, StepError> {
    if input.part == "car" {
        return Err(StepError::status(StatusCode::CONFLICT, "no cars left"));
    }
    // One booking per work item, whatever the retries: keyed by its token.
    let token: String = ctx.receipt_token().unwrap_or("-").chars().take(8).collect();
    let booking = format!("{}-{token}", input.part);
    bookings.held().insert(booking.clone());
    println!("booked {booking}");
    Ok(json!({ "booking": booking }))
}

fn cancel(bookings: &Bookings, ctx: &Ctx) -> Result<Value, StepError> {
    let booking = ctx.param("booking").unwrap_or_default().to_string();
    // Cancelling twice is no error: a compensation may be retried.
    bookings.held().remove(&booking);
    println!("cancelled {booking}");
    Ok(json!({ "cancelled": booking }))
}

async fn held(State(bookings): State<Bookings>) -> Json<Value> {
    Json(json!({ "held": *bookings.held() }))
}

#[allow(dead_code)] // the docs' tests take `app` alone
#[tokio::main]
async fn main() -> std::io::Result<()> {
    kit::serve("saga", app()).await
}
