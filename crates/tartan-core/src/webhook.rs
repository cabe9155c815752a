//! The shape of the URL an async step delivers its result to
//! (docs/security.md, "Webhooks"): `<base>/webhook/<flow>/<step>/<token>`,
//! and, as handed to the step, one more segment, the signature the engine
//! makes of it. The server's routes match these shapes.

/// The unsigned URL of an item's webhook: what flow state keeps (a
/// `webhook_url` meta input).
pub fn url(base: &str, flow_id: &str, step_id: &str, token: &str) -> String {
    format!(
        "{}/webhook/{flow_id}/{step_id}/{token}",
        base.trim_end_matches('/')
    )
}

/// The URL handed to the step: the unsigned one and its signature.
pub fn signed_url(base: &str, flow_id: &str, step_id: &str, token: &str, signature: &str) -> String {
    format!("{}/{signature}", url(base, flow_id, step_id, token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_last_segment() {
        assert_eq!(url("http://h:1/", "f", "s", "t"), "http://h:1/webhook/f/s/t");
        assert_eq!(
            signed_url("http://h:1", "f", "s", "t", "sig"),
            "http://h:1/webhook/f/s/t/sig"
        );
    }
}
