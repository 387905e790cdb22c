//! Figures, and the markdown and JSON they are written as.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// The raw-SQL figures every service figure is set against (`baseline`).
pub struct Baseline {
    pub holds: Figures,
    pub storm: Figures,
    /// The same hold from `pgbench` (see `external`).
    pub pgbench: Figures,
}

#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub scenario: String,
    pub store: String,
    pub requests: usize,
    /// Answers by class: 2xx, 4xx, other (5xx or no answer).
    pub ok: usize,
    pub refused: usize,
    pub failed: usize,
    pub wall_ms: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub note: String,
}

/// The `p`th percentile of `sorted`, in milliseconds (0 if empty).
pub fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

impl Figures {
    pub fn from_latencies(
        scenario: &str,
        store: &str,
        answers: &[(u16, Duration)],
        wall: Duration,
    ) -> Self {
        let mut latencies: Vec<Duration> = answers.iter().map(|(_, l)| *l).collect();
        latencies.sort_unstable();
        let ok = answers
            .iter()
            .filter(|(s, _)| (200..300).contains(s))
            .count();
        let refused = answers
            .iter()
            .filter(|(s, _)| (400..500).contains(s))
            .count();
        Self {
            scenario: scenario.to_owned(),
            store: store.to_owned(),
            requests: answers.len(),
            ok,
            refused,
            failed: answers.len() - ok - refused,
            wall_ms: wall.as_secs_f64() * 1000.0,
            per_second: ok as f64 / wall.as_secs_f64(),
            p50_ms: percentile(&latencies, 50.0),
            p99_ms: percentile(&latencies, 99.0),
            note: String::new(),
        }
    }
}

#[derive(Serialize)]
struct Report<'a> {
    command: &'a str,
    machine: String,
    results: &'a [Figures],
    baseline: [&'a Figures; 3],
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .next()
                .map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_owned())
        })
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or("unknown memory".into(), |kb| {
            format!("{} GiB", kb / 1024 / 1024)
        });
    format!("{cores} cores ({cpu}), {memory}; service, load generator and PostgreSQL share them")
}

/// The service figure as a ratio to the baseline: throughput ratios where
/// more is better, wall-time ratios for the storm.
fn ratio(figures: &Figures, baseline: &Baseline) -> String {
    if figures.scenario.starts_with("storm") {
        return format!(
            "{:.2}× baseline storm time",
            figures.wall_ms / baseline.storm.wall_ms
        );
    }
    // Reads, streams and a replay: no raw-SQL counterpart. (The waiting
    // room's holds are holds, named "holds (...)", and compare as such.)
    if figures.scenario.starts_with("availability")
        || figures.scenario.starts_with("replay")
        || figures.scenario.starts_with("waiting room")
        || figures.scenario.starts_with("seat map")
        || figures.scenario.starts_with("create")
    {
        return String::from("—");
    }
    // Load from a C client on both sides: `wrk` against `pgbench`.
    if figures.scenario.ends_with("load from wrk") {
        return format!(
            "{:.2}× pgbench's raw hold/s",
            figures.per_second / baseline.pgbench.per_second
        );
    }
    format!(
        "{:.0}% of baseline holds/s",
        100.0 * figures.per_second / baseline.holds.per_second
    )
}

pub fn write(
    markdown: &str,
    json: &str,
    command: &str,
    results: &[Figures],
    baseline: &Baseline,
) -> anyhow::Result<()> {
    let machine = machine();
    let mut md = String::new();
    writeln!(md, "# Benchmarks\n")?;
    writeln!(md, "Machine: {machine}.\n")?;
    writeln!(md, "Command: `{command}`\n")?;
    writeln!(md, "Measured once, in one run: the service over real HTTP (in-process server on port 0, same process as the load generator), then the raw-SQL baseline against the same PostgreSQL with the same concurrency. Ratios compare with the baseline of this run.\n")?;
    writeln!(md, "| scenario | store | requests | 2xx | 4xx | failed | wall ms | per second | p50 ms | p99 ms | vs raw SQL | note |")?;
    writeln!(
        md,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    )?;
    let row = |md: &mut String, f: &Figures, vs: String| {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.1} | {:.1} | {} | {} |",
            f.scenario,
            f.store,
            f.requests,
            f.ok,
            f.refused,
            f.failed,
            f.wall_ms,
            f.per_second,
            f.p50_ms,
            f.p99_ms,
            vs,
            f.note
        )
    };
    for f in results {
        row(&mut md, f, ratio(f, baseline))?;
    }
    row(&mut md, &baseline.holds, "baseline".into())?;
    row(&mut md, &baseline.storm, "baseline".into())?;
    row(&mut md, &baseline.pgbench, "baseline (for wrk)".into())?;
    std::fs::write(markdown, md)?;
    let report = Report {
        command,
        machine,
        results,
        baseline: [&baseline.holds, &baseline.storm, &baseline.pgbench],
    };
    std::fs::write(json, serde_json::to_string_pretty(&report)?)?;
    Ok(())
}
