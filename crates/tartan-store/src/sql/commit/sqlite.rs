//! SQLite's commit: the whole batch as one job on the writer's own
//! connection (`crate::sqlite::writer`), its steps as cached one-row
//! statements in one `BEGIN IMMEDIATE` transaction. The steps, their checks
//! and the rows they write are those of `steps` (see this module's parent
//! for the list); only the way they reach the database differs.

use std::time::Instant;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;
use crate::sqlite::writer::{database, Writer};

use super::super::values::split;
use super::super::{duration_us, json_text, FLOW, MIN_SNAPSHOT_TAIL};
use super::*;

impl SqlStore {
    /// Commit `batch` on SQLite's writer: one hand-off to its thread, under
    /// the write turn (the sqlx write pool's only connection, held so that
    /// no other write runs meanwhile). Each decision gets its verdict.
    /// Its one caller, the engine's group-commit task, never drops it
    /// half way (only at shutdown): dropped while the thread runs the
    /// batch, it would give the turn back before the batch ends.
    pub(in crate::sql) async fn commit_on_writer(
        &self,
        writer: &Writer,
        batch: Vec<FlowCommit>,
    ) -> Vec<Result<Option<i64>, StoreError>> {
        let size = batch.len();
        let started = Instant::now();
        let turn = match self.write.acquire().await {
            Ok(turn) => turn,
            Err(e) => return vec![Err(StoreError::from(e)); size],
        };
        self.commit_waits.record(started.elapsed());
        let answer = writer.run(move |conn| commit_each(conn, &batch)).await;
        drop(turn);
        answer.unwrap_or_else(|e| vec![Err(e); size])
    }
}

/// The batch in one transaction; when it fails as a whole (a statement
/// error somewhere in it), each decision in one of its own, so that each
/// gets its own verdict and the good ones still land.
fn commit_each(conn: &mut Connection, batch: &[FlowCommit]) -> Vec<Result<Option<i64>, StoreError>> {
    match commit(conn, batch) {
        Ok(verdicts) => verdicts,
        Err(e @ StoreError::Unavailable(_)) => vec![Err(e); batch.len()],
        Err(e) => {
            tracing::warn!(
                size = batch.len(),
                "batch commit failed ({e}); committing one by one"
            );
            batch
                .iter()
                .map(|c| {
                    commit(conn, std::slice::from_ref(c))?
                        .into_iter()
                        .next()
                        .unwrap_or(Err(StoreError::Unavailable("a commit gave no verdict".into())))
                })
                .collect()
        }
    }
}

fn commit(
    conn: &mut Connection,
    batch: &[FlowCommit],
) -> Result<Vec<Result<Option<i64>, StoreError>>, StoreError> {
    let mut decisions = decisions_of(batch)?;
    refuse_repeated_creations(&mut decisions);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(database)?;
    create_flows(&tx, &mut decisions)?;
    let snapshots = advance_flows(&tx, &mut decisions)?;
    write_snapshots(&tx, &decisions, &snapshots)?;
    let base = take_positions(&tx, &decisions)?;
    assign_positions(&mut decisions, base);
    let passed: Vec<&Decision<'_>> = decisions.iter().filter(|d| d.refused.is_none()).collect();
    write_values(&tx, &event_values(&passed))?;
    append_events(&tx, &passed)?;
    write_work_items(&tx, &passed)?;
    label_flows(&tx, &passed)?;
    write_lines(&tx, &passed)?;
    tx.commit().map_err(database)?;
    Ok(verdicts(decisions, true))
}

/// Insert the new flows; an id that exists loses.
fn create_flows(tx: &Transaction<'_>, decisions: &mut [Decision<'_>]) -> Result<(), StoreError> {
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, deactivated_us, \
             request, goals, state, deadline_us, error, snapshot_seq, snapshot_bytes, tail_bytes) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, '', ?10, ?11, 0, ?12, 0) ON CONFLICT (id) DO NOTHING",
        )
        .map_err(database)?;
    for d in decisions
        .iter_mut()
        .filter(|d| d.commit.base_sequence == 0 && d.refused.is_none())
    {
        let c = d.commit;
        let inserted = insert
            .execute(params![
                c.flow_id,
                c.state.status.as_str(),
                d.sequence(),
                to_us(c.state.created_at),
                to_us(c.at),
                c.state.completed_at.map(to_us),
                c.state.deactivated_at.map(to_us),
                c.request.as_deref().unwrap_or_default(),
                super::goals_text(&c.state),
                c.state.wake_at().map(to_us),
                c.state.error,
                d.event_bytes(),
            ])
            .map_err(database)?;
        if inserted == 0 {
            d.refused = Some(StoreError::FlowExists(c.flow_id.clone()));
        }
    }
    Ok(())
}

/// Update the existing flows' small columns, each checking the sequence it
/// was decided on (a flow that moved on meanwhile is a conflict). Returns
/// the flows whose tail now outweighs their snapshot.
///
/// Most decisions leave a flow's indexed columns (status, deadline,
/// completion, deactivation; error) as they were, and SQLite rewrites the
/// entries of every index whose columns an `UPDATE` sets, changed or not:
/// a statement that sets only the unindexed columns, taken when the others
/// are unchanged, wrote about a seventh of the pages.
fn advance_flows(tx: &Transaction<'_>, decisions: &mut [Decision<'_>]) -> Result<Vec<usize>, StoreError> {
    let mut same = tx
        .prepare_cached(
            "UPDATE flows SET sequence = ?3, updated_us = ?4, tail_bytes = tail_bytes + ?8 \
             WHERE id = ?1 AND sequence = ?9 AND status = ?2 AND completed_us IS ?5 AND deactivated_us IS ?6 \
             AND error IS ?7 AND deadline_us IS ?10 RETURNING tail_bytes, snapshot_bytes",
        )
        .map_err(database)?;
    let mut changed = tx
        .prepare_cached(
            "UPDATE flows SET status = ?2, sequence = ?3, updated_us = ?4, completed_us = ?5, \
             deactivated_us = ?6, error = ?7, deadline_us = ?10, tail_bytes = tail_bytes + ?8 \
             WHERE id = ?1 AND sequence = ?9 RETURNING tail_bytes, snapshot_bytes",
        )
        .map_err(database)?;
    let mut snapshots = Vec::new();
    for (i, d) in decisions.iter_mut().enumerate() {
        let c = d.commit;
        if c.base_sequence == 0 {
            continue;
        }
        let row = params![
            c.flow_id,
            c.state.status.as_str(),
            d.sequence(),
            to_us(c.at),
            c.state.completed_at.map(to_us),
            c.state.deactivated_at.map(to_us),
            c.state.error,
            d.event_bytes(),
            c.base_sequence,
            c.state.wake_at().map(to_us),
        ];
        let weights = |q: &mut rusqlite::CachedStatement<'_>| {
            q.query_row(row, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .optional()
                .map_err(database)
        };
        let weights = match weights(&mut same)? {
            Some(w) => Some(w),
            None => weights(&mut changed)?,
        };
        match weights {
            None => d.refused = Some(StoreError::Conflict(format!("flow {}", c.flow_id))),
            Some((tail, base)) if tail > base.max(MIN_SNAPSHOT_TAIL) => snapshots.push(i),
            Some(_) => {}
        }
    }
    Ok(snapshots)
}

/// Snapshot the flows `which` names (docs/durability.md, "Flow snapshots").
fn write_snapshots(
    tx: &Transaction<'_>,
    decisions: &[Decision<'_>],
    which: &[usize],
) -> Result<(), StoreError> {
    if which.is_empty() {
        return Ok(());
    }
    let mut update = tx
        .prepare_cached(
            "UPDATE flows SET state = ?2, state_refs = ?3, snapshot_seq = ?4, snapshot_bytes = ?5, \
             tail_bytes = 0 WHERE id = ?1",
        )
        .map_err(database)?;
    for &i in which {
        let d = &decisions[i];
        let flow = d.commit.flow_id.as_str();
        let state = split(json_text(&*d.commit.state)?)?;
        let values: Vec<(&str, &str, &str)> = state
            .values
            .iter()
            .map(|(h, v)| (flow, h.as_str(), v.as_str()))
            .collect();
        write_values(tx, &values)?;
        update
            .execute(params![
                flow,
                state.skeleton,
                state.refs,
                d.sequence(),
                state.full_bytes()
            ])
            .map_err(database)?;
    }
    Ok(())
}

/// The global positions of the passed decisions' events: the range after
/// the counter's last (docs/api.md, "Event streams"). Returns the position
/// before the range.
fn take_positions(tx: &Transaction<'_>, decisions: &[Decision<'_>]) -> Result<i64, StoreError> {
    let count = passed_events(decisions);
    let last: i64 = tx
        .prepare_cached("UPDATE event_positions SET last = last + ?1 WHERE id = 1 RETURNING last")
        .and_then(|mut q| q.query_row([count], |row| row.get(0)))
        .map_err(database)?;
    Ok(last - count)
}

/// Store the large values, once per flow and value.
fn write_values(tx: &Transaction<'_>, values: &[(&str, &str, &str)]) -> Result<(), StoreError> {
    if values.is_empty() {
        return Ok(());
    }
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO flow_values (flow_id, hash, data) VALUES (?1, ?2, ?3) \
             ON CONFLICT (flow_id, hash) DO NOTHING",
        )
        .map_err(database)?;
    for (flow, hash, data) in values {
        insert.execute(params![flow, hash, data]).map_err(database)?;
    }
    Ok(())
}

/// Append the decisions' events to their flows' logs.
fn append_events(tx: &Transaction<'_>, passed: &[&Decision<'_>]) -> Result<(), StoreError> {
    let mut insert = tx
        .prepare_cached(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs, \
             value_bytes, global_position) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(database)?;
    for d in passed {
        let c = d.commit;
        for (k, (event, text)) in c.events.iter().zip(&d.texts).enumerate() {
            insert
                .execute(params![
                    FLOW,
                    c.flow_id,
                    c.base_sequence + 1 + k as i64,
                    event.type_name(),
                    to_us(c.at),
                    text.skeleton,
                    text.refs,
                    text.refs.is_some().then_some(text.value_bytes),
                    d.position + k as i64,
                ])
                .map_err(database)?;
        }
    }
    Ok(())
}

/// Insert or update the rows of the work items the decisions touched.
fn write_work_items(tx: &Transaction<'_>, passed: &[&Decision<'_>]) -> Result<(), StoreError> {
    let sql = format!(
        "INSERT INTO work_items (token, flow_id, step_id, status, attempt, retry_count, due_us, \
         lease_owner, lease_expires_us, created_us, updated_us, detail, deferred_us) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, COALESCE(?9, ?10 + {now}), ?11, ?12, ?13, ?14) {WORK_UPSERT}",
        now = Backend::Sqlite.now_us()
    );
    let mut upsert = tx.prepare_cached(&sql).map_err(database)?;
    for d in passed {
        let at = to_us(d.commit.at);
        for w in &d.commit.work {
            upsert
                .execute(params![
                    w.token,
                    w.flow_id,
                    w.step_id,
                    w.status.as_str(),
                    i64::from(w.attempt),
                    i64::from(w.retry_count),
                    w.due_at.map(to_us),
                    w.lease_owner,
                    w.lease_expires_at.map(to_us),
                    w.lease_for.map(duration_us),
                    to_us(w.created_at),
                    at,
                    json_text(&w.detail)?,
                    w.deferred_at.map(to_us),
                ])
                .map_err(database)?;
        }
    }
    Ok(())
}

/// Insert the labels of the new flows.
fn label_flows(tx: &Transaction<'_>, passed: &[&Decision<'_>]) -> Result<(), StoreError> {
    let mut insert = tx
        .prepare_cached("INSERT INTO flow_labels (flow_id, key, value) VALUES (?1, ?2, ?3)")
        .map_err(database)?;
    for d in passed.iter().filter(|d| d.commit.base_sequence == 0) {
        for (key, value) in &d.commit.state.labels {
            insert
                .execute(params![d.commit.flow_id, key, value])
                .map_err(database)?;
        }
    }
    Ok(())
}

/// The rows of the decisions' flows in their keys' lines (docs/concurrency.md).
fn write_lines(tx: &Transaction<'_>, passed: &[&Decision<'_>]) -> Result<(), StoreError> {
    for d in passed {
        let id = &d.commit.flow_id;
        match &d.commit.line {
            None => continue,
            Some(LineWrite::Join {
                key,
                limit,
                turn_us,
                queued_us,
            }) => tx
                .prepare_cached(LINE_JOIN)
                .and_then(|mut q| q.execute(params![id, key, i64::from(*limit), turn_us, queued_us])),
            Some(LineWrite::Admitted) => tx
                .prepare_cached(LINE_ADMITTED)
                .and_then(|mut q| q.execute(params![id])),
            Some(LineWrite::Leave) => tx
                .prepare_cached(LINE_LEAVE)
                .and_then(|mut q| q.execute(params![id])),
        }
        .map_err(database)?;
    }
    Ok(())
}
