//! The real `booking` binary, started as `booking serve` on the run's
//! database, killed with SIGKILL and started again: the instances a run
//! drives. Each announces its address in its JSON log ("booking is
//! listening"); a restarted one listens on a new port.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, Context};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::api::Addresses;

/// How long a starting instance may take to listen (migrations, recovery).
const START_DEADLINE: Duration = Duration::from_secs(90);

/// The settings every instance of a run gets: rate limits off (the crowd
/// is one machine), workers on short intervals so that expiries, recovery
/// and the waiting list's judgement happen within a run.
const SETTINGS: &[(&str, &str)] = &[
    ("BOOKING_ADDR", "127.0.0.1:0"),
    ("BOOKING_BUYER_RATE_PER_SECOND", "0"),
    ("BOOKING_BUYER_BURST", "0"),
    ("BOOKING_CLIENT_RATE_PER_SECOND", "0"),
    ("BOOKING_CLIENT_BURST", "0"),
    ("BOOKING_RECOVERY_INTERVAL_SECONDS", "1"),
    ("BOOKING_SWEEPER_INTERVAL_SECONDS", "1"),
    ("BOOKING_PROJECTOR_INTERVAL_MS", "200"),
    ("BOOKING_WAITLIST_INTERVAL_MS", "250"),
    ("BOOKING_PAYMENT_LATENCY_MS", "20"),
    ("BOOKING_LOG_FORMAT", "json"),
    ("BOOKING_DB_CONNECTIONS", "8"),
    // Below the client's timeout: a command stuck behind a database that
    // is down answers 503 busy rather than leaving its outcome unknown.
    ("BOOKING_REQUEST_TIMEOUT_SECONDS", "10"),
    ("RUST_LOG", "warn,booking=info"),
];

/// The instances of a run and where they listen.
pub struct Instances {
    binary: PathBuf,
    database_url: String,
    secret: String,
    children: Vec<Option<Child>>,
    pub addresses: Addresses,
}

impl Instances {
    pub fn new(binary: &Path, database_url: &str, secret: &str, count: usize) -> Self {
        Self {
            binary: binary.to_owned(),
            database_url: database_url.to_owned(),
            secret: secret.to_owned(),
            children: (0..count).map(|_| None).collect(),
            addresses: Addresses::new(count),
        }
    }

    pub fn count(&self) -> usize {
        self.children.len()
    }

    /// Starts every instance that is not running.
    pub async fn start_all(&mut self) -> anyhow::Result<()> {
        for i in 0..self.children.len() {
            if !self.is_running(i) {
                self.start(i).await?;
            }
        }
        Ok(())
    }

    pub fn is_running(&mut self, i: usize) -> bool {
        match self.children.get_mut(i) {
            Some(Some(child)) => matches!(child.try_wait(), Ok(None)),
            _ => false,
        }
    }

    /// Starts instance `i` and waits until it listens.
    pub async fn start(&mut self, i: usize) -> anyhow::Result<()> {
        let mut child = Command::new(&self.binary)
            .arg("serve")
            .envs(SETTINGS.iter().copied())
            .env("DATABASE_URL", &self.database_url)
            .env("BOOKING_JWT_SECRET", &self.secret)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = tokio::time::timeout(START_DEADLINE, listening_address(&mut lines))
            .await
            .map_err(|_| anyhow!("instance {i} did not listen within {START_DEADLINE:?}"))??;
        // Keep draining its log so that it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        tracing::info!(instance = i, %addr, "instance listening");
        self.addresses.set(i, Some(format!("http://{addr}")));
        if let Some(slot) = self.children.get_mut(i) {
            *slot = Some(child);
        }
        Ok(())
    }

    /// SIGKILL: no shutdown, no flush, requests in flight cut.
    pub async fn kill(&mut self, i: usize) -> anyhow::Result<()> {
        self.addresses.set(i, None);
        if let Some(Some(mut child)) = self.children.get_mut(i).map(Option::take) {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Kills every instance (the end of a run).
    pub async fn stop_all(&mut self) {
        for i in 0..self.children.len() {
            if let Err(e) = self.kill(i).await {
                tracing::warn!(instance = i, error = %e, "stopping an instance");
            }
        }
    }
}

/// Reads the instance's JSON log until it says where it listens.
async fn listening_address(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> anyhow::Result<String> {
    while let Some(line) = lines.next_line().await? {
        let Ok(log) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if log["fields"]["message"] == "booking is listening" {
            if let Some(addr) = log["fields"]["addr"].as_str() {
                return Ok(addr.to_owned());
            }
        }
    }
    Err(anyhow!("the instance exited before it listened"))
}

/// `booking verify` on the run's database: exit 0, or its report.
pub async fn verify(binary: &Path, database_url: &str) -> anyhow::Result<Result<(), String>> {
    let output = Command::new(binary)
        .arg("verify")
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .output()
        .await?;
    if output.status.success() {
        return Ok(Ok(()));
    }
    Ok(Err(format!(
        "booking verify exited {}: {}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )))
}
