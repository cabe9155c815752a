//! The process's own numbers under the names every Prometheus client
//! library gives them (`process_cpu_seconds_total`, ...), and
//! `tartan_build_info`. Read from `/proc/self` at each scrape (Linux only;
//! elsewhere the process series stay at zero). A few lines of `/proc` text
//! need no crate.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// `/proc` counts CPU time in USER_HZ, which Linux fixes at 100 a second
/// for every architecture's `/proc` ABI, whatever the kernel's own tick.
const USER_HZ: f64 = 100.0;

pub(crate) struct ProcessMetrics {
    cpu: Counter<f64, AtomicU64>,
    resident: Gauge,
    open_fds: Gauge,
    max_fds: Gauge,
}

impl ProcessMetrics {
    pub(super) fn new() -> Self {
        Self {
            cpu: Counter::default(),
            resident: Gauge::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
        }
    }

    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_build",
            "The running release: its version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        r.register(
            "process_cpu_seconds",
            "User and system CPU time the process spent, in seconds",
            self.cpu.clone(),
        );
        r.register(
            "process_resident_memory_bytes",
            "Resident memory of the process, in bytes",
            self.resident.clone(),
        );
        r.register("process_open_fds", "Open file descriptors", self.open_fds.clone());
        r.register(
            "process_max_fds",
            "The limit on open file descriptors (soft)",
            self.max_fds.clone(),
        );
    }

    /// Read the numbers now (a scrape).
    pub(super) fn read(&self) {
        if let Some(seconds) = cpu_seconds() {
            // A counter only goes up: it takes what the process spent since
            // the last scrape.
            let before = self.cpu.get();
            if seconds > before {
                self.cpu.inc_by(seconds - before);
            }
        }
        if let Some(bytes) = resident_bytes() {
            self.resident.set(bytes);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(i64::try_from(fds.count()).unwrap_or(i64::MAX));
        }
        if let Some(max) = max_fds() {
            self.max_fds.set(max);
        }
    }
}

/// utime + stime, fields 14 and 15 of `/proc/self/stat`, counted after the
/// command name's closing parenthesis (the name may hold spaces).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// `VmRSS:  1234 kB` of `/proc/self/status`.
fn resident_bytes() -> Option<i64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_fds() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_reads_its_own_numbers_on_linux() {
        if !cfg!(target_os = "linux") {
            return;
        }
        assert!(super::cpu_seconds().is_some());
        assert!(super::resident_bytes().is_some_and(|b| b > 0));
        assert!(super::max_fds().is_some_and(|n| n > 0));
    }
}
