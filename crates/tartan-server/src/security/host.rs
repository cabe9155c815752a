//! DNS rebinding: a page on `rebind.attacker.example`, whose name the
//! attacker then points at 127.0.0.1, is same-origin with the engine as far
//! as the browser knows. CORS and the WebSocket's origin check let it in,
//! and it drives a loopback engine that asks for no token. What gives it
//! away is the name the browser sends in `Host` (HTTP/2: the authority).
//!
//! Without tokens (or whenever `TARTAN_ALLOWED_HOSTS` is set), a request is
//! served only when every name it gives for the server is a loopback
//! address, `localhost` (or a name under it), the address the server
//! listens on, the host of its webhook URLs, or listed in
//! `TARTAN_ALLOWED_HOSTS`; anything else is a 403
//! naming that setting (docs/security.md, "DNS rebinding"). One rule for
//! every route, `/health` included: loopback probes name a loopback host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiSecurity;
use crate::error::{kind, ApiError};

/// The setting, as error messages name it.
const SETTING: &str = "TARTAN_ALLOWED_HOSTS";

/// A host as a request or an entry names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Ip(IpAddr),
    /// Lower case, without a trailing dot.
    Name(String),
}

/// What one entry of `TARTAN_ALLOWED_HOSTS` matches.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(Host),
    /// `*.example.com`: any name ending in `.example.com`.
    Under(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    /// When given, the request must name this port.
    port: Option<u16>,
}

/// `TARTAN_ALLOWED_HOSTS`: the host names (with or without a port) a
/// request may name besides loopback, `localhost` and the listen address;
/// `*` for any. Empty: the setting is not set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    any: bool,
    entries: Vec<Entry>,
}

impl AllowedHosts {
    /// Parse the entries: `name`, `name:port`, `*.domain`, an address
    /// (`10.0.0.5`, `::1`, `[::1]:8080`), or `*`. The error names the entry.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut hosts = AllowedHosts::default();
        for raw in entries {
            let entry = raw.trim();
            if entry == "*" {
                hosts.any = true;
                continue;
            }
            let refused = || {
                format!(
                    "{entry:?} is not a host: expected a name or address with an optional :port, \
                     *.domain, or *"
                )
            };
            if let Some(domain) = entry.strip_prefix("*.") {
                let (name, port) = split_port(domain).ok_or_else(refused)?;
                let Some(Host::Name(name)) = host_of(name) else {
                    return Err(refused());
                };
                hosts.entries.push(Entry {
                    pattern: Pattern::Under(format!(".{name}")),
                    port,
                });
                continue;
            }
            // A bare IPv6 address has colons of its own: it takes no port.
            let (host, port) = match entry.parse::<IpAddr>() {
                Ok(ip) => (Host::Ip(ip), None),
                Err(_) => parse_authority(entry).ok_or_else(refused)?,
            };
            hosts.entries.push(Entry {
                pattern: Pattern::Exact(host),
                port,
            });
        }
        Ok(hosts)
    }

    /// The host of `url` too, on any port: the engine hands out webhook
    /// URLs naming it, so step services name it. Unparsable or unspecified
    /// (`0.0.0.0`) hosts add nothing.
    pub(crate) fn and_host_of(mut self, url: &str) -> Self {
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().and_then(host_of));
        if let Some(host) = host.filter(|h| !matches!(h, Host::Ip(ip) if ip.is_unspecified())) {
            self.entries.push(Entry {
                pattern: Pattern::Exact(host),
                port: None,
            });
        }
        self
    }

    /// Whether the setting was given at all.
    pub fn is_set(&self) -> bool {
        self.any || !self.entries.is_empty()
    }

    fn lists(&self, host: &Host, port: Option<u16>) -> bool {
        self.any
            || self.entries.iter().any(|e| {
                let host_matches = match (&e.pattern, host) {
                    (Pattern::Exact(Host::Ip(a)), Host::Ip(b)) => a.to_canonical() == b.to_canonical(),
                    (Pattern::Exact(Host::Name(a)), Host::Name(b)) => a == b,
                    (Pattern::Under(suffix), Host::Name(b)) => b.ends_with(suffix.as_str()),
                    _ => false,
                };
                host_matches && e.port.is_none_or(|p| port == Some(p))
            })
    }
}

/// Whether a request naming `text` (a `Host` value or an HTTP/2 authority)
/// is served by a server listening on `listen`.
fn allowed(hosts: &AllowedHosts, listen: Option<IpAddr>, text: &str) -> bool {
    let Some((host, port)) = parse_authority(text) else {
        return false;
    };
    let builtin = match &host {
        Host::Ip(ip) => {
            let ip = ip.to_canonical();
            ip.is_loopback()
                || listen.is_some_and(|l| {
                    let l = l.to_canonical();
                    // Listening on every address: an address literal names
                    // this machine, and a literal cannot be rebound.
                    l == ip || l.is_unspecified()
                })
        }
        Host::Name(name) => name == "localhost" || name.ends_with(".localhost"),
    };
    builtin || hosts.lists(&host, port)
}

/// `host[:port]` as a request names it: a name, an IPv4 address or an IPv6
/// address in brackets. Names are taken in lower case without a trailing dot.
fn parse_authority(text: &str) -> Option<(Host, Option<u16>)> {
    let (host, port) = split_port(text)?;
    Some((host_of(host)?, port))
}

/// Split `host[:port]`; `None` when the port is not a number.
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    if text.starts_with('[') {
        let end = text.find(']')?;
        let (host, rest) = text.split_at(end + 1);
        return match rest {
            "" => Some((host, None)),
            _ => Some((host, Some(rest.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match text.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((text, None)),
    }
}

fn host_of(text: &str) -> Option<Host> {
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().ok().map(|ip| Host::Ip(ip.into()));
    }
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Some(Host::Ip(ip.into()));
    }
    let name = text.strip_suffix('.').unwrap_or(text);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    valid.then(|| Host::Name(name.to_ascii_lowercase()))
}

pub(crate) async fn check_host(State(security): State<ApiSecurity>, req: Request, next: Next) -> Response {
    if !security.checks_host() {
        return next.run(req).await;
    }
    // Every name the request gives for the server: its `Host` headers and,
    // in HTTP/2 or an absolute-form HTTP/1 target, the URI's authority. A
    // request with none (HTTP/1.0) is not a browser's, so not a page's.
    let names = req
        .headers()
        .get_all(header::HOST)
        .iter()
        .map(|v| v.to_str().ok())
        .chain(req.uri().authority().map(|a| Some(a.as_str())));
    for name in names {
        let ok = name.is_some_and(|n| {
            allowed(&security.allowed_hosts, security.listen, n)
                || parse_authority(n).is_some_and(|(host, port)| security.webhook_host.lists(&host, port))
        });
        if !ok {
            tracing::debug!("refused a request for a host this server does not answer to");
            return refusal(&security, name).into_response();
        }
    }
    next.run(req).await
}

fn refusal(security: &ApiSecurity, name: Option<&str>) -> ApiError {
    let shown = match name {
        Some(n) if n.chars().count() > 100 => format!("{:?}...", n.chars().take(100).collect::<String>()),
        Some(n) => format!("{n:?}"),
        None => "(not text)".to_string(),
    };
    let detail = if security.requires_token() {
        format!("Host {shown} is not listed in {SETTING}")
    } else {
        format!(
            "Host {shown} is not a name of this server: without API tokens only requests to a loopback \
             address, localhost or the listen address are served, so that a web page on another name that \
             resolves here (DNS rebinding) cannot use the engine; list the name in {SETTING} to allow it"
        )
    };
    ApiError::new(StatusCode::FORBIDDEN, kind::FORBIDDEN, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> AllowedHosts {
        let entries: Vec<String> = entries.iter().map(|s| s.to_string()).collect();
        AllowedHosts::parse(&entries).unwrap_or_else(|e| panic!("{e}"))
    }

    const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(Ipv4Addr::LOCALHOST));

    #[test]
    fn loopback_localhost_and_the_listen_address_are_always_served() {
        let none = AllowedHosts::default();
        for host in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
            "[::ffff:127.0.0.1]:80",
            "localhost",
            "LOCALHOST:8080",
            "localhost.:8080",
            "ui.localhost:3000",
        ] {
            assert!(allowed(&none, LOOPBACK, host), "{host}");
        }
        let lan = Some(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 5)));
        assert!(allowed(&none, lan, "192.168.1.5:8080"));
        assert!(!allowed(&none, lan, "192.168.1.6:8080"));
        // On every address, any address literal is this machine.
        let every = Some(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert!(allowed(&none, every, "10.1.2.3:8080"));
        assert!(!allowed(&none, every, "tartan.internal:8080"));
    }

    #[test]
    fn other_names_need_listing() {
        let none = AllowedHosts::default();
        for host in [
            "rebind.attacker.example",
            "rebind.attacker.example:8080",
            "localhost.attacker.example",
            "attackerlocalhost",
            "0.0.0.0:8080",
            "10.0.0.1",
            "2130706433",
            "",
            "::1",
            "[::1",
            "[::1]x",
            "localhost:http",
            "localhost:99999",
            "a b",
            "user@localhost",
        ] {
            assert!(!allowed(&none, LOOPBACK, host), "{host:?}");
        }
        let listed = list(&[
            "tartan.internal",
            "ui.example:8443",
            "*.svc.cluster.local",
            "10.0.0.1",
        ]);
        for host in [
            "tartan.internal",
            "Tartan.Internal.:9",
            "ui.example:8443",
            "a.svc.cluster.local:8080",
            "10.0.0.1:8080",
        ] {
            assert!(allowed(&listed, LOOPBACK, host), "{host}");
        }
        for host in ["ui.example", "ui.example:80", "svc.cluster.local", "evil.example"] {
            assert!(!allowed(&listed, LOOPBACK, host), "{host}");
        }
        assert!(allowed(&list(&["*"]), LOOPBACK, "anything.example:1"));
    }

    #[test]
    fn entries_that_are_not_hosts_are_refused_naming_them() {
        for bad in [
            "http://ui.example",
            "ui.example/path",
            "ui.example:port",
            "*",
            "*.",
            "**.example",
            "a b",
            "[::1",
            "",
        ] {
            let parsed = AllowedHosts::parse(&[bad.to_string()]);
            if bad == "*" {
                assert!(parsed.is_ok_and(|h| h.is_set()));
                continue;
            }
            let Err(e) = parsed else {
                panic!("{bad:?} was taken");
            };
            assert!(e.contains(&format!("{:?}", bad.trim())), "{e}");
        }
        assert!(!AllowedHosts::default().is_set());
        let hook = AllowedHosts::default().and_host_of("http://Tartan-1.internal:8080/base");
        assert!(allowed(&hook, LOOPBACK, "tartan-1.internal:9"));
        let hook = AllowedHosts::default().and_host_of("http://[::1]:8080");
        assert!(allowed(&hook, LOOPBACK, "[::1]:1"));
        assert!(!AllowedHosts::default()
            .and_host_of("http://0.0.0.0:8080")
            .is_set());
        assert!(!AllowedHosts::default().and_host_of("not a url").is_set());
        assert_eq!(
            list(&["::1", "[::1]:8080"]).entries.len(),
            2,
            "a bare IPv6 address and one with a port"
        );
    }
}
