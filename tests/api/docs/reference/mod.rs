//! The API reference, `docs/api-reference.md`: every operation of the
//! OpenAPI document `tartan serve` serves (`GET /openapi.json`, the same
//! document as `clients/openapi.json`) and every schema it names, rendered
//! as Markdown. The page is committed, so that it is read where the
//! repository is browsed and in the book; the test renders it again from
//! the document and fails when the committed page differs. To regenerate:
//!
//!     UPDATE_DOCS=1 cargo test -p tartan --test api -- docs::reference
//!
//! The rendering is plain Rust over `serde_json::Value`: no generator to
//! install, and it reads only what the document holds (paths, tags,
//! parameters, bodies, answers, components' schemas).

mod markdown;
mod render;

use serde_json::Value;

use crate::helpers::spawn_serve;

/// Where the page lives, from the repository's root.
const PAGE: &str = "docs/api-reference.md";

/// How to regenerate it, said in the page and by the failing test.
const REGENERATE: &str = "UPDATE_DOCS=1 cargo test -p tartan --test api -- docs::reference";

#[tokio::test]
async fn the_api_reference_is_rendered_from_the_served_openapi_document() {
    let dir = tempfile::Builder::new()
        .prefix("tartan-reference-")
        .tempdir()
        .expect("a working directory");
    let db = format!("sqlite://{}?mode=rwc", dir.path().join("tartan.db").display());
    let server = spawn_serve(&["--listen", "127.0.0.1:0", "--database-url", &db], &[]).await;
    let doc: Value = reqwest::get(format!("http://{}/openapi.json", server.addr))
        .await
        .expect("GET /openapi.json")
        .error_for_status()
        .expect("GET /openapi.json answers 200")
        .json()
        .await
        .expect("the document is JSON");
    let page = render::render(&doc);
    let path = super::repo().join(PAGE);
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &page).expect("writing docs/api-reference.md");
        eprintln!("wrote {PAGE}");
        return;
    }
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{PAGE}: {e}; generate it with\n\n    {REGENERATE}\n"));
    if committed != page {
        let at = committed
            .lines()
            .zip(page.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(page.lines().count()));
        let line = |text: &str| {
            text.lines()
                .nth(at)
                .unwrap_or("(the end of the page)")
                .to_string()
        };
        panic!(
            "{PAGE} is not what the OpenAPI document gives (the routes' annotations changed?).\n\
             Regenerate it and commit the result:\n\n    {REGENERATE}\n\n\
             First difference, line {}:\n  committed: {}\n  generated: {}",
            at + 1,
            line(&committed),
            line(&page),
        );
    }
}
