//! `load api --vs OLD`: an A/B of two `tartan` binaries in one command.
//! The machine is shared and its speed drifts by more than most changes
//! move, so a figure only counts beside the other binary's taken just
//! before or after it: the two run alternately, `--pairs` times on each
//! store (the order swapped every pair, so that a drift favours neither),
//! each run on a fresh database with the floor and the relay measured again
//! in it. Printed per store: a Markdown table of each binary's medians
//! (and spread) and of the pairwise new ÷ old ratios, ready for
//! BENCHMARKS.md and an issue's note, then one `key=value` line.

use std::net::SocketAddr;
use std::path::Path;

use crate::api::{self, ApiArgs, Measured};
use crate::StoreKind;

/// What a row shows of one run, in the columns' order; `None` when unknown.
fn figures(m: &Measured) -> [Option<f64>; 5] {
    [
        Some(m.tartan.flows_per_s),
        Some(m.tartan.flows_per_s / m.relay.flows_per_s),
        Some(m.tartan.alone_p50_us as f64 / 1000.0),
        m.cpu.engine,
        m.cpu.postgres,
    ]
}

const COLUMNS: [&str; 5] = [
    "flows/s",
    "of the relay",
    "lone flow p50 ms",
    "engine CPU ms/flow",
    "Postgres CPU ms/flow",
];

/// `--vs OLD`: the A/B of the binary under test and `old`.
pub async fn compare(args: ApiArgs, old: &Path) {
    let steps = api::step_server().await;
    let new = args.tartan.clone().unwrap_or_else(api::default_binary);
    run(&args, steps, &new, old).await;
}

async fn run(args: &ApiArgs, steps: SocketAddr, new: &Path, old: &Path) {
    let stores = match args.spawn {
        Some(store) => vec![store],
        None => vec![StoreKind::Sqlite, StoreKind::Postgres],
    };
    for store in stores {
        // [new, old], a run per pair each.
        let mut runs: [Vec<Measured>; 2] = Default::default();
        for pair in 0..args.pairs {
            let order = if pair % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                eprintln!(
                    "load api --vs: {} pair {} of {}, {}",
                    store.name(),
                    pair + 1,
                    args.pairs,
                    ["new", "old"][side]
                );
                let binary = [new, old][side];
                runs[side].push(api::spawned(args, store, binary, steps).await);
            }
        }
        print!("{}", table(store, &runs, new, old));
    }
}

/// The median and the extremes of `values` (none when empty).
fn spread(mut values: Vec<f64>) -> Option<(f64, f64, f64)> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some((median, values[0], values[n - 1]))
}

/// `median (min–max)` with the precision `value` needs.
fn cell(values: Vec<f64>) -> String {
    let Some((median, min, max)) = spread(values) else {
        return "n/a".into();
    };
    let digits = if median.abs() >= 100.0 {
        0
    } else if median.abs() >= 1.0 {
        2
    } else {
        3
    };
    format!("{median:.digits$} ({min:.digits$}–{max:.digits$})")
}

fn table(store: StoreKind, runs: &[Vec<Measured>; 2], new: &Path, old: &Path) -> String {
    let column =
        |side: &[Measured], i: usize| -> Vec<f64> { side.iter().filter_map(|m| figures(m)[i]).collect() };
    let ratios = |i: usize| -> Vec<f64> {
        runs[0]
            .iter()
            .zip(&runs[1])
            .filter_map(|(n, o)| Some(figures(n)[i]? / figures(o)[i]?))
            .collect()
    };
    let mut out = format!(
        "\n### load api --vs on {}: {} pairs, median (min–max)\n\nnew: `{}`, old: `{}`\n\n| | {} |\n|---|{}\n",
        store.name(),
        runs[0].len(),
        new.display(),
        old.display(),
        COLUMNS.join(" | "),
        "---|".repeat(COLUMNS.len()),
    );
    for (name, side) in [("new", &runs[0]), ("old", &runs[1])] {
        let cells: Vec<String> = (0..COLUMNS.len()).map(|i| cell(column(side, i))).collect();
        out += &format!("| {name} | {} |\n", cells.join(" | "));
    }
    let cells: Vec<String> = (0..COLUMNS.len()).map(|i| cell(ratios(i))).collect();
    out += &format!("| new ÷ old, pairwise | {} |\n\n", cells.join(" | "));
    let median = |values: Vec<f64>| spread(values).map_or_else(|| "na".into(), |(m, _, _)| format!("{m:.3}"));
    out += &format!(
        "load_api_vs store={} pairs={} flows_ratio={} relay_share_ratio={} alone_p50_ratio={} \
         engine_cpu_ratio={} postgres_cpu_ratio={}\n",
        store.name(),
        runs[0].len(),
        median(ratios(0)),
        median(ratios(1)),
        median(ratios(2)),
        median(ratios(3)),
        median(ratios(4)),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_is_the_median_and_the_extremes() {
        assert_eq!(cell(vec![3.0, 1.0, 2.0]), "2.00 (1.00–3.00)");
        assert_eq!(cell(vec![0.1, 0.2]), "0.150 (0.100–0.200)");
        assert_eq!(cell(vec![1000.0, 1200.0, f64::NAN]), "1100 (1000–1200)");
        assert_eq!(cell(vec![]), "n/a");
    }
}
