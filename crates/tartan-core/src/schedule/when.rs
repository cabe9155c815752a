//! When a schedule fires: a cron expression in a time zone, a fixed period,
//! or one time; the fire times after an instant, with daylight-saving
//! changes resolved by one rule (docs/schedules.md, "Time zones").

use std::str::FromStr;
use std::time::Duration;

use chrono::{LocalResult, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

use crate::error::ValidationError;
use crate::flow::Time;

/// The longest search for a cron expression's next time: croner gives up
/// after some years; this bounds the daylight-saving walk as well.
const GAP_SEARCH_MINUTES: i64 = 48 * 60;

/// How a schedule's fire times are made.
#[derive(Debug, Clone)]
pub enum When {
    /// A cron expression, read in the schedule's time zone.
    Cron(Box<croner::Cron>),
    /// Every `period`, counted from the Unix epoch (UTC): every 15m fires
    /// at :00, :15, :30 and :45, whenever the schedule was made.
    Every(Duration),
    /// Once.
    At(Time),
}

/// The field names of a cron expression, with and without seconds.
const FIELDS: [&str; 5] = ["minute", "hour", "day of month", "month", "day of week"];
const FIELDS_WITH_SECONDS: [&str; 6] = ["second", "minute", "hour", "day of month", "month", "day of week"];

fn parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
}

/// Parse a cron expression: five fields, an optional leading seconds
/// field, or an `@hourly`-style name. A bad field is named: croner says
/// what is wrong but not where, so each field is tried alone with `*`
/// in the others.
pub fn parse_cron(text: &str) -> Result<croner::Cron, ValidationError> {
    let text = text.trim();
    let refused = |why: String| ValidationError::new("cron", format!("{text:?}: {why}"));
    match parser().parse(text) {
        Ok(cron) => Ok(cron),
        Err(e) => {
            let fields: Vec<&str> = text.split_whitespace().collect();
            let names: &[&str] = match fields.len() {
                5 => &FIELDS,
                6 => &FIELDS_WITH_SECONDS,
                _ if text.starts_with('@') => {
                    return Err(refused(
                        "unknown name: use @yearly, @annually, @monthly, @weekly, @daily or @hourly".into(),
                    ))
                }
                n => {
                    return Err(refused(format!(
                        "{n} fields; a cron expression has 5 (minute hour day-of-month month \
                         day-of-week), or 6 with seconds first"
                    )))
                }
            };
            for (i, field) in fields.iter().enumerate() {
                let alone: Vec<&str> = (0..fields.len())
                    .map(|j| if i == j { *field } else { "*" })
                    .collect();
                if let Err(why) = parser().parse(&alone.join(" ")) {
                    return Err(refused(format!(
                        "the {} field {field:?} is not valid: {why}",
                        names[i]
                    )));
                }
            }
            Err(refused(e.to_string()))
        }
    }
}

/// A time zone by its IANA name (`Europe/Berlin`); UTC when absent.
pub fn parse_timezone(name: Option<&str>) -> Result<Tz, ValidationError> {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        None => Ok(Tz::UTC),
        Some(name) => Tz::from_str(name).map_err(|_| {
            ValidationError::new(
                "timezone",
                format!("{name:?} is not an IANA time zone name (such as Europe/Berlin or UTC)"),
            )
        }),
    }
}

impl When {
    /// The first fire time strictly after `after`, if there is one.
    pub fn next_after(&self, after: Time, tz: Tz) -> Option<Time> {
        match self {
            When::At(at) => (*at > after).then_some(*at),
            When::Every(period) => {
                let period_ms = i64::try_from(period.as_millis()).ok().filter(|p| *p > 0)?;
                let since = after.timestamp_millis();
                let next = (since.div_euclid(period_ms) + 1).checked_mul(period_ms)?;
                chrono::DateTime::from_timestamp_millis(next)
            }
            When::Cron(cron) => next_cron(cron, after, tz),
        }
    }
}

/// The next time of `cron` after `after`, walked on the zone's wall clock
/// so that each wall-clock time fires once: a time that occurs twice (the
/// clock set back) fires at its first occurrence; a time that does not
/// occur (the clock set forward) fires at the first instant after the
/// change, once however many such times the gap held.
fn next_cron(cron: &croner::Cron, after: Time, tz: Tz) -> Option<Time> {
    // Whole seconds: croner keeps the fraction it is given.
    let mut wall = chrono::Timelike::with_nanosecond(&after.with_timezone(&tz).naive_local(), 0)?;
    // A wall time that was already passed as an instant (after a gap, or
    // the second pass of a set-back hour) is stepped over.
    for _ in 0..10_000 {
        let candidate = cron
            .find_next_occurrence(&Utc.from_utc_datetime(&wall), false)
            .ok()?
            .naive_utc();
        let instant = resolve(candidate, tz)?;
        if instant > after {
            return Some(instant);
        }
        wall = candidate;
    }
    None
}

/// The instant of a wall-clock time in `tz` (module comment).
fn resolve(wall: NaiveDateTime, tz: Tz) -> Option<Time> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
        LocalResult::None => {
            // In a gap: the first whole minute after it.
            let minute = chrono::Timelike::with_nanosecond(&chrono::Timelike::with_second(&wall, 0)?, 0)?;
            (1..=GAP_SEARCH_MINUTES).find_map(|m| {
                match tz.from_local_datetime(&(minute + chrono::Duration::minutes(m))) {
                    LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
                    LocalResult::Ambiguous(first, _) => Some(first.with_timezone(&Utc)),
                    LocalResult::None => None,
                }
            })
        }
    }
}
