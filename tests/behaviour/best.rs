//! Best available over HTTP: the service chooses seats side by side.

use std::collections::{BTreeMap, HashSet};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{fire_at_once, Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        best_available_fills_a_gap_of_exactly_the_quantity,
        best_available_takes_the_pair_at_the_wall_rather_than_strand_one,
        best_available_prefers_explicit_ranks_over_list_order,
        best_available_stays_in_the_section_asked_for,
        best_available_storm_gives_disjoint_consecutive_blocks,
        best_available_over_two_instances_gives_every_buyer_a_block_while_blocks_remain,
        best_available_answers_no_adjacent_seats_when_no_block_is_left,
        best_available_refuses_a_quantity_outside_its_limits,
        best_available_retry_with_the_same_key_returns_the_same_seats,
    ]
}

fn seat(section: &str, row: &str, number: u32) -> Value {
    json!({"seat_id": format!("{section}-{row}-{number}"), "section": section, "row": row,
           "number": number, "price_cents": 1000})
}

/// `rows` rows ("1".."rows") of `per_row` seats in `section`.
fn rows(section: &str, rows: u32, per_row: u32) -> Vec<Value> {
    (1..=rows)
        .flat_map(|r| (1..=per_row).map(move |n| seat(section, &r.to_string(), n)))
        .collect()
}

async fn create(app: &TestApp, show: &str, seats: Vec<Value>) {
    let body = json!({"name": "Best", "starts_at": "2026-12-31T20:00:00Z",
                      "hold_ttl_seconds": 600, "seats": seats});
    app.create_show_from(show, &body).await;
}

async fn best(
    app: &TestApp,
    buyer: &str,
    show: &str,
    quantity: u32,
    section: Option<&str>,
    key: Option<&str>,
) -> Answer {
    let mut ask = json!({"quantity": quantity});
    if let Some(section) = section {
        ask["section"] = json!(section);
    }
    let headers: Vec<(&str, &str)> = key
        .map(|k| vec![("idempotency-key", k)])
        .unwrap_or_default();
    app.call(
        Method::POST,
        &format!("/v1/shows/{show}/holds"),
        Some(&app.buyer(buyer)),
        Some(&json!({ "best_available": ask })),
        &headers,
    )
    .await
}

fn seats_of(answer: &Answer) -> Vec<String> {
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer.body["seats"]
        .as_array()
        .expect("seats")
        .iter()
        .map(|s| s.as_str().expect("seat id").to_owned())
        .collect()
}

async fn take(app: &TestApp, show: &str, seats: &[&str]) {
    let answer = app.hold(&app.buyer("other"), show, seats, None).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
}

async fn best_available_fills_a_gap_of_exactly_the_quantity(env: TestEnv) {
    let app = env.spawn().await;
    // Row "...x..x...": 1-3 ranks best, but any pair there strands a seat,
    // as does any pair of 8-10; the gap 5-6 strands nothing.
    create(&app, "gap", rows("A", 1, 10)).await;
    take(&app, "gap", &["A-1-4", "A-1-7"]).await;
    let answer = best(&app, "buyer", "gap", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-1-5", "A-1-6"]);
    assert_eq!(answer.body["status"], "held");
    let statuses = app.seat_statuses("gap").await;
    assert_eq!(statuses["A-1-5"], "held");
    assert_eq!(statuses["A-1-1"], "available");
}

async fn best_available_takes_the_pair_at_the_wall_rather_than_strand_one(env: TestEnv) {
    let app = env.spawn().await;
    // Five free seats; the pair 2-3 ranks best but would strand seat 1
    // against the row's end, 3-4 would strand 5: 1-2 strands nothing.
    let seats: Vec<Value> = [50, 1, 2, 40, 60]
        .into_iter()
        .zip(1..)
        .map(|(rank, n)| {
            let mut s = seat("A", "1", n);
            s["rank"] = json!(rank);
            s
        })
        .collect();
    create(&app, "wall", seats).await;
    let answer = best(&app, "buyer", "wall", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-1-1", "A-1-2"]);
    // A row of three free seats between a taken seat and the wall: both
    // pairs strand one, so one of them is taken rather than refusing.
    create(&app, "three", rows("A", 1, 4)).await;
    take(&app, "three", &["A-1-4"]).await;
    let answer = best(&app, "buyer", "three", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-1-1", "A-1-2"]);
}

async fn best_available_prefers_explicit_ranks_over_list_order(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "plain", rows("A", 2, 2)).await;
    let answer = best(&app, "buyer", "plain", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-1-1", "A-1-2"], "list order");

    let mut seats = rows("A", 2, 2);
    for (s, rank) in seats.iter_mut().zip([10, 11, 1, 2]) {
        s["rank"] = json!(rank);
    }
    create(&app, "ranked", seats).await;
    let answer = best(&app, "buyer", "ranked", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-2-1", "A-2-2"], "explicit ranks");
    // The rank is part of the show as read back; an unranked seat has none.
    let show = app
        .call(Method::GET, "/v1/shows/ranked", None, None, &[])
        .await;
    assert_eq!(show.body["seats"][2]["rank"], json!(1));
    let plain = app
        .call(Method::GET, "/v1/shows/plain", None, None, &[])
        .await;
    assert!(
        plain.body["seats"][0].get("rank").is_none(),
        "{}",
        plain.body
    );
    // A rank outside its range is refused naming the limit.
    let mut bad = rows("A", 1, 2);
    bad[1]["rank"] = json!(-1);
    let answer = app
        .call(
            Method::PUT,
            "/v1/shows/bad-rank",
            Some(&app.admin()),
            Some(&json!({"name": "Bad", "starts_at": "2026-12-31T20:00:00Z",
                         "hold_ttl_seconds": 60, "seats": bad})),
            &[],
        )
        .await;
    answer.expect_problem(422, "validation_failed");
    assert!(
        answer.str("detail").contains("MAX_SEAT_RANK"),
        "{}",
        answer.body
    );
}

async fn best_available_stays_in_the_section_asked_for(env: TestEnv) {
    let app = env.spawn().await;
    create(
        &app,
        "sections",
        [rows("A", 1, 4), rows("B", 1, 4)].concat(),
    )
    .await;
    let answer = best(&app, "buyer", "sections", 2, Some("B"), None).await;
    assert_eq!(seats_of(&answer), ["B-1-1", "B-1-2"]);
    let answer = best(&app, "buyer", "sections", 2, None, None).await;
    assert_eq!(seats_of(&answer), ["A-1-1", "A-1-2"]);
    // B has 3-4 left: a request for 3 there has no block, even though A has one.
    best(&app, "buyer", "sections", 3, Some("B"), None)
        .await
        .expect_problem(409, "no_adjacent_seats");
    // A section the show does not have can never be served: 422.
    let answer = best(&app, "buyer", "sections", 2, Some("Z"), None).await;
    answer.expect_problem(422, "validation_failed");
    assert!(answer.str("detail").contains("section"), "{}", answer.body);
}

async fn best_available_storm_gives_disjoint_consecutive_blocks(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "storm", rows("A", 10, 10)).await;
    let calls: Vec<_> = (0..30)
        .map(|i| {
            app.hold_call(
                app.buyer(&format!("buyer{i}")),
                "storm",
                json!({"best_available": {"quantity": 3}}),
            )
        })
        .collect();
    let answers = fire_at_once(calls).await;
    let mut held = HashSet::new();
    let mut successes = 0;
    for answer in &answers {
        if answer.status != StatusCode::CREATED {
            answer.expect_problem(409, "no_adjacent_seats");
            continue;
        }
        successes += 1;
        let seats = seats_of(answer);
        assert_eq!(seats.len(), 3);
        let parsed: Vec<(String, u32)> = seats
            .iter()
            .map(|s| {
                let mut parts = s.split('-');
                let (_, row, number) = (parts.next(), parts.next(), parts.next());
                (row.unwrap().to_owned(), number.unwrap().parse().unwrap())
            })
            .collect();
        assert!(
            parsed.iter().all(|(row, _)| *row == parsed[0].0),
            "{seats:?}"
        );
        assert!(
            parsed.windows(2).all(|w| w[1].1 == w[0].1 + 1),
            "consecutive: {seats:?}"
        );
        for seat in seats {
            assert!(held.insert(seat.clone()), "{seat} is in two holds");
        }
    }
    // What fits: a row of ten takes three blocks of three, ten rows thirty.
    // Either every buyer got a block, or none is left for the ones refused.
    let statuses = app.seat_statuses("storm").await;
    let left = blocks_of_three_left(&statuses);
    assert_eq!(
        successes, 30,
        "{successes} holds, {left} blocks of three left"
    );
    assert_eq!(left, 0);
    assert_eq!(
        statuses.values().filter(|s| *s == "held").count(),
        held.len()
    );
}

/// Two instances choose from the same statuses, and each one's claims keep
/// only its own buyers apart: a buyer who loses a block to the other
/// instance must choose again from what is free now, not from what was free
/// at its first read, or it runs out of choices (503) while most seats are
/// free.
async fn best_available_over_two_instances_gives_every_buyer_a_block_while_blocks_remain(
    env: TestEnv,
) {
    const BUYERS: usize = 200;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (first, second) = env.spawn_pair().await;
    create(&first, "pair", rows("A", 40, 25)).await;
    let calls: Vec<_> = (0..BUYERS)
        .map(|i| {
            let app = if i % 2 == 0 { &first } else { &second };
            app.hold_call(
                app.buyer(&format!("buyer{i}")),
                "pair",
                json!({"best_available": {"quantity": 2}}),
            )
        })
        .collect();
    let answers = fire_at_once(calls).await;
    let mut held = HashSet::new();
    for answer in &answers {
        for seat in seats_of(answer) {
            assert!(held.insert(seat.clone()), "{seat} is in two holds");
        }
    }
    assert_eq!(held.len(), 2 * BUYERS, "every buyer has a block of two");
    let statuses = second.seat_statuses("pair").await;
    assert_eq!(
        statuses.values().filter(|s| *s == "held").count(),
        held.len()
    );
    second.stop().await;
    first.stop().await;
}

/// Free blocks of three consecutive seats in one row of `A-row-n` seats.
fn blocks_of_three_left(statuses: &BTreeMap<String, String>) -> usize {
    let mut count = 0;
    for row in 1..=10 {
        let free =
            |n: u32| statuses.get(&format!("A-{row}-{n}")).map(String::as_str) == Some("available");
        count += (1..=8)
            .filter(|&n| free(n) && free(n + 1) && free(n + 2))
            .count();
    }
    count
}

async fn best_available_answers_no_adjacent_seats_when_no_block_is_left(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "full", rows("A", 1, 3)).await;
    take(&app, "full", &["A-1-2"]).await;
    let answer = best(&app, "buyer", "full", 2, None, None).await;
    answer.expect_problem(409, "no_adjacent_seats");
    // A single seat is still a block of one.
    let answer = best(&app, "buyer", "full", 1, None, None).await;
    assert_eq!(seats_of(&answer).len(), 1);
    let answer = best(&app, "buyer", "full", 1, None, None).await;
    assert_eq!(seats_of(&answer).len(), 1);
    best(&app, "buyer", "full", 1, None, None)
        .await
        .expect_problem(409, "no_adjacent_seats");
}

async fn best_available_refuses_a_quantity_outside_its_limits(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "limits", rows("A", 2, 12)).await;
    for quantity in [0, 11] {
        let answer = best(&app, "buyer", "limits", quantity, None, None).await;
        answer.expect_problem(422, "validation_failed");
        assert!(
            answer.str("detail").contains("MAX_BEST_AVAILABLE_QUANTITY"),
            "{}",
            answer.body
        );
    }
    let answer = best(&app, "buyer", "limits", 10, None, None).await;
    assert_eq!(seats_of(&answer).len(), 10);
    // Unknown fields, and two bodies in one, are refused.
    for body in [
        json!({"best_available": {"quantity": 2, "row": "1"}}),
        json!({"best_available": {"quantity": 2}, "seats": ["A-1-1"]}),
        json!({"best_available": {}}),
    ] {
        let answer = app
            .call(
                Method::POST,
                "/v1/shows/limits/holds",
                Some(&app.buyer("buyer")),
                Some(&body),
                &[],
            )
            .await;
        answer.expect_problem(422, "validation_failed");
    }
    let statuses = app.seat_statuses("limits").await;
    assert_eq!(statuses.values().filter(|s| *s == "held").count(), 10);
}

async fn best_available_retry_with_the_same_key_returns_the_same_seats(env: TestEnv) {
    let app = env.spawn().await;
    create(&app, "retry", rows("A", 1, 4)).await;
    let first = best(&app, "buyer", "retry", 2, None, Some("k1")).await;
    let seats = seats_of(&first);
    // The best block is gone (it is this hold), and the rest is taken too:
    // a retry still answers the first choice, not a new one.
    take(&app, "retry", &["A-1-3"]).await;
    let again = best(&app, "buyer", "retry", 2, None, Some("k1")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.str("hold_id"), first.str("hold_id"));
    assert_eq!(again.body["seats"], json!(seats));
    // The same key with another request is refused.
    best(&app, "buyer", "retry", 1, None, Some("k1"))
        .await
        .expect_problem(422, "idempotency_key_reused");
    let statuses = app.seat_statuses("retry").await;
    assert_eq!(statuses.values().filter(|s| *s == "held").count(), 3);
}
