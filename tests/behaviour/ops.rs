//! Operating the service: graceful shutdown, metrics, readiness, configuration.

use std::time::{Duration, Instant};

use booking::auth::{Role, TokenKeys};
use booking::store::{LogFilter, Store};
use domain::ids::BuyerId;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::crash::{post, start};
use crate::support::{show_body, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        sigterm_lets_the_purchases_in_flight_finish,
        metrics_and_readiness_report_what_happened,
        bad_configuration_stops_the_binary_with_a_clear_message,
    ]
}

async fn sigterm_lets_the_purchases_in_flight_finish(env: TestEnv) {
    const PURCHASES: usize = 10;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| {
        keys.issue(
            &BuyerId::parse(sub).unwrap(),
            role,
            chrono::Duration::hours(1),
        )
        .unwrap()
    };
    let client = reqwest::Client::new();
    let mut service = start(&database_url, &secret).await;
    let put = client
        .put(format!("{}/v1/shows/term", service.base))
        .bearer_auth(token("ops", Role::Admin))
        .header("content-type", "application/json")
        .body(show_body(PURCHASES, 480).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let mut purchases = tokio::task::JoinSet::new();
    for i in 0..PURCHASES {
        let buyer = token(&format!("t{i}"), Role::Buyer);
        let hold = post(
            &client,
            format!("{}/v1/shows/term/holds", service.base),
            &buyer,
            json!({"seats": [format!("S{}", i + 1)]}),
        )
        .await
        .expect("hold");
        let url = format!("{}/v1/holds/{}/purchase", service.base, hold.str("hold_id"));
        let client = client.clone();
        purchases.spawn(async move {
            post(
                &client,
                url,
                &buyer,
                json!({"payment_method": "pm_sim_delay_1500"}),
            )
            .await
        });
    }
    // Once every purchase is recorded (its payment in flight), SIGTERM.
    let store = Store::connect(&database_url, 2).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let requested = store
            .read_log(LogFilter::All, 0, 10_000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.event_type == "PurchaseRequested")
            .count();
        if requested == PURCHASES {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "purchases were not requested in time"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pid = service.child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut answers = Vec::new();
    while let Some(answer) = purchases.join_next().await {
        answers.push(answer.unwrap().expect("a purchase in flight is answered"));
    }
    assert!(
        answers.iter().all(|a| a.status == StatusCode::CREATED),
        "every purchase completed"
    );
    let status = tokio::time::timeout(Duration::from_secs(30), service.child.wait())
        .await
        .expect("the service stops")
        .unwrap();
    assert!(status.success(), "clean exit: {status:?}");
    assert!(
        client
            .get(format!("{}/healthz", service.base))
            .send()
            .await
            .is_err(),
        "no longer listening"
    );

    // Nothing was lost: after a restart every booking is there, once.
    let service = start(&database_url, &secret).await;
    for (i, answer) in answers.iter().enumerate() {
        let _ = i;
        let booking = client
            .get(format!(
                "{}/v1/bookings/{}",
                service.base,
                answer.str("booking_id")
            ))
            .bearer_auth(token("ops", Role::Admin))
            .send()
            .await
            .unwrap();
        assert_eq!(booking.status(), StatusCode::OK);
    }
    assert_eq!(store.sim_ledger().await.unwrap().len(), PURCHASES);
    drop(service);
}

async fn metrics_and_readiness_report_what_happened(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("metrics", 3, 480).await;
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let hold = app.hold(&alice, "metrics", &["S1"], None).await;
    app.hold(&bob, "metrics", &["S1"], None)
        .await
        .expect_problem(409, "seat_taken");
    app.purchase(&alice, &hold.str("hold_id"), "pm_sim_ok")
        .await;
    app.projector.run_once().await.unwrap();

    let metrics = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), StatusCode::OK);
    let text = metrics.text().await.unwrap();
    for expected in [
        "http_requests_total{",
        "route=\"/v1/shows/{show_id}/holds\"",
        "http_request_duration_seconds_bucket{",
        "holds_placed_total{kind=\"seats\"}",
        "holds_refused_total{kind=\"seats\",reason=\"seat_taken\"}",
        "events_appended_total",
        "payment_latency_seconds_bucket{",
        "projector_lag_events",
    ] {
        assert!(
            text.contains(expected),
            "/metrics lacks {expected}:\n{text}"
        );
    }
    let ready = app.call(Method::GET, "/readyz", None, None, &[]).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.body);
    assert_eq!(ready.body["status"], "ready", "{}", ready.body);
    assert_eq!(ready.body["projector_lag_events"], 0);
    let alive = app.call(Method::GET, "/healthz", None, None, &[]).await;
    assert_eq!(alive.status, StatusCode::OK);
    app.stop().await;
}

/// Runs `booking serve` with the given environment and expects it to stop
/// at once with a non-zero exit and `message` in its output.
async fn refused(env: &[(&str, &str)], message: &str) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_booking"));
    command
        .arg("serve")
        .env("BOOKING_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "error")
        .kill_on_drop(true);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the binary stops by itself")
        .unwrap();
    assert!(!output.status.success(), "{env:?} must not start");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        all.contains(message),
        "{env:?}: expected {message:?} in:\n{all}"
    );
}

async fn bad_configuration_stops_the_binary_with_a_clear_message(env: TestEnv) {
    let (database_url, _dir) = env.database_url().await;
    refused(
        &[("DATABASE_URL", "mysql://localhost/booking")],
        "DATABASE_URL must start with sqlite:// or postgres://",
    )
    .await;
    refused(
        &[("DATABASE_URL", "postgres://postgres@127.0.0.1:1/none")],
        "cannot open the database",
    )
    .await;
    refused(
        &[
            ("DATABASE_URL", &database_url),
            ("BOOKING_PAYMENT_LATENCY_MS", "999999"),
        ],
        "--payment-latency-ms",
    )
    .await;
    refused(
        &[
            ("DATABASE_URL", &database_url),
            ("BOOKING_SWEEPER_INTERVAL_SECONDS", "99999"),
        ],
        "must be 0 (off) or 1..=3600",
    )
    .await;
    refused(
        &[
            ("DATABASE_URL", &database_url),
            ("BOOKING_ADDR", "not-an-address"),
        ],
        "--addr",
    )
    .await;
}
