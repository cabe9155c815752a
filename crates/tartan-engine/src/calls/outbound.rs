//! The HTTP client of step calls and the rules it enforces on every
//! connection: names resolve only to addresses the step host policy allows,
//! redirects are followed only within the origin first called, and no proxy
//! from the environment is used (it would connect on our behalf, out of
//! reach of the address check). Step endpoints on a private CA, or that
//! ask for a client certificate, are reached with `StepTls`.

use std::fmt;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Attempt, Policy};
use tartan_core::hosts::{HostNotAllowed, StepHosts};

use crate::config::StepTls;

/// Redirects followed in one call at most.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// A redirect the call refused to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RedirectRefused {
    /// To another scheme, host or port than the URL first called.
    OtherOrigin { location: String },
    /// More than `MAX_REDIRECTS` in a row.
    TooMany { location: String },
}

impl fmt::Display for RedirectRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedirectRefused::OtherOrigin { location } => {
                write!(f, "redirect to another origin refused: Location {location}")
            }
            RedirectRefused::TooMany { location } => write!(
                f,
                "more than {MAX_REDIRECTS} redirects; the last one refused: Location {location}"
            ),
        }
    }
}

impl std::error::Error for RedirectRefused {}

/// Resolves names with the system resolver and keeps only the addresses the
/// policy allows for that name. Addresses written in a URL never come here
/// (the connector uses them as they are): the dispatcher checks those.
struct PolicyResolver {
    hosts: Arc<StepHosts>,
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let hosts = self.hosts.clone();
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let allowed = hosts.filter_resolved(&host, found)?;
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// A URL for messages, its password left out.
fn shown(url: &reqwest::Url) -> String {
    let mut url = url.clone();
    if url.password().is_some() {
        let _ = url.set_password(Some("***"));
    }
    url.to_string()
}

fn redirect_rule(hosts: Arc<StepHosts>) -> Policy {
    Policy::custom(move |attempt: Attempt| {
        let next = attempt.url();
        let location = shown(next);
        // `previous` starts with the URL first called.
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == next.origin());
        if !same_origin {
            return attempt.error(RedirectRefused::OtherOrigin { location });
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(RedirectRefused::TooMany { location });
        }
        // The same origin was checked before the first request; checked
        // again so that the rule holds on its own.
        if let Some(Err(e)) = next.host().map(|h| hosts.check_host(&h)) {
            return attempt.error(e);
        }
        attempt.follow()
    })
}

/// What every call to a step says it is: Argyll's product first, so a
/// step service that looks for Argyll's engine finds it, then Tartan's.
pub const USER_AGENT: &str = concat!("Argyll-Engine/0.1 Tartan/", env!("CARGO_PKG_VERSION"));

/// The client every step call goes through.
pub(crate) fn client(hosts: &StepHosts, tls: &StepTls) -> Result<reqwest::Client, String> {
    let hosts = Arc::new(hosts.clone());
    let mut builder = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .pool_max_idle_per_host(64)
        .no_proxy()
        .dns_resolver(Arc::new(PolicyResolver { hosts: hosts.clone() }))
        .redirect(redirect_rule(hosts));
    for root in tls.roots()? {
        builder = builder.add_root_certificate(root);
    }
    if let Some(identity) = tls.identity()? {
        builder = builder.identity(identity);
    }
    builder.build().map_err(|e| e.to_string())
}

/// The policy's refusal behind a failed call, if that is why it failed:
/// the resolver's `HostNotAllowed` or the redirect rule's refusal.
pub(crate) fn refusal(e: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<HostNotAllowed>() {
            return Some(r.to_string());
        }
        if let Some(r) = s.downcast_ref::<RedirectRefused>() {
            return Some(r.to_string());
        }
        source = s.source();
    }
    None
}
