//! Venues, price categories and ticket types: a chart created once and used
//! by shows, holds priced when they are decided, purchases charging that.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::audit::verify_exit_code;
use crate::support::{TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_venue_is_created_once_and_read_back,
        a_bad_venue_is_422_naming_the_field_and_stores_nothing,
        a_show_on_a_venue_answers_the_chart_and_its_prices,
        a_bad_show_on_a_venue_is_422_and_stores_nothing,
        a_hold_is_priced_by_category_and_ticket_type_and_its_purchase_charges_that,
        a_ticket_type_without_a_price_is_422_and_holds_nothing,
        a_hold_on_a_show_without_categories_has_its_seats_prices,
        replay_rebuilds_the_priced_holds,
        a_price_change_prices_holds_from_its_instant_and_earlier_holds_keep_theirs,
        a_bad_price_change_is_refused_and_changes_nothing,
        holds_racing_a_price_change_each_have_one_table,
        best_available_chooses_within_a_category_and_wheelchair_spaces_only_when_asked,
        the_demo_serves_a_20000_seat_arena_and_prints_where_to_see_it,
    ]
}

/// A small arena: a stage, two categories, two sections, six seats in two
/// rows (row 1 premium, row 2 standard, the last a wheelchair space) and a
/// standing pool.
pub fn venue_body() -> Value {
    let seat = |id: &str, row: &str, number: u32, x: f64, category: &str| {
        json!({"seat_id": id, "section": "A", "row": row, "number": number,
               "x": x, "y": if row == "1" { 100.0 } else { 130.0 }, "category": category})
    };
    let mut wheelchair = seat("A-2-3", "2", 3, 340.0, "standard");
    wheelchair["accessible"] = json!(true);
    json!({
        "name": "Riverside Arena",
        "stage": {"x": 250, "y": 20, "width": 200, "height": 40, "label": "Stage"},
        "categories": [
            {"category": "premium", "label": "Premium", "color": "#7b2cbf"},
            {"category": "standard", "label": "Standard", "color": "#2a9d8f"}
        ],
        "sections": [{"section": "A", "label": "Lower A"}, {"section": "B", "label": "Upper B"}],
        "seats": [
            seat("A-1-1", "1", 1, 300.0, "premium"),
            seat("A-1-2", "1", 2, 320.0, "premium"),
            seat("A-1-3", "1", 3, 340.0, "premium"),
            seat("A-2-1", "2", 1, 300.0, "standard"),
            seat("A-2-2", "2", 2, 320.0, "standard"),
            wheelchair,
        ],
        "pools": [{"pool_id": "floor", "capacity": 50, "category": "standard", "label": "Standing",
                   "area": {"x": 250, "y": 160, "width": 200, "height": 30}}]
    })
}

/// A show on `venue_id`: adult and child tickets; premium priced for both,
/// standard for adults only.
pub fn show_on(venue_id: &str) -> Value {
    json!({
        "name": "Evening", "starts_at": "2030-01-01T20:00:00Z", "hold_ttl_seconds": 600,
        "venue_id": venue_id,
        "ticket_types": [{"ticket_type": "adult", "label": "Adult"},
                         {"ticket_type": "child", "label": "Child"}],
        "prices": [
            {"category": "premium", "ticket_type": "adult", "price_cents": 12000},
            {"category": "premium", "ticket_type": "child", "price_cents": 6000},
            {"category": "standard", "ticket_type": "adult", "price_cents": 5000}
        ]
    })
}

async fn put(app: &TestApp, path: &str, body: &Value) -> crate::support::Answer {
    app.call(Method::PUT, path, Some(&app.admin()), Some(body), &[])
        .await
}

async fn get(app: &TestApp, path: &str) -> crate::support::Answer {
    app.call(Method::GET, path, None, None, &[]).await
}

async fn hold_body(app: &TestApp, token: &str, show: &str, body: Value) -> crate::support::Answer {
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/holds"),
        Some(token),
        Some(&body),
        &[],
    )
    .await
}

/// The venue `arena` and the show `evening` on it.
async fn arena_show(app: &TestApp) {
    let venue = put(app, "/v1/venues/arena", &venue_body()).await;
    assert_eq!(venue.status, StatusCode::CREATED, "{}", venue.body);
    let show = put(app, "/v1/shows/evening", &show_on("arena")).await;
    assert_eq!(show.status, StatusCode::CREATED, "{}", show.body);
}

async fn a_venue_is_created_once_and_read_back(env: TestEnv) {
    let app = env.spawn().await;
    let created = put(&app, "/v1/venues/arena", &venue_body()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["venue_id"], "arena");
    assert_eq!(created.body["seats"].as_array().map(Vec::len), Some(6));
    assert_eq!(created.body["seats"][5]["accessible"], true);

    let again = put(&app, "/v1/venues/arena", &venue_body()).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let mut other = venue_body();
    other["name"] = json!("Another arena");
    put(&app, "/v1/venues/arena", &other)
        .await
        .expect_problem(409, "venue_exists");

    let read = get(&app, "/v1/venues/arena").await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body, created.body);
    get(&app, "/v1/venues/nowhere")
        .await
        .expect_problem(404, "venue_not_found");
    app.stop().await;
}

async fn a_bad_venue_is_422_naming_the_field_and_stores_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let spoilt = |pointer: &str, value: Value| {
        let mut body = venue_body();
        if let Some(slot) = body.pointer_mut(pointer) {
            *slot = value;
        }
        body
    };
    let mut unplaced = venue_body();
    if let Some(seat) = unplaced["seats"][2].as_object_mut() {
        seat.remove("x");
    }
    let cases = [
        (
            "seats[1].category",
            spoilt("/seats/1/category", json!("vip")),
        ),
        ("seats[0].section", spoilt("/seats/0/section", json!("Z"))),
        ("seats[2].x", unplaced),
        (
            "categories[0].color",
            spoilt("/categories/0/color", json!("purple")),
        ),
        (
            "pools[0].category",
            spoilt("/pools/0/category", json!("vip")),
        ),
        ("stage.width", spoilt("/stage/width", json!(0))),
    ];
    for (field, body) in cases {
        let answer = put(&app, "/v1/venues/bad", &body).await;
        answer.expect_problem(422, "validation_failed");
        let detail = answer.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(field), "{field}: {detail}");
    }
    let mut priced = venue_body();
    priced["seats"][0]["price_cents"] = json!(100);
    let answer = put(&app, "/v1/venues/bad", &priced).await;
    answer.expect_problem(422, "validation_failed");
    assert!(answer.body["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("seats[0].price_cents"));
    get(&app, "/v1/venues/bad")
        .await
        .expect_problem(404, "venue_not_found");
    app.stop().await;
}

async fn a_show_on_a_venue_answers_the_chart_and_its_prices(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let show = get(&app, "/v1/shows/evening").await;
    assert_eq!(show.status, StatusCode::OK);
    let body = &show.body;
    assert_eq!(body["venue_id"], "arena");
    assert_eq!(body["stage"]["label"], "Stage");
    assert_eq!(body["categories"].as_array().map(Vec::len), Some(2));
    assert_eq!(body["seats"].as_array().map(Vec::len), Some(6));
    assert_eq!(body["seats"][0]["category"], "premium");
    assert_eq!(body["seats"][0]["x"], 300.0);
    assert_eq!(body["ticket_types"][0]["ticket_type"], "adult");
    assert_eq!(body["prices"].as_array().map(Vec::len), Some(3));
    // Availability is unchanged: statuses only, every seat of the venue.
    let statuses = app.seat_statuses("evening").await;
    assert_eq!(statuses.len(), 6);
    assert!(statuses.values().all(|s| s == "available"));
    // A second show on the same chart sells its own seats.
    let second = put(&app, "/v1/shows/matinee", &show_on("arena")).await;
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    let alice = app.buyer("alice");
    let held = app.hold(&alice, "evening", &["A-1-1"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    assert_eq!(app.seat_statuses("matinee").await["A-1-1"], "available");
    app.stop().await;
}

async fn a_bad_show_on_a_venue_is_422_and_stores_nothing(env: TestEnv) {
    let app = env.spawn().await;
    put(&app, "/v1/venues/arena", &venue_body()).await;
    let mut both = show_on("arena");
    both["seats"] =
        json!([{"seat_id": "X", "section": "A", "row": "1", "number": 1, "price_cents": 1}]);
    let mut unpriced = show_on("arena");
    unpriced["prices"] = json!([{"category": "premium", "ticket_type": "adult", "price_cents": 1}]);
    let mut unknown_type = show_on("arena");
    unknown_type["prices"][0]["ticket_type"] = json!("senior");
    let cases = [
        (show_on("nowhere"), "venue_id"),
        (both, "venue_id"),
        (unpriced, "standard"),
        (unknown_type, "prices[0]"),
    ];
    for (body, named) in cases {
        let answer = put(&app, "/v1/shows/bad", &body).await;
        answer.expect_problem(422, "validation_failed");
        let detail = answer.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(named), "{named}: {detail}");
    }
    get(&app, "/v1/shows/bad")
        .await
        .expect_problem(404, "show_not_found");
    app.stop().await;
}

async fn a_hold_is_priced_by_category_and_ticket_type_and_its_purchase_charges_that(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let alice = app.buyer("alice");
    let body = json!({"seats": ["A-1-1", {"seat_id": "A-1-2", "ticket_type": "child"}, "A-2-1"]});
    let held = hold_body(&app, &alice, "evening", body).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    assert_eq!(held.body["amount_cents"], 12000 + 6000 + 5000);
    let items = held.body["items"].as_array().cloned().unwrap_or_default();
    let line = |seat: &str| {
        items
            .iter()
            .find(|i| i["seat_id"] == seat)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(line("A-1-2")["ticket_type"], "child");
    assert_eq!(line("A-1-2")["price_cents"], 6000);
    assert_eq!(line("A-1-2")["category"], "premium");
    assert_eq!(line("A-2-1")["ticket_type"], "adult");
    assert_eq!(line("A-2-1")["price_cents"], 5000);
    let hold_id = held.str("hold_id");
    let read = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(read.body["items"], held.body["items"]);
    assert_eq!(read.body["amount_cents"], held.body["amount_cents"]);

    let pool = hold_body(
        &app,
        &alice,
        "evening",
        json!({"pool_id": "floor", "quantity": 3, "ticket_type": "adult"}),
    )
    .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{}", pool.body);
    assert_eq!(pool.body["amount_cents"], 3 * 5000);
    assert_eq!(pool.body["items"][0]["quantity"], 3);

    let bought = app.purchase(&alice, &hold_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    assert_eq!(bought.body["amount_cents"], 23000);
    let ledger = app.ledger().sim_ledger().await.unwrap_or_default();
    assert_eq!(ledger.len(), 1, "{ledger:?}");
    assert_eq!(ledger[0].amount_cents, 23000);
    app.stop().await;
}

async fn a_ticket_type_without_a_price_is_422_and_holds_nothing(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let bob = app.buyer("bob");
    let before = app.event_count().await;
    // Standard has no child price; senior is no ticket type of the show.
    let cases = [
        json!({"seats": [{"seat_id": "A-2-1", "ticket_type": "child"}]}),
        json!({"seats": ["A-1-1", {"seat_id": "A-1-2", "ticket_type": "senior"}]}),
        json!({"pool_id": "floor", "quantity": 2, "ticket_type": "child"}),
        json!({"best_available": {"quantity": 2, "ticket_type": "senior"}}),
    ];
    for body in cases {
        let answer = hold_body(&app, &bob, "evening", body.clone()).await;
        answer.expect_problem(422, "ticket_type_unavailable");
    }
    let malformed = hold_body(
        &app,
        &bob,
        "evening",
        json!({"seats": [{"seat_id": "A-1-1", "ticket": "adult"}]}),
    )
    .await;
    malformed.expect_problem(422, "validation_failed");
    assert_eq!(app.event_count().await, before, "nothing was appended");
    assert!(app
        .seat_statuses("evening")
        .await
        .values()
        .all(|s| s == "available"));
    app.stop().await;
}

async fn a_hold_on_a_show_without_categories_has_its_seats_prices(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("plain", 3, 480).await;
    let alice = app.buyer("alice");
    let held = app.hold(&alice, "plain", &["S1", "S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let items = held.body["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 2, "{}", held.body);
    assert!(items.iter().all(|i| i["ticket_type"] == "standard"));
    let seat_prices: i64 = items.iter().filter_map(|i| i["price_cents"].as_i64()).sum();
    assert_eq!(held.body["amount_cents"], seat_prices);
    // A ticket type the show does not sell.
    hold_body(
        &app,
        &alice,
        "plain",
        json!({"seats": [{"seat_id": "S3", "ticket_type": "child"}]}),
    )
    .await
    .expect_problem(422, "ticket_type_unavailable");
    app.stop().await;
}

async fn replay_rebuilds_the_priced_holds(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let alice = app.buyer("alice");
    let held = hold_body(
        &app,
        &alice,
        "evening",
        json!({"seats": [{"seat_id": "A-1-3", "ticket_type": "child"}, "A-2-2"]}),
    )
    .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let pool = hold_body(
        &app,
        &alice,
        "evening",
        json!({"pool_id": "floor", "quantity": 20}),
    )
    .await;
    assert_eq!(pool.status, StatusCode::CREATED, "{}", pool.body);
    let replay = Command::new(env!("CARGO_BIN_EXE_booking"))
        .arg("replay")
        .env("DATABASE_URL", &app.database_url)
        .env("RUST_LOG", "error")
        .output()
        .expect("booking replay runs");
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let (code, out) = verify_exit_code(&app);
    assert_eq!(code, 0, "{out}");
    for answer in [&held, &pool] {
        let hold_id = answer.str("hold_id");
        let read = app
            .call(
                Method::GET,
                &format!("/v1/holds/{hold_id}"),
                Some(&alice),
                None,
                &[],
            )
            .await;
        assert_eq!(read.body["items"], answer.body["items"]);
        assert_eq!(read.body["amount_cents"], answer.body["amount_cents"]);
    }
    app.stop().await;
}

/// The change every price test makes: premium dearer, child dearer,
/// standard dearer.
fn raised() -> Value {
    json!([
        {"category": "premium", "ticket_type": "adult", "price_cents": 15000},
        {"category": "premium", "ticket_type": "child", "price_cents": 7000},
        {"category": "standard", "ticket_type": "adult", "price_cents": 5500}
    ])
}

async fn change_prices(app: &TestApp, show: &str, body: &Value) -> crate::support::Answer {
    put(app, &format!("/v1/shows/{show}/prices"), body).await
}

fn premium_adult(show: &Value) -> Option<i64> {
    show["prices"].as_array().and_then(|prices| {
        prices
            .iter()
            .find(|p| p["category"] == "premium" && p["ticket_type"] == "adult")
            .and_then(|p| p["price_cents"].as_i64())
    })
}

async fn a_price_change_prices_holds_from_its_instant_and_earlier_holds_keep_theirs(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let alice = app.buyer("alice");
    let early = app.hold(&alice, "evening", &["A-1-1"], None).await;
    assert_eq!(early.body["amount_cents"], 12000, "{}", early.body);

    // Within the holds' ten minutes: a hold placed before the change is
    // bought after it.
    let from = app.clock_now() + chrono::Duration::minutes(5);
    let changed = change_prices(
        &app,
        "evening",
        &json!({"prices": raised(), "effective_at": from.to_rfc3339()}),
    )
    .await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    assert_eq!(changed.body["effective_at"], json!(from));

    // Before its instant, holds and the show say the first table.
    let bob = app.buyer("bob");
    let before = app.hold(&bob, "evening", &["A-1-2"], None).await;
    assert_eq!(before.body["amount_cents"], 12000, "{}", before.body);
    let show = get(&app, "/v1/shows/evening").await;
    assert_eq!(premium_adult(&show.body), Some(12000));
    let later = (from + chrono::Duration::minutes(1)).to_rfc3339();
    let at_later = app
        .client
        .get(format!("{}/v1/shows/evening", app.base))
        .query(&[("as_of", later.as_str())])
        .send()
        .await
        .expect("GET the show as of later");
    let at_later = TestApp::answer(at_later).await;
    assert_eq!(
        premium_adult(&at_later.body),
        Some(15000),
        "{}",
        at_later.body
    );

    // From its instant, holds are priced by the new table; earlier ones keep theirs.
    app.clock.advance(chrono::Duration::minutes(5));
    let carol = app.buyer("carol");
    let after = app.hold(&carol, "evening", &["A-1-3"], None).await;
    assert_eq!(after.body["amount_cents"], 15000, "{}", after.body);
    let early_id = early.str("hold_id");
    let kept = app
        .call(
            Method::GET,
            &format!("/v1/holds/{early_id}"),
            Some(&alice),
            None,
            &[],
        )
        .await;
    assert_eq!(kept.body["amount_cents"], 12000);
    let bought = app.purchase(&alice, &early_id, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let ledger = app.ledger().sim_ledger().await.unwrap_or_default();
    assert_eq!(
        ledger.first().map(|c| c.amount_cents),
        Some(12000),
        "{ledger:?}"
    );

    // The change is in the show's history.
    let history = app
        .call(
            Method::GET,
            "/v1/shows/evening/history",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert!(
        history.body.to_string().contains("PricesChanged"),
        "{}",
        history.body
    );
    app.stop().await;
}

async fn a_bad_price_change_is_refused_and_changes_nothing(env: TestEnv) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let past = (app.clock_now() - chrono::Duration::seconds(1)).to_rfc3339();
    let mut unknown = raised();
    unknown[0]["category"] = json!("vip");
    let partial = json!([{"category": "premium", "ticket_type": "adult", "price_cents": 1}]);
    let cases = [
        (
            json!({"prices": raised(), "effective_at": past}),
            "effective_at",
        ),
        (json!({"prices": unknown}), "prices[0]"),
        (json!({"prices": partial}), "standard"),
    ];
    let before = app.event_count().await;
    for (body, named) in cases {
        let answer = change_prices(&app, "evening", &body).await;
        answer.expect_problem(422, "validation_failed");
        let detail = answer.body["detail"].as_str().unwrap_or_default();
        assert!(detail.contains(named), "{named}: {detail}");
    }
    let buyer = app.buyer("mallory");
    app.call(
        Method::PUT,
        "/v1/shows/evening/prices",
        Some(&buyer),
        Some(&json!({"prices": raised()})),
        &[],
    )
    .await
    .expect_problem(403, "forbidden");
    change_prices(&app, "nowhere", &json!({"prices": raised()}))
        .await
        .expect_problem(404, "show_not_found");
    app.create_show("plain", 2, 480).await;
    change_prices(&app, "plain", &json!({"prices": []}))
        .await
        .expect_problem(422, "validation_failed");
    assert_eq!(app.event_count().await, before, "nothing was appended");
    let show = get(&app, "/v1/shows/evening").await;
    assert_eq!(premium_adult(&show.body), Some(12000));
    app.stop().await;
}

/// A venue of `rows` rows of ten premium seats.
fn large_venue(rows: usize) -> Value {
    let seats: Vec<Value> = (0..rows * 10)
        .map(|n| {
            json!({"seat_id": format!("S{n}"), "section": "A", "row": format!("{}", n / 10 + 1),
                   "number": n % 10 + 1, "x": (n % 10) as f64 * 20.0, "y": (n / 10) as f64 * 20.0,
                   "category": "premium"})
        })
        .collect();
    let mut venue = venue_body();
    venue["seats"] = json!(seats);
    venue
}

async fn holds_racing_a_price_change_each_have_one_table(env: TestEnv) {
    const BUYERS: usize = 60;
    let app = env.spawn().await;
    assert_eq!(
        put(&app, "/v1/venues/hall", &large_venue(BUYERS / 5))
            .await
            .status,
        StatusCode::CREATED
    );
    assert_eq!(
        put(&app, "/v1/shows/race", &show_on("hall")).await.status,
        StatusCode::CREATED
    );
    // Each buyer holds two seats, one adult and one child: a hold priced by
    // two tables would show it in its amount.
    let hold = |b: usize| {
        let body = json!({"seats": [format!("S{}", 2 * b), {"seat_id": format!("S{}", 2 * b + 1), "ticket_type": "child"}]});
        app.hold_call(app.buyer(&format!("buyer-{b}")), "race", body)
    };
    let first: Vec<_> = (0..BUYERS / 2).map(hold).collect();
    let racing = tokio::spawn(crate::support::fire_at_once(first));
    let changed = change_prices(&app, "race", &json!({"prices": raised()})).await;
    assert_eq!(changed.status, StatusCode::OK, "{}", changed.body);
    let before = racing.await.expect("the first holds");
    // Past the change's instant: every hold from now on has the new table.
    app.clock
        .advance(domain::pricing::price_change_lead() + chrono::Duration::seconds(1));
    let second: Vec<_> = (BUYERS / 2..BUYERS).map(hold).collect();
    let after = crate::support::fire_at_once(second).await;
    let old = 12000 + 6000;
    let new = 15000 + 7000;
    // A hold priced by two tables would show it in its amount. The change
    // took effect after the lead: the holds decided before it (all of the
    // first, on the service's clock) kept the first table.
    let priced = before.iter().map(|a| (a, old));
    for (answer, table) in priced.chain(after.iter().map(|a| (a, new))) {
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        assert_eq!(answer.body["amount_cents"], table, "{}", answer.body);
    }
    app.stop().await;
}

async fn best_available_chooses_within_a_category_and_wheelchair_spaces_only_when_asked(
    env: TestEnv,
) {
    let app = env.spawn().await;
    arena_show(&app).await;
    let owned = app;
    let app = &owned;
    let best = |who: &str, ask: Value| {
        let token = app.buyer(who);
        async move { hold_body(app, &token, "evening", json!({ "best_available": ask })).await }
    };
    let seats = |answer: &crate::support::Answer| -> Vec<String> {
        answer.body["seats"]
            .as_array()
            .map(|s| {
                s.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let standard = best("ann", json!({"quantity": 2, "category": "standard"})).await;
    assert_eq!(standard.status, StatusCode::CREATED, "{}", standard.body);
    assert_eq!(seats(&standard), ["A-2-1", "A-2-2"]);
    assert_eq!(standard.body["amount_cents"], 2 * 5000);
    // The last standard seat is a wheelchair space: not chosen unless asked.
    best("ben", json!({"quantity": 1, "category": "standard"}))
        .await
        .expect_problem(409, "no_adjacent_seats");
    let wheelchair = best("cal", json!({"quantity": 1, "accessible": true})).await;
    assert_eq!(
        wheelchair.status,
        StatusCode::CREATED,
        "{}",
        wheelchair.body
    );
    assert_eq!(seats(&wheelchair), ["A-2-3"]);
    let premium = best(
        "dee",
        json!({"quantity": 2, "category": "premium", "ticket_type": "child"}),
    )
    .await;
    assert_eq!(premium.status, StatusCode::CREATED, "{}", premium.body);
    assert_eq!(premium.body["amount_cents"], 2 * 6000);
    assert!(seats(&premium).iter().all(|s| s.starts_with("A-1-")));

    let unknown = best("eve", json!({"quantity": 1, "category": "vip"})).await;
    unknown.expect_problem(422, "validation_failed");
    assert!(unknown.body["detail"]
        .as_str()
        .unwrap_or_default()
        .contains("best_available.category"));
    app.create_show("plain", 4, 480).await;
    let token = app.buyer("fay");
    hold_body(
        app,
        &token,
        "plain",
        json!({"best_available": {"quantity": 1, "accessible": true}}),
    )
    .await
    .expect_problem(422, "validation_failed");
    owned.stop().await;
}

/// `booking demo`, the real binary: once listening it creates the sample
/// arena and show, and prints the seat map's address with a buyer token;
/// the token holds seats there. Run again on the same database, it finds
/// them.
async fn the_demo_serves_a_20000_seat_arena_and_prints_where_to_see_it(env: TestEnv) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (database_url, _dir) = env.database_url().await;
    for run in 0..2 {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_booking"))
            .arg("demo")
            .env("DATABASE_URL", &database_url)
            .env("BOOKING_ADDR", "127.0.0.1:0")
            .env("BOOKING_LOG_FORMAT", "json")
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the booking binary starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        // The seat map's address, the door's, and the six tickets' (four
        // seats, two standing places), in that order.
        let printed = tokio::time::timeout(std::time::Duration::from_secs(120), async {
            let mut printed = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                // The log shares stdout: only the demo's own lines.
                if ["The demo show", "The door", "A ticket"]
                    .iter()
                    .any(|said| line.starts_with(said))
                {
                    printed.push(line);
                }
                if printed.len() == 8 {
                    break;
                }
            }
            printed
        })
        .await
        .expect("the demo says where to look within two minutes");
        let ready = printed[0]
            .strip_prefix("The demo show is ready: open ")
            .expect("the demo prints the seat map's address")
            .to_owned();
        let (page, token) = ready.split_once("#token=").expect("a token in the address");
        let base = page
            .strip_suffix("/shows/demo")
            .expect("the demo show's page");
        let client = reqwest::Client::new();
        let show: Value = client
            .get(format!("{base}/v1/shows/demo"))
            .send()
            .await
            .expect("GET the demo show")
            .json()
            .await
            .expect("a show");
        assert_eq!(
            show["seats"].as_array().map(Vec::len),
            Some(20_000),
            "run {run}"
        );
        assert_eq!(show["categories"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            client.get(page).send().await.map(|r| r.status()).ok(),
            Some(StatusCode::OK)
        );
        let held = client
            .post(format!("{base}/v1/shows/demo/holds"))
            .bearer_auth(token)
            .json(&json!({"seats": [format!("C-1-{}", run + 1), {"seat_id": format!("C-1-{}", run + 3), "ticket_type": "child"}]}))
            .send()
            .await
            .expect("a hold");
        assert_eq!(held.status(), StatusCode::CREATED, "run {run}");
        let held: Value = held.json().await.expect("a hold");
        assert_eq!(held["amount_cents"], 12000 + 6000);
        demo_door(&client, base, &printed[1..], run).await;
        child.kill().await.expect("the demo stops");
    }
}

/// The demo's door (`lines[0]`) and tickets (the rest): each ticket's page
/// opens, and the door's token lets the first ticket in on the first
/// `run` (on the second it is inside already).
async fn demo_door(client: &reqwest::Client, base: &str, lines: &[String], run: usize) {
    let door = lines[0]
        .strip_prefix("The door is ready: open ")
        .expect("the door's address");
    let (door_page, scanner) = door.split_once("#token=").expect("a scanner token");
    assert_eq!(door_page, format!("{base}/shows/demo/scan"));
    let page = client.get(door_page).send().await.expect("the door page");
    assert_eq!(page.status(), StatusCode::OK);
    let tickets: Vec<(&str, &str)> = lines[1..]
        .iter()
        .map(|line| {
            let url = line
                .strip_prefix("A ticket to scan: open ")
                .expect("a ticket's address");
            url.split_once("#token=").expect("the holder's token")
        })
        .collect();
    assert_eq!(tickets.len(), 6, "{lines:?}");
    let mut kinds = Vec::new();
    for (page, holder) in &tickets {
        let ticket_id = page.rsplit('/').next().expect("an id");
        let ticket: Value = client
            .get(format!("{base}/v1/tickets/{ticket_id}"))
            .bearer_auth(holder)
            .send()
            .await
            .expect("the ticket")
            .json()
            .await
            .expect("a ticket");
        assert_eq!(ticket["status"], "valid", "{ticket}");
        kinds.push(ticket["ticket_type"].as_str().unwrap_or("").to_owned());
        let shown = client.get(*page).send().await.expect("the ticket page");
        assert_eq!(shown.status(), StatusCode::OK);
    }
    kinds.sort();
    assert_eq!(
        kinds,
        // Two adults and two children seated, two standing as adults
        // (the show's first ticket type).
        ["adult", "adult", "adult", "adult", "child", "child"]
    );
    let ticket_id = tickets[0].0.rsplit('/').next().expect("an id");
    let code = client
        .get(format!("{base}/v1/tickets/{ticket_id}"))
        .bearer_auth(tickets[0].1)
        .send()
        .await
        .expect("the ticket")
        .json::<Value>()
        .await
        .expect("a ticket")["code"]
        .clone();
    let scanned = client
        .post(format!("{base}/v1/shows/demo/checkins"))
        .bearer_auth(scanner)
        .json(&json!({"code": code, "gate": "main", "direction": "entry",
                      "nonce": uuid::Uuid::new_v4().to_string()}))
        .send()
        .await
        .expect("a scan");
    // The first run lets the ticket in; the second finds it inside.
    let want = if run == 0 { 201 } else { 409 };
    assert_eq!(
        scanned.status().as_u16(),
        want,
        "run {run}: {}",
        scanned.text().await.unwrap_or_default()
    );
}
