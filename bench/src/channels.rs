//! Sales channels (`--only channels`, issue #35): the report of a
//! 20,000-seat show read under 64 writers, beside the same show's
//! availability read under the same writers in the same run (the report is
//! served from the same read models: its cost over availability's is the
//! aggregation), and allocations of 5,000 seats in one request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use booking::auth::Role;
use serde_json::json;

use crate::report::Figures;
use crate::scenarios::{for_duration, post, seat_show_body, writers, Attempt};
use crate::Target;

/// The report's show: the 20,000 seats.
const SEATS: usize = 20_000;
/// Seats of one allocation: the 5,000.
const ALLOCATED: usize = 5_000;
/// Allocations timed (each of its own 5,000 seats, then given back).
const ALLOCATIONS: usize = 3;
/// Readers of the report (and of availability, its baseline).
const READERS: usize = 4;

async fn channel_show(target: &Target, show: &str) -> anyhow::Result<()> {
    let mut body = seat_show_body(show, SEATS);
    body["channels"] = json!([{"channel_id": "partner-x", "label": "Partner X"}]);
    let (status, _, answer) = put(target, show, &body).await;
    anyhow::ensure!(status == 201, "create {show}: {status} {answer}");
    Ok(())
}

async fn put(
    target: &Target,
    show: &str,
    body: &serde_json::Value,
) -> (u16, Duration, serde_json::Value) {
    let started = Instant::now();
    let response = target
        .client
        .put(format!("{}/v1/shows/{show}", target.base))
        .bearer_auth(target.token("bench-admin", Role::Admin))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    match response {
        Ok(r) => {
            let status = r.status().as_u16();
            (
                status,
                started.elapsed(),
                r.json().await.unwrap_or_default(),
            )
        }
        Err(_) => (0, started.elapsed(), serde_json::Value::Null),
    }
}

/// A worker reading `path` as an admin, again and again.
fn reader(
    target: Arc<Target>,
    path: String,
) -> impl Fn(usize) -> Attempt + Clone + Send + Sync + 'static {
    let token = target.token("bench-admin", Role::Admin);
    move |_| {
        let (target, path, token) = (target.clone(), path.clone(), token.clone());
        Box::pin(async move {
            let started = Instant::now();
            let status = match target
                .client
                .get(format!("{}{path}", target.base))
                .bearer_auth(&token)
                .send()
                .await
            {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let _ = r.bytes().await;
                    status
                }
                Err(_) => 0,
            };
            Some((status, started.elapsed()))
        })
    }
}

pub async fn run(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Vec<Figures>> {
    let mut figures = allocations(target).await?;
    figures.extend(report_under_writers(target, concurrency, duration).await?);
    Ok(figures)
}

/// 5,000 seats to a channel in one request, three times (each its own
/// seats), and each given back in one request.
async fn allocations(target: &Target) -> anyhow::Result<Vec<Figures>> {
    let show = "chan-alloc";
    channel_show(target, show).await?;
    let admin = target.token("bench-admin", Role::Admin);
    let (mut allocated, mut released) = (Vec::new(), Vec::new());
    for run in 0..ALLOCATIONS {
        let seats: Vec<String> = (1..=ALLOCATED)
            .map(|n| format!("S{}", run * ALLOCATED + n))
            .collect();
        let body = json!({"channel_id": "partner-x", "seats": seats});
        let path = format!("/v1/shows/{show}/allocations");
        let (status, took, answer) = post(target, &path, &admin, &body).await;
        anyhow::ensure!(status == 201, "allocation: {status} {answer}");
        allocated.push((status, took));
        let path = format!("/v1/shows/{show}/allocations/release");
        let (status, took, answer) = post(target, &path, &admin, &body).await;
        anyhow::ensure!(status == 200, "release: {status} {answer}");
        released.push((status, took));
    }
    let wall = |answers: &[(u16, Duration)]| answers.iter().map(|(_, d)| *d).sum();
    let mut allocate = Figures::from_latencies(
        "allocation of 5,000 seats in one request",
        target.store,
        &allocated,
        wall(&allocated),
    );
    allocate.note = format!("{ALLOCATIONS} allocations, each of its own 5,000 seats of 20,000");
    let mut release = Figures::from_latencies(
        "release of 5,000 seats in one request",
        target.store,
        &released,
        wall(&released),
    );
    release.note = format!("{ALLOCATIONS} releases of the seats just allocated");
    Ok(vec![allocate, release])
}

/// The report, and availability as its baseline, of a 20,000-seat show
/// (2,000 seats allocated to a channel) read while `concurrency` writers
/// hold its seats.
async fn report_under_writers(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Vec<Figures>> {
    let admin = target.token("bench-admin", Role::Admin);
    let seats: Vec<String> = (SEATS - 1_999..=SEATS).map(|n| format!("S{n}")).collect();
    let body = json!({"channel_id": "partner-x", "seats": seats});
    let target = Arc::new(target.clone());
    let mut out = Vec::new();
    // Each on a show of its own, so that both are read under the same
    // writes (holds of seats still free).
    for (what, show) in [("availability", "chan-avail"), ("report", "chan-report")] {
        channel_show(&target, show).await?;
        let path = format!("/v1/shows/{show}/allocations");
        let (status, _, answer) = post(&target, &path, &admin, &body).await;
        anyhow::ensure!(status == 201, "allocation: {status} {answer}");
        let path = format!("/v1/shows/{show}/{what}");
        let background = tokio::spawn(writers(
            target.clone(),
            show.to_string(),
            SEATS - 2_000,
            concurrency,
            duration,
        ));
        let (wall, reads) = for_duration(READERS, duration, reader(target.clone(), path)).await;
        let (_, holds) = background.await?;
        let mut figures = Figures::from_latencies(
            &format!("{what} of 20,000 seats (2,000 allocated) under {concurrency} writers"),
            target.store,
            &reads,
            wall,
        );
        let held = holds.iter().filter(|(s, _)| *s == 201).count();
        figures.note = format!("{READERS} readers; {held} holds placed meanwhile");
        out.push(figures);
    }
    Ok(out)
}
