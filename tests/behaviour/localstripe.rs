//! A real Stripe-API server for the payment tests: localstripe (a stateful
//! fake of Stripe's API, from PyPI), one per test, on a port of its own; and
//! a proxy in front of it that can refuse connections (Stripe unreachable)
//! or swallow an answer (the call reached Stripe, its outcome is unknown).
//!
//! `.ci/run` installs localstripe into `target/localstripe-venv`;
//! `LOCALSTRIPE_PYTHON` names another interpreter that has it.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;

/// The test key: localstripe takes any `sk_...`.
pub const SECRET_KEY: &str = "sk_test_booking";
/// The webhook endpoint's signing secret the service is started with.
pub const WEBHOOK_SECRET: &str = "whsec_booking_test";

/// Cards localstripe knows (its PaymentIntents behave as Stripe's test
/// cards do).
pub const CARD_OK: &str = "4242424242424242";
pub const CARD_3DS: &str = "4000002760003184";
pub const CARD_DECLINED: &str = "4000000000000341";

fn python() -> std::path::PathBuf {
    match std::env::var_os("LOCALSTRIPE_PYTHON") {
        Some(path) => path.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/localstripe-venv/bin/python"),
    }
}

/// Whether localstripe can be started here (else the payment tests are
/// skipped, or fail under CI).
pub fn available() -> Result<(), String> {
    let python = python();
    let found = std::process::Command::new(&python)
        .args(["-c", "import localstripe"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        Ok(())
    } else {
        Err(format!(
            "no localstripe at {} (.ci/run installs it; or set LOCALSTRIPE_PYTHON)",
            python.display()
        ))
    }
}

pub struct LocalStripe {
    pub base: String,
    client: reqwest::Client,
    _child: tokio::process::Child,
}

impl LocalStripe {
    pub async fn start() -> Self {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/behaviour/tools/localstripe_server.py");
        let mut child = tokio::process::Command::new(python())
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("localstripe starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .expect("localstripe says its port within 30 s")
            .expect("localstripe's output")
            .expect("a port line");
        let base = format!("http://127.0.0.1:{}", port.trim());
        let stripe = Self {
            base,
            client: reqwest::Client::new(),
            _child: child,
        };
        // Answering: the first request may arrive before aiohttp serves.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while stripe.get("/v1/payment_intents?limit=1").await.is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "localstripe never answered"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        stripe
    }

    async fn get(&self, path: &str) -> Option<Value> {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .send()
            .await
            .ok()?;
        response.json().await.ok()
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Value {
        let response = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .form(form)
            .send()
            .await
            .expect("localstripe answers");
        let status = response.status();
        let body: Value = response.json().await.expect("JSON");
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    /// A PaymentMethod of a test card, as Stripe.js would create it.
    pub async fn payment_method(&self, card: &str) -> String {
        let pm = self
            .post(
                "/v1/payment_methods",
                &[
                    ("type", "card"),
                    ("card[number]", card),
                    ("card[exp_month]", "12"),
                    ("card[exp_year]", "2034"),
                    ("card[cvc]", "123"),
                ],
            )
            .await;
        pm["id"].as_str().expect("pm id").to_owned()
    }

    /// The buyer's answer to 3-D Secure.
    pub async fn authenticate(&self, payment_intent: &str, client_secret: &str, success: bool) {
        let success = if success { "true" } else { "false" };
        self.post(
            &format!("/v1/payment_intents/{payment_intent}/_authenticate"),
            &[("client_secret", client_secret), ("success", success)],
        )
        .await;
    }

    pub async fn intent(&self, id: &str) -> Value {
        self.get(&format!("/v1/payment_intents/{id}"))
            .await
            .expect("the PaymentIntent")
    }

    /// Every PaymentIntent, oldest first.
    pub async fn intents(&self) -> Vec<Value> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match &after {
                Some(id) => format!("/v1/payment_intents?limit=100&starting_after={id}"),
                None => "/v1/payment_intents?limit=100".into(),
            };
            let page = self.get(&path).await.expect("a page of PaymentIntents");
            let data = page["data"].as_array().cloned().unwrap_or_default();
            after = data
                .last()
                .and_then(|pi| pi["id"].as_str().map(str::to_owned));
            all.extend(data);
            if page["has_more"] != true {
                return all;
            }
        }
    }

    /// The PaymentIntents made for a hold (its `metadata.hold_id`).
    pub async fn intents_of(&self, hold_id: &str) -> Vec<Value> {
        self.intents()
            .await
            .into_iter()
            .filter(|pi| pi["metadata"]["hold_id"] == hold_id)
            .collect()
    }

    pub async fn refunds_of(&self, payment_intent: &str) -> Vec<Value> {
        let list = self
            .get(&format!("/v1/refunds?payment_intent={payment_intent}"))
            .await
            .expect("refunds");
        list["data"].as_array().cloned().unwrap_or_default()
    }

    /// Has localstripe send its (signed) events to `url`.
    pub async fn send_webhooks_to(&self, url: &str) {
        let response = self
            .client
            .post(format!("{}/_config/webhooks/booking", self.base))
            .form(&[("url", url), ("secret", WEBHOOK_SECRET)])
            .send()
            .await
            .expect("localstripe answers");
        assert!(response.status().is_success());
    }
}

/// What the proxy does to the calls it passes on.
#[derive(Default)]
struct Faults {
    /// Answers to swallow: a call whose path ends so is passed on to
    /// Stripe, and its answer never comes back (the caller times out).
    swallow: Vec<String>,
    /// Calls seen, as "METHOD path".
    seen: Vec<String>,
    /// The next capture finds its authorization cancelled at Stripe (it
    /// expired, or someone cancelled it in Stripe's dashboard).
    cancel_before_capture: bool,
}

/// A proxy in front of a Stripe-API server: the address the service is
/// pointed at.
pub struct StripeProxy {
    pub base: String,
    addr: std::net::SocketAddr,
    upstream: String,
    faults: Arc<Mutex<Faults>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
    faults: Arc<Mutex<Faults>>,
}

async fn forward(State(up): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let swallow = {
        let mut faults = up.faults.lock().unwrap();
        faults
            .seen
            .push(format!("{} {}", parts.method, parts.uri.path()));
        let at = faults
            .swallow
            .iter()
            .position(|s| parts.uri.path().ends_with(s.as_str()));
        at.map(|i| faults.swallow.remove(i)).is_some()
    };
    let cancel_first = parts.uri.path().ends_with("/capture")
        && std::mem::take(&mut up.faults.lock().unwrap().cancel_before_capture);
    if cancel_first {
        let intent = parts.uri.path().trim_end_matches("/capture");
        let _ = up
            .client
            .post(format!("{}{intent}/cancel", up.base))
            .bearer_auth(SECRET_KEY)
            .send()
            .await;
    }
    let body: Bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let mut headers = HeaderMap::new();
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            headers.insert(name.clone(), value.clone());
        }
    }
    let method = Method::from_bytes(parts.method.as_str().as_bytes()).expect("method");
    let answer = up
        .client
        .request(method, format!("{}{path}", up.base))
        .headers(headers)
        .body(body)
        .send()
        .await;
    if swallow {
        // Stripe did the work; the caller never hears of it.
        std::future::pending::<()>().await;
    }
    match answer {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).expect("status");
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, [("content-type", "application/json")], bytes).into_response()
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

impl StripeProxy {
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let mut proxy = Self {
            base: format!("http://{addr}"),
            addr,
            upstream: upstream.to_owned(),
            faults: Arc::default(),
            server: None,
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&mut self, listener: TcpListener) {
        let up = Upstream {
            base: self.upstream.clone(),
            client: reqwest::Client::new(),
            faults: self.faults.clone(),
        };
        let app = axum::Router::new().fallback(forward).with_state(up);
        self.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
    }

    /// Stripe unreachable: the port refuses connections.
    pub async fn go_down(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
    }

    /// Stripe back, at the same address.
    pub async fn come_up(&mut self) {
        let listener = TcpListener::bind(self.addr).await.expect("bind again");
        self.serve(listener);
    }

    /// The next call whose path ends with `suffix` reaches Stripe, and its
    /// answer is lost.
    pub fn swallow_next(&self, suffix: &str) {
        self.faults.lock().unwrap().swallow.push(suffix.to_owned());
    }

    /// The next capture meets an authorization Stripe has cancelled.
    pub fn cancel_before_next_capture(&self) {
        self.faults.lock().unwrap().cancel_before_capture = true;
    }

    /// How many calls whose path ends with `suffix` were made.
    pub fn calls_to(&self, suffix: &str) -> usize {
        let faults = self.faults.lock().unwrap();
        faults
            .seen
            .iter()
            .filter(|call| call.ends_with(suffix))
            .count()
    }
}

impl Drop for StripeProxy {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}
