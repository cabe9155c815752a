//! The commit's steps as separate statements, in one transaction: SQLite's
//! way (no data-modifying CTEs), and the snapshots on both databases.

use std::collections::{HashMap, HashSet};

use sqlx::Row;

use crate::dialect::{typed_values_list, values_list, work_values, Backend};
use crate::error::StoreError;
use crate::model::*;

use super::super::values::{split, write_values, Stored};
use super::super::{duration_us, json_text, returned_ids, FLOW, MIN_SNAPSHOT_TAIL, ROWS_PER_STATEMENT};

use super::*;

/// Insert the new flows. A second creation of one id in the same batch, or
/// of an id that exists, loses. No snapshot yet: until there is one, the
/// state is the replay of the events, and these first events weigh what a
/// snapshot would.
pub(super) async fn create_flows(
    tx: &mut Tx<'_>,
    backend: Backend,
    decisions: &mut [Decision<'_>],
) -> Result<(), StoreError> {
    let mut seen = HashSet::new();
    let mut creations = Vec::new();
    for (i, d) in decisions.iter_mut().enumerate() {
        if d.commit.base_sequence != 0 {
            continue;
        }
        if seen.insert(d.commit.flow_id.clone()) {
            creations.push(i);
        } else {
            d.refused = Some(StoreError::FlowExists(d.commit.flow_id.clone()));
        }
    }
    for chunk in creations.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO flows (id, status, sequence, created_us, updated_us, completed_us, deactivated_us, \
             request, goals, state, deadline_us, error, snapshot_seq, snapshot_bytes, tail_bytes) \
             VALUES {} ON CONFLICT (id) DO NOTHING RETURNING id",
            values_list(backend, chunk.len(), 15)
        );
        let mut q = sqlx::query(&sql);
        for &i in chunk {
            let d = &decisions[i];
            let c = d.commit;
            q = q
                .bind(c.flow_id.clone())
                .bind(c.state.status.as_str())
                .bind(d.sequence())
                .bind(to_us(c.state.created_at))
                .bind(to_us(c.at))
                .bind(c.state.completed_at.map(to_us))
                .bind(c.state.deactivated_at.map(to_us))
                .bind(c.request.clone().unwrap_or_default())
                .bind(super::goals_text(&c.state))
                .bind(String::new())
                .bind(c.state.wake_at().map(to_us))
                .bind(c.state.error.clone())
                .bind(0_i64)
                .bind(d.event_bytes())
                .bind(0_i64);
        }
        let inserted = returned_ids(&q.fetch_all(&mut **tx).await?)?;
        for &i in chunk {
            let d = &mut decisions[i];
            if !inserted.contains(&d.commit.flow_id) {
                d.refused = Some(StoreError::FlowExists(d.commit.flow_id.clone()));
            }
        }
    }
    Ok(())
}

/// Update the existing flows' small columns; each row checks the sequence
/// it was decided on, and those that changed meanwhile are conflicts. (One
/// flow is decided under its lock: it appears once per batch.) The events'
/// weight adds to the flow's tail; the flows whose tail now outweighs
/// their snapshot are returned, to be snapshotted.
pub(super) async fn advance_flows(
    tx: &mut Tx<'_>,
    backend: Backend,
    decisions: &mut [Decision<'_>],
) -> Result<Vec<usize>, StoreError> {
    let updates: Vec<usize> = (0..decisions.len())
        .filter(|&i| decisions[i].commit.base_sequence != 0)
        .collect();
    let mut snapshots = Vec::new();
    for chunk in updates.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "WITH v (id, status, seq, updated_us, completed_us, deactivated_us, error, tail, base, deadline_us) AS (VALUES {}) \
             UPDATE flows SET status = v.status, sequence = v.seq, updated_us = v.updated_us, \
             completed_us = v.completed_us, deactivated_us = v.deactivated_us, error = v.error, \
             deadline_us = v.deadline_us, tail_bytes = flows.tail_bytes + v.tail \
             FROM v WHERE flows.id = v.id AND flows.sequence = v.base \
             RETURNING flows.id, flows.tail_bytes, flows.snapshot_bytes",
            typed_values_list(
                backend,
                chunk.len(),
                &["TEXT", "TEXT", "BIGINT", "BIGINT", "BIGINT", "BIGINT", "TEXT", "BIGINT", "BIGINT", "BIGINT"]
            )
        );
        let mut q = sqlx::query(&sql);
        for &i in chunk {
            let d = &decisions[i];
            let c = d.commit;
            q = q
                .bind(c.flow_id.clone())
                .bind(c.state.status.as_str())
                .bind(d.sequence())
                .bind(to_us(c.at))
                .bind(c.state.completed_at.map(to_us))
                .bind(c.state.deactivated_at.map(to_us))
                .bind(c.state.error.clone())
                .bind(d.event_bytes())
                .bind(c.base_sequence)
                .bind(c.state.wake_at().map(to_us));
        }
        let mut updated = HashMap::new();
        for row in q.fetch_all(&mut **tx).await? {
            let id: String = row.try_get("id")?;
            let tail: i64 = row.try_get("tail_bytes")?;
            let base: i64 = row.try_get("snapshot_bytes")?;
            updated.insert(id, tail > base.max(MIN_SNAPSHOT_TAIL));
        }
        for &i in chunk {
            let d = &mut decisions[i];
            match updated.get(&d.commit.flow_id) {
                None => d.refused = Some(StoreError::Conflict(format!("flow {}", d.commit.flow_id))),
                Some(true) => snapshots.push(i),
                Some(false) => {}
            }
        }
    }
    Ok(snapshots)
}

/// Snapshot the flows whose tail outweighs their base: rare, so that what
/// every decision writes stays in proportion to what changed.
pub(super) async fn write_snapshots(
    tx: &mut Tx<'_>,
    backend: Backend,
    decisions: &[Decision<'_>],
    which: &[usize],
) -> Result<(), StoreError> {
    for chunk in which.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "WITH v (id, state, refs, seq, bytes) AS (VALUES {}) \
             UPDATE flows SET state = v.state, state_refs = v.refs, snapshot_seq = v.seq, snapshot_bytes = v.bytes, \
             tail_bytes = 0 FROM v WHERE flows.id = v.id",
            typed_values_list(backend, chunk.len(), &["TEXT", "TEXT", "TEXT", "BIGINT", "BIGINT"])
        );
        let states = chunk
            .iter()
            .map(|&i| split(json_text(&*decisions[i].commit.state)?))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let values: Vec<(&str, &str, &str)> = chunk
            .iter()
            .zip(&states)
            .flat_map(|(&i, state)| {
                let flow = decisions[i].commit.flow_id.as_str();
                state
                    .values
                    .iter()
                    .map(move |(h, v)| (flow, h.as_str(), v.as_str()))
            })
            .collect();
        write_values(tx, backend, &values).await?;
        let mut q = sqlx::query(&sql);
        for (&i, state) in chunk.iter().zip(states) {
            let d = &decisions[i];
            let size = state.full_bytes();
            q = q
                .bind(d.commit.flow_id.clone())
                .bind(state.skeleton)
                .bind(state.refs)
                .bind(d.sequence())
                .bind(size);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Append the decisions' events to their flows' logs (Postgres), numbered
/// within `batch`.
pub(super) async fn append_events(
    tx: &mut Tx<'_>,
    batch: i64,
    passed: &[&Decision<'_>],
) -> Result<(), StoreError> {
    let events: Vec<(&FlowCommit, i64, i64, &str, &Stored)> = passed
        .iter()
        .flat_map(|d| {
            let c = d.commit;
            c.events
                .iter()
                .zip(&d.texts)
                .enumerate()
                .map(move |(k, (e, text))| {
                    (
                        c,
                        c.base_sequence + 1 + k as i64,
                        d.position + k as i64,
                        e.type_name(),
                        text,
                    )
                })
        })
        .collect();
    for chunk in events.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, ts_us, data, value_refs, \
             value_bytes, batch_id, batch_offset) VALUES {}",
            values_list(Backend::Postgres, chunk.len(), 10)
        );
        let mut q = sqlx::query(&sql);
        for (c, seq, offset, kind, data) in chunk {
            q = q
                .bind(FLOW)
                .bind(c.flow_id.clone())
                .bind(*seq)
                .bind(*kind)
                .bind(to_us(c.at))
                .bind(data.skeleton.clone())
                .bind(data.refs.clone())
                .bind(data.refs.is_some().then_some(data.value_bytes))
                .bind(batch)
                .bind(i32::try_from(*offset).unwrap_or(i32::MAX));
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Insert or update the rows of the work items the decisions touched.
pub(super) async fn write_work_items(
    tx: &mut Tx<'_>,
    backend: Backend,
    passed: &[&Decision<'_>],
) -> Result<(), StoreError> {
    let mut work = Vec::new();
    for d in passed {
        for w in &d.commit.work {
            work.push((d.commit.at, w, json_text(&w.detail)?));
        }
    }
    // Rows are locked in token order, as lease renewal locks them: two
    // transactions locking in one order cannot deadlock.
    work.sort_by(|a, b| a.1.token.cmp(&b.1.token));
    for chunk in work.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO work_items (token, flow_id, step_id, status, attempt, retry_count, due_us, \
             lease_owner, lease_expires_us, created_us, updated_us, detail, deferred_us) VALUES {} {WORK_UPSERT}",
            work_values(backend, chunk.len())
        );
        let mut q = sqlx::query(&sql);
        for (at, w, detail) in chunk {
            q = q
                .bind(w.token.clone())
                .bind(w.flow_id.clone())
                .bind(w.step_id.clone())
                .bind(w.status.as_str())
                .bind(i64::from(w.attempt))
                .bind(i64::from(w.retry_count))
                .bind(w.due_at.map(to_us))
                .bind(w.lease_owner.clone())
                .bind(w.lease_expires_at.map(to_us))
                .bind(w.lease_for.map(duration_us))
                .bind(to_us(w.created_at))
                .bind(to_us(*at))
                .bind(detail.clone())
                .bind(w.deferred_at.map(to_us));
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Insert the labels of the new flows.
pub(super) async fn label_flows(
    tx: &mut Tx<'_>,
    backend: Backend,
    passed: &[&Decision<'_>],
) -> Result<(), StoreError> {
    let labels: Vec<(&str, &String, &String)> = passed
        .iter()
        .filter(|d| d.commit.base_sequence == 0)
        .flat_map(|d| {
            let c = d.commit;
            c.state
                .labels
                .iter()
                .map(move |(k, v)| (c.flow_id.as_str(), k, v))
        })
        .collect();
    for chunk in labels.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO flow_labels (flow_id, key, value) VALUES {}",
            values_list(backend, chunk.len(), 3)
        );
        let mut q = sqlx::query(&sql);
        for (id, k, v) in chunk {
            q = q.bind(id.to_string()).bind((*k).clone()).bind((*v).clone());
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// The rows of the decisions' flows in their keys' lines, one statement
/// each (rare: only flows with a concurrency key have one).
pub(super) async fn write_lines(tx: &mut Tx<'_>, passed: &[&Decision<'_>]) -> Result<(), StoreError> {
    for d in passed {
        let Some(line) = &d.commit.line else {
            continue;
        };
        let sql = dollars(match line {
            LineWrite::Join { .. } => LINE_JOIN,
            LineWrite::Admitted => LINE_ADMITTED,
            LineWrite::Leave => LINE_LEAVE,
        });
        let mut q = sqlx::query(&sql).bind(d.commit.flow_id.clone());
        if let LineWrite::Join {
            key,
            limit,
            turn_us,
            queued_us,
        } = line
        {
            q = q
                .bind(key.clone())
                .bind(i64::from(*limit))
                .bind(*turn_us)
                .bind(*queued_us);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
