//! Configuration: every setting is a flag and an environment variable.

use std::net::SocketAddr;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::auth::Role;

#[derive(Debug, Parser)]
#[command(
    name = "booking",
    version,
    about = "Event-sourced seat reservation service"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `booking` alone runs the service, as `booking serve` does.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the service (the default).
    Serve(Box<ServeArgs>),
    /// Run the service with a sample arena and show on it, and print the
    /// seat map's address with a buyer token.
    Demo(Box<ServeArgs>),
    /// Print a bearer token signed with BOOKING_JWT_SECRET.
    Token(TokenArgs),
    /// Rebuild projections from the event log (all, or those named).
    Replay(ReplayArgs),
    /// Rebuild every projection into scratch tables and compare with the
    /// live ones; exits 1 and prints the differences if there are any.
    Verify(DatabaseArgs),
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// `sqlite://PATH` or `postgres://...`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://booking.db")]
    pub database_url: String,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// A projection to rebuild (repeatable); all if none is named.
    #[arg(long, value_enum)]
    pub projection: Vec<crate::store::Projection>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// More connections than this is a misconfiguration: PostgreSQL's own
/// default allows 100 in all, and commands hold a connection only briefly.
/// (i64: the bound type clap's u32 parser takes.)
pub const MAX_DB_CONNECTIONS: i64 = 500;
/// The simulator's base latency stays below client timeouts (10 s).
pub const MAX_PAYMENT_LATENCY_MS: u64 = 10_000;
/// Orchestrators kill a process some time after SIGTERM (Kubernetes: 30 s by
/// default); a grace beyond 5 minutes would only delay a deploy.
pub const MAX_SHUTDOWN_GRACE_SECONDS: u64 = 300;

/// A request head takes one round trip; a client needing 5 minutes for it
/// is an attack, not a slow link.
pub const MAX_HEADER_TIMEOUT_SECONDS: u64 = 300;
/// Past an hour an idle connection is a leak, not a pool.
pub const MAX_IDLE_TIMEOUT_SECONDS: u64 = 3_600;
/// Clients and load balancers give up after minutes; a longer request
/// timeout would only hold work nobody waits for.
pub const MAX_REQUEST_TIMEOUT_SECONDS: u64 = 600;
/// Far above one machine's descriptors; the cap is clamped to them anyway.
pub const MAX_CONNECTIONS_LIMIT: i64 = 1_000_000;
/// A rate or burst above what one instance can serve in a second is no
/// limit at all (0 turns a limit off), and more likely a typo.
pub const MAX_RATE_LIMIT: i64 = 1_000_000;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Listen address.
    #[arg(long, env = "BOOKING_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// `sqlite://PATH` (embedded, created if missing) or `postgres://...`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://booking.db")]
    pub database_url: String,
    /// Database connections in the pool (SQLite: read connections beside the one writer; 1..=500).
    #[arg(long, env = "BOOKING_DB_CONNECTIONS", default_value_t = crate::store::DEFAULT_POOL_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=MAX_DB_CONNECTIONS))]
    pub db_connections: u32,
    /// HS256 secret for bearer tokens; a random one per start if unset.
    #[arg(long, env = "BOOKING_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<String>,
    /// Base latency of the built-in payment simulator, in milliseconds (0..=10000).
    #[arg(long, env = "BOOKING_PAYMENT_LATENCY_MS", default_value_t = crate::payment::simulator::DEFAULT_LATENCY_MS,
          value_parser = clap::value_parser!(u64).range(0..=MAX_PAYMENT_LATENCY_MS))]
    pub payment_latency_ms: u64,
    /// Seconds in-flight requests may take to finish after SIGTERM (0..=300).
    #[arg(long, env = "BOOKING_SHUTDOWN_GRACE_SECONDS", default_value_t = crate::app::DEFAULT_SHUTDOWN_GRACE.as_secs(),
          value_parser = clap::value_parser!(u64).range(0..=MAX_SHUTDOWN_GRACE_SECONDS))]
    pub shutdown_grace_seconds: u64,
    /// Milliseconds between projector passes (0: only at start; else 10..=600000).
    #[arg(long, env = "BOOKING_PROJECTOR_INTERVAL_MS",
          default_value_t = crate::rebuild::projector::PROJECTOR_INTERVAL.as_millis() as u64,
          value_parser = interval_parser(10, 600_000))]
    pub projector_interval_ms: u64,
    /// Seconds between recovery passes over unfinished checkouts (0: only at start; else 1..=3600).
    #[arg(long, env = "BOOKING_RECOVERY_INTERVAL_SECONDS", default_value_t = crate::workers::recovery::RECOVERY_INTERVAL.as_secs(),
          value_parser = interval_parser(1, 3_600))]
    pub recovery_interval_seconds: u64,
    /// Seconds between sweeper passes recording expired holds (0: off; else 1..=3600).
    #[arg(long, env = "BOOKING_SWEEPER_INTERVAL_SECONDS", default_value_t = crate::workers::sweeper::DEFAULT_SWEEP_INTERVAL.as_secs(),
          value_parser = interval_parser(1, 3_600))]
    pub sweeper_interval_seconds: u64,
    /// Milliseconds between room keeper passes over waiting rooms (pause,
    /// resume, close as the inventory goes; 0: off; else 100..=60000).
    #[arg(long, env = "BOOKING_ROOM_INTERVAL_MS",
          default_value_t = crate::workers::waiting_room::DEFAULT_ROOM_INTERVAL.as_millis() as u64,
          value_parser = interval_parser(100, 60_000))]
    pub room_interval_ms: u64,
    /// Milliseconds between passes of the waiting lists' judge (offers of
    /// freed seats, the rest back on sale; 0: off; else 100..=60000).
    #[arg(long, env = "BOOKING_WAITLIST_INTERVAL_MS",
          default_value_t = crate::workers::waitlist::DEFAULT_WAITLIST_INTERVAL.as_millis() as u64,
          value_parser = interval_parser(100, 60_000))]
    pub waitlist_interval_ms: u64,
    /// Seconds a connection may take to send a full request head (1..=300).
    #[arg(long, env = "BOOKING_HEADER_TIMEOUT_SECONDS", default_value_t = crate::edge::DEFAULT_HEADER_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=MAX_HEADER_TIMEOUT_SECONDS))]
    pub header_timeout_seconds: u64,
    /// Seconds an idle keep-alive connection stays open (1..=3600).
    #[arg(long, env = "BOOKING_IDLE_TIMEOUT_SECONDS", default_value_t = crate::edge::DEFAULT_IDLE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=MAX_IDLE_TIMEOUT_SECONDS))]
    pub idle_timeout_seconds: u64,
    /// Seconds before an unanswered request gets 503 busy (1..=600).
    #[arg(long, env = "BOOKING_REQUEST_TIMEOUT_SECONDS", default_value_t = crate::edge::DEFAULT_REQUEST_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=MAX_REQUEST_TIMEOUT_SECONDS))]
    pub request_timeout_seconds: u64,
    /// Open client connections at once; clamped below the descriptor limit (1..=1000000).
    #[arg(long, env = "BOOKING_MAX_CONNECTIONS", default_value_t = crate::edge::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=MAX_CONNECTIONS_LIMIT))]
    pub max_connections: u32,
    /// Live availability streams this instance serves at once; past it 503 busy (1..=1000000).
    #[arg(long, env = "BOOKING_MAX_SUBSCRIBERS", default_value_t = crate::live::DEFAULT_MAX_SUBSCRIBERS as u32,
          value_parser = clap::value_parser!(u32).range(1..=MAX_CONNECTIONS_LIMIT))]
    pub max_subscribers: u32,
    /// Requests one buyer (a token's `sub`) may send per second (0: no buyer limit; else 1..=1000000).
    #[arg(long, env = "BOOKING_BUYER_RATE_PER_SECOND", default_value_t = crate::rate_limit::DEFAULT_BUYER_RATE_PER_SECOND,
          value_parser = clap::value_parser!(u32).range(0..=MAX_RATE_LIMIT))]
    pub buyer_rate_per_second: u32,
    /// Requests one buyer may send at once (0: no buyer limit; else 1..=1000000).
    #[arg(long, env = "BOOKING_BUYER_BURST", default_value_t = crate::rate_limit::DEFAULT_BUYER_BURST,
          value_parser = clap::value_parser!(u32).range(0..=MAX_RATE_LIMIT))]
    pub buyer_burst: u32,
    /// Requests without a token one client address may send per second (0: no client limit; else 1..=1000000).
    #[arg(long, env = "BOOKING_CLIENT_RATE_PER_SECOND", default_value_t = crate::rate_limit::DEFAULT_CLIENT_RATE_PER_SECOND,
          value_parser = clap::value_parser!(u32).range(0..=MAX_RATE_LIMIT))]
    pub client_rate_per_second: u32,
    /// Requests without a token one client address may send at once (0: no client limit; else 1..=1000000).
    #[arg(long, env = "BOOKING_CLIENT_BURST", default_value_t = crate::rate_limit::DEFAULT_CLIENT_BURST,
          value_parser = clap::value_parser!(u32).range(0..=MAX_RATE_LIMIT))]
    pub client_burst: u32,
    /// Hours an idempotency key is kept before the sweeper prunes it (24..=720; the contract's minimum is 24).
    #[arg(long, env = "BOOKING_IDEMPOTENCY_RETENTION_HOURS", default_value_t = crate::workers::sweeper::DEFAULT_KEY_RETENTION.as_secs() / 3_600,
          value_parser = clap::value_parser!(u64).range(
              domain::limits::MIN_IDEMPOTENCY_RETENTION_HOURS..=domain::limits::MAX_IDEMPOTENCY_RETENTION_HOURS))]
    pub idempotency_retention_hours: u64,
    /// Milliseconds between webhook passes: the dispatcher reads the log, the sender sends what is due (0: off; else 10..=60000).
    #[arg(long, env = "BOOKING_WEBHOOK_INTERVAL_MS", default_value_t = crate::webhooks::DEFAULT_INTERVAL.as_millis() as u64,
          value_parser = interval_parser(10, 60_000))]
    pub webhook_interval_ms: u64,
    /// Milliseconds a webhook receiver has to answer 2xx (100..=60000; the contract's 10 s by default).
    #[arg(long, env = "BOOKING_WEBHOOK_TIMEOUT_MS", default_value_t = crate::webhooks::DEFAULT_ATTEMPT_TIMEOUT.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub webhook_timeout_ms: u64,
    /// Milliseconds before the first retry of a webhook; each later wait doubles (10..=3600000).
    #[arg(long, env = "BOOKING_WEBHOOK_BACKOFF_MS", default_value_t = crate::webhooks::DEFAULT_INITIAL_BACKOFF.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub webhook_backoff_ms: u64,
    /// Milliseconds between two webhook attempts at most (10..=86400000).
    #[arg(long, env = "BOOKING_WEBHOOK_MAX_BACKOFF_MS", default_value_t = crate::webhooks::DEFAULT_MAX_BACKOFF.as_millis() as u64,
          value_parser = clap::value_parser!(u64).range(10..=86_400_000))]
    pub webhook_max_backoff_ms: u64,
    /// Seconds a webhook delivery is retried before it is failed (1..=604800; 25 h by default).
    #[arg(long, env = "BOOKING_WEBHOOK_RETRY_SECONDS", default_value_t = crate::webhooks::DEFAULT_RETRY_WINDOW.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub webhook_retry_seconds: u64,
    /// Log format.
    #[arg(long, env = "BOOKING_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Seconds one payment provider call may take before its outcome is unknown (1..=120).
    #[arg(long, env = "BOOKING_PAYMENT_TIMEOUT_SECONDS", default_value_t = crate::command::checkout::DEFAULT_PAYMENT_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=120))]
    pub payment_timeout_seconds: u64,
    /// Who takes the payments: the built-in simulator or Stripe.
    #[arg(
        long,
        env = "BOOKING_PAYMENT_PROVIDER",
        value_enum,
        default_value = "simulator"
    )]
    pub payment_provider: ProviderKind,
    /// Stripe's secret API key (sk_... or a restricted rk_...); required with `stripe`, never logged.
    #[arg(long, env = "BOOKING_STRIPE_SECRET_KEY", hide_env_values = true)]
    pub stripe_secret_key: Option<String>,
    /// Where Stripe's API is (a test server in tests).
    #[arg(long, env = "BOOKING_STRIPE_API_BASE", default_value = crate::payment::stripe::DEFAULT_API_BASE)]
    pub stripe_api_base: String,
    /// The webhook endpoint's signing secret (whsec_...); required with `stripe`, never logged.
    #[arg(long, env = "BOOKING_STRIPE_WEBHOOK_SECRET", hide_env_values = true)]
    pub stripe_webhook_secret: Option<String>,
    /// Stripe's publishable key (pk_...), for Stripe.js on the seat map.
    #[arg(long, env = "BOOKING_STRIPE_PUBLISHABLE_KEY")]
    pub stripe_publishable_key: Option<String>,
    /// Where the seat map loads Stripe.js from (its origin is the only one the page's CSP allows besides its own).
    #[arg(long, env = "BOOKING_STRIPE_JS_URL", default_value = DEFAULT_STRIPE_JS_URL)]
    pub stripe_js_url: String,
    /// The ISO 4217 currency of shows that name none.
    #[arg(long, env = "BOOKING_CURRENCY", default_value = "eur", value_parser = parse_currency)]
    pub currency: domain::money::Currency,
    /// The Ed25519 seed tickets' codes are signed with (base64url of 32
    /// bytes). Without it the service makes one at its first start and
    /// keeps it in the database; given, it is kept too and signs from then
    /// on (older keys still verify). Never logged.
    #[arg(long, env = "BOOKING_TICKET_SIGNING_KEY", hide_env_values = true)]
    pub ticket_signing_key: Option<String>,
}

/// Stripe.js, from Stripe (it must be loaded from there to be PCI compliant).
pub const DEFAULT_STRIPE_JS_URL: &str = "https://js.stripe.com/v3/";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    Simulator,
    Stripe,
}

fn parse_currency(value: &str) -> Result<domain::money::Currency, String> {
    domain::money::Currency::parse(value).map_err(|e| e.to_string())
}

impl ServeArgs {
    /// The rate limits (`BOOKING_BUYER_*`, `BOOKING_CLIENT_*`).
    pub fn rate_limits(&self) -> crate::rate_limit::RateLimits {
        use crate::rate_limit::{Limit, RateLimits};
        RateLimits {
            buyer: Limit {
                rate_per_second: self.buyer_rate_per_second,
                burst: self.buyer_burst,
            },
            client: Limit {
                rate_per_second: self.client_rate_per_second,
                burst: self.client_burst,
            },
        }
    }

    /// The payment provider's settings, or why they are incomplete.
    pub fn payment_provider(&self) -> Result<crate::payment::ProviderSettings, String> {
        use crate::payment::stripe::{SecretKey, StripeSettings};
        use crate::payment::ProviderSettings;
        if self.payment_provider == ProviderKind::Simulator {
            return Ok(ProviderSettings::Simulator);
        }
        let secret = self
            .stripe_secret_key
            .clone()
            .filter(|k| k.starts_with("sk_") || k.starts_with("rk_"))
            .ok_or("BOOKING_STRIPE_SECRET_KEY (sk_... or rk_...) is required with BOOKING_PAYMENT_PROVIDER=stripe")?;
        let webhook = self
            .stripe_webhook_secret
            .clone()
            .filter(|k| k.starts_with("whsec_"))
            .ok_or("BOOKING_STRIPE_WEBHOOK_SECRET (whsec_...) is required with BOOKING_PAYMENT_PROVIDER=stripe")?;
        for (name, value) in [
            ("BOOKING_STRIPE_API_BASE", &self.stripe_api_base),
            ("BOOKING_STRIPE_JS_URL", &self.stripe_js_url),
        ] {
            let url = url::Url::parse(value).map_err(|e| format!("{name}: {e}"))?;
            if !["http", "https"].contains(&url.scheme()) || url.host().is_none() {
                return Err(format!("{name} must be an http(s) URL with a host"));
            }
        }
        if let Some(key) = &self.stripe_publishable_key {
            if !key.starts_with("pk_")
                || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(
                    "BOOKING_STRIPE_PUBLISHABLE_KEY must be a publishable key (pk_...)".into(),
                );
            }
        }
        Ok(ProviderSettings::Stripe(StripeSettings {
            secret_key: SecretKey::new(secret),
            api_base: self.stripe_api_base.clone(),
            webhook_secret: SecretKey::new(webhook),
            publishable_key: self.stripe_publishable_key.clone(),
            js_url: self.stripe_js_url.clone(),
        }))
    }
}

/// 0 (off), or `min..=max`: an interval of 1 ms would be a busy loop.
fn interval_parser(
    min: u64,
    max: u64,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |value: &str| {
        let n: u64 = value.parse().map_err(|e| format!("{e}"))?;
        if n == 0 || (min..=max).contains(&n) {
            Ok(n)
        } else {
            Err(format!("must be 0 (off) or {min}..={max}"))
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct TokenArgs {
    /// The buyer id (the `sub` claim), 1..=64 characters.
    #[arg(long)]
    pub sub: String,
    #[arg(long, value_enum)]
    pub role: Role,
    /// How long the token is valid.
    #[arg(long, default_value_t = 86_400)]
    pub ttl_seconds: i64,
    /// A sales channel the buyer may hold from (the `channels` claim);
    /// repeat for several. Held on the shows of `--show` only.
    #[arg(long = "channel")]
    pub channels: Vec<String>,
    /// A show the token's channels are for (the `shows` claim); repeat for
    /// several.
    #[arg(long = "show")]
    pub shows: Vec<String>,
    #[arg(long, env = "BOOKING_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: String,
}
