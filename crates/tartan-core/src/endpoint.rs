//! Endpoint URL templates (`http://{region}.api.example.com/items/{id}?v={v}`):
//! where each placeholder stands, and filling them in so that no value can
//! change where the call goes.
//!
//! A template is parsed as a URL with every placeholder replaced by a
//! stand-in; that tells where each one stands (host, path, query or
//! fragment) and is the shape a filled-in URL must keep. Values are then
//! encoded for their place: in the host only a host name label is accepted;
//! elsewhere everything but `A-Z a-z 0-9 - . _ ~` is percent-encoded, so a
//! value cannot add a `/`, `?`, `#`, `@`, `:`, `&` or `=`. A path segment
//! that is `.` or `..` (encoded or not, URL parsers treat `%2e` as `.`) is
//! refused, as it would climb the path. Finally the filled-in URL is parsed
//! and compared with the shape: same scheme, user info, port, host (unless
//! a placeholder stands there) and number of path segments.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::Value;
use url::Url;

use crate::json::Args;

/// Everything but RFC 3986's unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Where a placeholder stands in its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Host,
    Path,
    Query,
    Fragment,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Text(String),
    Param(String),
}

/// A parsed endpoint template.
#[derive(Debug, Clone)]
pub struct Template {
    tokens: Vec<Token>,
    /// Where each placeholder occurrence stands, in order.
    parts: Vec<Part>,
    /// The template with stand-ins for the placeholders.
    shape: Url,
}

/// Split a template into text and `{name}` placeholders. A `{}` or an
/// unclosed `{` is text.
fn tokenize(template: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find(['{', '}']) {
            Some(i) if after.as_bytes().get(i) == Some(&b'}') && i > 0 => {
                text.push_str(&rest[..open]);
                if !text.is_empty() {
                    tokens.push(Token::Text(std::mem::take(&mut text)));
                }
                tokens.push(Token::Param(after[..i].to_string()));
                rest = &after[i + 1..];
            }
            Some(i) => {
                // `{}` stays as text; `{a{b}`: `{a` is text, `{b}` may be a
                // placeholder.
                let end = if i == 0 { 1 } else { i };
                text.push_str(&rest[..open + 1 + end]);
                rest = &after[end..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        tokens.push(Token::Text(text));
    }
    tokens
}

/// The names inside `{...}` of a template, in order.
pub fn params(template: &str) -> Vec<String> {
    tokenize(template)
        .into_iter()
        .filter_map(|t| match t {
            Token::Param(p) => Some(p),
            Token::Text(_) => None,
        })
        .collect()
}

/// A host name label: letters, digits and `-`, 1 to 63 long, not starting
/// or ending with `-`.
pub fn is_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// A value for a message: quoted, cut to a readable length.
fn shown(value: &str) -> String {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{:?}...", &value[..cut]),
        None => format!("{value:?}"),
    }
}

/// The text a value fills a placeholder with: a string as it is, null or
/// absent as nothing, anything else as JSON.
fn value_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn path_segments(url: &Url) -> usize {
    url.path_segments().map_or(0, Iterator::count)
}

impl Template {
    /// Parse a template. The message says what is wrong, for the field it
    /// came from.
    pub fn parse(template: &str) -> Result<Template, String> {
        // The URL parser would drop these silently (tabs and line breaks
        // anywhere, spaces at either end), joining what was apart.
        if template.chars().any(char::is_control) || template.trim() != template {
            return Err(format!(
                "{template:?} is not a valid URL: it contains control characters or spaces at an end"
            ));
        }
        let tokens = tokenize(template);
        // A stand-in that is a valid host label and survives every URL part
        // unchanged, distinct from any text of the template.
        let lower = template.to_ascii_lowercase();
        let mut base = String::from("tartanph");
        while lower.contains(&base) {
            base.push('q');
        }
        let mut filled = String::new();
        let mut markers = Vec::new();
        for token in &tokens {
            match token {
                Token::Text(t) => filled.push_str(t),
                Token::Param(name) => {
                    let marker = format!("{base}{}x", markers.len());
                    filled.push_str(&marker);
                    markers.push((name.as_str(), marker));
                }
            }
        }
        let shape = Url::parse(&filled).map_err(|e| format!("{template:?} is not a valid URL: {e}"))?;
        if !matches!(shape.scheme(), "http" | "https") {
            return Err(format!("must be an http:// or https:// URL, got {template:?}"));
        }
        if shape.host_str().is_none_or(str::is_empty) {
            return Err(format!("{template:?} is not a valid URL: it has no host"));
        }
        let mut parts = Vec::new();
        for (name, marker) in &markers {
            let within = |s: Option<&str>| s.is_some_and(|s| s.contains(marker.as_str()));
            let part = if within(shape.host_str()) {
                Part::Host
            } else if within(Some(shape.path())) {
                Part::Path
            } else if within(shape.query()) {
                Part::Query
            } else if within(shape.fragment()) {
                Part::Fragment
            } else if within(Some(shape.username())) || within(shape.password()) {
                return Err(format!("placeholder {{{name}}} may not stand in the user info"));
            } else {
                return Err(format!(
                    "placeholder {{{name}}} must stand in the host, path or query, and not where a \"..\" segment removes it"
                ));
            };
            parts.push(part);
        }
        Ok(Template { tokens, parts, shape })
    }

    /// The template with stand-ins for its placeholders: its scheme, host
    /// (where no placeholder stands) and port are those of every call.
    pub fn shape(&self) -> &Url {
        &self.shape
    }

    /// Fill the placeholders with `values`, encoded for where they stand.
    /// The message names the placeholder at fault.
    pub fn expand(&self, values: &Args) -> Result<Url, String> {
        let mut out = String::new();
        let mut names: Vec<&str> = Vec::new();
        let mut parts = self.parts.iter();
        for token in &self.tokens {
            let name = match token {
                Token::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Token::Param(name) => name,
            };
            let part = parts
                .next()
                .ok_or_else(|| "endpoint template out of step with its placeholders".to_string())?;
            let raw = value_text(values.get(name));
            match part {
                Part::Host => {
                    if !is_label(&raw) {
                        return Err(format!(
                            "placeholder {{{name}}} stands in the host and takes one host name label (letters, digits and -, 1 to 63 characters, not starting or ending with -), got {}",
                            shown(&raw)
                        ));
                    }
                    out.push_str(&raw);
                }
                Part::Path if raw == "." || raw == ".." => {
                    return Err(format!(
                        "placeholder {{{name}}} is {}: a \".\" or \"..\" path segment would climb the path",
                        shown(&raw)
                    ));
                }
                Part::Path | Part::Query | Part::Fragment => {
                    out.extend(utf8_percent_encode(&raw, COMPONENT));
                }
            }
            if !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        let url = Url::parse(&out).map_err(|e| {
            format!(
                "the endpoint filled in with {} is not a valid URL: {e}",
                names
                    .iter()
                    .map(|n| format!("{{{n}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let shape = &self.shape;
        let host_fixed = !self.parts.contains(&Part::Host);
        let same = url.scheme() == shape.scheme()
            && url.username() == shape.username()
            && url.password() == shape.password()
            && url.port() == shape.port()
            && (!host_fixed || url.host_str() == shape.host_str())
            && path_segments(&url) == path_segments(shape)
            && url.query().is_some() == shape.query().is_some()
            && url.fragment().is_some() == shape.fragment().is_some();
        if !same {
            return Err(format!(
                "the values of {} would change the endpoint's host, port, user info or path segments",
                names
                    .iter()
                    .map(|n| format!("{{{n}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(url)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(pairs: &[(&str, Value)]) -> Args {
        pairs.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect()
    }

    fn expand(template: &str, pairs: &[(&str, Value)]) -> Result<String, String> {
        Template::parse(template)?
            .expand(&args(pairs))
            .map(|u| u.to_string())
    }

    #[test]
    fn params_match_the_placeholders_filled() {
        assert_eq!(params("http://h/{a}/x{b}y/{}/{c{d}/{e"), ["a", "b", "d"]);
        assert_eq!(
            expand(
                "http://h/{a}/x{b}y/{}/{c{d}/{e",
                &[("a", json!("1")), ("b", json!("2")), ("d", json!("3"))]
            )
            .unwrap(),
            "http://h/1/x2y/%7B%7D/%7Bc3/%7Be"
        );
    }

    #[test]
    fn parts_are_found() {
        let t = Template::parse("https://{r}.api.example.com:8443/v1/{id}/x?q={q}&z=1#{f}").unwrap();
        assert_eq!(t.parts, [Part::Host, Part::Path, Part::Query, Part::Fragment]);
        assert_eq!(t.shape().port(), Some(8443));
    }

    #[test]
    fn malformed_templates_are_refused() {
        for bad in [
            "http://exa mple.com/",
            "http://[::1/",
            "http://:80/",
            "http://h:99999/",
            "http://h:{port}/",
            "http://{u}@h/",
            "http://u:{p}@h/",
            "http://h/a/{x}/../b",
            "ftp://h/",
            "http://h/\tx",
            "http://h/x\n",
            "http://h/x ",
            "http://300.1.1.1/",
        ] {
            assert!(Template::parse(bad).is_err(), "{bad} was accepted");
        }
        let e = Template::parse("http://{u}@h/").unwrap_err();
        assert!(e.contains("{u}") && e.contains("user info"), "{e}");
        let e = Template::parse("http://h/a/{x}/../b").unwrap_err();
        assert!(e.contains("{x}") && e.contains("removes it"), "{e}");
    }

    #[test]
    fn path_values_stay_one_segment() {
        let t = "http://h:81/items/{id}/detail";
        for (value, path) in [
            ("../admin", "/items/..%2Fadmin/detail"),
            ("evil.com@", "/items/evil.com%40/detail"),
            ("a/b", "/items/a%2Fb/detail"),
            ("x?y#z", "/items/x%3Fy%23z/detail"),
            ("a\\b", "/items/a%5Cb/detail"),
            ("100%", "/items/100%25/detail"),
            ("%2e%2e", "/items/%252e%252e/detail"),
            ("...", "/items/.../detail"),
            ("Ada Lovelace", "/items/Ada%20Lovelace/detail"),
            ("ü", "/items/%C3%BC/detail"),
            ("", "/items//detail"),
        ] {
            let url = Template::parse(t)
                .unwrap()
                .expand(&args(&[("id", json!(value))]))
                .unwrap();
            assert_eq!(url.path(), path, "{value}");
            assert_eq!(url.host_str(), Some("h"), "{value}");
            assert_eq!(url.port(), Some(81), "{value}");
        }
        assert_eq!(
            expand(t, &[("id", json!(7))]).unwrap(),
            "http://h:81/items/7/detail"
        );
    }

    #[test]
    fn dot_segments_are_refused() {
        for value in [".", ".."] {
            let e = expand("http://h/a/{id}", &[("id", json!(value))]).unwrap_err();
            assert!(e.contains("{id}") && e.contains("climb"), "{e}");
        }
        // A value that makes a `..` segment with the text around it.
        let e = expand("http://h/a/..{x}/b", &[("x", json!(""))]).unwrap_err();
        assert!(e.contains("{x}") && e.contains("path segments"), "{e}");
        let e = expand("http://h/a/.{x}/b", &[("x", json!("%2E"))]);
        assert_eq!(e.unwrap(), "http://h/a/.%252E/b", "an encoded dot stays data");
    }

    #[test]
    fn query_values_cannot_add_parameters() {
        let url = Template::parse("http://h/s?q={q}&page=1")
            .unwrap()
            .expand(&args(&[("q", json!("a&admin=true+1=2#f"))]))
            .unwrap();
        assert_eq!(url.query(), Some("q=a%26admin%3Dtrue%2B1%3D2%23f&page=1"));
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert_eq!(
            pairs,
            [
                ("q".to_string(), "a&admin=true+1=2#f".to_string()),
                ("page".to_string(), "1".to_string())
            ]
        );
        assert_eq!(url.fragment(), None);
    }

    #[test]
    fn host_values_must_be_one_label() {
        let t = "http://{r}.api.example.com:8080/x";
        assert_eq!(
            expand(t, &[("r", json!("eu-west-1"))]).unwrap(),
            "http://eu-west-1.api.example.com:8080/x"
        );
        for bad in [
            "evil.com",
            "127.0.0.1:9999",
            "evil.com/",
            "a@b",
            "",
            "-a",
            "a-",
            "a_b",
            "ü",
            &"a".repeat(64),
        ] {
            let e = expand(t, &[("r", json!(bad))]).unwrap_err();
            assert!(e.contains("{r}") && e.contains("label"), "{bad}: {e}");
        }
        // A label of digits alone is a valid label; the URL parser may read
        // the host as an address, which the host policy then checks.
        assert_eq!(
            Template::parse("http://{n}/")
                .unwrap()
                .expand(&args(&[("n", json!("2852039166"))]))
                .unwrap()
                .host_str(),
            Some("169.254.169.254")
        );
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let e = expand("http://{r}/", &[("r", json!("x.".repeat(500)))]).unwrap_err();
        assert!(e.len() < 300, "{e}");
    }
}
