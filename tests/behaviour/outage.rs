//! The database stops and comes back under load (docs/api.md, "Failure
//! semantics"): 503 `busy` with `Retry-After` within 5 s while it is down,
//! never a 500, and service again as soon as it is back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::cluster::{unavailable, OwnCluster};
use crate::support::{seat_id, TestApp, TestEnv};
use crate::tests;

pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![postgres_stopped_for_5_seconds_under_hold_load_is_503_never_500]
}

const BUYERS: usize = 16;
/// Seats each buyer may take (buyer `b` takes seats b+1, b+1+BUYERS, ...).
const SEATS_PER_BUYER: usize = 120;
/// A buyer's pause between two requests: the load is steady, not a storm.
const PACE: Duration = Duration::from_millis(40);
/// Holds placed before the server is stopped: the load is under way.
const PLACED_BEFORE_STOP: usize = BUYERS;
/// How long the load may take to place them.
const LOAD_DEADLINE: Duration = Duration::from_secs(30);
const OUTAGE: Duration = Duration::from_secs(5);
/// docs/api.md: answered within 5 s.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// The first hold after the server is back arrives within this.
const BACK_WITHIN: Duration = Duration::from_secs(2);
/// The load gives up this long after the restart if no hold was placed.
const GIVE_UP_AFTER_RESTART: Duration = Duration::from_secs(15);

struct Sent {
    buyer: usize,
    status: StatusCode,
    code: Option<String>,
    retry_after: Option<String>,
    content_type: String,
    hold_id: Option<String>,
    answered_at: Instant,
    took: Duration,
    body: String,
}

async fn hold_once(app: &TestApp, token: &str, seat: &str, key: &str, buyer: usize) -> Sent {
    let started = Instant::now();
    let response = app
        .client
        .post(format!("{}/v1/shows/outage/holds", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(json!({ "seats": [seat] }).to_string())
        .send()
        .await
        .expect("the service answers");
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let answer = TestApp::answer(response).await;
    Sent {
        buyer,
        status: answer.status,
        code: answer.code().map(str::to_owned),
        retry_after,
        content_type: answer.content_type.clone(),
        hold_id: answer.body["hold_id"].as_str().map(str::to_owned),
        answered_at: Instant::now(),
        took: started.elapsed(),
        body: answer.body.to_string(),
    }
}

async fn postgres_stopped_for_5_seconds_under_hold_load_is_503_never_500(env: TestEnv) {
    let cluster = match OwnCluster::start() {
        Ok(cluster) => cluster,
        Err(reason) => return unavailable(&reason),
    };
    cluster.create_database("outage").unwrap();
    let app = Arc::new(env.spawn_at(cluster.url("outage")).await);
    app.create_show("outage", BUYERS * SEATS_PER_BUYER, 3600)
        .await;

    let stop = Arc::new(AtomicBool::new(false));
    let log: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let placed_after = Arc::new(tokio::sync::Notify::new());
    let placed = Arc::new(AtomicUsize::new(0));
    let placed_one = Arc::new(tokio::sync::Notify::new());
    let back_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let mut buyers = tokio::task::JoinSet::new();
    for buyer in 0..BUYERS {
        let (app, stop, log) = (app.clone(), stop.clone(), log.clone());
        let (placed_after, back_at) = (placed_after.clone(), back_at.clone());
        let (placed, placed_one) = (placed.clone(), placed_one.clone());
        buyers.spawn(async move {
            let token = app.buyer(&format!("buyer{buyer}"));
            let mut n = 0;
            while n < SEATS_PER_BUYER && !stop.load(Ordering::SeqCst) {
                let seat = seat_id(buyer + 1 + n * BUYERS);
                // A 503 is retried with the same key, as a client would:
                // the seat moves on only once the hold is answered.
                let sent = hold_once(&app, &token, &seat, &format!("k-{seat}"), buyer).await;
                if sent.status.is_success() {
                    n += 1;
                    placed.fetch_add(1, Ordering::SeqCst);
                    placed_one.notify_one();
                    let back = *back_at.lock().unwrap();
                    if back.is_some_and(|back| sent.answered_at > back) {
                        placed_after.notify_one();
                    }
                }
                log.lock().unwrap().push(sent);
                tokio::time::sleep(PACE).await;
            }
        });
    }

    let load_deadline = Instant::now() + LOAD_DEADLINE;
    while placed.load(Ordering::SeqCst) < PLACED_BEFORE_STOP {
        let left = load_deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "the load placed no {PLACED_BEFORE_STOP} holds in time"
        );
        let _ = tokio::time::timeout(left, placed_one.notified()).await;
    }
    let stopping = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.stop().unwrap();
        cluster
    })
    .await
    .unwrap();
    let stopped_at = Instant::now();
    println!("pg_ctl stop -m fast took {:?}", stopped_at - stopping);
    // The load keeps going (the buyers' loops) while the server is down.
    tokio::time::sleep(OUTAGE).await;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.start_again().unwrap();
        cluster
    })
    .await
    .unwrap();
    let back = Instant::now();
    *back_at.lock().unwrap() = Some(back);
    // The first request after the restart, a read through the query pool.
    let first_read = app
        .call(
            Method::GET,
            "/v1/shows/outage/availability",
            None,
            None,
            &[],
        )
        .await;
    let placed = tokio::time::timeout(GIVE_UP_AFTER_RESTART, placed_after.notified()).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(joined) = buyers.join_next().await {
        joined.expect("buyer task");
    }

    let log = std::mem::take(&mut *log.lock().unwrap());
    let count = |f: &dyn Fn(&Sent) -> bool| log.iter().filter(|s| f(s)).count();
    println!(
        "{} requests: {} placed, {} busy, {} other; slowest {:?}",
        log.len(),
        count(&|s| s.status.is_success()),
        count(&|s| s.status == StatusCode::SERVICE_UNAVAILABLE),
        count(&|s| !s.status.is_success() && s.status != StatusCode::SERVICE_UNAVAILABLE),
        log.iter().map(|s| s.took).max().unwrap_or_default()
    );
    let wrong: Vec<String> = log
        .iter()
        .filter(|s| {
            !(s.status.is_success()
                || s.status == StatusCode::SERVICE_UNAVAILABLE
                    && s.code.as_deref() == Some("busy")
                    && s.content_type == "application/problem+json"
                    && s.retry_after.is_some()
                    && s.took <= ANSWER_WITHIN)
        })
        .map(|s| {
            format!(
                "buyer{}: {} after {:?} ({:?} after the stop): {}",
                s.buyer,
                s.status,
                s.took,
                s.answered_at.checked_duration_since(stopped_at),
                s.body
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "{} answers are neither a hold nor a 503 busy with Retry-After within {ANSWER_WITHIN:?}:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert_eq!(
        first_read.status,
        StatusCode::OK,
        "the first read after the restart: {}",
        first_read.body
    );
    assert!(
        placed.is_ok(),
        "no hold was placed within {GIVE_UP_AFTER_RESTART:?} of the restart"
    );
    let first_after = log
        .iter()
        .filter(|s| s.status.is_success() && s.answered_at > back)
        .map(|s| s.answered_at - back)
        .min()
        .expect("a hold after the restart");
    assert!(
        first_after <= BACK_WITHIN,
        "the first hold after the restart came {first_after:?} after the server was back"
    );

    // Every hold answered placed is held.
    for sent in log.iter().filter(|s| s.status.is_success()) {
        let hold_id = sent.hold_id.as_deref().expect("a placed hold has an id");
        let token = app.buyer(&format!("buyer{}", sent.buyer));
        let read = app
            .call(
                Method::GET,
                &format!("/v1/holds/{hold_id}"),
                Some(&token),
                None,
                &[],
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{hold_id}: {}", read.body);
        assert_eq!(read.body["status"], "held", "{hold_id}: {}", read.body);
    }
    drop(cluster);
}
