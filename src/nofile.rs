//! The open-file limit (docs/operating.md, "Connections"). Every connection
//! is a file descriptor, as are the database's connections and the step
//! calls': the process raises its soft limit to the hard one at start, and
//! by default takes at most half of it for connections.

use tartan_server::DEFAULT_MAX_CONNECTIONS;

/// Raise the soft open-file limit to the hard one; the limit now in force,
/// if it can be read.
pub fn raise() -> Option<u64> {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => Some(limit),
        Err(e) => {
            tracing::warn!("cannot raise the open-file limit (RLIMIT_NOFILE): {e}");
            rlimit::getrlimit(rlimit::Resource::NOFILE)
                .ok()
                .map(|(soft, _)| soft)
        }
    }
}

/// The most connections at once: as configured, else half the open-file
/// limit (the other half for the database, step calls, logs), at most
/// `DEFAULT_MAX_CONNECTIONS`.
pub fn max_connections(configured: Option<usize>, limit: Option<u64>) -> usize {
    let half = limit.map(|l| usize::try_from(l / 2).unwrap_or(usize::MAX));
    match configured {
        Some(n) => n,
        None => half
            .unwrap_or(DEFAULT_MAX_CONNECTIONS)
            .clamp(1, DEFAULT_MAX_CONNECTIONS),
    }
}

/// Whether `max` connections leave too few descriptors for the rest.
pub fn leaves_too_few(max: usize, limit: Option<u64>) -> bool {
    limit.is_some_and(|l| u64::try_from(max).unwrap_or(u64::MAX) > l / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_half_the_limit_at_most_ten_thousand() {
        assert_eq!(max_connections(None, Some(256)), 128);
        assert_eq!(max_connections(None, Some(1_048_576)), 10_000);
        assert_eq!(max_connections(None, Some(u64::MAX)), 10_000);
        assert_eq!(max_connections(None, Some(1)), 1);
        assert_eq!(max_connections(None, None), 10_000);
        assert_eq!(max_connections(Some(20), Some(256)), 20);
        assert_eq!(max_connections(Some(500), Some(256)), 500);
        assert!(leaves_too_few(500, Some(256)));
        assert!(!leaves_too_few(128, Some(256)));
        assert!(!leaves_too_few(500, None));
    }
}
