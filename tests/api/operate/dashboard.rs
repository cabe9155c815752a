//! The dashboard's files at `/ui` (docs/ui.md): open without a token (they
//! hold no data; the API behind them still wants one), with the headers
//! that keep the page from being framed, leaking its address or running
//! anything but its own scripts; and gone with `ui = false`.

use axum::http::{header, Method, Request, StatusCode};
use tartan_server::{ApiSecurity, ServerOptions};
use tower::ServiceExt;

use crate::helpers::*;

const FULL: &str = "dashboard-full-token-0123";
const READ: &str = "dashboard-read-token-0123";

#[tokio::test]
async fn the_dashboard_is_served_open_with_strict_headers_while_the_api_wants_a_token() {
    let Some(app) = spawn_with_tokens(Backend::Sqlite, FULL, READ).await else {
        return;
    };
    let page = app
        .client
        .get(app.url("/ui/"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET /ui/: {e}"));
    assert_eq!(page.status(), StatusCode::OK);
    let h = page.headers().clone();
    let value = |name: header::HeaderName| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(value(header::CONTENT_TYPE), "text/html; charset=utf-8");
    let csp = value(header::CONTENT_SECURITY_POLICY);
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
        "{csp}"
    );
    assert_eq!(value(header::X_FRAME_OPTIONS), "DENY");
    assert_eq!(value(header::REFERRER_POLICY), "no-referrer");
    assert_eq!(value(header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let etag = value(header::ETAG);
    let html = page.text().await.unwrap_or_default();
    assert!(
        html.contains(r#"<script type="module" src="/ui/app.js">"#),
        "{html}"
    );
    assert!(!html.contains("<script>"), "no inline script");

    // Its scripts, as scripts; unchanged ones as 304.
    let js = app
        .client
        .get(app.url("/ui/flow.js"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(js.status(), StatusCode::OK);
    assert_eq!(
        js.headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/javascript; charset=utf-8")
    );
    let again = app
        .client
        .get(app.url("/ui/flow.js"))
        .header(header::IF_NONE_MATCH, &etag)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);

    // No file outside the list, however it is named.
    for path in [
        "/ui/nope.js",
        "/ui/..%2Fsecret",
        "/ui/.hidden",
        "/ui/index.html%00.js",
        "/ui/app.js.map",
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(r.content_type, "application/problem+json", "{path}");
    }
    let bare = app
        .client
        .get(app.url("/ui"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bare.status(), StatusCode::OK, "GET /ui is the page too");
    assert_eq!(bare.text().await.unwrap_or_default(), html);

    // What the pages show still needs the token.
    assert_eq!(app.get("/engine/flow").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(app.get("/engine/session").await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn with_ui_off_there_is_no_dashboard() {
    let Some(app) = spawn_app(Backend::Sqlite).await else {
        return;
    };
    let off = ServerOptions {
        ui: false,
        ..ServerOptions::default()
    };
    let router = tartan_server::router_with(app.engine.clone(), ApiSecurity::open(), &off);
    for path in ["/ui/", "/ui/app.js", "/ui"] {
        let req = Request::builder()
            .method(Method::GET)
            .uri(path)
            .header(header::HOST, "127.0.0.1")
            .body(axum::body::Body::empty())
            .unwrap_or_else(|e| panic!("{e}"));
        let res = router
            .clone()
            .oneshot(req)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
    }
    let on = tartan_server::router(app.engine.clone(), ApiSecurity::open());
    let req = Request::builder()
        .uri("/ui/")
        .header(header::HOST, "127.0.0.1")
        .body(axum::body::Body::empty())
        .unwrap_or_else(|e| panic!("{e}"));
    let res = on.oneshot(req).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(res.status(), StatusCode::OK);
}
