//! Holds through a PostgreSQL failover (issue #24): the window without a
//! successful write, the 503s, and the acknowledged holds lost, with the
//! service on a multi-host URL and the switch made by a command the caller
//! gives (`bench/failover.sh` gives a planned failover and a crash of a
//! pg_auto_failover cluster, with synchronous and asynchronous
//! replication).
//!
//! Buyers hold seat after seat as fast as they are answered; a 503, or no
//! answer, is retried with the same idempotency key after `RETRY_PAUSE`, as
//! a client would. After the run the show's availability is read: an
//! acknowledged hold whose seat is not held or booked was lost.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use booking::auth::Role;
use serde_json::{json, Value};

use crate::report::Figures;
use crate::scenarios::{put_show, seat_show_body};
use crate::Target;

/// The pause before a buyer sends a refused (503) or unanswered hold again.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Seats of the show: more than the run can hold.
const SEATS: usize = 100_000;

/// How long the service may take to answer the availability read after
/// the run (it may still be finding the new primary).
const READ_BACK_WITHIN: Duration = Duration::from_secs(120);

/// The switch: a shell command run `after` the load starts.
pub struct Switch {
    pub command: String,
    pub after: Duration,
    pub label: String,
}

/// One answer: status (0: none), latency, when it came, a refusal's code.
type Answer = (u16, Duration, Instant, Option<String>);

#[derive(Default)]
struct Seen {
    answers: Vec<Answer>,
    /// Seats whose hold was acknowledged (201, or 200 on a retry).
    held: Vec<String>,
}

async fn hold(target: &Target, show: &str, token: &str, seat: &str) -> Answer {
    let started = Instant::now();
    let response = target
        .client
        .post(format!("{}/v1/shows/{show}/holds", target.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        // Keys of their own per run: the buyers' names repeat across runs.
        .header("idempotency-key", format!("k-{show}-{seat}"))
        .body(json!({ "seats": [seat] }).to_string())
        .send()
        .await;
    let Ok(response) = response else {
        return (0, started.elapsed(), Instant::now(), None);
    };
    let status = response.status().as_u16();
    // A refusal's problem code, to say what the 4xx were.
    let code = if response.status().is_client_error() {
        let body: Value = response.json().await.unwrap_or(Value::Null);
        body["code"].as_str().map(str::to_owned)
    } else {
        None
    };
    (status, started.elapsed(), Instant::now(), code)
}

/// A buyer until `until`: each seat is retried until it is answered with
/// something other than 503 (or no answer).
async fn buyer(
    target: Arc<Target>,
    show: Arc<str>,
    worker: usize,
    next: Arc<AtomicUsize>,
    until: Instant,
    seen: Arc<Mutex<Seen>>,
) {
    let token = target.token(&format!("f{worker}"), Role::Buyer);
    while Instant::now() < until {
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= SEATS {
            return;
        }
        let seat = format!("S{}", n + 1);
        while Instant::now() < until {
            let answer = hold(&target, &show, &token, &seat).await;
            let status = {
                let mut seen = seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let status = answer.0;
                seen.answers.push(answer);
                if matches!(status, 200 | 201) {
                    seen.held.push(seat.clone());
                }
                status
            };
            if !matches!(status, 0 | 503) {
                break;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// Reads the show's seat statuses once the service answers.
async fn statuses(target: &Target, show: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let deadline = Instant::now() + READ_BACK_WITHIN;
    loop {
        let response = target
            .client
            .get(format!("{}/v1/shows/{show}/availability", target.base))
            .send()
            .await;
        if let Ok(response) = response {
            if response.status().is_success() {
                let body: Value = response.json().await?;
                let seats = body["seats"].as_array().context("availability has seats")?;
                return Ok(seats
                    .iter()
                    .filter_map(|s| {
                        Some((
                            s["seat_id"].as_str()?.to_owned(),
                            s["status"].as_str()?.to_owned(),
                        ))
                    })
                    .collect());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "availability not readable within {READ_BACK_WITHIN:?} of the run's end"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub async fn run(
    target: &Target,
    switch: &Switch,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    // A show of its own: runs on one cluster share its database.
    let show: Arc<str> = format!("failover-{}", uuid::Uuid::new_v4().simple()).into();
    put_show(target, &show, seat_show_body(&show, SEATS)).await?;
    let target = Arc::new(target.clone());
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let until = started + duration;
    let buyers: Vec<_> = (0..concurrency)
        .map(|w| {
            tokio::spawn(buyer(
                target.clone(),
                show.clone(),
                w,
                next.clone(),
                until,
                seen.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(switch.after).await;
    let switch_started = Instant::now();
    let command = switch.command.clone();
    let status = tokio::task::spawn_blocking(move || {
        std::process::Command::new("sh")
            .arg("-c")
            .arg(&command)
            .status()
    })
    .await??;
    let switch_took = switch_started.elapsed();
    anyhow::ensure!(status.success(), "the switch command failed: {status}");
    for buyer in buyers {
        buyer.await?;
    }
    let wall = started.elapsed();
    let seen = std::mem::take(
        &mut *seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let statuses = statuses(&target, &show).await?;
    let lost = seen
        .held
        .iter()
        .filter(|seat| {
            !matches!(
                statuses.get(*seat).map(String::as_str),
                Some("held" | "booked")
            )
        })
        .count();
    let mut held_at: Vec<Instant> = seen
        .answers
        .iter()
        .filter(|a| matches!(a.0, 200 | 201))
        .map(|a| a.2)
        .collect();
    held_at.sort();
    let window = held_at
        .windows(2)
        .filter(|pair| pair[1] > switch_started)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    let busy: Vec<Duration> = seen
        .answers
        .iter()
        .filter(|a| a.0 == 503)
        .map(|a| a.1)
        .collect();
    let slowest_busy = busy.iter().max().copied().unwrap_or_default();
    let unanswered = seen.answers.iter().filter(|a| a.0 == 0).count();
    let mut refusals: BTreeMap<&str, usize> = BTreeMap::new();
    for answer in seen.answers.iter().filter(|a| (400..500).contains(&a.0)) {
        *refusals
            .entry(answer.3.as_deref().unwrap_or("?"))
            .or_default() += 1;
    }
    let answers: Vec<(u16, Duration)> = seen.answers.iter().map(|a| (a.0, a.1)).collect();
    let mut figures = Figures::from_latencies(
        &format!("holds through a failover ({})", switch.label),
        target.store,
        &answers,
        wall,
    );
    figures.note = format!(
        "switch command at {:.0} s took {:.1} s; no hold succeeded for {:.1} s; {} answered 503 (slowest {:.1} s), {unanswered} unanswered, refusals {refusals:?}; {lost} of {} acknowledged holds lost",
        switch.after.as_secs_f64(),
        switch_took.as_secs_f64(),
        window.as_secs_f64(),
        busy.len(),
        slowest_busy.as_secs_f64(),
        seen.held.len(),
    );
    eprintln!("{}: {}", figures.scenario, figures.note);
    Ok(figures)
}
