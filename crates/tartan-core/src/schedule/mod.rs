//! Schedules: flows started on a clock (docs/schedules.md). The core says
//! when a schedule fires, what each fire starts (its flow id and labels,
//! derived from the fire time so that a fire starts at most one flow
//! whichever engine makes it), and which missed fire times a schedule
//! makes up for; the engine keeps the clock and the database the claim.

mod request;
mod when;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::flow::Time;
use crate::plan::InitArgs;

pub use request::{ScheduleFlow, ScheduleRequest, MAX_SCHEDULE_ID_LEN};
pub use when::{parse_cron, parse_timezone, When};

/// The label naming the schedule a flow was started by.
pub const SCHEDULE_LABEL: &str = "schedule";
/// The label holding the fire time a flow was started for (RFC 3339, UTC).
pub const SCHEDULED_AT_LABEL: &str = "scheduled_at";

/// At most this many missed fire times are made up for with `catchup:
/// all`: the most recent ones (docs/schedules.md, "Missed fires").
pub const MAX_CATCHUP: usize = 100;

/// A fire time this long past when an engine comes to it was missed
/// (no engine ran then), not merely late.
pub const MISSED_AFTER: Duration = Duration::from_secs(60);

/// The windows before now a catch-up walks, widest last (`passed`).
const WINDOWS: [Duration; 5] = [
    Duration::from_secs(60),
    Duration::from_secs(3600),
    Duration::from_secs(86_400),
    Duration::from_secs(31 * 86_400),
    Duration::from_secs(400 * 86_400 * 100),
];

/// The most fire times one window of a catch-up walks.
const MAX_WALK: usize = 100_000;

/// The longest `jitter`.
pub const MAX_JITTER: Duration = Duration::from_secs(3600);

/// The shortest `every`.
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// What a fire does while the flow of the previous fire still runs.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Overlap {
    /// Start nothing; the fire is recorded as skipped, with why.
    #[default]
    Skip,
    /// Start another flow beside it.
    Allow,
    /// Cancel the running flow, then start.
    CancelPrevious,
    /// Keep this one fire (the latest) and start it when the running flow ends.
    BufferOne,
}

/// Which fire times missed while no engine ran are made up for.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::EnumString,
    strum::IntoStaticStr,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Catchup {
    /// One flow, for the most recent missed time.
    #[default]
    Latest,
    /// None: the schedule goes on from the next time.
    None,
    /// Every missed time, the most recent [`MAX_CATCHUP`] of them.
    All,
}

/// A schedule, parsed and checked.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub id: String,
    pub when: When,
    pub timezone: Tz,
    pub goals: Vec<String>,
    pub init: InitArgs,
    pub labels: BTreeMap<String, String>,
    pub concurrency: Option<crate::concurrency::Concurrency>,
    pub priority: i32,
    pub overlap: Overlap,
    pub catchup: Catchup,
    pub jitter: Duration,
    pub paused: bool,
    pub end_at: Option<Time>,
}

impl Schedule {
    /// The first fire time strictly after `after`, before `end_at`.
    pub fn next_after(&self, after: Time) -> Option<Time> {
        self.when
            .next_after(after, self.timezone)
            .filter(|t| self.end_at.is_none_or(|end| *t <= end))
    }

    /// The next `n` fire times after `after`.
    pub fn upcoming(&self, after: Time, n: usize) -> Vec<Time> {
        let mut times = Vec::with_capacity(n);
        let mut at = after;
        while times.len() < n {
            match self.next_after(at) {
                Some(next) => {
                    times.push(next);
                    at = next;
                }
                None => break,
            }
        }
        times
    }

    /// The fire times to make now, oldest first, when `due` (the first
    /// not yet made) has come by `now`; and the next fire time after `now`.
    /// A time more than [`MISSED_AFTER`] (and the jitter) before `now` was missed (no engine
    /// ran then): `catchup` says which of those are made.
    pub fn catch_up(&self, due: Time, now: Time) -> (Vec<Time>, Option<Time>) {
        let passed = self.passed(due, now);
        // A jittered fire is made up to `jitter` after its time.
        let missed_before = now - chrono::Duration::from_std(MISSED_AFTER + self.jitter).unwrap_or_default();
        let made: Vec<Time> = match self.catchup {
            Catchup::All => passed.into(),
            Catchup::Latest => passed.back().copied().into_iter().collect(),
            Catchup::None => passed
                .back()
                .copied()
                .filter(|t| *t >= missed_before)
                .into_iter()
                .collect(),
        };
        (made, self.next_after(now))
    }

    /// The last [`MAX_CATCHUP`] fire times from `due` to `now`, oldest
    /// first (`due` itself when none later has come). After a long outage
    /// there may be millions (a cron with seconds, down for a month): the
    /// walk starts a window before `now`, widened until it holds enough or
    /// reaches `due`, and no window is walked past [`MAX_WALK`] times.
    fn passed(&self, due: Time, now: Time) -> std::collections::VecDeque<Time> {
        let wanted = match self.catchup {
            Catchup::All => MAX_CATCHUP,
            Catchup::Latest | Catchup::None => 1,
        };
        let mut passed = std::collections::VecDeque::new();
        for window in WINDOWS
            .iter()
            .map(|d| now - chrono::Duration::from_std(*d).unwrap_or_default())
        {
            let from = window.max(due);
            passed.clear();
            if from == due {
                passed.push_back(due);
            }
            let mut at = from;
            let mut walked = 0;
            while let Some(next) = self.next_after(at).filter(|t| *t <= now) {
                passed.push_back(next);
                if passed.len() > MAX_CATCHUP {
                    passed.pop_front();
                }
                at = next;
                walked += 1;
                if walked >= MAX_WALK {
                    break;
                }
            }
            if passed.len() >= wanted || from == due {
                break;
            }
        }
        if passed.is_empty() {
            passed.push_back(due);
        }
        passed
    }

    /// The id of the flow a fire at `at` starts: the schedule's id and the
    /// fire time, so that every engine making this fire names the same flow
    /// and the database lets one start it.
    pub fn flow_id(&self, at: Time) -> String {
        format!("{}-{}", self.id, at.format("%Y%m%dt%H%M%S%.3fz"))
    }

    /// The labels of that flow: the schedule's own, `schedule` and
    /// `scheduled_at`.
    pub fn flow_labels(&self, at: Time) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        labels.insert(SCHEDULE_LABEL.into(), self.id.clone());
        labels.insert(
            SCHEDULED_AT_LABEL.into(),
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        );
        labels
    }

    /// How long after its time a fire is made: the same for every engine
    /// (a hash of the schedule and the time), below `jitter`.
    pub fn jitter_for(&self, at: Time) -> Duration {
        let max = u64::try_from(self.jitter.as_millis()).unwrap_or(u64::MAX);
        if max == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(fnv1a(format!("{}@{}", self.id, at.timestamp_millis()).as_bytes()) % max)
    }
}

/// FNV-1a, 64 bits: a hash that is the same in every process and release
/// (std's `DefaultHasher` promises neither), for `jitter_for`.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}
