//! Postgres: for production and for several engine processes on one
//! database. Claims lock with `FOR UPDATE SKIP LOCKED` (`dialect`).

use std::sync::Arc;

use sqlx::any::AnyPoolOptions;
use sqlx::Executor;

use crate::connection::{PgKept, SqlStore, StandbyMark};
use crate::dialect::{quiet, quiet_pg, Backend};
use crate::error::StoreError;
use crate::schema::{Migration, Schema};
use crate::standby::PgStore;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Bring the schema to this binary's as `schema` says; the migrations
/// applied now. Concurrent starts apply each once (sqlx takes an advisory
/// lock around the run).
pub(crate) async fn prepare(url: &str, schema: Schema) -> Result<Vec<Migration>, StoreError> {
    use sqlx::Connection;
    let mut native = first_contact(&quiet_pg(url)?).await?;
    let applied = crate::schema::applied_postgres(&mut native).await?;
    let missing = crate::schema::plan(&MIGRATOR, &applied, schema)?;
    if !missing.is_empty() {
        MIGRATOR.run_direct(&mut native).await?;
    }
    native.close().await?;
    Ok(missing)
}

/// How long the first connection of a start may take before the start
/// gives up: a host that drops packets answers nothing at all.
const FIRST_CONTACT: std::time::Duration = std::time::Duration::from_secs(10);

/// The first connection of a start, one attempt: a wrong URL is named at
/// once by its cause (refused, unknown host, login, database), where a
/// pool would keep trying until its acquire timeout and then say only that
/// it timed out (docs/operating.md, "Configuration").
async fn first_contact(options: &sqlx::postgres::PgConnectOptions) -> Result<sqlx::PgConnection, StoreError> {
    use sqlx::ConnectOptions;
    let at = format!("{}:{}", options.get_host(), options.get_port());
    match tokio::time::timeout(FIRST_CONTACT, options.connect()).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(contact_failed(&at, options.get_username(), options.get_database(), e)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "no answer from Postgres at {at} within {FIRST_CONTACT:?} (a firewall dropping packets, or a wrong host)"
        ))),
    }
}

/// The cause of a failed first connection, in words an operator acts on.
fn contact_failed(at: &str, user: &str, database: Option<&str>, e: sqlx::Error) -> StoreError {
    let database = database.unwrap_or(user);
    match &e {
        sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => StoreError::Unavailable(
            format!("connection refused by {at}: is Postgres running and listening there?"),
        ),
        sqlx::Error::Io(io) if io.to_string().contains("lookup address") => {
            StoreError::Unavailable(format!("unknown host in {at}: {io}"))
        }
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // invalid_password, invalid_authorization_specification.
            Some("28P01" | "28000") => StoreError::Config(format!(
                "Postgres at {at} refused the login of user {user:?} (wrong password, or no such user): {}",
                db.message()
            )),
            // invalid_catalog_name.
            Some("3D000") => StoreError::Config(format!(
                "Postgres at {at} has no database {database:?}: create it (createdb) or fix the URL's path"
            )),
            _ => StoreError::from(e),
        },
        _ => StoreError::from(e),
    }
}

pub(crate) async fn open(url: &str, pools: &crate::Pools, schema: Schema) -> Result<PgStore, StoreError> {
    sqlx::any::install_default_drivers();
    prepare(url, schema).await?;
    // This store's own: its connections are let go once it sees a standby,
    // another store's are not.
    let standby = Arc::new(StandbyMark::default());
    let engine = AnyPoolOptions::new()
        .max_connections(pools.engine.unwrap_or(16))
        // While the database is away, a request waits this long for a
        // connection, then is answered 503; the engine's own commits try
        // again (see `decide_persistently`).
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .before_acquire(unless_standby(&standby))
        .connect_with(quiet(url)?)
        .await?;
    // The API's listings: a pool of their own, and a bound on each
    // statement, so that they cannot hold what commits and lease renewal
    // need (docs/durability.md, "Connection pools").
    let timeout_ms = pools.read_timeout.as_millis().max(1);
    let api_size = pools.read.unwrap_or(4);
    let api = AnyPoolOptions::new()
        .max_connections(api_size)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .before_acquire(unless_standby(&standby))
        .after_connect(move |conn, _| {
            Box::pin(async move {
                conn.execute(format!("SET statement_timeout = {timeout_ms}").as_str())
                    .await?;
                Ok(())
            })
        })
        .connect_with(quiet(url)?)
        .await?;
    let kept = quiet_pg(url)?;
    let sql = SqlStore {
        write: engine.clone(),
        read: engine,
        api,
        api_turns: tokio::sync::Semaphore::new(api_size as usize),
        backend: Backend::Postgres,
        listen_url: Some(url.to_string()),
        sqlite_path: None,
        sqlite_writer: None,
        pg_committer: Some(PgKept::commits(kept.clone(), Arc::clone(&standby))),
        pg_notifier: Some(PgKept::notices(kept, Arc::clone(&standby))),
        commit_waits: Default::default(),
        api_waits: Default::default(),
    };
    Ok(PgStore::new(sql, standby))
}

/// A pool's `before_acquire`: a connection opened before its store last
/// saw a standby is closed, not handed out (`StandbyMark`).
fn unless_standby(
    standby: &Arc<StandbyMark>,
) -> impl for<'c> Fn(
    &'c mut sqlx::AnyConnection,
    sqlx::pool::PoolConnectionMetadata,
) -> futures::future::BoxFuture<'c, Result<bool, sqlx::Error>>
       + Send
       + Sync
       + 'static {
    let standby = Arc::clone(standby);
    move |_, meta| {
        let reusable = standby.reusable(&meta);
        Box::pin(async move { Ok(reusable) })
    }
}

/// How long a start keeps trying for a node id still held: a process killed
/// just now frees it once its server-side session notices (milliseconds).
const NODE_WAIT: std::time::Duration = std::time::Duration::from_secs(3);
/// How often the connection holding a node id is checked.
const NODE_CHECK_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Take the advisory lock of `node` on a connection of its own
/// (`hashtextextended` gives 64 bits: two ids colliding is not a concern).
async fn lock_node(url: &str, node: &str) -> Result<Option<sqlx::PgConnection>, StoreError> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let got: bool =
        sqlx::query("SELECT pg_try_advisory_lock(hashtextextended('tartan-node:' || $1, 0)) AS got")
            .bind(node)
            .fetch_one(&mut conn)
            .await?
            .try_get("got")?;
    Ok(got.then_some(conn))
}

/// A session-level advisory lock: held exactly as long as this process's
/// connection lives, released by Postgres when the process dies. A task
/// keeps the connection and takes the lock again after the database was
/// away (a restart drops every session).
pub(crate) async fn hold_node(url: &str, node: &str) -> Result<crate::NodeGuard, StoreError> {
    let give_up = tokio::time::Instant::now() + NODE_WAIT;
    let mut conn = loop {
        match lock_node(url, node).await? {
            Some(conn) => break conn,
            None if tokio::time::Instant::now() < give_up => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            None => return Err(StoreError::NodeInUse(node.to_string())),
        }
    };
    let (url, node) = (url.to_string(), node.to_string());
    let keeper = tokio::spawn(async move {
        use sqlx::Connection;
        loop {
            tokio::time::sleep(NODE_CHECK_EVERY).await;
            if conn.ping().await.is_ok() {
                continue;
            }
            loop {
                match lock_node(&url, &node).await {
                    Ok(Some(c)) => {
                        conn = c;
                        break;
                    }
                    Ok(None) => tracing::error!(
                        node_id = %node,
                        "another process took this node id while the database was away: two processes run under it"
                    ),
                    Err(e) => tracing::debug!("taking the node id back: {e}"),
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    });
    Ok(crate::NodeGuard::new(AbortOnDrop(keeper)))
}

/// Stops the task (and so closes its connection) when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Listen on `channels` on one connection of its own; the listener
/// reconnects by itself after the database went away (notices sent
/// meanwhile are lost: lease renewal and the sweep are the fallbacks).
/// Yields `(channel, payload)`.
pub(crate) async fn listen(
    url: &str,
    channels: &[&str],
) -> Result<tokio::sync::mpsc::Receiver<(String, String)>, StoreError> {
    let mut listener = sqlx::postgres::PgListener::connect(url).await?;
    listener.listen_all(channels.iter().copied()).await?;
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(async move {
        loop {
            match listener.recv().await {
                Ok(notice) => {
                    let heard = (notice.channel().to_string(), notice.payload().to_string());
                    if tx.send(heard).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!("listening for notices: {e}; trying again");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    });
    Ok(rx)
}
