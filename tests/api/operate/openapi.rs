//! The OpenAPI document (docs/api.md, "The OpenAPI document"): served at
//! `GET /openapi.json`, OpenAPI 3.1, and holding every route the router
//! serves with every method it answers.

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use serde_json::Value;
use tartan_server::ApiSecurity;

use crate::helpers::*;

/// The route templates of a router. axum offers no list of its routes, but
/// its `Debug` form names each one (`RouteId(N): "/path"`); the test fails
/// loudly, rather than passing empty, if that form ever changes.
fn router_paths(router: &axum::Router) -> BTreeSet<String> {
    let text = format!("{router:?}");
    // The fallback router's catch-all routes come after the routes proper.
    let text = text.split("fallback_router").next().unwrap_or_default();
    let mut paths = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("RouteId(") {
        rest = &rest[at..];
        let Some(open) = rest.find("): \"") else { break };
        let after = &rest[open + 4..];
        let Some(close) = after.find('"') else { break };
        paths.insert(after[..close].to_string());
        rest = &after[close..];
    }
    paths
}

/// A concrete path for a template: each `{param}` becomes a word.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|part| if part.starts_with('{') { "x" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
];

#[tokio::test]
async fn every_route_of_the_router_is_in_the_document_with_every_method_it_answers() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let router = tartan_server::router(app.engine.clone(), ApiSecurity::open());
    let routed = router_paths(&router);
    assert!(
        routed.len() >= 20 && routed.contains("/engine/flow/{id}"),
        "could not read the router's routes from its Debug form: {routed:?}"
    );
    let doc = app.get("/openapi.json").await;
    assert_eq!(doc.status, StatusCode::OK);
    let documented = doc.body["paths"].as_object().cloned().unwrap_or_default();

    let mut missing = Vec::new();
    for path in &routed {
        for method in METHODS {
            // The router's own refusal of a method is a 405 of kind
            // `method-not-allowed`; anything else means a handler answered.
            // A stream that starts does not end: a bad resume point gets
            // an answer from its handler at once.
            let probe = match path.ends_with("/stream") {
                true => format!("{}?after=x", concrete(path)),
                false => concrete(path),
            };
            let reply = app.send(method.clone(), &probe, None).await;
            let routed_here = !(reply.status == StatusCode::METHOD_NOT_ALLOWED
                && reply.body["type"] == "urn:tartan:problem:method-not-allowed");
            let in_doc = documented
                .get(path)
                .and_then(|item| item.get(method.as_str().to_lowercase()))
                .is_some();
            if routed_here && !in_doc {
                missing.push(format!("{method} {path} is served but not documented"));
            }
            if in_doc && !routed_here {
                missing.push(format!("{method} {path} is documented but not served"));
            }
        }
    }
    for path in documented.keys() {
        if !routed.contains(path) {
            missing.push(format!("{path} is documented but not a route"));
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

#[tokio::test]
async fn the_document_is_openapi_3_1_with_problems_and_tokens() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let doc = app.get("/openapi.json").await.body;
    assert!(
        doc["openapi"].as_str().unwrap_or("").starts_with("3.1"),
        "{}",
        doc["openapi"]
    );
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    assert!(doc["components"]["schemas"]["Problem"].is_object());
    assert!(doc["components"]["schemas"]["FlowState"].is_object());
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().cloned().unwrap_or_default() {
        for (method, op) in item.as_object().cloned().unwrap_or_default() {
            operations += 1;
            let responses = op["responses"].as_object().cloned().unwrap_or_default();
            // Argyll's unsigned webhook URL is always refused (docs/security.md);
            // the WebSocket's success is switching protocols.
            assert!(
                responses.keys().any(|s| s.starts_with('2') || s == "101")
                    || path == "/webhook/{flow}/{step}/{token}",
                "{method} {path} has no success answer"
            );
            let public = op["security"] == serde_json::json!([{}]);
            assert_eq!(
                !public,
                responses.contains_key("401"),
                "{method} {path}: a 401 is documented exactly where a token is needed"
            );
            // Every documented error is problem+json.
            for (status, response) in &responses {
                if status.starts_with('4') || status.starts_with('5') {
                    assert!(
                        response["content"]["application/problem+json"].is_object(),
                        "{method} {path} {status} is not problem+json: {response}"
                    );
                }
            }
        }
    }
    assert!(operations >= 25, "{operations} operations");
    // Any route may meet the Host check (403); a write's 403 is also a
    // read token's, a read-only POST's is not.
    let forbidden = |path: &str| {
        doc["paths"][path]["post"]["responses"]["403"]["description"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(forbidden("/engine/flow/query").contains("TARTAN_ALLOWED_HOSTS"));
    assert!(!forbidden("/engine/flow/query").contains("read token"));
    assert!(forbidden("/engine/flow").contains("read token"));
    assert!(forbidden("/engine/flow").contains("TARTAN_ALLOWED_HOSTS"));
}

#[tokio::test]
async fn the_document_sits_behind_the_api_tokens() {
    let Some(db) = TestDb::create(Backend::Sqlite).await else {
        return;
    };
    let security = ApiSecurity::new(
        &["full-token-0123456789".into()],
        &["read-token-0123456789".into()],
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let app = start_secured(db, "secured", security).await;
    let anonymous = app.get("/openapi.json").await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let read = app
        .client
        .get(app.url("/openapi.json"))
        .bearer_auth("read-token-0123456789")
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read.status().as_u16(), 200);
    let body: Value = read.json().await.unwrap_or_default();
    assert!(body["paths"]["/engine/flow"].is_object());
}

/// What a client generator needs of each operation (clients/README.md): a
/// unique camelCase `operationId` (a function's name in the clients), a
/// summary and a description; an example for every request body; and the
/// fields a start and a step registration cannot do without marked
/// required. `.ci/api-check` validates the whole document with
/// openapi-spec-validator; this fails first, without Python.
#[tokio::test]
async fn every_operation_has_a_unique_id_a_summary_a_description_and_body_examples() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let doc = app.get("/openapi.json").await.body;
    let mut ids = BTreeSet::new();
    let mut faults = Vec::new();
    for (path, item) in doc["paths"].as_object().cloned().unwrap_or_default() {
        for (method, op) in item.as_object().cloned().unwrap_or_default() {
            let at = format!("{} {path}", method.to_uppercase());
            let id = op["operationId"].as_str().unwrap_or_default();
            let camel = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && id.chars().all(|c| c.is_ascii_alphanumeric());
            if !camel {
                faults.push(format!("{at}: operationId {id:?} is not camelCase"));
            }
            if !ids.insert(id.to_string()) {
                faults.push(format!("{at}: operationId {id:?} is not unique"));
            }
            for field in ["summary", "description"] {
                if op[field].as_str().unwrap_or_default().trim().is_empty() {
                    faults.push(format!("{at}: no {field}"));
                }
            }
            if op["summary"].as_str().unwrap_or_default().contains('\n') {
                faults.push(format!("{at}: the summary is more than one line"));
            }
            if let Some(content) = op["requestBody"]["content"].as_object() {
                for (media, body) in content {
                    if body["example"].is_null() && body["examples"].is_null() {
                        faults.push(format!("{at}: the {media} body has no example"));
                    }
                }
            }
        }
    }
    assert!(faults.is_empty(), "{faults:#?}");
    assert!(
        ids.contains("startFlow") && ids.contains("registerStep"),
        "{ids:?}"
    );

    let required = |schema: &str| -> BTreeSet<String> {
        doc["components"]["schemas"][schema]["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    for (schema, fields) in [
        ("StartFlow", &["id", "goals"][..]),
        ("PlanRequest", &["goals"]),
        ("Step", &["id", "name", "type"]),
        ("HttpConfig", &["endpoint"]),
        ("AttributeSpec", &["role"]),
    ] {
        let marked = required(schema);
        for field in fields {
            assert!(
                marked.contains(*field),
                "{schema}.{field} is not required: {marked:?}"
            );
        }
    }
    // Every write may meet the JSON-only rule, with a body or without.
    for (path, method) in [
        ("/engine/flow", "post"),
        ("/engine/flow/{id}/cancel", "post"),
        ("/engine/step/{id}", "put"),
    ] {
        let answer = &doc["paths"][path][method]["responses"]["415"];
        assert!(
            answer["content"]["application/problem+json"].is_object(),
            "{method} {path}: no 415"
        );
    }
}
