//! The per-buyer limit (`max_seats_per_buyer`): exact under concurrency and
//! across instances, counting seats and pool places, given back by release,
//! expiry and cancellation, kept by purchases.

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{fire_at_once, show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        limit_follows_an_extended_hold_past_its_first_expiry,
        limit_is_exact_for_20_concurrent_holds_of_one_buyer,
        limit_is_exact_across_two_instances_on_one_database,
        limit_counts_pool_places_with_seats,
        limit_given_back_by_release,
        limit_given_back_by_expiry_at_read_time_and_when_recorded,
        limit_keeps_counting_purchases_after_the_ttl_until_cancelled,
        limit_does_not_count_an_idempotent_retry_twice,
        limit_is_validated_read_back_and_absent_means_none,
        limit_stream_loads_through_cqrs_es_and_decides_as_the_service_does,
    ]
}

const LIMIT: u32 = 6;

/// A show of `seats` seats and the 100-place pool "floor", with the limit.
async fn limited_show(app: &TestApp, show_id: &str, seats: usize, ttl: u32, limit: u32) {
    let mut body = show_body(seats, ttl);
    body["max_seats_per_buyer"] = json!(limit);
    app.create_show_from(show_id, &body).await;
}

fn seats(from: usize, n: usize) -> Vec<String> {
    (from..from + n).map(|i| format!("S{i}")).collect()
}

async fn hold(app: &TestApp, token: &str, show: &str, body: Value) -> Answer {
    app.hold_call(token.to_owned(), show, body).await
}

fn expect_limit(answer: &Answer, current: u32) {
    answer.expect_problem(409, "buyer_limit_reached");
    assert_eq!(answer.body["limit"], LIMIT, "{}", answer.body);
    assert_eq!(answer.body["current"], current, "{}", answer.body);
}

fn outcomes(answers: &[Answer]) -> BTreeMap<(u16, Option<String>), usize> {
    let mut by = BTreeMap::new();
    for a in answers {
        *by.entry((a.status.as_u16(), a.code().map(str::to_owned)))
            .or_default() += 1;
    }
    by
}

/// 20 holds of 2 distinct seats each, fired at once over `apps` in turn:
/// exactly LIMIT / 2 succeed, the rest are refused with the full count.
async fn twenty_holds_at_once(apps: &[&TestApp], show: &str) {
    let token = apps[0].buyer("alice");
    let answers = fire_at_once(
        (0..20)
            .map(|i| {
                let app = apps[i % apps.len()];
                app.hold_call(token.clone(), show, json!({ "seats": seats(1 + 2 * i, 2) }))
            })
            .collect(),
    )
    .await;
    let expected = BTreeMap::from([
        ((201, None), 3),
        ((409, Some("buyer_limit_reached".to_owned())), 17),
    ]);
    assert_eq!(outcomes(&answers), expected);
    for refused in answers.iter().filter(|a| a.status == StatusCode::CONFLICT) {
        // Refused only when 2 more would pass 6: the buyer has all 6.
        expect_limit(refused, LIMIT);
    }
    let statuses = apps[0].seat_statuses(show).await;
    let held = statuses.values().filter(|s| *s == "held").count();
    assert_eq!(held, LIMIT as usize, "exactly the limit is held");

    // Another buyer is unaffected by alice's allowance.
    let bob = apps[0].buyer("bob");
    let bobs = hold(apps[0], &bob, show, json!({ "seats": seats(41, 6) })).await;
    assert_eq!(bobs.status, StatusCode::CREATED, "{}", bobs.body);
    let more = hold(apps[0], &bob, show, json!({ "seats": seats(47, 1) })).await;
    expect_limit(&more, LIMIT);
}

async fn limit_is_exact_for_20_concurrent_holds_of_one_buyer(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limit20", 50, 480, LIMIT).await;
    twenty_holds_at_once(&[&app], "limit20").await;
}

async fn limit_is_exact_across_two_instances_on_one_database(env: TestEnv) {
    let (a, b) = env.spawn_pair().await;
    limited_show(&a, "limit2x", 50, 480, LIMIT).await;
    twenty_holds_at_once(&[&a, &b], "limit2x").await;
}

async fn limit_counts_pool_places_with_seats(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitpool", 10, 480, LIMIT).await;
    let alice = app.buyer("alice");
    let places = |quantity: u32| json!({ "pool_id": "floor", "quantity": quantity });
    let first = hold(&app, &alice, "limitpool", places(4)).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    expect_limit(&hold(&app, &alice, "limitpool", places(3)).await, 4);
    expect_limit(
        &hold(&app, &alice, "limitpool", json!({ "seats": seats(1, 3) })).await,
        4,
    );
    let two = hold(&app, &alice, "limitpool", json!({ "seats": seats(1, 2) })).await;
    assert_eq!(two.status, StatusCode::CREATED, "{}", two.body);
    expect_limit(&hold(&app, &alice, "limitpool", places(1)).await, LIMIT);
    // Nothing of a refused hold was taken.
    let statuses = app.seat_statuses("limitpool").await;
    assert_eq!(statuses.values().filter(|s| *s == "held").count(), 2);
}

async fn limit_given_back_by_release(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitrel", 20, 480, LIMIT).await;
    let alice = app.buyer("alice");
    let first = hold(&app, &alice, "limitrel", json!({ "seats": seats(1, 6) })).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    expect_limit(
        &hold(&app, &alice, "limitrel", json!({ "seats": seats(7, 1) })).await,
        LIMIT,
    );
    let path = format!("/v1/holds/{}", first.str("hold_id"));
    let released = app
        .call(Method::DELETE, &path, Some(&alice), None, &[])
        .await;
    assert!(released.status.is_success(), "{}", released.body);
    let again = hold(&app, &alice, "limitrel", json!({ "seats": seats(7, 6) })).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    expect_limit(
        &hold(&app, &alice, "limitrel", json!({ "seats": seats(13, 1) })).await,
        LIMIT,
    );
}

async fn limit_given_back_by_expiry_at_read_time_and_when_recorded(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitexp", 30, 60, LIMIT).await;
    let alice = app.buyer("alice");
    let first = hold(&app, &alice, "limitexp", json!({ "seats": seats(1, 6) })).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    expect_limit(
        &hold(&app, &alice, "limitexp", json!({ "seats": seats(7, 1) })).await,
        LIMIT,
    );
    // Past the TTL, with no sweep: the expired hold no longer counts.
    app.clock.advance(chrono::Duration::seconds(61));
    let second = hold(&app, &alice, "limitexp", json!({ "seats": seats(7, 4) })).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    // Recording the expiry returns the first hold's allowance and nothing more.
    app.sweeper.run_once().await.unwrap();
    expect_limit(
        &hold(&app, &alice, "limitexp", json!({ "seats": seats(11, 3) })).await,
        4,
    );
    let third = hold(&app, &alice, "limitexp", json!({ "seats": seats(11, 2) })).await;
    assert_eq!(third.status, StatusCode::CREATED, "{}", third.body);
    app.clock.advance(chrono::Duration::seconds(61));
    app.sweeper.run_once().await.unwrap();
    let fourth = hold(&app, &alice, "limitexp", json!({ "seats": seats(13, 6) })).await;
    assert_eq!(fourth.status, StatusCode::CREATED, "{}", fourth.body);
}

async fn limit_keeps_counting_purchases_after_the_ttl_until_cancelled(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitbuy", 30, 60, LIMIT).await;
    let alice = app.buyer("alice");
    let held = hold(&app, &alice, "limitbuy", json!({ "seats": seats(1, 2) })).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let bought = app
        .purchase(&alice, &held.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.clock.advance(chrono::Duration::seconds(120));
    app.sweeper.run_once().await.unwrap();
    expect_limit(
        &hold(&app, &alice, "limitbuy", json!({ "seats": seats(3, 5) })).await,
        2,
    );
    let four = hold(&app, &alice, "limitbuy", json!({ "seats": seats(3, 4) })).await;
    assert_eq!(four.status, StatusCode::CREATED, "{}", four.body);
    expect_limit(
        &hold(
            &app,
            &alice,
            "limitbuy",
            json!({ "pool_id": "floor", "quantity": 1 }),
        )
        .await,
        LIMIT,
    );
    // Cancelling the booking gives its two seats back.
    let path = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
    let cancelled = app.call(Method::POST, &path, Some(&alice), None, &[]).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let places = json!({ "pool_id": "floor", "quantity": 2 });
    let after = hold(&app, &alice, "limitbuy", places).await;
    assert_eq!(after.status, StatusCode::CREATED, "{}", after.body);
    expect_limit(
        &hold(&app, &alice, "limitbuy", json!({ "seats": seats(20, 1) })).await,
        LIMIT,
    );
    // The allowance has no read model: the projector passes its events by
    // and verify finds every table equal to the log.
    app.projector.run_once().await.unwrap();
    let (code, report) = crate::audit::verify_exit_code(&app);
    assert_eq!(code, 0, "verify: {report}");
}

async fn limit_does_not_count_an_idempotent_retry_twice(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitkey", 20, 480, LIMIT).await;
    let alice = app.buyer("alice");
    let ask = || {
        let request = app
            .client
            .post(format!("{}/v1/shows/limitkey/holds", app.base))
            .bearer_auth(alice.clone())
            .header("content-type", "application/json")
            .header("idempotency-key", "k-1")
            .body(json!({ "seats": seats(1, 6) }).to_string());
        async move { TestApp::answer(request.send().await.expect("answered")).await }
    };
    let answers = fire_at_once((0..8).map(|_| ask()).collect()).await;
    let ids: std::collections::BTreeSet<String> = answers
        .iter()
        .map(|a| {
            assert!(a.status.is_success(), "{}", a.body);
            a.str("hold_id")
        })
        .collect();
    assert_eq!(ids.len(), 1, "one hold for one key");
    let serial = ask().await;
    assert_eq!(serial.status, StatusCode::OK, "{}", serial.body);
    expect_limit(
        &hold(&app, &alice, "limitkey", json!({ "seats": seats(7, 1) })).await,
        LIMIT,
    );
}

async fn limit_is_validated_read_back_and_absent_means_none(env: TestEnv) {
    let app = env.spawn().await;
    for bad in [json!(0), json!(1001), json!(-1), json!("6")] {
        let mut body = show_body(3, 480);
        body["max_seats_per_buyer"] = bad.clone();
        let answer = app
            .call(
                Method::PUT,
                "/v1/shows/limitbad",
                Some(&app.admin()),
                Some(&body),
                &[],
            )
            .await;
        assert_eq!(answer.status.as_u16(), 422, "{bad}: {}", answer.body);
    }
    limited_show(&app, "limitread", 3, 480, 1000).await;
    let read = app
        .call(Method::GET, "/v1/shows/limitread", None, None, &[])
        .await;
    assert_eq!(read.body["max_seats_per_buyer"], 1000, "{}", read.body);
    // A show without a limit has no such field and no limit.
    app.create_show("nolimit", 30, 480).await;
    let read = app
        .call(Method::GET, "/v1/shows/nolimit", None, None, &[])
        .await;
    assert!(
        read.body.get("max_seats_per_buyer").is_none(),
        "{}",
        read.body
    );
    let alice = app.buyer("alice");
    for i in 0..3 {
        let many = hold(
            &app,
            &alice,
            "nolimit",
            json!({ "seats": seats(1 + 10 * i, 10) }),
        )
        .await;
        assert_eq!(many.status, StatusCode::CREATED, "{}", many.body);
    }
}

async fn limit_stream_loads_through_cqrs_es_and_decides_as_the_service_does(env: TestEnv) {
    use domain::aggregate::Timed;
    use domain::allowance::{allowance_stream_id, Allowance, AllowanceCommand, AllowanceError};
    use domain::ids::{BuyerId, HoldId, ShowId};

    let app = env.spawn().await;
    limited_show(&app, "limitcqrs", 10, 480, LIMIT).await;
    let alice = app.buyer("alice");
    let held = hold(&app, &alice, "limitcqrs", json!({ "seats": seats(1, 4) })).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let stream = allowance_stream_id(
        &ShowId::parse("limitcqrs").unwrap(),
        &BuyerId::parse("alice").unwrap(),
    );
    let db = crate::cqrs::Db::open(env.backend, &app.database_url).await;
    let loaded = db.load::<Allowance>(&stream).await;
    let now = app.clock_now();
    assert_eq!(loaded.aggregate.in_use_at(now), 4);
    assert_eq!(loaded.current_sequence, 1);
    let take = |units| Timed {
        command: AllowanceCommand::Take {
            hold_id: HoldId(uuid::Uuid::new_v4()),
            units,
            expires_at: now + chrono::Duration::seconds(60),
            limit: LIMIT,
        },
        now,
    };
    assert_eq!(
        crate::cqrs::handle(&loaded.aggregate, take(3)).await,
        Err(AllowanceError::LimitReached {
            limit: LIMIT,
            current: 4
        })
    );
    expect_limit(
        &hold(&app, &alice, "limitcqrs", json!({ "seats": seats(5, 3) })).await,
        4,
    );
    assert_eq!(
        crate::cqrs::handle(&loaded.aggregate, take(2))
            .await
            .map(|e| e.len()),
        Ok(1)
    );
    db.close().await;
}

/// An extension moves the hold's expiry on the allowance too: the extended
/// hold keeps counting after its first `expires_at`.
async fn limit_follows_an_extended_hold_past_its_first_expiry(env: TestEnv) {
    let app = env.spawn().await;
    limited_show(&app, "limitext", 10, 60, LIMIT).await;
    let alice = app.buyer("alice");
    let held = hold(
        &app,
        &alice,
        "limitext",
        json!({"seats": seats(1, LIMIT as usize)}),
    )
    .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    app.clock.advance(chrono::Duration::seconds(50));
    let extended = app
        .call(
            Method::POST,
            &format!("/v1/holds/{}/extend", held.str("hold_id")),
            Some(&alice),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.body);
    // Past the first expiry (60 s), within the extension (50 + 60 s).
    app.clock.advance(chrono::Duration::seconds(20));
    let more = hold(
        &app,
        &alice,
        "limitext",
        json!({"seats": seats(LIMIT as usize + 1, 1)}),
    )
    .await;
    expect_limit(&more, LIMIT);
}
