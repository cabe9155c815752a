//! What keeps the API safe to expose (docs/security.md): the Host check
//! against DNS rebinding, bearer tokens, JSON-only writes and CORS,
//! configured once by [`ApiSecurity`].
//!
//! The layers run in this order: CORS (answers preflights), then the Host
//! check, then the WebSocket handshake's origin check, then
//! authentication, then the media-type check, then the routes.

mod auth;
mod cors;
mod host;
mod media;
mod origin;

use std::net::{IpAddr, SocketAddr};

pub use auth::Access;
pub(crate) use auth::{is_read, require_token};
pub(crate) use cors::cors_layer;
pub(crate) use host::check_host;
pub use host::AllowedHosts;
pub use media::is_media_type;
pub(crate) use media::require_json;
pub(crate) use origin::websocket_origin;

use sha2::{Digest, Sha256};

/// The API's security settings.
#[derive(Clone, Default)]
pub struct ApiSecurity {
    tokens: auth::Tokens,
    cors_origins: Vec<String>,
    allowed_hosts: AllowedHosts,
    /// The address the server listens on: a request may name it.
    listen: Option<IpAddr>,
    /// The host of the webhook URLs: step services name it.
    webhook_host: AllowedHosts,
}

/// Why a security setting was refused.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SecurityConfigError(pub String);

impl ApiSecurity {
    /// No tokens and no CORS: the loopback-only default.
    pub fn open() -> Self {
        Self::default()
    }

    /// `api` tokens grant everything, `read` tokens `GET` routes (and the
    /// read-only POSTs `/engine/plan` and `/engine/flow/query`); `cors_origins`
    /// lists exact origins (`https://ui.example.com`) or `*`.
    pub fn new(
        api: &[String],
        read: &[String],
        cors_origins: &[String],
    ) -> Result<Self, SecurityConfigError> {
        for (setting, list) in [("TARTAN_API_TOKEN", api), ("TARTAN_READ_TOKEN", read)] {
            if let Some(why) = list.iter().find_map(|t| token_problem(t)) {
                return Err(SecurityConfigError(format!("{setting}: {why}")));
            }
        }
        for origin in cors_origins {
            cors::check_origin(origin)
                .map_err(|e| SecurityConfigError(format!("TARTAN_CORS_ORIGINS: {e}")))?;
        }
        Ok(Self {
            tokens: auth::Tokens {
                api: api.iter().map(|t| digest(t)).collect(),
                read: read.iter().map(|t| digest(t)).collect(),
            },
            cors_origins: cors_origins.to_vec(),
            allowed_hosts: AllowedHosts::default(),
            listen: None,
            webhook_host: AllowedHosts::default(),
        })
    }

    /// Host names requests may name besides loopback, `localhost` and the
    /// listen address (`TARTAN_ALLOWED_HOSTS`).
    pub fn with_allowed_hosts(mut self, hosts: AllowedHosts) -> Self {
        self.allowed_hosts = hosts;
        self
    }

    /// The address the server is bound to, and the base of the webhook
    /// URLs it hands out: requests may name either.
    pub(crate) fn serving(mut self, addr: SocketAddr, webhook_base_url: &str) -> Self {
        self.listen = Some(addr.ip());
        self.webhook_host = AllowedHosts::default().and_host_of(webhook_base_url);
        self
    }

    /// Whether requests must name an allowed host: always without tokens
    /// (a rebinding page needs none), and whenever hosts are listed.
    pub(crate) fn checks_host(&self) -> bool {
        !self.requires_token() || self.allowed_hosts.is_set()
    }

    pub(crate) fn cors_origins(&self) -> &[String] {
        &self.cors_origins
    }

    /// Whether any token is configured (else every request is let in).
    pub fn requires_token(&self) -> bool {
        !self.tokens.api.is_empty() || !self.tokens.read.is_empty()
    }
}

impl std::fmt::Debug for ApiSecurity {
    /// Counts only: tokens are never printed, not even hashed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiSecurity")
            .field("api_tokens", &self.tokens.api.len())
            .field("read_tokens", &self.tokens.read.len())
            .field("cors_origins", &self.cors_origins)
            .field("allowed_hosts", &self.allowed_hosts)
            .finish()
    }
}

/// Shortest token accepted, in characters. Nothing limits failed attempts
/// (docs/security.md), so only a token's length keeps it from being
/// guessed: below this a search is feasible; 32 random bytes is the advice.
pub const MIN_TOKEN_LEN: usize = 16;

/// Why `token` cannot be a bearer token; `None` when it can. Never shows
/// the token.
pub fn token_problem(token: &str) -> Option<String> {
    // A token must fit in a header; anything else could never match.
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Some("a token must be visible ASCII characters without spaces or commas".into());
    }
    if is_placeholder(token) {
        return Some(
            "this token is the examples' placeholder (CHANGE-ME), not a secret: make one with \
             `openssl rand -hex 32`"
                .into(),
        );
    }
    if token.len() < MIN_TOKEN_LEN {
        return Some(format!(
            "a token of {} characters is too short: at least {MIN_TOKEN_LEN} are needed \
             (`openssl rand -hex 32` makes a good one)",
            token.len()
        ));
    }
    None
}

/// Whether `value` holds the placeholder of the examples' secrets
/// (`deploy/k8s/secret.yaml`, `tartan.example.toml`): applied unchanged, a
/// token everyone can read would open the API to anyone.
pub fn is_placeholder(value: &str) -> bool {
    value
        .get(..9)
        .is_some_and(|start| start.eq_ignore_ascii_case("change-me"))
}

/// Tokens are kept and compared as SHA-256 digests: equal lengths, so the
/// constant-time comparison does not reveal a token's length either.
fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}
