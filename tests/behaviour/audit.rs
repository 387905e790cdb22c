//! The log as the audit trail: projector, replay, verify, sweeper, history,
//! time travel.

use std::process::Command;

use booking::catalog::ShowCatalog;
use booking::rebuild::projector::PROJECTIONS_CHECKPOINT;
use booking::rebuild::replay::replay;
use booking::store::{AppendBatch, AppendOutcome, NewEvent, Projection};
use chrono::{DateTime, Utc};
use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::Connection;

use crate::support::{Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        the_projector_repairs_rows_a_crash_or_another_writer_left_behind,
        replay_after_10000_random_commands_equals_the_live_projections,
        replay_of_a_log_longer_than_one_fold_step_equals_the_live_projections,
        availability_as_of_a_past_instant_comes_from_the_log,
        history_lists_a_seats_events_and_pages_a_shows_log,
        the_sweeper_records_expiries_and_changes_no_answer,
    ]
}

/// Tests that only make sense on PostgreSQL (SQLite has one writer, so no
/// transaction can commit "late").
pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![a_late_commit_is_never_skipped_by_the_projector]
}

/// A HoldPlaced event as a foreign writer (or a crash before the read-model
/// write) would leave it: in the log, with no row written.
pub(crate) fn bare_hold_event(
    show: &str,
    seat: &str,
    sequence: i64,
    hold: &str,
    until: DateTime<Utc>,
) -> NewEvent {
    let payload = json!({"HoldPlaced": {"hold_id": hold, "buyer": "ghost", "expires_at": until}});
    NewEvent {
        aggregate_type: "Seat",
        aggregate_id: format!("{show}/{seat}"),
        sequence,
        event_type: "HoldPlaced".into(),
        event_version: "1.0".into(),
        payload: serde_json::value::to_raw_value(&payload).unwrap(),
        metadata: serde_json::value::RawValue::from_string("{}".into()).unwrap(),
        show_id: domain::ids::ShowId::parse(show).unwrap(),
    }
}

/// Runs the real `booking verify` against the test's database.
pub(crate) fn verify_exit_code(app: &TestApp) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_booking"))
        .arg("verify")
        .env("DATABASE_URL", &app.database_url)
        .env("RUST_LOG", "error")
        .output()
        .expect("booking verify runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

async fn the_projector_repairs_rows_a_crash_or_another_writer_left_behind(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("repair", 3, 480).await;
    let alice = app.buyer("alice");
    assert_eq!(
        app.hold(&alice, "repair", &["S1"], None).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        app.projector.run_once().await.unwrap().cursor,
        app.store.log().head_cursor().await.unwrap()
    );
    let (code, _) = verify_exit_code(&app);
    assert_eq!(code, 0, "consistent to begin with");

    let hold = uuid::Uuid::new_v4().to_string();
    let until = app.clock_now() + chrono::Duration::minutes(5);
    let mut batch = AppendBatch::new(Utc::now());
    batch
        .events
        .push(bare_hold_event("repair", "S2", 1, &hold, until));
    assert_eq!(
        app.store.log().append(&batch).await.unwrap(),
        AppendOutcome::Appended
    );
    assert_eq!(
        app.seat_statuses("repair").await["S2"],
        "available",
        "the row was not written"
    );
    let (code, report) = verify_exit_code(&app);
    assert_eq!(code, 1, "verify sees the difference: {report}");
    assert!(report.contains("seat_availability"), "{report}");

    let pass = app.projector.run_once().await.unwrap();
    assert_eq!(pass.events, 1);
    assert_eq!(app.seat_statuses("repair").await["S2"], "held");
    let (code, report) = verify_exit_code(&app);
    assert_eq!(code, 0, "{report}");
    // Applying again changes nothing (rows are guarded by stream sequence).
    assert_eq!(app.projector.run_once().await.unwrap().events, 0);
    app.stop().await;
}

/// A show's appends commit in the order of its positions: a writer of
/// the show waits for the one before it, so the projector never passes a
/// transaction still open; and a writer of another show does not wait, nor
/// does the projector's progress on that show.
async fn a_late_commit_is_never_skipped_by_the_projector(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("late", 2, 480).await;
    app.create_show("beside", 2, 480).await;
    let before = app.projector.run_once().await.unwrap().cursor;
    let until = app.clock_now() + chrono::Duration::minutes(5);

    // Writer A opens a transaction and appends, and does not commit yet.
    let mut writer_a = sqlx::PgConnection::connect(&app.database_url)
        .await
        .unwrap();
    sqlx::query("BEGIN").execute(&mut writer_a).await.unwrap();
    let a_event = json!({"show_id": "late", "recorded_at_us": Utc::now().timestamp_micros(), "events": [{
        "aggregate_type": "Seat", "aggregate_id": "late/S1", "sequence": 1,
        "event_type": "HoldPlaced", "event_version": "1.0",
        "payload": {"HoldPlaced": {"hold_id": uuid::Uuid::new_v4(), "buyer": "a", "expires_at": until}},
        "metadata": {}, "show_id": "late"}]});
    sqlx::query("SELECT booking_append('late', $1::jsonb)")
        .bind(a_event.to_string())
        .execute(&mut writer_a)
        .await
        .unwrap();

    // Writer B appends to the same show: it waits for A.
    let hold_event = |show: &str| {
        let mut batch = AppendBatch::new(Utc::now());
        let hold = uuid::Uuid::new_v4().to_string();
        batch
            .events
            .push(bare_hold_event(show, "S2", 1, &hold, until));
        batch
    };
    let log = app.store.log();
    let b_batch = hold_event("late");
    let writer_b = tokio::spawn(async move { log.append(&b_batch).await });
    // Writer C appends to another show, and commits at once.
    assert_eq!(
        app.store.log().append(&hold_event("beside")).await.unwrap(),
        AppendOutcome::Appended
    );

    // The projector runs while A is open: it must not pass A, and it reads
    // the other show.
    let pass = app.projector.run_once().await.unwrap();
    assert_eq!(pass.cursor.of("late"), before.of("late"), "{pass:?}");
    assert_eq!(pass.cursor.of("beside"), app.head_of("beside").await);
    assert_eq!(app.seat_statuses("late").await["S2"], "available");
    assert_eq!(app.seat_statuses("beside").await["S2"], "held");
    assert!(
        !writer_b.is_finished(),
        "B waits for A, the show's writer before it"
    );

    sqlx::query("COMMIT").execute(&mut writer_a).await.unwrap();
    let b = writer_b.await.expect("writer B").expect("B's append");
    assert_eq!(b, AppendOutcome::Appended);
    let pass = app.projector.run_once().await.unwrap();
    assert_eq!(pass.events, 2, "A's event is applied, not skipped, and B's");
    assert_eq!(pass.cursor.of("late"), app.head_of("late").await);
    let statuses = app.seat_statuses("late").await;
    assert_eq!(
        (statuses["S1"].as_str(), statuses["S2"].as_str()),
        ("held", "held")
    );
    assert_eq!(
        app.store
            .log()
            .checkpoint(PROJECTIONS_CHECKPOINT)
            .await
            .unwrap()
            .cursor,
        pass.cursor
    );
    app.stop().await;
}

/// One random command against the service.
async fn random_command(
    app: &TestApp,
    rng_seed: u64,
    holds: &tokio::sync::Mutex<Vec<(String, String)>>,
    bookings: &tokio::sync::Mutex<Vec<(String, String)>>,
) {
    let (choice, buyer_n, seat_n, quantity) = {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rng_seed);
        (
            rng.gen_range(0..100u32),
            rng.gen_range(0..40u32),
            rng.gen_range(1..=60u32),
            rng.gen_range(1..=4u32),
        )
    };
    let buyer = format!("r{buyer_n}");
    let token = app.buyer(&buyer);
    match choice {
        0..=39 => {
            let seats: Vec<String> = (0..quantity)
                .map(|k| format!("S{}", (seat_n + k - 1) % 60 + 1))
                .collect();
            let body = json!({"seats": seats});
            let answer = app
                .call(
                    Method::POST,
                    "/v1/shows/replay/holds",
                    Some(&token),
                    Some(&body),
                    &[],
                )
                .await;
            if answer.status == StatusCode::CREATED {
                holds.lock().await.push((buyer, answer.str("hold_id")));
            }
        }
        40..=54 => {
            let body = json!({"pool_id": "floor", "quantity": quantity});
            let answer = app
                .call(
                    Method::POST,
                    "/v1/shows/replay/holds",
                    Some(&token),
                    Some(&body),
                    &[],
                )
                .await;
            if answer.status == StatusCode::CREATED {
                holds.lock().await.push((buyer, answer.str("hold_id")));
            }
        }
        55..=69 => {
            let picked = holds.lock().await.pop();
            if let Some((owner, hold_id)) = picked {
                let token = app.buyer(&owner);
                app.call(
                    Method::DELETE,
                    &format!("/v1/holds/{hold_id}"),
                    Some(&token),
                    None,
                    &[],
                )
                .await;
            }
        }
        70..=89 => {
            let picked = holds.lock().await.pop();
            if let Some((owner, hold_id)) = picked {
                let token = app.buyer(&owner);
                let answer = app.purchase(&token, &hold_id, "pm_sim_ok").await;
                if answer.status == StatusCode::CREATED {
                    bookings
                        .lock()
                        .await
                        .push((owner, answer.str("booking_id")));
                }
            }
        }
        90..=95 => {
            let picked = bookings.lock().await.pop();
            if let Some((owner, booking_id)) = picked {
                let token = app.buyer(&owner);
                app.call(
                    Method::POST,
                    &format!("/v1/bookings/{booking_id}/cancel"),
                    Some(&token),
                    None,
                    &[],
                )
                .await;
            }
        }
        _ => app.clock.advance(chrono::Duration::seconds(20)),
    }
}

async fn replay_after_10000_random_commands_equals_the_live_projections(env: TestEnv) {
    const COMMANDS: u64 = 10_000;
    const WORKERS: u64 = 8;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let mut show = crate::support::show_body(60, 60);
    show["pools"] = json!([{"pool_id": "floor", "capacity": 40, "price_cents": 3000, "shards": 4}]);
    let created = app
        .call(
            Method::PUT,
            "/v1/shows/replay",
            Some(&app.admin()),
            Some(&show),
            &[],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let holds = tokio::sync::Mutex::new(Vec::new());
    let bookings = tokio::sync::Mutex::new(Vec::new());
    let base_seed: u64 = rand::thread_rng().gen();
    let workers = (0..WORKERS).map(|w| {
        let (app, holds, bookings) = (&app, &holds, &bookings);
        async move {
            for i in (w..COMMANDS).step_by(WORKERS as usize) {
                random_command(app, base_seed.wrapping_add(i), holds, bookings).await;
            }
        }
    });
    futures::future::join_all(workers).await;
    // Some expiries recorded by the sweeper, too.
    app.clock.advance(chrono::Duration::seconds(120));
    app.sweeper.run_once().await.unwrap();
    let events = app.event_count().await;
    assert!(events > 2_000, "the commands did things: {events} events");

    replay_equals_live(&app, events, &format!("seed {base_seed}")).await;
    println!(
        "replay on {}: {events} events after {COMMANDS} commands",
        env.backend.name()
    );
    app.stop().await;
}

/// A log of more events than one step of the fold (`REBUILD_BATCH`), so
/// that the one scan of the log is folded in several steps and the rows of
/// a stream span them: holds of many seats placed, released and placed
/// again, some bought, some pool places held, some left held.
async fn replay_of_a_log_longer_than_one_fold_step_equals_the_live_projections(env: TestEnv) {
    const SEATS: usize = 1_000;
    const SEATS_PER_HOLD: usize = domain::limits::MAX_SEATS_PER_HOLD;
    const ROUNDS: usize = 6;
    // One buyer sends some 250 commands back to back, far past a buyer's
    // rate limit: a script building a long log, not a client under test.
    let app = env
        .spawn_with_rate_limits(booking::rate_limit::RateLimits::OFF)
        .await;
    app.create_show("long", SEATS, 3_600).await;
    let seats: Vec<String> = (1..=SEATS).map(crate::support::seat_id).collect();
    let buyer = app.buyer("long-buyer");
    let mut kept = Vec::new();
    for round in 0..ROUNDS {
        for (n, group) in seats.chunks(SEATS_PER_HOLD).enumerate() {
            let group: Vec<&str> = group.iter().map(String::as_str).collect();
            let hold = app.hold(&buyer, "long", &group, None).await;
            assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
            let hold_id = hold.str("hold_id");
            match (round + 1 == ROUNDS, n % 3) {
                (false, _) | (true, 0) => app.release(&buyer, &hold_id).await,
                (true, 1) => {
                    let bought = app.purchase(&buyer, &hold_id, "pm_sim_ok").await;
                    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
                }
                (true, _) => kept.push(hold_id),
            }
        }
    }
    for quantity in [3, 5, 7] {
        let hold = app
            .hold_call(
                buyer.clone(),
                "long",
                json!({"pool_id": "floor", "quantity": quantity}),
            )
            .await;
        assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    }
    assert!(!kept.is_empty(), "some holds are still held");
    let events = app.event_count().await;
    assert!(
        events as usize > booking::rebuild::fold::REBUILD_BATCH,
        "the log is longer than one fold step: {events} events"
    );

    replay_equals_live(&app, events, "a log longer than one fold step").await;
    app.stop().await;
}

/// Replays every projection of a log of `events` events and checks that
/// the rebuilt tables equal the live ones and that `booking verify` agrees.
async fn replay_equals_live(app: &TestApp, events: i64, context: &str) {
    let live = app.store.projections().dump_projections().await.unwrap();
    let catalog = ShowCatalog::new(domain::money::Currency::EUR, app.store.shows());
    let report = replay(
        &app.store.log(),
        &app.store.projections(),
        &catalog,
        &Projection::ALL,
    )
    .await
    .unwrap();
    assert_eq!(report.events as i64, events);
    let rebuilt = app.store.projections().dump_projections().await.unwrap();
    assert_eq!(
        live, rebuilt,
        "replay equals the live projections ({context})"
    );
    let (code, out) = verify_exit_code(app);
    assert_eq!(code, 0, "{out}");
}

async fn as_of(app: &TestApp, show: &str, at: &str) -> Answer {
    let at = at.replace('+', "%2B");
    app.call(
        Method::GET,
        &format!("/v1/shows/{show}/availability?as_of={at}"),
        Some(&app.admin()),
        None,
        &[],
    )
    .await
}

async fn availability_as_of_a_past_instant_comes_from_the_log(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("travel", 2, 600).await;
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let t0 = app.clock_now();
    let first = app.hold(&alice, "travel", &["S1"], None).await;
    app.clock.advance(chrono::Duration::seconds(60));
    let t_inside = app.clock_now();
    app.clock.advance(chrono::Duration::seconds(60));
    let released = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{}", first.str("hold_id")),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);
    app.clock.advance(chrono::Duration::seconds(60));
    let t_between = app.clock_now();
    app.clock.advance(chrono::Duration::seconds(60));
    assert_eq!(
        app.hold(&bob, "travel", &["S1"], None).await.status,
        StatusCode::CREATED
    );

    let status_at = |answer: &Answer| {
        answer.body["seats"][0]["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        status_at(&as_of(&app, "travel", &t0.to_rfc3339()).await),
        "available",
        "before any hold"
    );
    let inside = as_of(&app, "travel", &t_inside.to_rfc3339()).await;
    assert_eq!(inside.status, StatusCode::OK, "{}", inside.body);
    assert_eq!(status_at(&inside), "held");
    assert_eq!(
        inside.body["as_of"],
        json!(t_inside.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
    );
    assert_eq!(
        status_at(&as_of(&app, "travel", &t_between.to_rfc3339()).await),
        "available"
    );
    assert_eq!(
        app.seat_statuses("travel").await["S1"],
        "held",
        "and now held again"
    );

    let future = (app.clock_now() + chrono::Duration::hours(1)).to_rfc3339();
    as_of(&app, "travel", &future)
        .await
        .expect_problem(422, "validation_failed");
    let as_buyer = app
        .call(
            Method::GET,
            &format!(
                "/v1/shows/travel/availability?as_of={}",
                t0.to_rfc3339().replace('+', "%2B")
            ),
            Some(&alice),
            None,
            &[],
        )
        .await;
    as_buyer.expect_problem(403, "forbidden");
    app.stop().await;
}

async fn history_lists_a_seats_events_and_pages_a_shows_log(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("hist", 3, 60).await;
    let alice = app.buyer("alice");
    let hold = app
        .hold(&alice, "hist", &["S1", "S2"], Some("k-hist"))
        .await;
    // The purchase carries the client's own request id; the hold none.
    let purchased = app
        .call(
            Method::POST,
            &format!("/v1/holds/{}/purchase", hold.str("hold_id")),
            Some(&alice),
            Some(&json!({"payment_method": "pm_sim_ok"})),
            &[("x-request-id", "client-trace-7")],
        )
        .await;
    assert_eq!(purchased.status, StatusCode::CREATED, "{}", purchased.body);
    app.hold(&alice, "hist", &["S3"], None).await;
    let admin = app.admin();

    let seat = app
        .call(
            Method::GET,
            "/v1/shows/hist/seats/S1/history",
            Some(&admin),
            None,
            &[],
        )
        .await;
    assert_eq!(seat.status, StatusCode::OK, "{}", seat.body);
    let types: Vec<&str> = seat.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["HoldPlaced", "HoldConverted"]);
    let placed = &seat.body["events"][0];
    assert_eq!(placed["data"]["buyer"], "alice");
    assert_eq!(placed["metadata"]["actor"], "alice");
    assert_eq!(placed["metadata"]["idempotency_key"], "k-hist");
    // A request id is recorded when the client sent one (the service's own,
    // made up for a request without, is in the response and the log only).
    assert_eq!(placed["metadata"].get("request_id"), None, "{placed}");
    let converted = &seat.body["events"][1];
    assert_eq!(converted["metadata"]["request_id"], "client-trace-7");
    assert!(placed["recorded_at"].as_str().is_some());

    // The whole show, two events a page (paging never passes an open
    // transaction, so first let other tests' transactions end).
    let mut after = 0;
    let mut all: Vec<Value> = Vec::new();
    loop {
        let page = app
            .call(
                Method::GET,
                &format!("/v1/shows/hist/history?after={after}&limit=2"),
                Some(&admin),
                None,
                &[],
            )
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        all.extend(page.body["events"].as_array().unwrap().iter().cloned());
        match page.body["next_after"].as_i64() {
            Some(next) => after = next,
            None => break,
        }
    }
    let positions: Vec<i64> = all
        .iter()
        .map(|e| e["position"].as_i64().unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    let kinds: std::collections::BTreeSet<&str> = all
        .iter()
        .map(|e| e["stream_type"].as_str().unwrap())
        .collect();
    // The purchase issued a ticket per seat: their streams are the show's.
    assert_eq!(kinds, ["Checkout", "Seat", "Ticket"].into_iter().collect());
    assert_eq!(all.len() as i64, app.event_count().await);

    app.call(
        Method::GET,
        "/v1/shows/hist/seats/Z9/history",
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(404, "unknown_seat");
    app.call(
        Method::GET,
        "/v1/shows/hist/history",
        Some(&alice),
        None,
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    app.call(
        Method::GET,
        "/v1/shows/hist/history?limit=1001",
        Some(&admin),
        None,
        &[],
    )
    .await
    .expect_problem(422, "validation_failed");
    app.stop().await;
}

async fn the_sweeper_records_expiries_and_changes_no_answer(env: TestEnv) {
    let app = env.spawn().await;
    let mut show = crate::support::show_body(3, 60);
    show["pools"] = json!([{"pool_id": "floor", "capacity": 5, "price_cents": 3000, "shards": 1}]);
    let created = app
        .call(
            Method::PUT,
            "/v1/shows/sweep",
            Some(&app.admin()),
            Some(&show),
            &[],
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    let alice = app.buyer("alice");
    let seats = app.hold(&alice, "sweep", &["S1", "S2"], None).await;
    let body = json!({"pool_id": "floor", "quantity": 5});
    let places = app
        .call(
            Method::POST,
            "/v1/shows/sweep/holds",
            Some(&alice),
            Some(&body),
            &[],
        )
        .await;
    assert_eq!(places.status, StatusCode::CREATED);
    assert_eq!(
        app.sweeper.run_once().await.unwrap(),
        0,
        "nothing has expired yet"
    );

    app.clock.advance(chrono::Duration::seconds(61));
    let before = app.availability("sweep").await.body;
    let events = app.event_count().await;
    assert_eq!(app.sweeper.run_once().await.unwrap(), 2);
    assert_eq!(
        app.event_count().await,
        events + 3,
        "two seats and one shard"
    );
    let after = app.availability("sweep").await.body;
    assert_eq!(before["seats"], after["seats"]);
    assert_eq!(before["pools"], after["pools"]);
    for hold in [&seats, &places] {
        let read = app
            .call(
                Method::GET,
                &format!("/v1/holds/{}", hold.str("hold_id")),
                Some(&alice),
                None,
                &[],
            )
            .await;
        assert_eq!(read.body["status"], "expired");
    }
    let history = app
        .call(
            Method::GET,
            "/v1/shows/sweep/seats/S1/history",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    let last = history.body["events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["type"].as_str(), last["metadata"]["actor"].as_str()),
        (Some("HoldExpired"), Some("system:sweeper"))
    );
    assert_eq!(app.sweeper.run_once().await.unwrap(), 0, "each hold once");
    app.stop().await;
}
