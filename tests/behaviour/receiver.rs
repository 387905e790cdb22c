//! A webhook receiver for tests: a real HTTP server on 127.0.0.1, port 0,
//! that records every request and answers as the test tells it to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use serde_json::Value;

/// How the receiver answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// This status, at once.
    Answer(u16),
    /// `status` to the next `remaining` requests, then 204.
    FailFirst { remaining: usize, status: u16 },
    /// 204, after this long.
    Slow(Duration),
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// What the receiver answered (None: the sender gave up first).
    pub answered: Option<u16>,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_else(|| panic!("header {name} missing"))
            .to_owned()
    }

    pub fn webhook_id(&self) -> String {
        self.header("webhook-id")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn event_type(&self) -> String {
        self.json()["type"].as_str().unwrap_or_default().to_owned()
    }
}

#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Received>>,
    mode: Mutex<Option<Mode>>,
    /// Requests being answered now, per webhook-id.
    in_flight: Mutex<HashMap<String, usize>>,
    /// Requests that arrived while another with the same webhook-id was
    /// still being answered.
    overlaps: Mutex<Vec<String>>,
}

pub struct Receiver {
    pub url: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

async fn receive(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let index = {
        let mut requests = shared.requests.lock().unwrap();
        requests.push(Received {
            at: Instant::now(),
            headers,
            body,
            answered: None,
        });
        requests.len() - 1
    };
    {
        let mut in_flight = shared.in_flight.lock().unwrap();
        let n = in_flight.entry(id.clone()).or_default();
        if *n > 0 {
            shared.overlaps.lock().unwrap().push(id.clone());
        }
        *n += 1;
    }
    // Leaves the in-flight count right even if the sender gives up and the
    // connection (and this future) is dropped.
    struct Done(Arc<Shared>, String);
    impl Drop for Done {
        fn drop(&mut self) {
            if let Some(n) = self.0.in_flight.lock().unwrap().get_mut(&self.1) {
                *n -= 1;
            }
        }
    }
    let _done = Done(shared.clone(), id);
    let mode = shared.mode.lock().unwrap().unwrap_or(Mode::Answer(204));
    let status = match mode {
        Mode::Answer(status) => status,
        Mode::FailFirst { remaining, status } => {
            let mut current = shared.mode.lock().unwrap();
            if remaining > 1 {
                *current = Some(Mode::FailFirst {
                    remaining: remaining - 1,
                    status,
                });
            } else {
                *current = Some(Mode::Answer(204));
            }
            status
        }
        Mode::Slow(delay) => {
            tokio::time::sleep(delay).await;
            204
        }
    };
    shared.requests.lock().unwrap()[index].answered = Some(status);
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl Receiver {
    pub async fn start(mode: Mode) -> Receiver {
        let shared = Arc::new(Shared::default());
        *shared.mode.lock().unwrap() = Some(mode);
        let app = Router::new()
            .route("/hooks", post(receive))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://{addr}/hooks"),
            shared,
            server,
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap() = Some(mode);
    }

    pub fn requests(&self) -> Vec<Received> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Requests that came while one with the same `webhook-id` was open.
    pub fn overlaps(&self) -> Vec<String> {
        self.shared.overlaps.lock().unwrap().clone()
    }

    /// Awaits (with a deadline) a moment when `done` holds of the requests
    /// received so far, and returns them.
    pub async fn wait_for(
        &self,
        what: &str,
        deadline: Duration,
        done: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let until = Instant::now() + deadline;
        loop {
            let requests = self.requests();
            if done(&requests) {
                return requests;
            }
            assert!(
                Instant::now() < until,
                "{what}: not within {deadline:?}; received {} requests: {:?}",
                requests.len(),
                requests.iter().map(|r| r.body.clone()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Standard Webhooks' signature, computed here from its definition (HMAC-
/// SHA256 over `{id}.{timestamp}.{body}`, keyed with the base64-decoded
/// secret after `whsec_`), independently of the service's code.
pub fn expected_signature(secret: &str, id: &str, timestamp: &str, body: &[u8]) -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.strip_prefix("whsec_").expect("whsec_ prefix"))
        .expect("base64 secret");
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(&key));
    } else {
        block[..key.len()].copy_from_slice(&key);
    }
    let pad = |byte: u8| block.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(format!("{id}.{timestamp}.").as_bytes());
    inner.update(body);
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(outer.finalize())
    )
}
