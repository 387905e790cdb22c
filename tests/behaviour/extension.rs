//! Hold extension over HTTP: `POST /v1/holds/{id}/extend`.

use chrono::{DateTime, Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::audit::verify_exit_code;
use crate::support::{show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        an_extended_hold_outlives_its_first_expiry_and_can_be_bought,
        extensions_stop_at_max_hold_seconds_from_placement,
        an_extended_pool_hold_keeps_its_places_and_its_rows_follow,
        an_expired_released_or_converted_hold_cannot_be_extended,
        only_the_owner_extends_and_the_body_is_empty,
        max_hold_seconds_is_validated_and_old_shows_read_back_unchanged,
        replay_and_verify_agree_after_extensions,
    ]
}

async fn create(app: &TestApp, show: &str, seats: usize, ttl: u32, max_hold: Option<u32>) {
    let mut body = show_body(seats, ttl);
    if let Some(max_hold) = max_hold {
        body["max_hold_seconds"] = json!(max_hold);
    }
    app.create_show_from(show, &body).await;
}

async fn extend(app: &TestApp, token: &str, hold_id: &str) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/holds/{hold_id}/extend"),
        Some(token),
        Some(&json!({})),
        &[],
    )
    .await
}

fn expires_at(answer: &Answer) -> DateTime<Utc> {
    answer
        .str("expires_at")
        .parse()
        .expect("an RFC 3339 expires_at")
}

fn advance(app: &TestApp, seconds: i64) {
    app.clock.advance(Duration::seconds(seconds));
}

async fn an_extended_hold_outlives_its_first_expiry_and_can_be_bought(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "ext", 3, 100, None).await;
    let alice = app.buyer("alice");
    let hold = app.hold(&alice, "ext", &["S1", "S2"], None).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    let hold_id = hold.str("hold_id");
    let first = expires_at(&hold);

    advance(&app, 60);
    let extended = extend(&app, &alice, &hold_id).await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.body);
    assert_eq!(extended.str("status"), "held");
    assert_eq!(extended.body["seats"], json!(["S1", "S2"]));
    // now + TTL: the service's clock runs on between the calls, a little.
    let moved = expires_at(&extended) - first;
    assert!(
        moved >= Duration::seconds(60) && moved < Duration::seconds(65),
        "moved by {moved}"
    );

    // Asked again at once: the hold, moved by the moment that passed at most
    // (at the very same instant it would not move: the domain tests).
    let again = extend(&app, &alice, &hold_id).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let moved = expires_at(&again) - expires_at(&extended);
    assert!(moved >= Duration::zero() && moved < Duration::seconds(2));

    // Past the first expiry: still held everywhere a reader looks.
    advance(&app, 50);
    assert!(app.clock_now() > first);
    let seats = app.seat_statuses("ext").await;
    assert_eq!(seats["S1"], "held");
    assert_eq!(seats["S2"], "held");
    assert_eq!(seats["S3"], "available");
    let get = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(get.str("status"), "held");
    assert_eq!(expires_at(&get), expires_at(&again));
    let bob = app.buyer("bob");
    app.hold(&bob, "ext", &["S1"], None)
        .await
        .expect_problem(409, "seat_taken");
    // The sweeper does not expire it either.
    assert_eq!(app.sweeper.run_once().await.expect("sweep"), 0);

    // And a purchase after the first expiry converts.
    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let seats = app.seat_statuses("ext").await;
    assert_eq!(seats["S1"], "booked");
    assert_eq!(seats["S2"], "booked");
    app.stop().await;
}

async fn extensions_stop_at_max_hold_seconds_from_placement(env: TestEnv) {
    let app = env.spawn().await;
    // TTL 100 s, at most 250 s in all.
    create(&app, "cap", 2, 100, Some(250)).await;
    let alice = app.buyer("alice");
    let hold = app.hold(&alice, "cap", &["S1"], None).await;
    let hold_id = hold.str("hold_id");
    let placed = expires_at(&hold) - Duration::seconds(100);
    let cap = placed + Duration::seconds(250);

    let mut last = expires_at(&hold);
    let mut refused = None;
    for _ in 0..10 {
        advance(&app, 50);
        let answer = extend(&app, &alice, &hold_id).await;
        if answer.status != StatusCode::OK {
            refused = Some(answer);
            break;
        }
        let at = expires_at(&answer);
        assert!(at > last, "each extension moves the expiry on");
        assert!(at <= cap, "{at} is past the cap {cap}");
        last = at;
    }
    let refused = refused.expect("the cap is reached");
    refused.expect_problem(409, "hold_extension_limit");
    assert_eq!(last, cap, "the last extension reaches the cap exactly");
    // The hold still holds its seat until the cap, and no longer.
    let get = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(expires_at(&get), cap);
    assert_eq!(get.str("status"), "held");
    let now = app.clock_now();
    advance(&app, (cap - now).num_seconds() + 1);
    assert_eq!(app.seat_statuses("cap").await["S1"], "available");
    extend(&app, &alice, &hold_id)
        .await
        .expect_problem(409, "hold_expired");

    // The default cap: 3 × TTL.
    create(&app, "dflt", 1, 100, None).await;
    let hold = app.hold(&alice, "dflt", &["S1"], None).await;
    let hold_id = hold.str("hold_id");
    let cap = expires_at(&hold) - Duration::seconds(100) + Duration::seconds(300);
    let mut last = expires_at(&hold);
    loop {
        advance(&app, 50);
        let answer = extend(&app, &alice, &hold_id).await;
        if answer.status != StatusCode::OK {
            answer.expect_problem(409, "hold_extension_limit");
            break;
        }
        last = expires_at(&answer);
        assert!(last <= cap);
    }
    assert_eq!(last, cap);
    app.stop().await;
}

async fn pool_show(app: &TestApp, show: &str, capacity: u32, shards: u32) {
    let body = json!({
        "name": "Festival", "starts_at": "2026-12-31T20:00:00Z", "hold_ttl_seconds": 100,
        "pools": [{"pool_id": "floor", "capacity": capacity, "price_cents": 3000, "shards": shards}]
    });
    app.create_show_from(show, &body).await;
}

async fn floor(app: &TestApp, show: &str) -> Value {
    app.availability(show).await.body["pools"][0].clone()
}

async fn an_extended_pool_hold_keeps_its_places_and_its_rows_follow(env: TestEnv) {
    let app = env.spawn().await;
    // Two shards of 3: a hold of 5 spans both.
    pool_show(&app, "gaext", 6, 2).await;
    let alice = app.buyer("alice");
    let hold = app
        .call(
            Method::POST,
            "/v1/shows/gaext/holds",
            Some(&alice),
            Some(&json!({"pool_id": "floor", "quantity": 5})),
            &[],
        )
        .await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    let hold_id = hold.str("hold_id");
    advance(&app, 80);
    let extended = extend(&app, &alice, &hold_id).await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.body);
    assert_eq!(extended.body["quantity"], 5);
    advance(&app, 80);
    assert_eq!(
        floor(&app, "gaext").await["held"],
        5,
        "past the first expiry"
    );
    let bob = app.buyer("bob");
    let refused = app
        .call(
            Method::POST,
            "/v1/shows/gaext/holds",
            Some(&bob),
            Some(&json!({"pool_id": "floor", "quantity": 2})),
            &[],
        )
        .await;
    refused.expect_problem(409, "sold_out");
    let record = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(expires_at(&record), expires_at(&extended));
    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(floor(&app, "gaext").await["sold"], 5);
    app.stop().await;
}

async fn an_expired_released_or_converted_hold_cannot_be_extended(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "ended", 3, 100, None).await;
    let alice = app.buyer("alice");

    let expired = app
        .hold(&alice, "ended", &["S1"], None)
        .await
        .str("hold_id");
    let released = app
        .hold(&alice, "ended", &["S2"], None)
        .await
        .str("hold_id");
    let converted = app
        .hold(&alice, "ended", &["S3"], None)
        .await
        .str("hold_id");
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
    let bought = app.purchase(&alice, &converted, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);

    extend(&app, &alice, &released)
        .await
        .expect_problem(409, "hold_released");
    extend(&app, &alice, &converted)
        .await
        .expect_problem(409, "hold_converted");
    advance(&app, 100);
    extend(&app, &alice, &expired)
        .await
        .expect_problem(409, "hold_expired");
    // Recorded as expired by the sweeper: still hold_expired.
    assert_eq!(app.sweeper.run_once().await.expect("sweep"), 1);
    extend(&app, &alice, &expired)
        .await
        .expect_problem(409, "hold_expired");
    app.stop().await;
}

async fn only_the_owner_extends_and_the_body_is_empty(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "own", 1, 100, None).await;
    let alice = app.buyer("alice");
    let hold = app.hold(&alice, "own", &["S1"], None).await;
    let hold_id = hold.str("hold_id");
    advance(&app, 10);
    let bob = app.buyer("bob");
    extend(&app, &bob, &hold_id)
        .await
        .expect_problem(403, "forbidden");
    let unknown = "00000000-0000-0000-0000-000000000001";
    extend(&app, &alice, unknown)
        .await
        .expect_problem(404, "hold_not_found");
    let field = app
        .call(
            Method::POST,
            &format!("/v1/holds/{hold_id}/extend"),
            Some(&alice),
            Some(&json!({"seconds": 600})),
            &[],
        )
        .await;
    assert_eq!(
        field.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        field.body
    );
    let none = app
        .call(
            Method::POST,
            &format!("/v1/holds/{hold_id}/extend"),
            None,
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(none.status, StatusCode::UNAUTHORIZED);
    // Nothing above moved the hold.
    let get = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(expires_at(&get), expires_at(&hold));
    app.stop().await;
}

async fn max_hold_seconds_is_validated_and_old_shows_read_back_unchanged(env: TestEnv) {
    let app = env.spawn().await;
    for (bad, why) in [(59, "below the TTL"), (0, "zero"), (7201, "above the cap")] {
        let mut body = show_body(1, 60);
        body["max_hold_seconds"] = json!(bad);
        let answer = app
            .call(
                Method::PUT,
                "/v1/shows/bad",
                Some(&app.admin()),
                Some(&body),
                &[],
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{why}: {}",
            answer.body
        );
    }
    create(&app, "set", 1, 60, Some(600)).await;
    let set = app
        .call(Method::GET, "/v1/shows/set", None, None, &[])
        .await;
    assert_eq!(set.body["max_hold_seconds"], 600);
    create(&app, "old", 1, 60, None).await;
    let old = app
        .call(Method::GET, "/v1/shows/old", None, None, &[])
        .await;
    assert!(old.body.get("max_hold_seconds").is_none(), "{}", old.body);
    // The same definition again is the same show.
    let again = app
        .call(
            Method::PUT,
            "/v1/shows/old",
            Some(&app.admin()),
            Some(&show_body(1, 60)),
            &[],
        )
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    app.stop().await;
}

async fn replay_and_verify_agree_after_extensions(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "rv", 4, 100, None).await;
    pool_show(&app, "rvga", 6, 2).await;
    let alice = app.buyer("alice");
    let kept = app
        .hold(&alice, "rv", &["S1", "S2"], None)
        .await
        .str("hold_id");
    let ended = app.hold(&alice, "rv", &["S3"], None).await.str("hold_id");
    let pool = app
        .call(
            Method::POST,
            "/v1/shows/rvga/holds",
            Some(&alice),
            Some(&json!({"pool_id": "floor", "quantity": 4})),
            &[],
        )
        .await
        .str("hold_id");
    advance(&app, 50);
    for hold_id in [&kept, &ended, &pool] {
        let answer = extend(&app, &alice, hold_id).await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    advance(&app, 50);
    let answer = extend(&app, &alice, &kept).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    let answer = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{ended}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
    let (code, out) = verify_exit_code(&app);
    assert_eq!(code, 0, "verify after extensions: {out}");
    // The projector re-applies the whole log over the live rows: nothing moves.
    app.projector.run_once().await.expect("projector");
    let (code, out) = verify_exit_code(&app);
    assert_eq!(code, 0, "verify after the projector: {out}");
    app.stop().await;
}
