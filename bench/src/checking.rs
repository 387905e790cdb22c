//! The model checker for longer (`--only checker`, issue #47): seeded runs
//! of the `checker` crate against the `booking` binary beside this one (or
//! `--booking-bin`), faults on (instances killed; on PostgreSQL the
//! database of a cluster of the run's own restarted), one after another,
//! each `--checker-seconds` long. A run that finds a violation ends the
//! bench with it (its seed, the property, the history's lines); the
//! others are reported one row each: operations a second, and in the note
//! the operations, the faults and the properties that held.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::report::Figures;

/// What the checker runs take from the command line.
pub struct Runs {
    pub booking_bin: Option<PathBuf>,
    pub first_seed: u64,
    pub runs: u64,
    pub seconds: u64,
    pub postgres_url: String,
}

/// The `booking` binary: as given, or beside this bench (a release build
/// of the workspace puts both in one folder).
fn booking_bin(given: Option<&PathBuf>) -> anyhow::Result<PathBuf> {
    let path = match given {
        Some(path) => path.clone(),
        None => std::env::current_exe()?.with_file_name("booking"),
    };
    anyhow::ensure!(
        path.exists(),
        "no booking binary at {} (build the workspace: cargo build --release, or pass --booking-bin)",
        path.display()
    );
    Ok(path)
}

pub async fn run(runs: &Runs, store: &str) -> anyhow::Result<Vec<Figures>> {
    let booking = booking_bin(runs.booking_bin.as_ref())?;
    let kind = match store {
        "postgres" => checker::Store::Postgres,
        _ => checker::Store::Sqlite,
    };
    let mut figures = Vec::new();
    for seed in runs.first_seed..runs.first_seed + runs.runs {
        let mut config = checker::Config::new(booking.clone(), kind, seed);
        config.duration = Duration::from_secs(runs.seconds);
        config.postgres_admin_url = runs.postgres_url.clone();
        config.database_faults = std::path::Path::new(checker::cluster::PG_BIN)
            .join("initdb")
            .exists();
        eprintln!("   checker seed {seed} on {store}");
        let started = Instant::now();
        let report = checker::run(config)
            .await
            .map_err(|failure| anyhow::anyhow!("{failure}"))
            .with_context(|| format!("checker seed {seed} on {store}"))?;
        let wall = started.elapsed();
        figures.push(row(&report, store, wall));
    }
    Ok(figures)
}

fn row(report: &checker::Report, store: &str, wall: Duration) -> Figures {
    let count = |class: fn(u16) -> bool| -> usize {
        (report.operations.iter())
            .filter(|(op, _)| {
                op.rsplit(' ')
                    .next()
                    .and_then(|s| s.parse::<u16>().ok())
                    .is_some_and(class)
            })
            .map(|(_, n)| n)
            .sum()
    };
    let requests = report.total_operations();
    let ok = count(|s| (200..300).contains(&s));
    let refused = count(|s| (400..500).contains(&s));
    Figures {
        scenario: format!("checker seed {}", report.seed),
        store: store.to_owned(),
        requests,
        ok,
        refused,
        failed: requests - ok - refused,
        wall_ms: wall.as_secs_f64() * 1000.0,
        per_second: requests as f64 / wall.as_secs_f64(),
        p50_ms: 0.0,
        p99_ms: 0.0,
        note: format!(
            "{} instances, {} events, faults [{}], {} properties held (failed: 5xx with \
             Retry-After during faults, unknown outcomes and requests not sent while an \
             instance was down)",
            report.instances,
            report.events,
            report.faults.join("; "),
            report.properties.len()
        ),
    }
}
