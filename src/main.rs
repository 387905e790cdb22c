//! The `booking` binary: `booking [serve]` runs the service, `booking demo`
//! runs it with a sample arena and show, `booking token` prints a bearer
//! token.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use booking::app::{Application, Settings, Workers};
use booking::auth::{Role, TokenKeys};
use booking::catalog::ShowCatalog;
use booking::clock::SystemClock;
use booking::config::{Cli, Command, DatabaseArgs, LogFormat, ReplayArgs, ServeArgs, TokenArgs};
use booking::edge::EdgeSettings;
use booking::rebuild::replay;
use booking::store::{Projection, Store, StoreError, DEFAULT_POOL_CONNECTIONS};
use booking::webhooks::WebhookSettings;
use clap::Parser;
use domain::ids::{BuyerId, ChannelId, ShowId};
use tracing_subscriber::EnvFilter;

/// The server's allocator: mimalloc rather than glibc's. A hold's request
/// allocates and frees hundreds of small buffers (JSON, headers, rows):
/// under `wrk`, glibc's `malloc` and `free` with the copies around them
/// took 10 points of the service's CPU; on mimalloc the service placed
/// more holds a second on both stores, in runs alternating the two
/// (BENCHMARKS.md, #37). The bench runs the service on the same one
/// (`bench/src/heap.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let settings = settings_from(args)?;
    let app = build_when_database_ready(settings).await?;
    tracing::info!(
        addr = %app.local_addr()?,
        max_connections = app.max_connections(),
        "booking is listening"
    );
    app.run_until_stopped(shutdown_signal()).await?;
    tracing::info!("booking stopped");
    Ok(())
}

/// `booking demo`: serves as `serve` does, with the sample arena and show
/// created once listening, and the seat map's address printed with a buyer
/// token (valid a day) in it.
async fn demo(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    let settings = settings_from(args)?;
    let keys = TokenKeys::new(&settings.jwt_secret);
    let app = build_when_database_ready(settings).await?;
    let addr = app.local_addr()?;
    let running = tokio::spawn(app.run_until_stopped(shutdown_signal()));
    let base = format!("http://{addr}");
    let day = chrono::Duration::days(1);
    let admin = keys.issue(&BuyerId::parse("demo-admin")?, Role::Admin, day)?;
    let buyer = keys.issue(&BuyerId::parse("demo-buyer")?, Role::Buyer, day)?;
    booking::demo::create(&base, &admin).await?;
    let show = booking::demo::SHOW_ID;
    let family = keys.issue(&BuyerId::parse(booking::demo::FAMILY)?, Role::Buyer, day)?;
    let tickets = booking::demo::sell_tickets(&base, &admin, &family).await?;
    let grant = booking::auth::Grant {
        channels: Vec::new(),
        shows: vec![ShowId::parse(show)?],
    };
    let scanner = keys.issue_granting(&BuyerId::parse("demo-door")?, Role::Scanner, &grant, day)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "The demo show is ready: open {base}/shows/{show}#token={buyer}"
    )?;
    writeln!(
        out,
        "The door is ready: open {base}/shows/{show}/scan#token={scanner}"
    )?;
    for ticket in tickets {
        writeln!(
            out,
            "A ticket to scan: open {base}/tickets/{ticket}#token={family}"
        )?;
    }
    drop(out);
    running.await??;
    tracing::info!("booking stopped");
    Ok(())
}

/// The application's settings from the command line and environment.
fn settings_from(args: ServeArgs) -> anyhow::Result<Settings> {
    let payment_provider = args.payment_provider().map_err(anyhow::Error::msg)?;
    let rate_limits = args.rate_limits();
    let jwt_secret = jwt_secret_or_random(args.jwt_secret)?;
    Ok(Settings {
        addr: args.addr,
        database_url: args.database_url,
        jwt_secret,
        database_connections: args.db_connections,
        payment_latency: std::time::Duration::from_millis(args.payment_latency_ms),
        payment_provider,
        payment_timeout: Duration::from_secs(args.payment_timeout_seconds),
        currency: args.currency,
        workers: Workers {
            projector: nonzero(Duration::from_millis(args.projector_interval_ms)),
            recovery: nonzero(Duration::from_secs(args.recovery_interval_seconds)),
            sweeper: nonzero(Duration::from_secs(args.sweeper_interval_seconds)),
            webhooks: nonzero(Duration::from_millis(args.webhook_interval_ms)),
            waiting_rooms: nonzero(Duration::from_millis(args.room_interval_ms)),
            waitlists: nonzero(Duration::from_millis(args.waitlist_interval_ms)),
        },
        shutdown_grace: Duration::from_secs(args.shutdown_grace_seconds),
        edge: EdgeSettings {
            header_timeout: Duration::from_secs(args.header_timeout_seconds),
            idle_timeout: Duration::from_secs(args.idle_timeout_seconds),
            request_timeout: Duration::from_secs(args.request_timeout_seconds),
            max_connections: args.max_connections,
            max_subscribers: args.max_subscribers as usize,
        },
        idempotency_retention: Duration::from_secs(3_600 * args.idempotency_retention_hours),
        webhooks: WebhookSettings {
            attempt_timeout: Duration::from_millis(args.webhook_timeout_ms),
            initial_backoff: Duration::from_millis(args.webhook_backoff_ms),
            max_backoff: Duration::from_millis(args.webhook_max_backoff_ms),
            retry_window: Duration::from_secs(args.webhook_retry_seconds),
        },
        rate_limits,
        ticket_signing_key: args.ticket_signing_key,
    })
}

/// The configured secret, checked; without one, a random secret for this
/// run only, told to the operator on stderr.
fn jwt_secret_or_random(configured: Option<String>) -> anyhow::Result<String> {
    if let Some(secret) = configured {
        booking::auth::check_secret(&secret).map_err(anyhow::Error::msg)?;
        return Ok(secret);
    }
    // Two v4 uuids: 64 hex characters, 244 random bits.
    let secret = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    // Straight to stderr, never through tracing: the log (stdout,
    // often JSON shipped to a log store) must never hold a secret
    // that signs admin tokens. The operator reads it from the terminal.
    eprintln!(
        "BOOKING_JWT_SECRET is not set: this run's random secret is {secret} \
         (tokens will not survive a restart; export it to mint tokens with `booking token`)"
    );
    tracing::warn!(
        "BOOKING_JWT_SECRET is not set: using a random secret for this run, \
         printed on stderr only"
    );
    Ok(secret)
}

/// The longest pause between two attempts to start while no database host
/// accepts writes.
const START_MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Builds the service. While the database cannot take it (no host of
/// `DATABASE_URL` accepts writes, or none answers), the address answers
/// already (`http::starting`) and the start is tried again, with a backoff
/// doubling up to [`START_MAX_BACKOFF`]; any other error ends the process.
async fn build_when_database_ready(settings: Settings) -> anyhow::Result<Application> {
    let socket = booking::app::bind(settings.addr)
        .with_context(|| format!("cannot listen on {}", settings.addr))?
        .into_std()?;
    let listener = || -> anyhow::Result<tokio::net::TcpListener> {
        Ok(tokio::net::TcpListener::from_std(socket.try_clone()?)?)
    };
    let mut starting: Option<(
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
    )> = None;
    let mut backoff = Duration::from_millis(100);
    loop {
        match Application::build_on(listener()?, settings.clone(), Arc::new(SystemClock)).await {
            Ok(app) => {
                if let Some((stop, answering)) = starting {
                    let _ = stop.send(());
                    let _ = answering.await;
                }
                return Ok(app);
            }
            Err(error) if database_unavailable(&error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    ?backoff,
                    "cannot start yet: the database cannot take writes; trying again"
                );
                if starting.is_none() {
                    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                    let server = axum::serve(listener()?, booking::http::starting::router())
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        });
                    let answering = tokio::spawn(async move {
                        if let Err(error) = server.await {
                            tracing::warn!(%error, "the starting address stopped answering");
                        }
                    });
                    starting = Some((stop, answering));
                    tracing::info!(
                        addr = %socket.local_addr()?,
                        ready = false,
                        "booking is listening"
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(START_MAX_BACKOFF);
            }
            Err(error) => return Err(error),
        }
    }
}

/// Whether starting failed because the database cannot take work now
/// (rather than a bad URL, a bad migration, a bug).
fn database_unavailable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<StoreError>(),
            Some(StoreError::Unavailable(_) | StoreError::ConnectionLost(_))
        )
    })
}

fn nonzero(interval: Duration) -> Option<Duration> {
    (!interval.is_zero()).then_some(interval)
}

/// The catalog a tool folds the log with: the definitions stored. A show
/// that names no currency is in `BOOKING_CURRENCY`'s default; the fold
/// reads seats and pools of a definition, never its currency (no row has
/// one).
fn tool_catalog(store: &Store) -> ShowCatalog {
    ShowCatalog::new(domain::money::Currency::EUR, store.shows())
}

async fn open_store(database: &DatabaseArgs) -> anyhow::Result<Store> {
    booking::app::open_store(&database.database_url, DEFAULT_POOL_CONNECTIONS).await
}

async fn replay(args: ReplayArgs) -> anyhow::Result<()> {
    init_logging(LogFormat::Text);
    let store = open_store(&args.database).await?;
    let which = if args.projection.is_empty() {
        Projection::ALL.to_vec()
    } else {
        args.projection
    };
    let started = Instant::now();
    let catalog = tool_catalog(&store);
    let report = replay::replay(&store.log(), &store.projections(), &catalog, &which).await?;
    let seconds = started.elapsed().as_secs_f64();
    writeln!(
        std::io::stdout(),
        "replayed {} events in {} batches in {seconds:.2} s ({:.0} events/s) into {which:?}",
        report.events,
        report.batches,
        report.events as f64 / seconds.max(f64::EPSILON)
    )?;
    Ok(())
}

async fn verify(args: DatabaseArgs) -> anyhow::Result<ExitCode> {
    init_logging(LogFormat::Text);
    let store = open_store(&args).await?;
    let catalog = tool_catalog(&store);
    let differences =
        booking::rebuild::verify::verify(&store.log(), &store.projections(), &catalog).await?;
    let mut out = std::io::stdout();
    if differences.is_empty() {
        writeln!(
            out,
            "verify: the projections equal a fresh replay of the log"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    for difference in &differences {
        writeln!(out, "{difference}")?;
    }
    writeln!(out, "verify: {} differences", differences.len())?;
    Ok(ExitCode::FAILURE)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

fn token(args: TokenArgs) -> anyhow::Result<()> {
    booking::auth::check_secret(&args.jwt_secret).map_err(anyhow::Error::msg)?;
    let sub = BuyerId::parse(&args.sub).context("--sub")?;
    let channels = (args.channels.iter())
        .map(|c| ChannelId::parse(c).context("--channel"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let shows = (args.shows.iter())
        .map(|s| ShowId::parse(s).context("--show"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if !channels.is_empty() && shows.is_empty() {
        anyhow::bail!("--channel needs --show: a channel is a show's own");
    }
    let ttl = chrono::Duration::seconds(args.ttl_seconds);
    let grant = booking::auth::Grant { channels, shows };
    let token = TokenKeys::new(&args.jwt_secret)
        .issue_granting(&sub, args.role, &grant, ttl)
        .context("cannot sign the token")?;
    writeln!(std::io::stdout(), "{token}")?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Token(args)) => token(args).map(|()| ExitCode::SUCCESS),
        Some(Command::Serve(args)) => serve(*args).await.map(|()| ExitCode::SUCCESS),
        Some(Command::Demo(args)) => demo(*args).await.map(|()| ExitCode::SUCCESS),
        Some(Command::Replay(args)) => replay(args).await.map(|()| ExitCode::SUCCESS),
        Some(Command::Verify(args)) => verify(args).await,
        None => serve(cli.serve).await.map(|()| ExitCode::SUCCESS),
    }
}
