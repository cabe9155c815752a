//! Bulk retry jobs across the failovers: every `BULK_SHARE`-th load flow is
//! a bulk flow (label `fo: bulk`, goal `fo-once`, which fails it once), and
//! every `BULK_EVERY` during the load a job retries the run's failed bulk
//! flows (`POST /engine/bulk/retry`), on the engines in turn. After the load
//! one more job, then a wait, bounded by the settle time, for every job to
//! finish and every bulk flow to complete; then the checks of what the jobs
//! did.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::check::Found;
use crate::load::{Answers, Kind, Load, Start};
use crate::Mode;

/// One load flow in this many is a bulk flow.
pub const BULK_SHARE: usize = 5;
/// How often a job is created during the load.
pub const BULK_EVERY: Duration = Duration::from_secs(3);
/// A creation that gave up: tried for this long without an answer.
const CREATE_GIVE_UP: Duration = Duration::from_secs(60);
/// Failures of the jobs shown in the report.
const FAILURES_SHOWN: usize = 5;

/// The run's bulk jobs: what they match, their rate, the answers to their
/// creations.
pub struct Bulk {
    filter: Value,
    rate: u64,
    pub answers: Answers,
}

/// One job creation, as the client saw it.
pub struct Creation {
    /// The job's id, when answered `202`.
    pub job: Option<String>,
    /// The flows the job matched when it was created.
    pub total: u64,
    /// Refused (`400` ...), or answered `202` without a job id: the answer.
    pub refused: Option<String>,
    /// Created after the load stopped.
    pub after_load: bool,
}

/// A job as `GET /engine/bulk/{id}` last showed it (`status` "lost": it
/// answered `404`, its creation lost by the database).
pub struct JobView {
    pub status: String,
    pub total: u64,
    pub done: u64,
    pub skipped: u64,
    pub failed: u64,
    /// The first flows it failed on: `flow: detail`.
    pub failures: Vec<String>,
}

impl JobView {
    fn of(body: &Value) -> JobView {
        let count = |key: &str| body[key].as_u64().unwrap_or(0);
        JobView {
            status: body["status"].as_str().unwrap_or("?").to_string(),
            total: count("total"),
            done: count("done"),
            skipped: count("skipped"),
            failed: count("failed"),
            failures: body["failures"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| {
                    format!(
                        "{}: {}",
                        f["flow_id"].as_str().unwrap_or("?"),
                        f["detail"].as_str().unwrap_or("")
                    )
                })
                .collect(),
        }
    }

    /// A job the database no longer has (asynchronous replication lost
    /// its creation after the `202`): it will not run.
    fn lost() -> JobView {
        JobView::of(&json!({"status": "lost"}))
    }

    fn finished(&self) -> bool {
        matches!(
            self.status.as_str(),
            "completed" | "cancelled" | "failed" | "lost"
        )
    }
}

/// How the wait after the load ended.
pub struct Settled {
    /// Each recorded job as last read (`None`: never read).
    pub jobs: BTreeMap<String, Option<JobView>>,
    /// Every job finished and no bulk flow of the run left unfinished.
    pub settled: bool,
    pub waited: Duration,
    /// The run's bulk flows the last query found not completed, by status
    /// (empty when not queried: a job still ran).
    pub open: BTreeMap<String, usize>,
}

impl Bulk {
    /// The jobs of run `run_id`, acting on `rate` flows a second each.
    pub fn new(run_id: &str, rate: u64) -> Bulk {
        Bulk {
            filter: json!({"id_prefix": format!("fo-{run_id}-"), "labels": {"fo": "bulk"}, "statuses": ["failed"]}),
            rate,
            answers: Answers::default(),
        }
    }

    /// The flows a second each job acts on.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// A start body for bulk flow `id`, its initial inputs `init`.
    pub fn flow(id: &str, init: Value) -> Value {
        json!({"id": id, "goals": ["fo-once"], "init": init, "labels": {"fo": "bulk"}})
    }

    /// Create one job, first on engine `first_engine`, trying the next on
    /// `503`, another `5xx` or no answer, for up to a minute. A `400` is
    /// noted, not tried again.
    pub async fn create(&self, load: &Load, first_engine: usize, after_load: bool) -> Creation {
        let body = json!({"filter": self.filter, "rate": self.rate});
        let give_up = Instant::now() + CREATE_GIVE_UP;
        let mut creation = Creation {
            job: None,
            total: 0,
            refused: None,
            after_load,
        };
        for tries in 0.. {
            let engine = &load.engines[(first_engine + tries) % load.engines.len()];
            let (status, sent) = load
                .post_noted(engine, "/engine/bulk/retry", &body, &self.answers)
                .await;
            match sent {
                Ok(r) if status == 202 => {
                    let job = r.json::<Value>().await.unwrap_or(Value::Null);
                    match job["id"].as_str() {
                        Some(id) => {
                            creation.job = Some(id.to_string());
                            creation.total = job["total"].as_u64().unwrap_or(0);
                        }
                        None => creation.refused = Some(format!("202 without a job id: {job}")),
                    }
                    return creation;
                }
                Ok(r) if status < 500 => {
                    let text = r.text().await.unwrap_or_default();
                    creation.refused = Some(format!("{status}: {text}"));
                    return creation;
                }
                _ => {}
            }
            if Instant::now() > give_up {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        creation
    }

    /// After the load: one more job, then wait until `until` at most for
    /// every recorded job to finish and every bulk flow of the run in the
    /// database to complete. A job is created again when every job has
    /// finished and bulk flows failed since (after the last job matched).
    pub async fn settle(&self, load: &Load, creations: &mut Vec<Creation>, until: Instant) -> Settled {
        let started = Instant::now();
        let mut n = creations.len();
        creations.push(self.create(load, n, true).await);
        let mut last_created = Instant::now();
        let mut jobs: BTreeMap<String, Option<JobView>> = creations
            .iter()
            .filter_map(|c| c.job.clone())
            .map(|id| (id, None))
            .collect();
        loop {
            for (id, view) in jobs.iter_mut() {
                if view.as_ref().is_some_and(JobView::finished) {
                    continue;
                }
                n += 1;
                match load.get_any(&format!("/engine/bulk/{id}"), n).await {
                    Some((200, body)) => *view = Some(JobView::of(&body)),
                    Some((404, _)) => *view = Some(JobView::lost()),
                    _ => {}
                }
            }
            let running = jobs
                .values()
                .filter(|v| !v.as_ref().is_some_and(JobView::finished))
                .count();
            let open = if running == 0 {
                self.open_flows(load, n).await
            } else {
                None
            };
            let done = open.as_ref().is_some_and(BTreeMap::is_empty);
            if done || Instant::now() >= until {
                return Settled {
                    jobs,
                    settled: done,
                    waited: started.elapsed(),
                    open: open.unwrap_or_default(),
                };
            }
            // Failed since the last job matched: a job retries them (only
            // failed flows are bulk flows' way to end besides completing).
            let failed = open.iter().flatten().any(|(status, _)| status == "failed");
            if failed && last_created.elapsed() >= BULK_EVERY {
                n += 1;
                let creation = self.create(load, n, true).await;
                if let Some(id) = &creation.job {
                    jobs.insert(id.clone(), None);
                }
                creations.push(creation);
                last_created = Instant::now();
            }
            let left = until.saturating_duration_since(Instant::now());
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        }
    }

    /// The run's bulk flows not completed, by status: active, failed or
    /// cancelled (`None`: the query was not answered).
    async fn open_flows(&self, load: &Load, n: usize) -> Option<BTreeMap<String, usize>> {
        let query = json!({
            "id_prefix": self.filter["id_prefix"],
            "labels": self.filter["labels"],
            "statuses": ["active", "failed", "cancelled"],
            "limit": 1000,
        });
        let Some((200, page)) = load.post_any("/engine/flow/query", &query, n).await else {
            return None;
        };
        let mut open: BTreeMap<String, usize> = BTreeMap::new();
        for flow in page["flows"].as_array()? {
            *open
                .entry(flow["status"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
        }
        Some(open)
    }
}

/// What the bulk jobs did, and what fails the run.
pub struct BulkChecks {
    /// Jobs answered `202` with an id; of them created after the load, and
    /// matching no flow when created.
    pub created: usize,
    pub after_load: usize,
    pub empty: usize,
    /// Creations refused (`400` ...), and given up without an answer.
    pub refused: Vec<String>,
    pub gave_up: usize,
    /// The jobs by their last status (`unread`: never read).
    pub by_status: BTreeMap<String, usize>,
    pub completed: usize,
    /// Over every job: flows matched, retried, skipped, failed; the first
    /// failures.
    pub matched: u64,
    pub done: u64,
    pub skipped: u64,
    pub failed: u64,
    pub failures: Vec<String>,
    /// Flows that one job retried more than once: `flow: job xN`.
    pub doubles: Vec<String>,
    /// Flows whose history names a job of this run as their retrier, and
    /// a job this driver did not record (its `202` was not received).
    pub retried: usize,
    pub retried_by_other: usize,
    /// Acknowledged bulk flows; completed; the others.
    pub flows: usize,
    pub flows_completed: usize,
    pub not_completed: Vec<String>,
    pub settled: bool,
    pub waited: Duration,
    pub open: BTreeMap<String, usize>,
}

impl BulkChecks {
    pub fn of(
        creations: &[Creation],
        settled: Settled,
        starts: &[Start],
        found: &HashMap<String, Found>,
    ) -> BulkChecks {
        let jobs = &settled.jobs;
        let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
        for view in jobs.values() {
            let status = view.as_ref().map_or("unread", |v| v.status.as_str());
            *by_status.entry(status.to_string()).or_default() += 1;
        }
        let views: Vec<(&String, &JobView)> = jobs
            .iter()
            .filter_map(|(id, v)| v.as_ref().map(|v| (id, v)))
            .collect();
        let failures = views
            .iter()
            .flat_map(|(id, v)| v.failures.iter().map(move |f| format!("job {id}: {f}")))
            .take(FAILURES_SHOWN)
            .collect();
        let mut doubles = Vec::new();
        let (mut retried, mut retried_by_other) = (0, 0);
        let mut ids: Vec<&String> = found.keys().collect();
        ids.sort();
        for id in ids {
            let by = &found[id].retried_by;
            let mut per_job: BTreeMap<&str, usize> = BTreeMap::new();
            for job in by {
                *per_job.entry(job).or_default() += 1;
            }
            if per_job.keys().any(|job| jobs.contains_key(*job)) {
                retried += 1;
            }
            if per_job.keys().any(|job| !jobs.contains_key(*job)) {
                retried_by_other += 1;
            }
            for (job, times) in per_job.iter().filter(|(_, t)| **t > 1) {
                doubles.push(format!("{id}: retried by job {job} x{times}"));
            }
        }
        let acked: Vec<&Start> = starts
            .iter()
            .filter(|s| s.kind == Kind::Bulk && s.acked_ms.is_some())
            .collect();
        let not_completed: Vec<String> = acked
            .iter()
            .filter(|s| found.get(&s.id).and_then(|f| f.status.as_deref()) != Some("completed"))
            .map(|s| s.id.clone())
            .collect();
        BulkChecks {
            created: creations.iter().filter(|c| c.job.is_some()).count(),
            after_load: creations
                .iter()
                .filter(|c| c.job.is_some() && c.after_load)
                .count(),
            empty: creations
                .iter()
                .filter(|c| c.job.is_some() && c.total == 0)
                .count(),
            refused: creations.iter().filter_map(|c| c.refused.clone()).collect(),
            gave_up: creations
                .iter()
                .filter(|c| c.job.is_none() && c.refused.is_none())
                .count(),
            completed: by_status.get("completed").copied().unwrap_or(0),
            by_status,
            matched: views.iter().map(|(_, v)| v.total).sum(),
            done: views.iter().map(|(_, v)| v.done).sum(),
            skipped: views.iter().map(|(_, v)| v.skipped).sum(),
            failed: views.iter().map(|(_, v)| v.failed).sum(),
            failures,
            doubles,
            retried,
            retried_by_other,
            flows: acked.len(),
            flows_completed: acked.len() - not_completed.len(),
            not_completed,
            settled: settled.settled,
            waited: settled.waited,
            open: settled.open,
        }
    }

    /// What went wrong with the jobs: a flow retried twice by one job, a
    /// job not completed, a flow a job failed on, a bulk flow not
    /// completed. Empty when nothing did.
    pub fn issues(&self) -> Vec<String> {
        let mut issues = Vec::new();
        if !self.doubles.is_empty() {
            issues.push(format!(
                "{} flows retried twice by one bulk job",
                self.doubles.len()
            ));
        }
        if self.completed < self.created {
            issues.push(format!(
                "{} of {} bulk jobs not completed",
                self.created - self.completed,
                self.created
            ));
        }
        if self.failed > 0 {
            issues.push(format!("bulk jobs failed on {} flows", self.failed));
        }
        if !self.not_completed.is_empty() {
            issues.push(format!("{} bulk flows not completed", self.not_completed.len()));
        }
        issues
    }

    /// Whether the jobs broke the promise of `mode`: in sync mode any of
    /// the issues; in async mode a double action alone (a lost commit may
    /// leave a job or a flow behind, never a flow retried twice).
    pub fn fails(&self, mode: Mode) -> bool {
        match mode {
            Mode::Sync => !self.issues().is_empty(),
            Mode::Async => !self.doubles.is_empty(),
        }
    }
}
