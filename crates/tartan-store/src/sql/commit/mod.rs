//! Committing a batch of decisions: one transaction of a few statements,
//! each named for what it writes. Round trips, not rows, are what a commit
//! costs:
//!
//! 1. [`create_flows`]: one multi-row insert of the new flows;
//! 2. [`advance_flows`]: one multi-row, sequence-checked update of the
//!    existing flows' small columns; a flow another process moved on is a
//!    conflict;
//! 3. [`write_snapshots`]: the rare snapshot of a flow whose events since
//!    the last one outweigh it (docs/durability.md, "Flow snapshots");
//! 4. [`append_events`], [`write_work_items`], [`label_flows`]: the rows of
//!    the decisions that passed their check, with the large values they
//!    hold, stored once per flow (`values`, `flow_values`). The events are
//!    numbered for the global feed: on SQLite with their global positions
//!    (`sqlite::take_positions`); on Postgres within a batch of their own
//!    (`open_batch`), given its positions once committed (`sql::feed`).

//!
//! On Postgres, where every statement is a round trip over the network,
//! steps 1, 2 and 4 are one statement ([`commit_in_one_statement`]): the
//! batch travels as columns, one array parameter each, and data-modifying
//! CTEs create and advance the flows and write the rows of those that
//! passed. It runs on its own (autocommit) on a connection kept for it:
//! one round trip and one WAL flush per batch. SQLite runs
//! in this process and has no data-modifying CTEs: its writer thread takes
//! the whole batch in one hand-off and runs the steps as one transaction
//! of one-row statements, each a function call.
//!
//! - this file: the batch's decisions, their positions and verdicts, and
//!   the entry (`commit_batch`, `commit_single`).
//! - `sqlite`: SQLite's way: the batch as one job on its writer thread,
//!   the steps as cached one-row statements.
//! - `steps`: each step as its own statement through sqlx (Postgres, when
//!   one batch decides a flow twice, and its snapshots).
//! - `one_statement`: the Postgres statement of data-modifying CTEs.

mod one_statement;
mod sqlite;
mod steps;

use one_statement::*;
use steps::*;

use std::collections::HashSet;

use sqlx::{Any, Row, Transaction};

use crate::connection::SqlStore;
use crate::dialect::Backend;
use crate::error::StoreError;
use crate::model::*;

use super::values::{split, write_values, Stored};

type Tx<'c> = Transaction<'c, Any>;

/// One decision of the batch, with its events' text as stored (their size
/// decides whether its flow's snapshot is written again).
pub(super) struct Decision<'a> {
    commit: &'a FlowCommit,
    texts: Vec<Stored>,
    /// Why it did not pass, if it did not.
    refused: Option<StoreError>,
    /// Once committed: the global position of its first event (docs/api.md,
    /// "Event streams") where the store gives positions as it commits
    /// (SQLite); on Postgres, the offset of its first event in its batch.
    position: i64,
}

impl Decision<'_> {
    fn event_bytes(&self) -> i64 {
        self.texts.iter().map(Stored::full_bytes).sum()
    }

    fn sequence(&self) -> i64 {
        self.commit.base_sequence + self.commit.events.len() as i64
    }
}

impl SqlStore {
    /// One decision in a transaction of its own (the fallback path).
    pub(super) async fn commit_single(&self, commit: &FlowCommit) -> Result<Option<i64>, StoreError> {
        let verdicts = self.commit_batch(std::slice::from_ref(commit)).await?;
        verdicts
            .into_iter()
            .next()
            .unwrap_or(Err(StoreError::Unavailable("a commit gave no verdict".into())))
    }

    /// A whole batch of decisions in one transaction (Postgres: SQLite's
    /// go to its writer, `sqlite`). The events get their global positions
    /// later (`sql::feed`), so each passed decision answers `None`.
    pub(super) async fn commit_batch(
        &self,
        batch: &[FlowCommit],
    ) -> Result<Vec<Result<Option<i64>, StoreError>>, StoreError> {
        let mut decisions = decisions_of(batch)?;
        refuse_repeated_creations(&mut decisions);
        // One statement sees the tables as they were before it: a flow
        // decided twice in one batch (never by the engine, which decides a
        // flow under its lock; possible through the trait) takes the
        // statements in turn instead.
        let mut seen = HashSet::new();
        let repeated = decisions
            .iter()
            .filter(|d| d.refused.is_none())
            .any(|d| !seen.insert(d.commit.flow_id.as_str()));
        if self.backend == Backend::Postgres && !repeated {
            let snapshots = commit_in_one_statement(self, &mut decisions).await?;
            write_snapshots_after(&self.write, &decisions, &snapshots).await?;
            return Ok(verdicts(decisions, false));
        }
        let mut tx = self.begin_commit().await?;
        create_flows(&mut tx, self.backend, &mut decisions).await?;
        let snapshots = advance_flows(&mut tx, self.backend, &mut decisions).await?;
        write_snapshots(&mut tx, self.backend, &decisions, &snapshots).await?;
        let batch = open_batch(&mut tx, &decisions).await?;
        assign_positions(&mut decisions, -1);
        let passed: Vec<&Decision<'_>> = decisions.iter().filter(|d| d.refused.is_none()).collect();
        write_values(&mut tx, self.backend, &event_values(&passed)).await?;
        append_events(&mut tx, batch, &passed).await?;
        write_work_items(&mut tx, self.backend, &passed).await?;
        label_flows(&mut tx, self.backend, &passed).await?;
        write_lines(&mut tx, &passed).await?;
        tx.commit().await?;
        Ok(verdicts(decisions, false))
    }
}

/// The batch's decisions, each event's text split into what the events
/// table keeps and the large values stored apart.
pub(super) fn decisions_of(batch: &[FlowCommit]) -> Result<Vec<Decision<'_>>, StoreError> {
    batch
        .iter()
        .map(|commit| {
            // A value named by several events of the decision is kept once,
            // with the first: each event's text is dropped as soon as it is
            // split.
            let mut held = HashSet::new();
            let texts = commit
                .events
                .iter()
                .map(|e| {
                    let mut stored = split(e.data_text().map_err(|e| StoreError::Corrupt(e.to_string()))?)?;
                    stored.values.retain(|(hash, _)| held.insert(hash.clone()));
                    Ok(stored)
                })
                .collect::<Result<_, StoreError>>()?;
            Ok(Decision {
                commit,
                texts,
                refused: None,
                position: 0,
            })
        })
        .collect()
}

/// A new flow's goals as stored in `flows.goals`: a JSON array.
pub(super) fn goals_text(state: &tartan_core::flow::FlowState) -> String {
    serde_json::to_string(&state.plan.goals).unwrap_or_else(|_| "[]".into())
}

/// Each decision's verdict: with the position of its first event where
/// `positioned` (SQLite), else `None`.
pub(super) fn verdicts(
    decisions: Vec<Decision<'_>>,
    positioned: bool,
) -> Vec<Result<Option<i64>, StoreError>> {
    decisions
        .into_iter()
        .map(|d| d.refused.map_or(Ok(positioned.then_some(d.position)), Err))
        .collect()
}

/// The large values of the decisions' events, once per flow and value.
pub(super) fn event_values<'a>(passed: &[&'a Decision<'_>]) -> Vec<(&'a str, &'a str, &'a str)> {
    let mut seen = HashSet::new();
    let mut values = Vec::new();
    for d in passed {
        for (hash, text) in d.texts.iter().flat_map(|t| &t.values) {
            if seen.insert((d.commit.flow_id.as_str(), hash.as_str())) {
                values.push((d.commit.flow_id.as_str(), hash.as_str(), text.as_str()));
            }
        }
    }
    values
}

/// What a work item's row takes from a decision when it exists: the one
/// upsert clause of the three ways a batch is written (`steps`, `sqlite`,
/// `one_statement`).
pub(super) const WORK_UPSERT: &str = "ON CONFLICT (token) DO UPDATE SET status = excluded.status, \
     attempt = excluded.attempt, retry_count = excluded.retry_count, due_us = excluded.due_us, \
     lease_owner = excluded.lease_owner, lease_expires_us = excluded.lease_expires_us, \
     updated_us = excluded.updated_us, detail = excluded.detail, deferred_us = excluded.deferred_us";

/// The statements of a flow's row in its concurrency key's line
/// (`LineWrite`), in SQLite's placeholders (`dollars` gives Postgres's):
/// a join (a retried flow's row is a new one), the flow let in, the flow
/// ended.
pub(super) const LINE_JOIN: &str = "INSERT INTO flow_lines (flow_id, key, lim, turn_us, queued_us, state) \
     VALUES (?1, ?2, ?3, ?4, ?5, 'waiting') ON CONFLICT (flow_id) DO UPDATE SET key = excluded.key, \
     lim = excluded.lim, turn_us = excluded.turn_us, queued_us = excluded.queued_us, state = 'waiting', \
     admitted_us = NULL";
pub(super) const LINE_ADMITTED: &str = "UPDATE flow_lines SET state = 'running' WHERE flow_id = ?1";
pub(super) const LINE_LEAVE: &str = "DELETE FROM flow_lines WHERE flow_id = ?1";

/// `sql` with Postgres's placeholders.
pub(super) fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// How many events the decisions that passed their checks hold: the
/// positions a batch takes.
pub(super) fn passed_events(decisions: &[Decision<'_>]) -> i64 {
    decisions
        .iter()
        .filter(|d| d.refused.is_none())
        .map(|d| d.commit.events.len() as i64)
        .sum()
}

/// Postgres: the batch the passed decisions' events are numbered in, its
/// id from a sequence (no lock: docs/durability.md, "Global positions").
/// A batch of no events is not written (it would take no positions).
pub(super) async fn open_batch(tx: &mut Tx<'_>, decisions: &[Decision<'_>]) -> Result<i64, StoreError> {
    let count = passed_events(decisions);
    if count == 0 {
        return Ok(0);
    }
    Ok(sqlx::query(
        "INSERT INTO event_batches (id, event_count) VALUES (nextval('event_batch_ids'), $1) RETURNING id",
    )
    .bind(count)
    .fetch_one(&mut **tx)
    .await?
    .try_get("id")?)
}

/// Number the passed decisions' events from `base + 1` on, in batch order.
pub(super) fn assign_positions(decisions: &mut [Decision<'_>], base: i64) {
    let mut next = base + 1;
    for d in decisions.iter_mut().filter(|d| d.refused.is_none()) {
        d.position = next;
        next += d.commit.events.len() as i64;
    }
}

/// A second creation of one flow id in the same batch loses.
pub(super) fn refuse_repeated_creations(decisions: &mut [Decision<'_>]) {
    let mut seen = HashSet::new();
    for d in decisions.iter_mut().filter(|d| d.commit.base_sequence == 0) {
        if !seen.insert(d.commit.flow_id.clone()) {
            d.refused = Some(StoreError::FlowExists(d.commit.flow_id.clone()));
        }
    }
}
