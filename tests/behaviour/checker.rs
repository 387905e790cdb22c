//! The model checker (the `checker` crate) against the real binary, once
//! per store: a seeded crowd of buyers and a clerk through every command
//! for about a minute while instances are killed (and, on PostgreSQL, the
//! database of a cluster of the test's own restarted), then quiescence and
//! every property. `CHECKER_SEED` picks the seed (default: one of a fixed
//! list per store); `CHECKER_SECONDS` the length. A failure names the
//! seed, the first violated property and the history lines behind it.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::{test_database_url, Backend, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![a_seeded_crowd_under_faults_breaks_no_invariant]
}

/// The seeds CI runs when `CHECKER_SEED` is not set, one per store.
const DEFAULT_SEEDS: [(Backend, u64); 2] = [
    (Backend::Sqlite, 20_260_101),
    (Backend::Postgres, 20_260_102),
];

/// About a minute of operations a store (then quiescence and the checks).
const DEFAULT_SECONDS: u64 = 60;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

async fn a_seeded_crowd_under_faults_breaks_no_invariant(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let default_seed = DEFAULT_SEEDS
        .iter()
        .find(|(b, _)| *b == env.backend)
        .map_or(1, |(_, s)| *s);
    let seed = env_u64("CHECKER_SEED").unwrap_or(default_seed);
    let store = match env.backend {
        Backend::Sqlite => ::checker::Store::Sqlite,
        Backend::Postgres => ::checker::Store::Postgres,
    };
    let mut config =
        ::checker::Config::new(PathBuf::from(env!("CARGO_BIN_EXE_booking")), store, seed);
    config.duration = Duration::from_secs(env_u64("CHECKER_SECONDS").unwrap_or(DEFAULT_SECONDS));
    config.postgres_admin_url = test_database_url();
    // Restarting the database needs a cluster of the test's own (initdb
    // and pg_ctl); without them the faults are kills only.
    config.database_faults = std::path::Path::new(::checker::cluster::PG_BIN)
        .join("initdb")
        .exists();
    match ::checker::run(config).await {
        Ok(report) => println!("checker: {report}"),
        Err(failure) => panic!("{failure}"),
    }
}
