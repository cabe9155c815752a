//! The data the store trait speaks in.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;
use tartan_core::bulk::{BulkAction, BulkItemState, BulkStatus};
use tartan_core::filter::FlowFilter;
use tartan_core::flow::{FlowEvent, FlowState, FlowStatus, Time, WorkState, WorkStatus};
use tartan_core::step::Step;

/// An event as stored, ready to be shown.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub timestamp: Time,
    pub data: Value,
}

/// One page of an event history (docs/api.md, "Event histories").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPage {
    /// The events after the page's start, in order.
    pub events: Vec<StoredEvent>,
    /// The sequence of the page's last event when more follow it: the
    /// `after` of the next page. `None` on the last page.
    pub next: Option<i64>,
}

/// Which flow events a read of the feed keeps (docs/api.md, "Event streams").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeedFilter {
    /// Only flows whose id starts with this.
    pub flow_prefix: Option<String>,
    /// Only events of these types; empty keeps every type.
    pub event_types: Vec<String>,
}

impl FeedFilter {
    pub fn keeps(&self, flow_id: &str, event_type: &str) -> bool {
        self.flow_prefix.as_deref().is_none_or(|p| flow_id.starts_with(p))
            && (self.event_types.is_empty() || self.event_types.iter().any(|t| t == event_type))
    }
}

/// A flow event with its global position.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedEvent {
    pub position: i64,
    pub event: StoredEvent,
}

/// One page of the feed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedPage {
    /// The events after the page's start that the filter keeps, in order.
    pub events: Vec<FeedEvent>,
    /// Every position up to this one has been looked at, kept or not: the
    /// `after` of the next page. Equal to the start when nothing is newer.
    pub reached: i64,
    /// The position of the last committed flow event when the page was read:
    /// the reader has caught up when `reached` is there.
    pub head: i64,
}

#[derive(Debug, Clone, Default)]
pub struct CatalogSnapshot {
    pub steps: Vec<Step>,
    pub sequence: i64,
    pub last_updated: Option<Time>,
}

/// One change of the catalog.
#[derive(Debug, Clone)]
pub enum CatalogChange {
    Registered(Step, Time),
    Updated(Step, Time),
    Unregistered(String, Time),
}

impl CatalogChange {
    /// The type of the event the change is stored as.
    pub fn event_type(&self) -> &'static str {
        match self {
            CatalogChange::Registered(..) => "step_registered",
            CatalogChange::Updated(..) => "step_updated",
            CatalogChange::Unregistered(..) => "step_unregistered",
        }
    }

    /// The `data` of that event, as Argyll has it.
    pub fn data(&self) -> Value {
        match self {
            CatalogChange::Registered(step, _) | CatalogChange::Updated(step, _) => {
                serde_json::json!({ "step": step })
            }
            CatalogChange::Unregistered(id, _) => serde_json::json!({ "step_id": id }),
        }
    }

    /// When the change was made.
    pub fn at(&self) -> Time {
        match self {
            CatalogChange::Registered(_, at)
            | CatalogChange::Updated(_, at)
            | CatalogChange::Unregistered(_, at) => *at,
        }
    }
}

/// Everything one decision about one flow changes.
#[derive(Debug, Clone)]
pub struct FlowCommit {
    pub flow_id: String,
    /// Sequence of the last event the decision was based on; 0 creates the flow.
    pub base_sequence: i64,
    pub at: Time,
    pub events: Vec<FlowEvent>,
    /// The state after the events: its columns are updated, and it is
    /// written whole only as a snapshot, now and then (docs/durability.md,
    /// "Flow snapshots"). Shared with the engine's copy, not cloned.
    pub state: std::sync::Arc<FlowState>,
    /// The start request, stored when the flow is created.
    pub request: Option<String>,
    /// Work items whose rows change.
    pub work: Vec<WorkRow>,
    /// The flow's row in its concurrency key's line, when it changes.
    pub line: Option<LineWrite>,
}

/// What a decision changes in its flow's row of its concurrency key's
/// line (docs/concurrency.md; `LineStore` lets the next flows in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineWrite {
    /// It joins (started or retried with a key), waiting; `turn_us`: the
    /// order of its turn (`tartan_core::concurrency::turn_us`).
    Join {
        key: String,
        limit: u32,
        turn_us: i64,
        queued_us: i64,
    },
    /// Its `flow_admitted` is committed: it runs.
    Admitted,
    /// It ended: its row goes, making room.
    Leave,
}

impl LineWrite {
    /// The three ways a row changes, as the commit statements name them.
    pub fn op(&self) -> &'static str {
        match self {
            LineWrite::Join { .. } => "join",
            LineWrite::Admitted => "admitted",
            LineWrite::Leave => "leave",
        }
    }
}

/// The row of one work item.
#[derive(Debug, Clone)]
pub struct WorkRow {
    pub token: String,
    pub flow_id: String,
    pub step_id: String,
    pub status: WorkStatus,
    pub attempt: u32,
    pub retry_count: u32,
    pub due_at: Option<Time>,
    pub lease_owner: Option<String>,
    /// A lease that ends at a set time (one anchored to a retry's or a
    /// webhook's due time).
    pub lease_expires_at: Option<Time>,
    /// A lease that ends this long after the commit, on the database's clock
    /// (a call's lease): used when `lease_expires_at` is `None`.
    pub lease_for: Option<std::time::Duration>,
    pub created_at: Time,
    pub detail: WorkState,
    /// Since when the item has waited for its unhealthy step (`None`: it
    /// does not), for `WorkStore::deferred_work`.
    pub deferred_at: Option<Time>,
}

/// A flow's projection as loaded.
#[derive(Debug, Clone)]
pub struct LoadedFlow {
    pub state: FlowState,
    pub sequence: i64,
    /// The sequence of the snapshot the state was rebuilt from (0: none,
    /// every event was replayed); the events after it were replayed.
    pub snapshot: i64,
}

/// Which version of a flow the database holds: the sequence of its last
/// event and when that event's commit was decided (`FlowCommit::at`).
/// Two processes that each committed a flow to the same sequence (one of
/// them in commits a failover lost) differ in the time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowVersion {
    pub sequence: i64,
    pub updated_at: Time,
}

/// The order of a listing of flows, within each of its two groups: active
/// flows first, then the others (Argyll's order; docs/api.md, "Listing
/// flows"). A flow's time is its end's, or its start's while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortOrder {
    RecentFirst,
    OldestFirst,
}

/// The two groups of a flow listing, in their order: running flows first,
/// then ended ones (Argyll's order; docs/api.md, "Listing flows").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListGroup {
    Active,
    Ended,
}

#[derive(Debug, Clone)]
pub struct FlowQuery {
    /// Which flows (the same filter a bulk job takes; `ids` unused).
    pub filter: FlowFilter,
    pub limit: usize,
    /// Opaque position from a previous page.
    pub cursor: Option<String>,
    pub sort: SortOrder,
    /// Count every flow that matches (`FlowPage::total`): one more
    /// statement, a scan of the matches.
    pub total: bool,
}

/// A flow as a page of flows shows it: its row, not its state.
#[derive(Debug, Clone)]
pub struct FlowSummary {
    pub id: String,
    pub status: FlowStatus,
    pub created_at: Time,
    pub updated_at: Time,
    pub completed_at: Option<Time>,
    pub labels: std::collections::BTreeMap<String, String>,
    pub error: Option<String>,
    /// Empty for flows created before goals were kept with the row.
    pub goals: Vec<String>,
    /// Steps with a work item running or waiting to run (a retry, a
    /// deferral, a first attempt), by id.
    pub running_steps: Vec<String>,
    /// Steps with a failed work item, by id.
    pub failed_steps: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct FlowPage {
    pub flows: Vec<FlowSummary>,
    pub next_cursor: Option<String>,
    /// The flows that match, over all pages, when the query asked.
    pub total: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct WorkQuery {
    pub flow_id: Option<String>,
    pub step_id: Option<String>,
    pub status: Option<WorkStatus>,
    pub limit: usize,
    pub cursor: Option<String>,
}

/// A work item with its place in the flow, as queries show it.
#[derive(Debug, Clone)]
pub struct WorkView {
    pub flow_id: String,
    pub step_id: String,
    pub token: String,
    pub attempt: u32,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Time>,
    pub detail: WorkState,
}

#[derive(Debug, Clone)]
pub struct WorkPage {
    pub items: Vec<WorkView>,
    pub next_cursor: Option<String>,
}

/// Who claims and for how long. Leases are computed and compared on the
/// database's clock (docs/durability.md, "Leases"), so that processes whose
/// clocks disagree still agree on whose lease has run out.
#[derive(Debug, Clone)]
pub struct Claim {
    pub node: String,
    /// When the claim is made: `None` (what the engine passes) is the
    /// database's now; a set time replays history in tests. Due retries are
    /// those due by this time, or by the process's clock when `None`: due
    /// times are the engine's own decisions, on its clock.
    pub at: Option<Time>,
    /// How long the lease lasts from `at`.
    pub lease: std::time::Duration,
    pub limit: usize,
    /// Also take back `node`'s own leases (at start-up, after a crash).
    pub include_own: bool,
}

/// Which work item.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkKey {
    pub flow_id: String,
    pub step_id: String,
    pub token: String,
}

/// A timer found in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduledTimer {
    /// A work item waiting for its retry.
    Retry(WorkKey, Time),
    /// An accepted async call's inactivity window.
    Inactivity(WorkKey, Time),
    /// A flow's deadline.
    FlowDeadline(String, Time),
}

/// Microseconds since the epoch, as times are stored.
pub fn to_us(t: Time) -> i64 {
    t.timestamp_micros()
}

pub fn from_us(us: i64) -> Time {
    Utc.timestamp_micros(us)
        .single()
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// A cursor is the sort key of the last row of a page: `<micros>.<id>`.
pub fn encode_cursor(us: i64, id: &str) -> String {
    format!("{us}.{id}")
}

pub fn decode_cursor(cursor: &str) -> Option<(i64, String)> {
    let (us, id) = cursor.split_once('.')?;
    Some((us.parse().ok()?, id.to_string()))
}

/// A page of flows' cursor: the last flow's place in the listing's order,
/// `a<micros>.<id>` in the active group, `e<micros>.<id>` in the ended.
pub fn encode_flow_cursor(active: bool, us: i64, id: &str) -> String {
    format!("{}{}", if active { 'a' } else { 'e' }, encode_cursor(us, id))
}

/// `(active, micros, id)` of a flow cursor.
pub fn decode_flow_cursor(cursor: &str) -> Option<(bool, i64, String)> {
    let (active, rest) = match cursor.strip_prefix('a') {
        Some(rest) => (true, rest),
        None => (false, cursor.strip_prefix('e')?),
    };
    let (us, id) = decode_cursor(rest)?;
    Some((active, us, id))
}

/// The event, re-read from its stored form (used by replay).
pub fn event_of(stored: &StoredEvent) -> Result<FlowEvent, crate::StoreError> {
    FlowEvent::from_parts(&stored.event_type, stored.data.clone())
        .map_err(|e| crate::StoreError::Corrupt(e.to_string()))
}

/// A bulk job to create.
#[derive(Debug, Clone)]
pub struct NewBulkJob {
    pub id: String,
    pub action: BulkAction,
    /// The filter as the request gave it, shown back.
    pub shown_filter: Value,
    /// Which flows, checked and narrowed to the statuses the action acts on.
    pub filter: FlowFilter,
    /// Flows per second.
    pub rate: u32,
    pub created_at: Time,
}

/// What creating a bulk job came to.
#[derive(Debug, Clone)]
pub enum BulkCreated {
    Created(Box<BulkJob>),
    /// More flows matched than the limit: none was snapshotted.
    TooMany(u64),
}

/// A bulk job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkJob {
    pub id: String,
    pub action: BulkAction,
    /// The filter as the request gave it.
    pub filter: Value,
    pub rate: u32,
    pub status: BulkStatus,
    pub total: u64,
    pub done: u64,
    pub skipped: u64,
    pub failed: u64,
    pub created_at: Time,
    pub started_at: Option<Time>,
    pub finished_at: Option<Time>,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<Time>,
}

/// How a bulk job ends by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkEnd {
    Completed,
    Failed,
}

/// One flow of a bulk job, as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkItem {
    pub flow_id: String,
    pub state: BulkItemState,
    pub detail: Option<String>,
    pub at: Option<Time>,
}

/// An engine on the database and its heartbeat.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeRecord {
    pub node_id: String,
    pub started_at: Time,
    pub last_seen: Time,
}

/// A check of a step's health: what it found, by which engine, when; and
/// since when the step has had this health.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthRecord {
    pub step_id: String,
    pub health: tartan_core::health::HealthState,
    pub node: String,
    pub checked_at: Time,
    /// When the status or error last changed: the store keeps it, and
    /// `record_health` ignores what it is given.
    pub changed_at: Time,
}
