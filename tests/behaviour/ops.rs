//! Operating the service: graceful shutdown, metrics, readiness, configuration.

use std::time::{Duration, Instant};

use booking::auth::{Role, TokenKeys};
use booking::payment::ledger::Ledger;
use booking::store::{LogFilter, Store};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::crash::{post, start};
use crate::support::{show_body, token_from, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        sigterm_lets_the_purchases_in_flight_finish,
        metrics_and_readiness_report_what_happened,
        bad_configuration_stops_the_binary_with_a_clear_message,
        hold_ttl_advice_comes_from_the_log,
        the_openapi_document_covers_every_route_and_problem_code,
    ]
}

async fn sigterm_lets_the_purchases_in_flight_finish(env: TestEnv) {
    const PURCHASES: usize = 10;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| token_from(&keys, sub, role, chrono::Duration::hours(1));
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
            .log()
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
    assert_eq!(
        Ledger::of(&store).sim_ledger().await.unwrap().len(),
        PURCHASES
    );
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
    // A server that answers that the URL is wrong (no such database) stops
    // the binary; one that does not answer yet does not (tests/behaviour/
    // failover.rs: the service waits for a primary, not ready).
    if env.backend == crate::support::Backend::Postgres {
        let missing = crate::support::with_database(
            &crate::support::test_database_url(),
            &format!("no_such_database_{}", uuid::Uuid::new_v4().simple()),
        );
        refused(&[("DATABASE_URL", &missing)], "does not exist").await;
    }
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
    for (setting, bad, flag) in [
        (
            "BOOKING_HEADER_TIMEOUT_SECONDS",
            "0",
            "--header-timeout-seconds",
        ),
        (
            "BOOKING_IDLE_TIMEOUT_SECONDS",
            "99999",
            "--idle-timeout-seconds",
        ),
        (
            "BOOKING_REQUEST_TIMEOUT_SECONDS",
            "0",
            "--request-timeout-seconds",
        ),
        ("BOOKING_MAX_CONNECTIONS", "0", "--max-connections"),
        ("BOOKING_BUYER_BURST", "1000001", "--buyer-burst"),
        (
            "BOOKING_CLIENT_RATE_PER_SECOND",
            "-1",
            "--client-rate-per-second",
        ),
    ] {
        refused(&[("DATABASE_URL", &database_url), (setting, bad)], flag).await;
    }
}

async fn hold_ttl_advice_comes_from_the_log(env: TestEnv) {
    const BUYERS: u32 = 20;
    let app = env.spawn().await;
    app.create_show("advice", BUYERS as usize + 2, 120).await;
    let admin = app.admin();
    // Not enough checkouts yet: keep the current TTL.
    let early = app
        .call(
            Method::GET,
            "/v1/shows/advice/hold-ttl-advice",
            Some(&admin),
            None,
            &[],
        )
        .await;
    assert_eq!(early.status, StatusCode::OK, "{}", early.body);
    assert_eq!(early.body["recommended_ttl_seconds"], 120);
    assert_eq!(early.body["completed_checkouts"], 0);

    // Buyer i takes 5 * i seconds (by the service's clock) from hold to purchase.
    for i in 1..=BUYERS {
        let token = app.buyer(&format!("a{i}"));
        let hold = app.hold(&token, "advice", &[&format!("S{i}")], None).await;
        app.clock
            .advance(chrono::Duration::seconds(i64::from(5 * i)));
        let bought = app
            .purchase(&token, &hold.str("hold_id"), "pm_sim_ok")
            .await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    }
    // Two holds run to their expiry.
    let idle = app.buyer("idle");
    app.hold(&idle, "advice", &[&format!("S{}", BUYERS + 1)], None)
        .await;
    app.hold(&idle, "advice", &[&format!("S{}", BUYERS + 2)], None)
        .await;
    app.clock.advance(chrono::Duration::seconds(121));

    let advice = app
        .call(
            Method::GET,
            "/v1/shows/advice/hold-ttl-advice",
            Some(&admin),
            None,
            &[],
        )
        .await;
    assert_eq!(advice.status, StatusCode::OK, "{}", advice.body);
    let body = &advice.body;
    assert_eq!(body["completed_checkouts"], BUYERS);
    let d = &body["hold_to_purchase_seconds"];
    // The clock moved 5 * i seconds; real time adds a few milliseconds each.
    let close =
        |value: &serde_json::Value, expected: f64| (value.as_f64().unwrap() - expected).abs() < 1.0;
    assert!(
        close(&d["p50"], 50.0)
            && close(&d["p90"], 90.0)
            && close(&d["p99"], 100.0)
            && close(&d["max"], 100.0),
        "{d}"
    );
    let payment = &body["payment_latency_seconds"];
    assert_eq!(payment["samples"], BUYERS);
    assert!(
        payment["p50"].as_f64().unwrap() < 5.0,
        "payments take the simulator's latency: {payment}"
    );
    let at_60 = body["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["ttl_seconds"] == 60)
        .unwrap()
        .clone();
    // 60 s cuts off buyers 12..=20 (buyer 12 took 60 s and a few milliseconds).
    assert_eq!(
        (
            at_60["cut_off_checkouts"].clone(),
            at_60["cut_off_share"].clone()
        ),
        (json!(9), json!(0.45))
    );
    assert_eq!(body["expired_holds"], 2);
    assert_eq!(
        body["unavailable_seat_minutes_at_current_ttl"], 4.0,
        "2 seats x 2 minutes"
    );
    // p99 100 s + 25% = 125 s, rounded up to 30 s: 150 s.
    assert_eq!(
        body["recommended_ttl_seconds"], 150,
        "{}",
        body["reasoning"]
    );
    let buyer = app.buyer("a1");
    app.call(
        Method::GET,
        "/v1/shows/advice/hold-ttl-advice",
        Some(&buyer),
        None,
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    app.stop().await;
}

/// Every route of the contract (docs/api.md) and of this service's extensions.
const ROUTES: &[(&str, &str)] = &[
    ("put", "/v1/shows/{show_id}"),
    ("get", "/v1/shows/{show_id}"),
    ("put", "/v1/shows/{show_id}/prices"),
    ("put", "/v1/venues/{venue_id}"),
    ("get", "/v1/venues/{venue_id}"),
    ("get", "/v1/shows/{show_id}/availability"),
    ("get", "/v1/shows/{show_id}/availability/stream"),
    ("get", "/shows/{show_id}"),
    ("post", "/v1/shows/{show_id}/holds"),
    ("get", "/v1/holds/{hold_id}"),
    ("delete", "/v1/holds/{hold_id}"),
    ("post", "/v1/holds/{hold_id}/extend"),
    ("post", "/v1/shows/{show_id}/queue"),
    ("get", "/v1/shows/{show_id}/queue"),
    ("get", "/v1/shows/{show_id}/queue/me"),
    ("get", "/v1/shows/{show_id}/queue/me/stream"),
    ("patch", "/v1/shows/{show_id}/waiting-room"),
    ("post", "/v1/holds/{hold_id}/purchase"),
    ("get", "/v1/bookings/{booking_id}"),
    ("post", "/v1/bookings/{booking_id}/cancel"),
    ("post", "/v1/orders"),
    ("get", "/v1/orders/{order_id}"),
    ("post", "/v1/orders/{order_id}/cancel"),
    ("post", "/v1/shows/{show_id}/allocations"),
    ("get", "/v1/shows/{show_id}/allocations"),
    ("post", "/v1/shows/{show_id}/allocations/release"),
    ("post", "/v1/shows/{show_id}/bookings"),
    ("get", "/v1/shows/{show_id}/bookings"),
    ("get", "/v1/shows/{show_id}/report"),
    ("post", "/v1/shows/{show_id}/waitlist"),
    ("get", "/v1/shows/{show_id}/waitlist"),
    ("get", "/v1/shows/{show_id}/waitlist/me"),
    ("get", "/v1/waitlist/{entry_id}"),
    ("delete", "/v1/waitlist/{entry_id}"),
    ("get", "/v1/orders/{order_id}/tickets"),
    ("get", "/v1/bookings/{booking_id}/tickets"),
    ("get", "/v1/tickets/{ticket_id}"),
    ("patch", "/v1/tickets/{ticket_id}"),
    ("post", "/v1/tickets/{ticket_id}/transfer"),
    ("get", "/v1/tickets/{ticket_id}/qr.svg"),
    ("get", "/v1/tickets/{ticket_id}/qr.png"),
    ("get", "/v1/me/tickets"),
    ("get", "/v1/shows/{show_id}/ticket-keys"),
    ("get", "/v1/shows/{show_id}/revocations"),
    ("post", "/v1/shows/{show_id}/checkins"),
    ("post", "/v1/shows/{show_id}/checkins/batch"),
    ("get", "/v1/shows/{show_id}/checkins/conflicts"),
    ("get", "/v1/shows/{show_id}/attendance"),
    ("get", "/shows/{show_id}/scan"),
    ("get", "/shows/{show_id}/scan-sw.js"),
    ("get", "/tickets/{ticket_id}"),
    ("get", "/v1/shows/{show_id}/seats/{seat_id}/history"),
    ("get", "/v1/shows/{show_id}/history"),
    ("get", "/v1/shows/{show_id}/hold-ttl-advice"),
    ("post", "/v1/webhooks"),
    ("get", "/v1/webhooks"),
    ("delete", "/v1/webhooks/{webhook_id}"),
    ("get", "/v1/webhooks/{webhook_id}/deliveries"),
    (
        "post",
        "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry",
    ),
    ("post", "/v1/payments/stripe/webhook"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
];

async fn the_openapi_document_covers_every_route_and_problem_code(env: TestEnv) {
    let app = env.spawn().await;
    let doc = app
        .call(Method::GET, "/openapi.json", None, None, &[])
        .await;
    assert_eq!(doc.status, StatusCode::OK);
    let paths = doc.body["paths"].as_object().expect("paths");
    for (method, path) in ROUTES {
        assert!(
            paths.get(*path).and_then(|p| p.get(*method)).is_some(),
            "{method} {path} is missing from /openapi.json"
        );
        // ... and the route exists on the server (not the 404/405 fallbacks).
        let probe = app
            .call(
                method.to_uppercase().parse().unwrap(),
                &path
                    .replace("{show_id}", "x")
                    .replace("{seat_id}", "y")
                    .replace("{hold_id}", &uuid::Uuid::nil().to_string())
                    .replace("{booking_id}", &uuid::Uuid::nil().to_string())
                    .replace("{order_id}", &uuid::Uuid::nil().to_string())
                    .replace("{entry_id}", "x.00000000-0000-0000-0000-000000000000")
                    .replace("{ticket_id}", "x.00000000-0000-0000-0000-000000000000"),
                None,
                None,
                &[],
            )
            .await;
        assert!(
            !matches!(probe.code(), Some("not_found" | "method_not_allowed")),
            "{method} {path} is not served"
        );
    }
    let documented: usize = paths
        .values()
        .map(|p| p.as_object().map_or(0, |o| o.len()))
        .sum();
    assert_eq!(
        documented,
        ROUTES.len(),
        "a documented route is missing from this test's list"
    );
    let codes: Vec<&str> = doc.body["components"]["schemas"]["ProblemCode"]["enum"]
        .as_array()
        .expect("ProblemCode enum")
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for code in [
        "seat_taken",
        "sold_out",
        "hold_expired",
        "idempotency_key_reused",
        "busy",
        "unsupported_media_type",
    ] {
        assert!(codes.contains(&code), "{code} missing");
    }
    for schema in [
        "HoldView",
        "BookingView",
        "ShowDefinition",
        "HoldBody",
        "PurchaseBody",
        "Problem",
        "HistoryPage",
        "TtlAdvice",
        "RegisterWebhook",
        "WebhookCreated",
        "DeliveryList",
        "RefundView",
        "ActionView",
    ] {
        assert!(
            doc.body["components"]["schemas"].get(schema).is_some(),
            "schema {schema} missing"
        );
    }
    app.stop().await;
}
