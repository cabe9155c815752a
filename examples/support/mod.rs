//! What the benchmark examples share: a fresh database, an engine on it, a
//! step server on 127.0.0.1, percentiles.

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
                for suffix in ["", "-wal", "-shm"] {
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
