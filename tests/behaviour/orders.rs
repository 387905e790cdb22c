//! Orders over HTTP: several holds paid once, all or nothing, cancelled and
//! refunded line by line, each line once.

use std::collections::BTreeSet;

use domain::checkout::Checkout;
use domain::ids::{HoldId, OrderId};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::checkout::{eventually, hold_for};
use crate::support::{fire_at_once, Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        an_order_of_seats_and_places_is_paid_once_and_cancelled_line_by_line,
        a_hold_lost_before_the_order_converts_none_and_charges_nothing,
        a_hold_lost_mid_order_leaves_the_others_as_they_were,
        a_pool_hold_released_while_its_order_pays_is_never_sold,
        concurrent_retries_give_one_order_and_one_payment,
        concurrent_cancellations_refund_each_line_once,
        a_hold_of_an_order_cannot_be_bought_alone,
        the_buyer_cancels_only_inside_the_shows_window,
        a_three_d_secure_order_asks_once_and_completes_when_asked_again,
        bad_order_bodies_are_refused_naming_the_field,
        a_limited_buyer_gets_cancelled_lines_back_in_their_allowance,
        an_order_confirmed_and_cancelled_in_part_is_told_to_webhooks,
        two_pool_holds_of_one_order_give_back_every_place_line_by_line,
        two_instances_make_one_order_and_refund_each_line_once,
    ]
}

async fn hold_places(app: &TestApp, token: &str, show: &str, quantity: u32) -> String {
    let hold = app
        .call(
            Method::POST,
            &format!("/v1/shows/{show}/holds"),
            Some(token),
            Some(&json!({"pool_id": "floor", "quantity": quantity})),
            &[],
        )
        .await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    hold.str("hold_id")
}

async fn order(app: &TestApp, token: &str, holds: &[&str], method: &str) -> Answer {
    app.call(
        Method::POST,
        "/v1/orders",
        Some(token),
        Some(&json!({"holds": holds, "payment_method": method})),
        &[],
    )
    .await
}

async fn cancel(app: &TestApp, token: &str, order_id: &str, body: Value) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/orders/{order_id}/cancel"),
        Some(token),
        Some(&body),
        &[],
    )
    .await
}

fn order_id_of(holds: &[&str]) -> OrderId {
    let holds: Vec<HoldId> = holds
        .iter()
        .map(|h| HoldId(h.parse().expect("a hold id")))
        .collect();
    OrderId::for_holds(&holds)
}

/// The refunds the simulator made of a payment, as `(refund_id, amount)`.
async fn refunds(app: &TestApp, payment_id: &str) -> Vec<(String, i64)> {
    app.ledger()
        .sim_refunds_of(payment_id)
        .await
        .expect("refunds")
}

fn floor_available(availability: &Value) -> i64 {
    availability["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .find(|p| p["pool_id"] == "floor")
        .and_then(|p| p["available"].as_i64())
        .expect("the floor pool")
}

async fn an_order_of_seats_and_places_is_paid_once_and_cancelled_line_by_line(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("family", 6, 480).await;
    let alice = app.buyer("alice");
    let adults = hold_for(&app, &alice, "family", &["S1", "S2"]).await;
    let children = hold_for(&app, &alice, "family", &["S3", "S4"]).await;
    let parking = hold_places(&app, &alice, "family", 2).await;
    let holds = [adults.as_str(), children.as_str(), parking.as_str()];

    let placed = order(&app, &alice, &holds, "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    assert_eq!(placed.body["status"], "confirmed");
    assert_eq!(placed.body["amount_cents"], 4 * 5_000 + 2 * 3_000);
    assert_eq!(placed.body["refunded_cents"], 0);
    assert_eq!(
        placed.body["order_id"],
        json!(order_id_of(&holds).to_string())
    );
    let lines = placed.body["lines"].as_array().expect("lines").clone();
    assert_eq!(lines.len(), 6, "one line per seat and per place");
    let seats: Vec<&Value> = lines.iter().map(|l| &l["seat_id"]).collect();
    assert_eq!(
        seats,
        [
            json!("S1"),
            json!("S2"),
            json!("S3"),
            json!("S4"),
            Value::Null,
            Value::Null
        ]
        .iter()
        .collect::<Vec<_>>()
    );
    assert!(lines.iter().all(|l| l["status"] == "confirmed"));
    let charge_id = placed.str("charge_id");
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(ledger.len(), 1, "one payment for the order: {ledger:?}");
    assert_eq!(ledger[0].amount_cents, 26_000);

    // Each hold reads converted, in the order; the units are sold.
    for hold in holds {
        let read = app
            .call(
                Method::GET,
                &format!("/v1/holds/{hold}"),
                Some(&alice),
                None,
                &[],
            )
            .await;
        assert_eq!(read.body["status"], "converted", "{}", read.body);
        assert_eq!(read.body["order_id"], placed.body["order_id"]);
    }
    let statuses = app.seat_statuses("family").await;
    assert!(["S1", "S2", "S3", "S4"]
        .iter()
        .all(|s| statuses[*s] == "booked"));
    assert_eq!(floor_available(&app.availability("family").await.body), 98);
    let order_id = placed.str("order_id");
    let read = app
        .call(
            Method::GET,
            &format!("/v1/orders/{order_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!((read.status, &read.body), (StatusCode::OK, &placed.body));

    // One child falls ill: their seat and one parking place go back.
    let partial = cancel(&app, &app.admin(), &order_id, json!({"lines": [3, 5]})).await;
    assert_eq!(partial.status, StatusCode::OK, "{}", partial.body);
    assert_eq!(partial.body["status"], "partially_cancelled");
    assert_eq!(partial.body["refunded_cents"], 5_000 + 3_000);
    assert_eq!(partial.body["refunds"].as_array().map(Vec::len), Some(1));
    assert_eq!(partial.body["refunds"][0]["lines"], json!([3, 5]));
    assert_eq!(partial.body["lines"][2]["status"], "cancelled");
    assert_eq!(partial.body["lines"][4]["status"], "cancelled");
    assert_eq!(app.seat_statuses("family").await["S3"], "available");
    assert_eq!(floor_available(&app.availability("family").await.body), 99);
    let again = cancel(&app, &app.admin(), &order_id, json!({"lines": [3, 5]})).await;
    assert_eq!((again.status, &again.body), (StatusCode::OK, &partial.body));

    // Then the rest, with `{}`.
    let all = cancel(&app, &alice, &order_id, json!({})).await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.body);
    assert_eq!(all.body["status"], "cancelled");
    assert_eq!(all.body["refunded_cents"], 26_000);
    assert_eq!(all.body["refunds"][1]["lines"], json!([1, 2, 4, 6]));
    let statuses = app.seat_statuses("family").await;
    assert!(["S1", "S2", "S3", "S4"]
        .iter()
        .all(|s| statuses[*s] == "available"));
    assert_eq!(floor_available(&app.availability("family").await.body), 100);
    let refunded = refunds(&app, &charge_id).await;
    assert_eq!(
        refunded.iter().map(|(_, a)| *a).collect::<Vec<_>>(),
        vec![8_000, 18_000],
        "one partial refund per cancellation, each line once"
    );
    // Seats given back can be bought again by someone else.
    let bob = app.buyer("bob");
    hold_for(&app, &bob, "family", &["S3"]).await;

    // The order's story is in the show's history, and a replay of the log
    // gives the same tables (`booking verify`).
    let history = app
        .call(
            Method::GET,
            "/v1/shows/family/history?limit=1000",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    let told: Vec<&str> = history.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["stream"] == json!(order_id))
        .filter_map(|e| e["type"].as_str())
        .collect();
    for step in [
        "OrderRequested",
        "OrderHoldConverted",
        "CheckoutConverted",
        "CheckoutCompleted",
        "LinesCancelRequested",
        "OrderLinesFreed",
        "LinesCancelled",
    ] {
        assert!(told.contains(&step), "{step} in the history: {told:?}");
    }
    assert_eq!(
        crate::audit::verify_exit_code(&app).0,
        0,
        "verify after orders"
    );
    app.stop().await;
}

async fn a_hold_lost_before_the_order_converts_none_and_charges_nothing(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("lost", 4, 480).await;
    let alice = app.buyer("alice");
    let kept = hold_for(&app, &alice, "lost", &["S1"]).await;
    let released = hold_for(&app, &alice, "lost", &["S2"]).await;
    app.release(&alice, &released).await;
    let refused = order(&app, &alice, &[&kept, &released], "pm_sim_ok").await;
    refused.expect_problem(409, "hold_released");
    assert_eq!(refused.body["holds"], json!([released]));
    assert_eq!(
        refused.body["voided"], false,
        "nothing was asked of the provider"
    );
    assert!(app.ledger().sim_ledger().await.expect("ledger").is_empty());
    assert_eq!(
        app.seat_statuses("lost").await["S1"],
        "held",
        "the kept hold still holds"
    );

    // An expired hold likewise; the other hold can still be bought alone.
    let expiring = hold_for(&app, &alice, "lost", &["S3"]).await;
    app.clock.advance(chrono::Duration::seconds(481));
    let fresh = hold_for(&app, &alice, "lost", &["S4"]).await;
    let refused = order(&app, &alice, &[&fresh, &expiring], "pm_sim_ok").await;
    refused.expect_problem(409, "hold_expired");
    assert_eq!(refused.body["holds"], json!([expiring]));
    let bought = app.purchase(&alice, &fresh, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.stop().await;
}

async fn a_hold_lost_mid_order_leaves_the_others_as_they_were(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    app.create_show("midway", 3, 480).await;
    let alice = app.buyer("alice");
    // The older hold expires first: after 300 s more, only the newer holds.
    let older = hold_for(&app, &alice, "midway", &["S2"]).await;
    app.clock.advance(chrono::Duration::seconds(200));
    let newer = hold_for(&app, &alice, "midway", &["S1"]).await;
    let newer_before = hold_answer(&app, &alice, &newer).await;
    let holds = [newer.as_str(), older.as_str()];
    let slow = spawn_order(&app, &alice, &holds, "pm_sim_delay_1500");
    let stream = order_id_of(&holds).to_string();
    order_requested(&app, &stream).await;
    app.clock.advance(chrono::Duration::seconds(300));
    let answer = slow.await.expect("the order's answer");
    answer.expect_problem(409, "hold_expired");
    assert_eq!(answer.body["holds"], json!([older]));
    assert_eq!(answer.body["voided"], true);
    assert_eq!(answer.body["refunded"], false);

    // Nothing was converted: the newer hold is exactly as it was.
    let events = checkout_event_types(&app, &stream).await;
    assert!(
        !events.iter().any(|e| e == "OrderHoldConverted")
            && events.iter().any(|e| e == "PaymentVoided"),
        "{events:?}"
    );
    assert_eq!(app.seat_statuses("midway").await["S1"], "held");
    let newer_after = hold_answer(&app, &alice, &newer).await;
    assert_eq!(newer_after["status"], "held", "{newer_after}");
    assert_eq!(newer_after["expires_at"], newer_before["expires_at"]);
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert!(
        ledger.iter().all(|c| c.outcome != "captured"),
        "nothing captured: {ledger:?}"
    );
    let again = order(&app, &alice, &holds, "pm_sim_ok").await;
    again.expect_problem(409, "hold_expired");
    assert_eq!(again.body["voided"], true, "asked again: the same answer");
    // The hold left is the buyer's still: bought alone, it converts.
    let bought = app.purchase(&alice, &newer, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.stop().await;
}

async fn a_pool_hold_released_while_its_order_pays_is_never_sold(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let mut show = crate::support::show_body(0, 480);
    show["pools"] = json!([{"pool_id": "floor", "capacity": 6, "price_cents": 2500}]);
    app.create_show_from("small", &show).await;
    let alice = app.buyer("alice");
    let first = hold_places(&app, &alice, "small", 2).await;
    let second = hold_places(&app, &alice, "small", 2).await;
    let first_before = hold_answer(&app, &alice, &first).await;
    let holds = [first.as_str(), second.as_str()];
    let slow = spawn_order(&app, &alice, &holds, "pm_sim_delay_2500");
    order_requested(&app, &order_id_of(&holds).to_string()).await;
    let released = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{second}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT, "{}", released.body);

    let answer = slow.await.expect("the order's answer");
    answer.expect_problem(409, "hold_released");
    assert_eq!(answer.body["holds"], json!([second]));
    assert_eq!(answer.body["voided"], true);
    let availability = app.availability("small").await.body;
    assert_eq!(floor_available(&availability), 4, "{availability}");
    let pool = &availability["pools"][0];
    assert_eq!(pool["sold"], 0, "nothing sold: {availability}");
    let first_after = hold_answer(&app, &alice, &first).await;
    assert_eq!(first_after["status"], "held", "{first_after}");
    assert_eq!(first_after["expires_at"], first_before["expires_at"]);
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert!(
        ledger.iter().all(|c| c.outcome != "captured"),
        "nothing charged: {ledger:?}"
    );
    app.stop().await;
}

/// An order of `holds` sent in the background.
fn spawn_order(
    app: &TestApp,
    token: &str,
    holds: &[&str],
    method: &str,
) -> tokio::task::JoinHandle<Answer> {
    let request = app
        .client
        .post(format!("{}/v1/orders", app.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(json!({"holds": holds, "payment_method": method}).to_string());
    tokio::spawn(async move { TestApp::answer(request.send().await.expect("answered")).await })
}

/// Awaits the order's request on its stream (its payment in flight).
async fn order_requested(app: &TestApp, stream: &str) {
    let store = app.store.clone();
    eventually("the order to be requested", || {
        let (store, stream) = (store.clone(), stream.to_owned());
        async move {
            !store
                .log()
                .stream_events::<Checkout>(&stream, 0)
                .await
                .expect("events")
                .is_empty()
        }
    })
    .await;
}

async fn checkout_event_types(app: &TestApp, stream: &str) -> Vec<String> {
    app.store
        .log()
        .stream_events::<Checkout>(stream, 0)
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.event_type)
        .collect()
}

async fn hold_answer(app: &TestApp, token: &str, hold: &str) -> Value {
    let read = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold}"),
            Some(token),
            None,
            &[],
        )
        .await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    read.body
}

async fn concurrent_retries_give_one_order_and_one_payment(env: TestEnv) {
    const RETRIES: usize = 10;
    let app = env.spawn().await;
    app.create_show("storm", 6, 480).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "storm", &["S1", "S2"]).await;
    let b = hold_for(&app, &alice, "storm", &["S3"]).await;
    let c = hold_places(&app, &alice, "storm", 3).await;
    let calls = (0..RETRIES)
        .map(|i| {
            // Half name the holds in another order: the same order still.
            let holds = if i % 2 == 0 {
                json!([a, b, c])
            } else {
                json!([c, a, b])
            };
            let request = app
                .client
                .post(format!("{}/v1/orders", app.base))
                .bearer_auth(&alice)
                .header("content-type", "application/json")
                .body(json!({"holds": holds, "payment_method": "pm_sim_delay_50"}).to_string());
            async move { TestApp::answer(request.send().await.expect("answered")).await }
        })
        .collect();
    let answers = fire_at_once(calls).await;
    let mut created = 0;
    let mut orders = BTreeSet::new();
    for answer in &answers {
        match answer.status {
            StatusCode::CREATED => created += 1,
            StatusCode::OK => {}
            // A retry that found the order mid-payment may be told to retry.
            StatusCode::SERVICE_UNAVAILABLE => {
                answer.expect_problem(503, "busy");
                continue;
            }
            other => panic!("{other}: {}", answer.body),
        }
        orders.insert((answer.str("order_id"), answer.str("charge_id")));
    }
    assert_eq!(created, 1, "one request confirmed it");
    assert_eq!(orders.len(), 1, "one order, one charge: {orders:?}");
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(ledger.len(), 1, "one payment: {ledger:?}");
    app.stop().await;
}

async fn concurrent_cancellations_refund_each_line_once(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("refunds", 8, 480).await;
    let alice = app.buyer("alice");
    let seats = hold_for(&app, &alice, "refunds", &["S1", "S2", "S3", "S4"]).await;
    let places = hold_places(&app, &alice, "refunds", 4).await;
    let placed = order(&app, &alice, &[&seats, &places], "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    let order_id = placed.str("order_id");
    let admin = app.admin();
    // Overlapping requests: every line is asked for by several.
    let asks = [
        json!({"lines": [1, 2]}),
        json!({"lines": [2, 3]}),
        json!({"lines": [1, 2]}),
        json!({"lines": [5, 6, 7]}),
        json!({"lines": [7, 8]}),
        json!({"lines": [3, 4, 8]}),
        json!({}),
        json!({"lines": [1]}),
    ];
    let calls = asks
        .iter()
        .map(|body| {
            let request = app
                .client
                .post(format!("{}/v1/orders/{order_id}/cancel", app.base))
                .bearer_auth(&admin)
                .header("content-type", "application/json")
                .body(body.to_string());
            async move { TestApp::answer(request.send().await.expect("answered")).await }
        })
        .collect();
    for answer in fire_at_once(calls).await {
        assert!(
            answer.status == StatusCode::OK || answer.code() == Some("busy"),
            "{}: {}",
            answer.status,
            answer.body
        );
    }
    // Whatever raced, the order ends with every line refunded once.
    let last = cancel(&app, &admin, &order_id, json!({})).await;
    assert_eq!(last.status, StatusCode::OK, "{}", last.body);
    assert_eq!(last.body["status"], "cancelled");
    assert_eq!(last.body["refunded_cents"], 4 * 5_000 + 4 * 3_000);
    let mut refunded_lines: Vec<u64> = last.body["refunds"]
        .as_array()
        .expect("refunds")
        .iter()
        .flat_map(|r| r["lines"].as_array().expect("lines").clone())
        .map(|l| l.as_u64().expect("a line id"))
        .collect();
    refunded_lines.sort_unstable();
    assert_eq!(
        refunded_lines,
        (1..=8).collect::<Vec<u64>>(),
        "each line once"
    );
    let at_provider = refunds(&app, &placed.str("charge_id")).await;
    assert_eq!(
        at_provider.len(),
        last.body["refunds"].as_array().map_or(0, Vec::len),
        "one refund at the provider per cancellation"
    );
    assert_eq!(at_provider.iter().map(|(_, a)| a).sum::<i64>(), 32_000);
    assert_eq!(
        floor_available(&app.availability("refunds").await.body),
        100
    );
    app.stop().await;
}

async fn a_hold_of_an_order_cannot_be_bought_alone(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("alone", 4, 480).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "alone", &["S1"]).await;
    let b = hold_for(&app, &alice, "alone", &["S2"]).await;
    let placed = order(&app, &alice, &[&a, &b], "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    app.purchase(&alice, &a, "pm_sim_ok")
        .await
        .expect_problem(409, "hold_converted");
    // Nor put in another order.
    let c = hold_for(&app, &alice, "alone", &["S3"]).await;
    let other = order(&app, &alice, &[&a, &c], "pm_sim_ok").await;
    other.expect_problem(409, "hold_converted");
    assert_eq!(other.body["holds"], json!([a]));
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(ledger.len(), 1, "only the order paid: {ledger:?}");
    assert_eq!(app.seat_statuses("alone").await["S3"], "held");

    // A purchase of a hold already paying when an order takes that hold:
    // the order books it first, the purchase's authorization is voided.
    let d = hold_for(&app, &alice, "alone", &["S4"]).await;
    let slow = {
        let request = app
            .client
            .post(format!("{}/v1/holds/{d}/purchase", app.base))
            .bearer_auth(&alice)
            .header("content-type", "application/json")
            .body(json!({"payment_method": "pm_sim_delay_1500"}).to_string());
        tokio::spawn(async move { TestApp::answer(request.send().await.expect("answered")).await })
    };
    let store = app.store.clone();
    let stream = d.clone();
    eventually("the purchase to be requested", || {
        let (store, stream) = (store.clone(), stream.clone());
        async move {
            !store
                .log()
                .stream_events::<Checkout>(&stream, 0)
                .await
                .expect("events")
                .is_empty()
        }
    })
    .await;
    let first = order(&app, &alice, &[&c, &d], "pm_sim_ok").await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let late = slow.await.expect("the purchase's answer");
    late.expect_problem(409, "hold_converted");
    assert_eq!(late.body["voided"], true, "{}", late.body);
    let captured = app
        .ledger()
        .sim_ledger()
        .await
        .expect("ledger")
        .into_iter()
        .filter(|p| p.outcome == "captured")
        .count();
    assert_eq!(
        captured, 2,
        "the two orders; the purchase's authorization voided"
    );
    app.stop().await;
}

async fn the_buyer_cancels_only_inside_the_shows_window(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = crate::support::show_body(4, 480);
    let until = app.clock_now() + chrono::Duration::hours(1);
    body["buyer_cancellation_until"] = json!(until);
    app.create_show_from("window", &body).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "window", &["S1", "S2", "S3"]).await;
    let placed = order(&app, &alice, &[&a], "pm_sim_ok").await;
    let order_id = placed.str("order_id");
    let inside = cancel(&app, &alice, &order_id, json!({"lines": [1]})).await;
    assert_eq!(inside.status, StatusCode::OK, "{}", inside.body);
    app.clock.advance(chrono::Duration::hours(2));
    cancel(&app, &alice, &order_id, json!({"lines": [2]}))
        .await
        .expect_problem(409, "cancellation_closed");
    let bob = app.buyer("bob");
    cancel(&app, &bob, &order_id, json!({"lines": [2]}))
        .await
        .expect_problem(403, "forbidden");
    let by_admin = cancel(&app, &app.admin(), &order_id, json!({"lines": [2]})).await;
    assert_eq!(by_admin.status, StatusCode::OK, "{}", by_admin.body);
    assert_eq!(by_admin.body["refunded_cents"], 10_000);
    app.stop().await;
}

async fn a_three_d_secure_order_asks_once_and_completes_when_asked_again(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("secure", 4, 480).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "secure", &["S1"]).await;
    let b = hold_places(&app, &alice, "secure", 2).await;
    let waiting = order(&app, &alice, &[&a, &b], "pm_sim_3ds_1000").await;
    assert_eq!(waiting.status, StatusCode::ACCEPTED, "{}", waiting.body);
    assert_eq!(waiting.body["status"], "requires_action");
    let order_id = waiting.str("order_id");
    // Asked again before the buyer finished: still waiting, the same payment.
    let again = order(&app, &alice, &[&a, &b], "pm_sim_3ds_1000").await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.body);
    assert_eq!(again.body["payment_intent"], waiting.body["payment_intent"]);
    app.clock.advance(chrono::Duration::seconds(2));
    let done = order(&app, &alice, &[&a, &b], "pm_sim_3ds_1000").await;
    assert_eq!(done.status, StatusCode::CREATED, "{}", done.body);
    assert_eq!(done.body["order_id"], json!(order_id));
    assert_eq!(done.body["amount_cents"], 5_000 + 2 * 3_000);
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(
        ledger.len(),
        1,
        "one payment, one authentication: {ledger:?}"
    );
    app.stop().await;
}

async fn bad_order_bodies_are_refused_naming_the_field(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("bad", 4, 480).await;
    app.create_show("other", 4, 480).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "bad", &["S1"]).await;
    let elsewhere = hold_for(&app, &alice, "other", &["S1"]).await;
    let too_many: Vec<String> = (0..21).map(|_| HoldId::random().to_string()).collect();
    let cases = [
        (json!({"holds": [], "payment_method": "pm_sim_ok"}), "holds"),
        (
            json!({"holds": too_many, "payment_method": "pm_sim_ok"}),
            "holds",
        ),
        (
            json!({"holds": ["nope"], "payment_method": "pm_sim_ok"}),
            "holds",
        ),
        (
            json!({"holds": [a, a], "payment_method": "pm_sim_ok"}),
            "holds",
        ),
        (
            json!({"holds": [a, elsewhere], "payment_method": "pm_sim_ok"}),
            "holds",
        ),
        (json!({"holds": [a]}), "payment_method"),
        (
            json!({"holds": [a], "payment_method": "cash"}),
            "payment_method",
        ),
        (json!({"holds": a, "payment_method": "pm_sim_ok"}), "holds"),
        (
            json!({"holds": [a], "payment_method": "pm_sim_ok", "tip": 1}),
            "tip",
        ),
    ];
    for (body, field) in cases {
        let answer = app
            .call(Method::POST, "/v1/orders", Some(&alice), Some(&body), &[])
            .await;
        answer.expect_problem(422, "validation_failed");
        let detail = answer.str("detail");
        assert!(
            detail.contains(field),
            "{body}: {detail} should name {field}"
        );
    }
    let bob = app.buyer("bob");
    order(&app, &bob, &[&a], "pm_sim_ok")
        .await
        .expect_problem(403, "forbidden");
    let unknown = HoldId::random().to_string();
    order(&app, &alice, &[&unknown], "pm_sim_ok")
        .await
        .expect_problem(404, "hold_not_found");
    assert!(app.ledger().sim_ledger().await.expect("ledger").is_empty());
    assert_eq!(
        app.seat_statuses("bad").await["S1"],
        "held",
        "nothing changed"
    );

    let placed = order(&app, &alice, &[&a], "pm_sim_ok").await;
    let order_id = placed.str("order_id");
    let admin = app.admin();
    cancel(&app, &admin, &order_id, json!({"lines": [2]}))
        .await
        .expect_problem(422, "unknown_line");
    let wrong = cancel(&app, &admin, &order_id, json!({"lines": ["one"]})).await;
    wrong.expect_problem(422, "validation_failed");
    assert!(wrong.str("detail").contains("lines"), "{}", wrong.body);
    let unknown_order = OrderId::for_holds(&[HoldId::random()]).to_string();
    cancel(&app, &admin, &unknown_order, json!({}))
        .await
        .expect_problem(404, "order_not_found");
    app.call(
        Method::GET,
        &format!("/v1/orders/{unknown_order}"),
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(404, "order_not_found");
    let read = app
        .call(
            Method::GET,
            &format!("/v1/orders/{order_id}"),
            Some(&admin),
            None,
            &[],
        )
        .await;
    assert_eq!(read.body["status"], "confirmed", "nothing was cancelled");
    app.stop().await;
}

async fn a_limited_buyer_gets_cancelled_lines_back_in_their_allowance(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = crate::support::show_body(6, 480);
    body["max_seats_per_buyer"] = json!(4);
    app.create_show_from("limited", &body).await;
    let alice = app.buyer("alice");
    let seats = hold_for(&app, &alice, "limited", &["S1", "S2"]).await;
    let places = hold_places(&app, &alice, "limited", 2).await;
    let placed = order(&app, &alice, &[&seats, &places], "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    app.hold(&alice, "limited", &["S3"], None)
        .await
        .expect_problem(409, "buyer_limit_reached");
    let order_id = placed.str("order_id");
    let partial = cancel(&app, &alice, &order_id, json!({"lines": [2, 4]})).await;
    assert_eq!(partial.status, StatusCode::OK, "{}", partial.body);
    // Two units back: two more seats may be held, not three.
    app.hold(&alice, "limited", &["S3", "S4", "S5"], None)
        .await
        .expect_problem(409, "buyer_limit_reached");
    hold_for(&app, &alice, "limited", &["S3", "S4"]).await;
    app.stop().await;
}

async fn an_order_confirmed_and_cancelled_in_part_is_told_to_webhooks(env: TestEnv) {
    use crate::receiver::{Mode, Receiver};
    use crate::webhooks::{quick, register, WAIT};
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    register(&app, &receiver.url, &["order.confirmed", "order.cancelled"]).await;
    app.create_show("told", 4, 480).await;
    let alice = app.buyer("alice");
    let a = hold_for(&app, &alice, "told", &["S1", "S2"]).await;
    let b = hold_places(&app, &alice, "told", 1).await;
    let placed = order(&app, &alice, &[&a, &b], "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    let order_id = placed.str("order_id");
    let partial = cancel(&app, &app.admin(), &order_id, json!({"lines": [2]})).await;
    assert_eq!(partial.status, StatusCode::OK, "{}", partial.body);
    let requests = receiver
        .wait_for("two order events", WAIT, |r| r.len() >= 2)
        .await;
    let confirmed = requests
        .iter()
        .find(|r| r.event_type() == "order.confirmed")
        .expect("order.confirmed")
        .json();
    assert_eq!(
        confirmed["data"], placed.body,
        "the order as the API showed it"
    );
    let cancelled = requests
        .iter()
        .find(|r| r.event_type() == "order.cancelled")
        .expect("order.cancelled")
        .json();
    assert_eq!(cancelled["data"]["status"], "partially_cancelled");
    assert_eq!(cancelled["data"]["lines"], partial.body["lines"]);
    assert_eq!(cancelled["data"]["refund"]["lines"], json!([2]));
    assert_eq!(cancelled["data"]["refund"]["amount_cents"], 5_000);
    assert_eq!(
        cancelled["data"]["refund"]["refund_id"],
        partial.body["refunds"][0]["refund_id"]
    );
    assert!(
        requests
            .iter()
            .all(|r| !r.event_type().starts_with("booking.")),
        "an order is not a booking"
    );
    app.stop().await;
}

async fn two_pool_holds_of_one_order_give_back_every_place_line_by_line(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = crate::support::show_body(2, 480);
    body["pools"] =
        json!([{"pool_id": "floor", "capacity": 100, "price_cents": 3000, "shards": 4}]);
    app.create_show_from("places", &body).await;
    let alice = app.buyer("alice");
    let two = hold_places(&app, &alice, "places", 2).await;
    let three = hold_places(&app, &alice, "places", 3).await;
    let placed = order(&app, &alice, &[&two, &three], "pm_sim_ok").await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    assert_eq!(floor_available(&app.availability("places").await.body), 95);
    let order_id = placed.str("order_id");
    // The second hold's places first, then the first's, one line at a time.
    for line in [5, 4, 3, 2, 1] {
        let answer = cancel(&app, &app.admin(), &order_id, json!({"lines": [line]})).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    assert_eq!(floor_available(&app.availability("places").await.body), 100);
    let read = app
        .call(
            Method::GET,
            &format!("/v1/orders/{order_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(read.body["status"], "cancelled");
    assert_eq!(read.body["refunded_cents"], 5 * 3_000);
    assert_eq!(crate::audit::verify_exit_code(&app).0, 0, "verify");
    app.stop().await;
}

/// Two instances on one database (two replicas behind a balancer): their
/// in-process locks do not see each other, the streams' versions decide.
async fn two_instances_make_one_order_and_refund_each_line_once(env: TestEnv) {
    const EACH: usize = 5;
    let (first, second) = env.spawn_pair().await;
    first.create_show("pair", 6, 480).await;
    let alice = first.buyer("alice");
    let a = hold_for(&first, &alice, "pair", &["S1", "S2"]).await;
    let b = hold_for(&second, &alice, "pair", &["S3"]).await;
    let c = hold_places(&second, &alice, "pair", 2).await;
    let holds = [a.as_str(), b.as_str(), c.as_str()];
    let body = json!({"holds": holds, "payment_method": "pm_sim_delay_30"}).to_string();
    let calls = (0..2 * EACH)
        .map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            let request = app
                .client
                .post(format!("{}/v1/orders", app.base))
                .bearer_auth(&alice)
                .header("content-type", "application/json")
                .body(body.clone());
            async move { TestApp::answer(request.send().await.expect("answered")).await }
        })
        .collect();
    let answers = fire_at_once(calls).await;
    let mut charges = BTreeSet::new();
    for answer in &answers {
        if answer.status.is_success() {
            charges.insert(answer.str("charge_id"));
        } else {
            answer.expect_problem(503, "busy");
        }
    }
    assert_eq!(charges.len(), 1, "one order, one charge: {charges:?}");
    let ledger = first.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(ledger.len(), 1, "one payment: {ledger:?}");
    // Settled, whichever instance is asked.
    let read = order(&second, &alice, &holds, "pm_sim_ok").await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    let order_id = read.str("order_id");

    // Overlapping cancellations on both instances: each line once.
    let admin = first.admin();
    let asks = [
        json!({"lines": [1, 2]}),
        json!({"lines": [2, 3]}),
        json!({"lines": [3, 4]}),
        json!({}),
    ];
    let calls = asks
        .iter()
        .enumerate()
        .map(|(i, ask)| {
            let app = if i % 2 == 0 { &first } else { &second };
            let request = app
                .client
                .post(format!("{}/v1/orders/{order_id}/cancel", app.base))
                .bearer_auth(&admin)
                .header("content-type", "application/json")
                .body(ask.to_string());
            async move { TestApp::answer(request.send().await.expect("answered")).await }
        })
        .collect();
    for answer in fire_at_once(calls).await {
        assert!(
            answer.status == StatusCode::OK || answer.code() == Some("busy"),
            "{}",
            answer.body
        );
    }
    let last = cancel(&second, &admin, &order_id, json!({})).await;
    assert_eq!(last.status, StatusCode::OK, "{}", last.body);
    assert_eq!(last.body["status"], "cancelled");
    assert_eq!(last.body["refunded_cents"], 3 * 5_000 + 2 * 3_000);
    let refunded = refunds(&first, &read.str("charge_id")).await;
    assert_eq!(
        refunded.iter().map(|(_, a)| a).sum::<i64>(),
        21_000,
        "each line once"
    );
    assert_eq!(
        refunded.len(),
        last.body["refunds"].as_array().map_or(0, Vec::len),
        "one provider refund per cancellation"
    );
    first.stop().await;
    second.stop().await;
}
