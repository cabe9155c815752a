//! What the in-process benchmark drivers (`src/bin/`: `load` and
//! `retry_timers`; bench/README.md) share: a fresh database, an engine on
//! it, a step server on 127.0.0.1, percentiles.

use std::net::SocketAddr;

use tartan_engine::{Engine, EngineConfig};

const PG_ADMIN: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A fresh database for one run: a SQLite file in the temp dir, or a new
/// Postgres database on 127.0.0.1:5432. `drop` removes it.
pub struct BenchDb {
    pub url: String,
    pg_name: Option<String>,
}

impl BenchDb {
    pub async fn create(kind: &str, prefix: &str) -> BenchDb {
        let pid = std::process::id();
        if kind == "postgres" {
            let name = format!("tartan_{prefix}_{pid}");
            let admin = sqlx::PgPool::connect(PG_ADMIN)
                .await
                .unwrap_or_else(|e| panic!("postgres: {e}"));
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
                .execute(&admin)
                .await;
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&admin)
                .await
                .unwrap_or_else(|e| panic!("create: {e}"));
            BenchDb {
                url: format!("postgres://postgres@127.0.0.1:5432/{name}"),
                pg_name: Some(name),
            }
        } else {
            let path = std::env::temp_dir().join(format!("tartan-{prefix}-{pid}.db"));
            let _ = std::fs::remove_file(&path);
            BenchDb {
                url: format!("sqlite://{}", path.display()),
                pg_name: None,
            }
        }
    }

    /// An engine on this database.
    pub async fn engine(&self, node_id: &str) -> Engine {
        let store = tartan_store::open(&self.url)
            .await
            .unwrap_or_else(|e| panic!("store: {e}"));
        Engine::start(
            EngineConfig {
                node_id: node_id.into(),
                ..EngineConfig::default()
            },
            store,
        )
        .await
        .unwrap_or_else(|e| panic!("engine: {e}"))
    }

    pub async fn drop(self) {
        match self.pg_name {
            Some(name) => {
                if let Ok(admin) = sqlx::PgPool::connect(PG_ADMIN).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&admin)
                        .await;
                }
            }
            None => {
                let path = self.url.trim_start_matches("sqlite://").to_string();
                // A `tartan serve` on it leaves its process lock, `<db>.lock`.
                for suffix in ["", "-wal", "-shm", ".lock"] {
                    let _ = std::fs::remove_file(format!("{path}{suffix}"));
                }
            }
        }
    }
}

/// Serve `app` on 127.0.0.1:0 in the background; its address.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("addr: {e}"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// The `p` quantile of sorted values (0 when there are none).
pub fn percentile<T: Copy + Default>(sorted: &[T], p: f64) -> T {
    if sorted.is_empty() {
        return T::default();
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// A field of `/proc/self/status` given in kB (`VmRSS`, `VmHWM`), in MiB;
/// 0 where there is no such file.
pub fn proc_status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|rest| rest.starts_with(':')))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Sub-buckets per power of two: values are kept within 1/128 (< 0.8 %).
const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;

/// A histogram of integer values (µs) in constant memory: exact below 128,
/// then buckets at most 1/128 of their value wide. Quantiles are within that
/// of the exact ones; the count, minimum and maximum are exact. Negative
/// values count in the lowest bucket (the minimum keeps them).
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    min: i64,
    max: i64,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; SUB + (64 - SUB_BITS as usize) * SUB],
            n: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }

    fn index(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let shift = 63 - v.leading_zeros() - SUB_BITS;
        SUB + shift as usize * SUB + ((v >> shift) as usize - SUB)
    }

    /// The middle of bucket `i`.
    fn value(i: usize) -> u64 {
        if i < SUB {
            return i as u64;
        }
        let shift = (i - SUB) / SUB;
        let low = ((SUB + (i - SUB) % SUB) as u64) << shift;
        low + ((1u64 << shift) >> 1)
    }

    pub fn record(&mut self, v: i64) {
        self.counts[Self::index(v.max(0) as u64)] += 1;
        self.n += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Add what `other` recorded.
    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.n += other.n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The `p` quantile (the value of rank `round((n-1)·p)`, as `percentile`);
    /// 0 when empty.
    pub fn quantile(&self, p: f64) -> i64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((self.n - 1) as f64 * p.clamp(0.0, 1.0)).round() as u64;
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen > rank {
                let v = i64::try_from(Self::value(i)).unwrap_or(i64::MAX);
                return v.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// The exact maximum (0 when empty).
    pub fn max(&self) -> i64 {
        if self.n == 0 {
            0
        } else {
            self.max
        }
    }

    /// The exact minimum (0 when empty).
    pub fn min(&self) -> i64 {
        if self.n == 0 {
            0
        } else {
            self.min
        }
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

/// Log warnings and errors (or what `RUST_LOG` asks for) to stderr.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}
