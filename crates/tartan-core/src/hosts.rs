//! Where steps may call: the `TARTAN_STEP_HOSTS` policy.
//!
//! The setting is a comma-separated list of host names (`api.example.com`),
//! patterns (`*.example.com`: any subdomain, not the apex), IP addresses and
//! CIDR ranges (`10.0.0.0/8`, `fd00::/8`). An address is allowed when a listed
//! range holds it; otherwise when the URL named a listed host or pattern, its
//! resolved addresses are allowed except link-local ones; with no setting at
//! all, every address but link-local is allowed.
//!
//! Link-local addresses (`169.254.0.0/16`, `fe80::/10`) are where cloud
//! metadata services answer, so they are only reachable when a listed range
//! holds them: neither a listed name nor DNS can lead there.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;
use url::Host;

/// The setting's name, for messages.
pub const SETTING: &str = "TARTAN_STEP_HOSTS";

/// The parsed policy. The default is no setting: every address but
/// link-local.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepHosts {
    /// `None` when the setting is absent.
    list: Option<HostList>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct HostList {
    /// Exact names, lower-case, without a trailing dot.
    names: Vec<String>,
    /// `*.example.com` kept as `.example.com`.
    suffixes: Vec<String>,
    /// Ranges; a single address is a /32 or /128.
    nets: Vec<IpNet>,
}

/// An entry of the setting that is not a name, pattern, address or range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostsError {
    pub entry: String,
    pub reason: String,
}

impl fmt::Display for HostsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid entry {:?}: {}", self.entry, self.reason)
    }
}

impl std::error::Error for HostsError {}

/// A host or the addresses it resolved to that the policy refuses. The
/// engine's resolver returns it, so the dispatcher can tell it from a
/// network failure and fail the call for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNotAllowed {
    /// The host as the URL gave it (a name or an address).
    pub host: String,
    /// The addresses refused; empty when the name itself is not allowed.
    pub addrs: Vec<IpAddr>,
}

impl fmt::Display for HostNotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let literal = self.addrs.len() == 1 && self.addrs[0].to_string() == self.host;
        match self.addrs.as_slice() {
            [] => write!(f, "host {} is not allowed", self.host)?,
            [one] if literal => write!(f, "address {one} is not allowed")?,
            [one] => write!(f, "address {one} of host {} is not allowed", self.host)?,
            many => {
                let list: Vec<String> = many.iter().map(IpAddr::to_string).collect();
                write!(
                    f,
                    "addresses {} of host {} are not allowed",
                    list.join(", "),
                    self.host
                )?;
            }
        }
        write!(f, " by the step host policy ({SETTING})")?;
        if self.addrs.iter().any(|a| is_link_local(*a)) {
            write!(
                f,
                "; link-local addresses are only reachable when a listed range holds them"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for HostNotAllowed {}

impl StepHosts {
    /// No setting: every address but link-local.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Parse the comma-separated setting. Empty entries (`a,,b`, a trailing
    /// comma) are skipped; a setting with no entry at all is an error, as it
    /// would allow nothing.
    pub fn parse(setting: &str) -> Result<Self, HostsError> {
        let mut list = HostList::default();
        for entry in setting.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let bad = |reason: &str| HostsError {
                entry: entry.to_string(),
                reason: reason.to_string(),
            };
            if entry.contains("://") {
                return Err(bad("a host, not a URL: leave out the scheme, port and path"));
            }
            if entry.contains('/') {
                let net = IpNet::from_str(entry.trim_start_matches('[').replace("]/", "/").as_str())
                    .map_err(|_| bad("not a CIDR range (e.g. 10.0.0.0/8 or fd00::/8)"))?;
                list.nets.push(net.trunc());
            } else if let Some(ip) = parse_ip(entry) {
                list.nets.push(IpNet::from(ip));
            } else if let Some(rest) = entry.strip_prefix("*.") {
                list.suffixes
                    .push(format!(".{}", parse_name(rest).map_err(|r| bad(&r))?));
            } else if entry.contains('*') {
                return Err(bad(
                    "a pattern is *. followed by a domain (e.g. *.example.com); to allow any name, list the address ranges it may resolve to",
                ));
            } else {
                match Host::parse(entry) {
                    // Numeric forms the URL parser reads as addresses
                    // (`2130706433`, `0x7f.1`) are addresses here too.
                    Ok(Host::Ipv4(ip)) => list.nets.push(IpNet::from(IpAddr::V4(ip))),
                    Ok(Host::Ipv6(ip)) => list.nets.push(IpNet::from(IpAddr::V6(ip))),
                    _ => list.names.push(parse_name(entry).map_err(|r| bad(&r))?),
                }
            }
        }
        if list.names.is_empty() && list.suffixes.is_empty() && list.nets.is_empty() {
            return Err(HostsError {
                entry: setting.to_string(),
                reason: "no entries; leave the setting out to allow every address but link-local".into(),
            });
        }
        Ok(Self { list: Some(list) })
    }

    /// Whether a setting was given.
    pub fn is_restricted(&self) -> bool {
        self.list.is_some()
    }

    /// Whether `name` (a host name as the URL parser normalised it) is
    /// listed, by name or pattern.
    pub fn name_listed(&self, name: &str) -> bool {
        let Some(list) = &self.list else {
            return false;
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        list.names.contains(&name) || list.suffixes.iter().any(|s| name.ends_with(s.as_str()))
    }

    /// Whether a connection to `ip` is allowed, `name_listed` saying whether
    /// the URL named a listed host (false for an address in the URL).
    pub fn allows_address(&self, name_listed: bool, ip: IpAddr) -> bool {
        let Some(list) = &self.list else {
            return !is_link_local(ip);
        };
        let plain = canonical(ip);
        if list.nets.iter().any(|n| n.contains(&ip) || n.contains(&plain)) {
            return true;
        }
        name_listed && !is_link_local(ip)
    }

    /// Check a URL's host before any lookup: an address against the ranges;
    /// a name against the names and patterns, unless ranges are listed, in
    /// which case its addresses decide once it is resolved.
    pub fn check_host(&self, host: &Host<&str>) -> Result<(), HostNotAllowed> {
        let ip = match host {
            Host::Ipv4(ip) => IpAddr::V4(*ip),
            Host::Ipv6(ip) => IpAddr::V6(*ip),
            Host::Domain(name) => {
                let deferred = self.list.as_ref().is_none_or(|l| !l.nets.is_empty());
                if deferred || self.name_listed(name) {
                    return Ok(());
                }
                return Err(HostNotAllowed {
                    host: (*name).to_string(),
                    addrs: Vec::new(),
                });
            }
        };
        if self.allows_address(false, ip) {
            Ok(())
        } else {
            Err(HostNotAllowed {
                host: ip.to_string(),
                addrs: vec![ip],
            })
        }
    }

    /// Keep the addresses `name` resolved to that the policy allows; none
    /// left (out of some) is a refusal naming them all.
    pub fn filter_resolved(
        &self,
        name: &str,
        addrs: impl IntoIterator<Item = SocketAddr>,
    ) -> Result<Vec<SocketAddr>, HostNotAllowed> {
        let listed = self.name_listed(name);
        let all: Vec<SocketAddr> = addrs.into_iter().collect();
        let allowed: Vec<SocketAddr> = all
            .iter()
            .copied()
            .filter(|a| self.allows_address(listed, a.ip()))
            .collect();
        if allowed.is_empty() && !all.is_empty() {
            let mut refused: Vec<IpAddr> = all.iter().map(SocketAddr::ip).collect();
            refused.dedup();
            return Err(HostNotAllowed {
                host: name.to_string(),
                addrs: refused,
            });
        }
        Ok(allowed)
    }
}

impl fmt::Display for StepHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(list) = &self.list else {
            return f.write_str("any address but link-local");
        };
        let entries: Vec<String> = list
            .names
            .iter()
            .cloned()
            .chain(list.suffixes.iter().map(|s| format!("*{s}")))
            .chain(list.nets.iter().map(IpNet::to_string))
            .collect();
        f.write_str(&entries.join(","))
    }
}

/// An address as written (`10.0.0.1`, `::1`, `[::1]`).
fn parse_ip(entry: &str) -> Option<IpAddr> {
    let bare = entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .unwrap_or(entry);
    IpAddr::from_str(bare).ok()
}

/// A host name as the URL parser would normalise it (lower case, IDNA to
/// ASCII), without a trailing dot.
fn parse_name(text: &str) -> Result<String, String> {
    let name = match Host::parse(text) {
        Ok(Host::Domain(d)) => d,
        Ok(_) => return Err("an address cannot follow *.".into()),
        Err(e) => return Err(format!("not a host name ({e})")),
    };
    let name = name.trim_end_matches('.').to_string();
    let labels_ok = !name.is_empty()
        && name.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if labels_ok {
        Ok(name)
    } else {
        Err("not a host name (labels of letters, digits, - and _, 1 to 63 characters, without a scheme, port or path)".into())
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is the IPv4 address: a
/// dual-stack socket connects to it.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Link-local, where metadata services live: `169.254.0.0/16`, `fe80::/10`,
/// and the same IPv4 range mapped into IPv6 (`::ffff:0:0/96`) or behind the
/// NAT64 well-known prefix (`64:ff9b::/96`).
pub fn is_link_local(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80 || nat64(v6).is_some_and(|v4| v4.is_link_local())
        }
    }
}

/// The IPv4 address behind the NAT64 well-known prefix `64:ff9b::/96`.
fn nat64(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0]).then(|| {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        IpAddr::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn host(url: &str) -> Host<String> {
        url::Url::parse(url)
            .ok()
            .and_then(|u| u.host().map(|h| h.to_owned()))
            .unwrap_or_else(|| panic!("no host in {url}"))
    }

    fn check(policy: &StepHosts, url: &str) -> Result<(), HostNotAllowed> {
        let h = host(url);
        let h = match &h {
            Host::Domain(d) => Host::Domain(d.as_str()),
            Host::Ipv4(a) => Host::Ipv4(*a),
            Host::Ipv6(a) => Host::Ipv6(*a),
        };
        policy.check_host(&h)
    }

    #[test]
    fn no_setting_allows_everything_but_link_local() {
        let p = StepHosts::unrestricted();
        assert!(p.allows_address(false, ip("127.0.0.1")));
        assert!(p.allows_address(false, ip("10.1.2.3")));
        assert!(p.allows_address(false, ip("::1")));
        for bad in [
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "febf::1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(!p.allows_address(false, ip(bad)), "{bad}");
            assert!(!p.allows_address(true, ip(bad)), "{bad}");
        }
        assert!(
            p.allows_address(false, ip("fec0::1")),
            "fec0::/10 is not link-local"
        );
    }

    #[test]
    fn every_spelling_of_the_metadata_address_is_refused() {
        let p = StepHosts::unrestricted();
        for url in [
            "http://169.254.169.254/",
            "http://2852039166/",
            "http://0xa9fea9fe/",
            "http://0251.0376.0251.0376/",
            "http://169.254.43518/",
            "http://[::ffff:169.254.169.254]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[fe80::1]/",
        ] {
            let e = check(&p, url).expect_err(url);
            assert!(
                e.to_string().contains("is not allowed by the step host policy"),
                "{e}"
            );
        }
        assert!(check(&p, "http://127.0.0.1:8080/").is_ok());
        assert!(
            check(&p, "http://metadata.example/").is_ok(),
            "names are checked once resolved"
        );
    }

    #[test]
    fn names_patterns_addresses_and_ranges_parse() {
        let p = StepHosts::parse(
            " API.Example.com. , *.svc.local,10.0.0.0/8, 192.168.1.7 ,::1,[fd00::1], fd00:1::/32,",
        )
        .unwrap();
        assert_eq!(
            p.to_string(),
            "api.example.com,*.svc.local,10.0.0.0/8,192.168.1.7/32,::1/128,fd00::1/128,fd00:1::/32"
        );
        assert!(p.name_listed("api.example.com"));
        assert!(p.name_listed("API.EXAMPLE.COM."));
        assert!(p.name_listed("a.svc.local"));
        assert!(p.name_listed("a.b.svc.local"));
        assert!(!p.name_listed("svc.local"), "a pattern does not match its apex");
        assert!(!p.name_listed("evilsvc.local"));
        assert!(!p.name_listed("api.example.com.evil.org"));
        assert!(p.allows_address(false, ip("10.200.0.1")));
        assert!(
            p.allows_address(false, ip("::ffff:10.200.0.1")),
            "mapped addresses are the IPv4 ones"
        );
        assert!(p.allows_address(false, ip("192.168.1.7")));
        assert!(!p.allows_address(false, ip("192.168.1.8")));
        assert!(!p.allows_address(false, ip("127.0.0.1")));
        assert!(
            p.allows_address(true, ip("127.0.0.1")),
            "a listed name may resolve anywhere..."
        );
        assert!(
            !p.allows_address(true, ip("169.254.169.254")),
            "...but not to link-local"
        );
        assert_eq!(
            StepHosts::parse("2130706433").unwrap().to_string(),
            "127.0.0.1/32"
        );
    }

    #[test]
    fn bad_entries_are_named() {
        for bad in [
            "10.0.0.0/33",
            "http://api.example.com",
            "api.example.com:443",
            "api.example.com/x",
            "*",
            "a.*.example.com",
            "*.",
            "exa mple.com",
            "user@host",
            "*.10.0.0.1",
        ] {
            let e = StepHosts::parse(&format!("ok.example.com,{bad}")).expect_err(bad);
            assert_eq!(e.entry, bad, "{e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
        assert!(StepHosts::parse(" , ").is_err());
    }

    #[test]
    fn link_local_needs_an_explicit_range() {
        let by_name = StepHosts::parse("metadata.internal").unwrap();
        let refused = by_name
            .filter_resolved("metadata.internal", [SocketAddr::new(ip("169.254.169.254"), 0)])
            .unwrap_err();
        assert_eq!(refused.addrs, vec![ip("169.254.169.254")]);
        assert!(refused.to_string().contains("link-local"), "{refused}");
        let by_range = StepHosts::parse("169.254.169.254/32").unwrap();
        assert!(check(&by_range, "http://169.254.169.254/").is_ok());
        assert!(check(&by_range, "http://[::ffff:169.254.169.254]/").is_ok());
        assert!(check(&by_range, "http://169.254.169.253/").is_err());
    }

    #[test]
    fn names_are_checked_by_name_or_deferred_to_their_addresses() {
        let names = StepHosts::parse("localhost,*.example.com").unwrap();
        assert!(check(&names, "http://localhost:9/").is_ok());
        assert!(check(&names, "http://a.example.com/").is_ok());
        let e = check(&names, "http://example.com/").unwrap_err();
        assert_eq!(
            e.to_string(),
            "host example.com is not allowed by the step host policy (TARTAN_STEP_HOSTS)"
        );
        assert!(
            check(&names, "http://127.0.0.1/").is_err(),
            "an address needs a range"
        );

        let ranges = StepHosts::parse("10.0.0.0/8").unwrap();
        assert!(
            check(&ranges, "http://localhost/").is_ok(),
            "decided after resolution"
        );
        let e = ranges
            .filter_resolved(
                "localhost",
                [SocketAddr::new(ip("127.0.0.1"), 0), SocketAddr::new(ip("::1"), 0)],
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "addresses 127.0.0.1, ::1 of host localhost are not allowed by the step host policy (TARTAN_STEP_HOSTS)"
        );
        let kept = ranges
            .filter_resolved(
                "internal.example",
                [
                    SocketAddr::new(ip("127.0.0.1"), 0),
                    SocketAddr::new(ip("10.1.1.1"), 0),
                ],
            )
            .unwrap();
        assert_eq!(
            kept,
            vec![SocketAddr::new(ip("10.1.1.1"), 0)],
            "only the allowed addresses are used"
        );
    }
}
