//! The schema (docs/operating.md, "Upgrading"): `tartan migrate` applies
//! the migrations alone; `serve --no-migrate` and `purge` apply none and
//! refuse a database that lacks some; every command refuses a database a
//! newer release migrated.

use crate::helpers::{call, run_tartan, spawn_serve, Backend, TestDb};
use tartan_testkit::both_backends;

both_backends!(migrate_applies_the_schema_alone_and_no_migrate_requires_it);
both_backends!(a_database_migrated_by_a_newer_release_is_refused);

async fn migrate_applies_the_schema_alone_and_no_migrate_requires_it(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let env = [("TARTAN_DATABASE_URL", db.url.as_str())];
    // Nothing migrated yet: `serve --no-migrate` refuses, saying what to do.
    let (ok, _, err) = run_tartan(&["serve", "--no-migrate", "--listen", "127.0.0.1:0"], &env).await;
    assert!(!ok);
    assert!(
        err.starts_with("error: ") && err.contains("tartan migrate"),
        "{err}"
    );

    let (ok, out, err) = run_tartan(&["migrate"], &env).await;
    assert!(ok, "{err}");
    let applied = out.lines().filter(|l| l.starts_with("applied ")).count();
    assert!(applied >= 16, "{out}");
    // Again: nothing is missing.
    let (ok, out, err) = run_tartan(&["migrate"], &env).await;
    assert!(ok, "{err}");
    assert!(out.contains("lacks no migration"), "{out}");

    // Now it serves without migrating.
    let server = spawn_serve(
        &[
            "--no-migrate",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &db.url,
        ],
        &[],
    )
    .await;
    assert_eq!(call(&server, reqwest::Method::GET, "/ready", None).await.0, 200);
}

async fn a_database_migrated_by_a_newer_release_is_refused(backend: Backend) {
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let env = [("TARTAN_DATABASE_URL", db.url.as_str())];
    let (ok, _, err) = run_tartan(&["migrate"], &env).await;
    assert!(ok, "{err}");
    // A migration this binary does not have, as a later release records it.
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&db.url).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         SELECT 99991231000000, 'from a later release', success, checksum, execution_time \
         FROM _sqlx_migrations ORDER BY version LIMIT 1",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    for args in [
        &["migrate"][..],
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["serve", "--no-migrate", "--listen", "127.0.0.1:0"][..],
        &["purge", "--before", "1d"][..],
    ] {
        let (ok, _, err) = run_tartan(args, &env).await;
        assert!(!ok, "{args:?}");
        assert!(err.contains("migrated by a newer release"), "{args:?}: {err}");
        assert!(err.contains("99991231000000"), "{args:?}: {err}");
    }
}
