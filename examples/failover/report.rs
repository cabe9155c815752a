//! The run's table and details, and the verdict.

use crate::check::Checks;
use crate::load::Load;
use crate::{Args, Mode};

/// Print the table and the details; whether the run passed.
pub fn report(args: &Args, load: &Load, checks: &Checks) -> bool {
    table(args, checks);
    starts(load, checks);
    completions(checks);
    calls_and_webhooks(args, checks);
    verdict(args.mode, checks)
}

fn table(args: &Args, c: &Checks) {
    println!();
    println!(
        "| mode | acknowledged | completed | lost | duplicate completions | longest write outage (ms) |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} | {} | {} | {} |",
        args.mode.name(),
        c.acked,
        c.completed,
        c.lost_count,
        c.duplicate_count,
        c.longest
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

/// The verdict line, and the flows still stuck; whether the run passed.
fn verdict(mode: Mode, c: &Checks) -> bool {
    let (broken, lost_any) = (c.broken(), c.lost_any());
    let passed = c.passed(mode);
    println!(
        "{}: {}",
        if passed { "PASSED" } else { "FAILED" },
        match (mode, broken, lost_any) {
            (_, true, _) => "a work item completed twice, or a completion no call gave, or a flow's completions do not match its items",
            (Mode::Sync, _, true) => "acknowledged writes were lost with synchronous replication",
            (Mode::Async, _, true) => "acknowledged writes were lost (asynchronous replication may lose a dead primary's last commits)",
            _ => "every acknowledged start completed, every work item once",
        }
    );
    let stuck = c.stuck();
    if stuck > 0 {
        println!("STUCK: {stuck} flows are still active in the database after the settle time");
    }
    passed
}
