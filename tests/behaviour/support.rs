//! The test harness: a real service on port 0 over a real database, one
//! database per test, and an HTTP client that speaks to it.

use std::sync::{Arc, Mutex};

use booking::app::{Application, Settings, Workers};
use booking::auth::{Role, TokenKeys};
use booking::clock::ShiftedClock;
use booking::payment::stripe::{SecretKey, StripeSettings};
use booking::rate_limit::RateLimits;
use booking::rebuild::projector::Projector;
use booking::store::Store;
use booking::webhooks::WebhookSettings;
use booking::workers::recovery::Recovery;
use booking::workers::sweeper::Sweeper;
use domain::ids::BuyerId;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::Connection;

pub const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Connections each test's service may open to PostgreSQL. Tests run in
/// parallel against one server with `max_connections = 100`.
const TEST_POOL_CONNECTIONS: u32 = 8;

/// The simulator's base latency in tests: short, but not zero, so that
/// concurrent purchases really overlap with a payment in flight.
pub const TEST_PAYMENT_LATENCY_MS: u64 = 20;

/// How often the webhook workers run in tests that turn them on.
pub const WEBHOOK_TEST_INTERVAL: std::time::Duration = std::time::Duration::from_millis(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

pub fn test_database_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned())
}

/// The URL with its database name replaced.
pub fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_part = match base[scheme_end..].find('/') {
        Some(slash) => &base[..scheme_end + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{host_part}/{database}?{query}"),
        None => format!("{host_part}/{database}"),
    }
}

/// Can we reach the PostgreSQL server the suite should use?
pub async fn postgres_reachable() -> Result<(), String> {
    let url = test_database_url();
    let connect = sqlx::PgConnection::connect(&url);
    match tokio::time::timeout(std::time::Duration::from_secs(5), connect).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("timed out after 5 s".into()),
    }
}

/// The Citus coordinator the suite may also run on (`CITUS_URL`, a
/// database on it whose workers are registered), if one is named.
pub fn citus_url() -> Option<String> {
    std::env::var("CITUS_URL")
        .ok()
        .filter(|url| !url.is_empty())
}

/// What one test owns: databases to drop when it ends.
#[derive(Clone)]
pub struct TestEnv {
    pub backend: Backend,
    /// On PostgreSQL, whether the test's database is on the Citus cluster
    /// `CITUS_URL` names (a database on the coordinator and on each worker).
    pub citus: bool,
    databases: Arc<Mutex<Vec<String>>>,
}

impl TestEnv {
    pub fn new(backend: Backend) -> Self {
        Self {
            backend,
            citus: false,
            databases: Arc::default(),
        }
    }

    /// A PostgreSQL test on the Citus cluster `CITUS_URL` names.
    pub fn citus() -> Self {
        Self {
            citus: true,
            ..Self::new(Backend::Postgres)
        }
    }

    /// A fresh, empty database URL for this test.
    pub async fn database_url(&self) -> (String, Option<tempfile::TempDir>) {
        match self.backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}", dir.path().join("booking.db").display());
                (url, Some(dir))
            }
            Backend::Postgres if self.citus => {
                let name = format!("booking_test_{}", uuid::Uuid::new_v4().simple());
                let url = citus::create_database(&name).await;
                self.databases.lock().unwrap().push(name);
                (url, None)
            }
            Backend::Postgres => {
                let name = format!("booking_test_{}", uuid::Uuid::new_v4().simple());
                let admin = test_database_url();
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .expect("connect to TEST_DATABASE_URL");
                sqlx::query(&format!("CREATE DATABASE \"{name}\""))
                    .execute(&mut conn)
                    .await
                    .expect("create test database");
                let _ = conn.close().await;
                self.databases.lock().unwrap().push(name.clone());
                (with_database(&admin, &name), None)
            }
        }
    }

    /// Drops the databases this test created.
    pub async fn cleanup(&self) {
        let names: Vec<String> = std::mem::take(&mut *self.databases.lock().unwrap());
        if names.is_empty() {
            return;
        }
        if self.citus {
            for name in names {
                citus::drop_database(&name).await;
            }
            return;
        }
        let Ok(mut conn) = sqlx::PgConnection::connect(&test_database_url()).await else {
            return;
        };
        for name in names {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .execute(&mut conn)
                .await;
        }
        let _ = conn.close().await;
    }

    pub async fn spawn(&self) -> TestApp {
        self.spawn_with_edge(booking::edge::EdgeSettings::default())
            .await
    }

    /// A service with its own connection and request timers.
    pub async fn spawn_with_edge(&self, edge: booking::edge::EdgeSettings) -> TestApp {
        let (database_url, dir) = self.database_url().await;
        TestApp::start_with(
            database_url,
            dir,
            uuid::Uuid::new_v4().to_string(),
            edge,
            None,
        )
        .await
    }

    /// A service with its own rate limits (the others have the defaults).
    pub async fn spawn_with_rate_limits(&self, rate_limits: RateLimits) -> TestApp {
        let (database_url, dir) = self.database_url().await;
        TestApp::launch(
            database_url,
            dir,
            uuid::Uuid::new_v4().to_string(),
            booking::edge::EdgeSettings::default(),
            None,
            Payments::default(),
            rate_limits,
        )
        .await
    }

    /// A service whose webhook dispatcher and sender run in the background
    /// (every `WEBHOOK_TEST_INTERVAL`) with `webhooks`' timings.
    pub async fn spawn_with_webhooks(&self, webhooks: WebhookSettings) -> TestApp {
        let (database_url, dir) = self.database_url().await;
        TestApp::start_with(
            database_url,
            dir,
            uuid::Uuid::new_v4().to_string(),
            booking::edge::EdgeSettings::default(),
            Some(webhooks),
        )
        .await
    }

    /// Two instances on one database, both running webhooks.
    pub async fn spawn_pair_with_webhooks(&self, webhooks: WebhookSettings) -> (TestApp, TestApp) {
        let (database_url, dir) = self.database_url().await;
        let secret = uuid::Uuid::new_v4().to_string();
        let edge = booking::edge::EdgeSettings::default;
        let first = TestApp::start_with(
            database_url.clone(),
            dir,
            secret.clone(),
            edge(),
            Some(webhooks),
        )
        .await;
        let second = TestApp::start_with(database_url, None, secret, edge(), Some(webhooks)).await;
        (first, second)
    }

    /// A service that pays through Stripe at `api_base` (localstripe, or a
    /// proxy in front of it), with a payment timeout of `timeout`.
    pub async fn spawn_with_stripe(&self, api_base: &str, timeout: std::time::Duration) -> TestApp {
        let (database_url, dir) = self.database_url().await;
        TestApp::launch(
            database_url,
            dir,
            uuid::Uuid::new_v4().to_string(),
            booking::edge::EdgeSettings::default(),
            None,
            Payments::stripe(api_base, timeout),
            RateLimits::default(),
        )
        .await
    }

    /// Two instances on one database and one secret, the first paying
    /// through Stripe at `api_base`, the second through the simulator (a
    /// migration from one provider to the other, or a misconfiguration).
    pub async fn spawn_stripe_beside_simulator(
        &self,
        api_base: &str,
        timeout: std::time::Duration,
    ) -> (TestApp, TestApp) {
        let (database_url, dir) = self.database_url().await;
        let secret = uuid::Uuid::new_v4().to_string();
        let edge = booking::edge::EdgeSettings::default;
        let stripe = Payments::stripe(api_base, timeout);
        let limits = RateLimits::default;
        let first = TestApp::launch(
            database_url.clone(),
            dir,
            secret.clone(),
            edge(),
            None,
            stripe,
            limits(),
        )
        .await;
        let simulator = Payments::default();
        let second = TestApp::launch(
            database_url,
            None,
            secret,
            edge(),
            None,
            simulator,
            limits(),
        )
        .await;
        (first, second)
    }

    /// A service on a database the test made itself (say, in a cluster of
    /// its own).
    pub async fn spawn_at(&self, database_url: String) -> TestApp {
        TestApp::start(database_url, None, uuid::Uuid::new_v4().to_string()).await
    }

    /// Two instances on a database the test made itself.
    pub async fn spawn_pair_at(&self, database_url: String) -> (TestApp, TestApp) {
        let secret = uuid::Uuid::new_v4().to_string();
        let first = TestApp::start(database_url.clone(), None, secret.clone()).await;
        let second = TestApp::start(database_url, None, secret).await;
        (first, second)
    }

    /// Two instances of the service sharing one database and one secret, as
    /// two replicas behind a load balancer would.
    pub async fn spawn_pair(&self) -> (TestApp, TestApp) {
        let (database_url, dir) = self.database_url().await;
        let secret = uuid::Uuid::new_v4().to_string();
        let first = TestApp::start(database_url.clone(), dir, secret.clone()).await;
        let second = TestApp::start(database_url, None, secret).await;
        (first, second)
    }
}

/// How a test's service pays.
pub struct Payments {
    pub provider: booking::payment::ProviderSettings,
    pub timeout: std::time::Duration,
}

impl Payments {
    /// Stripe at `api_base` (localstripe, or a proxy in front of it).
    fn stripe(api_base: &str, timeout: std::time::Duration) -> Self {
        Self {
            provider: booking::payment::ProviderSettings::Stripe(StripeSettings {
                secret_key: SecretKey::new(crate::localstripe::SECRET_KEY.into()),
                api_base: api_base.to_owned(),
                webhook_secret: SecretKey::new(crate::localstripe::WEBHOOK_SECRET.into()),
                publishable_key: None,
                js_url: booking::config::DEFAULT_STRIPE_JS_URL.into(),
            }),
            timeout,
        }
    }
}

impl Default for Payments {
    fn default() -> Self {
        Self {
            provider: booking::payment::ProviderSettings::Simulator,
            timeout: booking::command::checkout::DEFAULT_PAYMENT_TIMEOUT,
        }
    }
}

/// A running service and a client for it.
pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub clock: Arc<ShiftedClock>,
    pub store: Arc<Store>,
    pub recovery: Recovery,
    pub projector: Projector,
    pub sweeper: Sweeper,
    /// The room keeper of waiting rooms, one pass at a time.
    pub waiting_rooms: booking::workers::waiting_room::WaitingRoomKeeper,
    /// The waiting lists' judge, one pass at a time.
    pub waitlists: booking::workers::waitlist::WaitlistJudge,
    pub live: Arc<booking::live::LiveHub>,
    pub webhooks: booking::webhooks::Webhooks,
    pub database_url: String,
    keys: TokenKeys,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    _dir: Option<tempfile::TempDir>,
}

pub struct Answer {
    pub status: StatusCode,
    pub content_type: String,
    pub body: Value,
}

impl Answer {
    /// The problem `code`, if this is a problem+json answer.
    pub fn code(&self) -> Option<&str> {
        if self.content_type != "application/problem+json" {
            return None;
        }
        self.body.get("code").and_then(Value::as_str)
    }

    pub fn expect_problem(&self, status: u16, code: &str) {
        assert_eq!(
            (self.status.as_u16(), self.code()),
            (status, Some(code)),
            "body: {}",
            self.body
        );
        assert_eq!(
            self.body["status"],
            json!(status),
            "status member of the problem"
        );
    }

    pub fn str(&self, field: &str) -> String {
        self.body[field]
            .as_str()
            .unwrap_or_else(|| panic!("{field} missing in {}", self.body))
            .to_owned()
    }
}

impl TestApp {
    /// The payment simulator's ledger in this service's database.
    pub fn ledger(&self) -> booking::payment::ledger::Ledger {
        booking::payment::ledger::Ledger::of(&self.store)
    }

    async fn start(database_url: String, dir: Option<tempfile::TempDir>, secret: String) -> Self {
        Self::start_with(
            database_url,
            dir,
            secret,
            booking::edge::EdgeSettings::default(),
            None,
        )
        .await
    }

    async fn start_with(
        database_url: String,
        dir: Option<tempfile::TempDir>,
        secret: String,
        edge: booking::edge::EdgeSettings,
        webhooks: Option<WebhookSettings>,
    ) -> Self {
        Self::launch(
            database_url,
            dir,
            secret,
            edge,
            webhooks,
            Payments::default(),
            RateLimits::default(),
        )
        .await
    }

    async fn launch(
        database_url: String,
        dir: Option<tempfile::TempDir>,
        secret: String,
        edge: booking::edge::EdgeSettings,
        webhooks: Option<WebhookSettings>,
        payments: Payments,
        rate_limits: RateLimits,
    ) -> Self {
        let clock = Arc::new(ShiftedClock::default());
        let url_for_tools = database_url.clone();
        let settings = Settings {
            addr: "127.0.0.1:0".parse().expect("address"),
            database_url,
            jwt_secret: secret.clone(),
            database_connections: TEST_POOL_CONNECTIONS,
            payment_latency: std::time::Duration::from_millis(TEST_PAYMENT_LATENCY_MS),
            payment_provider: payments.provider,
            currency: domain::money::Currency::EUR,
            payment_timeout: payments.timeout,
            // Tests drive the workers one pass at a time (run_once); the
            // webhook workers run in the background when a test asks.
            workers: Workers {
                webhooks: webhooks.map(|_| WEBHOOK_TEST_INTERVAL),
                ..Workers::OFF
            },
            shutdown_grace: booking::app::DEFAULT_SHUTDOWN_GRACE,
            edge,
            idempotency_retention: booking::workers::sweeper::DEFAULT_KEY_RETENTION,
            webhooks: webhooks.unwrap_or_default(),
            // The defaults: the suite is a normal client of them. A test
            // that scripts one buyer at machine speed asks for them off
            // (`spawn_with_rate_limits`).
            rate_limits,
            ticket_signing_key: None,
        };
        let app = Application::build(settings, clock.clone())
            .await
            .expect("service starts");
        let addr = app.local_addr().expect("bound address");
        let store = Arc::new(app.store().clone());
        let recovery = app.recovery().clone();
        let projector = app.projector().clone();
        let sweeper = app.sweeper().clone();
        let waiting_rooms = app.waiting_rooms().clone();
        let waitlists = app.waitlists().clone();
        let live = app.state().live.clone();
        let webhooks = app.webhooks().clone();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let _ = app
                .run_until_stopped(async move {
                    let _ = rx.await;
                })
                .await;
        });
        let client = reqwest::Client::builder()
            .http1_only()
            .timeout(std::time::Duration::from_secs(120))
            .build()
            .expect("client");
        Self {
            base: format!("http://{addr}"),
            client,
            clock,
            store,
            recovery,
            projector,
            sweeper,
            waiting_rooms,
            waitlists,
            live,
            webhooks,
            database_url: url_for_tools,
            keys: TokenKeys::new(&secret),
            shutdown: Some(tx),
            server: Some(server),
            _dir: dir,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    /// The service's clock (shifted by the test).
    pub fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        use booking::clock::Clock;
        self.clock.now()
    }

    pub fn token(&self, sub: &str, role: Role) -> String {
        self.token_lasting(sub, role, chrono::Duration::hours(1))
    }

    pub fn token_lasting(&self, sub: &str, role: Role, ttl: chrono::Duration) -> String {
        token_from(&self.keys, sub, role, ttl)
    }

    pub fn buyer(&self, sub: &str) -> String {
        self.token(sub, Role::Buyer)
    }

    pub fn admin(&self) -> String {
        self.token("ops", Role::Admin)
    }

    /// A door's scanner for `shows`.
    pub fn scanner(&self, sub: &str, shows: &[&str]) -> String {
        let grant = booking::auth::Grant {
            channels: Vec::new(),
            shows: (shows.iter())
                .map(|s| domain::ids::ShowId::parse(s).expect("show"))
                .collect(),
        };
        let sub = BuyerId::parse(sub).expect("sub");
        (self.keys)
            .issue_granting(&sub, Role::Scanner, &grant, chrono::Duration::hours(1))
            .expect("token")
    }

    /// A buyer whose token lets them hold from `channels` of `show` too.
    pub fn channel_buyer(&self, sub: &str, channels: &[&str], show: &str) -> String {
        let grant = booking::auth::Grant {
            channels: (channels.iter())
                .map(|c| domain::ids::ChannelId::parse(c).expect("channel"))
                .collect(),
            shows: vec![domain::ids::ShowId::parse(show).expect("show")],
        };
        let sub = BuyerId::parse(sub).expect("sub");
        (self.keys)
            .issue_granting(&sub, Role::Buyer, &grant, chrono::Duration::hours(1))
            .expect("token")
    }

    /// Sends a request; `body` is sent as JSON when given.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        Self::answer(request.send().await.expect("request is answered")).await
    }

    pub async fn answer(response: reqwest::Response) -> Answer {
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let bytes = response.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Answer {
            status,
            content_type,
            body,
        }
    }

    /// Creates a show of `seats` seats named S1..Sn in sections of 10 (A, B, ...).
    pub async fn create_show(&self, show_id: &str, seats: usize, hold_ttl_seconds: u32) -> Answer {
        self.create_show_from(show_id, &show_body(seats, hold_ttl_seconds))
            .await
    }

    /// Creates a show from its definition, as an admin; it must be new (201).
    pub async fn create_show_from(&self, show_id: &str, body: &Value) -> Answer {
        let answer = self
            .call(
                Method::PUT,
                &format!("/v1/shows/{show_id}"),
                Some(&self.admin()),
                Some(body),
                &[],
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "create show: {}",
            answer.body
        );
        answer
    }

    pub async fn hold(
        &self,
        token: &str,
        show_id: &str,
        seats: &[&str],
        key: Option<&str>,
    ) -> Answer {
        let headers: Vec<(&str, &str)> = key
            .map(|k| vec![("idempotency-key", k)])
            .unwrap_or_default();
        self.call(
            Method::POST,
            &format!("/v1/shows/{show_id}/holds"),
            Some(token),
            Some(&json!({ "seats": seats })),
            &headers,
        )
        .await
    }

    pub async fn purchase(&self, token: &str, hold_id: &str, method: &str) -> Answer {
        self.call(
            Method::POST,
            &format!("/v1/holds/{hold_id}/purchase"),
            Some(token),
            Some(&json!({ "payment_method": method })),
            &[],
        )
        .await
    }

    pub async fn availability(&self, show_id: &str) -> Answer {
        let answer = self
            .call(
                Method::GET,
                &format!("/v1/shows/{show_id}/availability"),
                None,
                None,
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        answer
    }

    /// seat id -> status, from the availability answer.
    pub async fn seat_statuses(&self, show_id: &str) -> std::collections::BTreeMap<String, String> {
        let answer = self.availability(show_id).await;
        seat_entries(&answer.body).into_iter().collect()
    }

    /// `DELETE /v1/holds/{hold_id}`; it must be answered 204.
    pub async fn release(&self, token: &str, hold_id: &str) {
        let released = self
            .call(
                Method::DELETE,
                &format!("/v1/holds/{hold_id}"),
                Some(token),
                None,
                &[],
            )
            .await;
        assert_eq!(released.status, StatusCode::NO_CONTENT, "{}", released.body);
    }

    /// The show's head: its last position (0: no event yet).
    pub async fn head_of(&self, show: &str) -> i64 {
        self.store
            .log()
            .head_cursor()
            .await
            .expect("the heads")
            .of(show)
    }

    pub async fn event_count(&self) -> i64 {
        self.store.log().count_events().await.expect("count events")
    }
}

/// `(seat_id, status)` of each seat of an availability answer, a live
/// snapshot or a live change, in their order.
pub fn seat_entries(body: &Value) -> Vec<(String, String)> {
    body["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| {
            (
                s["seat_id"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

pub fn seat_id(n: usize) -> String {
    format!("S{n}")
}

pub fn show_body(seats: usize, hold_ttl_seconds: u32) -> Value {
    let seats: Vec<Value> = (1..=seats)
        .map(|n| {
            let section = ((b'A' + ((n - 1) / 10 % 26) as u8) as char).to_string();
            json!({"seat_id": seat_id(n), "section": section, "row": "1", "number": n, "price_cents": 5000})
        })
        .collect();
    json!({
        "name": "Test show",
        "starts_at": "2026-12-31T20:00:00Z",
        "hold_ttl_seconds": hold_ttl_seconds,
        "seats": seats,
        "pools": [{"pool_id": "floor", "capacity": 100, "price_cents": 3000}]
    })
}

/// Fires all the requests at once (every task waits on one gate first) and
/// returns the answers in the order given.
pub async fn fire_at_once<T: Send + 'static>(
    calls: Vec<impl std::future::Future<Output = T> + Send + 'static>,
) -> Vec<T> {
    let gate = Arc::new(tokio::sync::Barrier::new(calls.len()));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, call) in calls.into_iter().enumerate() {
        let gate = gate.clone();
        tasks.spawn(async move {
            gate.wait().await;
            (i, call.await)
        });
    }
    let mut answers = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        answers.push(joined.expect("request task"));
    }
    answers.sort_by_key(|(i, _)| *i);
    answers.into_iter().map(|(_, a)| a).collect()
}

impl TestApp {
    /// `POST /v1/shows/{show}/holds` with `body`, as a future that owns what it needs.
    pub fn hold_call(
        &self,
        token: String,
        show: &str,
        body: Value,
    ) -> impl std::future::Future<Output = Answer> + Send + 'static {
        let request = self
            .client
            .post(format!("{}/v1/shows/{show}/holds", self.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body(body.to_string());
        async move { TestApp::answer(request.send().await.expect("answered")).await }
    }
}

/// A token signed with `keys`, for tests that talk to the real binary and
/// have no `TestApp`.
pub fn token_from(keys: &TokenKeys, sub: &str, role: Role, ttl: chrono::Duration) -> String {
    keys.issue(&BuyerId::parse(sub).expect("sub"), role, ttl)
        .expect("token")
}

/// A test's database on a Citus cluster: one of the same name on the
/// coordinator and on every worker, each with the extension, and the
/// workers registered in the coordinator's (Citus keeps its nodes per
/// database). The workers are those registered in `CITUS_URL`'s database,
/// reached with its user and options.
pub mod citus {
    use reqwest::Url;
    use sqlx::Connection;

    fn on(url: &Url, host: &str, port: u16, database: &str) -> String {
        let mut url = url.clone();
        url.set_host(Some(host)).expect("a host");
        url.set_port(Some(port)).expect("a port");
        url.set_path(database);
        url.to_string()
    }

    fn coordinator() -> Url {
        let url = super::citus_url().expect("CITUS_URL");
        Url::parse(&url).expect("CITUS_URL is a URL")
    }

    /// `(host, port)` of the coordinator, then of each worker.
    async fn nodes() -> Vec<(String, u16)> {
        let url = coordinator();
        let mut conn = sqlx::PgConnection::connect(url.as_str())
            .await
            .expect("connect to CITUS_URL");
        let workers: Vec<(String, i32)> = sqlx::query_as(
            "SELECT nodename::text, nodeport FROM pg_dist_node \
             WHERE groupid <> 0 AND noderole = 'primary' ORDER BY nodeid",
        )
        .fetch_all(&mut conn)
        .await
        .expect("the workers registered in CITUS_URL's database");
        let _ = conn.close().await;
        assert!(!workers.is_empty(), "CITUS_URL's database has no workers");
        let host = url.host_str().unwrap_or("localhost").to_owned();
        let coordinator = (host, url.port().unwrap_or(5432));
        std::iter::once(coordinator)
            .chain(workers.into_iter().map(|(h, p)| (h, p as u16)))
            .collect()
    }

    pub async fn create_database(name: &str) -> String {
        let url = coordinator();
        let nodes = nodes().await;
        for (host, port) in &nodes {
            let mut admin = sqlx::PgConnection::connect(&on(&url, host, *port, "postgres"))
                .await
                .expect("connect to a Citus node");
            sqlx::query(&format!("CREATE DATABASE \"{name}\""))
                .execute(&mut admin)
                .await
                .expect("create the test's database on a node");
            let _ = admin.close().await;
            let mut db = sqlx::PgConnection::connect(&on(&url, host, *port, name))
                .await
                .expect("connect to the test's database on a node");
            sqlx::query("CREATE EXTENSION citus")
                .execute(&mut db)
                .await
                .expect("CREATE EXTENSION citus");
            let _ = db.close().await;
        }
        let (host, port) = &nodes[0];
        let test_url = on(&url, host, *port, name);
        let mut db = sqlx::PgConnection::connect(&test_url).await.unwrap();
        sqlx::query("SELECT citus_set_coordinator_host($1, $2)")
            .bind(host)
            .bind(i32::from(*port))
            .execute(&mut db)
            .await
            .expect("citus_set_coordinator_host");
        for (host, port) in &nodes[1..] {
            sqlx::query("SELECT citus_add_node($1, $2)")
                .bind(host)
                .bind(i32::from(*port))
                .execute(&mut db)
                .await
                .expect("citus_add_node");
        }
        let _ = db.close().await;
        test_url
    }

    pub async fn drop_database(name: &str) {
        let url = coordinator();
        for (host, port) in nodes().await {
            if let Ok(mut admin) =
                sqlx::PgConnection::connect(&on(&url, &host, port, "postgres")).await
            {
                let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                let _ = sqlx::query(&drop).execute(&mut admin).await;
                let _ = admin.close().await;
            }
        }
    }
}
