//! The behavioural suite: every test runs once on SQLite and once on
//! PostgreSQL, each against the real service on port 0 with its own database.
//!
//! This binary has its own harness (libtest-mimic) so that it can say, in the
//! test output, when the PostgreSQL half is skipped and why. Under `CI=true`
//! an unreachable PostgreSQL fails the suite instead.

mod support;

mod audit;
mod bad_input;
mod best;
mod browser;
mod caching;
mod channels;
mod checker;
mod checkout;
mod cluster;
mod corrections;
mod cqrs;
mod crash;
mod door_page;
mod edge;
mod extension;
mod failover;
mod failover_cluster;
mod holds;
mod hostile;
mod limits;
mod live;
mod localstripe;
mod online;
mod ops;
mod orders;
mod outage;
mod payments;
mod pools;
mod positions;
mod rate_limits;
mod readers;
mod receiver;
mod secret;
mod shows;
mod store;
mod streams;
mod tickets;
mod venues;
mod waiting_room;
mod waitlist;
mod webhooks;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};
use support::{Backend, TestEnv};

pub type TestFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
pub type TestFn = fn(TestEnv) -> TestFuture;

/// Registers async test functions by name.
#[macro_export]
macro_rules! tests {
    ($($name:path),* $(,)?) => {
        vec![$((stringify!($name), (|env| Box::pin($name(env))) as $crate::TestFn)),*]
    };
}

fn all_tests() -> Vec<(&'static str, TestFn)> {
    let mut all = Vec::new();
    all.extend(store::tests());
    all.extend(shows::tests());
    all.extend(venues::tests());
    all.extend(holds::tests());
    all.extend(pools::tests());
    all.extend(limits::tests());
    all.extend(checkout::tests());
    all.extend(orders::tests());
    all.extend(corrections::tests());
    all.extend(tickets::tests());
    all.extend(channels::tests());
    all.extend(waitlist::tests());
    all.extend(crash::tests());
    all.extend(bad_input::tests());
    all.extend(hostile::tests());
    all.extend(audit::tests());
    all.extend(ops::tests());
    all.extend(cqrs::tests());
    all.extend(online::tests());
    all.extend(edge::tests());
    all.extend(secret::tests());
    all.extend(streams::tests());
    all.extend(caching::tests());
    all.extend(extension::tests());
    all.extend(best::tests());
    all.extend(live::tests());
    all.extend(browser::tests());
    all.extend(door_page::tests());
    all.extend(webhooks::tests());
    all.extend(waiting_room::tests());
    all.extend(rate_limits::tests());
    all.extend(checker::tests());
    all.extend(readers::tests());
    all
}

/// Tests of PostgreSQL alone.
fn postgres_only() -> impl Iterator<Item = (&'static str, TestFn)> {
    audit::postgres_tests()
        .into_iter()
        .chain(positions::postgres_tests())
        .chain(outage::postgres_tests())
        .chain(live::postgres_tests())
        .chain(store::postgres_tests())
        .chain(failover::postgres_tests())
}

/// Tests that open thousands of connections run one at a time, so that two
/// storms never share the machine's file descriptors and cores.
pub static HEAVY: std::sync::LazyLock<tokio::sync::Semaphore> =
    std::sync::LazyLock::new(|| tokio::sync::Semaphore::new(1));

fn run(backend: Backend, test: TestFn) -> Result<(), Failed> {
    run_in(TestEnv::new(backend), test)
}

fn run_in(env: TestEnv, test: TestFn) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failed::from(e.to_string()))?;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(test(env.clone()))
    }));
    runtime.block_on(env.cleanup());
    match outcome {
        Ok(()) => Ok(()),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "test panicked".into());
            Err(message.into())
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let postgres = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(support::postgres_reachable());
    let skip_reason = postgres.err().map(Arc::new);
    let banner = skip_reason.as_ref().map(|reason| {
        let url = support::test_database_url();
        if ci {
            format!(
                "\nERROR: PostgreSQL is unreachable at {url} ({reason}); under CI=true the \
                 PostgreSQL suite must run, so its tests fail.\n"
            )
        } else {
            format!(
                "\nNOTE: the PostgreSQL suite is SKIPPED: cannot connect to {url} ({reason}).\n      \
                 Start PostgreSQL, or set TEST_DATABASE_URL=postgres://user@host:port/db, to run it.\n"
            )
        }
    });
    if let Some(banner) = &banner {
        println!("{banner}");
    }

    let mut trials = Vec::new();
    for (name, test) in all_tests() {
        trials.push(Trial::test(format!("sqlite::{name}"), move || {
            run(Backend::Sqlite, test)
        }));
        let pg_name = format!("postgres::{name}");
        match &skip_reason {
            None => trials.push(Trial::test(pg_name, move || run(Backend::Postgres, test))),
            Some(reason) if ci => {
                let reason = reason.clone();
                trials.push(Trial::test(pg_name, move || {
                    Err(format!("PostgreSQL unreachable under CI=true: {reason}").into())
                }));
            }
            Some(_) => trials.push(Trial::test(pg_name, || Ok(())).with_ignored_flag(true)),
        }
    }
    // PostgreSQL-only tests: skipped like the rest of its half, or failed under CI.
    for (name, test) in postgres_only() {
        let pg_name = format!("postgres::{name}");
        match &skip_reason {
            None => trials.push(Trial::test(pg_name, move || run(Backend::Postgres, test))),
            Some(reason) if ci => {
                let reason = reason.clone();
                trials.push(Trial::test(pg_name, move || {
                    Err(format!("PostgreSQL unreachable under CI=true: {reason}").into())
                }));
            }
            Some(_) => trials.push(Trial::test(pg_name, || Ok(())).with_ignored_flag(true)),
        }
    }
    // Card payments against localstripe, on both stores: skipped without
    // it (and said so), failed under CI.
    let stripe = localstripe::available();
    if let Err(reason) = &stripe {
        println!("\nNOTE: the Stripe payment tests need localstripe: {reason}\n");
    }
    for (name, test) in payments::tests() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let trial_name = format!("{}::{name}", backend.name());
            let unavailable = stripe.clone().err().or_else(|| {
                (backend == Backend::Postgres)
                    .then(|| skip_reason.clone())
                    .flatten()
                    .map(|r| r.to_string())
            });
            match unavailable {
                None => trials.push(Trial::test(trial_name, move || run(backend, test))),
                Some(reason) if ci => trials.push(Trial::test(trial_name, move || {
                    Err(format!("unavailable under CI=true: {reason}").into())
                })),
                Some(_) => trials.push(Trial::test(trial_name, || Ok(())).with_ignored_flag(true)),
            }
        }
    }
    // The PostgreSQL half again on a Citus cluster, where CITUS_URL names
    // one (Citus is not packaged for these machines: without it, skipped
    // and said so, under CI too).
    let citus = support::citus_url();
    let citus_banner = citus.is_none().then_some(
        "\nNOTE: the Citus suite is SKIPPED: set CITUS_URL=postgres://user@coordinator:port/db \
         (a database whose workers are registered) to run the PostgreSQL half on it.\n",
    );
    if let Some(banner) = citus_banner {
        println!("{banner}");
    }
    let postgres_half = all_tests().into_iter().chain(postgres_only());
    for (name, test) in postgres_half {
        let trial = Trial::test(format!("citus::{name}"), move || {
            run_in(TestEnv::citus(), test)
        });
        trials.push(trial.with_ignored_flag(citus.is_none()));
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(banner) = &banner {
        println!("{banner}");
    }
    if let Some(banner) = citus_banner {
        println!("{banner}");
    }
    conclusion.exit();
}
