//! The run's table and details, and the verdict.

use crate::bulk::{BulkChecks, BULK_SHARE};
use crate::check::Checks;
use crate::load::{Answers, Load};
use crate::memory::{self, Held, MEMORY_WAIT};
use crate::{Args, Mode};

/// What the run found: the flows' checks, the bulk jobs', and what the
/// engines held in memory at the end.
pub struct Outcome<'a> {
    pub checks: &'a Checks,
    pub bulk: &'a BulkChecks,
    pub bulk_answers: &'a Answers,
    pub held: &'a [Held],
}

/// Print the table and the details; whether the run passed.
pub fn report(args: &Args, load: &Load, run: &Outcome) -> bool {
    let checks = run.checks;
    table(args, run);
    starts(load, checks);
    completions(checks);
    calls_and_webhooks(args, checks);
    bulk(run.bulk, run.bulk_answers);
    held(run.held);
    verdict(args.mode, run)
}

fn table(args: &Args, run: &Outcome) {
    let (c, b) = (run.checks, run.bulk);
    let held = run
        .held
        .iter()
        .map(|h| h.last.map_or("?".to_string(), |v| v.to_string()))
        .collect::<Vec<_>>()
        .join(" / ");
    println!();
    println!(
        "| mode | acknowledged | completed | lost | duplicate completions | longest write outage (ms) | bulk jobs completed / created | their flows retried / skipped / failed | flows held in memory |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {} / {} | {} / {} / {} | {} |",
        args.mode.name(),
        c.acked,
        c.completed,
        c.lost_count,
        c.duplicate_count,
        c.longest,
        b.completed,
        b.created,
        b.done,
        b.skipped,
        b.failed,
        held
    );
    println!();
}

fn starts(load: &Load, c: &Checks) {
    let s = &c.starts;
    println!(
        "starts: {} load flows sent, {} acknowledged ({} after a retry, {} through a 409), {} never acknowledged, {} refused; {} probes sent, {} acknowledged",
        s.loads,
        s.load_acked,
        s.acked_after_retry,
        s.via_conflict,
        s.unacked,
        s.refused.len(),
        s.probes,
        s.probes_acked,
    );
    println!("answers to starts: {}", load.answers.describe());
    println!(
        "never acknowledged but created: {} ({} of them not completed)",
        c.unacked_exist,
        c.unacked_stuck.len()
    );
    for (why, ids) in &c.lost {
        println!(
            "lost ({why}): {} e.g. {}",
            ids.len(),
            ids.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
        );
    }
    for (id, refused) in s.refused.iter().take(3) {
        println!("refused: {id} {refused}");
    }
}

fn completions(c: &Checks) {
    for (token, attempts) in c.duplicates.iter().take(5) {
        println!("completed twice: token {token}, attempts {attempts:?}");
    }
    println!(
        "work items: {} completed; completed flows with a completion missing or extra: {}{}",
        c.work_items_completed,
        c.short.len(),
        if c.short.is_empty() {
            String::new()
        } else {
            format!(
                " e.g. {}",
                c.short.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
            )
        },
    );
    println!(
        "completions no call of this driver gave: {}{}",
        c.unfounded.len(),
        c.unfounded
            .first()
            .map(|u| format!(" e.g. {u}"))
            .unwrap_or_default()
    );
}

fn calls_and_webhooks(args: &Args, c: &Checks) {
    println!(
        "step calls: {}",
        c.again
            .iter()
            .map(|(step, (n, twice))| format!(
                "{step} {n} ({twice} work items called more often than their answers explain)"
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "webhooks: {} answered 200, {} not ({}), {} needed more than one try; answered 200 but not in the history: {}{}; heartbeats: {} answered 200, {} not",
        c.webhooks_ok,
        c.webhooks_failed,
        c.webhook_answers.iter().map(|(s, n)| format!("{s} x{n}")).collect::<Vec<_>>().join(", "),
        c.webhook_retried,
        c.webhooks_lost.len(),
        c.webhooks_lost.first().map(|w| format!(" e.g. {w}")).unwrap_or_default(),
        c.heartbeats_ok,
        c.heartbeats_other,
    );
    for called in c.called_again.iter().take(5) {
        println!("called again: {called}");
    }
    for w in c.refused_webhooks.iter().take(5) {
        println!("webhook not answered 200: {w}");
    }
    println!(
        "write outages (probe every {} ms; from-to in s since the load began): {}",
        args.probe_ms,
        c.gaps
            .iter()
            .filter(|(a, b)| b - a >= 1000)
            .map(|(a, b)| format!(
                "{:.1}-{:.1} ({} ms)",
                *a as f64 / 1000.0,
                *b as f64 / 1000.0,
                b - a
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

fn bulk(b: &BulkChecks, answers: &Answers) {
    let statuses = b
        .by_status
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "bulk flows (one load flow in {BULK_SHARE}): {} acknowledged, {} completed, {} not{}; {} flows retried by a job of this run, {} by a job whose creation was not answered",
        b.flows,
        b.flows_completed,
        b.not_completed.len(),
        e_g(&b.not_completed),
        b.retried,
        b.retried_by_other,
    );
    println!(
        "bulk jobs: {} created ({} after the load, {} matching no flow when created): {}; of the {} flows they matched, retried {}, skipped {}, failed {}; flows retried twice by one job: {}{}",
        b.created,
        b.after_load,
        b.empty,
        if statuses.is_empty() { "none" } else { &statuses },
        b.matched,
        b.done,
        b.skipped,
        b.failed,
        b.doubles.len(),
        e_g(&b.doubles),
    );
    println!(
        "bulk job creations: answers {}; refused {}{}; given up without an answer {}",
        answers.describe(),
        b.refused.len(),
        b.refused
            .first()
            .map(|r| format!(" e.g. {r}"))
            .unwrap_or_default(),
        b.gave_up,
    );
    let unfinished: usize = b
        .by_status
        .iter()
        .filter(|(status, _)| !matches!(status.as_str(), "completed" | "cancelled" | "failed"))
        .map(|(_, n)| n)
        .sum();
    let open = b
        .open
        .iter()
        .map(|(status, n)| format!("{n} {status}"))
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "bulk wait after the load: {:.1} s, {}",
        b.waited.as_secs_f64(),
        match (b.settled, unfinished) {
            (true, _) => "every job finished and every bulk flow in the database completed".to_string(),
            (false, 0) if open.is_empty() => "NOT settled: the bulk flows could not be queried".to_string(),
            (false, 0) => format!("NOT settled: bulk flows in the database not completed: {open}"),
            (false, n) => format!("NOT settled: {n} jobs not finished"),
        }
    );
    for failure in &b.failures {
        println!("bulk job failed on: {failure}");
    }
}

fn held(held: &[Held]) {
    println!(
        "flows held in memory (tartan_flows_active, each engine given up to {} s to show 0): {}",
        MEMORY_WAIT.as_secs(),
        held.iter()
            .map(|h| {
                let shown = |v: Option<f64>| v.map_or("not read".to_string(), |v| v.to_string());
                match h.zero_after {
                    Some(after) => format!(
                        "{} {} -> 0 after {:.1} s",
                        h.engine,
                        shown(h.first),
                        after.as_secs_f64()
                    ),
                    None => format!("{} {} -> STILL {}", h.engine, shown(h.first), shown(h.last)),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// ` e.g. ` and the first few, or nothing.
fn e_g(items: &[String]) -> String {
    if items.is_empty() {
        return String::new();
    }
    format!(
        " e.g. {}",
        items.iter().take(5).cloned().collect::<Vec<_>>().join(" ")
    )
}

/// The verdict line, and the flows still stuck; whether the run passed.
fn verdict(mode: Mode, run: &Outcome) -> bool {
    let c = run.checks;
    let (broken, lost_any) = (c.broken(), c.lost_any());
    let passed = c.passed(mode) && !run.bulk.fails(mode) && !memory::fails(run.held, mode);
    let mut why = vec![match (mode, broken, lost_any) {
        (_, true, _) => "a work item completed twice, or a completion no call gave, or a flow's completions do not match its items",
        (Mode::Sync, _, true) => "acknowledged writes were lost with synchronous replication",
        (Mode::Async, _, true) => "acknowledged writes were lost (asynchronous replication may lose a dead primary's last commits)",
        _ => "every acknowledged start completed, every work item once",
    }
    .to_string()];
    why.extend(run.bulk.issues());
    let still = memory::still_held(run.held);
    if !still.is_empty() {
        why.push(format!(
            "{} engines still hold flows in memory (or could not be read) after {} s",
            still.len(),
            MEMORY_WAIT.as_secs()
        ));
    }
    println!("{}: {}", if passed { "PASSED" } else { "FAILED" }, why.join("; "));
    let stuck = c.stuck();
    if stuck > 0 {
        println!("STUCK: {stuck} flows are still active in the database after the settle time");
    }
    passed
}
