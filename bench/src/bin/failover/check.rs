//! After the load: each flow read back from the engines (state and
//! history), and the checks made of them against the driver's own records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::load::{Kind, Load, Start};
use crate::steps::{Delivery, Records};
use crate::{lock, Mode};

/// Work items of a load flow: one sync, one async, three for_each.
const ITEMS_PER_FLOW: usize = 5;
/// A bulk flow has one more, `fo-once`'s: a retry starts it over under the
/// same receipt token, so it stays one item, failed once and then
/// succeeded.
const ITEMS_PER_BULK_FLOW: usize = ITEMS_PER_FLOW + 1;

/// What the engines say of one flow, after the load.
#[derive(Default)]
pub struct Found {
    /// `None`: the flow does not exist (404).
    pub status: Option<String>,
    /// Receipt token to the attempts of its `work_succeeded` events, with
    /// the step.
    succeeded: HashMap<String, (String, Vec<u32>)>,
    /// (token, attempt) of its `work_late_result` events.
    late: HashSet<(String, u32)>,
    work_items: usize,
    unreadable: bool,
    /// The bulk job named by each of its `flow_retried` events, in order.
    pub retried_by: Vec<String>,
    /// Receipt token to how many `flow_retried` events started it over.
    retried: HashMap<String, usize>,
}

/// Wait, until `settle_until` at the latest, for flow `id` to finish; then
/// read its state and its whole history (from the engine `n` points to,
/// or any other that answers).
pub async fn inspect(load: &Load, id: &str, n: usize, settle_until: Instant) -> Found {
    let mut found = Found::default();
    // Wait for the flow to finish (a status wait answers when it does).
    loop {
        let left = settle_until
            .saturating_duration_since(Instant::now())
            .as_secs()
            .clamp(1, 30);
        match load
            .get_any(&format!("/engine/flow/{id}/status?wait={left}s"), n)
            .await
        {
            Some((404, _)) => return found,
            Some((200, body)) if body["status"] != "active" || Instant::now() >= settle_until => break,
            Some((200, _)) => {}
            _ => {
                found.unreadable = true;
                return found;
            }
        }
    }
    let Some((200, state)) = load.get_any(&format!("/engine/flow/{id}"), n).await else {
        found.unreadable = true;
        return found;
    };
    found.status = state["status"].as_str().map(str::to_string);
    if let Some(executions) = state["executions"].as_object() {
        found.work_items = executions
            .values()
            .filter_map(|e| e["work_items"].as_object())
            .map(|w| w.len())
            .sum();
    }
    // The whole history, a page at a time.
    let mut after = 0;
    loop {
        let Some((200, page)) = load
            .get_any(&format!("/engine/flow/{id}/events?after={after}&limit=1000"), n)
            .await
        else {
            found.unreadable = true;
            return found;
        };
        for event in page["events"].as_array().into_iter().flatten() {
            let data = &event["data"];
            let token = data["token"].as_str().unwrap_or("").to_string();
            let attempt = data["attempt"].as_u64().unwrap_or(0) as u32;
            match event["type"].as_str() {
                Some("work_succeeded") => {
                    let step = data["step_id"].as_str().unwrap_or("").to_string();
                    found
                        .succeeded
                        .entry(token)
                        .or_insert_with(|| (step, Vec::new()))
                        .1
                        .push(attempt);
                }
                Some("work_late_result") => {
                    found.late.insert((token, attempt));
                }
                Some("flow_retried") => {
                    if let Some(by) = data["by"].as_str() {
                        found.retried_by.push(by.to_string());
                    }
                    for work in data["work"].as_array().into_iter().flatten() {
                        let token = work["token"].as_str().unwrap_or("").to_string();
                        *found.retried.entry(token).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    found
}

/// Intervals in which no probe that was sent succeeded: (from, to) in ms
/// between the sending of two probes that succeeded, longest first.
fn outages(starts: &[&Start]) -> Vec<(u64, u64)> {
    let mut ok: Vec<u64> = starts
        .iter()
        .filter(|s| s.acked_ms.is_some())
        .map(|s| s.sent_ms)
        .collect();
    ok.sort_unstable();
    let mut gaps: Vec<(u64, u64)> = ok.windows(2).map(|w| (w[0], w[1])).collect();
    gaps.sort_by_key(|(a, b)| std::cmp::Reverse(b - a));
    gaps
}

/// What the checks found, from the driver's records and the flows read back.
pub struct Checks {
    /// Starts acknowledged (load and probes), and those whose flow completed.
    pub acked: usize,
    pub completed: usize,
    /// Acknowledged flows that did not complete, by why.
    pub lost: BTreeMap<String, Vec<String>>,
    pub lost_count: usize,
    /// Receipt tokens with more than one `work_succeeded`, and their attempts.
    pub duplicates: Vec<(String, Vec<u32>)>,
    pub duplicate_count: usize,
    /// Work items (receipt tokens) completed, in all the histories.
    pub work_items_completed: usize,
    /// Completed flows without one completion per work item.
    pub short: Vec<String>,
    /// Completions that no call of this driver gave.
    pub unfounded: Vec<String>,
    pub webhooks_ok: usize,
    pub webhooks_failed: usize,
    pub webhook_answers: BTreeMap<u16, u64>,
    pub webhook_retried: usize,
    /// Webhooks answered `200` that are not in their flow's history.
    pub webhooks_lost: Vec<String>,
    pub heartbeats_ok: u64,
    pub heartbeats_other: u64,
    /// Per step: calls, and work items called more often than their
    /// answers explain; those items.
    pub again: BTreeMap<String, (usize, usize)>,
    pub called_again: Vec<String>,
    pub refused_webhooks: Vec<String>,
    /// Write outages seen by the probes, longest first, and the longest.
    pub gaps: Vec<(u64, u64)>,
    pub longest: u64,
    pub starts: StartCounts,
    /// Starts never acknowledged whose flow exists, and those of them not
    /// completed.
    pub unacked_exist: usize,
    pub unacked_stuck: Vec<String>,
}

/// How the starts went.
pub struct StartCounts {
    pub loads: usize,
    pub load_acked: usize,
    pub acked_after_retry: usize,
    pub via_conflict: usize,
    pub unacked: usize,
    /// Load starts refused (id, answer).
    pub refused: Vec<(String, String)>,
    pub probes: usize,
    pub probes_acked: usize,
}

impl Checks {
    /// Run every check.
    pub fn of(records: &Records, starts: &[Start], found: &HashMap<String, Found>) -> Checks {
        let acked: Vec<&Start> = starts.iter().filter(|s| s.acked_ms.is_some()).collect();
        let completed = acked
            .iter()
            .filter(|s| status_of(found, &s.id) == Some("completed"))
            .count();
        let lost = lost(&acked, found);
        let lost_count = lost.values().map(Vec::len).sum();
        let per_token = per_token(found);
        let duplicates: Vec<(String, Vec<u32>)> = per_token
            .iter()
            .filter(|(_, (_, a))| a.len() > 1)
            .map(|(t, (_, a))| (t.to_string(), a.clone()))
            .collect();
        let duplicate_count = duplicates.iter().map(|(_, a)| a.len() - 1).sum();
        let short = short(&acked, found);
        let unfounded = unfounded(records, &per_token);
        let webhooks = webhooks(records, &acked, found);
        let (again, called_again) = calls(records, found);
        let probes: Vec<&Start> = starts.iter().filter(|s| s.kind == Kind::Probe).collect();
        let gaps = outages(&probes);
        let longest = gaps.first().map(|(a, b)| b - a).unwrap_or(0);
        let unacked_exist: Vec<&Start> = starts
            .iter()
            .filter(|s| s.acked_ms.is_none() && found.get(&s.id).is_some_and(|f| f.status.is_some()))
            .collect();
        let unacked_stuck = unacked_exist
            .iter()
            .filter(|s| status_of(found, &s.id) != Some("completed"))
            .map(|s| s.id.clone())
            .collect();
        Checks {
            acked: acked.len(),
            completed,
            lost,
            lost_count,
            duplicates,
            duplicate_count,
            work_items_completed: per_token.len(),
            short,
            unfounded,
            webhooks_ok: webhooks.ok,
            webhooks_failed: webhooks.failed,
            webhook_answers: webhooks.answers,
            webhook_retried: webhooks.retried,
            webhooks_lost: webhooks.lost,
            heartbeats_ok: records.heartbeats_ok.load(Ordering::Relaxed),
            heartbeats_other: records.heartbeats_other.load(Ordering::Relaxed),
            again,
            called_again,
            refused_webhooks: webhooks.refused,
            gaps,
            longest,
            starts: StartCounts::of(starts),
            unacked_exist: unacked_exist.len(),
            unacked_stuck,
        }
    }

    /// A work item completed twice, a completion no call gave, or a flow's
    /// completions that do not match its items: fails any run.
    pub fn broken(&self) -> bool {
        self.duplicate_count > 0 || !self.unfounded.is_empty() || !self.short.is_empty()
    }

    /// Anything acknowledged lost: fails a run in sync mode.
    pub fn lost_any(&self) -> bool {
        self.lost_count > 0 || !self.webhooks_lost.is_empty() || !self.unacked_stuck.is_empty()
    }

    /// Flows still active in the database after the settle time.
    pub fn stuck(&self) -> usize {
        self.lost.get("STUCK: still active").map_or(0, Vec::len) + self.unacked_stuck.len()
    }

    /// Whether the run passed, for the promises of `mode`.
    pub fn passed(&self, mode: Mode) -> bool {
        match mode {
            Mode::Sync => !self.broken() && !self.lost_any(),
            Mode::Async => !self.broken(),
        }
    }
}

impl StartCounts {
    fn of(starts: &[Start]) -> StartCounts {
        let loads: Vec<&Start> = starts.iter().filter(|s| s.kind.is_load()).collect();
        let probes: Vec<&Start> = starts.iter().filter(|s| s.kind == Kind::Probe).collect();
        StartCounts {
            loads: loads.len(),
            load_acked: loads.iter().filter(|s| s.acked_ms.is_some()).count(),
            acked_after_retry: loads
                .iter()
                .filter(|s| s.acked_ms.is_some() && s.tries > 1)
                .count(),
            via_conflict: loads.iter().filter(|s| s.via_conflict).count(),
            unacked: loads
                .iter()
                .filter(|s| s.acked_ms.is_none() && s.refused.is_none())
                .count(),
            refused: loads
                .iter()
                .filter_map(|s| s.refused.as_ref().map(|r| (s.id.clone(), r.clone())))
                .collect(),
            probes: probes.len(),
            probes_acked: probes.iter().filter(|s| s.acked_ms.is_some()).count(),
        }
    }
}

fn status_of<'a>(found: &'a HashMap<String, Found>, id: &str) -> Option<&'a str> {
    found.get(id).and_then(|f| f.status.as_deref())
}

/// Acknowledged flows that did not complete, by why.
fn lost(acked: &[&Start], found: &HashMap<String, Found>) -> BTreeMap<String, Vec<String>> {
    let mut lost: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in acked {
        let Some(f) = found.get(&s.id) else {
            continue;
        };
        let why = match (&f.status, f.unreadable) {
            (Some(st), _) if st == "completed" => continue,
            (_, true) => "unreadable".to_string(),
            (None, _) => "missing from the database".to_string(),
            // In the database and never finishing: no replication loss
            // explains that, an engine did not take the flow up again.
            (Some(st), _) if st == "active" => "STUCK: still active".to_string(),
            // Failed by `fo-once` and not retried to completion by a job.
            (Some(st), _) if st == "failed" && s.kind == Kind::Bulk => {
                "failed, a bulk flow no job retried to completion".to_string()
            }
            (Some(st), _) => st.clone(),
        };
        lost.entry(why).or_default().push(s.id.clone());
    }
    lost
}

/// Completions per token, across every flow read: the step and the
/// attempts of its `work_succeeded` events.
fn per_token(found: &HashMap<String, Found>) -> HashMap<&str, (&str, Vec<u32>)> {
    let mut per_token: HashMap<&str, (&str, Vec<u32>)> = HashMap::new();
    for f in found.values() {
        for (token, (step, attempts)) in &f.succeeded {
            per_token
                .entry(token)
                .or_insert((step, Vec::new()))
                .1
                .extend(attempts);
        }
    }
    per_token
}

/// Completed flows without one completion per work item.
fn short(acked: &[&Start], found: &HashMap<String, Found>) -> Vec<String> {
    acked
        .iter()
        .filter_map(|s| found.get(&s.id).map(|f| (s, f)))
        .filter(|(_, f)| f.status.as_deref() == Some("completed"))
        .filter(|(s, f)| {
            let want = match s.kind {
                Kind::Load => ITEMS_PER_FLOW,
                Kind::Bulk => ITEMS_PER_BULK_FLOW,
                Kind::Probe => 1,
            };
            f.succeeded.len() != want || f.work_items != want
        })
        .map(|(s, _)| s.id.clone())
        .collect()
}

/// Completions that answer no result this driver gave.
fn unfounded(records: &Records, per_token: &HashMap<&str, (&str, Vec<u32>)>) -> Vec<String> {
    let answered = lock(&records.answered);
    let webhooks = lock(&records.webhooks);
    let mut unfounded: Vec<String> = Vec::new();
    for (token, (step, attempts)) in per_token {
        for attempt in attempts {
            let given = match *step {
                // `fo-once`: a retried item counts its attempts from 1 again,
                // and its refused first call is not in `answered`.
                "fo-sync" | "fo-each" | "fo-once" => answered.contains(&(token.to_string(), *attempt)),
                "fo-async" => webhooks
                    .get(&(token.to_string(), *attempt))
                    .is_some_and(|w| w.status == 200),
                _ => true, // the probe's script step: the engine's own answer
            };
            if !given {
                unfounded.push(format!("{step} {token} attempt {attempt}"));
            }
        }
    }
    unfounded
}

/// How the webhooks went.
struct Webhooks {
    ok: usize,
    failed: usize,
    answers: BTreeMap<u16, u64>,
    retried: usize,
    /// Answered `200` and not in the flow's history.
    lost: Vec<String>,
    /// Not answered `200`, with their answer.
    refused: Vec<String>,
}

/// Every webhook answered `200` is in its flow's history.
fn webhooks(records: &Records, acked: &[&Start], found: &HashMap<String, Found>) -> Webhooks {
    let webhooks = lock(&records.webhooks);
    let mut out = Webhooks {
        ok: 0,
        failed: 0,
        answers: BTreeMap::new(),
        retried: 0,
        lost: Vec::new(),
        refused: Vec::new(),
    };
    let acked_ids: HashSet<&str> = acked.iter().map(|s| s.id.as_str()).collect();
    for ((token, attempt), Delivery { flow, status, tries }) in webhooks.iter() {
        *out.answers.entry(*status).or_default() += 1;
        if *tries > 1 {
            out.retried += 1;
        }
        if *status != 200 {
            out.failed += 1;
            out.refused
                .push(format!("{flow} {token} attempt {attempt}: {status}"));
            continue;
        }
        out.ok += 1;
        let recorded = found.get(flow).is_some_and(|f| {
            f.succeeded.get(token).is_some_and(|(_, a)| a.contains(attempt))
                || f.late.contains(&(token.clone(), *attempt))
        });
        if !recorded
            && (acked_ids.contains(flow.as_str()) || found.get(flow).is_some_and(|f| f.status.is_some()))
        {
            out.lost.push(format!("{flow} {token} attempt {attempt}"));
        }
    }
    out.refused.sort();
    out
}

/// Calls made more often than the step's own answers and the flow's
/// retries explain: made again after a lease ran out or a result could not
/// be recorded. Per step: the calls and the work items called again; and
/// those items.
fn calls(
    records: &Records,
    found: &HashMap<String, Found>,
) -> (BTreeMap<String, (usize, usize)>, Vec<String>) {
    let calls = lock(&records.calls);
    let mut again: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut called_again: Vec<String> = Vec::new();
    for ((step, token), called) in calls.iter() {
        // A flow retry starts an item over: one more call.
        let retries = found
            .get(&called.flow)
            .and_then(|f| f.retried.get(token))
            .copied()
            .unwrap_or(0);
        let expected = (if step == "fo-sync" { 2 } else { 1 }) + retries;
        let entry = again.entry(step.clone()).or_default();
        entry.0 += called.attempts.len();
        if called.attempts.len() > expected {
            entry.1 += 1;
            called_again.push(format!(
                "{step} {token} of {}, attempts {:?}",
                called.flow, called.attempts
            ));
        }
    }
    called_again.sort();
    (again, called_again)
}
