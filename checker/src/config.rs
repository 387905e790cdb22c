//! A run's settings.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Store {
    Sqlite,
    Postgres,
}

impl Store {
    pub fn name(self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres => "postgres",
        }
    }
}

/// The shared PostgreSQL server a run makes its database on (never
/// restarted: database faults use a cluster of the run's own).
pub const DEFAULT_POSTGRES_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

#[derive(Debug, Clone)]
pub struct Config {
    /// The `booking` binary to drive.
    pub booking_bin: PathBuf,
    pub store: Store,
    pub seed: u64,
    /// How long the crowd runs (then quiescence).
    pub duration: Duration,
    /// 1..=3 instances on the one database.
    pub instances: usize,
    /// Buyers in the crowd (the clerk is one more).
    pub clients: usize,
    pub faults: bool,
    /// On PostgreSQL with faults: restart the database too (a cluster of
    /// the run's own, made with initdb); else kills only, on the shared
    /// server.
    pub database_faults: bool,
    pub postgres_admin_url: String,
    /// Where the history goes (default: a file in the temporary folder).
    pub history: Option<PathBuf>,
    /// Keep the history even when every property holds.
    pub keep_history: bool,
    /// How long quiescence may take before it is a violation.
    pub quiet_deadline: Duration,
}

impl Config {
    pub fn new(booking_bin: PathBuf, store: Store, seed: u64) -> Self {
        Self {
            booking_bin,
            store,
            seed,
            duration: Duration::from_secs(60),
            instances: match store {
                Store::Sqlite => 1,
                Store::Postgres => 2,
            },
            clients: 32,
            faults: true,
            database_faults: true,
            postgres_admin_url: DEFAULT_POSTGRES_ADMIN_URL.into(),
            history: None,
            keep_history: false,
            quiet_deadline: Duration::from_secs(90),
        }
    }
}
