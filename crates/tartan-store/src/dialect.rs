//! Every difference between the two databases' SQL, in one place: the
//! database's clock, placeholders, casts, row locks and notices. The rest
//! of the store writes one text of SQL for both: `$n` placeholders in
//! ascending order (SQLite binds them by number too; the generated
//! multi-row lists, `values_list`, use `?` there), BIGINT microsecond
//! times and JSON as TEXT. One exception: on Postgres a batch commit is a
//! single statement of data-modifying CTEs, which SQLite lacks
//! (`sql::commit` says why).

use std::str::FromStr;

use sqlx::any::AnyConnectOptions;
use sqlx::ConnectOptions;

use crate::error::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The name `Store::backend` gives.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// `column` compared byte by byte (code point order), whatever the
    /// database's collation: Postgres's default collation orders text for
    /// people, so a range of ids there would not be a prefix's; SQLite's
    /// BINARY already compares bytes. Indexes that serve such a range are
    /// built the same way (`flows_roots_by_id`, `flows_by_id_bytes`).
    pub(crate) fn bytewise(self, column: &str) -> String {
        match self {
            Backend::Sqlite => column.to_string(),
            Backend::Postgres => format!("{column} COLLATE \"C\""),
        }
    }

    /// What a claim's subquery appends so that two processes never take the
    /// same row: Postgres locks the rows it picks and skips those another
    /// transaction holds; SQLite has one writer, so the plain subquery is
    /// already safe.
    pub(crate) fn skip_locked(self) -> &'static str {
        match self {
            Backend::Postgres => " FOR UPDATE SKIP LOCKED",
            Backend::Sqlite => "",
        }
    }

    /// What a renewal's subquery appends to lock its rows in token order,
    /// the order the writer locks them in: two transactions locking in one
    /// order cannot deadlock. SQLite has one writer and needs none.
    pub(crate) fn lock_in_token_order(self) -> &'static str {
        match self {
            Backend::Postgres => " ORDER BY token FOR UPDATE",
            Backend::Sqlite => "",
        }
    }

    /// `OFFSET n` with no limit: SQLite needs a `LIMIT -1` before it.
    pub(crate) fn offset_only(self) -> &'static str {
        match self {
            Backend::Postgres => "OFFSET",
            Backend::Sqlite => "LIMIT -1 OFFSET",
        }
    }

    /// Whether other processes hear this database's notices: Postgres's
    /// `pg_notify`; SQLite has one process.
    pub(crate) fn notifies(self) -> bool {
        self == Backend::Postgres
    }

    /// The `outcome` of the last attempt in a work item's `detail` (JSON
    /// text): what a bulk filter's `error_class` is compared with.
    pub(crate) fn last_attempt_outcome(self, detail: &str) -> String {
        match self {
            Backend::Postgres => format!("(CAST({detail} AS JSON) -> 'attempts' -> -1 ->> 'outcome')"),
            Backend::Sqlite => format!("json_extract({detail}, '$.attempts[#-1].outcome')"),
        }
    }

    /// The database's now in microseconds since the epoch: leases are set
    /// and compared on it, whatever the clocks of the processes sharing the
    /// database say. SQLite runs in this process, so its clock is the
    /// process's (docs/durability.md, "Leases").
    pub(crate) fn now_us(self) -> &'static str {
        match self {
            Backend::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
            Backend::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)",
        }
    }
}

/// Connect options without sqlx's statement logging: its slow-statement
/// warning prints whole batched statements (hundreds of rows of
/// placeholders); the writer logs its batches' timing itself.
pub(crate) fn quiet(url: &str) -> Result<AnyConnectOptions, StoreError> {
    let options = AnyConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
    Ok(options.disable_statement_logging())
}

/// The same for a connection of the Postgres driver itself (the kept
/// connections of the batch commits and the notices, `PgKept`).
pub(crate) fn quiet_pg(url: &str) -> Result<sqlx::postgres::PgConnectOptions, StoreError> {
    let options = sqlx::postgres::PgConnectOptions::from_str(url)
        .map_err(|e| StoreError::Config(format!("invalid database URL: {e}")))?;
    Ok(options.disable_statement_logging())
}

/// `($1, $2, $3), ($4, $5, $6), ...` for `rows` rows of `cols` columns. SQLite
/// gets anonymous `?`: looking up a numbered parameter's name costs SQLite a
/// scan of all of them, which makes long statements quadratic.
pub(crate) fn values_list(backend: Backend, rows: usize, cols: usize) -> String {
    let mut out = String::with_capacity(rows * cols * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..cols {
            if c > 0 {
                out.push_str(", ");
            }
            match backend {
                Backend::Sqlite => out.push('?'),
                Backend::Postgres => {
                    out.push('$');
                    out.push_str(&(r * cols + c + 1).to_string());
                }
            }
        }
        out.push(')');
    }
    out
}

/// `values_list` with each Postgres parameter cast to its column's type
/// (`types`, one per column): Postgres cannot infer the types of a `VALUES`
/// list that is not inserted into a table. SQLite needs no casts.
pub(crate) fn typed_values_list(backend: Backend, rows: usize, types: &[&str]) -> String {
    match backend {
        Backend::Sqlite => values_list(backend, rows, types.len()),
        Backend::Postgres => {
            let mut out = String::with_capacity(rows * types.len() * 20);
            for r in 0..rows {
                if r > 0 {
                    out.push_str(", ");
                }
                out.push('(');
                for (c, ty) in types.iter().enumerate() {
                    if c > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&format!("CAST(${} AS {ty})", r * types.len() + c + 1));
                }
                out.push(')');
            }
            out
        }
    }
}

/// `values_list` for work rows: 12 columns, the ninth (the lease) taking
/// two binds: a set time, or a length from the database's now.
pub(crate) fn work_values(backend: Backend, rows: usize) -> String {
    let mut out = String::with_capacity(rows * 120);
    let mut n = 0;
    let mut next = || {
        n += 1;
        match backend {
            Backend::Sqlite => "?".to_string(),
            Backend::Postgres => format!("${n}"),
        }
    };
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        let mut cols = Vec::with_capacity(13);
        for c in 0..13 {
            if c == 8 {
                let (a, b) = (next(), next());
                cols.push(format!("COALESCE({a}, {b} + {})", backend.now_us()));
            } else {
                cols.push(next());
            }
        }
        out.push('(');
        out.push_str(&cols.join(", "));
        out.push(')');
    }
    out
}
