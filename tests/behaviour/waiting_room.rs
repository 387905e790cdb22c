//! The waiting room: joining, the random order of those who joined before
//! the start, admission computed from the schedule and enforced by the
//! hold's decision, expiry of an admission, the operator's rate, the room
//! pausing, resuming and closing as the inventory goes, bad settings,
//! agreement of two instances, and the queue's history.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        queue_orders_early_joiners_at_random_and_admits_at_the_rate,
        queue_admission_is_required_to_hold_and_expires,
        queue_two_instances_agree_on_every_buyers_standing,
        queue_rate_changes_mid_sale_and_history_shows_it,
        queue_pauses_when_all_is_held_resumes_on_release_and_closes_sold_out,
        queue_refuses_bad_settings_and_bad_requests_changing_nothing,
        queue_is_read_again_from_the_log_by_a_new_instance,
        queue_stream_tells_the_buyer_of_the_admission,
    ]
}

/// Early joiners in the permutation test: enough for the rank correlation
/// of a random order to be small (its standard deviation is 1/sqrt(n-1),
/// about 0.058 for 300).
const EARLY: usize = 300;

/// The bound on |Spearman's rho| between join order and queue number: more
/// than four standard deviations of a uniformly random order (a chance
/// below 1 in 10,000 of failing when the order is random), and far below
/// what any order that follows arrival gives (1.0).
const RANK_CORRELATION_BOUND: f64 = 0.25;

/// A show of `seats` seats (and its 100-place pool unless `pool` is false)
/// selling through a waiting room that opens an hour after the clock's now.
async fn room_show(
    app: &TestApp,
    show_id: &str,
    seats: usize,
    rate: u32,
    ttl: u32,
    pool: bool,
) -> DateTime<Utc> {
    let starts = app.clock_now() + Duration::hours(1);
    let mut body = show_body(seats, 600);
    if !pool {
        body.as_object_mut().unwrap().remove("pools");
    }
    body["waiting_room"] = json!({
        "sale_starts_at": starts.to_rfc3339(),
        "admit_per_minute": rate,
        "admission_ttl_seconds": ttl,
    });
    app.create_show_from(show_id, &body).await;
    starts
}

async fn join(app: &TestApp, token: &str, show: &str) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/queue"),
        Some(token),
        Some(&json!({})),
        &[],
    )
    .await
}

async fn me(app: &TestApp, token: &str, show: &str) -> Answer {
    let answer = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/queue/me"),
            Some(token),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer
}

async fn overview(app: &TestApp, show: &str) -> Value {
    let answer = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/queue"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

async fn set_rate(app: &TestApp, show: &str, rate: u32) -> Answer {
    app.call(
        Method::PATCH,
        &format!("/v1/shows/{show}/waiting-room"),
        Some(&app.admin()),
        Some(&json!({ "admit_per_minute": rate })),
        &[],
    )
    .await
}

/// Moves the clock to `at` (never back).
fn advance_to(app: &TestApp, at: DateTime<Utc>) {
    let now = app.clock_now();
    if at > now {
        app.clock.advance(at - now);
    }
}

fn buyers(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

fn position(answer: &Answer) -> u64 {
    answer.body["position"]
        .as_u64()
        .unwrap_or_else(|| panic!("position in {}", answer.body))
}

/// Spearman's rank correlation of two rankings of the same n items.
fn spearman(a: &[u64], b: &[u64]) -> f64 {
    let n = a.len() as f64;
    let d2: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

/// How many buyers a schedule of `rate` a minute admits `elapsed` after its
/// start (what docs/api.md promises, computed here independently).
fn admitted_by(rate: u32, elapsed: Duration) -> u64 {
    (elapsed.num_milliseconds().max(0) as u64 * u64::from(rate)) / 60_000
}

async fn queue_orders_early_joiners_at_random_and_admits_at_the_rate(env: TestEnv) {
    let app = env.spawn().await;
    let show = "q-order";
    let rate = 60;
    let starts = room_show(&app, show, 10, rate, 600, true).await;
    let early = buyers("early", EARLY);
    let tokens: Vec<String> = early.iter().map(|b| app.buyer(b)).collect();
    // Joined one after the other: join order is known.
    for (i, token) in tokens.iter().enumerate() {
        let joined = join(&app, token, show).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
        assert_eq!(joined.body["status"], "waiting");
        assert_eq!(
            position(&joined),
            i as u64 + 1,
            "before the start: join order"
        );
    }
    // Joining again: the same entry.
    let again = join(&app, &tokens[7], show).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(position(&again), 8);

    // The start: the order is drawn.
    advance_to(&app, starts);
    let mut numbers = Vec::with_capacity(EARLY);
    for token in &tokens {
        let before = app.clock_now();
        let standing = me(&app, token, show).await;
        let after = app.clock_now();
        let n = position(&standing);
        // `ahead` is exact at the instant of the read: the buyers numbered
        // below n that the schedule has not let in (all joined early).
        if standing.body["status"] == "waiting" {
            let ahead = standing.body["ahead"].as_u64().unwrap();
            let low = (n - 1).saturating_sub(admitted_by(rate, after - starts));
            let high = (n - 1).saturating_sub(admitted_by(rate, before - starts));
            assert!(
                (low..=high).contains(&ahead),
                "{}: {low}..={high}",
                standing.body
            );
        }
        numbers.push(n);
    }
    let distinct: BTreeSet<u64> = numbers.iter().copied().collect();
    assert_eq!(
        distinct,
        (1..=EARLY as u64).collect(),
        "early joiners get the numbers 1..P, each once"
    );
    let join_order: Vec<u64> = (1..=EARLY as u64).collect();
    let rho = spearman(&join_order, &numbers);
    assert!(
        rho.abs() < RANK_CORRELATION_BOUND,
        "the order at the start is random: rho {rho} against join order"
    );

    // Later joiners come after every early one, in the order they came.
    let late = buyers("late", 5);
    for (i, buyer) in late.iter().enumerate() {
        let joined = join(&app, &app.buyer(buyer), show).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
        assert_eq!(position(&joined), (EARLY + i + 1) as u64, "{}", joined.body);
    }

    // Admissions follow the rate: 30 s in at 60 a minute, the buyers
    // numbered up to 30 (the schedule at the instant of each read; the
    // reads take a little real time, so the count lies between the
    // schedule at the first read and at the last).
    advance_to(&app, starts + Duration::seconds(30));
    let before = app.clock_now();
    let mut admitted = 0;
    for (token, n) in tokens.iter().zip(&numbers) {
        let standing = me(&app, token, show).await;
        match standing.body["status"].as_str() {
            Some("admitted") => {
                admitted += 1;
                assert!(standing.body["admitted_until"].is_string());
                assert_eq!(standing.body["ahead"], 0);
            }
            Some("waiting") => {
                let ahead = standing.body["ahead"].as_u64().unwrap();
                let wait = standing.body["estimated_wait_seconds"].as_i64().unwrap();
                // One a second: the wait is about the number of buyers ahead.
                assert!((wait - ahead as i64 - 1).abs() <= 1, "{}", standing.body);
                assert!(*n > 30, "{}", standing.body);
            }
            other => panic!("unexpected status {other:?}"),
        }
    }
    let after = app.clock_now();
    let (low, high) = (
        admitted_by(rate, before - starts),
        admitted_by(rate, after - starts),
    );
    assert!(
        (low..=high).contains(&admitted),
        "admitted {admitted}, the schedule says {low}..={high}"
    );
    let seen = overview(&app, show).await;
    assert_eq!(seen["admit_per_minute"], rate);
    assert_eq!(
        seen["waiting"].as_u64().unwrap() + seen["admitted"].as_u64().unwrap(),
        (EARLY + late.len()) as u64,
        "{seen}"
    );
    app.stop().await;
}

async fn queue_admission_is_required_to_hold_and_expires(env: TestEnv) {
    let app = env.spawn().await;
    let show = "q-admit";
    // One a minute: the first buyer a minute after the start, the second
    // two minutes after; an admission lasts 60 s.
    let starts = room_show(&app, show, 10, 1, 60, true).await;
    let (a, b) = (app.buyer("adm-a"), app.buyer("adm-b"));
    join(&app, &a, show).await;
    join(&app, &b, show).await;
    let stranger = app.buyer("adm-stranger");

    // Before the start nobody holds, even having joined.
    let refused = app.hold(&a, show, &["S1"], None).await;
    refused.expect_problem(403, "admission_required");
    assert_eq!(refused.body["queue"], format!("/v1/shows/{show}/queue"));

    advance_to(&app, starts + Duration::seconds(61));
    let (first, second) = if position(&me(&app, &a, show).await) == 1 {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    };
    let standing = me(&app, &first, show).await;
    assert_eq!(standing.body["status"], "admitted", "{}", standing.body);
    let until: DateTime<Utc> = standing.body["admitted_until"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(until, starts + Duration::seconds(60 + 60));
    assert_eq!(me(&app, &second, show).await.body["status"], "waiting");

    // Not admitted: 403 for seats, pools and best available alike, and
    // nothing changes.
    let events = app.event_count().await;
    for body in [
        json!({"seats": ["S2"]}),
        json!({"pool_id": "floor", "quantity": 2}),
        json!({"best_available": {"quantity": 2}}),
    ] {
        for token in [&second, &stranger] {
            let answer = app.hold_call(token.clone(), show, body.clone()).await;
            answer.expect_problem(403, "admission_required");
        }
    }
    assert_eq!(
        app.event_count().await,
        events,
        "a refused hold writes nothing"
    );
    assert_eq!(app.seat_statuses(show).await["S2"], "available");

    // Admitted: hold and purchase.
    let held = app.hold(&first, show, &["S1"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let hold_id = held.str("hold_id");
    let pool = app
        .hold_call(
            first.clone(),
            show,
            json!({"pool_id": "floor", "quantity": 1}),
        )
        .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{}", pool.body);

    // The admission ends; a hold placed while admitted still extends and
    // is bought, but no new hold is placed.
    advance_to(&app, until + Duration::seconds(1));
    assert_eq!(me(&app, &first, show).await.body["status"], "expired");
    app.hold(&first, show, &["S3"], None)
        .await
        .expect_problem(403, "admission_required");
    let extended = app
        .call(
            Method::POST,
            &format!("/v1/holds/{hold_id}/extend"),
            Some(&first),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.body);
    let bought = app.purchase(&first, &hold_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.release(&first, &pool.str("hold_id")).await;

    // The second buyer is admitted now (two minutes in) and holds.
    let standing = me(&app, &second, show).await;
    assert_eq!(standing.body["status"], "admitted", "{}", standing.body);
    let held = app.hold(&second, show, &["S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    app.stop().await;
}

/// Every buyer's standing on `first` and `second`: read on the first, the
/// second, then the first again; where the first says the same twice, the
/// second (read between) must say it too, and numbers and admission ends
/// are the same on both.
async fn agree(first: &TestApp, second: &TestApp, show: &str, tokens: &[String]) -> usize {
    let mut compared = 0;
    for token in tokens {
        let a1 = me(first, token, show).await.body;
        let b = me(second, token, show).await.body;
        let a2 = me(first, token, show).await.body;
        assert_eq!(a1["position"], b["position"], "{a1} / {b}");
        assert_eq!(a1["position"], a2["position"]);
        if a1["status"] == a2["status"] {
            assert_eq!(a1["status"], b["status"], "{a1} / {b} / {a2}");
            assert_eq!(a1["admitted_until"], b["admitted_until"], "{a1} / {b}");
            compared += 1;
        }
    }
    compared
}

async fn queue_two_instances_agree_on_every_buyers_standing(env: TestEnv) {
    let (first, second) = env.spawn_pair().await;
    let show = "q-pair";
    // One every ten seconds, each admission for a minute.
    let starts = room_show(&first, show, 10, 6, 60, true).await;
    let names = buyers("pair", 30);
    let tokens: Vec<String> = names.iter().map(|b| first.buyer(b)).collect();
    // Joined on either instance, in turn.
    for (i, token) in tokens.iter().enumerate() {
        let app = if i % 2 == 0 { &first } else { &second };
        let joined = join(app, token, show).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
    }
    let both = |at: DateTime<Utc>| {
        advance_to(&first, at);
        advance_to(&second, at);
    };
    // Before the start, at it, and as admissions run: some waiting, some
    // admitted, then some expired.
    for at in [-60, 0, 15, 45, 95] {
        both(starts + Duration::seconds(at));
        let compared = agree(&first, &second, show, &tokens).await;
        assert!(compared >= tokens.len() - 3, "compared {compared}");
    }
    // A rate change on one instance counts on both, from the instant it
    // names (half a second on, in real time: the clocks are not moved).
    let changed = set_rate(&second, show, 600).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    // (The operator's view on the other instance reads the room as its
    // stream holds it: from here the first knows of the change too.)
    assert_eq!(overview(&first, show).await["admit_per_minute"], 600);
    agree(&first, &second, show, &tokens).await;
    both(first.clock_now() + Duration::seconds(1));
    let compared = agree(&first, &second, show, &tokens).await;
    assert!(compared >= tokens.len() - 3, "compared {compared}");
    first.stop().await;
    second.stop().await;
}

async fn queue_rate_changes_mid_sale_and_history_shows_it(env: TestEnv) {
    let app = env.spawn().await;
    let show = "q-rate";
    let starts = room_show(&app, show, 10, 60, 3600, true).await;
    let tokens: Vec<String> = buyers("rate", 200).iter().map(|b| app.buyer(b)).collect();
    for token in &tokens {
        join(&app, token, show).await;
    }
    advance_to(&app, starts + Duration::seconds(10));
    let seen = overview(&app, show).await;
    let admitted = seen["admitted"].as_u64().unwrap();
    assert!((10..=11).contains(&admitted), "{seen}");

    // Ten times the rate, from half a second after the change (the
    // instant the history records).
    let changed = set_rate(&app, show, 600).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["admit_per_minute"], 600);
    let effective = history(&app, show)
        .await
        .into_iter()
        .find(|e| e["type"] == "RateChanged")
        .map(|e| {
            e["data"]["at"]
                .as_str()
                .unwrap()
                .parse::<DateTime<Utc>>()
                .unwrap()
        })
        .expect("the rate change in the history");
    assert!(effective > starts + Duration::seconds(10));
    advance_to(&app, effective + Duration::seconds(10));
    let before = app.clock_now();
    let seen = overview(&app, show).await;
    let after = app.clock_now();
    let expect = |now: DateTime<Utc>| {
        admitted_by(60, effective - starts) + admitted_by(600, now - effective)
    };
    let admitted = seen["admitted"].as_u64().unwrap();
    assert!(
        (expect(before)..=expect(after) + 1).contains(&admitted),
        "admitted {admitted}, the schedule says {}..={}",
        expect(before),
        expect(after)
    );
    assert_eq!(seen["admit_per_minute"], 600);

    // The show's history: the joins, the seed and the rate change.
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for event in history(&app, show).await {
        *types
            .entry(event["type"].as_str().unwrap().to_owned())
            .or_default() += 1;
        if event["type"] == "RateChanged" {
            assert_eq!(event["data"]["admit_per_minute"], 600);
            assert_eq!(event["metadata"]["actor"], "ops");
        }
        if event["type"] == "SeedDrawn" {
            assert!(event["data"]["seed"].is_u64(), "{event}");
        }
    }
    assert_eq!(types.get("QueueJoined"), Some(&tokens.len()));
    assert_eq!(types.get("SeedDrawn"), Some(&1));
    assert_eq!(types.get("RateChanged"), Some(&1));
    app.stop().await;
}

/// The show's history (one page).
async fn history(app: &TestApp, show: &str) -> Vec<Value> {
    let history = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/history?limit=1000"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.body);
    history.body["events"].as_array().unwrap().clone()
}

async fn queue_pauses_when_all_is_held_resumes_on_release_and_closes_sold_out(env: TestEnv) {
    let app = env.spawn().await;
    let show = "q-stock";
    // Two seats, no pool; two a second.
    let starts = room_show(&app, show, 2, 120, 600, false).await;
    let holder = app.buyer("stock-holder");
    join(&app, &holder, show).await;
    advance_to(&app, starts + Duration::seconds(1));
    assert_eq!(me(&app, &holder, show).await.body["status"], "admitted");
    let held = app.hold(&holder, show, &["S1", "S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    // Everything held: the keeper pauses admissions (from half a second on;
    // a buyer who joins before that may still get an admission made by
    // then).
    app.waiting_rooms.run_once().await.expect("keeper pass");
    assert_eq!(overview(&app, show).await["paused"], true);
    advance_to(&app, app.clock_now() + Duration::seconds(1));
    let late = app.buyer("stock-late");
    let joined = join(&app, &late, show).await;
    assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
    advance_to(&app, app.clock_now() + Duration::seconds(30));
    let standing = me(&app, &late, show).await;
    assert_eq!(
        standing.body["status"], "waiting",
        "paused: {}",
        standing.body
    );
    assert_eq!(standing.body["ahead"], 0, "{}", standing.body);
    // Held is not sold: nobody is told sold out.
    assert_eq!(overview(&app, show).await["closed"], false);

    // Released: admissions resume.
    app.release(&holder, &held.str("hold_id")).await;
    app.waiting_rooms.run_once().await.expect("keeper pass");
    assert_eq!(overview(&app, show).await["paused"], false);
    advance_to(&app, app.clock_now() + Duration::seconds(2));
    assert_eq!(me(&app, &late, show).await.body["status"], "admitted");

    // Everything booked: the room closes, and nobody joins any more.
    let held = app.hold(&late, show, &["S1", "S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let bought = app.purchase(&late, &held.str("hold_id"), "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    app.waiting_rooms.run_once().await.expect("keeper pass");
    let standing = me(&app, &holder, show).await;
    assert_eq!(standing.body["status"], "closed", "{}", standing.body);
    assert_eq!(standing.body["reason"], "sold_out");
    let seen = overview(&app, show).await;
    assert_eq!(
        (seen["closed"].clone(), seen["reason"].clone()),
        (json!(true), json!("sold_out"))
    );
    let events = app.event_count().await;
    join(&app, &app.buyer("stock-too-late"), show)
        .await
        .expect_problem(409, "sold_out");
    set_rate(&app, show, 100)
        .await
        .expect_problem(409, "sold_out");
    assert_eq!(app.event_count().await, events);

    // A closed room is not looked at any more; once the show begins, its
    // queue leaves memory, and a standing asked for is read again from the
    // log, the same.
    assert_eq!(app.waiting_rooms.run_once().await.expect("keeper pass"), 0);
    let show_begins: DateTime<Utc> = "2026-12-31T20:00:00Z".parse().unwrap();
    advance_to(&app, show_begins);
    assert_eq!(app.waiting_rooms.run_once().await.expect("keeper pass"), 0);
    let standing = me(&app, &holder, show).await;
    assert_eq!(standing.body["status"], "closed", "{}", standing.body);
    assert_eq!(standing.body["reason"], "sold_out");
    app.stop().await;
}

async fn queue_refuses_bad_settings_and_bad_requests_changing_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let starts = (app.clock_now() + Duration::hours(1)).to_rfc3339();
    let admin = app.admin();
    let bad_rooms = [
        json!({"sale_starts_at": starts, "admit_per_minute": 0, "admission_ttl_seconds": 600}),
        json!({"sale_starts_at": starts, "admit_per_minute": 1_000_001, "admission_ttl_seconds": 600}),
        json!({"sale_starts_at": starts, "admit_per_minute": 100, "admission_ttl_seconds": 59}),
        json!({"sale_starts_at": starts, "admit_per_minute": 100, "admission_ttl_seconds": 3601}),
        json!({"admit_per_minute": 100, "admission_ttl_seconds": 600}),
        json!({"sale_starts_at": "soon", "admit_per_minute": 100, "admission_ttl_seconds": 600}),
        json!({"sale_starts_at": starts, "admit_per_minute": 100, "admission_ttl_seconds": 600, "vip": true}),
        json!("yes"),
    ];
    for (i, room) in bad_rooms.iter().enumerate() {
        let show = format!("q-bad-{i}");
        let mut body = show_body(4, 600);
        body["waiting_room"] = room.clone();
        let answer = app
            .call(
                Method::PUT,
                &format!("/v1/shows/{show}"),
                Some(&admin),
                Some(&body),
                &[],
            )
            .await;
        answer.expect_problem(422, "validation_failed");
        let read = app
            .call(
                Method::GET,
                &format!("/v1/shows/{show}"),
                Some(&admin),
                None,
                &[],
            )
            .await;
        read.expect_problem(404, "show_not_found");
    }
    assert_eq!(app.event_count().await, 0, "nothing was created");

    // A show without a waiting room has no queue; holds need no admission.
    app.create_show("q-none", 4, 600).await;
    let buyer = app.buyer("bad-buyer");
    join(&app, &buyer, "q-none")
        .await
        .expect_problem(404, "waiting_room_not_found");
    let held = app.hold(&buyer, "q-none", &["S1"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    let show = "q-bad-requests";
    room_show(&app, show, 4, 100, 600, true).await;
    join(&app, &buyer, "no-such-show")
        .await
        .expect_problem(404, "show_not_found");
    app.call(
        Method::GET,
        &format!("/v1/shows/{show}/queue/me"),
        Some(&buyer),
        None,
        &[],
    )
    .await
    .expect_problem(404, "queue_entry_not_found");
    app.call(
        Method::GET,
        &format!("/v1/shows/{show}/queue/me"),
        None,
        None,
        &[],
    )
    .await
    .expect_problem(401, "unauthorized");
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/queue"),
        Some(&buyer),
        Some(&json!({"priority": 1})),
        &[],
    )
    .await
    .expect_problem(422, "validation_failed");
    // The operator's view and rate are an admin's.
    app.call(
        Method::GET,
        &format!("/v1/shows/{show}/queue"),
        Some(&buyer),
        None,
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    app.call(
        Method::PATCH,
        &format!("/v1/shows/{show}/waiting-room"),
        Some(&buyer),
        Some(&json!({"admit_per_minute": 5})),
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    let events = app.event_count().await;
    for body in [
        json!({"admit_per_minute": 0}),
        json!({"admit_per_minute": 1_000_001}),
        json!({"admit_per_minute": "fast"}),
        json!({}),
        json!({"admit_per_minute": 5, "admission_ttl_seconds": 60}),
    ] {
        set_rate_body(&app, show, &body)
            .await
            .expect_problem(422, "validation_failed");
    }
    set_rate(&app, "q-none", 5)
        .await
        .expect_problem(404, "waiting_room_not_found");
    assert_eq!(
        app.event_count().await,
        events,
        "a refused request writes nothing"
    );
    assert_eq!(overview(&app, show).await["admit_per_minute"], 100);
    app.stop().await;
}

async fn set_rate_body(app: &TestApp, show: &str, body: &Value) -> Answer {
    app.call(
        Method::PATCH,
        &format!("/v1/shows/{show}/waiting-room"),
        Some(&app.admin()),
        Some(body),
        &[],
    )
    .await
}

async fn queue_is_read_again_from_the_log_by_a_new_instance(env: TestEnv) {
    // The second instance serves nothing until the end: it knows the queue
    // only from the log, as a new instance (or one after a restart) would.
    let (app, again) = env.spawn_pair().await;
    let show = "q-replay";
    let starts = room_show(&app, show, 10, 30, 600, true).await;
    let names = buyers("replay", 30);
    for name in &names[..20] {
        join(&app, &app.buyer(name), show).await;
    }
    advance_to(&app, starts + Duration::seconds(20));
    for name in &names[20..] {
        join(&app, &app.buyer(name), show).await;
    }
    set_rate(&app, show, 90).await;
    advance_to(&app, app.clock_now() + Duration::seconds(5));
    let before = standings(&app, show, &names).await;
    advance_to(&again, app.clock_now());
    let after = standings(&again, show, &names).await;
    assert_eq!(
        before, after,
        "the same numbers and admissions from the log"
    );
    assert_eq!(overview(&again, show).await["admit_per_minute"], 90);
    app.stop().await;
    again.stop().await;
}

/// Each buyer's number and admission end, read on `app`.
async fn standings(app: &TestApp, show: &str, names: &[String]) -> Vec<(Value, Value)> {
    let mut all = Vec::new();
    for name in names {
        let body = me(app, &app.buyer(name), show).await.body;
        all.push((body["position"].clone(), body["admitted_until"].clone()));
    }
    all
}

async fn queue_stream_tells_the_buyer_of_the_admission(env: TestEnv) {
    let app = env.spawn().await;
    let show = "q-stream";
    // Sixty a minute: one a second.
    let starts = room_show(&app, show, 10, 60, 600, true).await;
    let tokens: Vec<String> = buyers("stream", 3).iter().map(|b| app.buyer(b)).collect();
    for token in &tokens {
        join(&app, token, show).await;
    }
    advance_to(&app, starts);
    // The last in line: numbered 3, admitted three seconds after the start.
    let mut last = None;
    for token in &tokens {
        if position(&me(&app, token, show).await) == 3 {
            last = Some(token.clone());
        }
    }
    let token = last.expect("a buyer numbered 3");
    let response = app
        .client
        .get(format!("{}/v1/shows/{show}/queue/me/stream", app.base))
        .bearer_auth(&token)
        .send()
        .await
        .expect("stream opens");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut stream = SseReader::new(response);
    let first = stream.next_event().await;
    assert_eq!(first.0, "queue");
    assert_eq!(first.1["position"], 3);
    assert_eq!(first.1["status"], "waiting");
    let mut seen_ahead = vec![first.1["ahead"].as_u64().unwrap()];
    loop {
        let (name, data) = stream.next_event().await;
        assert_eq!(name, "queue");
        match data["status"].as_str() {
            Some("waiting") => seen_ahead.push(data["ahead"].as_u64().unwrap()),
            Some("admitted") => {
                assert!(data["admitted_until"].is_string());
                break;
            }
            other => panic!("unexpected {other:?}: {data}"),
        }
    }
    // The stream told the buyer the queue moving before the admission: two
    // ahead at the start, then fewer, never more.
    assert_eq!(seen_ahead[0], 2, "{seen_ahead:?}");
    assert!(seen_ahead.iter().any(|&a| a < 2), "{seen_ahead:?}");
    assert!(
        seen_ahead.windows(2).all(|w| w[0] >= w[1]),
        "{seen_ahead:?}"
    );
    // And the buyer holds.
    let held = app.hold(&token, show, &["S1"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    // Without a token, or not in the queue: no stream.
    let path = format!("/v1/shows/{show}/queue/me/stream");
    app.call(Method::GET, &path, None, None, &[])
        .await
        .expect_problem(401, "unauthorized");
    app.call(
        Method::GET,
        &path,
        Some(&app.buyer("stream-none")),
        None,
        &[],
    )
    .await
    .expect_problem(404, "queue_entry_not_found");
    app.stop().await;
}

/// Reads server-sent events off a response: `(event name, data as JSON)`.
struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    fn new(response: reqwest::Response) -> Self {
        Self {
            response,
            buffer: String::new(),
        }
    }

    async fn next_event(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return (name, serde_json::from_str(&data).expect("JSON data"));
            }
            let chunk =
                tokio::time::timeout(std::time::Duration::from_secs(30), self.response.chunk())
                    .await
                    .expect("an event within 30 s")
                    .expect("stream readable")
                    .expect("stream still open");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
