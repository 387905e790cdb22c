//! The `booking` binary: `booking [serve]` runs the service, `booking token`
//! prints a bearer token.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;
use booking::app::{Application, Settings};
use booking::auth::TokenKeys;
use booking::clock::SystemClock;
use booking::config::{Cli, Command, LogFormat, ServeArgs, TokenArgs};
use clap::Parser;
use domain::ids::BuyerId;
use tracing_subscriber::EnvFilter;

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
    let jwt_secret = match args.jwt_secret {
        Some(secret) if !secret.is_empty() => secret,
        _ => {
            let secret = uuid::Uuid::new_v4().simple().to_string();
            tracing::warn!(
                %secret,
                "BOOKING_JWT_SECRET is not set: using a random secret for this run; \
                 tokens will not survive a restart. Export it to mint tokens with `booking token`."
            );
            secret
        }
    };
    let settings = Settings {
        addr: args.addr,
        database_url: args.database_url,
        jwt_secret,
        database_connections: args.db_connections,
        payment_latency: std::time::Duration::from_millis(args.payment_latency_ms),
    };
    let app = Application::build(settings, Arc::new(SystemClock)).await?;
    tracing::info!(addr = %app.local_addr()?, "booking is listening");
    app.run_until_stopped(shutdown_signal()).await?;
    tracing::info!("booking stopped");
    Ok(())
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
    let sub = BuyerId::parse(&args.sub).context("--sub")?;
    let token = TokenKeys::new(&args.jwt_secret)
        .issue(&sub, args.role, chrono::Duration::seconds(args.ttl_seconds))
        .context("cannot sign the token")?;
    writeln!(std::io::stdout(), "{token}")?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Token(args)) => token(args),
        Some(Command::Serve(args)) => serve(args).await,
        None => serve(cli.serve).await,
    }
}
