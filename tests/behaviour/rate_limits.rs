//! Per-instance rate limits (docs/api.md, "Rate limits"), over real HTTP:
//! per buyer and per client address, 429 `rate_limited` with Retry-After
//! past a limit and nothing done, the exempt routes, a zero turning a limit
//! off. The limits here are tiny (one a second, a few at once) so that a
//! handful of requests fired together cross them; they refill with the
//! service's clock, which the tests move instead of sleeping.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use booking::rate_limit::{Limit, RateLimits};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::live::EventStream;
use crate::support::{fire_at_once, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_buyer_past_the_limit_is_refused_and_nothing_happens,
        tokenless_requests_are_limited_per_address_and_the_exempt_never,
        a_stream_is_counted_when_opened_and_keeps_flowing_past_the_limit,
        a_zero_turns_a_limit_off,
    ]
}

/// One request a second, three at once.
const TINY: Limit = Limit {
    rate_per_second: 1,
    burst: 3,
};

/// An answer and its `Retry-After`, if any.
struct Refusable {
    answer: Answer,
    retry_after: Option<String>,
}

impl Refusable {
    fn refused(&self) -> bool {
        self.answer.status == StatusCode::TOO_MANY_REQUESTS
    }

    /// A refusal as the contract words it: 429 `rate_limited`, and
    /// `Retry-After` in whole seconds, at least 1.
    fn expect_refusal(&self) -> u64 {
        self.answer.expect_problem(429, "rate_limited");
        let seconds: u64 = self
            .retry_after
            .as_deref()
            .expect("Retry-After on a 429")
            .parse()
            .expect("Retry-After in whole seconds");
        assert!(seconds >= 1, "Retry-After {seconds}");
        seconds
    }
}

async fn send(request: reqwest::RequestBuilder) -> Refusable {
    let response = request.send().await.expect("answered");
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ASCII").to_owned());
    Refusable {
        answer: TestApp::answer(response).await,
        retry_after,
    }
}

/// Opens a stream and lets it go at once: its status, and the problem if
/// it was refused (an open stream's body never ends).
async fn open_and_drop(request: reqwest::RequestBuilder) -> Refusable {
    let response = request.send().await.expect("answered");
    if response.status() == StatusCode::OK {
        return Refusable {
            answer: Answer {
                status: StatusCode::OK,
                content_type: String::new(),
                body: Value::Null,
            },
            retry_after: None,
        };
    }
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().expect("ASCII").to_owned());
    Refusable {
        answer: TestApp::answer(response).await,
        retry_after,
    }
}

fn hold_request(app: &TestApp, token: &str, seat: &str) -> reqwest::RequestBuilder {
    app.client
        .post(format!("{}/v1/shows/rl/holds", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(json!({ "seats": [seat] }).to_string())
}

fn availability_request(client: &reqwest::Client, app: &TestApp) -> reqwest::RequestBuilder {
    client.get(format!("{}/v1/shows/rl/availability", app.base))
}

/// A client whose connections come from another loopback address.
fn client_from(address: Ipv4Addr) -> reqwest::Client {
    reqwest::Client::builder()
        .http1_only()
        .local_address(IpAddr::V4(address))
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
}

async fn metrics(app: &TestApp) -> String {
    app.client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text")
}

/// The seat's status in the availability answer.
fn status_of(availability: &Value, seat: &str) -> String {
    availability["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .find(|s| s["seat_id"] == seat)
        .and_then(|s| s["status"].as_str())
        .unwrap_or_else(|| panic!("{seat} in {availability}"))
        .to_owned()
}

async fn a_buyer_past_the_limit_is_refused_and_nothing_happens(env: TestEnv) {
    let app = env
        .spawn_with_rate_limits(RateLimits {
            buyer: TINY,
            client: Limit::OFF,
        })
        .await;
    app.create_show("rl", 20, 600).await;
    let (alice, bob) = (app.buyer("alice"), app.buyer("bob"));

    // What one single-seat hold writes, to count what the burst wrote.
    let before = app.event_count().await;
    assert_eq!(
        app.hold(&bob, "rl", &["S20"], None).await.status,
        StatusCode::CREATED
    );
    let per_hold = app.event_count().await - before;

    // Four holds at once: three pass, the fourth is refused and held nothing.
    let before = app.event_count().await;
    let seats = ["S1", "S2", "S3", "S4"];
    let answers = fire_at_once(
        seats
            .iter()
            .map(|seat| send(hold_request(&app, &alice, seat)))
            .collect(),
    )
    .await;
    let refused: Vec<usize> = (0..seats.len()).filter(|&i| answers[i].refused()).collect();
    assert_eq!(
        refused.len(),
        1,
        "statuses: {:?}",
        answers.iter().map(|a| a.answer.status).collect::<Vec<_>>()
    );
    for (i, answer) in answers.iter().enumerate() {
        if !refused.contains(&i) {
            assert_eq!(
                answer.answer.status,
                StatusCode::CREATED,
                "{}",
                answer.answer.body
            );
        }
    }
    let retry_after = answers[refused[0]].expect_refusal();
    let refused_seat = seats[refused[0]];
    assert_eq!(
        app.event_count().await - before,
        3 * per_hold,
        "the refused hold wrote nothing"
    );
    let availability = app.availability("rl").await;
    assert_eq!(status_of(&availability.body, refused_seat), "available");

    // Another buyer, at the same moment, is not held back.
    let carol = app.buyer("carol");
    assert_eq!(
        app.hold(&carol, "rl", &["S5"], None).await.status,
        StatusCode::CREATED
    );

    // Once the clock has moved by Retry-After, the refused hold goes through.
    app.clock
        .advance(chrono::Duration::seconds(retry_after as i64));
    let again = send(hold_request(&app, &alice, refused_seat)).await;
    assert_eq!(
        again.answer.status,
        StatusCode::CREATED,
        "{}",
        again.answer.body
    );

    // Refusals are counted by limit, and among the requests by route.
    let text = metrics(&app).await;
    assert!(
        text.contains("http_rate_limited_total{limit=\"buyer\"}"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with("http_requests_total")
                && line.contains("route=\"/v1/shows/{show_id}/holds\"")
                && line.contains("status=\"429\"")),
        "a refused hold is in http_requests_total"
    );
    app.stop().await;
}

async fn tokenless_requests_are_limited_per_address_and_the_exempt_never(env: TestEnv) {
    let app = env
        .spawn_with_rate_limits(RateLimits {
            buyer: Limit::OFF,
            client: TINY,
        })
        .await;
    app.create_show("rl", 4, 600).await;
    let admin = app.admin();
    let bob = app.buyer("bob");
    let from_here = app.client.clone();

    // Eight availability reads at once from this address, and beside them
    // what is never counted against it: the probes, the metrics, Stripe's
    // webhook, an admin, a buyer (counted as the buyer, limit off here).
    let mut calls = Vec::new();
    for _ in 0..8 {
        calls.push(send(availability_request(&from_here, &app)));
    }
    for path in ["/healthz", "/readyz", "/metrics"] {
        calls.push(send(from_here.get(format!("{}{path}", app.base))));
    }
    calls.push(send(
        from_here
            .post(format!("{}/v1/payments/stripe/webhook", app.base))
            .header("content-type", "application/json")
            .body("{}"),
    ));
    for _ in 0..4 {
        calls.push(send(
            from_here
                .get(format!("{}/v1/shows/rl", app.base))
                .bearer_auth(&admin),
        ));
        calls.push(send(
            from_here
                .get(format!("{}/v1/holds/{}", app.base, uuid::Uuid::new_v4()))
                .bearer_auth(&bob),
        ));
    }
    let answers = fire_at_once(calls).await;
    let (reads, others) = answers.split_at(8);
    let passed = reads
        .iter()
        .filter(|a| a.answer.status == StatusCode::OK)
        .count();
    let refused: Vec<&Refusable> = reads.iter().filter(|a| a.refused()).collect();
    assert_eq!(passed + refused.len(), reads.len());
    assert!(
        passed >= 3 && !refused.is_empty(),
        "{passed} passed, {} refused",
        refused.len()
    );
    for refusal in refused {
        refusal.expect_refusal();
    }
    for answer in others {
        assert!(!answer.refused(), "never limited: {}", answer.answer.body);
    }
    assert_eq!(
        others[3].answer.code(),
        Some("invalid_signature"),
        "the webhook reached its handler"
    );

    // Another address is not held back by this one.
    let elsewhere = client_from(Ipv4Addr::new(127, 0, 0, 2));
    let there = send(availability_request(&elsewhere, &app)).await;
    assert_eq!(there.answer.status, StatusCode::OK, "{}", there.answer.body);
    // A token that does not verify counts as none: against the address.
    let forged = send(availability_request(&from_here, &app).bearer_auth("not-a-token")).await;
    forged.expect_refusal();

    // The clock moves on: the address may read again.
    app.clock.advance(chrono::Duration::seconds(3));
    let again = send(availability_request(&from_here, &app)).await;
    assert_eq!(again.answer.status, StatusCode::OK, "{}", again.answer.body);

    let text = metrics(&app).await;
    assert!(
        text.contains("http_rate_limited_total{limit=\"client\"}"),
        "{text}"
    );
    app.stop().await;
}

async fn a_stream_is_counted_when_opened_and_keeps_flowing_past_the_limit(env: TestEnv) {
    let app = env
        .spawn_with_rate_limits(RateLimits {
            buyer: Limit::OFF,
            client: TINY,
        })
        .await;
    app.create_show("rl", 4, 600).await;
    let mut stream = EventStream::open(&app, "rl", None).await;
    let snapshot = stream
        .next_within(Duration::from_secs(10))
        .await
        .expect("snapshot");
    assert_eq!(snapshot.event, "snapshot");

    // More streams opened at once than the address has left: refused.
    let opens = fire_at_once(
        (0..4)
            .map(|_| {
                open_and_drop(
                    app.client
                        .get(format!("{}/v1/shows/rl/availability/stream", app.base))
                        .header("accept", "text/event-stream"),
                )
            })
            .collect(),
    )
    .await;
    let refused: Vec<&Refusable> = opens.iter().filter(|a| a.refused()).collect();
    assert!(!refused.is_empty(), "4 streams opened past a burst of 3");
    refused[0].expect_refusal();

    // The stream already open is not counted again: it still carries the
    // changes while its address is refused.
    let bob = app.buyer("bob");
    assert_eq!(
        app.hold(&bob, "rl", &["S2"], None).await.status,
        StatusCode::CREATED
    );
    let change = stream.until_seat("S2", "held").await;
    assert_eq!(change.event, "change");
    app.stop().await;
}

async fn a_zero_turns_a_limit_off(env: TestEnv) {
    // A zero rate, or a zero burst: either turns its limit off.
    let app = env
        .spawn_with_rate_limits(RateLimits {
            buyer: Limit {
                rate_per_second: 0,
                burst: 1,
            },
            client: Limit {
                rate_per_second: 1,
                burst: 0,
            },
        })
        .await;
    app.create_show("rl", 4, 600).await;
    let bob = app.buyer("bob");
    let mut calls = Vec::new();
    for _ in 0..20 {
        calls.push(send(availability_request(&app.client, &app)));
        calls.push(send(
            app.client
                .get(format!("{}/v1/holds/{}", app.base, uuid::Uuid::new_v4()))
                .bearer_auth(&bob),
        ));
    }
    for answer in fire_at_once(calls).await {
        assert!(
            answer.answer.status == StatusCode::OK
                || answer.answer.code() == Some("hold_not_found"),
            "{} {}",
            answer.answer.status,
            answer.answer.body
        );
    }
    app.stop().await;
}
