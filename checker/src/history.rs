//! The history: every request a client sent and what came back, one JSON
//! line each, in the order the requests started. The properties read it
//! back as a `Vec<Record>`; the file is what a person reads after a
//! failure (its path is printed then).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a request came to. `Unknown`: the request may or may not have
/// taken effect (a timeout, a connection lost after sending, a kill);
/// `NotSent`: the connection was refused, so the service never saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    Answered { status: u16, body: Value },
    Unknown { error: String },
    NotSent { error: String },
}

impl Outcome {
    pub fn status(&self) -> Option<u16> {
        match self {
            Outcome::Answered { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The answer's body (`Null` when there was no answer).
    pub fn body(&self) -> &Value {
        match self {
            Outcome::Answered { body, .. } => body,
            _ => &Value::Null,
        }
    }

    /// The problem's `code`, for an error answer.
    pub fn code(&self) -> Option<&str> {
        self.body().get("code").and_then(Value::as_str)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Outcome::Unknown { .. })
    }

    /// Answered 2xx.
    pub fn succeeded(&self) -> bool {
        self.status().is_some_and(|s| (200..300).contains(&s))
    }
}

/// One request and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The order in which requests started (unique in a run).
    pub seq: u64,
    /// Sent as `X-Request-Id`: the service stamps it on every event the
    /// request's command appends, so the log names the request.
    pub request_id: String,
    /// `b7`, `admin`, `setup`, `tidy`...
    pub client: String,
    /// The buyer (`sub`) the request was sent as.
    pub sub: String,
    pub instance: usize,
    /// The operation, as the generator names it (`hold_seats`, `order`...).
    pub op: String,
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub idempotency_key: Option<String>,
    /// Microseconds since the Unix epoch, on the machine's clock (the one
    /// the service's instances read too).
    pub start_us: i64,
    pub end_us: i64,
    #[serde(flatten)]
    pub outcome: Outcome,
}

impl Record {
    /// Whether any of `needles` appears in the request or its answer.
    pub fn mentions(&self, needles: &[String]) -> bool {
        let text = format!(
            "{} {} {}",
            self.path,
            self.body.as_ref().map(Value::to_string).unwrap_or_default(),
            self.outcome.body()
        );
        needles
            .iter()
            .any(|n| !n.is_empty() && text.contains(n.as_str()))
    }
}

/// The run's history: kept in memory for the checks and written to a file
/// as it grows.
pub struct History {
    next_seq: AtomicU64,
    records: Mutex<Vec<Record>>,
    file: Mutex<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
}

impl History {
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::File::create(path)?;
        Ok(Self {
            next_seq: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            file: Mutex::new(std::io::BufWriter::new(file)),
            path: path.to_owned(),
        })
    }

    /// A number for a request about to start.
    pub fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::Relaxed)
    }

    pub fn push(&self, record: Record) {
        if let Ok(line) = serde_json::to_string(&record) {
            if let Ok(mut file) = self.file.lock() {
                // A history line that cannot be written is logged, not
                // fatal: the checks use the copy in memory.
                if let Err(e) = writeln!(file, "{line}") {
                    tracing::warn!(error = %e, "history line not written");
                }
            }
        }
        if let Ok(mut records) = self.records.lock() {
            records.push(record);
        }
    }

    /// Every record so far, in the order the requests started.
    pub fn records(&self) -> Vec<Record> {
        let mut records = self.records.lock().map(|r| r.clone()).unwrap_or_default();
        records.sort_by_key(|r| r.seq);
        records
    }

    pub fn flush(&self) {
        if let Ok(mut file) = self.file.lock() {
            let _ = file.flush();
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
