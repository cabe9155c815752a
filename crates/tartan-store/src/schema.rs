//! The database's schema against this binary's migrations
//! (docs/operating.md, "Upgrading"): apply the missing ones, or only
//! require that none is missing; and in both cases refuse a database that a
//! newer release migrated, whose tables this binary does not know.

use sqlx::migrate::Migrator;

use crate::error::StoreError;

/// What opening a store does with the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schema {
    /// Apply the migrations the database lacks (`tartan serve`).
    #[default]
    Migrate,
    /// Apply none: a database that lacks some is refused, naming the way
    /// out (`serve --no-migrate`, `purge`).
    Require,
}

/// A migration: its version and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    pub version: i64,
    pub description: String,
}

/// The migrations recorded in the database: (version, succeeded).
pub(crate) type Applied = Vec<(i64, bool)>;

/// What to do, from the migrations this binary has and those the database
/// recorded: the ones to apply (empty: nothing), or why not to open it.
pub(crate) fn plan(
    migrator: &Migrator,
    applied: &Applied,
    schema: Schema,
) -> Result<Vec<Migration>, StoreError> {
    let known = |v: i64| migrator.iter().any(|m| m.version == v);
    let newest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    if let Some((v, _)) = applied.iter().find(|(v, _)| !known(*v)) {
        return Err(StoreError::Config(format!(
            "the database was migrated by a newer release of tartan (its migration {v} is unknown to this \
             binary, whose newest is {newest}): run that release or a later one, or restore a backup \
             taken before the upgrade"
        )));
    }
    if let Some((v, _)) = applied.iter().find(|(_, ok)| !ok) {
        return Err(StoreError::Config(format!(
            "migration {v} failed part-way in an earlier run and is recorded as such: repair the \
             database or restore a backup"
        )));
    }
    let missing: Vec<Migration> = migrator
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .map(|m| Migration {
            version: m.version,
            description: m.description.to_string(),
        })
        .collect();
    if schema == Schema::Require {
        if let Some(first) = missing.first() {
            return Err(StoreError::Config(format!(
                "the database lacks {} of this release's migrations (the first is {} {}): run `tartan \
                 migrate` first, or start `tartan serve` without --no-migrate",
                missing.len(),
                first.version,
                first.description
            )));
        }
    }
    Ok(missing)
}

/// The versions recorded in sqlx's table, none when there is no table yet.
pub(crate) async fn applied_postgres(conn: &mut sqlx::PgConnection) -> Result<Applied, StoreError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(Vec::new());
    }
    Ok(
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await?,
    )
}

/// The versions recorded in sqlx's table, none when there is no table yet.
pub(crate) async fn applied_sqlite(pool: &sqlx::SqlitePool) -> Result<Applied, StoreError> {
    let exists: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(pool)
    .await?;
    if exists == 0 {
        return Ok(Vec::new());
    }
    Ok(
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(pool)
            .await?,
    )
}
