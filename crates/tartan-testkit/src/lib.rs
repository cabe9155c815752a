//! Test databases for Tartan's tests (a dev-dependency only): a fresh
//! SQLite file or a fresh Postgres database on the local server for each
//! test, removed when the test is done, and [`both_backends!`], which runs
//! a test once on each.
//!
//! Postgres is the server `TARTAN_TEST_DATABASE_URL` names (its
//! maintenance database, e.g. `postgres://user:pw@host:5432/postgres`),
//! by default the local one as user `postgres` without a password. A test
//! that needs Postgres and cannot reach it is skipped loudly, or fails when
//! `CI` is set: CI must never pass by running nothing.

use std::io::Write;
use std::time::Duration;

use sqlx::{Connection, PgConnection};

/// Which database a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The Postgres server's maintenance database, where test databases are
/// created and dropped: `TARTAN_TEST_DATABASE_URL`, or the local server
/// as user `postgres` without a password.
pub fn pg_admin_url() -> String {
    std::env::var("TARTAN_TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// `url` naming the database `name` instead of its own (its user, host and
/// parameters kept).
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let authority = base.find("://").map_or(0, |i| i + 3);
    let path = base[authority..].find('/').map_or(base.len(), |i| authority + i);
    format!("{}/{name}{query}", &base[..path])
}

/// The admin URL without its password, for messages.
fn shown_server() -> String {
    let url = pg_admin_url();
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme && url[scheme + 3..at].contains(':') => {
            let user_end = scheme + 3 + url[scheme + 3..at].find(':').unwrap_or(0);
            format!("{}:***{}", &url[..user_end], &url[at..])
        }
        _ => url,
    }
}

/// A fresh database, removed when dropped.
pub struct TestDb {
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    File(std::path::PathBuf),
    Database(String),
    /// Someone else's database (a test's private cluster): left as it is.
    Nothing,
}

impl TestDb {
    /// A database the caller manages: nothing is removed.
    pub fn at_url(url: String) -> TestDb {
        TestDb {
            url,
            cleanup: Cleanup::Nothing,
        }
    }

    /// A fresh database; `None` when Postgres is unreachable and `CI` is
    /// not set (the skip is written to stderr, where a passing test's
    /// output is not hidden); with `CI` set that is a failure.
    pub async fn create(backend: Backend) -> Option<TestDb> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        match backend {
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join(format!("tartan-test-{id}"));
                std::fs::create_dir_all(&dir).ok()?;
                let path = dir.join("tartan.db");
                Some(TestDb {
                    url: format!("sqlite://{}", path.display()),
                    cleanup: Cleanup::File(dir),
                })
            }
            Backend::Postgres => {
                let mut admin = admin().await?;
                let name = format!("tartan_test_{id}");
                if let Err(e) = sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
                    .execute(&mut admin)
                    .await
                {
                    panic!("CREATE DATABASE {name} failed: {e}");
                }
                let _ = admin.close().await;
                Some(TestDb {
                    url: with_database(&pg_admin_url(), &name),
                    cleanup: Cleanup::Database(name),
                })
            }
        }
    }
}

/// A connection to the maintenance database, or `None` (skipped) / a panic
/// (`CI` set) when the server cannot be reached.
async fn admin() -> Option<PgConnection> {
    let connect = tokio::time::timeout(Duration::from_secs(10), PgConnection::connect(&pg_admin_url())).await;
    match connect {
        Ok(Ok(conn)) => Some(conn),
        failed => {
            let why = match failed {
                Ok(Err(e)) => e.to_string(),
                _ => "no answer within 10 s".to_string(),
            };
            if std::env::var_os("CI").is_some() {
                panic!(
                    "Postgres at {} (TARTAN_TEST_DATABASE_URL) is unreachable and CI is set, so this test fails instead of skipping: {why}",
                    shown_server()
                );
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: Postgres at {} (TARTAN_TEST_DATABASE_URL) is unreachable ({why}); this test did NOT run (set CI to make this a failure)",
                shown_server()
            );
            None
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::File(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Cleanup::Nothing => {}
            Cleanup::Database(name) => {
                let name = name.clone();
                // Drop runs outside async context (or inside a runtime that
                // may not block): a thread and a runtime of its own.
                let _ = std::thread::spawn(move || {
                    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                        return;
                    };
                    rt.block_on(async move {
                        if let Ok(mut admin) = PgConnection::connect(&pg_admin_url()).await {
                            // WITH (FORCE) ends the connections pools may still hold.
                            let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                                .execute(&mut admin)
                                .await;
                            let _ = admin.close().await;
                        }
                    });
                })
                .join();
            }
        }
    }
}

/// Run each named `async fn name(backend: Backend)` once per database: a
/// module `name` with the tests `on_sqlite` and `on_postgres`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn on_sqlite() {
                    super::$name($crate::Backend::Sqlite).await;
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn on_postgres() {
                    super::$name($crate::Backend::Postgres).await;
                }
            }
        )*
    };
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn a_test_database_keeps_the_servers_user_host_and_parameters() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "t1"),
            "postgres://postgres@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u:p%2Fw@db:6432/admin?sslmode=disable", "t2"),
            "postgres://u:p%2Fw@db:6432/t2?sslmode=disable"
        );
        assert_eq!(
            with_database("postgresql://localhost", "t3"),
            "postgresql://localhost/t3"
        );
    }
}
