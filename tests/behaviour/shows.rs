//! Shows and availability.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{show_body, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        the_same_show_again_is_200_and_a_different_one_is_409,
        a_show_of_100000_seats_is_answered_in_one_response,
        availability_can_be_read_for_one_section,
    ]
}

async fn the_same_show_again_is_200_and_a_different_one_is_409(env: TestEnv) {
    let app = env.spawn().await;
    let admin = app.admin();
    let created = app.create_show("again", 3, 480).await;
    assert_eq!(created.body["show_id"], "again");
    assert_eq!(created.body["seats"].as_array().unwrap().len(), 3);

    // Same meaning, other bytes: another offset for the same instant, keys reordered.
    let mut same = show_body(3, 480);
    same["starts_at"] = json!("2026-12-31T21:00:00+01:00");
    let text = format!(
        "{{\"seats\": {}, \"hold_ttl_seconds\": 480, \"pools\": {}, \"name\": \"Test show\", \"starts_at\": {}}}",
        same["seats"], same["pools"], same["starts_at"]
    );
    let again = app
        .client
        .put(format!("{}/v1/shows/again", app.base))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body(text)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);

    let different = app
        .call(
            Method::PUT,
            "/v1/shows/again",
            Some(&admin),
            Some(&show_body(4, 480)),
            &[],
        )
        .await;
    different.expect_problem(409, "show_exists");

    let read = app
        .call(Method::GET, "/v1/shows/again", None, None, &[])
        .await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body, created.body);
    assert_eq!(read.body["starts_at"], "2026-12-31T20:00:00Z");
    app.stop().await;
}

async fn a_show_of_100000_seats_is_answered_in_one_response(env: TestEnv) {
    const SEATS: usize = 100_000;
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    app.create_show("stadium", SEATS, 480).await;
    let alice = app.buyer("alice");
    let hold = app
        .hold(&alice, "stadium", &["S99999", "S100000"], None)
        .await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
    assert_eq!(hold.body["seats"], json!(["S99999", "S100000"]));
    let answer = app.availability("stadium").await;
    let seats = answer.body["seats"].as_array().unwrap();
    assert_eq!(seats.len(), SEATS);
    assert_eq!(seats[0]["seat_id"], "S1");
    assert_eq!(seats[SEATS - 1]["status"], "held");
    assert_eq!(
        answer.body["summary"],
        json!({"available": SEATS - 2, "held": 2, "booked": 0})
    );
    app.stop().await;
}

async fn availability_can_be_read_for_one_section(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("sections", 25, 480).await;
    let answer = app
        .call(
            Method::GET,
            "/v1/shows/sections/availability?section=B",
            None,
            None,
            &[],
        )
        .await;
    let seats: Vec<&str> = answer.body["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seat_id"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (11..=20).map(crate::support::seat_id).collect();
    assert_eq!(seats, expected);
    assert_eq!(answer.body["summary"]["available"], 10);
    assert_eq!(answer.body["pools"][0]["available"], 100);
    app.call(Method::GET, "/v1/shows/nope/availability", None, None, &[])
        .await
        .expect_problem(404, "show_not_found");
    app.call(
        Method::GET,
        "/v1/shows/sections/availability?bogus=1",
        None,
        None,
        &[],
    )
    .await
    .expect_problem(422, "validation_failed");
    app.stop().await;
}
