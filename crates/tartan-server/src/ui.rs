//! The dashboard (docs/ui.md): plain HTML, CSS and ES modules in
//! `crates/tartan-server/ui/`, embedded in the binary, served at `/ui`.
//! There is no build step: the files served are the files in the tree.
//! The pages hold no data; they read the API with the bearer token the
//! user gives them, like any other client, so these routes are open (the
//! Host check still applies) and everything they show sits behind the
//! API's tokens.

use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tartan_engine::Engine;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, Problem};
use crate::extract::Path;

/// Every file of the dashboard, listed rather than walked at build time so
/// that what ships is reviewed with the code; a test checks the list
/// against the folder.
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../ui/index.html"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../ui/app.css"),
    ),
    ("icon.svg", "image/svg+xml", include_bytes!("../ui/icon.svg")),
    ("app.js", JS, include_bytes!("../ui/app.js")),
    ("api.js", JS, include_bytes!("../ui/api.js")),
    ("dom.js", JS, include_bytes!("../ui/dom.js")),
    ("format.js", JS, include_bytes!("../ui/format.js")),
    ("graph.js", JS, include_bytes!("../ui/graph.js")),
    ("overview.js", JS, include_bytes!("../ui/overview.js")),
    ("flows.js", JS, include_bytes!("../ui/flows.js")),
    ("flow.js", JS, include_bytes!("../ui/flow.js")),
    ("steps.js", JS, include_bytes!("../ui/steps.js")),
    ("schedules.js", JS, include_bytes!("../ui/schedules.js")),
    ("lanes.js", JS, include_bytes!("../ui/lanes.js")),
    ("engines.js", JS, include_bytes!("../ui/engines.js")),
    ("timeline.js", JS, include_bytes!("../ui/timeline.js")),
    ("bulk.js", JS, include_bytes!("../ui/bulk.js")),
];

const JS: &str = "text/javascript; charset=utf-8";

/// Only this origin's files run, nothing inline, no eval, no frames, no
/// form posts elsewhere; the API is called on the same origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One ETag for all the files: they change together, with the binary.
fn etag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| {
        let mut hash = Sha256::new();
        for (name, _, bytes) in ASSETS {
            hash.update(name.as_bytes());
            hash.update(bytes);
        }
        let digest = hash.finalize();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        format!("\"{hex}\"")
    })
}

/// The dashboard's routes and their OpenAPI operations.
pub(crate) fn documented() -> OpenApiRouter<Engine> {
    OpenApiRouter::new()
        .routes(routes!(bare))
        .routes(routes!(index))
        .routes(routes!(asset))
}

/// The routes alone.
pub(crate) fn routes() -> axum::Router<Engine> {
    documented().split_for_parts().0
}

/// The dashboard's page, as at `/ui/`.
///
/// The same page as `GET /ui/` (its files are named by absolute paths, so
/// both addresses work). Open: it holds no data; its scripts read the API
/// with the token the user gives. Absent when the server runs with
/// `ui = false`.
#[utoipa::path(get, path = "/ui", tag = "ui", operation_id = "getDashboard", security(()),
    responses(
        (status = 200, description = "The dashboard's page (docs/ui.md)", content_type = "text/html"),
        (status = 304, description = "Not changed since the ETag given"),
    ))]
pub(crate) async fn bare(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// The dashboard's page.
///
/// Open: it holds no data; its scripts read the API with the token the
/// user gives. Answers `304` to an `If-None-Match` of its current `ETag`.
/// Absent when the server runs with `ui = false`.
#[utoipa::path(get, path = "/ui/", tag = "ui", operation_id = "getDashboardIndex", security(()),
    responses(
        (status = 200, description = "The dashboard's page (docs/ui.md)", content_type = "text/html"),
        (status = 304, description = "Not changed since the ETag given"),
    ))]
pub(crate) async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// One of the dashboard's scripts, its style sheet or its icon.
///
/// Open, like the page; `304` to an `If-None-Match` of its current `ETag`,
/// `404` for a file the dashboard does not have. Absent when the server
/// runs with `ui = false`.
#[utoipa::path(get, path = "/ui/{file}", tag = "ui", operation_id = "getDashboardFile", security(()),
    params(("file" = String, Path, description = "A file of the dashboard, such as app.js")),
    responses(
        (status = 200, description = "The file"),
        (status = 304, description = "Not changed since the ETag given"),
        (status = 404, description = "No such file", body = Problem, content_type = "application/problem+json"),
    ))]
pub(crate) async fn asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    serve(&file, &headers)
}

fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some((_, kind, bytes)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return ApiError::not_found(format!("no dashboard file {name:?}")).into_response();
    };
    let tag = etag();
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, *kind)], *bytes).into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Asked again each time, answered 304 while the binary is the same.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(tag) = HeaderValue::from_str(tag) {
        h.insert(header::ETAG, tag);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_folder_is_embedded_and_nothing_else() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("ui");
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        let mut on_disk: Vec<String> = entries
            .map(|e| match e {
                Ok(e) => e.file_name().to_string_lossy().into_owned(),
                Err(e) => panic!("{}: {e}", folder.display()),
            })
            .collect();
        let mut listed: Vec<String> = ASSETS.iter().map(|(n, _, _)| n.to_string()).collect();
        on_disk.sort();
        listed.sort();
        assert_eq!(
            on_disk, listed,
            "crates/tartan-server/ui and ui.rs's ASSETS differ"
        );
    }

    #[test]
    fn no_page_needs_more_than_200_kb() {
        let total: usize = ASSETS.iter().map(|(_, _, b)| b.len()).sum();
        assert!(total < 200 * 1024, "the dashboard's files take {total} bytes");
    }

    #[test]
    fn no_script_writes_markup() {
        // Text from the API goes in through textContent and attributes
        // only (docs/ui.md, "Security"): no file may use the APIs that
        // parse a string as HTML, nor eval.
        for (name, _, bytes) in ASSETS {
            let text = String::from_utf8_lossy(bytes);
            for banned in [
                "innerHTML",
                "outerHTML",
                "insertAdjacentHTML",
                "document.write",
                "eval(",
                "new Function",
            ] {
                assert!(!text.contains(banned), "{name} uses {banned}");
            }
        }
    }
}
