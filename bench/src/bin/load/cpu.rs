//! CPU time from `/proc`, so that `load api` can say where a change moved
//! cost: the engine process's own (user + system), and the machine's
//! Postgres (every `postgres` process, plus what the postmaster collected
//! from the backends that exited: the machine is shared, so this counts
//! whatever else asks Postgres meanwhile too). Linux only; elsewhere, or
//! when `/proc` cannot be read, the figures are absent.

use std::process::Command;
use std::sync::OnceLock;

/// CPU seconds used so far, as far as they are known.
#[derive(Debug, Clone, Copy, Default)]
pub struct Mark {
    pub engine: Option<f64>,
    pub postgres: Option<f64>,
}

impl Mark {
    /// Now, for the engine `pid` (when known) and Postgres (when wanted).
    pub fn now(pid: Option<u32>, postgres: bool) -> Mark {
        Mark {
            engine: pid.and_then(|pid| own_seconds(&format!("/proc/{pid}/stat"))),
            postgres: if postgres { postgres_seconds() } else { None },
        }
    }

    /// Milliseconds per flow of each part from `self` to `later`, over `flows`.
    pub fn per_flow_ms(self, later: Mark, flows: u64) -> Mark {
        let per = |a: Option<f64>, b: Option<f64>| Some((b? - a?) * 1000.0 / flows.max(1) as f64);
        Mark {
            engine: per(self.engine, later.engine),
            postgres: per(self.postgres, later.postgres),
        }
    }
}

/// Clock ticks per second of `/proc`'s times (`getconf CLK_TCK`; 100 on
/// every Linux we know of, used when `getconf` is missing).
fn ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// A process's `stat` fields after its name (which may hold spaces and
/// parentheses, so they start after the last `)`): field 3 onwards.
fn fields(stat: &str) -> Option<Vec<&str>> {
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().collect())
}

/// Ticks at `i` (0 = field 3, the state) of a `stat`'s fields.
fn ticks(fields: &[&str], i: usize) -> Option<f64> {
    fields.get(i)?.parse::<f64>().ok()
}

/// utime + stime (fields 14 and 15) in seconds.
fn own_seconds(path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    let f = fields(&stat)?;
    Some((ticks(&f, 11)? + ticks(&f, 12)?) / ticks_per_second())
}

/// Every `postgres` process's utime + stime + cutime + cstime (fields
/// 14–17), in seconds; absent when none is seen.
fn postgres_seconds() -> Option<f64> {
    let mut total = 0.0;
    let mut seen = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = entry.path().join("stat");
        let Ok(stat) = std::fs::read_to_string(&path) else {
            continue;
        };
        if !stat.contains("(postgres)") {
            continue;
        }
        let Some(f) = fields(&stat) else { continue };
        let sum: Option<f64> = (11..15).map(|i| ticks(&f, i)).sum();
        if let Some(sum) = sum {
            total += sum;
            seen = true;
        }
    }
    seen.then(|| total / ticks_per_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 7 3 20 0";
        let f = fields(stat).unwrap_or_default();
        assert_eq!(ticks(&f, 11), Some(250.0));
        assert_eq!(ticks(&f, 12), Some(50.0));
        assert_eq!(ticks(&f, 14), Some(3.0));
    }
}
