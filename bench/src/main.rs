//! The benchmark harness: measures the booking service and the raw-SQL limit
//! side by side, on the same machine, in the same run.
//!
//!     cargo run --release -p bench -- --store both
//!
//! It starts the service in-process on port 0 (on a fresh SQLite file or a
//! fresh PostgreSQL database), drives it over real HTTP, then runs the seed
//! design's raw SQL hold against the same PostgreSQL with the same
//! concurrency, and writes a markdown table (BENCHMARKS.md) and JSON.
//! Absolute times on a shared machine mean little; the ratios are the point.

mod baseline;
mod channels;
mod checking;
mod door;
mod external;
mod failover;
mod heap;
mod live;
mod orders;
mod queue;
mod report;
mod scenarios;
mod seatmap;
mod stripe;
mod waitlist;
mod wal;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use booking::app::{Application, Settings, Workers};
use booking::auth::{Role, TokenKeys};
use booking::clock::SystemClock;
use clap::{Parser, ValueEnum};
use domain::ids::BuyerId;
use sqlx::Connection;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stores {
    Sqlite,
    Postgres,
    Both,
}

#[derive(Debug, Parser)]
#[command(about = "Benchmark the booking service against the raw-SQL hold")]
struct Args {
    /// Which store(s) to run the service on.
    #[arg(long, value_enum, default_value = "both")]
    store: Stores,
    /// The PostgreSQL server for the service and the baseline (a database is created per run).
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    postgres_url: String,
    /// Seconds each fixed-time scenario runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Concurrent connections of the fixed-time scenarios and the baseline.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Scenarios to run, comma-separated (default: all but the opt-in ones,
    /// `best`, `limit`, `live`, `webhooks`, `stripe`, `queue`, `seatmap`, `door`
    /// and `checker`).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Events in the log the replay scenario rebuilds from.
    #[arg(long, default_value_t = 1_000_000)]
    replay_events: usize,
    /// Buyers who join the waiting room's show before its sale starts
    /// (`--only queue`).
    #[arg(long, default_value_t = 1_000_000)]
    queue_joins: usize,
    /// Page loads of each seat map measured (`--only seatmap`), after one
    /// not counted.
    #[arg(long, default_value_t = 7)]
    seatmap_runs: usize,
    /// Run as the queue scenario's stream client, a child process the
    /// harness starts (orders on stdin, reports on stdout).
    #[arg(long, hide = true)]
    queue_stream_client: bool,
    /// `--only failover`: the multi-host URL of an HA cluster's database
    /// (which must exist) that the service runs on (bench/failover.sh).
    #[arg(long)]
    failover_url: Option<String>,
    /// `--only failover`: the shell command that makes the switch.
    #[arg(long)]
    switch_command: Option<String>,
    /// `--only failover`: seconds into the run when the switch is made.
    #[arg(long, default_value_t = 8)]
    switch_after: u64,
    /// `--only failover`: what the switch is, for the report.
    #[arg(long, default_value = "failover")]
    failover_label: String,
    /// `--only checker`: the booking binary the checker drives (default:
    /// the one beside this bench).
    #[arg(long)]
    booking_bin: Option<std::path::PathBuf>,
    /// `--only checker`: the first seed; runs take the seeds after it.
    #[arg(long, default_value_t = 1)]
    checker_seed: u64,
    /// `--only checker`: seeded runs per store.
    #[arg(long, default_value_t = 50)]
    checker_runs: u64,
    /// `--only checker`: seconds of crowd per run (then quiescence and the
    /// checks).
    #[arg(long, default_value_t = 60)]
    checker_seconds: u64,
    /// Where the markdown table goes.
    #[arg(long, default_value = "BENCHMARKS.md")]
    markdown: String,
    /// Where the JSON goes.
    #[arg(long, default_value = "bench-results.json")]
    json: String,
}

/// Counts live heap bytes when a measurement asks (`heap::Window`): the
/// queue scenario's memory per stream.
#[global_allocator]
static ALLOCATOR: heap::Counting = heap::Counting;

/// The service's connection cap in the bench: the queue scenario keeps
/// 10,000 streams open beside the load generator's pooled connections,
/// past the default cap (`edge::DEFAULT_MAX_CONNECTIONS`); the service
/// clamps it below the descriptor limit. No other scenario comes near.
const BENCH_MAX_CONNECTIONS: u32 = 50_000;

/// Buyers in the failover scenario: a steady crowd (the issue's 16), not a
/// storm, so that the window and the 503s are the switch's, not the load's.
const BUYERS_THROUGH_FAILOVER: usize = 16;

/// The baseline's seconds after a failover run (see `main`).
const FAILOVER_BASELINE_SECONDS: u64 = 10;

/// A service under test and a client for it.
#[derive(Clone)]
pub struct Target {
    pub base: String,
    pub client: reqwest::Client,
    pub store: &'static str,
    keys: TokenKeys,
}

impl Target {
    /// A door scanner's token for `show`.
    pub fn scanner(&self, sub: &str, show: &str) -> String {
        let grant = booking::auth::Grant {
            channels: Vec::new(),
            shows: vec![domain::ids::ShowId::parse(show).expect("show")],
        };
        self.keys
            .issue_granting(
                &BuyerId::parse(sub).expect("sub"),
                Role::Scanner,
                &grant,
                chrono::Duration::hours(2),
            )
            .expect("token")
    }

    pub fn token(&self, sub: &str, role: Role) -> String {
        self.keys
            .issue(
                &BuyerId::parse(sub).expect("sub"),
                role,
                chrono::Duration::hours(2),
            )
            .expect("token")
    }
}

/// Replaces the database name of a PostgreSQL URL.
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{host}/{database}?{query}"),
        None => format!("{host}/{database}"),
    }
}

async fn admin_exec(url: &str, sql: &str) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .context("connect to PostgreSQL")?;
    sqlx::query(sql).execute(&mut conn).await?;
    conn.close().await?;
    Ok(())
}

type Running = (
    Target,
    Arc<booking::store::Store>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
);

/// The service in-process on port 0, with every worker running, paying
/// through the simulator.
async fn start(database_url: &str, secret: &str, store: &'static str) -> anyhow::Result<Running> {
    start_paying(
        database_url,
        secret,
        store,
        booking::payment::ProviderSettings::Simulator,
    )
    .await
}

/// `start`, paying through `provider`.
async fn start_paying(
    database_url: &str,
    secret: &str,
    store: &'static str,
    provider: booking::payment::ProviderSettings,
) -> anyhow::Result<Running> {
    let settings = Settings {
        addr: "127.0.0.1:0".parse()?,
        database_url: database_url.to_owned(),
        jwt_secret: secret.to_owned(),
        database_connections: booking::store::DEFAULT_POOL_CONNECTIONS,
        payment_latency: Duration::from_millis(booking::payment::simulator::DEFAULT_LATENCY_MS),
        payment_provider: provider,
        currency: domain::money::Currency::EUR,
        payment_timeout: booking::command::checkout::DEFAULT_PAYMENT_TIMEOUT,
        workers: Workers {
            projector: Some(booking::rebuild::projector::PROJECTOR_INTERVAL),
            recovery: Some(booking::workers::recovery::RECOVERY_INTERVAL),
            sweeper: Some(booking::workers::sweeper::DEFAULT_SWEEP_INTERVAL),
            webhooks: Some(booking::webhooks::DEFAULT_INTERVAL),
            waiting_rooms: Some(booking::workers::waiting_room::DEFAULT_ROOM_INTERVAL),
            waitlists: Some(booking::workers::waitlist::DEFAULT_WAITLIST_INTERVAL),
        },
        shutdown_grace: booking::app::DEFAULT_SHUTDOWN_GRACE,
        edge: booking::edge::EdgeSettings {
            max_connections: BENCH_MAX_CONNECTIONS,
            ..booking::edge::EdgeSettings::default()
        },
        idempotency_retention: booking::workers::sweeper::DEFAULT_KEY_RETENTION,
        webhooks: booking::webhooks::WebhookSettings::default(),
        // Every scenario sends from one address, and some as one buyer:
        // the limits would measure themselves, not the service.
        rate_limits: booking::rate_limit::RateLimits::OFF,
        ticket_signing_key: None,
    };
    let app = Application::build(settings, Arc::new(SystemClock)).await?;
    let addr = app.local_addr()?;
    let service_store = Arc::new(app.store().clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let target = Target {
        base: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .pool_max_idle_per_host(usize::MAX)
            .build()?,
        store,
        keys: TokenKeys::new(secret),
    };
    Ok((target, service_store, stop, server))
}

/// The wrk holds on `show`, with the WAL they wrote on PostgreSQL.
async fn wrk_run(
    target: &Target,
    args: &Args,
    store: &str,
    show: &str,
    body: external::HoldBody,
) -> anyhow::Result<report::Figures> {
    let wal = match store {
        "postgres" => Some(wal::WalMark::now(&args.postgres_url).await?),
        _ => None,
    };
    let seconds = Duration::from_secs(args.seconds);
    let mut figures = external::wrk_holds(
        target,
        show,
        scenarios::BIG_SHOW_SEATS,
        args.concurrency,
        seconds,
        body,
    )
    .await?;
    if let Some(wal) = wal {
        wal.annotate(&args.postgres_url, &mut figures).await?;
    }
    Ok(figures)
}

async fn run_store(
    args: &Args,
    store: &'static str,
    results: &mut Vec<report::Figures>,
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let pg_database = format!("booking_bench_{}", uuid::Uuid::new_v4().simple());
    let database_url = if store == "postgres" {
        admin_exec(
            &args.postgres_url,
            &format!("CREATE DATABASE \"{pg_database}\""),
        )
        .await?;
        with_database(&args.postgres_url, &pg_database)
    } else {
        format!("sqlite://{}", dir.path().join("bench.db").display())
    };
    let secret = uuid::Uuid::new_v4().to_string();
    let (target, service_store, stop, server) = start(&database_url, &secret, store).await?;
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let seconds = Duration::from_secs(args.seconds);
    if wanted("storm") {
        results.push(scenarios::storm(&target).await?);
    }
    if wanted("holds") {
        // The projector's lag (positions behind the head of the log) while holds run.
        let sampler = tokio::spawn(scenarios::sample_lag(service_store.clone(), seconds));
        // The show first (holds() finds it there), so that the WAL counted is
        // the holds' own and not 100,000 seat rows created.
        scenarios::seat_show_pub(&target, &scenarios::holds_show(1)).await?;
        let wal = match store {
            "postgres" => Some(wal::WalMark::now(&args.postgres_url).await?),
            _ => None,
        };
        let mut figures = scenarios::holds(&target, args.concurrency, seconds, 1).await?;
        let (max_lag, mean_lag) = sampler.await??;
        figures.note =
            format!("projector lag while holding: max {max_lag} events, mean {mean_lag:.0}");
        if let Some(wal) = wal {
            wal.annotate(&args.postgres_url, &mut figures).await?;
        }
        results.push(figures);
    }
    if wanted("wrk") {
        // The same holds, from `wrk` in a second process, on a show of their own.
        let show = "wrkholds";
        scenarios::seat_show_pub(&target, show).await?;
        results.push(wrk_run(&target, args, store, show, external::HoldBody::SeatId).await?);
    }
    if wanted("wrk-priced") {
        // The same holds on a show on a venue, each seat priced by its
        // category and a ticket type (every other one a child's).
        let show = "wrkpriced";
        scenarios::venue_show(&target, show).await?;
        let body = external::HoldBody::WithTicketType;
        results.push(wrk_run(&target, args, store, show, body).await?);
    }
    // Opt-in (`--only create`): three shows of 100,000 seats each way.
    if args.only.iter().any(|o| o == "create") {
        results.extend(scenarios::create_shows(&target, scenarios::CREATE_RUNS).await?);
    }
    if wanted("multi") {
        results.push(scenarios::holds(&target, args.concurrency, seconds, 4).await?);
    }
    if wanted("checkout") {
        results.push(scenarios::checkout(&target, args.concurrency, seconds).await?);
    }
    if wanted("orders") {
        results.extend(orders::orders(&target, args.concurrency, seconds).await?);
    }
    if wanted("channels") {
        results.extend(channels::run(&target, args.concurrency, seconds).await?);
    }
    if wanted("waitlist") {
        results.extend(waitlist::run(&target, args.concurrency, seconds).await?);
    }
    if wanted("ga") {
        results.push(scenarios::ga_storm(&target, None).await?);
        results.push(scenarios::ga_storm(&target, Some(1)).await?);
    }
    if wanted("availability") {
        let (idle, loaded) = scenarios::availability(&target, args.concurrency, seconds).await?;
        results.push(idle);
        results.push(loaded);
    }
    if wanted("availability") {
        let (idle, loaded) =
            scenarios::availability_large(&target, args.concurrency, seconds).await?;
        results.push(idle);
        results.push(loaded);
    }
    if wanted("direct") && store == "postgres" {
        // The database's share: the same write without the service in front.
        let show = "direct";
        scenarios::seat_show_pub(&target, show).await?;
        let url = with_database(&args.postgres_url, &pg_database);
        results.push(baseline::direct_append(&url, args.concurrency, seconds, show).await?);
    }
    if wanted("floor") {
        results.push(scenarios::http_floor(&target, args.concurrency, seconds).await?);
    }
    // Opt-in: only when named (`--only best,limit,live,webhooks`).
    let named = |name: &str| args.only.iter().any(|o| o == name);
    if named("best") {
        results.push(scenarios::best_storm(&[&target], "best").await?);
        // On PostgreSQL also over two instances: choices from the other
        // instance meet at the append (the stream versions) and choose again.
        if store == "postgres" {
            let (second, _, stop_second, second_server) =
                start(&database_url, &secret, store).await?;
            results.push(scenarios::best_storm(&[&target, &second], "best2").await?);
            let _ = stop_second.send(());
            second_server.await??;
        }
    }
    if named("limit") {
        let (without, with) =
            scenarios::limit_holds(&target, &service_store, args.concurrency, seconds).await?;
        results.push(without);
        results.push(with);
    }
    // 1,000 subscribers; on PostgreSQL also over two instances.
    if named("live") {
        results.push(live::subscribers(&[&target], args.concurrency, seconds, None).await?);
        if store == "postgres" {
            // With a transaction open in another database of the server
            // (the server's own, `--postgres-url`) throughout.
            let elsewhere = Some(args.postgres_url.as_str());
            results
                .push(live::subscribers(&[&target], args.concurrency, seconds, elsewhere).await?);
            let (second, _, stop_second, second_server) =
                start(&database_url, &secret, store).await?;
            results.push(
                live::subscribers(&[&target, &second], args.concurrency, seconds, None).await?,
            );
            let _ = stop_second.send(());
            second_server.await??;
        }
    }
    // Tickets at the door (issue #48): online check-in against the plain
    // hold, and offline scanners' uploads checked against the door's rules.
    if named("door") {
        results.extend(door::run(&target, seconds).await?);
    }
    if named("webhooks") {
        results.push(scenarios::webhooks(&target, args.concurrency, seconds).await?);
    }
    // Checkout through Stripe's API (localstripe) beside the simulator's,
    // on a second service of the same store paying through Stripe, on a
    // database of its own (one database, one provider: the other's
    // recovery would drive checkouts its provider does not know).
    if named("stripe") {
        results.push(scenarios::checkout(&target, args.concurrency, seconds).await?);
        let localstripe = stripe::LocalStripe::start().await?;
        let stripe_database = format!("{pg_database}_stripe");
        let stripe_url = if store == "postgres" {
            admin_exec(
                &args.postgres_url,
                &format!("CREATE DATABASE \"{stripe_database}\""),
            )
            .await?;
            with_database(&args.postgres_url, &stripe_database)
        } else {
            format!("sqlite://{}", dir.path().join("stripe.db").display())
        };
        let (paying, _, stop_paying, paying_server) =
            start_paying(&stripe_url, &secret, store, stripe::provider(&localstripe)).await?;
        results.push(stripe::checkout(&paying, &localstripe, args.concurrency, seconds).await?);
        let _ = stop_paying.send(());
        paying_server.await??;
        if store == "postgres" {
            admin_exec(
                &args.postgres_url,
                &format!("DROP DATABASE IF EXISTS \"{stripe_database}\" WITH (FORCE)"),
            )
            .await?;
        }
    }
    // The waiting room (issue #22): streams, the admission check, joins and
    // reads (`--queue-joins`), on shows of their own.
    if named("queue") {
        let disk = match store {
            "postgres" => queue::Disk::Postgres(database_url.clone()),
            _ => queue::Disk::Sqlite(dir.path().join("bench.db")),
        };
        let figures = queue::run(
            &target,
            &service_store,
            &disk,
            args.concurrency,
            seconds,
            args.queue_joins,
        )
        .await?;
        results.extend(figures);
    }
    // The seat map in headless Chromium (issue #33): a 20,000-seat venue
    // drawn as its chart beside the grid of a show without coordinates.
    if named("seatmap") {
        results.extend(seatmap::run(&target, args.seatmap_runs).await?);
    }
    if wanted("replay") {
        results.push(scenarios::replay(&target, &service_store, args.replay_events).await?);
    }
    let _ = stop.send(());
    server.await??;
    if store == "postgres" {
        admin_exec(
            &args.postgres_url,
            &format!("DROP DATABASE IF EXISTS \"{pg_database}\" WITH (FORCE)"),
        )
        .await?;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Quiet by default (logging costs CPU the service would use); RUST_LOG to look inside.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    if args.queue_stream_client {
        return queue::stream_client().await;
    }
    let mut results = Vec::new();
    let stores: &[&'static str] = match args.store {
        Stores::Sqlite => &["sqlite"],
        Stores::Postgres => &["postgres"],
        Stores::Both => &["sqlite", "postgres"],
    };
    if args.only.iter().any(|o| o == "failover") {
        // On the HA cluster's database, not one of its own.
        let url = args
            .failover_url
            .as_deref()
            .context("--only failover needs --failover-url")?;
        let switch = failover::Switch {
            command: args
                .switch_command
                .clone()
                .context("--only failover needs --switch-command")?,
            after: Duration::from_secs(args.switch_after),
            label: args.failover_label.clone(),
        };
        eprintln!("== service on an HA cluster: {}", switch.label);
        let (target, _, stop, server) =
            start(url, &uuid::Uuid::new_v4().to_string(), "postgres").await?;
        let seconds = Duration::from_secs(args.seconds);
        results.push(failover::run(&target, &switch, BUYERS_THROUGH_FAILOVER, seconds).await?);
        let _ = stop.send(());
        server.await??;
    } else {
        // The checker drives binaries of its own; alone, no service here.
        let checker_alone = args.only.iter().all(|o| o == "checker");
        let checker_runs = checking::Runs {
            booking_bin: args.booking_bin.clone(),
            first_seed: args.checker_seed,
            runs: args.checker_runs,
            seconds: args.checker_seconds,
            postgres_url: args.postgres_url.clone(),
        };
        for store in stores {
            if args.only.iter().any(|o| o == "checker") {
                eprintln!("== the checker on {store}");
                results.extend(checking::run(&checker_runs, store).await?);
            }
            if !checker_alone {
                eprintln!("== service on {store}");
                run_store(&args, store, &mut results).await?;
            }
        }
    }
    eprintln!("== raw SQL baseline on PostgreSQL");
    // A failover run lasts as long as the switch needs; its baseline, the
    // raw hold on `--postgres-url`, needs no more than a plain run's.
    let baseline_seconds = if args.only.iter().any(|o| o == "failover") {
        args.seconds.min(FAILOVER_BASELINE_SECONDS)
    } else {
        args.seconds
    };
    let baseline = baseline::run(
        &args.postgres_url,
        args.concurrency,
        Duration::from_secs(baseline_seconds),
    )
    .await?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    report::write(&args.markdown, &args.json, &command, &results, &baseline)?;
    eprintln!("wrote {} and {}", args.markdown, args.json);
    Ok(())
}
