//! Checkout over HTTP: every path ends in a booking, no charge, or a refund.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use booking::store::{AppendBatch, AppendOutcome, NewEvent};
use chrono::Utc;
use cqrs_es::{Aggregate, DomainEvent};
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{BuyerId, HoldId, ShowId};
use projections::checkouts::CheckoutRow;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_purchase_books_the_seats_at_the_sum_of_their_prices,
        retry_storm_gives_one_booking_and_one_charge_per_hold,
        a_payment_that_outlives_its_hold_is_voided_never_captured,
        a_declined_payment_can_be_retried_with_another_method,
        an_unavailable_provider_charges_nothing_and_a_retry_succeeds,
        an_expired_or_released_hold_is_never_charged,
        a_cancelled_booking_frees_its_seats_to_be_bought_again,
        buyers_cannot_buy_or_read_what_is_not_theirs,
        recovery_finishes_a_checkout_left_before_its_charge,
        a_simulated_three_d_secure_payment_waits_for_the_buyer_then_books,
        a_purchase_asked_again_says_voided_whichever_path_saw_the_void_first,
    ]
}

pub(crate) async fn hold_for(app: &TestApp, token: &str, show: &str, seats: &[&str]) -> String {
    let hold = app.hold(token, show, seats, None).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    hold.str("hold_id")
}

async fn get(app: &TestApp, path: &str, token: &str) -> Answer {
    app.call(Method::GET, path, Some(token), None, &[]).await
}

/// Awaits a condition with a deadline (no fixed sleeps: it polls).
pub(crate) async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn a_purchase_books_the_seats_at_the_sum_of_their_prices(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("buy", 4, 480).await;
    let alice = app.buyer("alice");
    let hold_id = hold_for(&app, &alice, "buy", &["S2", "S1"]).await;
    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(bought.body["status"], "confirmed");
    assert_eq!(bought.body["amount_cents"], 10_000);
    assert_eq!(bought.body["seats"], json!(["S1", "S2"]));
    assert_eq!(bought.body["hold_id"], json!(hold_id));
    let statuses = app.seat_statuses("buy").await;
    assert_eq!(
        (statuses["S1"].as_str(), statuses["S2"].as_str()),
        ("booked", "booked")
    );

    // Bookings do not expire with the hold.
    app.clock.advance(chrono::Duration::hours(3));
    assert_eq!(app.seat_statuses("buy").await["S1"], "booked");
    let booking = get(
        &app,
        &format!("/v1/bookings/{}", bought.str("booking_id")),
        &alice,
    )
    .await;
    assert_eq!(booking.status, StatusCode::OK);
    assert_eq!(booking.body, bought.body);
    let hold = get(&app, &format!("/v1/holds/{hold_id}"), &alice).await;
    assert_eq!(hold.body["status"], "converted");
    assert_eq!(hold.body["booking_id"], bought.body["booking_id"]);
    let release = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    release.expect_problem(409, "hold_converted");
    let bob = app.buyer("bob");
    app.hold(&bob, "buy", &["S1"], None)
        .await
        .expect_problem(409, "seat_taken");
    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0].charge_id, bought.str("charge_id"));
    assert_eq!(
        (ledger[0].amount_cents, ledger[0].refund_id.as_deref()),
        (10_000, None)
    );
    app.stop().await;
}

async fn retry_storm_gives_one_booking_and_one_charge_per_hold(env: TestEnv) {
    const PURCHASES: usize = 50;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    app.create_show("retry", PURCHASES, 480).await;
    let mut holds = Vec::new();
    for i in 0..PURCHASES {
        let token = app.buyer(&format!("buyer-{i}"));
        let seat = format!("S{}", i + 1);
        let hold_id = hold_for(&app, &token, "retry", &[&seat]).await;
        holds.push((token, hold_id));
    }
    let shared = &app;
    let purchases = holds.iter().map(|(token, hold_id)| async move {
        let app = shared;
        let first = app.purchase(token, hold_id, "pm_sim_ok").await;
        let (second, third) = tokio::join!(
            app.purchase(token, hold_id, "pm_sim_ok"),
            app.purchase(token, hold_id, "pm_sim_ok")
        );
        (first, second, third)
    });
    let answers = futures::future::join_all(purchases).await;
    let mut charges = HashSet::new();
    for (first, second, third) in &answers {
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
        assert_eq!(second.status, StatusCode::OK, "{}", second.body);
        assert_eq!(third.status, StatusCode::OK, "{}", third.body);
        assert_eq!(first.body, second.body, "identical answers");
        assert_eq!(first.body, third.body, "identical answers");
        assert!(charges.insert(first.str("charge_id")));
    }
    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), PURCHASES, "one charge per hold");
    assert!(ledger
        .iter()
        .all(|c| c.outcome == "captured" && c.refund_id.is_none()));
    let ledger_ids: HashSet<String> = ledger.into_iter().map(|c| c.charge_id).collect();
    assert_eq!(ledger_ids, charges);
    let statuses = app.seat_statuses("retry").await;
    assert!(statuses.values().all(|s| s == "booked"));
    app.stop().await;
}

async fn a_payment_that_outlives_its_hold_is_voided_never_captured(env: TestEnv) {
    // Timing-sensitive (a 1-second TTL in real time until the clock moves):
    // keep the storms off the cores meanwhile.
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    app.create_show("late", 2, 1).await;
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let slow_hold = hold_for(&app, &alice, "late", &["S1"]).await;
    let slow = {
        let request = app
            .client
            .post(format!("{}/v1/holds/{slow_hold}/purchase", app.base))
            .bearer_auth(&alice)
            .header("content-type", "application/json")
            .body(json!({"payment_method": "pm_sim_delay_2500"}).to_string());
        tokio::spawn(async move { TestApp::answer(request.send().await.expect("answered")).await })
    };
    // Once alice's purchase is recorded (the authorization is in flight), her hold expires...
    let store = app.store.clone();
    let stream = slow_hold.clone();
    eventually("the purchase to be requested", || {
        let store = store.clone();
        let stream = stream.clone();
        async move {
            !store
                .log()
                .stream_events::<Checkout>(&stream, 0)
                .await
                .unwrap()
                .is_empty()
        }
    })
    .await;
    app.clock.advance(chrono::Duration::milliseconds(1_100));
    // ... and bob holds and buys the seat.
    let bobs_hold = hold_for(&app, &bob, "late", &["S1"]).await;
    let bobs = app.purchase(&bob, &bobs_hold, "pm_sim_ok").await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);

    let alices = slow.await.expect("slow purchase");
    alices.expect_problem(409, "hold_expired");
    assert_eq!(
        (&alices.body["voided"], &alices.body["refunded"]),
        (&json!(true), &json!(false)),
        "the authorization is cancelled: money moves only for a booking"
    );
    let again = app.purchase(&alice, &slow_hold, "pm_sim_ok").await;
    again.expect_problem(409, "hold_expired");
    assert_eq!(again.body["voided"], true, "a retry gets the same answer");

    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), 2, "alice's payment and bob's");
    assert!(
        ledger.iter().all(|c| c.refund_id.is_none()),
        "nothing refunded"
    );
    let captured: Vec<_> = ledger.iter().filter(|c| c.outcome == "captured").collect();
    assert_eq!(captured.len(), 1, "{ledger:?}");
    assert_eq!(
        captured[0].charge_id,
        bobs.str("charge_id"),
        "only bob pays"
    );
    let statuses = app.seat_statuses("late").await;
    assert_eq!(statuses["S1"], "booked");
    let events = app
        .store
        .log()
        .stream_events::<domain::seat::Seat>("late/S1", 0)
        .await
        .unwrap();
    let converted = events
        .iter()
        .filter(|e| e.event_type == "HoldConverted")
        .count();
    assert_eq!(converted, 1, "the seat is booked once, by bob");
    app.stop().await;
}

async fn a_declined_payment_can_be_retried_with_another_method(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("declined", 2, 480).await;
    let alice = app.buyer("alice");
    let hold_id = hold_for(&app, &alice, "declined", &["S1"]).await;
    let declined = app.purchase(&alice, &hold_id, "pm_sim_declined").await;
    declined.expect_problem(402, "payment_declined");
    assert_eq!(
        app.seat_statuses("declined").await["S1"],
        "held",
        "the hold stays"
    );
    let paid = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(paid.status, StatusCode::CREATED, "{}", paid.body);
    let ledger = app.ledger().sim_ledger().await.unwrap();
    let outcomes: Vec<&str> = ledger.iter().map(|c| c.outcome.as_str()).collect();
    assert_eq!(outcomes, ["declined", "captured"]);
    app.stop().await;
}

async fn an_unavailable_provider_charges_nothing_and_a_retry_succeeds(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("down", 2, 480).await;
    let alice = app.buyer("alice");
    let hold_id = hold_for(&app, &alice, "down", &["S1"]).await;
    let down = app.purchase(&alice, &hold_id, "pm_sim_unavailable").await;
    down.expect_problem(503, "payment_unavailable");
    assert!(app.ledger().sim_ledger().await.unwrap().is_empty());
    let paid = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(paid.status, StatusCode::CREATED, "{}", paid.body);
    let bad = app.purchase(&alice, &hold_id, "pm_card_visa").await;
    bad.expect_problem(422, "validation_failed");
    app.stop().await;
}

async fn an_expired_or_released_hold_is_never_charged(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("nocharge", 3, 60).await;
    let alice = app.buyer("alice");
    let released = hold_for(&app, &alice, "nocharge", &["S1"]).await;
    let answer = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{released}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let refused = app.purchase(&alice, &released, "pm_sim_ok").await;
    refused.expect_problem(409, "hold_released");
    assert_eq!(refused.body["refunded"], false);

    let expiring = hold_for(&app, &alice, "nocharge", &["S2"]).await;
    app.clock.advance(chrono::Duration::seconds(61));
    let refused = app.purchase(&alice, &expiring, "pm_sim_ok").await;
    refused.expect_problem(409, "hold_expired");
    assert_eq!(refused.body["refunded"], false);
    assert!(
        app.ledger().sim_ledger().await.unwrap().is_empty(),
        "nothing charged"
    );
    app.purchase(&alice, &uuid::Uuid::new_v4().to_string(), "pm_sim_ok")
        .await
        .expect_problem(404, "hold_not_found");
    app.stop().await;
}

async fn a_cancelled_booking_frees_its_seats_to_be_bought_again(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("cancel", 3, 480).await;
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let hold_id = hold_for(&app, &alice, "cancel", &["S1", "S2"]).await;
    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    let path = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
    let cancelled = app.call(Method::POST, &path, Some(&alice), None, &[]).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["refunded"], true);
    let statuses = app.seat_statuses("cancel").await;
    assert_eq!(
        (statuses["S1"].as_str(), statuses["S2"].as_str()),
        ("available", "available")
    );
    let again = app.call(Method::POST, &path, Some(&alice), None, &[]).await;
    assert_eq!(again.status, StatusCode::OK);
    assert_eq!(
        again.body, cancelled.body,
        "cancelling again: the same answer"
    );

    let bobs_hold = hold_for(&app, &bob, "cancel", &["S1", "S2"]).await;
    let bobs = app.purchase(&bob, &bobs_hold, "pm_sim_ok").await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);
    let ledger = app.ledger().sim_ledger().await.unwrap();
    let refunds = ledger.iter().filter(|c| c.refund_id.is_some()).count();
    assert_eq!((ledger.len(), refunds), (2, 1));
    let read = get(
        &app,
        &format!("/v1/bookings/{}", bought.str("booking_id")),
        &alice,
    )
    .await;
    assert_eq!(read.body["status"], "cancelled");
    app.stop().await;
}

async fn buyers_cannot_buy_or_read_what_is_not_theirs(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("mine", 2, 480).await;
    let alice = app.buyer("alice");
    let mallory = app.buyer("mallory");
    let hold_id = hold_for(&app, &alice, "mine", &["S1"]).await;
    app.purchase(&mallory, &hold_id, "pm_sim_ok")
        .await
        .expect_problem(403, "forbidden");
    assert!(app.ledger().sim_ledger().await.unwrap().is_empty());
    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    let booking = format!("/v1/bookings/{}", bought.str("booking_id"));
    get(&app, &booking, &mallory)
        .await
        .expect_problem(403, "forbidden");
    app.call(
        Method::POST,
        &format!("{booking}/cancel"),
        Some(&mallory),
        None,
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    assert_eq!(
        get(&app, &booking, &app.admin()).await.status,
        StatusCode::OK
    );
    get(
        &app,
        &format!("/v1/bookings/{}", uuid::Uuid::new_v4()),
        &alice,
    )
    .await
    .expect_problem(404, "booking_not_found");
    app.stop().await;
}

/// The state a crash between "purchase requested" and the charge leaves:
/// the Checkout stream's first event, and nothing at the provider.
async fn leave_a_requested_checkout(app: &TestApp, hold_id: &str, buyer: &str, show: &str) {
    let hold = HoldId(hold_id.parse().unwrap());
    let event = CheckoutEvent::PurchaseRequested {
        hold_id: hold,
        show_id: ShowId::parse(show).unwrap(),
        buyer: BuyerId::parse(buyer).unwrap(),
        attempt: 1,
        idempotency_key: Checkout::charge_key(hold, 1),
        payment_method: "pm_sim_ok".into(),
        amount_cents: 5_000,
        // As recorded before currencies: recovery prices it in the default.
        currency: None,
    };
    let mut checkout = Checkout::default();
    checkout.apply_event(&event);
    let mut batch = AppendBatch::new(Utc::now());
    batch.events.push(NewEvent {
        aggregate_type: Checkout::TYPE,
        aggregate_id: hold_id.to_owned(),
        sequence: 1,
        event_type: event.event_type(),
        event_version: event.event_version(),
        payload: serde_json::value::to_raw_value(&event).unwrap(),
        metadata: serde_json::value::RawValue::from_string("{}".into()).unwrap(),
        show_id: domain::ids::ShowId::parse(show).unwrap(),
    });
    batch
        .rows
        .checkouts
        .push(CheckoutRow::of(&checkout, 1, 0).unwrap());
    assert_eq!(
        app.store.log().append(&batch).await.unwrap(),
        AppendOutcome::Appended
    );
}

async fn recovery_finishes_a_checkout_left_before_its_charge(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("recover", 3, 60).await;
    let alice = app.buyer("alice");
    let valid = hold_for(&app, &alice, "recover", &["S1"]).await;
    leave_a_requested_checkout(&app, &valid, "alice", "recover").await;
    let report = app.recovery.run_once().await.unwrap();
    assert_eq!((report.completed, report.refunded), (1, 0), "{report:?}");
    assert_eq!(app.seat_statuses("recover").await["S1"], "booked");
    let retried = app.purchase(&alice, &valid, "pm_sim_ok").await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(retried.str("charge_id"), ledger[0].charge_id);

    // A checkout left while its hold expires: authorized by recovery, then
    // voided (the authorization cancelled, nothing captured).
    let expiring = hold_for(&app, &alice, "recover", &["S2"]).await;
    leave_a_requested_checkout(&app, &expiring, "alice", "recover").await;
    app.clock.advance(chrono::Duration::seconds(61));
    let report = app.recovery.run_once().await.unwrap();
    assert_eq!((report.completed, report.voided), (0, 1), "{report:?}");
    let ledger: BTreeMap<String, (String, Option<String>)> = app
        .ledger()
        .sim_ledger()
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.charge_id, (c.outcome, c.refund_id)))
        .collect();
    let outcomes: Vec<&str> = ledger.values().map(|(o, _)| o.as_str()).collect();
    assert_eq!(
        (
            outcomes.iter().filter(|o| **o == "canceled").count(),
            ledger.values().filter(|(_, r)| r.is_some()).count()
        ),
        (1, 0),
        "{ledger:?}"
    );
    assert_eq!(
        app.recovery.run_once().await.unwrap(),
        Default::default(),
        "nothing left"
    );
    app.stop().await;
}

async fn a_simulated_three_d_secure_payment_waits_for_the_buyer_then_books(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("sim3ds", 2, 480).await;
    let alice = app.buyer("alice");
    let hold_id = hold_for(&app, &alice, "sim3ds", &["S1"]).await;
    let waiting = app.purchase(&alice, &hold_id, "pm_sim_3ds_5000").await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    assert_eq!(waiting.body["status"], "requires_action");
    assert_eq!(waiting.body["next_action"]["type"], "simulated_3ds");
    let payment = waiting.str("payment_intent");
    assert!(!waiting.str("client_secret").is_empty());
    let still = app.purchase(&alice, &hold_id, "pm_sim_3ds_5000").await;
    assert_eq!(
        still.status,
        StatusCode::ACCEPTED,
        "the bank has not answered yet"
    );
    assert_eq!(still.str("payment_intent"), payment, "the same payment");

    app.clock.advance(chrono::Duration::seconds(6));
    let bought = app.purchase(&alice, &hold_id, "pm_sim_3ds_5000").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(bought.str("charge_id"), payment);

    // A buyer who never asks again: recovery finishes it once the bank did.
    let other = hold_for(&app, &alice, "sim3ds", &["S2"]).await;
    let waiting = app.purchase(&alice, &other, "pm_sim_3ds_5000").await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let report = app.recovery.run_once().await.unwrap();
    assert_eq!((report.waiting, report.completed), (1, 0), "{report:?}");
    app.clock.advance(chrono::Duration::seconds(6));
    let report = app.recovery.run_once().await.unwrap();
    assert_eq!(report.completed, 1, "{report:?}");
    assert_eq!(app.seat_statuses("sim3ds").await["S2"], "booked");
    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), 2);
    assert!(ledger.iter().all(|p| p.outcome == "captured"), "{ledger:?}");
    app.stop().await;
}

/// The race an outside run found (1 run in 6 on PostgreSQL): a buyer whose
/// 3-D Secure outlived the hold sends the purchase again just as another
/// process (recovery on another instance) has cancelled the authorization
/// at the provider, before the void is recorded where this one reads. The
/// purchase read the payment `canceled`, recorded a failed attempt (the
/// checkout idle again), and every later answer said `"voided": false`:
/// nothing charged, though an authorization had existed. The checkout's
/// own record must say what happened to it.
async fn a_purchase_asked_again_says_voided_whichever_path_saw_the_void_first(env: TestEnv) {
    use booking::payment::PaymentProvider;
    let app = env.spawn().await;
    app.create_show("race3ds", 2, 60).await;
    let alice = app.buyer("alice");
    let hold_id = hold_for(&app, &alice, "race3ds", &["S1"]).await;
    let waiting = app.purchase(&alice, &hold_id, "pm_sim_3ds_600000").await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    let payment = waiting.str("payment_intent");
    // The buyer's authentication outlives the hold (extended to its cap).
    app.clock.advance(chrono::Duration::seconds(200));
    // Another instance voids it at the provider, under the void's own key.
    let elsewhere = booking::payment::simulator::Simulator::new(
        app.ledger(),
        app.clock.clone(),
        Duration::ZERO,
    );
    let key = Checkout::operation_key(&payment, "cancel");
    elsewhere.cancel(&payment, &key).await.expect("cancelled");

    let again = app.purchase(&alice, &hold_id, "pm_sim_3ds_600000").await;
    again.expect_problem(409, "hold_expired");
    assert_eq!(
        (&again.body["voided"], &again.body["refunded"]),
        (&json!(true), &json!(false)),
        "the authorization was cancelled: the answer says so"
    );
    let once_more = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    once_more.expect_problem(409, "hold_expired");
    assert_eq!(once_more.body["voided"], true, "from the checkout's record");
    let events: Vec<String> = app
        .store
        .log()
        .stream_events::<Checkout>(&hold_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.event_type)
        .collect();
    assert!(
        events.ends_with(&["VoidRequested".to_owned(), "PaymentVoided".to_owned()]),
        "{events:?}"
    );
    assert!(app
        .ledger()
        .sim_ledger()
        .await
        .unwrap()
        .iter()
        .all(|p| p.outcome != "captured"));
    app.stop().await;
}
