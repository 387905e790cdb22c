//! Card payments through Stripe, against a real Stripe-API server
//! (localstripe, `localstripe.rs`): authorize, convert, then capture; 3-D
//! Secure; voids; declines; an unreachable Stripe and a lost answer; the
//! webhook endpoint; refunds.
//!
//! localstripe does not honour `Idempotency-Key`, so what Stripe's keys
//! would guarantee is shown another way here: the service never authorizes
//! a PaymentIntent it has not recorded, and reads one whose answer it lost
//! (`an_unknown_outcome_is_settled_by_reading_without_a_second_authorization`
//! counts the confirm calls that reached the server).

use std::time::Duration;

use booking::clock::Clock;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::localstripe::{
    LocalStripe, StripeProxy, CARD_3DS, CARD_DECLINED, CARD_OK, WEBHOOK_SECRET,
};
use crate::support::{show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_good_card_is_authorized_converted_and_captured_once,
        three_d_secure_completes_by_asking_again_and_by_webhook,
        a_failed_three_d_secure_is_402_and_another_card_then_pays,
        three_d_secure_that_outlives_the_hold_is_voided_never_captured,
        a_declined_card_is_402_with_its_code_and_nothing_is_held,
        an_unreachable_stripe_is_503_and_a_retry_pays,
        an_unknown_outcome_is_settled_by_reading_without_a_second_authorization,
        webhooks_refuse_bad_signatures_and_act_once_on_what_stripe_says,
        a_cancellation_refunds_through_stripe_once,
        a_capture_refused_after_conversion_undoes_the_booking,
        a_kill_9_during_stripe_purchases_captures_only_bookings,
        an_order_is_one_payment_intent_refunded_in_part_per_cancellation,
        a_three_d_secure_order_completes_by_asking_again_and_by_webhook,
        instances_with_different_providers_each_drive_only_their_own_checkouts,
    ]
}

/// The payment timeout in these tests: short, so a swallowed answer is
/// found out quickly.
const TIMEOUT: Duration = Duration::from_secs(3);

struct Stripe {
    app: TestApp,
    stripe: LocalStripe,
    proxy: StripeProxy,
}

async fn start(env: &TestEnv) -> Stripe {
    let stripe = LocalStripe::start().await;
    let proxy = StripeProxy::start(&stripe.base).await;
    let app = env.spawn_with_stripe(&proxy.base, TIMEOUT).await;
    Stripe { app, stripe, proxy }
}

/// A show of `seats` seats at 50.00 in pounds, holds lasting `ttl` seconds
/// and at most `max_hold` in all.
async fn show(app: &TestApp, id: &str, seats: usize, ttl: u32, max_hold: u32) {
    let mut body = show_body(seats, ttl);
    body["currency"] = json!("gbp");
    body["max_hold_seconds"] = json!(max_hold);
    app.create_show_from(id, &body).await;
}

async fn hold(app: &TestApp, token: &str, show: &str, seat: &str) -> String {
    let hold = app.hold(token, show, &[seat], None).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    hold.str("hold_id")
}

async fn get(app: &TestApp, path: &str, token: &str) -> Answer {
    app.call(Method::GET, path, Some(token), None, &[]).await
}

/// Sends `event` to the service's Stripe webhook as Stripe would, signed
/// at `t` (unix seconds) with `secret`.
async fn send_event(app: &TestApp, event: &Value, t: i64, secret: &str) -> reqwest::Response {
    let body = serde_json::to_vec(event).unwrap();
    let key = booking::payment::stripe::SecretKey::new(secret.into());
    let signature = booking::payment::stripe::sign(&key, t, &body);
    app.client
        .post(format!("{}/v1/payments/stripe/webhook", app.base))
        .header("content-type", "application/json")
        .header("stripe-signature", signature)
        .body(body)
        .send()
        .await
        .unwrap()
}

fn event_for(payment_intent: &str, kind: &str) -> Value {
    json!({
        "id": format!("evt_{}", uuid::Uuid::new_v4().simple()),
        "object": "event",
        "type": kind,
        "data": {"object": {"id": payment_intent, "object": "payment_intent", "status": "succeeded"}}
    })
}

async fn a_good_card_is_authorized_converted_and_captured_once(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "card", 12, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "card", "S1").await;
    let card = stripe.payment_method(CARD_OK).await;

    let bought = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let intent = bought.str("charge_id");
    assert!(intent.starts_with("pi_"), "{intent}");
    let at_stripe = stripe.intent(&intent).await;
    assert_eq!(at_stripe["status"], "succeeded");
    assert_eq!(at_stripe["capture_method"], "manual");
    assert_eq!(at_stripe["amount"], 5000);
    assert_eq!(at_stripe["currency"], "gbp");
    assert_eq!(at_stripe["metadata"]["hold_id"], hold_id.as_str());
    assert_eq!(app.seat_statuses("card").await["S1"], "booked");

    // Retries, serial and concurrent: the same booking and PaymentIntent.
    let again = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body, bought.body);
    let second = hold(&app, &alice, "card", "S2").await;
    let answers =
        futures::future::join_all((0..6).map(|_| app.purchase(&alice, &second, &card))).await;
    let mut bookings = std::collections::HashSet::new();
    for answer in &answers {
        assert!(answer.status.is_success(), "{}", answer.body);
        bookings.insert((answer.str("booking_id"), answer.str("charge_id")));
    }
    assert_eq!(bookings.len(), 1, "{bookings:?}");
    assert_eq!(
        answers
            .iter()
            .filter(|a| a.status == StatusCode::CREATED)
            .count(),
        1
    );
    for hold_id in [&hold_id, &second] {
        let intents = stripe.intents_of(hold_id).await;
        assert_eq!(intents.len(), 1, "one PaymentIntent per hold");
        assert_eq!(intents[0]["status"], "succeeded");
    }
    app.stop().await;
}

async fn three_d_secure_completes_by_asking_again_and_by_webhook(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "tds", 4, 60, 600).await;
    let alice = app.buyer("alice");
    let card = stripe.payment_method(CARD_3DS).await;

    // By asking again.
    let hold_id = hold(&app, &alice, "tds", "S1").await;
    let placed = get(&app, &format!("/v1/holds/{hold_id}"), &alice).await;
    app.clock.advance(chrono::Duration::seconds(30));
    let waiting = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    assert_eq!(waiting.body["status"], "requires_action");
    assert_eq!(waiting.body["next_action"]["type"], "use_stripe_sdk");
    assert!(
        waiting.str("expires_at") > placed.str("expires_at"),
        "the hold is extended while the buyer authenticates"
    );
    let intent = waiting.str("payment_intent");
    // Asked again before the buyer answered: still waiting.
    let still = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(still.status, StatusCode::ACCEPTED, "{}", still.body);
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let bought = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(bought.str("charge_id"), intent);
    assert_eq!(stripe.intent(&intent).await["status"], "succeeded");

    // By Stripe's webhook: the buyer authenticates and never asks again.
    let hold_id = hold(&app, &alice, "tds", "S2").await;
    let waiting = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let now = app.clock.now().timestamp();
    let event = event_for(&intent, "payment_intent.amount_capturable_updated");
    let answer = send_event(&app, &event, now, WEBHOOK_SECRET).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(stripe.intent(&intent).await["status"], "succeeded");
    let record = get(&app, &format!("/v1/holds/{hold_id}"), &alice).await;
    assert_eq!(record.body["status"], "converted", "{}", record.body);
    let again = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.str("charge_id"), intent);
    app.stop().await;
}

async fn a_failed_three_d_secure_is_402_and_another_card_then_pays(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "fail", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "fail", "S1").await;
    let card = stripe.payment_method(CARD_3DS).await;
    let waiting = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), false)
        .await;
    let failed = app.purchase(&alice, &hold_id, &card).await;
    failed.expect_problem(402, "payment_declined");
    assert_eq!(
        failed.body["decline_code"],
        "payment_intent_authentication_failure"
    );
    assert_eq!(
        app.seat_statuses("fail").await["S1"],
        "held",
        "the hold stays"
    );

    let other = stripe.payment_method(CARD_OK).await;
    let bought = app.purchase(&alice, &hold_id, &other).await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_ne!(
        bought.str("charge_id"),
        intent,
        "a new attempt, a new payment"
    );
    let intents = stripe.intents_of(&hold_id).await;
    let captured: Vec<_> = intents
        .iter()
        .filter(|pi| pi["status"] == "succeeded")
        .collect();
    assert_eq!(captured.len(), 1);
    app.stop().await;
}

async fn three_d_secure_that_outlives_the_hold_is_voided_never_captured(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    // The cap is the TTL: the hold cannot be extended while alice authenticates.
    show(&app, "late", 2, 60, 60).await;
    let (alice, bob) = (app.buyer("alice"), app.buyer("bob"));
    let hold_id = hold(&app, &alice, "late", "S1").await;
    let card = stripe.payment_method(CARD_3DS).await;
    let waiting = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");

    app.clock.advance(chrono::Duration::seconds(61));
    let bobs_hold = hold(&app, &bob, "late", "S1").await;
    let bobs_card = stripe.payment_method(CARD_OK).await;
    let bobs = app.purchase(&bob, &bobs_hold, &bobs_card).await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);

    // Alice finishes 3-D Secure too late.
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let late = app.purchase(&alice, &hold_id, &card).await;
    late.expect_problem(409, "hold_expired");
    assert_eq!(late.body["voided"], true);
    assert_eq!(late.body["refunded"], false);
    assert_eq!(stripe.intent(&intent).await["status"], "canceled", "voided");
    let again = app.purchase(&alice, &hold_id, &card).await;
    again.expect_problem(409, "hold_expired");
    assert_eq!(again.body["voided"], true, "a retry gets the same answer");
    assert_eq!(app.seat_statuses("late").await["S1"], "booked");
    let booked: Vec<Value> = stripe
        .intents()
        .await
        .into_iter()
        .filter(|pi| pi["status"] == "succeeded")
        .collect();
    assert_eq!(booked.len(), 1, "the seat is paid for once, by bob");
    assert_eq!(booked[0]["id"], bobs.str("charge_id").as_str());
    app.stop().await;
}

async fn a_declined_card_is_402_with_its_code_and_nothing_is_held(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "no", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "no", "S1").await;
    let card = stripe.payment_method(CARD_DECLINED).await;
    let declined = app.purchase(&alice, &hold_id, &card).await;
    declined.expect_problem(402, "payment_declined");
    assert_eq!(declined.body["decline_code"], "card_declined");
    let intents = stripe.intents_of(&hold_id).await;
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0]["status"], "requires_payment_method",
        "nothing authorized"
    );
    assert_eq!(
        app.seat_statuses("no").await["S1"],
        "held",
        "the hold stays"
    );
    let malformed = app.purchase(&alice, &hold_id, "card_4242").await;
    malformed.expect_problem(422, "validation_failed");
    app.stop().await;
}

async fn an_unreachable_stripe_is_503_and_a_retry_pays(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        mut proxy,
    } = start(&env).await;
    show(&app, "down", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "down", "S1").await;
    let card = stripe.payment_method(CARD_OK).await;
    proxy.go_down().await;
    let down = app.purchase(&alice, &hold_id, &card).await;
    down.expect_problem(503, "payment_unavailable");
    assert!(stripe.intents_of(&hold_id).await.is_empty());
    proxy.come_up().await;
    let bought = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.stop().await;
}

async fn an_unknown_outcome_is_settled_by_reading_without_a_second_authorization(env: TestEnv) {
    let Stripe { app, stripe, proxy } = start(&env).await;
    show(&app, "lost", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "lost", "S1").await;
    let card = stripe.payment_method(CARD_OK).await;
    // The authorization reaches Stripe; its answer never comes back.
    proxy.swallow_next("/confirm");
    let lost = app.purchase(&alice, &hold_id, &card).await;
    lost.expect_problem(503, "payment_unavailable");
    let intents = stripe.intents_of(&hold_id).await;
    assert_eq!(intents.len(), 1);
    assert_eq!(
        intents[0]["status"], "requires_capture",
        "Stripe authorized it"
    );

    // Recovery reads the PaymentIntent and goes on from there.
    let report = app.recovery.run_once().await.unwrap();
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(
        proxy.calls_to("/confirm"),
        1,
        "authorized once, never again"
    );
    let intents = stripe.intents_of(&hold_id).await;
    assert_eq!(intents.len(), 1);
    assert_eq!(intents[0]["status"], "succeeded");
    let retry = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
    assert_eq!(retry.str("charge_id"), intents[0]["id"].as_str().unwrap());
    app.stop().await;
}

async fn webhooks_refuse_bad_signatures_and_act_once_on_what_stripe_says(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    stripe
        .send_webhooks_to(&format!("{}/v1/payments/stripe/webhook", app.base))
        .await;
    show(&app, "hooks", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "hooks", "S1").await;
    let card = stripe.payment_method(CARD_3DS).await;
    let waiting = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let now = app.clock.now().timestamp();
    let event = event_for(&intent, "payment_intent.amount_capturable_updated");
    let events_before = app.event_count().await;

    // A bad signature, another secret, a stale timestamp, none at all: 400, nothing done.
    let tampered = send_event(&app, &event, now, "whsec_not_ours").await;
    assert_eq!(tampered.status(), StatusCode::BAD_REQUEST);
    let problem: Value = tampered.json().await.unwrap();
    assert_eq!(problem["code"], "invalid_signature");
    let stale = send_event(&app, &event, now - 301, WEBHOOK_SECRET).await;
    assert_eq!(stale.status(), StatusCode::BAD_REQUEST);
    let unsigned = app
        .client
        .post(format!("{}/v1/payments/stripe/webhook", app.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&event).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), StatusCode::BAD_REQUEST);
    assert_eq!(app.event_count().await, events_before, "nothing recorded");
    assert_eq!(stripe.intent(&intent).await["status"], "requires_capture");

    // An event for a PaymentIntent of no hold: acknowledged.
    let unknown = send_event(
        &app,
        &event_for("pi_unknown", "payment_intent.succeeded"),
        now,
        WEBHOOK_SECRET,
    )
    .await;
    assert_eq!(unknown.status(), StatusCode::OK);

    // Out of order (a failure notice for what Stripe now shows authorized),
    // then the same event twice: Stripe's state decides, once.
    let failed = event_for(&intent, "payment_intent.payment_failed");
    assert_eq!(
        send_event(&app, &failed, now, WEBHOOK_SECRET)
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        send_event(&app, &event, now, WEBHOOK_SECRET).await.status(),
        StatusCode::OK
    );
    let after_first = app.event_count().await;
    assert_eq!(
        send_event(&app, &event, now, WEBHOOK_SECRET).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        app.event_count().await,
        after_first,
        "the duplicate changes nothing"
    );
    assert_eq!(stripe.intent(&intent).await["status"], "succeeded");
    let record = get(&app, &format!("/v1/holds/{hold_id}"), &alice).await;
    assert_eq!(record.body["status"], "converted");
    let captures = app
        .store
        .log()
        .stream_events::<domain::checkout::Checkout>(&hold_id, 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == "PaymentCaptured")
        .count();
    assert_eq!(captures, 1);
    app.stop().await;
}

async fn a_cancellation_refunds_through_stripe_once(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "refund", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "refund", "S1").await;
    let card = stripe.payment_method(CARD_OK).await;
    let bought = app.purchase(&alice, &hold_id, &card).await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let path = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
    let cancel = || app.call(Method::POST, &path, Some(&alice), None, &[]);
    let first = cancel().await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(first.body["status"], "cancelled");
    assert_eq!(first.body["refunded"], true);
    let again = futures::future::join_all((0..4).map(|_| cancel())).await;
    for answer in again {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        assert_eq!(answer.body, first.body);
    }
    let refunds = stripe.refunds_of(&bought.str("charge_id")).await;
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(app.seat_statuses("refund").await["S1"], "available");
    app.stop().await;
}

async fn a_capture_refused_after_conversion_undoes_the_booking(env: TestEnv) {
    let Stripe { app, stripe, proxy } = start(&env).await;
    show(&app, "undo", 2, 480, 1440).await;
    let alice = app.buyer("alice");
    let hold_id = hold(&app, &alice, "undo", "S1").await;
    let card = stripe.payment_method(CARD_OK).await;
    // Between conversion and capture, the authorization is cancelled at Stripe.
    proxy.cancel_before_next_capture();
    let undone = app.purchase(&alice, &hold_id, &card).await;
    undone.expect_problem(402, "payment_declined");
    assert_eq!(undone.body["reversed"], true, "{}", undone.body);
    let booking_id = undone.str("booking_id");
    let intents = stripe.intents_of(&hold_id).await;
    assert_eq!(intents.len(), 1);
    assert_ne!(intents[0]["status"], "succeeded", "nothing captured");
    assert_eq!(
        app.seat_statuses("undo").await["S1"],
        "available",
        "the seat is free again"
    );
    let booking = get(&app, &format!("/v1/bookings/{booking_id}"), &alice).await;
    assert_eq!(booking.status, StatusCode::OK, "{}", booking.body);
    assert_eq!(booking.body["status"], "cancelled");
    assert_eq!(booking.body["refunded"], false);
    let again = app.purchase(&alice, &hold_id, &card).await;
    again.expect_problem(402, "payment_declined");
    assert_eq!(again.body["reversed"], true, "a retry gets the same answer");
    // Someone else can buy the seat now.
    let bob = app.buyer("bob");
    let bobs_hold = hold(&app, &bob, "undo", "S1").await;
    let bobs = app
        .purchase(&bob, &bobs_hold, &stripe.payment_method(CARD_OK).await)
        .await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);
    app.stop().await;
}

/// Stripe purchases in the crash test; a fifth of them ask for 3-D Secure.
const CRASH_PURCHASES: usize = 100;

/// The real binary paying through localstripe, killed with SIGKILL once a
/// random number of 100 purchases were answered, restarted on the same
/// database; meanwhile some buyers authenticate and some release their
/// holds. Counted at Stripe afterwards: every capture is a booking, every
/// authorization ends captured or cancelled, a lost hold's is cancelled.
async fn a_kill_9_during_stripe_purchases_captures_only_bookings(env: TestEnv) {
    use booking::auth::{Role, TokenKeys};
    use rand::Rng;

    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let stripe = LocalStripe::start().await;
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token =
        |sub: &str, role| crate::support::token_from(&keys, sub, role, chrono::Duration::hours(1));
    let settings = [
        ("BOOKING_PAYMENT_PROVIDER", "stripe"),
        ("BOOKING_STRIPE_SECRET_KEY", crate::localstripe::SECRET_KEY),
        ("BOOKING_STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET),
        ("BOOKING_STRIPE_API_BASE", stripe.base.as_str()),
        ("BOOKING_RECOVERY_INTERVAL_SECONDS", "1"),
        ("BOOKING_PAYMENT_TIMEOUT_SECONDS", "5"),
    ];
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut service = crate::crash::start_with(&database_url, &secret, &settings).await;
    let put = client
        .put(format!("{}/v1/shows/crash", service.base))
        .bearer_auth(token("ops", Role::Admin))
        .header("content-type", "application/json")
        .body(show_body(CRASH_PURCHASES, 480).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let buyers: Vec<String> = (0..CRASH_PURCHASES)
        .map(|i| token(&format!("b{i}"), Role::Buyer))
        .collect();
    let three_ds = |i: usize| i % 5 == 0;
    let mut holds = Vec::with_capacity(CRASH_PURCHASES);
    let mut methods = Vec::with_capacity(CRASH_PURCHASES);
    for (i, buyer) in buyers.iter().enumerate() {
        let url = format!("{}/v1/shows/crash/holds", service.base);
        let body = json!({"seats": [format!("S{}", i + 1)]});
        let hold = crate::crash::post(&client, url, buyer, body)
            .await
            .expect("hold");
        assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
        holds.push(hold.str("hold_id"));
        let card = if three_ds(i) { CARD_3DS } else { CARD_OK };
        methods.push(stripe.payment_method(card).await);
    }

    let kill_after = rand::thread_rng().gen_range(5..60);
    let (acks_tx, mut acks_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CRASH_PURCHASES {
        let url = format!("{}/v1/holds/{}/purchase", service.base, holds[i]);
        let body = json!({"payment_method": methods[i]});
        let (client, buyer, acks) = (client.clone(), buyers[i].clone(), acks_tx.clone());
        tasks.spawn(async move {
            if let Some(answer) = crate::crash::post(&client, url, &buyer, body).await {
                let _ = acks.send((i, answer));
            }
        });
    }
    drop(acks_tx);
    let mut acknowledged = std::collections::HashMap::new();
    while acknowledged.len() < kill_after {
        match acks_rx.recv().await {
            Some((i, answer)) => {
                acknowledged.insert(i, answer);
            }
            None => break,
        }
    }
    service.child.kill().await.expect("kill -9");
    while let Some((i, answer)) = acks_rx.recv().await {
        acknowledged.insert(i, answer);
    }
    tasks.shutdown().await;
    let booked_before_kill: Vec<(usize, String)> = acknowledged
        .iter()
        .filter(|(_, a)| a.status == StatusCode::CREATED)
        .map(|(i, a)| (*i, a.str("charge_id")))
        .collect();

    // Restarted; meanwhile the 3-D Secure buyers answer their banks, but one
    // in two releases the hold instead (a lost hold: its authorization must
    // be cancelled). Recovery (every second) settles every authorization.
    let service = crate::crash::start_with(&database_url, &secret, &settings).await;
    let mut released = std::collections::HashSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut open = 0;
        for pi in stripe.intents().await {
            let status = pi["status"].as_str().unwrap_or("");
            if ["requires_capture", "processing"].contains(&status) {
                open += 1;
            }
            if status != "requires_action" {
                continue;
            }
            open += 1;
            let hold_id = pi["metadata"]["hold_id"].as_str().unwrap().to_owned();
            let i = holds.iter().position(|h| *h == hold_id).expect("ours");
            if released.contains(&hold_id) {
                continue;
            }
            if i % 10 == 0 {
                let release = client
                    .delete(format!("{}/v1/holds/{hold_id}", service.base))
                    .bearer_auth(&buyers[i])
                    .send()
                    .await
                    .unwrap();
                assert_eq!(release.status(), StatusCode::NO_CONTENT);
                released.insert(hold_id);
            } else {
                let id = pi["id"].as_str().unwrap();
                stripe
                    .authenticate(id, pi["client_secret"].as_str().unwrap(), true)
                    .await;
            }
        }
        if open == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{open} authorizations still open"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Counted at Stripe: every capture is a booking, one per hold.
    let mut captured_per_hold = std::collections::HashMap::<String, usize>::new();
    for pi in stripe.intents().await {
        let hold_id = pi["metadata"]["hold_id"].as_str().unwrap().to_owned();
        let i = holds.iter().position(|h| *h == hold_id).expect("ours");
        match pi["status"].as_str().unwrap() {
            "succeeded" => {
                *captured_per_hold.entry(hold_id.clone()).or_default() += 1;
                assert!(!released.contains(&hold_id), "a released hold was charged");
                let url = format!("{}/v1/holds/{hold_id}/purchase", service.base);
                let retry = crate::crash::post(
                    &client,
                    url,
                    &buyers[i],
                    json!({"payment_method": methods[i]}),
                )
                .await
                .expect("answered");
                assert_eq!(
                    retry.status,
                    StatusCode::OK,
                    "captured, so booked: {}",
                    retry.body
                );
                assert_eq!(retry.str("charge_id"), pi["id"].as_str().unwrap());
            }
            "canceled" | "requires_payment_method" | "requires_confirmation" => {}
            other => panic!("{hold_id}: a PaymentIntent left {other}"),
        }
    }
    assert!(
        captured_per_hold.values().all(|n| *n == 1),
        "one capture per hold"
    );
    // A lost hold's authorization is cancelled. (A PaymentIntent prepared a
    // second time after a lost answer stays unconfirmed: localstripe does
    // not honour Idempotency-Key, so the retry makes another; it was never
    // authorized, and Stripe would have returned the first.)
    for hold_id in &released {
        let intents = stripe.intents_of(hold_id).await;
        assert!(
            intents.iter().any(|pi| pi["status"] == "canceled"),
            "a lost hold's authorization is cancelled: {intents:?}"
        );
        assert!(
            intents
                .iter()
                .all(|pi| ["canceled", "requires_confirmation"]
                    .contains(&pi["status"].as_str().unwrap_or(""))),
            "nothing reserved for a lost hold: {intents:?}"
        );
    }
    // Every purchase answered 201 before the kill: still booked, the same payment.
    for (i, charge_id) in &booked_before_kill {
        assert_eq!(stripe.intent(charge_id).await["status"], "succeeded");
        let url = format!("{}/v1/holds/{}/purchase", service.base, holds[*i]);
        let retry = crate::crash::post(
            &client,
            url,
            &buyers[*i],
            json!({"payment_method": methods[*i]}),
        )
        .await
        .expect("answered");
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
        assert_eq!(&retry.str("charge_id"), charge_id);
    }
    println!(
        "stripe crash on {}: killed after {} answers, {} booked before the kill, {} captured, {} released during 3-D Secure",
        env.backend.name(),
        kill_after,
        booked_before_kill.len(),
        captured_per_hold.len(),
        released.len()
    );
    drop(service);
}

async fn order(app: &TestApp, token: &str, holds: &[&str], card: &str) -> Answer {
    app.call(
        Method::POST,
        "/v1/orders",
        Some(token),
        Some(&json!({"holds": holds, "payment_method": card})),
        &[],
    )
    .await
}

async fn an_order_is_one_payment_intent_refunded_in_part_per_cancellation(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "family", 6, 480, 1440).await;
    let alice = app.buyer("alice");
    let card = stripe.payment_method(CARD_OK).await;
    let a = app
        .hold(&alice, "family", &["S1", "S2"], None)
        .await
        .str("hold_id");
    let b = app
        .hold(&alice, "family", &["S3"], None)
        .await
        .str("hold_id");
    let c = app
        .call(
            Method::POST,
            "/v1/shows/family/holds",
            Some(&alice),
            Some(&json!({"pool_id": "floor", "quantity": 2})),
            &[],
        )
        .await
        .str("hold_id");
    let holds = [a.as_str(), b.as_str(), c.as_str()];
    let answers =
        futures::future::join_all((0..10).map(|_| order(&app, &alice, &holds, &card))).await;
    let created = answers
        .iter()
        .filter(|a| a.status == StatusCode::CREATED)
        .count();
    assert_eq!(
        created,
        1,
        "{:?}",
        answers.iter().map(|a| &a.body).collect::<Vec<_>>()
    );
    let placed = answers
        .iter()
        .find(|a| a.status == StatusCode::CREATED)
        .expect("the order");
    for answer in &answers {
        assert!(
            answer.status.is_success() || answer.code() == Some("busy"),
            "{}",
            answer.body
        );
        if answer.status.is_success() {
            assert_eq!(answer.body["charge_id"], placed.body["charge_id"]);
        }
    }
    let intent = placed.str("charge_id");
    let order_id = placed.str("order_id");
    let at_stripe = stripe.intent(&intent).await;
    assert_eq!(at_stripe["status"], "succeeded");
    assert_eq!(
        at_stripe["amount"],
        3 * 5_000 + 2 * 3_000,
        "one authorization for the sum"
    );
    assert_eq!(
        at_stripe["metadata"]["hold_id"],
        order_id.as_str(),
        "the order's id"
    );
    assert_eq!(
        stripe.intents_of(&order_id).await.len(),
        1,
        "one PaymentIntent"
    );
    for hold in holds {
        assert!(stripe.intents_of(hold).await.is_empty(), "none per hold");
    }

    // Partial cancellations, some racing: one Refund per request, its amount
    // the lines'.
    let admin = app.admin();
    let path = format!("/v1/orders/{order_id}/cancel");
    let first = app
        .call(
            Method::POST,
            &path,
            Some(&admin),
            Some(&json!({"lines": [1]})),
            &[],
        )
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let lines = json!({"lines": [2, 4]});
    let racing = futures::future::join_all(
        (0..4).map(|_| app.call(Method::POST, &path, Some(&admin), Some(&lines), &[])),
    )
    .await;
    for answer in &racing {
        assert!(
            answer.status == StatusCode::OK || answer.code() == Some("busy"),
            "{}",
            answer.body
        );
    }
    let last = app
        .call(Method::POST, &path, Some(&admin), Some(&json!({})), &[])
        .await;
    assert_eq!(last.status, StatusCode::OK, "{}", last.body);
    assert_eq!(last.body["status"], "cancelled");
    let refunds = stripe.refunds_of(&intent).await;
    let mut amounts: Vec<i64> = refunds
        .iter()
        .map(|r| r["amount"].as_i64().expect("amount"))
        .collect();
    amounts.sort_unstable();
    assert_eq!(
        amounts,
        vec![5_000, 5_000 + 3_000, 5_000 + 3_000],
        "{refunds:?}"
    );
    assert_eq!(last.body["refunded_cents"], 21_000);
    let statuses = app.seat_statuses("family").await;
    assert!(["S1", "S2", "S3"]
        .iter()
        .all(|s| statuses[*s] == "available"));
    app.stop().await;
}

async fn a_three_d_secure_order_completes_by_asking_again_and_by_webhook(env: TestEnv) {
    let Stripe {
        app,
        stripe,
        proxy: _proxy,
    } = start(&env).await;
    show(&app, "tdso", 4, 60, 600).await;
    let alice = app.buyer("alice");
    let card = stripe.payment_method(CARD_3DS).await;

    // By asking again: one authentication for the whole order.
    let a = hold(&app, &alice, "tdso", "S1").await;
    let b = hold(&app, &alice, "tdso", "S2").await;
    let waiting = order(&app, &alice, &[&a, &b], &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    assert_eq!(waiting.body["status"], "requires_action");
    let intent = waiting.str("payment_intent");
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let done = order(&app, &alice, &[&a, &b], &card).await;
    assert_eq!(done.status, StatusCode::CREATED, "{}", done.body);
    assert_eq!(done.str("charge_id"), intent);
    assert_eq!(stripe.intent(&intent).await["amount"], 10_000);

    // By Stripe's webhook: the buyer never asks again.
    let c = hold(&app, &alice, "tdso", "S3").await;
    let d = hold(&app, &alice, "tdso", "S4").await;
    let waiting = order(&app, &alice, &[&c, &d], &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");
    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let now = app.clock.now().timestamp();
    let event = event_for(&intent, "payment_intent.amount_capturable_updated");
    let answer = send_event(&app, &event, now, WEBHOOK_SECRET).await;
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(stripe.intent(&intent).await["status"], "succeeded");
    let read = get(
        &app,
        &format!("/v1/orders/{}", waiting.str("order_id")),
        &alice,
    )
    .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    assert_eq!(read.body["status"], "confirmed");
    let statuses = app.seat_statuses("tdso").await;
    assert_eq!(
        (statuses["S3"].as_str(), statuses["S4"].as_str()),
        ("booked", "booked")
    );
    app.stop().await;
}

/// A Stripe instance and a simulator instance on one database: neither
/// asks its provider after the other's payments. The simulator's recovery
/// leaves a Stripe checkout waiting on 3-D Secure as it is; a purchase of
/// it asked of the simulator is 503 (the balancer may pick the other); the
/// Stripe instance finishes it.
async fn instances_with_different_providers_each_drive_only_their_own_checkouts(env: TestEnv) {
    let stripe = LocalStripe::start().await;
    let proxy = StripeProxy::start(&stripe.base).await;
    let (card_app, sim_app) = env
        .spawn_stripe_beside_simulator(&proxy.base, TIMEOUT)
        .await;
    show(&card_app, "mixed", 2, 600, 1200).await;
    let alice = card_app.buyer("alice");
    let alices = hold(&card_app, &alice, "mixed", "S1").await;
    let card = stripe.payment_method(CARD_3DS).await;
    let waiting = card_app.purchase(&alice, &alices, &card).await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let intent = waiting.str("payment_intent");
    let bob = sim_app.buyer("bob");
    let bobs = hold(&sim_app, &bob, "mixed", "S2").await;
    let bought = sim_app.purchase(&bob, &bobs, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);

    let report = sim_app
        .recovery
        .run_once()
        .await
        .expect("the simulator's recovery");
    assert_eq!(report.voided + report.closed, 0, "{report:?}");
    assert_eq!(stripe.intent(&intent).await["status"], "requires_action");
    // The simulator takes no Stripe card; and her attempt under way is
    // Stripe's, whatever method she names there.
    sim_app
        .purchase(&alice, &alices, &card)
        .await
        .expect_problem(422, "validation_failed");
    sim_app
        .purchase(&alice, &alices, "pm_sim_ok")
        .await
        .expect_problem(503, "busy");
    assert_eq!(stripe.intent(&intent).await["status"], "requires_action");
    let report = card_app
        .recovery
        .run_once()
        .await
        .expect("Stripe's recovery");
    assert_eq!(report.voided + report.closed, 0, "{report:?}");

    stripe
        .authenticate(&intent, &waiting.str("client_secret"), true)
        .await;
    let paid = card_app.purchase(&alice, &alices, &card).await;
    assert_eq!(paid.status, StatusCode::CREATED, "{}", paid.body);
    assert_eq!(stripe.intent(&intent).await["status"], "succeeded");
    let ledger = sim_app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(
        ledger.len(),
        1,
        "the simulator charged bob alone: {ledger:?}"
    );
    card_app.stop().await;
    sim_app.stop().await;
}
