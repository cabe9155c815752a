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

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::helpers::spawn_serve;

/// Where the page lives, from the repository's root.
const PAGE: &str = "docs/api-reference.md";

/// How to regenerate it, said in the page and by the failing test.
const REGENERATE: &str = "UPDATE_DOCS=1 cargo test -p tartan --test api -- docs::reference";

/// The methods an OpenAPI path item may hold, in the order shown.
const METHODS: [&str; 7] = ["get", "head", "post", "put", "patch", "delete", "options"];

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
    let page = render(&doc);
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

/// One operation: a method of a path.
struct Operation<'a> {
    method: &'a str,
    path: &'a str,
    op: &'a Value,
}

/// Anchors as GitHub and mdBook give them to headings: the heading's text
/// lowercased, blanks to `-`, punctuation but `-` and `_` dropped, and
/// `-1`, `-2`, ... after a repeated one.
#[derive(Default)]
struct Anchors {
    seen: HashMap<String, usize>,
}

impl Anchors {
    fn next(&mut self, heading: &str) -> String {
        let base: String = heading
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let n = self.seen.entry(base.clone()).or_insert(0);
        let anchor = match *n {
            0 => base,
            k => format!("{base}-{k}"),
        };
        *n += 1;
        anchor
    }
}

/// The page: an introduction, a table of every operation, the operations
/// by tag, then the schemas.
fn render(doc: &Value) -> String {
    let empty = Map::new();
    let ops = operations(doc);
    let groups = by_tag(doc, &ops);
    let schemas = doc["components"]["schemas"].as_object().unwrap_or(&empty);

    // Every heading, in page order, so that repeated anchors are numbered
    // as the renderers number them.
    let mut anchors = Anchors::default();
    anchors.next("API reference");
    anchors.next("Operations");
    let mut op_anchor: HashMap<(&str, &str), String> = HashMap::new();
    let mut tag_anchor: HashMap<&str, String> = HashMap::new();
    for (tag, _, members) in &groups {
        tag_anchor.insert(tag, anchors.next(&tag_heading(tag)));
        for o in members {
            op_anchor.insert((o.method, o.path), anchors.next(&op_heading(o)));
        }
    }
    anchors.next("Schemas");
    let schema_anchor: HashMap<&str, String> = schemas
        .keys()
        .map(|name| (name.as_str(), anchors.next(name)))
        .collect();
    let link = Linker {
        schemas: &schema_anchor,
    };

    let mut out = String::new();
    let info = &doc["info"];
    out.push_str("# API reference\n\n");
    let _ = writeln!(
        out,
        "<!-- Generated by tests/api/docs/reference.rs from the OpenAPI document the server\n     \
         serves; do not edit. To regenerate: {REGENERATE} -->\n"
    );
    let _ = writeln!(
        out,
        "Every operation of the HTTP API and every schema it names, as the OpenAPI\n\
         document the server serves at `GET /openapi.json` describes them (OpenAPI\n\
         {}, API version {}; the same document as `clients/openapi.json`). This page\n\
         is generated from that document, which is generated from the code: the\n\
         conventions, the behaviour behind each route and the step protocol are in\n\
         [The HTTP API and the step protocol](api.md), and the problem types of the\n\
         error answers in [Errors](errors.md).\n",
        text(&doc["openapi"]),
        text(&info["version"]),
    );
    if let Some(description) = info["description"].as_str() {
        let _ = writeln!(out, "{}\n", prose(description));
    }
    let _ = writeln!(out, "{}\n", authentication(doc));
    out.push_str(
        "Errors are `application/problem+json` ([Problem](#problem)). A request\n\
         body marked required must be sent; the others may be left out.\n\n",
    );

    out.push_str("## Operations\n\n");
    out.push_str("| operation | id | summary |\n|---|---|---|\n");
    for (_, _, members) in &groups {
        for o in members {
            let _ = writeln!(
                out,
                "| [`{} {}`](#{}) | `{}` | {} |",
                o.method.to_uppercase(),
                o.path,
                op_anchor[&(o.method, o.path)],
                text(&o.op["operationId"]),
                cell(&text(&o.op["summary"])),
            );
        }
    }
    out.push('\n');

    for (tag, description, members) in &groups {
        let _ = writeln!(out, "## {}\n", tag_heading(tag));
        if !description.is_empty() {
            let _ = writeln!(out, "{}\n", sentence(&prose(description)));
        }
        for o in members {
            operation(&mut out, o, &link);
        }
    }

    out.push_str("## Schemas\n\n");
    out.push_str(
        "The bodies of requests and answers. A field's type names the schema it\n\
         holds; `or null` marks a field that may be `null`; a field not marked\n\
         required may be left out.\n\n",
    );
    for (name, schema) in schemas {
        schema_section(&mut out, name, schema, &link);
    }
    // One newline at the end, as an editor leaves it.
    while out.ends_with("\n\n") {
        out.pop();
    }
    out
}

/// Every operation in the document's order of paths.
fn operations(doc: &Value) -> Vec<Operation<'_>> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for method in METHODS {
            if let Some(op) = item.get(method).filter(|op| op.is_object()) {
                ops.push(Operation { method, path, op });
            }
        }
    }
    ops
}

/// The operations under their first tag: the document's tags in its
/// order (with their descriptions), then any tag it does not list, then
/// the untagged ones under `other`. Tags without operations are left out.
fn by_tag<'a>(doc: &'a Value, ops: &'a [Operation<'a>]) -> Vec<(&'a str, &'a str, Vec<&'a Operation<'a>>)> {
    let mut groups: Vec<(&str, &str, Vec<&Operation>)> = doc["tags"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some((
                t["name"].as_str()?,
                t["description"].as_str().unwrap_or(""),
                Vec::new(),
            ))
        })
        .collect();
    for o in ops {
        let tag = o.op["tags"][0].as_str().unwrap_or("other");
        match groups.iter_mut().find(|(name, _, _)| *name == tag) {
            Some((_, _, members)) => members.push(o),
            None => groups.push((tag, "", vec![o])),
        }
    }
    groups.retain(|(_, _, members)| !members.is_empty());
    groups
}

fn tag_heading(tag: &str) -> String {
    format!("`{tag}` operations")
}

fn op_heading(o: &Operation) -> String {
    format!("`{} {}`", o.method.to_uppercase(), o.path)
}

/// What the document says of tokens: its security schemes, and that
/// operations with an empty requirement need none.
fn authentication(doc: &Value) -> String {
    let schemes = doc["components"]["securitySchemes"].as_object();
    let described: Vec<String> = schemes
        .into_iter()
        .flatten()
        .map(|(name, s)| {
            let how = match (s["type"].as_str(), s["scheme"].as_str()) {
                (Some("http"), Some("bearer")) => "`Authorization: Bearer <token>`".to_string(),
                (Some(t), Some(scheme)) => format!("{t} {scheme}"),
                (Some(t), None) => t.to_string(),
                _ => "unknown".to_string(),
            };
            let what = s["description"]
                .as_str()
                .map(|d| format!(" ({})", prose(d)))
                .unwrap_or_default();
            format!("the scheme `{name}`, sent as {how}{what}")
        })
        .collect();
    match described.is_empty() {
        true => "No operation needs a token.".to_string(),
        false => format!(
            "Tokens: {}. Each operation says whether it needs one.",
            described.join("; ")
        ),
    }
}

/// One operation's section.
fn operation(out: &mut String, o: &Operation, link: &Linker) {
    let op = o.op;
    let _ = writeln!(out, "### {}\n", op_heading(o));
    if let Some(summary) = op["summary"].as_str() {
        let _ = writeln!(out, "{}\n", prose(summary));
    }
    if let Some(description) = op["description"].as_str() {
        let _ = writeln!(out, "{}\n", prose(description));
    }
    let open = op["security"].as_array().is_some_and(|reqs| {
        !reqs.is_empty() && reqs.iter().all(|r| r.as_object().is_some_and(Map::is_empty))
    });
    let _ = writeln!(
        out,
        "Operation id `{}`. Token: {}.\n",
        text(&op["operationId"]),
        match open {
            true => "none needed",
            false => "needed when the server has tokens",
        }
    );

    let params: Vec<&Value> = op["parameters"].as_array().into_iter().flatten().collect();
    if !params.is_empty() {
        out.push_str("| parameter | in | type | required | description |\n|---|---|---|---|---|\n");
        for p in params {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                text(&p["name"]),
                text(&p["in"]),
                link.type_of(&p["schema"]),
                yes_no(p["required"].as_bool().unwrap_or(false)),
                cell(&text(&p["description"])),
            );
        }
        out.push('\n');
    }

    let body = &op["requestBody"];
    if let Some(content) = body["content"].as_object() {
        let required = match body["required"].as_bool().unwrap_or(false) {
            true => "required",
            false => "optional",
        };
        for (media, m) in content {
            let _ = write!(
                out,
                "Request body ({required}, `{media}`): {}",
                link.type_of(&m["schema"])
            );
            match body["description"].as_str() {
                Some(d) => {
                    let _ = writeln!(out, ". {}\n", sentence(&prose(d)));
                }
                None => out.push_str(".\n\n"),
            }
            if let Some(example) = m.get("example") {
                let json = serde_json::to_string_pretty(example).unwrap_or_default();
                let _ = writeln!(out, "```json\n{json}\n```\n");
            }
        }
    }

    let mut responses: Vec<(&String, &Value)> = op["responses"].as_object().into_iter().flatten().collect();
    responses.sort_by_key(|(status, _)| status.parse::<u32>().unwrap_or(u32::MAX));
    if !responses.is_empty() {
        out.push_str("| status | answer | body |\n|---|---|---|\n");
        for (status, r) in responses {
            let mut what = text(&r["description"]);
            for header in r["headers"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(name, _)| name)
            {
                let _ = write!(what, " (header `{header}`)");
            }
            let bodies: Vec<String> = r["content"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(media, m)| match m.get("schema") {
                    Some(schema) => format!("{} (`{media}`)", link.type_of(schema)),
                    None => format!("`{media}`"),
                })
                .collect();
            let _ = writeln!(
                out,
                "| {status} | {} | {} |",
                cell(&what),
                match bodies.is_empty() {
                    true => "none".to_string(),
                    false => bodies.join(", "),
                }
            );
        }
        out.push('\n');
    }
}

/// One schema's section: what it is, then its fields.
fn schema_section(out: &mut String, name: &str, schema: &Value, link: &Linker) {
    let _ = writeln!(out, "### {name}\n");
    if let Some(description) = schema["description"].as_str() {
        let _ = writeln!(out, "{}\n", prose(description));
    }
    // A schema made of others and fields of its own: the others named, the
    // fields listed.
    let mut fields = schema;
    if let Some(parts) = schema["allOf"].as_array() {
        let named: Vec<String> = parts
            .iter()
            .filter(|p| p["properties"].as_object().is_none())
            .map(|p| link.type_of(p))
            .collect();
        if !named.is_empty() {
            let _ = writeln!(out, "Everything of {}, and:\n", named.join(" and "));
        }
        if let Some(own) = parts.iter().find(|p| p["properties"].as_object().is_some()) {
            fields = own;
        }
    }
    match fields["properties"].as_object() {
        Some(properties) if !properties.is_empty() => {
            let required: Vec<&str> = fields["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            out.push_str("| field | type | required | description |\n|---|---|---|---|\n");
            for (field, s) in properties {
                let _ = writeln!(
                    out,
                    "| `{field}` | {} | {} | {} |",
                    link.type_of(s),
                    yes_no(required.contains(&field.as_str())),
                    cell(&text(&s["description"])),
                );
            }
            out.push('\n');
        }
        _ if schema["allOf"].is_array() => {}
        _ => {
            let _ = writeln!(out, "Type: {}.\n", link.type_of(schema));
        }
    }
}

/// Types as words, schema names linked to their sections.
struct Linker<'a> {
    schemas: &'a HashMap<&'a str, String>,
}

impl Linker<'_> {
    fn type_of(&self, s: &Value) -> String {
        let Some(obj) = s.as_object() else {
            return "any".to_string();
        };
        if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or(reference);
            return match self.schemas.get(name) {
                Some(anchor) => format!("[{name}](#{anchor})"),
                None => format!("`{name}`"),
            };
        }
        for (key, joint) in [("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")] {
            if let Some(parts) = obj.get(key).and_then(Value::as_array) {
                let words: Vec<String> = parts.iter().map(|p| self.type_of(p)).collect();
                return words.join(joint);
            }
        }
        if let Some(values) = obj.get("enum").and_then(Value::as_array) {
            let words: Vec<String> = values
                .iter()
                .map(|v| match v.as_str() {
                    Some(s) => format!("`{s}`"),
                    None => format!("`{v}`"),
                })
                .collect();
            return format!("one of {}", words.join(", "));
        }
        if let Some(value) = obj.get("const") {
            return format!("`{value}`");
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if types.is_empty() {
            return "any".to_string();
        }
        let words: Vec<String> = types.iter().map(|t| self.one_type(t, obj)).collect();
        words.join(" or ")
    }

    /// One JSON type of a schema, with its format and bounds.
    fn one_type(&self, t: &str, obj: &Map<String, Value>) -> String {
        let mut word = match t {
            "array" => match obj.get("items") {
                Some(items) if items.as_object().is_some_and(|i| !i.is_empty()) => {
                    format!("array of {}", self.type_of(items))
                }
                _ => "array".to_string(),
            },
            "object" => match obj.get("additionalProperties") {
                Some(values) if values.is_object() => format!("map of {}", self.type_of(values)),
                _ => "object".to_string(),
            },
            other => other.to_string(),
        };
        if t == "null" {
            return word;
        }
        let mut qualifiers: Vec<String> = Vec::new();
        if let Some(format) = obj.get("format").and_then(Value::as_str) {
            qualifiers.push(format.to_string());
        }
        let bound = |key: &str| obj.get(key).filter(|v| v.is_number()).map(Value::to_string);
        let (low, high, unit) = match t {
            "integer" | "number" => (bound("minimum"), bound("maximum"), ""),
            "string" => (bound("minLength"), bound("maxLength"), " characters"),
            "array" => (bound("minItems"), bound("maxItems"), " items"),
            _ => (None, None, ""),
        };
        match (low, high) {
            (Some(l), Some(h)) => qualifiers.push(format!("{l} to {h}{unit}")),
            (Some(l), None) => qualifiers.push(format!("at least {l}{unit}")),
            (None, Some(h)) => qualifiers.push(format!("at most {h}{unit}")),
            (None, None) => {}
        }
        if !qualifiers.is_empty() {
            let _ = write!(word, " ({})", qualifiers.join("; "));
        }
        word
    }
}

fn yes_no(b: bool) -> &'static str {
    match b {
        true => "yes",
        false => "no",
    }
}

/// Text ending as a sentence does.
fn sentence(text: &str) -> String {
    match text.ends_with(['.', '!', '?', ':', ')']) {
        true => text.to_string(),
        false => format!("{text}."),
    }
}

/// A JSON string's text; anything else empty.
fn text(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_default()
}

/// Text from the document as Markdown prose: its lines kept, a `<` outside
/// code escaped (so that `<id>` is not taken for HTML), and a line that
/// would start a heading, a list or a code block made plain text.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for (i, line) in text.trim().lines().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let line = line.trim_start();
        let marker = line.starts_with('#')
            || line.starts_with("- ")
            || line.starts_with("* ")
            || line.starts_with("+ ")
            || line.starts_with('>');
        // `1. ` starts a list; `1\. ` does not.
        let numbered = line
            .split_once(". ")
            .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
            .map(|(n, _)| n.len());
        if marker && !in_code {
            out.push('\\');
        }
        for (at, c) in line.char_indices() {
            if Some(at) == numbered && !in_code {
                out.push('\\');
            }
            match c {
                '`' => {
                    in_code = !in_code;
                    out.push(c);
                }
                '<' if !in_code => out.push_str("&lt;"),
                c => out.push(c),
            }
        }
    }
    out
}

/// Prose in a table cell: on one line, with `|` escaped.
fn cell(text: &str) -> String {
    prose(text)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn anchors_are_the_renderers_and_repeats_are_numbered() {
        let mut a = Anchors::default();
        assert_eq!(a.next("`GET /engine/flow/{id}/status`"), "get-engineflowidstatus");
        assert_eq!(a.next("`GET /engine`"), "get-engine");
        assert_eq!(a.next("`GET /engine/`"), "get-engine-1");
        assert_eq!(a.next("`flows` operations"), "flows-operations");
        assert_eq!(a.next("FlowState"), "flowstate");
    }

    #[test]
    fn types_read_as_words_with_schemas_linked() {
        let schemas: HashMap<&str, String> = [("Step", "step".to_string())].into_iter().collect();
        let link = Linker { schemas: &schemas };
        let t = |s: Value| link.type_of(&s);
        assert_eq!(t(json!({"$ref": "#/components/schemas/Step"})), "[Step](#step)");
        assert_eq!(
            t(json!({"oneOf": [{"$ref": "#/components/schemas/Step"}, {"type": "null"}]})),
            "[Step](#step) or null"
        );
        assert_eq!(
            t(json!({"type": ["string", "null"], "format": "date-time"})),
            "string (date-time) or null"
        );
        assert_eq!(
            t(json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 64})),
            "array of string (1 to 64 items)"
        );
        assert_eq!(
            t(json!({"type": "object", "additionalProperties": {"type": "array", "items": {}}})),
            "map of array"
        );
        assert_eq!(
            t(json!({"type": "integer", "format": "int32", "minimum": 1, "maximum": 1000})),
            "integer (int32; 1 to 1000)"
        );
        assert_eq!(
            t(json!({"type": "string", "enum": ["a", "b"]})),
            "one of `a`, `b`"
        );
        assert_eq!(t(json!({})), "any");
        assert_eq!(t(json!({"$ref": "#/components/schemas/Gone"})), "`Gone`");
    }

    #[test]
    fn prose_keeps_markdown_plain_and_cells_on_one_line() {
        assert_eq!(
            prose("Lane id: `step:<id>` or <host>"),
            "Lane id: `step:<id>` or &lt;host>"
        );
        assert_eq!(
            prose("a\n# not a heading\n- not a list\n1. nor this"),
            "a\n\\# not a heading\n\\- not a list\n1\\. nor this"
        );
        assert_eq!(cell("one\ntwo | three\n\nfour"), "one two \\| three four");
    }

    #[test]
    fn a_small_document_renders_every_part() {
        let doc = json!({
            "openapi": "3.1.0",
            "info": {"title": "T", "version": "1.2.3"},
            "tags": [{"name": "flows", "description": "Flows"}, {"name": "unused"}],
            "paths": {
                "/engine/flow/{id}": {"get": {
                    "tags": ["flows"], "operationId": "getFlow", "summary": "Read a flow.",
                    "description": "Its whole state.",
                    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "responses": {
                        "404": {"description": "No such flow", "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
                        "200": {"description": "The state", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Flow"}}}}
                    }
                }},
                "/health": {"get": {"operationId": "health", "summary": "Alive.", "security": [{}],
                    "responses": {"200": {"description": "Yes", "headers": {"X-State": {}}}}}}
            },
            "components": {
                "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "Tokens"}},
                "schemas": {
                    "Flow": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "description": "Its id"}}},
                    "Problem": {"type": "object", "properties": {}},
                    "Status": {"type": "string", "enum": ["active"]}
                }
            }
        });
        let page = render(&doc);
        for part in [
            "| [`GET /engine/flow/{id}`](#get-engineflowid) | `getFlow` | Read a flow. |",
            "## `flows` operations\n\nFlows.\n",
            "### `GET /engine/flow/{id}`\n\nRead a flow.\n\nIts whole state.\n\nOperation id `getFlow`. Token: needed when the server has tokens.",
            "| `id` | path | string | yes |  |",
            "| 200 | The state | [Flow](#flow) (`application/json`) |\n| 404 | No such flow |",
            "## `other` operations",
            "Operation id `health`. Token: none needed.",
            "| 200 | Yes (header `X-State`) | none |",
            "### Flow\n\n| field | type | required | description |\n|---|---|---|---|\n| `id` | string | yes | Its id |",
            "### Status\n\nType: one of `active`.",
            "the scheme `bearer`, sent as `Authorization: Bearer <token>` (Tokens)",
        ] {
            assert!(page.contains(part), "{part:?} is not in:\n{page}");
        }
        assert!(
            !page.contains("unused"),
            "a tag without operations has no section"
        );
        assert!(
            page.ends_with(".\n") || page.ends_with("|\n"),
            "one newline at the end"
        );
    }
}
