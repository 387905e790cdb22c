//! General-admission pools over HTTP.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{fire_at_once, Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        ga_storm_of_5000_buyers_sells_exactly_the_capacity,
        expired_pool_holds_give_their_places_back_without_a_sweep,
        mixed_quantities_across_shards_never_oversell,
        a_pool_hold_is_bought_cancelled_and_released_like_a_seat_hold,
        instances_whose_clocks_differ_never_oversell_a_pool,
    ]
}

async fn create_pool_show(app: &TestApp, show: &str, capacity: u32, shards: Option<u32>, ttl: u32) {
    let mut pool = json!({"pool_id": "floor", "capacity": capacity, "price_cents": 3000});
    if let Some(shards) = shards {
        pool["shards"] = json!(shards);
    }
    let body = json!({
        "name": "Festival", "starts_at": "2026-12-31T20:00:00Z", "hold_ttl_seconds": ttl,
        "pools": [pool]
    });
    app.create_show_from(show, &body).await;
}

fn pool_hold(
    app: &TestApp,
    token: String,
    show: &str,
    quantity: u32,
) -> impl std::future::Future<Output = Answer> + Send + 'static {
    app.hold_call(
        token,
        show,
        json!({"pool_id": "floor", "quantity": quantity}),
    )
}

async fn floor(app: &TestApp, show: &str) -> Value {
    let answer = app.availability(show).await;
    answer.body["pools"][0].clone()
}

async fn ga_storm_of_5000_buyers_sells_exactly_the_capacity(env: TestEnv) {
    const BUYERS: usize = 5_000;
    const CAPACITY: u32 = 500;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    create_pool_show(&app, "ga", CAPACITY, None, 480).await;
    let calls: Vec<_> = (0..BUYERS)
        .map(|i| pool_hold(&app, app.buyer(&format!("fan-{i}")), "ga", 1))
        .collect();
    let started = Instant::now();
    let answers = fire_at_once(calls).await;
    let wall = started.elapsed();
    let mut outcomes: BTreeMap<(u16, Option<String>), usize> = BTreeMap::new();
    for a in &answers {
        *outcomes
            .entry((a.status.as_u16(), a.code().map(str::to_owned)))
            .or_default() += 1;
    }
    let expected = BTreeMap::from([
        ((201, None), CAPACITY as usize),
        (
            (409, Some("sold_out".to_owned())),
            BUYERS - CAPACITY as usize,
        ),
    ]);
    assert_eq!(outcomes, expected);
    for loser in answers.iter().filter(|a| a.status == StatusCode::CONFLICT) {
        assert_eq!(loser.body["available"], 0);
    }
    assert_eq!(
        floor(&app, "ga").await,
        json!({"pool_id": "floor", "capacity": CAPACITY, "available": 0, "held": CAPACITY, "sold": 0})
    );
    println!(
        "GA storm on {}: {BUYERS} requests for {CAPACITY} places answered in {wall:?}",
        env.backend.name()
    );
    app.stop().await;
}

async fn expired_pool_holds_give_their_places_back_without_a_sweep(env: TestEnv) {
    let app = env.spawn().await;
    create_pool_show(&app, "gaexp", 10, Some(3), 1).await;
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let first = pool_hold(&app, alice.clone(), "gaexp", 10).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(
        (first.body["quantity"].clone(), first.body["seats"].clone()),
        (json!(10), json!([]))
    );
    let refused = pool_hold(&app, bob.clone(), "gaexp", 1).await;
    refused.expect_problem(409, "sold_out");
    assert_eq!(refused.body["available"], 0);

    app.clock.advance(chrono::Duration::milliseconds(1_001));

    assert_eq!(floor(&app, "gaexp").await["available"], 10);
    let hold = app
        .call(
            Method::GET,
            &format!("/v1/holds/{}", first.str("hold_id")),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(hold.body["status"], "expired");
    let second = pool_hold(&app, bob, "gaexp", 7).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    let figures = floor(&app, "gaexp").await;
    assert_eq!(
        (figures["held"].clone(), figures["available"].clone()),
        (json!(7), json!(3))
    );
    app.stop().await;
}

async fn mixed_quantities_across_shards_never_oversell(env: TestEnv) {
    const BUYERS: usize = 400;
    const CAPACITY: u32 = 600;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    create_pool_show(&app, "mixed", CAPACITY, Some(8), 480).await;
    let quantities: Vec<u32> = {
        let mut rng = rand::thread_rng();
        (0..BUYERS).map(|_| rng.gen_range(1..=8)).collect()
    };
    let calls: Vec<_> = quantities
        .iter()
        .enumerate()
        .map(|(i, q)| pool_hold(&app, app.buyer(&format!("m-{i}")), "mixed", *q))
        .collect();
    let answers = fire_at_once(calls).await;
    let mut won = 0u32;
    let mut winners = 0;
    for (answer, quantity) in answers.iter().zip(&quantities) {
        match answer.status {
            StatusCode::CREATED => {
                won += quantity;
                winners += 1;
                assert_eq!(answer.body["quantity"], json!(quantity));
            }
            StatusCode::CONFLICT => {
                assert_eq!(answer.code(), Some("sold_out"));
                assert!(answer.body["available"].as_u64().unwrap() < u64::from(*quantity));
            }
            other => panic!("unexpected {other}: {}", answer.body),
        }
    }
    assert!(won <= CAPACITY, "oversold: {won}");
    assert!(
        won > CAPACITY - 8,
        "a refusal means fewer than 8 places were left: {won}"
    );
    // Buy some of the winners' holds: held + sold still equals what they got.
    let mut bought = 0;
    for (i, answer) in answers
        .iter()
        .enumerate()
        .filter(|(_, a)| a.status == StatusCode::CREATED)
        .take(20)
    {
        let token = app.buyer(&format!("m-{i}"));
        let paid = app
            .purchase(&token, &answer.str("hold_id"), "pm_sim_ok")
            .await;
        assert_eq!(paid.status, StatusCode::CREATED, "{}", paid.body);
        assert_eq!(paid.body["amount_cents"], json!(3000 * quantities[i]));
        bought += quantities[i];
    }
    let figures = floor(&app, "mixed").await;
    assert_eq!(figures["sold"], json!(bought));
    assert_eq!(figures["held"], json!(won - bought));
    assert_eq!(figures["available"], json!(CAPACITY - won));
    println!(
        "mixed on {}: {winners} winners took {won} of {CAPACITY}",
        env.backend.name()
    );
    app.stop().await;
}

async fn a_pool_hold_is_bought_cancelled_and_released_like_a_seat_hold(env: TestEnv) {
    let app = env.spawn().await;
    create_pool_show(&app, "gaflow", 6, Some(2), 480).await;
    let alice = app.buyer("alice");
    // 5 of 6 places over two shards of 3: the hold spans both.
    let hold = pool_hold(&app, alice.clone(), "gaflow", 5).await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    let bought = app
        .purchase(&alice, &hold.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(
        (
            bought.body["pool_id"].clone(),
            bought.body["quantity"].clone(),
            bought.body["amount_cents"].clone()
        ),
        (json!("floor"), json!(5), json!(15_000))
    );
    assert_eq!(floor(&app, "gaflow").await["sold"], 5);
    let cancel = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
    let cancelled = app
        .call(Method::POST, &cancel, Some(&alice), None, &[])
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    assert_eq!(floor(&app, "gaflow").await["available"], 6);

    let again = pool_hold(&app, alice.clone(), "gaflow", 6).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    let release = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{}", again.str("hold_id")),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(release.status, StatusCode::NO_CONTENT);
    assert_eq!(floor(&app, "gaflow").await["available"], 6);

    for (body, expected) in [
        (
            json!({"pool_id": "floor", "quantity": 0}),
            (422, "validation_failed"),
        ),
        (
            json!({"pool_id": "floor", "quantity": 21}),
            (422, "validation_failed"),
        ),
        (
            json!({"pool_id": "balcony", "quantity": 1}),
            (422, "unknown_pool"),
        ),
        (json!({"pool_id": "floor"}), (422, "validation_failed")),
    ] {
        let answer = app
            .call(
                Method::POST,
                "/v1/shows/gaflow/holds",
                Some(&alice),
                Some(&body),
                &[],
            )
            .await;
        answer.expect_problem(expected.0, expected.1);
    }
    // Idempotent like a seat hold.
    let keyed = |app: &TestApp| {
        let request = app
            .client
            .post(format!("{}/v1/shows/gaflow/holds", app.base))
            .bearer_auth(&alice)
            .header("idempotency-key", "ga-1")
            .header("content-type", "application/json")
            .body(json!({"pool_id": "floor", "quantity": 2}).to_string());
        async move { TestApp::answer(request.send().await.expect("answered")).await }
    };
    let (first, second) = tokio::join!(keyed(&app), keyed(&app));
    assert_eq!(first.str("hold_id"), second.str("hold_id"));
    assert_eq!(floor(&app, "gaflow").await["held"], 2);
    app.stop().await;
}

/// Two instances, one clock 6 s ahead of the other. 18 one-place holds
/// expire by the clock ahead; a command records at most 16 expiries. The
/// instance behind still takes the two unrecorded holds for active and may
/// convert them, so the instance ahead must not give their places away.
async fn instances_whose_clocks_differ_never_oversell_a_pool(env: TestEnv) {
    const CAPACITY: u32 = 20;
    let (ahead, behind) = env.spawn_pair().await;
    create_pool_show(&ahead, "skew", CAPACITY, Some(1), 5).await;
    let mut holds = Vec::new();
    for n in 0..18 {
        let token = behind.buyer(&format!("early{n}"));
        let held = pool_hold(&behind, token.clone(), "skew", 1).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
        holds.push((token, held.str("hold_id")));
    }
    ahead.clock.advance(chrono::Duration::seconds(6));

    let late = ahead.buyer("late");
    let whole = pool_hold(&ahead, late.clone(), "skew", CAPACITY).await;
    whole.expect_problem(409, "sold_out");
    let most = pool_hold(&ahead, late, "skew", 18).await;
    assert_eq!(most.status, StatusCode::CREATED, "{}", most.body);

    let mut converted = 0;
    for (token, hold_id) in &holds {
        let bought = behind.purchase(token, hold_id, "pm_sim_ok").await;
        match bought.status {
            StatusCode::CREATED => converted += 1,
            StatusCode::CONFLICT => {
                assert_eq!(bought.code(), Some("hold_expired"), "{}", bought.body)
            }
            other => panic!("purchase answered {other}: {}", bought.body),
        }
    }
    assert!(
        18 + converted <= CAPACITY,
        "{converted} conversions beside a hold of 18 places in a pool of {CAPACITY}"
    );
    let pool = floor(&ahead, "skew").await;
    let (sold, held) = (
        pool["sold"].as_u64().unwrap(),
        pool["held"].as_u64().unwrap(),
    );
    assert!(sold + held <= u64::from(CAPACITY), "{pool}");
    ahead.stop().await;
    behind.stop().await;
}
