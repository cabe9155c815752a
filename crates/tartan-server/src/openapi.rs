//! The OpenAPI 3.1 document, `GET /openapi.json` (docs/api.md): generated
//! from the handlers' `#[utoipa::path]` annotations and the types they
//! answer with, so the document is the code; the route table lists each
//! handler once, for the router and the document alike (`routes::api`).
//! Here: what the document says of the API as a whole, and what every
//! route shares (bearer tokens, the refusals of the security layers),
//! added once by [`Shared`] rather than repeated on each handler.

use axum::http::Method;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use crate::error::Problem;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tartan",
        description = "HTTP step orchestration: register steps, start flows towards goal steps, \
                       watch them run. Argyll's REST API and step protocol, and more (docs/api.md).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    components(schemas(Problem)),
    security(("bearer" = [])),
    tags(
        (name = "health", description = "Liveness, readiness, metrics and this document"),
        (name = "catalog", description = "The registered steps and their attribute graph"),
        (name = "cluster", description = "The engines on the database and the health of the steps"),
        (name = "steps", description = "Register, read, update and remove steps"),
        (name = "flows", description = "Plan, start, read, query and cancel flows"),
        (name = "bulk", description = "Retry or cancel many flows at once, as a background job"),
        (name = "lanes", description = "Limits calls share across flows and engines: their state, pause and resume"),
        (name = "schedules", description = "Flows started on a clock: cron, every or at, exactly once across engines"),
        (name = "work", description = "Work items: one call of a step and its retries"),
        (name = "webhooks", description = "Where async steps deliver results (signed URLs)"),
        (name = "ui", description = "The dashboard's files: pages that read this API with the user's token"),
    ),
)]
pub struct ApiDoc;

/// The document with what every route shares added: the bearer scheme
/// and the refusals of the layers in front of the handlers. Run once the
/// routes' operations are in (`routes::document`).
pub(crate) fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    Shared.modify(&mut doc);
    doc
}

/// What the layers in front of every route add (docs/security.md).
struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "TARTAN_API_TOKEN grants every route, TARTAN_READ_TOKEN the reads; \
                         without tokens configured none is needed (docs/security.md)",
                    ))
                    .build(),
            ),
        );
        for (path, item) in doc.paths.paths.iter_mut() {
            let methods = [
                (Method::GET, &mut item.get),
                (Method::POST, &mut item.post),
                (Method::PUT, &mut item.put),
                (Method::DELETE, &mut item.delete),
            ];
            for (method, operation) in methods {
                if let Some(operation) = operation {
                    refusals(path, &method, operation);
                }
            }
        }
    }
}

/// The refusals an operation can meet before its handler runs.
fn refusals(path: &str, method: &Method, operation: &mut Operation) {
    // `security(())` on a handler: a route open without a token.
    let public = operation
        .security
        .as_ref()
        .is_some_and(|s| s.iter().all(|r| *r == SecurityRequirement::default()));
    // Every route: a Host the server does not answer to (DNS rebinding).
    const HOST: &str = "The request names a host this server does not answer to (TARTAN_ALLOWED_HOSTS)";
    if !public {
        add(operation, 401, "No token, or an unknown one");
        if !crate::security::is_read(method, path) {
            add(
                operation,
                403,
                &format!("A read token may not change anything; or: {HOST}"),
            );
        }
    }
    add(operation, 403, HOST);
    // Anything that reads or writes the database.
    if !matches!(path, "/health" | "/metrics" | "/openapi.json") {
        add(
            operation,
            503,
            "The database is unavailable, or the engine is stopping or overloaded; see `Retry-After`",
        );
    }
    if operation.request_body.is_some() {
        add(
            operation,
            400,
            "The body is not JSON, or a field has the wrong type",
        );
        add(
            operation,
            408,
            "The body did not arrive in time (TARTAN_BODY_TIMEOUT)",
        );
        add(operation, 413, "The body is over its limit");
    }
    // Every write, with a body or without (`security::require_json`): a
    // form post from a web page is refused.
    if matches!(*method, Method::POST | Method::PUT) {
        let wanted = match path.starts_with("/webhook/") {
            true => "`application/json` or `application/problem+json`",
            false => "`application/json`, even without a body",
        };
        add(operation, 415, &format!("The `Content-Type` is not {wanted}"));
    }
}

fn add(operation: &mut Operation, status: u16, description: &str) {
    let problem = ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new()
                .schema(Some(RefOr::Ref(Ref::from_schema_name("Problem"))))
                .build(),
        )
        .build();
    operation
        .responses
        .responses
        .entry(status.to_string())
        .or_insert(RefOr::T(problem));
}
