//! The schema (docs/operating.md, "Upgrading"): `tartan migrate` applies
//! the migrations alone; `serve --no-migrate` and `purge` apply none and
//! refuse a database that lacks some; every command refuses a database a
//! newer release migrated; and the migrations since the last release only
//! expand the schema, so that its engines run on beside this one's.

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

/// What a migration may not do while the last release's engines still run
/// on its schema: take away or change what they read and write. Each is
/// done a release later ("contract"), in a file that says so with a
/// `-- contract: <why the last release no longer uses it>` line.
const CONTRACTING: [(&str, &str); 7] = [
    ("DROP TABLE", "drops a table"),
    ("DROP COLUMN", "drops a column"),
    ("RENAME", "renames a table or column"),
    ("ALTER COLUMN", "changes a column (type, nullability or default)"),
    ("SET NOT NULL", "makes a column required"),
    ("DROP CONSTRAINT", "drops a constraint"),
    (
        "ADD CONSTRAINT",
        "adds a constraint the last release's writes may break",
    ),
];

/// The contracting statements of one migration's SQL: none when it says
/// it is a contraction.
fn contracting(sql: &str) -> Vec<&'static str> {
    let said = sql.lines().any(|l| {
        l.trim()
            .strip_prefix("-- contract:")
            .is_some_and(|why| !why.trim().is_empty())
    });
    if said {
        return Vec::new();
    }
    let code: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ")
        .to_uppercase();
    let code = code.split_whitespace().collect::<Vec<_>>().join(" ");
    CONTRACTING
        .iter()
        .filter(|(statement, _)| code.contains(statement))
        .map(|(_, what)| *what)
        .collect()
}

#[test]
fn a_contracting_statement_is_found_unless_the_file_says_why() {
    assert_eq!(
        contracting("ALTER TABLE flows ADD COLUMN x TEXT;"),
        Vec::<&str>::new()
    );
    assert_eq!(
        contracting("ALTER TABLE flows\n  DROP   column x;"),
        vec!["drops a column"]
    );
    assert_eq!(
        contracting("-- drop column in a comment only\nCREATE INDEX i ON flows (id);"),
        Vec::<&str>::new()
    );
    assert_eq!(
        contracting("-- contract: 0.2.0 stopped reading x\nALTER TABLE flows DROP COLUMN x;"),
        Vec::<&str>::new()
    );
    assert_eq!(
        contracting("-- contract:\nALTER TABLE flows DROP COLUMN x;"),
        vec!["drops a column"],
        "a contraction says why"
    );
}

/// The migrations after the last release's newest (`migrations/RELEASES`)
/// only expand the schema: the last release's engines, still running
/// during a rolling update, find everything they use.
#[test]
fn migrations_since_the_last_release_only_expand_the_schema() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let releases = std::fs::read_to_string(root.join("RELEASES")).unwrap();
    let last: u64 = releases
        .lines()
        .rfind(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|v| v.parse().ok())
        .expect("migrations/RELEASES names the last release's newest migration (`vX.Y.Z COMMIT MIGRATION`)");
    let mut known = false;
    let mut refused = Vec::new();
    for backend in ["postgres", "sqlite"] {
        for entry in std::fs::read_dir(root.join(backend)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let Some(version) = name.split('_').next().and_then(|v| v.parse::<u64>().ok()) else {
                continue;
            };
            known |= version == last;
            if version > last {
                let sql = std::fs::read_to_string(&path).unwrap();
                for what in contracting(&sql) {
                    refused.push(format!("{backend}/{name} {what}"));
                }
            }
        }
    }
    assert!(known, "migrations/RELEASES names {last}, which no migration has");
    assert!(
        refused.is_empty(),
        "migrations since the last release must only expand the schema (docs/operating.md, \
         \"Upgrading\"): {refused:#?}"
    );
}

/// Each release in `migrations/RELEASES` names its commit (what
/// bench/upgrade.sh builds as the previous release): a commit of this
/// history whose `Cargo.toml` has that version, whose CHANGELOG has its
/// section, and whose migrations end at the one the line names.
#[test]
fn each_recorded_release_names_a_commit_of_that_version() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(root)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let releases = std::fs::read_to_string(root.join("migrations/RELEASES")).unwrap();
    let lines: Vec<&str> = releases
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert!(!lines.is_empty());
    for line in lines {
        let [version, commit, migration] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("{line:?} is not `vX.Y.Z COMMIT MIGRATION`");
        };
        let version = version.strip_prefix('v').expect("vX.Y.Z");
        git(&["merge-base", "--is-ancestor", commit, "HEAD"]);
        let manifest = git(&["show", &format!("{commit}:Cargo.toml")]);
        assert!(
            manifest.contains(&format!("version = \"{version}\"")),
            "{commit}'s Cargo.toml is not version {version}"
        );
        let changelog = git(&["show", &format!("{commit}:CHANGELOG.md")]);
        assert!(
            changelog
                .lines()
                .any(|l| l.starts_with(&format!("## {version} "))),
            "{commit}'s CHANGELOG.md has no section {version}"
        );
        let migrations = git(&["ls-tree", "--name-only", &format!("{commit}:migrations/postgres")]);
        let newest = migrations
            .lines()
            .filter_map(|n| n.split('_').next())
            .max()
            .unwrap_or_default();
        assert_eq!(newest, migration, "{commit}'s newest migration");
    }
}
