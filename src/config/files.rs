//! Settings whose values are read from files the configuration names: API
//! tokens (`api_token_file`, `read_token_file`) and the TLS of step calls
//! (`step_ca_file`, `step_client_cert_file`, `step_client_key_file`). Each
//! file is read and checked at start, and an error names its setting.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use figment::Figment;

use super::{sources, values};

/// The CAs and client certificate of step calls, read from their files and
/// checked here, so that a bad file stops the start naming its setting.
pub(super) fn step_tls(
    figment: &Figment,
    ca: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
) -> Result<tartan_engine::StepTls> {
    let origin = |key: &str| sources::origin(figment, key);
    let read = |key: &str, path: &PathBuf| {
        std::fs::read(path).with_context(|| format!("{}: reading {}", origin(key), path.display()))
    };
    let ca_pem = ca.as_ref().map(|p| read("step_ca_file", p)).transpose()?;
    let identity_pem = match (cert, key) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let mut pem = read("step_client_cert_file", &cert)?;
            pem.push(b'\n');
            pem.extend(read("step_client_key_file", &key)?);
            Some(pem)
        }
        (Some(_), None) => bail!(
            "{} is set without step_client_key_file",
            origin("step_client_cert_file")
        ),
        (None, Some(_)) => bail!(
            "{} is set without step_client_cert_file",
            origin("step_client_key_file")
        ),
    };
    let tls = tartan_engine::StepTls { ca_pem, identity_pem };
    tls.roots()
        .map_err(|e| anyhow::anyhow!("{}: {e}", origin("step_ca_file")))?;
    tls.identity().map_err(|e| {
        anyhow::anyhow!(
            "{} and {}: {e}",
            origin("step_client_cert_file"),
            origin("step_client_key_file")
        )
    })?;
    Ok(tls)
}

/// The tokens of one setting, from its value or its `_file` (not both):
/// comma- or newline-separated, blanks ignored. Never logged.
pub(super) fn tokens(
    figment: &Figment,
    key: &str,
    given: Vec<String>,
    file: Option<PathBuf>,
) -> Result<Vec<String>> {
    let file_key = format!("{key}_file");
    let read_from = |path: &PathBuf| {
        std::fs::read_to_string(path).with_context(|| {
            format!(
                "{}: reading {}",
                sources::origin(figment, &file_key),
                path.display()
            )
        })
    };
    let (tokens, origin) = match (given.is_empty(), file) {
        (false, Some(_)) => bail!(
            "set {} or {}, not both",
            sources::origin(figment, key),
            sources::origin(figment, &file_key)
        ),
        (false, None) => (given, sources::origin(figment, key)),
        (true, Some(path)) => (
            values::split_list(&read_from(&path)?),
            sources::origin(figment, &file_key),
        ),
        (true, None) => return Ok(Vec::new()),
    };
    if tokens.is_empty() {
        bail!("{origin} is set but holds no token");
    }
    // Checked here too, where the setting that gave the token is known
    // (a file, the TOML file, a flag); the server checks its own.
    if let Some(why) = tokens.iter().find_map(|t| tartan_server::token_problem(t)) {
        bail!("{origin}: {why}");
    }
    Ok(tokens)
}
