//! Signed webhook URLs (docs/security.md, "Webhooks").
//!
//! Receipt tokens are visible to every reader of flow state, so a token alone
//! must not be enough to complete someone else's work. The URL handed to an
//! async step carries one more path segment: a keyed MAC of flow, step,
//! token and attempt that no API response shows. The key lives in the
//! database, so it is stable across restarts and shared by every engine on
//! that database.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use tartan_store::StoreError;

use crate::error::EngineError;

/// The name of the key in the store's `secrets` table.
pub(crate) const KEY_NAME: &str = "webhook_key";
/// Bytes of MAC kept in the URL: 128 bits, 22 characters of base64url.
const MAC_BYTES: usize = 16;

pub(crate) struct WebhookKey {
    key: Vec<u8>,
}

impl WebhookKey {
    /// A new key, offered to the database under [`KEY_NAME`]: the first
    /// engine on a new database makes the key (`Store::secret`).
    pub(crate) fn candidate() -> String {
        URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
    }

    /// The key the database holds (what `Store::secret` answered).
    pub(crate) fn of_stored(stored: &str) -> Result<Self, EngineError> {
        let key = URL_SAFE_NO_PAD
            .decode(stored.trim())
            .map_err(|e| StoreError::Corrupt(format!("stored webhook key is not base64url: {e}")))?;
        if key.len() < 16 {
            return Err(StoreError::Corrupt("stored webhook key is too short".into()).into());
        }
        Ok(Self { key })
    }

    /// The signature segment of the webhook URL of one attempt of a work
    /// item: `{attempt}.{mac}`. The attempt is part of what is signed, so a
    /// result or heartbeat tells which call it belongs to (a late one of an
    /// older attempt is refused, docs/api.md "Webhooks").
    pub(crate) fn sign(&self, flow_id: &str, step_id: &str, token: &str, attempt: u32) -> String {
        let attempt = attempt.to_string();
        let mac = self.mac(&["tartan-webhook-v2", flow_id, step_id, token, &attempt]);
        format!("{attempt}.{}", URL_SAFE_NO_PAD.encode(mac))
    }

    /// Which attempt a signature was handed out for, if it is one `sign`
    /// gave: `Some(Some(n))`; `Some(None)` for the first form, without an
    /// attempt (URLs handed out before attempts were signed); `None` for a
    /// forgery. MACs are compared in constant time.
    pub(crate) fn verify(
        &self,
        flow_id: &str,
        step_id: &str,
        token: &str,
        signature: &str,
    ) -> Option<Option<u32>> {
        let (attempt, mac) = match signature.split_once('.') {
            Some((n, mac)) => (Some(n), mac),
            None => (None, signature),
        };
        let given = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let expected = match attempt {
            Some(n) => self.mac(&["tartan-webhook-v2", flow_id, step_id, token, n]),
            None => self.mac(&["tartan-webhook-v1", flow_id, step_id, token]),
        };
        if given.len() != expected.len() || !bool::from(given.ct_eq(&expected)) {
            return None;
        }
        match attempt {
            // Only a number this key signed gets here.
            Some(n) => n.parse().ok().map(Some),
            None => Some(None),
        }
    }

    fn mac(&self, parts: &[&str]) -> [u8; MAC_BYTES] {
        // new_from_slice accepts keys of any length for HMAC; the fallback
        // is unreachable but keeps this free of panics.
        let mut out = [0u8; MAC_BYTES];
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return out;
        };
        // NUL separates the parts: ids and tokens never contain it, so two
        // different tuples never feed the MAC the same bytes.
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        out.copy_from_slice(&mac.finalize().into_bytes()[..MAC_BYTES]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> WebhookKey {
        WebhookKey { key: vec![7; 32] }
    }

    #[test]
    fn a_signature_verifies_only_for_its_own_flow_step_token_and_attempt() {
        let k = key();
        let sig = k.sign("f", "s", "t", 3);
        assert!(sig.starts_with("3.") && sig.len() == 24, "{sig}");
        assert_eq!(k.verify("f", "s", "t", &sig), Some(Some(3)));
        assert_eq!(k.verify("f", "s", "u", &sig), None);
        assert_eq!(k.verify("g", "s", "t", &sig), None);
        assert_eq!(k.verify("f", "x", "t", &sig), None);
        // Another attempt number with this MAC is a forgery.
        assert_eq!(k.verify("f", "s", "t", &sig.replacen('3', "2", 1)), None);
        assert_eq!(k.verify("f", "s", "t", "heartbeat"), None);
        assert_eq!(k.verify("f", "s", "t", ""), None);
        assert_eq!(k.verify("f", "s", "t", "."), None);
        assert_eq!(k.verify("f", "s", "t", &sig[..23]), None);
    }

    #[test]
    fn the_first_form_without_an_attempt_still_verifies() {
        let k = key();
        let legacy = URL_SAFE_NO_PAD.encode(k.mac(&["tartan-webhook-v1", "f", "s", "t"]));
        assert_eq!(k.verify("f", "s", "t", &legacy), Some(None));
        assert_eq!(k.verify("f", "s", "u", &legacy), None);
    }

    #[test]
    fn another_key_gives_another_signature() {
        let other = WebhookKey { key: vec![8; 32] };
        assert_ne!(key().sign("f", "s", "t", 1), other.sign("f", "s", "t", 1));
    }
}
