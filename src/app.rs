//! The application: built from settings, bound to a port (0 in tests), run
//! until a shutdown signal the caller supplies.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::{TcpListener, TcpSocket};

use crate::auth::TokenKeys;
use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::allocations::AllocationService;
use crate::command::checkout::CheckoutService;
use crate::command::holds::{HoldReads, HoldService};
use crate::command::prices::PriceService;
use crate::command::round::Rounds;
use crate::command::tickets::TicketService;
use crate::command::waiting_room::WaitingRoomService;
use crate::command::waitlist::WaitlistService;
use crate::edge::EdgeSettings;
use crate::http::{router, AppState, Services};
use crate::payment::ledger::Ledger;
use crate::payment::simulator::Simulator;
use crate::payment::stripe::Stripe;
use crate::payment::{PaymentProvider, ProviderSettings};
use crate::query::waiting_room::WaitingRoomBook;
use crate::rate_limit::RateLimits;
use crate::rebuild::projector::Projector;
use crate::store::Store;
use crate::tickets::keys::KeyRing;
use crate::webhooks::dispatch::Dispatcher;
use crate::webhooks::endpoints::WebhookEndpoints;
use crate::webhooks::payload::Payloads;
use crate::webhooks::sender::Sender;
use crate::webhooks::{WebhookSettings, Webhooks};
use crate::workers::recovery::Recovery;
use crate::workers::runner::every;
use crate::workers::sweeper::Sweeper;
use crate::workers::waiting_room::WaitingRoomKeeper;
use crate::workers::waitlist::WaitlistJudge;
use domain::money::Currency;

/// Pending connections the kernel queues before we accept them. An onsale
/// opens thousands of connections in the same second; the usual 128 or 1024
/// would turn the excess into SYN retries a second later.
pub const LISTEN_BACKLOG: u32 = 4096;

/// How often each background worker runs; `None` turns it off (tests drive
/// them with `run_once` instead). All of them also run once at start.
#[derive(Debug, Clone, Copy)]
pub struct Workers {
    pub projector: Option<Duration>,
    pub recovery: Option<Duration>,
    pub sweeper: Option<Duration>,
    /// The webhook dispatcher and sender (`webhooks::Webhooks`).
    pub webhooks: Option<Duration>,
    /// The room keeper of waiting rooms (`workers::room`).
    pub waiting_rooms: Option<Duration>,
    /// The waiting lists' judge (`workers::waitlist`).
    pub waitlists: Option<Duration>,
}

impl Workers {
    pub const OFF: Workers = Workers {
        projector: None,
        recovery: None,
        sweeper: None,
        webhooks: None,
        waiting_rooms: None,
        waitlists: None,
    };
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub addr: SocketAddr,
    pub database_url: String,
    pub jwt_secret: String,
    /// PostgreSQL connections in the pool (SQLite: read connections).
    pub database_connections: u32,
    /// Base latency of the built-in payment simulator.
    pub payment_latency: Duration,
    /// The payment provider: the simulator, or Stripe.
    pub payment_provider: ProviderSettings,
    /// How long one provider call may take before its outcome is treated
    /// as unknown (and settled later by reading the payment).
    pub payment_timeout: Duration,
    /// The currency of shows that name none (`BOOKING_CURRENCY`).
    pub currency: Currency,
    pub workers: Workers,
    /// After a shutdown signal, how long in-flight requests may take to finish.
    pub shutdown_grace: Duration,
    /// Connection and request timers, and the connection cap.
    pub edge: EdgeSettings,
    /// How long an idempotency key is kept before the sweeper prunes it.
    pub idempotency_retention: Duration,
    /// Webhook attempt timeout and retry schedule.
    pub webhooks: WebhookSettings,
    /// Requests per second and at once, per buyer and per client address
    /// (`RateLimits::OFF` for load tests from one address).
    pub rate_limits: RateLimits,
    /// The seed tickets' codes are signed with (`BOOKING_TICKET_SIGNING_KEY`;
    /// `None`: the one kept in the database, made at the first start).
    pub ticket_signing_key: Option<String>,
}

/// Default for `BOOKING_SHUTDOWN_GRACE_SECONDS`: inside the 30 s an
/// orchestrator usually waits between SIGTERM and SIGKILL. A purchase cut
/// off after that is finished by recovery at the next start.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(25);

pub struct Application {
    /// The database the ports were handed out from: for tools and tests
    /// (the wings hold only their ports).
    store: Store,
    listener: TcpListener,
    router: Router,
    state: AppState,
    recovery: Recovery,
    projector: Projector,
    sweeper: Sweeper,
    waiting_rooms: WaitingRoomKeeper,
    waitlists: WaitlistJudge,
    webhooks: Webhooks,
    workers: Workers,
    shutdown_grace: Duration,
    edge: EdgeSettings,
    /// `edge.max_connections`, clamped below the descriptor limit.
    max_connections: usize,
}

/// The command wing and what the other wings share with it, wired once,
/// each on the ports of the one database it uses.
struct Wings {
    catalog: Arc<ShowCatalog>,
    availability: Arc<crate::query::availability::AvailabilityCache>,
    waiting_rooms: Arc<WaitingRoomService>,
    holds: Arc<HoldService>,
    allocations: Arc<AllocationService>,
    checkout: Arc<CheckoutService>,
    prices: Arc<PriceService>,
    waitlists: Arc<WaitlistService>,
    tickets: Arc<TicketService>,
    /// Stripe, when the service pays through it.
    stripe: Option<Arc<Stripe>>,
}

impl Wings {
    fn wire(
        store: &Store,
        settings: &Settings,
        clock: &Arc<dyn Clock>,
        keys: Arc<KeyRing>,
    ) -> anyhow::Result<Self> {
        let catalog = Arc::new(
            ShowCatalog::new(settings.currency, store.shows()).reading_prices_from(store.log()),
        );
        // One owner of command rounds per process, with its caches of loaded
        // streams: every in-process writer of a stream must go through the
        // same slot (see command/streams.rs).
        let rounds = Arc::new(Rounds::new(store.log(), clock.clone()));
        let availability = Arc::new(crate::query::availability::AvailabilityCache::default());
        let (waiting_rooms, holds) = Self::holds(store, &catalog, clock, &rounds, &availability);
        let prices = Arc::new(PriceService::new(catalog.clone(), rounds.clone()));
        let waitlist_parts = (catalog.clone(), rounds.clone(), holds.clone());
        let waitlists = Arc::new(WaitlistService::new(
            waitlist_parts,
            store.shows(),
            &availability,
            clock,
        ));
        let allocations = Arc::new(AllocationService::new(
            rounds.clone(),
            availability.clone(),
            store.shows(),
            clock.clone(),
        ));
        let tickets = Arc::new(TicketService::new(
            rounds.clone(),
            store.log(),
            catalog.clone(),
            keys,
            clock.clone(),
        ));
        let (checkout, stripe) = checkout_service(store, settings, clock, &catalog, rounds)?;
        Ok(Self {
            tickets,
            catalog,
            availability,
            waiting_rooms,
            holds,
            allocations,
            checkout,
            prices,
            waitlists,
            stripe,
        })
    }

    /// The waiting rooms, and the holds that ask them who is admitted.
    fn holds(
        store: &Store,
        catalog: &Arc<ShowCatalog>,
        clock: &Arc<dyn Clock>,
        rounds: &Arc<Rounds>,
        availability: &Arc<crate::query::availability::AvailabilityCache>,
    ) -> (Arc<WaitingRoomService>, Arc<HoldService>) {
        let waiting_rooms: Arc<WaitingRoomService> = Arc::new(WaitingRoomService::new(
            store.log(),
            catalog.clone(),
            clock.clone(),
            rounds.clone(),
            Arc::new(WaitingRoomBook::new(store.log())),
        ));
        let reads = HoldReads {
            records: store.holds(),
            keys: store.idempotency_keys(),
            shows: store.shows(),
        };
        let holds = Arc::new(HoldService::new(
            reads,
            catalog.clone(),
            clock.clone(),
            rounds.clone(),
            availability.clone(),
            waiting_rooms.clone(),
        ));
        (waiting_rooms, holds)
    }

    /// The webhook dispatcher (from the log) and sender (to endpoints).
    fn webhooks(
        &self,
        store: &Store,
        settings: &Settings,
        clock: &Arc<dyn Clock>,
    ) -> anyhow::Result<Webhooks> {
        let services = (
            self.checkout.clone(),
            self.holds.clone(),
            self.tickets.clone(),
        );
        let payloads = Payloads::new(store.checkouts(), services);
        Ok(Webhooks {
            dispatcher: Dispatcher::new(
                store.log(),
                store.webhooks(),
                Arc::new(payloads),
                clock.clone(),
            ),
            sender: Arc::new(
                Sender::new(store.webhooks(), clock.clone(), settings.webhooks)
                    .context("cannot build the webhook HTTP client")?,
            ),
        })
    }

    /// What every handler can reach.
    fn services(
        self,
        store: &Store,
        settings: &Settings,
        clock: Arc<dyn Clock>,
        projector: Projector,
    ) -> AppState {
        let live = crate::live::LiveHub::new(
            store.log(),
            store.shows(),
            self.availability.clone(),
            clock.clone(),
            settings.edge.max_subscribers,
        );
        let endpoints = WebhookEndpoints::new(store.webhooks(), store.log(), clock.clone());
        Arc::new(Services {
            live,
            log: store.log(),
            shows: store.shows(),
            database: store.database(),
            catalog: self.catalog,
            holds: self.holds,
            allocations: self.allocations,
            checkout: self.checkout,
            prices: self.prices,
            waitlists: self.waitlists,
            tickets: self.tickets,
            door: Arc::new(crate::query::door::DoorBook::new(
                store.log(),
                clock.clone(),
            )),
            waitlist_book: Arc::new(crate::query::waitlist::WaitlistBook::new(
                store.log(),
                store.holds(),
                clock.clone(),
            )),
            projector,
            availability: self.availability,
            webhooks: endpoints,
            keys: TokenKeys::new(&settings.jwt_secret),
            clock,
            pages: crate::http::page::Pages::new(self.stripe.as_ref().map(|s| s.settings())),
            waiting_rooms: self.waiting_rooms,
            stripe: self.stripe,
        })
    }
}

/// Purchases and orders through the configured provider (the box office
/// beside it, never through it), and Stripe's client when it is Stripe.
fn checkout_service(
    store: &Store,
    settings: &Settings,
    clock: &Arc<dyn Clock>,
    catalog: &Arc<ShowCatalog>,
    rounds: Arc<Rounds>,
) -> anyhow::Result<(Arc<CheckoutService>, Option<Arc<Stripe>>)> {
    let (payments, stripe) = payment_provider(store, settings, clock)?;
    let payments: Arc<dyn PaymentProvider> =
        Arc::new(crate::payment::offline::WithOffline::new(payments));
    let checkout = Arc::new(CheckoutService::new(
        store.holds(),
        store.checkouts(),
        catalog.clone(),
        clock.clone(),
        payments,
        rounds,
        settings.payment_timeout,
    ));
    Ok((checkout, stripe))
}

/// A payment provider, and Stripe's client when it is Stripe.
type Provider = (Arc<dyn PaymentProvider>, Option<Arc<Stripe>>);

/// The payment provider the settings name, and Stripe's client when it is
/// Stripe (its webhook and the seat map's Stripe.js need it too).
fn payment_provider(
    store: &Store,
    settings: &Settings,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<Provider> {
    Ok(match &settings.payment_provider {
        ProviderSettings::Simulator => (
            Arc::new(Simulator::new(
                Ledger::of(store),
                clock.clone(),
                settings.payment_latency,
            )),
            None,
        ),
        ProviderSettings::Stripe(stripe) => {
            let stripe = Arc::new(
                Stripe::new(stripe.clone(), settings.payment_timeout)
                    .context("cannot build the Stripe client")?,
            );
            (stripe.clone(), Some(stripe))
        }
    })
}

/// Before serving: the projector catches up with the log, and recovery
/// finishes the checkouts a previous run left half way.
async fn finish_previous_run(projector: &Projector, recovery: &Recovery) -> anyhow::Result<()> {
    let caught_up = projector
        .run_once()
        .await
        .context("the projector could not catch up with the log")?;
    if caught_up.events > 0 {
        tracing::info!(?caught_up, "projector caught up at start");
    }
    let report = recovery
        .run_once()
        .await
        .context("recovery of unfinished checkouts failed")?;
    if report.finished() > 0 {
        tracing::info!(?report, "finished checkouts left by the previous run");
    }
    Ok(())
}

/// The tickets' signing keys: those kept in the database, with the
/// operator's (if given) kept too and signing from now on; a first key
/// made on a database that has none.
async fn ticket_keys(
    store: &Store,
    settings: &Settings,
    clock: &Arc<dyn Clock>,
) -> anyhow::Result<KeyRing> {
    let now_us = projections::time::to_micros(clock.now());
    KeyRing::load(
        &store.ticket_keys(),
        settings.ticket_signing_key.as_deref(),
        now_us,
    )
    .await
    .context("the ticket signing key")
}

/// The database `url` names, with its migrations applied: for the service
/// and for the binary's tools alike.
pub async fn open_store(url: &str, connections: u32) -> anyhow::Result<Store> {
    let store = Store::connect(url, connections)
        .await
        .context("cannot open the database")?;
    store
        .database()
        .migrate()
        .await
        .context("cannot apply migrations")?;
    Ok(store)
}

/// A listening socket on `addr`, as the service binds it.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

impl Application {
    /// Connects to the store, runs migrations, finishes what a previous run
    /// left half way (checkouts, projections) and binds the listener.
    pub async fn build(settings: Settings, clock: Arc<dyn Clock>) -> anyhow::Result<Self> {
        let listener =
            bind(settings.addr).with_context(|| format!("cannot listen on {}", settings.addr))?;
        Self::build_on(listener, settings, clock).await
    }

    /// [`Application::build`] on a socket already listening (`settings.addr`
    /// is not used).
    pub async fn build_on(
        listener: TcpListener,
        settings: Settings,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        // Metrics recorded before the recorder exists are lost: install it first.
        let _ = crate::metrics::handle();
        let store = open_store(&settings.database_url, settings.database_connections).await?;
        let keys = ticket_keys(&store, &settings, &clock).await?;
        let wings = Wings::wire(&store, &settings, &clock, Arc::new(keys))?;
        let recovery = Recovery::new(wings.checkout.clone());
        let projector = Projector::new(store.log(), wings.catalog.clone());
        let sweeper = Sweeper::new(
            store.holds(),
            store.idempotency_keys(),
            wings.holds.clone(),
            clock.clone(),
        )
        .with_key_retention(settings.idempotency_retention);
        let waiting_rooms = WaitingRoomKeeper::new(
            store.shows(),
            wings.catalog.clone(),
            wings.availability.clone(),
            wings.waiting_rooms.clone(),
            clock.clone(),
        );
        let waitlists = WaitlistJudge::new(store.shows(), wings.waitlists.clone());
        let webhooks = wings.webhooks(&store, &settings, &clock)?;
        finish_previous_run(&projector, &recovery).await?;
        let state = wings.services(&store, &settings, clock, projector.clone());
        let max_connections = crate::edge::connection_cap(
            settings.edge.max_connections,
            settings.database_connections,
        );
        Ok(Self {
            store,
            listener,
            router: router(
                state.clone(),
                settings.edge.request_timeout,
                settings.rate_limits,
            ),
            state,
            recovery,
            projector,
            sweeper,
            waiting_rooms,
            waitlists,
            webhooks,
            workers: settings.workers,
            shutdown_grace: settings.shutdown_grace,
            edge: settings.edge,
            max_connections,
        })
    }

    /// The connection cap in force (after clamping).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The database, for tools and tests; the service's wings hold ports.
    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    pub fn projector(&self) -> &Projector {
        &self.projector
    }

    pub fn sweeper(&self) -> &Sweeper {
        &self.sweeper
    }

    pub fn waiting_rooms(&self) -> &WaitingRoomKeeper {
        &self.waiting_rooms
    }

    pub fn waitlists(&self) -> &WaitlistJudge {
        &self.waitlists
    }

    pub fn webhooks(&self) -> &Webhooks {
        &self.webhooks
    }

    /// The background workers the settings turn on, each stopping between
    /// passes once `stop` turns true, and the live feed.
    fn spawn_workers(&self, stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinSet<()> {
        let stopped = move || {
            let mut stop = stop.clone();
            async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            }
        };
        let mut workers = tokio::task::JoinSet::new();
        if let Some(interval) = self.workers.projector {
            let projector = self.projector.clone();
            workers.spawn(every("projector", interval, stopped(), move || {
                let projector = projector.clone();
                async move { projector.run_once().await }
            }));
        }
        if let Some(interval) = self.workers.recovery {
            let recovery = self.recovery.clone();
            workers.spawn(every("recovery", interval, stopped(), move || {
                let recovery = recovery.clone();
                async move { recovery.run_once().await }
            }));
        }
        if let Some(interval) = self.workers.sweeper {
            let sweeper = self.sweeper.clone();
            workers.spawn(every("sweeper", interval, stopped(), move || {
                let sweeper = sweeper.clone();
                async move { sweeper.run_once().await }
            }));
        }
        if let Some(interval) = self.workers.waiting_rooms {
            let rooms = self.waiting_rooms.clone();
            workers.spawn(every("rooms", interval, stopped(), move || {
                let rooms = rooms.clone();
                async move { rooms.run_once().await }
            }));
        }
        if let Some(interval) = self.workers.waitlists {
            let judge = self.waitlists.clone();
            workers.spawn(every("waitlists", interval, stopped(), move || {
                let judge = judge.clone();
                async move { judge.run_once().await }
            }));
        }
        // Live availability: runs until the shutdown signal closes it.
        workers.spawn(self.state.live.clone().run());
        if let Some(interval) = self.workers.webhooks {
            workers.spawn(self.webhooks.clone().run_until(interval, stopped()));
        }
        workers
    }

    /// Serves until `shutdown` completes, then stops accepting and lets
    /// in-flight requests finish for up to the shutdown grace; the background
    /// workers run beside it until then and stop between passes.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut workers = self.spawn_workers(stop_rx);
        let live = self.state.live.clone();
        let live_at_stop = self.state.live.clone();
        let (signalled_tx, signalled_rx) = tokio::sync::oneshot::channel::<()>();
        let server = crate::edge::serve(
            self.listener,
            self.router,
            self.edge,
            self.max_connections,
            async move {
                shutdown.await;
                tracing::info!("shutting down: no new connections; finishing requests in flight");
                // Streams never finish by themselves: end them, so that the
                // grace period is spent on requests that do.
                live.close();
                let _ = signalled_tx.send(());
            },
        );
        let grace = self.shutdown_grace;
        let deadline = async move {
            if signalled_rx.await.is_ok() {
                tokio::time::sleep(grace).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = server => {}
            () = deadline => {
                tracing::warn!(?grace, "requests still in flight after the grace period; stopping anyway");
            }
        }
        let _ = stop_tx.send(true);
        live_at_stop.close();
        while workers.join_next().await.is_some() {}
        Ok(())
    }
}
