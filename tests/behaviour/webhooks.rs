//! Webhooks driven from the log: signed, retried, surviving kill -9 and two
//! instances, each against a real receiver on 127.0.0.1.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use booking::auth::{Role, TokenKeys};
use booking::webhooks::WebhookSettings;
use domain::checkout::Checkout;
use domain::ids::HoldId;
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::crash::{post, start_with};
use crate::receiver::{expected_signature, Mode, Received, Receiver};
use crate::support::{show_body, token_from, Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_purchase_and_a_cancellation_arrive_signed_with_the_registered_secret,
        a_receiver_failing_three_times_gets_four_attempts_with_one_id_and_growing_gaps,
        a_receiver_that_never_answers_in_time_fails_and_a_manual_retry_delivers,
        a_hold_of_three_seats_expires_into_one_hold_expired,
        an_endpoint_hears_only_of_events_after_its_registration_and_none_once_deleted,
        a_delivered_delivery_is_pruned_after_a_month,
        a_kill_9_during_200_purchases_delivers_every_booking_and_no_other,
        two_instances_deliver_every_booking_and_never_attempt_one_at_once_twice,
        buyers_cannot_register_list_delete_or_retry_webhooks,
        bad_registrations_are_422_with_stable_codes_and_register_nothing,
    ]
}

/// Retries in fractions of a second, for tests.
pub(crate) fn quick() -> WebhookSettings {
    WebhookSettings {
        attempt_timeout: Duration::from_secs(5),
        initial_backoff: Duration::from_millis(300),
        max_backoff: Duration::from_secs(5),
        retry_window: Duration::from_secs(120),
    }
}

pub(crate) const WAIT: Duration = Duration::from_secs(30);

pub(crate) async fn register(app: &TestApp, url: &str, events: &[&str]) -> Answer {
    let answer = app
        .call(
            Method::POST,
            "/v1/webhooks",
            Some(&app.admin()),
            Some(&json!({"url": url, "events": events})),
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer
}

async fn deliveries(app: &TestApp, webhook_id: &str, status: &str) -> Vec<Value> {
    let answer = app
        .call(
            Method::GET,
            &format!("/v1/webhooks/{webhook_id}/deliveries?status={status}"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["deliveries"]
        .as_array()
        .expect("deliveries")
        .clone()
}

/// Awaits (with a deadline) `n` deliveries of `status`.
async fn wait_for_deliveries(
    app: &TestApp,
    webhook_id: &str,
    status: &str,
    n: usize,
) -> Vec<Value> {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let found = deliveries(app, webhook_id, status).await;
        if found.len() >= n {
            return found;
        }
        assert!(
            std::time::Instant::now() < until,
            "{n} {status} deliveries: found {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A hold of `seat` bought by `buyer`: the purchase answer (201).
async fn buy(app: &TestApp, buyer: &str, show: &str, seat: &str) -> Answer {
    let token = app.buyer(buyer);
    let hold = app.hold(&token, show, &[seat], None).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    let booking = app
        .purchase(&token, &hold.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(booking.status, StatusCode::CREATED, "{}", booking.body);
    booking
}

fn verify(secret: &str, request: &Received) -> Result<(), String> {
    standardwebhooks::Webhook::new(secret)
        .map_err(|e| e.to_string())?
        .verify(&request.body, &request.headers)
        .map_err(|e| e.to_string())
}

async fn a_purchase_and_a_cancellation_arrive_signed_with_the_registered_secret(env: TestEnv) {
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    let endpoint = register(
        &app,
        &receiver.url,
        &["booking.confirmed", "booking.cancelled", "refund.issued"],
    )
    .await;
    let secret = endpoint.str("secret");
    assert!(secret.starts_with("whsec_"), "{secret}");
    assert_eq!(endpoint.str("url"), receiver.url);
    assert_eq!(
        endpoint.body["events"],
        json!(["booking.confirmed", "booking.cancelled", "refund.issued"])
    );
    let webhook_id = endpoint.str("webhook_id");

    app.create_show("hooked", 4, 600).await;
    let booking = buy(&app, "ann", "hooked", "S1").await;
    let booking_id = booking.str("booking_id");
    let cancelled = app
        .call(
            Method::POST,
            &format!("/v1/bookings/{booking_id}/cancel"),
            Some(&app.buyer("ann")),
            None,
            &[],
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);

    let requests = receiver
        .wait_for("three events", WAIT, |r| r.len() >= 3)
        .await;
    let by_type: HashMap<String, &Received> =
        requests.iter().map(|r| (r.event_type(), r)).collect();
    assert_eq!(by_type.len(), 3, "one request per event type");

    let confirmed = by_type["booking.confirmed"].json();
    assert_eq!(
        confirmed["data"], booking.body,
        "the booking as the API showed it"
    );
    assert!(confirmed["timestamp"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    let cancelled_event = by_type["booking.cancelled"].json();
    assert_eq!(cancelled_event["data"], cancelled.body);
    let refund = by_type["refund.issued"].json();
    assert_eq!(refund["data"]["booking_id"], json!(booking_id));
    assert_eq!(refund["data"]["amount_cents"], booking.body["amount_cents"]);
    assert_eq!(refund["data"]["charge_id"], booking.body["charge_id"]);
    assert_eq!(refund["data"]["reason"], "booking_cancelled");

    let now = chrono::Utc::now().timestamp();
    for request in &requests {
        let id = request.webhook_id();
        let timestamp = request.header("webhook-timestamp");
        let signature = request.header("webhook-signature");
        assert!(id.starts_with("msg_"), "{id}");
        let at: i64 = timestamp.parse().expect("unix seconds");
        assert!((now - at).abs() < 60, "timestamp {at} vs {now}");
        // The signature is the definition's, computed here independently...
        assert_eq!(
            signature,
            expected_signature(&secret, &id, &timestamp, &request.body)
        );
        // ... and the Standard Webhooks library verifies it.
        verify(&secret, request).expect("a valid signature");
        assert_eq!(
            request
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
    }
    // A tampered body, or another secret, does not verify.
    let mut tampered = by_type["booking.confirmed"].clone();
    tampered.body = tampered
        .body
        .iter()
        .map(|b| if *b == b'5' { b'6' } else { *b })
        .collect::<Vec<u8>>()
        .into();
    assert_ne!(tampered.body, by_type["booking.confirmed"].body);
    assert!(
        verify(&secret, &tampered).is_err(),
        "a tampered body verifies"
    );
    let other = booking::webhooks::endpoints::new_secret();
    assert!(verify(&other, by_type["booking.confirmed"]).is_err());

    // Listed, without the secret; each delivery delivered at the first attempt.
    let list = app
        .call(Method::GET, "/v1/webhooks", Some(&app.admin()), None, &[])
        .await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["webhooks"].as_array().map(Vec::len), Some(1));
    assert_eq!(list.body["webhooks"][0]["webhook_id"], json!(webhook_id));
    assert!(list.body["webhooks"][0].get("secret").is_none());
    assert!(!list.body.to_string().contains(&secret));
    let delivered = wait_for_deliveries(&app, &webhook_id, "delivered", 3).await;
    for delivery in &delivered {
        assert_eq!(delivery["attempts"], 1, "{delivery}");
        assert_eq!(delivery["last_status"], 204);
        assert!(requests
            .iter()
            .any(|r| json!(r.webhook_id()) == delivery["webhook-id"]));
    }
    assert!(deliveries(&app, &webhook_id, "pending").await.is_empty());
    app.stop().await;
}

async fn a_receiver_failing_three_times_gets_four_attempts_with_one_id_and_growing_gaps(
    env: TestEnv,
) {
    let receiver = Receiver::start(Mode::FailFirst {
        remaining: 3,
        status: 500,
    })
    .await;
    let app = env.spawn_with_webhooks(quick()).await;
    let endpoint = register(&app, &receiver.url, &["booking.confirmed"]).await;
    app.create_show("flaky", 2, 600).await;
    buy(&app, "bob", "flaky", "S2").await;

    let requests = receiver
        .wait_for("four attempts", WAIT, |r| {
            r.len() >= 4 && r[3].answered.is_some()
        })
        .await;
    let ids: BTreeSet<String> = requests.iter().map(Received::webhook_id).collect();
    assert_eq!(ids.len(), 1, "one webhook-id on every attempt: {ids:?}");
    assert!(requests.iter().all(|r| r.body == requests[0].body));
    let answers: Vec<Option<u16>> = requests.iter().map(|r| r.answered).collect();
    assert_eq!(answers, vec![Some(500), Some(500), Some(500), Some(204)]);
    let gaps: Vec<Duration> = requests.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(
        gaps[0] >= Duration::from_millis(200) && gaps[1] > gaps[0] && gaps[2] > gaps[1],
        "gaps grow: {gaps:?}"
    );
    let delivered = wait_for_deliveries(&app, &endpoint.str("webhook_id"), "delivered", 1).await;
    assert_eq!(delivered[0]["attempts"], 4);
    assert_eq!(delivered[0]["last_status"], 204);
    assert_eq!(delivered[0]["last_error"], Value::Null);
    // No fifth attempt after delivery.
    assert_eq!(receiver.requests().len(), 4);
    app.stop().await;
}

async fn a_receiver_that_never_answers_in_time_fails_and_a_manual_retry_delivers(env: TestEnv) {
    let receiver = Receiver::start(Mode::Slow(Duration::from_secs(30))).await;
    let settings = WebhookSettings {
        attempt_timeout: Duration::from_millis(300),
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(400),
        retry_window: Duration::from_secs(2),
    };
    let app = env.spawn_with_webhooks(settings).await;
    let endpoint = register(&app, &receiver.url, &["booking.confirmed"]).await;
    let webhook_id = endpoint.str("webhook_id");
    app.create_show("silent", 2, 600).await;
    buy(&app, "cid", "silent", "S1").await;

    let failed = wait_for_deliveries(&app, &webhook_id, "failed", 1).await;
    let delivery = &failed[0];
    let attempts = delivery["attempts"].as_i64().expect("attempts");
    assert!(attempts >= 2, "retried before failing: {delivery}");
    assert_eq!(delivery["last_status"], Value::Null);
    assert!(
        delivery["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no answer within 300 ms")),
        "{delivery}"
    );
    assert_eq!(delivery["event_type"], "booking.confirmed");
    assert!(deliveries(&app, &webhook_id, "pending").await.is_empty());
    assert!(deliveries(&app, &webhook_id, "delivered").await.is_empty());
    let tried = receiver.requests().len();
    assert_eq!(tried as i64, attempts, "every attempt reached the receiver");

    // The receiver recovers; a manual retry delivers, with the same id.
    receiver.set_mode(Mode::Answer(204));
    let retry = app
        .call(
            Method::POST,
            &format!(
                "/v1/webhooks/{webhook_id}/deliveries/{}/retry",
                delivery["delivery_id"].as_str().expect("delivery_id")
            ),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(retry.status, StatusCode::ACCEPTED, "{}", retry.body);
    assert_eq!(retry.body["status"], "pending");
    let delivered = wait_for_deliveries(&app, &webhook_id, "delivered", 1).await;
    assert_eq!(delivered[0]["delivery_id"], delivery["delivery_id"]);
    assert_eq!(delivered[0]["attempts"], json!(attempts + 1));
    let requests = receiver.requests();
    let last = requests.last().expect("a request");
    assert_eq!(last.answered, Some(204));
    assert_eq!(json!(last.webhook_id()), delivery["webhook-id"]);
    assert!(deliveries(&app, &webhook_id, "failed").await.is_empty());
    app.stop().await;
}

async fn a_hold_of_three_seats_expires_into_one_hold_expired(env: TestEnv) {
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    register(&app, &receiver.url, &["hold.expired"]).await;
    app.create_show("lapse", 5, 60).await;
    let token = app.buyer("dee");
    let hold = app.hold(&token, "lapse", &["S1", "S2", "S3"], None).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    app.clock.advance(chrono::Duration::seconds(61));
    assert_eq!(app.sweeper.run_once().await.expect("sweep"), 1);

    let requests = receiver
        .wait_for("hold.expired", WAIT, |r| !r.is_empty())
        .await;
    let event = requests[0].json();
    assert_eq!(event["type"], "hold.expired");
    assert_eq!(event["data"]["hold_id"], hold.body["hold_id"]);
    assert_eq!(event["data"]["status"], "expired");
    assert_eq!(event["data"]["seats"], json!(["S1", "S2", "S3"]));
    // Three seat events, one webhook: the dispatcher is past them all by now.
    let head = app.head_of("lapse").await;
    let until = std::time::Instant::now() + WAIT;
    loop {
        let checkpoint = app
            .store
            .log()
            .checkpoint("webhooks")
            .await
            .expect("checkpoint");
        if checkpoint.cursor.of("lapse") >= head {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "dispatcher at {checkpoint:?}, head {head}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(receiver.requests().len(), 1, "one delivery for the hold");
    app.stop().await;
}

async fn an_endpoint_hears_only_of_events_after_its_registration_and_none_once_deleted(
    env: TestEnv,
) {
    let early = Receiver::start(Mode::Answer(204)).await;
    let late = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    let first = register(&app, &early.url, &["booking.confirmed"]).await;
    app.create_show("order", 3, 600).await;
    let before = buy(&app, "eve", "order", "S1").await;
    early
        .wait_for("the first booking", WAIT, |r| r.len() == 1)
        .await;
    register(&app, &late.url, &["booking.confirmed"]).await;
    let after = buy(&app, "eve", "order", "S2").await;
    let heard = late
        .wait_for("the second booking", WAIT, |r| !r.is_empty())
        .await;
    assert_eq!(heard[0].json()["data"], after.body);
    early
        .wait_for("both bookings", WAIT, |r| r.len() == 2)
        .await;
    assert_ne!(before.str("booking_id"), after.str("booking_id"));

    // Deleted: 204, then unknown; its deliveries are gone and nothing more is sent.
    let path = format!("/v1/webhooks/{}", first.str("webhook_id"));
    let deleted = app
        .call(Method::DELETE, &path, Some(&app.admin()), None, &[])
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    app.call(Method::DELETE, &path, Some(&app.admin()), None, &[])
        .await
        .expect_problem(404, "webhook_not_found");
    app.call(
        Method::GET,
        &format!("{path}/deliveries"),
        Some(&app.admin()),
        None,
        &[],
    )
    .await
    .expect_problem(404, "webhook_not_found");
    buy(&app, "eve", "order", "S3").await;
    late.wait_for("the third booking", WAIT, |r| r.len() == 2)
        .await;
    assert_eq!(
        early.requests().len(),
        2,
        "a deleted endpoint hears nothing"
    );
    app.stop().await;
}

async fn a_delivered_delivery_is_pruned_after_a_month(env: TestEnv) {
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    let endpoint = register(&app, &receiver.url, &["booking.confirmed"]).await;
    let webhook_id = endpoint.str("webhook_id");
    app.create_show("old", 1, 600).await;
    buy(&app, "fay", "old", "S1").await;
    wait_for_deliveries(&app, &webhook_id, "delivered", 1).await;
    assert_eq!(app.webhooks.sender.prune().await.expect("prune"), 0);
    app.clock.advance(chrono::Duration::days(31));
    assert_eq!(app.webhooks.sender.prune().await.expect("prune"), 1);
    assert!(deliveries(&app, &webhook_id, "delivered").await.is_empty());
    app.stop().await;
}

/// The booking ids a receiver heard of as confirmed.
fn confirmed_ids(requests: &[Received]) -> BTreeSet<String> {
    requests
        .iter()
        .filter(|r| r.event_type() == "booking.confirmed")
        .map(|r| {
            r.json()["data"]["booking_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

const CRASH_PURCHASES: usize = 200;

async fn a_kill_9_during_200_purchases_delivers_every_booking_and_no_other(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| token_from(&keys, sub, role, chrono::Duration::hours(1));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client");
    // Leases of the killed process end within 2 x 2 s + 5 s.
    let settings = [
        ("BOOKING_WEBHOOK_INTERVAL_MS", "50"),
        ("BOOKING_WEBHOOK_TIMEOUT_MS", "2000"),
        ("BOOKING_WEBHOOK_BACKOFF_MS", "100"),
        ("BOOKING_WEBHOOK_MAX_BACKOFF_MS", "1000"),
    ];
    let mut service = start_with(&database_url, &secret, &settings).await;
    let admin = token("ops", Role::Admin);
    let registered = post(
        &client,
        format!("{}/v1/webhooks", service.base),
        &admin,
        json!({"url": receiver.url, "events": ["booking.confirmed"]}),
    )
    .await
    .expect("registration answered");
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{}",
        registered.body
    );
    let put = client
        .put(format!("{}/v1/shows/storm", service.base))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body(show_body(CRASH_PURCHASES, 600).to_string())
        .send()
        .await
        .expect("show answered");
    assert_eq!(put.status(), StatusCode::CREATED);

    let buyers: Vec<String> = (0..CRASH_PURCHASES)
        .map(|i| token(&format!("w{i}"), Role::Buyer))
        .collect();
    let mut holds = Vec::with_capacity(CRASH_PURCHASES);
    for (i, buyer) in buyers.iter().enumerate() {
        let hold = post(
            &client,
            format!("{}/v1/shows/storm/holds", service.base),
            buyer,
            json!({"seats": [format!("S{}", i + 1)]}),
        )
        .await
        .expect("hold answered");
        assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
        holds.push(hold.str("hold_id"));
    }

    // Purchases spread over two seconds; the kill comes once the receiver
    // has heard of a random number of them, so bookings are being made,
    // recorded and sent at that instant.
    let kill_after_heard = rand::thread_rng().gen_range(1..120);
    let (acks_tx, mut acks_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, hold_id) in holds.iter().enumerate() {
        let delay_ms = rand::thread_rng().gen_range(0..2_000);
        let url = format!("{}/v1/holds/{hold_id}/purchase", service.base);
        let (client, buyer, acks) = (client.clone(), buyers[i].clone(), acks_tx.clone());
        tasks.spawn(async move {
            let body = json!({"payment_method": format!("pm_sim_delay_{delay_ms}")});
            if let Some(answer) = post(&client, url, &buyer, body).await {
                let _ = acks.send(answer);
            }
        });
    }
    drop(acks_tx);
    receiver
        .wait_for("deliveries before the kill", Duration::from_secs(60), |r| {
            confirmed_ids(r).len() >= kill_after_heard
        })
        .await;
    service.child.kill().await.expect("kill -9");
    let mut acknowledged = Vec::new();
    while let Some(answer) = acks_rx.recv().await {
        acknowledged.push(answer);
    }
    tasks.shutdown().await;
    let heard_before_restart = confirmed_ids(&receiver.requests()).len();

    // Restart: recovery finishes what was half way; the dispatcher goes on
    // from its checkpoint, and the dead process's claims run out.
    let service = start_with(&database_url, &secret, &settings).await;
    let mut bookings = BTreeSet::new();
    for (i, hold_id) in holds.iter().enumerate() {
        let hold_id = HoldId(hold_id.parse().expect("hold id"));
        let booking_id = Checkout::booking_id_for(hold_id).to_string();
        let answer = client
            .get(format!("{}/v1/bookings/{booking_id}", service.base))
            .bearer_auth(&buyers[i])
            .send()
            .await
            .expect("booking answered");
        match answer.status() {
            StatusCode::OK => {
                bookings.insert(booking_id);
            }
            StatusCode::NOT_FOUND => {}
            other => panic!("GET booking: {other}"),
        }
    }
    for answer in acknowledged
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
    {
        assert!(
            bookings.contains(&answer.str("booking_id")),
            "an acknowledged booking is gone"
        );
    }
    assert!(!bookings.is_empty());
    let requests = receiver
        .wait_for("every booking delivered", Duration::from_secs(90), |r| {
            confirmed_ids(r).is_superset(&bookings)
        })
        .await;
    let heard = confirmed_ids(&requests);
    let strangers: Vec<&String> = heard.difference(&bookings).collect();
    assert!(
        strangers.is_empty(),
        "delivered for bookings that do not exist: {strangers:?}"
    );
    let secret_of_endpoint = registered.str("secret");
    for request in &requests {
        verify(&secret_of_endpoint, request).expect("signed");
    }
    println!(
        "webhooks crash on {}: killed once {kill_after_heard} were heard, {} acknowledged, \
         {} bookings, {heard_before_restart} heard before the restart, {} requests in all",
        env.backend.name(),
        acknowledged.len(),
        bookings.len(),
        requests.len()
    );
    drop(service);
}

async fn two_instances_deliver_every_booking_and_never_attempt_one_at_once_twice(env: TestEnv) {
    // Slow answers keep each attempt open long enough to see an overlap.
    let receiver = Receiver::start(Mode::Slow(Duration::from_millis(150))).await;
    let (first, second) = env.spawn_pair_with_webhooks(quick()).await;
    register(&first, &receiver.url, &["booking.confirmed"]).await;
    first.create_show("pair", 30, 600).await;
    let mut purchases = tokio::task::JoinSet::new();
    let bases = [first.base.clone(), second.base.clone()];
    for n in 1..=30usize {
        let app_base = bases[n % 2].clone();
        let client = first.client.clone();
        let token = first.buyer(&format!("p{n}"));
        purchases.spawn(async move {
            let hold = post(
                &client,
                format!("{app_base}/v1/shows/pair/holds"),
                &token,
                json!({"seats": [format!("S{n}")]}),
            )
            .await
            .expect("hold answered");
            assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
            let booking = post(
                &client,
                format!("{app_base}/v1/holds/{}/purchase", hold.str("hold_id")),
                &token,
                json!({"payment_method": "pm_sim_ok"}),
            )
            .await
            .expect("purchase answered");
            assert_eq!(booking.status, StatusCode::CREATED, "{}", booking.body);
            booking.str("booking_id")
        });
    }
    let mut bookings = BTreeSet::new();
    while let Some(booking) = purchases.join_next().await {
        bookings.insert(booking.expect("purchase task"));
    }
    let requests = receiver
        .wait_for("every booking", WAIT, |r| {
            confirmed_ids(r).is_superset(&bookings)
        })
        .await;
    assert_eq!(confirmed_ids(&requests), bookings);
    assert!(
        receiver.overlaps().is_empty(),
        "attempted by both at once: {:?}",
        receiver.overlaps()
    );
    // Normally exactly once: each delivery was claimed by one instance.
    let ids: BTreeSet<String> = requests.iter().map(Received::webhook_id).collect();
    assert_eq!(ids.len(), bookings.len());
    first.stop().await;
    second.stop().await;
}

async fn buyers_cannot_register_list_delete_or_retry_webhooks(env: TestEnv) {
    let app = env.spawn().await;
    let buyer = app.buyer("mallory");
    let id = uuid::Uuid::new_v4();
    let body = json!({"url": "https://example.com/hooks", "events": ["booking.confirmed"]});
    let routes: Vec<(Method, String, Option<&Value>)> = vec![
        (Method::POST, "/v1/webhooks".into(), Some(&body)),
        (Method::GET, "/v1/webhooks".into(), None),
        (Method::DELETE, format!("/v1/webhooks/{id}"), None),
        (Method::GET, format!("/v1/webhooks/{id}/deliveries"), None),
        (
            Method::POST,
            format!("/v1/webhooks/{id}/deliveries/{id}/retry"),
            None,
        ),
    ];
    for (method, path, body) in &routes {
        app.call(method.clone(), path, Some(&buyer), *body, &[])
            .await
            .expect_problem(403, "forbidden");
        app.call(method.clone(), path, None, *body, &[])
            .await
            .expect_problem(401, "unauthorized");
    }
    let list = app
        .call(Method::GET, "/v1/webhooks", Some(&app.admin()), None, &[])
        .await;
    assert_eq!(list.body, json!({"webhooks": []}));
    app.stop().await;
}

async fn bad_registrations_are_422_with_stable_codes_and_register_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let admin = app.admin();
    let long = format!("https://example.com/{}", "a".repeat(2_030));
    assert!(long.len() > 2_048);
    let ok_events = json!(["booking.confirmed"]);
    let cases = [
        (
            json!({"url": "ftp://example.com/x", "events": ok_events}),
            "webhook_url_invalid",
        ),
        (
            json!({"url": "not a url", "events": ok_events}),
            "webhook_url_invalid",
        ),
        (
            json!({"url": "https://", "events": ok_events}),
            "webhook_url_invalid",
        ),
        (
            json!({"url": long, "events": ok_events}),
            "webhook_url_too_long",
        ),
        (
            json!({"url": "https://user:pw@example.com/x", "events": ok_events}),
            "webhook_url_credentials",
        ),
        (
            json!({"url": "https://example.com", "events": ["booking.created"]}),
            "unknown_event_type",
        ),
        (
            json!({"url": "https://example.com", "events": []}),
            "validation_failed",
        ),
        (
            json!({"url": "https://example.com", "events": ["hold.expired", "hold.expired"]}),
            "validation_failed",
        ),
        (json!({"url": "https://example.com"}), "validation_failed"),
        (
            json!({"url": "https://example.com", "events": ok_events, "secret": "mine"}),
            "validation_failed",
        ),
    ];
    for (body, code) in &cases {
        app.call(Method::POST, "/v1/webhooks", Some(&admin), Some(body), &[])
            .await
            .expect_problem(422, code);
    }
    let list = app
        .call(Method::GET, "/v1/webhooks", Some(&admin), None, &[])
        .await;
    assert_eq!(list.body, json!({"webhooks": []}), "nothing was registered");

    // Unknown ids and bad queries.
    let unknown = uuid::Uuid::new_v4();
    app.call(
        Method::DELETE,
        &format!("/v1/webhooks/{unknown}"),
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(404, "webhook_not_found");
    app.call(
        Method::DELETE,
        "/v1/webhooks/not-an-id",
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(404, "webhook_not_found");
    let endpoint = register(&app, "https://example.com/hooks", &["refund.issued"]).await;
    let webhook_id = endpoint.str("webhook_id");
    app.call(
        Method::POST,
        &format!("/v1/webhooks/{webhook_id}/deliveries/{unknown}/retry"),
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(404, "delivery_not_found");
    for query in ["status=lost", "limit=0", "limit=501", "colour=red"] {
        app.call(
            Method::GET,
            &format!("/v1/webhooks/{webhook_id}/deliveries?{query}"),
            Some(&admin),
            None,
            &[],
        )
        .await
        .expect_problem(422, "validation_failed");
    }
    assert!(deliveries(&app, &webhook_id, "pending").await.is_empty());
    app.stop().await;
}
