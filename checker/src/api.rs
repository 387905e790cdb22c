//! Sending one request to one instance and recording it in the history.
//! Every request of the run goes through [`Api::send`], so the history is
//! complete by construction.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::Value;

use crate::history::{History, Outcome, Record};

/// Longer than the service's own request timeout (`BOOKING_REQUEST_TIMEOUT_SECONDS`
/// as the run sets it), so a slow command answers 503 `busy` before the
/// client gives up; past it, the outcome is unknown.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);

/// Where each instance listens now (`None` while it is down). A restarted
/// instance listens on a new port.
#[derive(Clone, Default)]
pub struct Addresses(Arc<RwLock<Vec<Option<String>>>>);

impl Addresses {
    pub fn new(count: usize) -> Self {
        Self(Arc::new(RwLock::new(vec![None; count])))
    }

    pub fn set(&self, instance: usize, base: Option<String>) {
        if let Ok(mut all) = self.0.write() {
            if let Some(slot) = all.get_mut(instance) {
                *slot = base;
            }
        }
    }

    pub fn get(&self, instance: usize) -> Option<String> {
        self.0.read().ok()?.get(instance).cloned().flatten()
    }

    pub fn count(&self) -> usize {
        self.0.read().map(|a| a.len()).unwrap_or(0)
    }
}

/// A request as a client means it.
#[derive(Debug, Clone)]
pub struct Request {
    pub op: &'static str,
    pub method: reqwest::Method,
    pub path: String,
    pub body: Option<Value>,
    pub idempotency_key: Option<String>,
    /// `Accept` header, for the CSV export.
    pub accept: Option<&'static str>,
}

impl Request {
    pub fn new(op: &'static str, method: reqwest::Method, path: String) -> Self {
        Self {
            op,
            method,
            path,
            body: None,
            idempotency_key: None,
            accept: None,
        }
    }

    pub fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    pub fn key(mut self, key: Option<String>) -> Self {
        self.idempotency_key = key;
        self
    }
}

/// Who sends: a name for the history, the `sub` and the token.
#[derive(Debug, Clone)]
pub struct Caller {
    pub client: String,
    pub sub: String,
    pub token: String,
}

#[derive(Clone)]
pub struct Api {
    http: reqwest::Client,
    pub addresses: Addresses,
    history: Arc<History>,
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

impl Api {
    pub fn new(addresses: Addresses, history: Arc<History>) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(CLIENT_TIMEOUT)
            .pool_max_idle_per_host(4)
            .build()?;
        Ok(Self {
            http,
            addresses,
            history,
        })
    }

    pub fn history(&self) -> &Arc<History> {
        &self.history
    }

    /// Sends `request` as `caller` to `instance` and records it.
    pub async fn send(&self, caller: &Caller, instance: usize, request: Request) -> Outcome {
        let seq = self.history.next_seq();
        let request_id = format!("chk-{seq}");
        let start_us = now_us();
        let outcome = match self.addresses.get(instance) {
            None => Outcome::NotSent {
                error: "the instance is down".into(),
            },
            Some(base) => self.exchange(caller, &base, &request, &request_id).await,
        };
        self.history.push(Record {
            seq,
            request_id,
            client: caller.client.clone(),
            sub: caller.sub.clone(),
            instance,
            op: request.op.to_owned(),
            method: request.method.to_string(),
            path: request.path,
            body: request.body,
            idempotency_key: request.idempotency_key,
            start_us,
            end_us: now_us(),
            outcome: outcome.clone(),
        });
        outcome
    }

    async fn exchange(
        &self,
        caller: &Caller,
        base: &str,
        request: &Request,
        request_id: &str,
    ) -> Outcome {
        let mut builder = self
            .http
            .request(request.method.clone(), format!("{base}{}", request.path))
            .bearer_auth(&caller.token)
            .header("x-request-id", request_id);
        if let Some(body) = &request.body {
            builder = builder
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        if let Some(key) = &request.idempotency_key {
            builder = builder.header("idempotency-key", key);
        }
        if let Some(accept) = request.accept {
            builder = builder.header("accept", accept);
        }
        match builder.send().await {
            Err(e) if e.is_connect() => Outcome::NotSent {
                error: e.to_string(),
            },
            Err(e) => Outcome::Unknown {
                error: e.to_string(),
            },
            Ok(response) => answer(response).await,
        }
    }
}

/// The answer's status and body: JSON when it is JSON, else the text as a
/// string (the CSV export), with `Retry-After` kept for the 503 check.
async fn answer(response: reqwest::Response) -> Outcome {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let text = match response.text().await {
        Ok(text) => text,
        // The status came but not the body: the command's outcome is the
        // status's, the body is lost.
        Err(e) => format!("(body lost: {e})"),
    };
    let mut body = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
    if let (Some(retry_after), Value::Object(map)) = (retry_after, &mut body) {
        map.insert("retry_after_header".into(), Value::String(retry_after));
    }
    Outcome::Answered { status, body }
}
