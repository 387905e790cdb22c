//! Sales channels over HTTP (issue #35): allocations racing the public,
//! channel buyers kept to their inventory, the box office, and the report
//! that counts it all.

use std::collections::{BTreeMap, BTreeSet};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::checkout::hold_for;
use crate::support::{fire_at_once, seat_id, show_body, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        allocations_racing_public_holds_leave_each_seat_one_or_the_other,
        channel_buyers_reach_only_their_channels_inventory,
        places_of_a_pool_are_allocated_held_through_the_channel_and_given_back,
        the_box_office_books_and_refunds_without_a_provider,
        the_report_counts_what_availability_and_the_export_show,
        the_report_is_the_same_after_replay_and_from_the_log,
        bad_allocation_and_box_office_bodies_are_refused_naming_the_field,
    ]
}

/// A show of `seats` seats and the `floor` pool (100 places), sold through
/// two channels besides public sale.
async fn show_with_channels(app: &TestApp, show: &str, seats: usize) {
    let mut body = show_body(seats, 600);
    body["channels"] = json!([
        {"channel_id": "partner-x", "label": "Partner X"},
        {"channel_id": "boxoffice", "label": "Box office"}
    ]);
    app.create_show_from(show, &body).await;
}

async fn post(app: &TestApp, path: &str, token: &str, body: Value) -> Answer {
    app.call(Method::POST, path, Some(token), Some(&body), &[])
        .await
}

async fn allocate(app: &TestApp, show: &str, body: Value) -> Answer {
    post(
        app,
        &format!("/v1/shows/{show}/allocations"),
        &app.admin(),
        body,
    )
    .await
}

async fn give_back(app: &TestApp, show: &str, body: Value) -> Answer {
    post(
        app,
        &format!("/v1/shows/{show}/allocations/release"),
        &app.admin(),
        body,
    )
    .await
}

async fn report(app: &TestApp, show: &str, query: &str) -> Answer {
    let answer = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/report{query}"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer
}

fn strings(value: &Value) -> BTreeSet<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn allocations_racing_public_holds_leave_each_seat_one_or_the_other(env: TestEnv) {
    const SEATS: usize = 40;
    let app = env.spawn().await;
    show_with_channels(&app, "race", SEATS).await;
    // Four allocations of ten seats each, and 40 buyers each holding one
    // seat, all at once.
    let mut calls = Vec::new();
    for block in 0..4 {
        let seats: Vec<String> = (1..=10).map(|n| seat_id(block * 10 + n)).collect();
        let request = app
            .client
            .post(format!("{}/v1/shows/race/allocations", app.base))
            .bearer_auth(app.admin())
            .header("content-type", "application/json")
            .body(json!({"channel_id": "partner-x", "seats": seats}).to_string());
        calls.push(Box::pin(async move {
            TestApp::answer(request.send().await.expect("answered")).await
        })
            as std::pin::Pin<
                Box<dyn std::future::Future<Output = Answer> + Send>,
            >);
    }
    for n in 1..=SEATS {
        let hold = app.hold_call(
            app.buyer(&format!("b{n}")),
            "race",
            json!({"seats": [seat_id(n)]}),
        );
        calls.push(Box::pin(hold));
    }
    let answers = fire_at_once(calls).await;
    let mut allocated = BTreeSet::new();
    let mut refused_allocations = BTreeSet::new();
    for answer in &answers[..4] {
        match answer.status {
            StatusCode::CREATED => allocated.extend(strings(&answer.body["seats"])),
            _ => {
                answer.expect_problem(409, "seat_taken");
                refused_allocations.extend(strings(&answer.body["seats"]));
            }
        }
    }
    let mut held = BTreeSet::new();
    for (n, answer) in (1..=SEATS).zip(&answers[4..]) {
        match answer.status {
            StatusCode::CREATED => {
                held.insert(seat_id(n));
            }
            _ => {
                answer.expect_problem(409, "seat_not_for_sale");
                assert_eq!(strings(&answer.body["seats"]), BTreeSet::from([seat_id(n)]));
            }
        }
    }
    assert!(
        allocated.is_disjoint(&held),
        "never both: {allocated:?} {held:?}"
    );
    assert!(
        refused_allocations.is_subset(&held),
        "an allocation refused names seats the public held"
    );
    let statuses = app.seat_statuses("race").await;
    for n in 1..=SEATS {
        let seat = seat_id(n);
        let expected = if allocated.contains(&seat) {
            "not_for_sale"
        } else if held.contains(&seat) {
            "held"
        } else {
            "available"
        };
        assert_eq!(statuses[&seat], expected, "{seat}");
    }
    let listed = app
        .call(
            Method::GET,
            "/v1/shows/race/allocations",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(strings(&listed.body["channels"][0]["seats"]), allocated);
    app.stop().await;
}

async fn channel_buyers_reach_only_their_channels_inventory(env: TestEnv) {
    let app = env.spawn().await;
    show_with_channels(&app, "reach", 6).await;
    let allocated = allocate(
        &app,
        "reach",
        json!({"channel_id": "partner-x", "seats": ["S1", "S2"]}),
    )
    .await;
    assert_eq!(allocated.status, StatusCode::CREATED, "{}", allocated.body);
    assert_eq!(
        strings(&allocated.body["seats"]),
        BTreeSet::from(["S1".into(), "S2".into()])
    );
    let before = app.seat_statuses("reach").await;
    let public = app.buyer("alice");
    let partner = app.channel_buyer("bob", &["partner-x"], "reach");
    let other = app.channel_buyer("carol", &["boxoffice"], "reach");
    let hold = |token: &str, body: Value| app.hold_call(token.to_owned(), "reach", body);
    // The public: not for sale, naming the seat.
    let answer = hold(&public, json!({"seats": ["S1", "S3"]})).await;
    answer.expect_problem(409, "seat_not_for_sale");
    assert_eq!(
        strings(&answer.body["seats"]),
        BTreeSet::from(["S1".into()])
    );
    // A channel the token does not name: 403; one the show lacks: 403
    // for a buyer (the token names none), 422 for the admin.
    hold(&public, json!({"seats": ["S1"], "channel": "partner-x"}))
        .await
        .expect_problem(403, "forbidden");
    hold(&other, json!({"seats": ["S1"], "channel": "partner-x"}))
        .await
        .expect_problem(403, "forbidden");
    // A partner-x token of another show: a channel id is its show's own.
    let elsewhere = app.channel_buyer("dave", &["partner-x"], "another-show");
    hold(&elsewhere, json!({"seats": ["S1"], "channel": "partner-x"}))
        .await
        .expect_problem(403, "forbidden");
    hold(&app.admin(), json!({"seats": ["S1"], "channel": "nobody"}))
        .await
        .expect_problem(422, "unknown_channel");
    // Another channel's buyer, from their own channel: not theirs.
    hold(&other, json!({"seats": ["S1"], "channel": "boxoffice"}))
        .await
        .expect_problem(409, "seat_not_for_sale");
    // The partner, for public seats through the channel: not the channel's.
    hold(&partner, json!({"seats": ["S3"], "channel": "partner-x"}))
        .await
        .expect_problem(409, "seat_not_for_sale");
    assert_eq!(app.seat_statuses("reach").await, before, "nothing changed");
    // The channel's views.
    let view = |token: String, channel: &str| {
        let path = format!("/v1/shows/reach/availability?channel={channel}");
        let app = &app;
        async move { app.call(Method::GET, &path, Some(&token), None, &[]).await }
    };
    view(public.clone(), "partner-x")
        .await
        .expect_problem(403, "forbidden");
    view(other.clone(), "partner-x")
        .await
        .expect_problem(403, "forbidden");
    let seen = view(partner.clone(), "partner-x").await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
    let seen: BTreeMap<String, String> = crate::support::seat_entries(&seen.body)
        .into_iter()
        .collect();
    assert_eq!(seen["S1"], "available");
    assert_eq!(seen["S3"], "not_for_sale");
    // The partner holds its seat: the public sees it held, as a seat.
    let held = hold(&partner, json!({"seats": ["S1"], "channel": "partner-x"})).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let statuses = app.seat_statuses("reach").await;
    assert_eq!(statuses["S1"], "held");
    assert_eq!(statuses["S2"], "not_for_sale");
    assert_eq!(statuses["S3"], "available");
    // A seat held through the channel is not given back; the unsold are.
    let refused = give_back(
        &app,
        "reach",
        json!({"channel_id": "partner-x", "seats": ["S1", "S2"]}),
    )
    .await;
    refused.expect_problem(409, "seat_taken");
    assert_eq!(
        strings(&refused.body["seats"]),
        BTreeSet::from(["S1".into()])
    );
    let unsold = give_back(
        &app,
        "reach",
        json!({"channel_id": "partner-x", "unsold": true}),
    )
    .await;
    assert_eq!(unsold.status, StatusCode::OK, "{}", unsold.body);
    assert_eq!(
        strings(&unsold.body["seats"]),
        BTreeSet::from(["S1".into()])
    );
    assert_eq!(app.seat_statuses("reach").await["S2"], "available");
    // Best available through the channel chooses among its seats only.
    let more = allocate(
        &app,
        "reach",
        json!({"channel_id": "partner-x", "seats": ["S5"]}),
    )
    .await;
    assert_eq!(more.status, StatusCode::CREATED, "{}", more.body);
    let best = hold(
        &partner,
        json!({"best_available": {"quantity": 1}, "channel": "partner-x"}),
    )
    .await;
    assert_eq!(best.status, StatusCode::CREATED, "{}", best.body);
    assert_eq!(best.body["seats"], json!(["S5"]));
    hold(
        &partner,
        json!({"best_available": {"quantity": 1}, "channel": "partner-x"}),
    )
    .await
    .expect_problem(409, "no_adjacent_seats");
    app.stop().await;
}

async fn places_of_a_pool_are_allocated_held_through_the_channel_and_given_back(env: TestEnv) {
    let app = env.spawn().await;
    show_with_channels(&app, "gapool", 2).await;
    let public = app.buyer("alice");
    let partner = app.channel_buyer("bob", &["partner-x"], "gapool");
    // The public holds 80 of the 100 places.
    for n in 0..4 {
        let held = app
            .hold_call(
                app.buyer(&format!("p{n}")),
                "gapool",
                json!({"pool_id": "floor", "quantity": 20}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    }
    let refused = allocate(
        &app,
        "gapool",
        json!({"channel_id": "partner-x", "pool_id": "floor", "quantity": 21}),
    )
    .await;
    refused.expect_problem(409, "sold_out");
    assert_eq!(refused.body["available"], 20);
    let allocated = allocate(
        &app,
        "gapool",
        json!({"channel_id": "partner-x", "pool_id": "floor", "quantity": 20}),
    )
    .await;
    assert_eq!(allocated.status, StatusCode::CREATED, "{}", allocated.body);
    assert_eq!(
        allocated.body["pools"],
        json!([{"pool_id": "floor", "quantity": 20}])
    );
    let floor = |answer: &Answer| answer.body["pools"][0].clone();
    let seen = app.availability("gapool").await;
    assert_eq!(floor(&seen)["available"], 0);
    assert_eq!(floor(&seen)["allocated"], 20);
    // The public cannot take the channel's places; the channel can.
    app.hold_call(
        public.clone(),
        "gapool",
        json!({"pool_id": "floor", "quantity": 1}),
    )
    .await
    .expect_problem(409, "sold_out");
    let through = app
        .hold_call(
            partner.clone(),
            "gapool",
            json!({"pool_id": "floor", "quantity": 12, "channel": "partner-x"}),
        )
        .await;
    assert_eq!(through.status, StatusCode::CREATED, "{}", through.body);
    let beyond = app
        .hold_call(
            partner.clone(),
            "gapool",
            json!({"pool_id": "floor", "quantity": 9, "channel": "partner-x"}),
        )
        .await;
    beyond.expect_problem(409, "sold_out");
    assert_eq!(beyond.body["available"], 8);
    let bought = app
        .purchase(&partner, &through.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let view = app
        .call(
            Method::GET,
            "/v1/shows/gapool/availability?channel=partner-x",
            Some(&partner),
            None,
            &[],
        )
        .await;
    assert_eq!(floor(&view)["available"], 8, "{}", view.body);
    // What is unsold goes back; what was sold stays sold.
    let unsold = give_back(
        &app,
        "gapool",
        json!({"channel_id": "partner-x", "unsold": true}),
    )
    .await;
    assert_eq!(unsold.status, StatusCode::OK, "{}", unsold.body);
    assert_eq!(unsold.body["pools"], json!([]));
    let seen = app.availability("gapool").await;
    assert_eq!(floor(&seen)["available"], 8, "{}", seen.body);
    assert_eq!(floor(&seen)["sold"], 12);
    assert_eq!(floor(&seen)["held"], 80);
    app.stop().await;
}

async fn box_office_sale(app: &TestApp, show: &str, body: Value, key: Option<&str>) -> Answer {
    let headers: Vec<(&str, &str)> = key
        .map(|k| vec![("idempotency-key", k)])
        .unwrap_or_default();
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/bookings"),
        Some(&app.admin()),
        Some(&body),
        &headers,
    )
    .await
}

async fn the_box_office_books_and_refunds_without_a_provider(env: TestEnv) {
    let app = env.spawn().await;
    show_with_channels(&app, "door", 6).await;
    let sale = json!({"seats": ["S1", "S2"], "buyer": "walk-in-17", "payment": "cash", "note": "paid in coins"});
    let sold = box_office_sale(&app, "door", sale.clone(), Some("till-1")).await;
    assert_eq!(sold.status, StatusCode::CREATED, "{}", sold.body);
    assert_eq!(sold.body["buyer"], "walk-in-17");
    assert_eq!(sold.body["amount_cents"], 10_000);
    assert_eq!(
        sold.body["sale"],
        json!({"sold_by": "ops", "payment": "cash", "note": "paid in coins"})
    );
    assert_eq!(sold.body["refund"], "offline");
    let again = box_office_sale(&app, "door", sale, Some("till-1")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["order_id"], sold.body["order_id"]);
    // A taken seat: nothing booked.
    let taken = box_office_sale(
        &app,
        "door",
        json!({"seats": ["S2", "S3"], "buyer": "walk-in-18", "payment": "card_present"}),
        None,
    )
    .await;
    taken.expect_problem(409, "seat_taken");
    assert_eq!(app.seat_statuses("door").await["S3"], "available");
    // A comp is given away; places of the pool too.
    let comp = box_office_sale(
        &app,
        "door",
        json!({"pool_id": "floor", "quantity": 2, "buyer": "guest-1", "payment": "comp"}),
        None,
    )
    .await;
    assert_eq!(comp.status, StatusCode::CREATED, "{}", comp.body);
    assert_eq!(comp.body["amount_cents"], 0);
    // From the box office's own channel.
    allocate(
        &app,
        "door",
        json!({"channel_id": "boxoffice", "seats": ["S5"]}),
    )
    .await;
    let from_channel = box_office_sale(&app, "door", json!({"seats": ["S5"], "channel": "boxoffice", "buyer": "walk-in-19", "payment": "invoice"}), None).await;
    assert_eq!(
        from_channel.status,
        StatusCode::CREATED,
        "{}",
        from_channel.body
    );
    // Nothing went to the payment provider.
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert!(ledger.is_empty(), "no provider call: {ledger:?}");
    // Cancelled: refunded at the counter, the seats free.
    let order = sold.str("order_id");
    let cancelled = post(
        &app,
        &format!("/v1/orders/{order}/cancel"),
        &app.admin(),
        json!({}),
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    assert_eq!(cancelled.body["status"], "cancelled");
    assert_eq!(cancelled.body["refunded_cents"], 10_000);
    let statuses = app.seat_statuses("door").await;
    assert_eq!(
        (statuses["S1"].as_str(), statuses["S2"].as_str()),
        ("available", "available")
    );
    // Who sold is on the events (the seat's history: every event of the
    // seat once acknowledged; the show's, paged by position, waits for
    // older transactions of the whole PostgreSQL server to end).
    let history = app
        .call(
            Method::GET,
            "/v1/shows/door/seats/S1/history",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    let sold_by: Vec<&Value> = (history.body["events"].as_array().expect("events").iter())
        .filter(|e| e["metadata"]["sold_by"] == "ops")
        .collect();
    assert!(!sold_by.is_empty(), "{}", history.body);
    // Not a buyer's to do.
    let buyer = app.buyer("alice");
    let refused = app
        .call(
            Method::POST,
            "/v1/shows/door/bookings",
            Some(&buyer),
            Some(&json!({"seats": ["S4"], "buyer": "x", "payment": "cash"})),
            &[],
        )
        .await;
    refused.expect_problem(403, "forbidden");
    app.stop().await;
}

/// A mixed run: public holds and purchases, orders, a cancellation,
/// allocations and a release, channel holds, box-office sales.
async fn mixed_run(app: &TestApp, show: &str) {
    show_with_channels(app, show, 30).await;
    let alice = app.buyer("alice");
    let partner = app.channel_buyer("bob", &["partner-x"], show);
    let a = hold_for(app, &alice, show, &["S1", "S2"]).await;
    assert_eq!(
        app.purchase(&alice, &a, "pm_sim_ok").await.status,
        StatusCode::CREATED
    );
    hold_for(app, &alice, show, &["S3"]).await;
    let b = hold_for(app, &alice, show, &["S4", "S5"]).await;
    let c = app
        .hold_call(
            alice.clone(),
            show,
            json!({"pool_id": "floor", "quantity": 3}),
        )
        .await;
    let ordered = post(
        app,
        "/v1/orders",
        &alice,
        json!({"holds": [b, c.str("hold_id")], "payment_method": "pm_sim_ok"}),
    )
    .await;
    assert_eq!(ordered.status, StatusCode::CREATED, "{}", ordered.body);
    let order = ordered.str("order_id");
    let cancelled = post(
        app,
        &format!("/v1/orders/{order}/cancel"),
        &alice,
        json!({"lines": [1, 3]}),
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let seats: Vec<String> = (10..=19).map(seat_id).collect();
    assert_eq!(
        allocate(
            app,
            show,
            json!({"channel_id": "partner-x", "seats": seats})
        )
        .await
        .status,
        StatusCode::CREATED
    );
    assert_eq!(
        give_back(
            app,
            show,
            json!({"channel_id": "partner-x", "seats": ["S19"]})
        )
        .await
        .status,
        StatusCode::OK
    );
    assert_eq!(
        allocate(
            app,
            show,
            json!({"channel_id": "partner-x", "pool_id": "floor", "quantity": 10})
        )
        .await
        .status,
        StatusCode::CREATED
    );
    let through = app
        .hold_call(
            partner.clone(),
            show,
            json!({"seats": ["S10", "S11"], "channel": "partner-x"}),
        )
        .await;
    assert_eq!(
        app.purchase(&partner, &through.str("hold_id"), "pm_sim_ok")
            .await
            .status,
        StatusCode::CREATED
    );
    app.hold_call(
        partner.clone(),
        show,
        json!({"seats": ["S12"], "channel": "partner-x"}),
    )
    .await;
    app.hold_call(
        partner.clone(),
        show,
        json!({"pool_id": "floor", "quantity": 4, "channel": "partner-x"}),
    )
    .await;
    let door = box_office_sale(
        app,
        show,
        json!({"seats": ["S20"], "buyer": "walk-in-1", "payment": "cash"}),
        None,
    )
    .await;
    assert_eq!(door.status, StatusCode::CREATED, "{}", door.body);
    let comp = box_office_sale(
        app,
        show,
        json!({"pool_id": "floor", "quantity": 2, "buyer": "guest", "payment": "comp"}),
        None,
    )
    .await;
    assert_eq!(comp.status, StatusCode::CREATED, "{}", comp.body);
}

async fn the_report_counts_what_availability_and_the_export_show(env: TestEnv) {
    let app = env.spawn().await;
    mixed_run(&app, "mixed").await;
    let report = report(&app, "mixed", "").await;
    let totals = &report.body["totals"];
    // Seats by status, and the pool's figures, as the public sees them.
    let seen = app.availability("mixed").await;
    let floor = &seen.body["pools"][0];
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for (_, status) in crate::support::seat_entries(&seen.body) {
        *counted.entry(status).or_default() += 1;
    }
    let num = |v: &Value| v.as_u64().unwrap_or(0);
    // The channel's held places are inside the pool's `allocated` for the
    // public; the report says which are held.
    let channel_held = 4;
    assert_eq!(
        num(&totals["available"]),
        counted.get("available").copied().unwrap_or(0) + num(&floor["available"])
    );
    assert_eq!(
        num(&totals["held"]),
        counted.get("held").copied().unwrap_or(0) + num(&floor["held"]) + channel_held
    );
    assert_eq!(
        num(&totals["booked"]),
        counted.get("booked").copied().unwrap_or(0) + num(&floor["sold"])
    );
    assert_eq!(
        num(&totals["not_for_sale"]),
        counted.get("not_for_sale").copied().unwrap_or(0) + num(&floor["allocated"]) - channel_held
    );
    // Booked units and revenue, against the export.
    let export = app
        .call(
            Method::GET,
            "/v1/shows/mixed/bookings",
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    let lines = export.body["bookings"].as_array().expect("bookings");
    assert_eq!(num(&totals["booked"]), lines.len() as u64);
    let revenue: i64 = lines
        .iter()
        .map(|l| l["price_cents"].as_i64().unwrap_or(0))
        .sum();
    assert_eq!(totals["revenue_cents"].as_i64(), Some(revenue));
    // S1 S2 bought (2 × 5000); of the order S5 and two of its three places
    // (lines 1 and 3, S4 and a place, cancelled); S10 S11 through the
    // channel; S20 at the door; two comp places (0).
    assert_eq!(lines.len(), 6 + 4);
    assert_eq!(revenue, 2 * 5_000 + 5_000 + 2 * 3_000 + 2 * 5_000 + 5_000);
    // The CSV, read back by a CSV reader, is the JSON's rows.
    let csv = app
        .client
        .get(format!("{}/v1/shows/mixed/report", app.base))
        .bearer_auth(app.admin())
        .header("accept", "text/csv")
        .send()
        .await
        .expect("answered");
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap_or("")
        .starts_with("text/csv"));
    let text = csv.text().await.expect("body");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<Value> = reader
        .deserialize::<booking::query::report::ReportRow>()
        .map(|row| serde_json::to_value(row.expect("a row")).expect("json"))
        .collect();
    assert_eq!(Value::Array(rows), report.body["rows"]);
    let export_csv = app
        .client
        .get(format!("{}/v1/shows/mixed/bookings", app.base))
        .bearer_auth(app.admin())
        .header("accept", "text/csv")
        .send()
        .await
        .expect("answered")
        .text()
        .await
        .expect("body");
    let mut reader = csv::Reader::from_reader(export_csv.as_bytes());
    let lines_back: Vec<Value> = reader
        .deserialize::<booking::query::report::BookingLine>()
        .map(|line| serde_json::to_value(line.expect("a line")).expect("json"))
        .collect();
    assert_eq!(Value::Array(lines_back), export.body["bookings"]);
    app.stop().await;
}

/// The report without its instant.
fn rows_and_totals(report: &Answer) -> Value {
    json!({"rows": report.body["rows"], "totals": report.body["totals"]})
}

async fn the_report_is_the_same_after_replay_and_from_the_log(env: TestEnv) {
    use booking::catalog::ShowCatalog;
    use booking::rebuild::replay::replay;
    use booking::store::Projection;
    let app = env.spawn().await;
    mixed_run(&app, "again").await;
    let before = report(&app, "again", "").await;
    // As of now, folded from the log: the same.
    let at = before.str("as_of").replace('+', "%2B");
    let folded = report(&app, "again", &format!("?as_of={at}")).await;
    assert_eq!(rows_and_totals(&folded), rows_and_totals(&before));
    let catalog = ShowCatalog::new(domain::money::Currency::EUR, app.store.shows());
    replay(
        &app.store.log(),
        &app.store.projections(),
        &catalog,
        &Projection::ALL,
    )
    .await
    .expect("replay");
    let after = report(&app, "again", "").await;
    assert_eq!(
        rows_and_totals(&after),
        rows_and_totals(&before),
        "the same after replay"
    );
    // A new instance reads the replayed tables afresh: the same.
    let fresh = env.spawn_at(app.database_url.clone()).await;
    let seen = report(&fresh, "again", "").await;
    assert_eq!(rows_and_totals(&seen), rows_and_totals(&before));
    fresh.stop().await;
    app.stop().await;
}

async fn bad_allocation_and_box_office_bodies_are_refused_naming_the_field(env: TestEnv) {
    let app = env.spawn().await;
    show_with_channels(&app, "bad", 4).await;
    let before = app.seat_statuses("bad").await;
    for (body, status, code, names) in [
        (
            json!({"channel_id": "nobody", "seats": ["S1"]}),
            422,
            "unknown_channel",
            "nobody",
        ),
        (
            json!({"channel_id": "partner-x", "seats": []}),
            422,
            "validation_failed",
            "seats",
        ),
        (
            json!({"channel_id": "partner-x", "seats": ["S1", "S1"]}),
            422,
            "validation_failed",
            "seats",
        ),
        (
            json!({"channel_id": "partner-x", "seats": ["S9"]}),
            422,
            "unknown_seat",
            "seat",
        ),
        (
            json!({"channel_id": "partner-x", "pool_id": "nope", "quantity": 1}),
            422,
            "unknown_pool",
            "pool",
        ),
        (
            json!({"channel_id": "partner-x", "pool_id": "floor", "quantity": 0}),
            422,
            "validation_failed",
            "quantity",
        ),
        (
            json!({"channel_id": "partner-x", "seats": ["S1"], "pool_id": "floor", "quantity": 1}),
            422,
            "validation_failed",
            "exactly one",
        ),
        (
            json!({"channel_id": "partner-x", "unsold": true}),
            422,
            "validation_failed",
            "unsold",
        ),
        (
            json!({"seats": ["S1"]}),
            422,
            "validation_failed",
            "channel_id",
        ),
        (
            json!({"channel_id": "partner-x", "seats": ["S1"], "extra": 1}),
            422,
            "validation_failed",
            "extra",
        ),
    ] {
        let answer = allocate(&app, "bad", body.clone()).await;
        answer.expect_problem(status, code);
        let detail = answer.body["detail"].as_str().unwrap_or("");
        assert!(detail.contains(names), "{body}: {detail}");
    }
    let buyer = app.buyer("alice");
    allocate_as(&app, &buyer)
        .await
        .expect_problem(403, "forbidden");
    for (body, code, names) in [
        (
            json!({"seats": ["S1"], "buyer": "x", "payment": "bitcoin"}),
            "validation_failed",
            "payment",
        ),
        (
            json!({"seats": ["S1"], "payment": "cash"}),
            "validation_failed",
            "buyer",
        ),
        (
            json!({"seats": ["S1"], "buyer": "x", "payment": "cash", "note": ""}),
            "validation_failed",
            "note",
        ),
        (
            json!({"buyer": "x", "payment": "cash"}),
            "validation_failed",
            "seats",
        ),
        (
            json!({"seats": ["S1"], "buyer": "x", "payment": "cash", "channel": "nobody"}),
            "unknown_channel",
            "nobody",
        ),
    ] {
        let answer = box_office_sale(&app, "bad", body.clone(), None).await;
        answer.expect_problem(422, code);
        let detail = answer.body["detail"].as_str().unwrap_or("");
        assert!(detail.contains(names), "{body}: {detail}");
    }
    app.call(
        Method::GET,
        "/v1/shows/bad/report?as_of=2999-01-01T00:00:00Z",
        Some(&app.admin()),
        None,
        &[],
    )
    .await
    .expect_problem(422, "validation_failed");
    app.call(Method::GET, "/v1/shows/bad/report", Some(&buyer), None, &[])
        .await
        .expect_problem(403, "forbidden");
    assert_eq!(app.seat_statuses("bad").await, before, "nothing changed");
    app.stop().await;
}

async fn allocate_as(app: &TestApp, token: &str) -> Answer {
    post(
        app,
        "/v1/shows/bad/allocations",
        token,
        json!({"channel_id": "partner-x", "seats": ["S1"]}),
    )
    .await
}
