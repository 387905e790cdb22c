//! Waiting lists over HTTP (issue #36): a freed seat goes to the first
//! entry it satisfies before any public buyer can take it (released,
//! expired at its instant, cancelled), two instances never offer a seat
//! twice nor skip an entry, an offer lapses and passes on, and the waiting list
//! survives replay.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::checkout::hold_for;
use crate::support::{seat_id, show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_public_buyer_racing_every_freed_seat_never_wins_one_an_entry_wants,
        two_instances_never_offer_one_seat_twice_nor_skip_an_entry,
        an_offer_lapses_and_passes_on_and_an_entry_that_left_is_never_offered,
        the_waitlist_and_its_offers_are_the_same_after_replay,
        an_offer_is_told_to_a_webhook_as_waitlist_offered,
        an_entry_at_its_buyers_limit_keeps_its_place_and_the_next_is_offered,
        buyers_joining_at_once_each_get_one_number,
        bad_waitlist_bodies_are_refused_naming_the_field,
        a_pools_freed_places_go_to_the_waitlist_in_order_and_none_is_sniped,
        two_instances_offer_a_pools_freed_places_once_each,
    ]
}

/// How long the tests' offers last.
const OFFER_SECONDS: i64 = 60;

/// A show of `seats` seats (ten a section) keeping a waiting list.
async fn show_with_waitlist(app: &TestApp, show: &str, seats: usize, ttl: u32) {
    let mut body = show_body(seats, ttl);
    body["waitlist"] = json!({"offer_seconds": OFFER_SECONDS});
    app.create_show_from(show, &body).await;
}

/// A show of one seat and a pool `floor` of `capacity` places in two
/// shards, keeping a waiting list.
async fn pool_show_with_waitlist(app: &TestApp, show: &str, capacity: u32, ttl: u32) {
    let mut body = show_body(1, ttl);
    body["pools"] =
        json!([{"pool_id": "floor", "capacity": capacity, "price_cents": 3000, "shards": 2}]);
    body["waitlist"] = json!({"offer_seconds": OFFER_SECONDS});
    app.create_show_from(show, &body).await;
}

async fn hold_places(app: &TestApp, token: &str, show: &str, quantity: u32) -> Answer {
    let body = json!({"pool_id": "floor", "quantity": quantity});
    app.hold_call(token.to_owned(), show, body).await
}

/// The pool's public figures: (available, held).
async fn floor_figures(app: &TestApp, show: &str) -> (Value, Value) {
    let floor = app.availability(show).await.body["pools"][0].clone();
    (floor["available"].clone(), floor["held"].clone())
}

async fn join(app: &TestApp, token: &str, show: &str, body: Value) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/waitlist"),
        Some(token),
        Some(&body),
        &[],
    )
    .await
}

async fn waitlist(app: &TestApp, show: &str) -> Value {
    let answer = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/waitlist"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body
}

async fn entry(app: &TestApp, token: &str, entry_id: &str) -> Answer {
    app.call(
        Method::GET,
        &format!("/v1/waitlist/{entry_id}"),
        Some(token),
        None,
        &[],
    )
    .await
}

/// Holds every seat of the show, one buyer a seat: `h{n}` holds `S{n}`.
async fn sell_out(app: &TestApp, show: &str, seats: usize) -> Vec<(String, String)> {
    let mut holds = Vec::new();
    for n in 1..=seats {
        let token = app.buyer(&format!("h{n}"));
        let hold_id = hold_for(app, &token, show, &[&seat_id(n)]).await;
        holds.push((token, hold_id));
    }
    holds
}

/// The holder releases its hold (204).
async fn release(app: &TestApp, token: &str, hold_id: &str) {
    let path = format!("/v1/holds/{hold_id}");
    let released = app
        .call(Method::DELETE, &path, Some(token), None, &[])
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT, "{}", released.body);
}

/// `w{n}` joins for one seat, in order; their entry ids.
async fn join_in_order(app: &TestApp, show: &str, count: usize) -> Vec<String> {
    let mut entries = Vec::new();
    for n in 1..=count {
        let joined = join(
            app,
            &app.buyer(&format!("w{n}")),
            show,
            json!({"quantity": 1}),
        )
        .await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
        assert_eq!(joined.body["position"], json!(n));
        entries.push(joined.str("entry_id"));
    }
    entries
}

/// A public buyer's hold of `seat` is refused: the waiting list is owed it.
async fn public_is_refused(app: &TestApp, show: &str, seat: &str) {
    // A buyer of its own for each seat: one buyer at machine speed would
    // meet the per-buyer rate limit, not the waiting list.
    let public = app.buyer(&format!("sniper-{seat}"));
    let seats = [seat];
    let (tried, judged) = tokio::join!(
        app.hold(&public, show, &seats, None),
        app.waitlists.run_once()
    );
    judged.expect("judged");
    tried.expect_problem(409, "seat_taken");
}

/// How many times two instances judge together: a judgement that lost a
/// conflict to the other is judged again the next time.
const JUDGED_TOGETHER: usize = 3;

/// Both instances judge at once, `JUDGED_TOGETHER` times over; a judgement
/// may be busy (it lost the waiting list to the other), never fail otherwise.
async fn judge_together(a: &TestApp, b: &TestApp) {
    for _ in 0..JUDGED_TOGETHER {
        let (x, y) = tokio::join!(a.waitlists.run_once(), b.waitlists.run_once());
        for judged in [x, y] {
            match judged {
                Ok(_) | Err(booking::command::waitlist::WaitlistError::Busy) => {}
                Err(other) => panic!("judged: {other}"),
            }
        }
    }
}

/// Every entry of `entries` offered exactly the seat it is paired with.
async fn offered(app: &TestApp, entries: &[(String, String)]) {
    for (entry_id, seat) in entries {
        let found = entry(app, &app.admin(), entry_id).await;
        assert_eq!(found.status, StatusCode::OK, "{}", found.body);
        assert_eq!(found.body["status"], "offered", "{}", found.body);
        assert_eq!(found.body["seats"], json!([seat]), "{}", found.body);
    }
}

async fn a_public_buyer_racing_every_freed_seat_never_wins_one_an_entry_wants(env: TestEnv) {
    const SEATS: usize = 99;
    let app = env.spawn().await;
    // Holds last less than offers: the holds' expiry below leaves the
    // offers made before it standing.
    show_with_waitlist(&app, "race", SEATS, 30).await;
    let holds = sell_out(&app, "race", SEATS).await;
    let entries = join_in_order(&app, "race", SEATS).await;
    // Released: seats 1..=33, one at a time, each raced by a public buyer
    // while the waiting list is judged.
    let mut expected = Vec::new();
    for n in 1..=33 {
        let (token, hold_id) = &holds[n - 1];
        release(&app, token, hold_id).await;
        public_is_refused(&app, "race", &seat_id(n)).await;
        expected.push((entries[n - 1].clone(), seat_id(n)));
    }
    // Cancelled: seats 34..=66 bought, then their bookings cancelled.
    for n in 34..=66 {
        let (token, hold_id) = &holds[n - 1];
        let bought = app.purchase(token, hold_id, "pm_sim_ok").await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
        let path = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
        let cancelled = app.call(Method::POST, &path, Some(token), None, &[]).await;
        assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
        public_is_refused(&app, "race", &seat_id(n)).await;
        expected.push((entries[n - 1].clone(), seat_id(n)));
    }
    // Expired: the rest, at the instant of their expiry (no event yet).
    app.clock.advance(chrono::Duration::seconds(30));
    for n in 67..=SEATS {
        let public = app.buyer(&format!("early-{n}"));
        app.hold(&public, "race", &[&seat_id(n)], None)
            .await
            .expect_problem(409, "seat_taken");
        let statuses = app.seat_statuses("race").await;
        assert_eq!(
            statuses[&seat_id(n)],
            "held",
            "owed to the waiting list, never available"
        );
    }
    app.waitlists.run_once().await.expect("judged");
    for n in 67..=SEATS {
        public_is_refused(&app, "race", &seat_id(n)).await;
        expected.push((entries[n - 1].clone(), seat_id(n)));
    }
    offered(&app, &expected).await;
    let counts = &waitlist(&app, "race").await["counts"];
    assert_eq!(counts["offered"], json!(SEATS), "{counts}");
    app.stop().await;
}

async fn two_instances_never_offer_one_seat_twice_nor_skip_an_entry(env: TestEnv) {
    const SEATS: usize = 20;
    let (a, b) = env.spawn_pair().await;
    show_with_waitlist(&a, "pair", SEATS, 600).await;
    let holds = sell_out(&a, "pair", SEATS).await;
    let entries = join_in_order(&b, "pair", SEATS).await;
    for (n, (token, hold_id)) in holds.iter().enumerate() {
        let app = if n % 2 == 0 { &a } else { &b };
        release(app, token, hold_id).await;
    }
    // Both judge at once, several times over.
    judge_together(&a, &b).await;
    let body = waitlist(&a, "pair").await;
    let mut seats = BTreeSet::new();
    for (n, listed) in body["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .enumerate()
    {
        assert_eq!(listed["entry_id"], json!(entries[n]));
        assert_eq!(listed["status"], "offered", "no entry skipped: {listed}");
        let offered = listed["seats"].as_array().expect("seats");
        assert_eq!(offered.len(), 1);
        assert!(
            seats.insert(offered[0].to_string()),
            "offered twice: {listed}"
        );
        // The offer is a hold in the buyer's name.
        let token = a.buyer(&format!("w{}", n + 1));
        let hold = a
            .call(
                Method::GET,
                &format!("/v1/holds/{}", listed.str_at("hold_id")),
                Some(&token),
                None,
                &[],
            )
            .await;
        assert_eq!(hold.status, StatusCode::OK, "{}", hold.body);
        assert_eq!(
            (hold.body["offer"].clone(), hold.body["status"].clone()),
            (json!(true), json!("held"))
        );
    }
    assert_eq!(seats.len(), SEATS);
    a.stop().await;
    b.stop().await;
}

trait StrAt {
    fn str_at(&self, field: &str) -> String;
}

impl StrAt for Value {
    fn str_at(&self, field: &str) -> String {
        self[field].as_str().unwrap_or_default().to_owned()
    }
}

async fn an_offer_lapses_and_passes_on_and_an_entry_that_left_is_never_offered(env: TestEnv) {
    let app = env.spawn().await;
    show_with_waitlist(&app, "lapse", 2, 600).await;
    let holds = sell_out(&app, "lapse", 2).await;
    let entries = join_in_order(&app, "lapse", 3).await;
    // While everything is held, joining again with the same body is the
    // same entry; another ask is refused naming the entry.
    let w1 = app.buyer("w1");
    let again = join(&app, &w1, "lapse", json!({"quantity": 1})).await;
    assert_eq!(
        (again.status, again.str("entry_id")),
        (StatusCode::OK, entries[0].clone())
    );
    join(&app, &w1, "lapse", json!({"quantity": 2}))
        .await
        .expect_problem(409, "waitlist_entry_exists");
    // w2 leaves: never offered. Another buyer may not read or remove w3's.
    let w2 = app.buyer("w2");
    let left = app
        .call(
            Method::DELETE,
            &format!("/v1/waitlist/{}", entries[1]),
            Some(&w2),
            None,
            &[],
        )
        .await;
    assert_eq!(left.status, StatusCode::NO_CONTENT, "{}", left.body);
    entry(&app, &w2, &entries[2])
        .await
        .expect_problem(404, "waitlist_entry_not_found");
    // S1 freed: w1 is offered it.
    let (h1, hold1) = &holds[0];
    release(&app, h1, hold1).await;
    app.waitlists.run_once().await.expect("judged");
    let first = entry(&app, &w1, &entries[0]).await;
    assert_eq!(
        (first.body["status"].clone(), first.body["seats"].clone()),
        (json!("offered"), json!(["S1"]))
    );
    // The offer lapses: S1 passes to w3 (w2 left), w1 reads lapsed.
    app.clock.advance(chrono::Duration::seconds(OFFER_SECONDS));
    app.waitlists.run_once().await.expect("judged");
    assert_eq!(entry(&app, &w1, &entries[0]).await.body["status"], "lapsed");
    assert_eq!(entry(&app, &w2, &entries[1]).await.body["status"], "left");
    let w3 = app.buyer("w3");
    let third = entry(&app, &w3, &entries[2]).await;
    assert_eq!(
        (third.body["status"].clone(), third.body["seats"].clone()),
        (json!("offered"), json!(["S1"]))
    );
    // w3 buys it: booked. S2 freed with nobody left waiting: back on sale.
    let bought = app.purchase(&w3, &third.str("hold_id"), "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(entry(&app, &w3, &entries[2]).await.body["status"], "booked");
    let (h2, hold2) = &holds[1];
    release(&app, h2, hold2).await;
    // Judged before the release is answered: on sale again at once, as on
    // a show without a list.
    assert_eq!(app.seat_statuses("lapse").await["S2"], "available");
    let late = app.buyer("late-hold");
    let again = app.hold(&late, "lapse", &["S2"], None).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    release(&app, &late, &again.str("hold_id")).await;
    // Now S2 is available: a join for one seat is told to hold it.
    join(&app, &app.buyer("late"), "lapse", json!({"quantity": 1}))
        .await
        .expect_problem(409, "available_now");
    app.stop().await;
}

async fn the_waitlist_and_its_offers_are_the_same_after_replay(env: TestEnv) {
    use booking::catalog::ShowCatalog;
    use booking::rebuild::replay::replay;
    use booking::store::Projection;
    let app = env.spawn().await;
    show_with_waitlist(&app, "again", 4, 600).await;
    let holds = sell_out(&app, "again", 4).await;
    join_in_order(&app, "again", 3).await;
    for (token, hold_id) in &holds[..2] {
        release(&app, token, hold_id).await;
    }
    app.waitlists.run_once().await.expect("judged");
    let before = waitlist(&app, "again").await;
    assert_eq!(before["counts"]["offered"], json!(2), "{before}");
    let catalog = ShowCatalog::new(domain::money::Currency::EUR, app.store.shows());
    replay(
        &app.store.log(),
        &app.store.projections(),
        &catalog,
        &Projection::ALL,
    )
    .await
    .expect("replay");
    let fresh = env.spawn_at(app.database_url.clone()).await;
    assert_eq!(
        waitlist(&fresh, "again").await,
        before,
        "the same after replay"
    );
    fresh.stop().await;
    app.stop().await;
}

async fn an_offer_is_told_to_a_webhook_as_waitlist_offered(env: TestEnv) {
    use crate::receiver::{Mode, Receiver};
    use crate::webhooks::{quick, register, WAIT};
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    register(&app, &receiver.url, &["waitlist.offered"]).await;
    show_with_waitlist(&app, "told", 1, 600).await;
    let holds = sell_out(&app, "told", 1).await;
    let entries = join_in_order(&app, "told", 1).await;
    let (token, hold_id) = &holds[0];
    release(&app, token, hold_id).await;
    app.waitlists.run_once().await.expect("judged");
    let requests = receiver
        .wait_for("waitlist.offered", WAIT, |r| !r.is_empty())
        .await;
    let event = requests[0].json();
    assert_eq!(event["type"], "waitlist.offered");
    assert_eq!(event["data"]["entry_id"], json!(entries[0]));
    assert_eq!(event["data"]["buyer"], "w1");
    assert_eq!(event["data"]["hold"]["seats"], json!(["S1"]));
    assert_eq!(event["data"]["hold"]["status"], "held");
    assert_eq!(event["data"]["hold"]["offer"], true);
    app.stop().await;
}

async fn an_entry_at_its_buyers_limit_keeps_its_place_and_the_next_is_offered(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = show_body(2, 600);
    body["waitlist"] = json!({"offer_seconds": OFFER_SECONDS});
    body["max_seats_per_buyer"] = json!(1);
    app.create_show_from("limit", &body).await;
    // w1 holds S2 (its limit), h1 holds S1; both w1 and w2 wait.
    let (h1, w1) = (app.buyer("h1"), app.buyer("w1"));
    let hold1 = hold_for(&app, &h1, "limit", &["S1"]).await;
    hold_for(&app, &w1, "limit", &["S2"]).await;
    let entries = join_in_order(&app, "limit", 2).await;
    release(&app, &h1, &hold1).await;
    app.waitlists.run_once().await.expect("judged");
    let first = entry(&app, &w1, &entries[0]).await;
    assert_eq!(
        (first.body["status"].clone(), first.body["position"].clone()),
        (json!("waiting"), json!(1))
    );
    let second = entry(&app, &app.buyer("w2"), &entries[1]).await;
    assert_eq!(
        (second.body["status"].clone(), second.body["seats"].clone()),
        (json!("offered"), json!(["S1"]))
    );
    app.stop().await;
}

async fn buyers_joining_at_once_each_get_one_number(env: TestEnv) {
    const BUYERS: usize = 60;
    let app = std::sync::Arc::new(env.spawn().await);
    show_with_waitlist(&app, "crowd", 1, 600).await;
    sell_out(&app, "crowd", 1).await;
    // Each buyer joins twice at once (the same body), and one asks twice
    // differently.
    let mut calls = Vec::new();
    for n in 0..BUYERS * 2 + 1 {
        let app = app.clone();
        let quantity = if n == BUYERS * 2 { 2 } else { 1 };
        let buyer = format!("c{}", n % BUYERS);
        calls.push(async move {
            let token = app.buyer(&buyer);
            join(&app, &token, "crowd", json!({"quantity": quantity})).await
        });
    }
    let answers = crate::support::fire_at_once(calls).await;
    let mut numbers = BTreeSet::new();
    let mut ids: std::collections::HashMap<String, String> = Default::default();
    let mut refused = 0;
    for (n, answer) in answers.iter().enumerate() {
        if answer.status == StatusCode::CONFLICT {
            // Only c0 asked two ways: whichever came first stands.
            assert_eq!(n % BUYERS, 0, "{}", answer.body);
            answer.expect_problem(409, "waitlist_entry_exists");
            refused += 1;
            continue;
        }
        assert!(
            matches!(answer.status, StatusCode::CREATED | StatusCode::OK),
            "{}",
            answer.body
        );
        let id = answer.str("entry_id");
        if let Some(first) = ids.insert(format!("c{}", n % BUYERS), id.clone()) {
            assert_eq!(first, id, "one entry per buyer");
        }
        numbers.insert(answer.body["number"].as_u64().unwrap_or_default());
    }
    assert!((1..=2).contains(&refused), "{refused} refused");
    assert_eq!(numbers, (1..=BUYERS as u64).collect::<BTreeSet<_>>());
    let listed = waitlist(&app, "crowd").await;
    assert_eq!(listed["counts"]["waiting"], json!(BUYERS));
}

async fn bad_waitlist_bodies_are_refused_naming_the_field(env: TestEnv) {
    let app = env.spawn().await;
    show_with_waitlist(&app, "bad", 2, 600).await;
    sell_out(&app, "bad", 2).await;
    let buyer = app.buyer("b");
    for (body, field) in [
        (json!({}), "quantity"),
        (json!({"quantity": 0}), "quantity"),
        (json!({"quantity": 11}), "quantity"),
        (json!({"quantity": "two"}), "quantity"),
        (json!({"quantity": 1, "section": "Z"}), "section"),
        (json!({"quantity": 1, "category": "nope"}), "category"),
        (json!({"quantity": 1, "pool_id": "nope"}), "pool_id"),
        (
            json!({"quantity": 1, "pool_id": "floor", "adjacent": true}),
            "pool_id",
        ),
        (json!({"quantity": 1, "adjacent": "yes"}), "adjacent"),
        (json!({"quantity": 1, "colour": "red"}), "colour"),
    ] {
        let answer = join(&app, &buyer, "bad", body.clone()).await;
        answer.expect_problem(422, "validation_failed");
        assert!(
            answer.str("detail").contains(field),
            "{body}: {}",
            answer.body
        );
    }
    assert_eq!(
        waitlist(&app, "bad").await["entries"],
        json!([]),
        "nothing joined"
    );
    // A show without a waiting list; an entry that is not one.
    app.create_show("plain", 1, 600).await;
    join(&app, &buyer, "plain", json!({"quantity": 1}))
        .await
        .expect_problem(409, "no_waitlist");
    for id in [
        "nope",
        "bad.not-a-uuid",
        "bad.00000000-0000-0000-0000-000000000000",
    ] {
        entry(&app, &buyer, id)
            .await
            .expect_problem(404, "waitlist_entry_not_found");
    }
    app.stop().await;
}

async fn a_pools_freed_places_go_to_the_waitlist_in_order_and_none_is_sniped(env: TestEnv) {
    let app = env.spawn().await;
    pool_show_with_waitlist(&app, "ga-list", 4, 30).await;
    // h1 holds two places, h2 and h3 one each: sold out.
    let mut holds = Vec::new();
    for (who, quantity) in [("h1", 2), ("h2", 1), ("h3", 1)] {
        let token = app.buyer(who);
        let held = hold_places(&app, &token, "ga-list", quantity).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
        holds.push((token, held.str("hold_id")));
    }
    // w1 waits for three places, w2 for two, w3 for one.
    let mut entries = Vec::new();
    for (n, quantity) in [(1, 3), (2, 2), (3, 1)] {
        let token = app.buyer(&format!("w{n}"));
        let body = json!({"pool_id": "floor", "quantity": quantity});
        let joined = join(&app, &token, "ga-list", body).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
        assert_eq!(joined.body["pool_id"], "floor");
        entries.push((token, joined.str("entry_id")));
    }
    let status_of = |n: usize| {
        let (token, entry_id) = &entries[n - 1];
        let app = &app;
        async move { entry(app, token, entry_id).await.body }
    };
    // h1 releases two: w1 wants three and keeps waiting; w2 is offered
    // both before the release is answered. A public buyer gets none.
    release(&app, &holds[0].0, &holds[0].1).await;
    let w2 = status_of(2).await;
    assert_eq!(
        (w2["status"].clone(), w2["places"].clone()),
        (json!("offered"), json!(2))
    );
    let w1 = status_of(1).await;
    assert_eq!(
        (w1["status"].clone(), w1["position"].clone()),
        (json!("waiting"), json!(1))
    );
    hold_places(&app, &app.buyer("sniper-1"), "ga-list", 1)
        .await
        .expect_problem(409, "sold_out");
    // h2 buys its place and cancels: w3 is offered it.
    let bought = app.purchase(&holds[1].0, &holds[1].1, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let path = format!("/v1/bookings/{}/cancel", bought.str("booking_id"));
    let cancelled = app
        .call(Method::POST, &path, Some(&holds[1].0), None, &[])
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let w3 = status_of(3).await;
    assert_eq!(
        (w3["status"].clone(), w3["places"].clone()),
        (json!("offered"), json!(1))
    );
    // h3's hold expires: at that instant, with no event, its place is owed
    // to the waiting list (held, never available) and a public hold is refused.
    app.clock.advance(chrono::Duration::seconds(30));
    assert_eq!(floor_figures(&app, "ga-list").await, (json!(0), json!(4)));
    hold_places(&app, &app.buyer("sniper-2"), "ga-list", 1)
        .await
        .expect_problem(409, "sold_out");
    // No waiting entry wants one place (w1 asks three): the waiting list passes it
    // on to sale.
    app.waitlists.run_once().await.expect("judged");
    let late = hold_places(&app, &app.buyer("late"), "ga-list", 1).await;
    assert_eq!(late.status, StatusCode::CREATED, "{}", late.body);
    // The offers to w2 and w3 lapse: their three places go to w1, who buys.
    app.clock
        .advance(chrono::Duration::seconds(OFFER_SECONDS - 30));
    app.waitlists.run_once().await.expect("judged");
    let w1 = status_of(1).await;
    assert_eq!(
        (w1["status"].clone(), w1["places"].clone()),
        (json!("offered"), json!(3))
    );
    for n in [2, 3] {
        assert_eq!(status_of(n).await["status"], "lapsed");
    }
    let bought = app
        .purchase(&entries[0].0, &w1.str_at("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(status_of(1).await["status"], "booked");
    // `late`'s hold expired with the offers: nobody waits, back on sale.
    assert_eq!(floor_figures(&app, "ga-list").await, (json!(1), json!(0)));
    app.stop().await;
}

async fn two_instances_offer_a_pools_freed_places_once_each(env: TestEnv) {
    const PLACES: u32 = 12;
    let (a, b) = env.spawn_pair().await;
    pool_show_with_waitlist(&a, "ga-pair", PLACES, 600).await;
    for n in 1..=PLACES {
        let token = a.buyer(&format!("h{n}"));
        let held = hold_places(&a, &token, "ga-pair", 1).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    }
    let mut entries = Vec::new();
    for n in 1..=PLACES {
        let body = json!({"pool_id": "floor", "quantity": 1});
        let joined = join(&b, &b.buyer(&format!("w{n}")), "ga-pair", body).await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
        entries.push(joined.str("entry_id"));
    }
    // Every hold expires at once (no request judges an expiry): the two
    // instances find all twelve places owed and judge them together.
    for app in [&a, &b] {
        app.clock.advance(chrono::Duration::seconds(600));
    }
    judge_together(&a, &b).await;
    let body = waitlist(&a, "ga-pair").await;
    let listed = body["entries"].as_array().expect("entries");
    assert_eq!(listed.len(), entries.len());
    for (n, listed) in listed.iter().enumerate() {
        assert_eq!(listed["entry_id"], json!(entries[n]));
        assert_eq!(listed["status"], "offered", "no entry skipped: {listed}");
        assert_eq!(listed["places"], json!(1), "offered once: {listed}");
    }
    // Every place is held by an offer: none offered twice, none for sale.
    assert_eq!(
        floor_figures(&a, "ga-pair").await,
        (json!(0), json!(PLACES))
    );
    a.stop().await;
    b.stop().await;
}
