//! `checker`: one seeded run against the real binary, a one-line summary,
//! exit 1 with the violation when a property fails.
//!
//! `checker --booking-bin target/debug/booking --store sqlite --seed 7 --seconds 60`

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use checker::{Config, Store};
use clap::Parser;

#[derive(Parser)]
#[command(
    about = "Drives the booking binary with a seeded crowd and faults, then checks its invariants"
)]
struct Args {
    #[arg(long)]
    booking_bin: PathBuf,
    #[arg(long, value_enum)]
    store: Store,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How long the crowd runs.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// 1..=3 (default: 1 on SQLite, 2 on PostgreSQL).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3))]
    instances: Option<u64>,
    #[arg(long, default_value_t = 32)]
    clients: usize,
    #[arg(long)]
    no_faults: bool,
    #[arg(long, default_value = checker::config::DEFAULT_POSTGRES_ADMIN_URL)]
    postgres_admin_url: String,
    /// Where to write the history.
    #[arg(long)]
    history: Option<PathBuf>,
    /// Keep the history when every property holds.
    #[arg(long)]
    keep_history: bool,
    /// How long quiescence may take before it is a violation.
    #[arg(long, default_value_t = 90)]
    quiet_seconds: u64,
    /// On PostgreSQL, kill instances only (the shared server, no cluster
    /// of the run's own).
    #[arg(long)]
    no_database_faults: bool,
}

fn config(args: Args) -> Config {
    let mut config = Config::new(args.booking_bin, args.store, args.seed);
    config.duration = Duration::from_secs(args.seconds);
    if let Some(instances) = args.instances {
        config.instances = instances as usize;
    }
    config.clients = args.clients;
    config.faults = !args.no_faults;
    config.postgres_admin_url = args.postgres_admin_url;
    config.history = args.history;
    config.keep_history = args.keep_history;
    config.quiet_deadline = Duration::from_secs(args.quiet_seconds);
    config.database_faults = !args.no_database_faults;
    config
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let outcome = checker::run(config(Args::parse())).await;
    let mut out = std::io::stdout();
    let written = match &outcome {
        Ok(report) => writeln!(out, "ok: {report}"),
        Err(failure) => writeln!(out, "{failure}"),
    };
    if written.is_err() || outcome.is_err() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
