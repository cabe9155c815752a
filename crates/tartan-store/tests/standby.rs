//! Postgres sessions that reached a standby (docs/durability.md,
//! "Failover"): a write refused on one is `StoreError::ReadOnly`, and the
//! store that saw it stops reusing the connections it opened before then;
//! another store of the same process keeps its own. A database set
//! `default_transaction_read_only` stands in for the standby: a session
//! keeps the setting it began with, as a session to a standby stays one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use sqlx::Connection;
use tartan_store::{Readiness, Store, StoreError};
use tartan_testkit::{Backend, TestDb};

/// Sessions opened on `db` from now on take no writes (`on`), or do again.
async fn set_read_only(db: &TestDb, on: bool) {
    let name = db.url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let mut admin = sqlx::PgConnection::connect(&tartan_testkit::pg_admin_url())
        .await
        .unwrap();
    let setting = if on {
        format!("ALTER DATABASE {name} SET default_transaction_read_only = on")
    } else {
        format!("ALTER DATABASE {name} RESET default_transaction_read_only")
    };
    sqlx::raw_sql(&setting).execute(&mut admin).await.unwrap();
    let _ = admin.close().await;
}

/// A write of `store`'s (it goes to the engine's pool, whose one idle
/// connection is the one its opening made).
async fn write(store: &Arc<dyn Store>, node: &str) -> Result<(), StoreError> {
    store.heartbeat(node, chrono::Utc::now()).await
}

#[tokio::test]
async fn a_standby_seen_by_one_store_is_its_own() {
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    // The schema, while the database takes writes.
    drop(tartan_store::open(&db.url).await.unwrap());
    set_read_only(&db, true).await;
    let one = tartan_store::open(&db.url).await.unwrap();
    let other = tartan_store::open(&db.url).await.unwrap();
    let checked = tartan_store::open(&db.url).await.unwrap();
    // A readiness check that finds its session read-only notes the standby
    // as a refused write does.
    assert_eq!(checked.ready().await.unwrap(), Readiness::ReadOnly);
    // Writes are taken again; the stores' sessions, opened read-only, stay so.
    set_read_only(&db, false).await;

    let refused = write(&one, "one").await.unwrap_err();
    assert!(matches!(refused, StoreError::ReadOnly(_)), "{refused:?}");
    assert!(
        refused.to_string().starts_with("database unavailable: "),
        "{refused}"
    );
    write(&one, "one")
        .await
        .expect("the session that reached the standby is not reused");
    // The other store saw no standby: its session is reused, and refuses.
    let refused = write(&other, "other").await.unwrap_err();
    assert!(matches!(refused, StoreError::ReadOnly(_)), "{refused:?}");
    write(&other, "other").await.unwrap();
    write(&checked, "checked")
        .await
        .expect("no session opened before the check is reused");
    assert_eq!(checked.ready().await.unwrap(), Readiness::Ready);
}
