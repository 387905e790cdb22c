//! Every bad input is a 4xx problem+json with a stable code, and changes nothing.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{show_body, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        bad_hold_requests_are_refused_and_change_nothing,
        bad_show_definitions_are_refused_and_create_nothing,
    ]
}

/// A raw request: method, path, content type, body and extra headers.
pub struct Raw<'a> {
    method: Method,
    path: &'a str,
    content_type: Option<&'a str>,
    body: String,
    headers: &'a [(&'a str, String)],
}

/// (what, content type, body, expected status and code)
type Case<'a> = (&'a str, Option<&'a str>, String, (u16, &'a str));

pub fn raw<'a>(
    method: Method,
    path: &'a str,
    content_type: Option<&'a str>,
    body: String,
) -> Raw<'a> {
    Raw {
        method,
        path,
        content_type,
        body,
        headers: &[],
    }
}

/// Sends a raw request and expects a problem.
pub async fn expect_refused(app: &TestApp, token: &str, request: Raw<'_>, expected: (u16, &str)) {
    let Raw {
        method,
        path,
        content_type,
        body,
        headers,
    } = request;
    // Its own connection, closed after: a server that refuses a body early
    // (413) closes the connection, which must not be reused for the next call.
    let mut request = app
        .client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .header("connection", "close")
        .body(body);
    if let Some(content_type) = content_type {
        request = request.header("content-type", content_type);
    }
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let answer = TestApp::answer(request.send().await.expect("answered")).await;
    assert_eq!(
        answer.content_type, "application/problem+json",
        "{path} {expected:?}: {}",
        answer.body
    );
    answer.expect_problem(expected.0, expected.1);
    assert!(answer.body["detail"]
        .as_str()
        .is_some_and(|d| !d.is_empty()));
}

async fn bad_hold_requests_are_refused_and_change_nothing(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("bad", 60, 480).await;
    let alice = app.buyer("alice");
    let json_type = Some("application/json");
    let many: Vec<String> = (1..=51).map(crate::support::seat_id).collect();
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            json_type,
            "{\"seats\": [".into(),
            (400, "malformed_json"),
        ),
        (
            "trailing garbage",
            json_type,
            "{\"seats\": [\"S1\"]} x".into(),
            (400, "malformed_json"),
        ),
        (
            "empty body",
            json_type,
            String::new(),
            (400, "malformed_json"),
        ),
        (
            "seats is a string",
            json_type,
            json!({"seats": "S1"}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "a seat is a number",
            json_type,
            json!({"seats": [1]}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "unknown field",
            json_type,
            json!({"seats": ["S1"], "vip": true}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "unknown seat",
            json_type,
            json!({"seats": ["S1", "Z9"]}).to_string(),
            (422, "unknown_seat"),
        ),
        (
            "duplicate seat",
            json_type,
            json!({"seats": ["S1", "S1"]}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "no seats",
            json_type,
            json!({"seats": []}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "51 seats",
            json_type,
            json!({"seats": many}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "oversized seat id",
            json_type,
            json!({"seats": ["S".repeat(33)]}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "both seats and pool",
            json_type,
            json!({"seats": ["S1"], "pool_id": "floor", "quantity": 1}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "neither seats nor pool",
            json_type,
            json!({}).to_string(),
            (422, "validation_failed"),
        ),
        (
            "not JSON content type",
            Some("text/plain"),
            json!({"seats": ["S1"]}).to_string(),
            (415, "unsupported_media_type"),
        ),
        (
            "no content type",
            None,
            json!({"seats": ["S1"]}).to_string(),
            (415, "unsupported_media_type"),
        ),
        (
            "body over 64 KiB",
            json_type,
            format!("{{\"seats\": [\"{}\"]}}", "S".repeat(70_000)),
            (413, "payload_too_large"),
        ),
    ];
    for (what, content_type, body, expected) in cases {
        let before = app.event_count().await;
        expect_refused(
            &app,
            &alice,
            raw(Method::POST, "/v1/shows/bad/holds", content_type, body),
            expected,
        )
        .await;
        assert_eq!(app.event_count().await, before, "{what} changed the log");
    }
    let hold = json!({"seats": ["S1"]}).to_string();
    for (what, key) in [
        ("key too long", "k".repeat(256)),
        ("key not ASCII", "clé".into()),
    ] {
        let headers = [("idempotency-key", key)];
        expect_refused(
            &app,
            &alice,
            Raw {
                headers: &headers,
                ..raw(Method::POST, "/v1/shows/bad/holds", json_type, hold.clone())
            },
            (422, "validation_failed"),
        )
        .await;
        assert_eq!(app.event_count().await, 0, "{what}");
    }
    expect_refused(
        &app,
        &alice,
        raw(
            Method::POST,
            "/v1/shows/nope/holds",
            json_type,
            hold.clone(),
        ),
        (404, "show_not_found"),
    )
    .await;
    let long_show = format!("/v1/shows/{}/holds", "x".repeat(65));
    expect_refused(
        &app,
        &alice,
        raw(Method::POST, &long_show, json_type, hold.clone()),
        (404, "show_not_found"),
    )
    .await;
    expect_refused(
        &app,
        &alice,
        raw(Method::GET, "/v1/holds/not-a-uuid", None, String::new()),
        (404, "hold_not_found"),
    )
    .await;
    expect_refused(
        &app,
        &alice,
        raw(Method::PATCH, "/v1/holds/not-a-uuid", None, String::new()),
        (405, "method_not_allowed"),
    )
    .await;
    assert_eq!(app.event_count().await, 0);
    let statuses = app.seat_statuses("bad").await;
    assert!(statuses.values().all(|s| s == "available"));
    app.stop().await;
}

async fn bad_show_definitions_are_refused_and_create_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let admin = app.admin();
    let json_type = Some("application/json");
    let with = |field: &str, value: Value| {
        let mut body = show_body(3, 480);
        body[field] = value;
        body.to_string()
    };
    let mut duplicate = show_body(3, 480);
    duplicate["seats"][1]["seat_id"] = json!("S1");
    let mut pricey = show_body(3, 480);
    pricey["seats"][0]["price_cents"] = json!(10_000_001);
    let mut long_section = show_body(3, 480);
    long_section["seats"][0]["section"] = json!("s".repeat(201));
    let mut bad_seat_id = show_body(3, 480);
    bad_seat_id["seats"][0]["seat_id"] = json!("A 1");
    let mut seat_extra = show_body(3, 480);
    seat_extra["seats"][0]["color"] = json!("red");
    let huge = format!(
        "{{\"name\": \"{}\", \"starts_at\": \"2026-12-31T20:00:00Z\", \"hold_ttl_seconds\": 480}}",
        "n".repeat(17 * 1024 * 1024)
    );
    let cases: Vec<(&str, String, (u16, &str))> = vec![
        (
            "ttl 0",
            with("hold_ttl_seconds", json!(0)),
            (422, "validation_failed"),
        ),
        (
            "ttl 7201",
            with("hold_ttl_seconds", json!(7201)),
            (422, "validation_failed"),
        ),
        (
            "negative ttl",
            with("hold_ttl_seconds", json!(-5)),
            (422, "validation_failed"),
        ),
        (
            "empty name",
            with("name", json!("")),
            (422, "validation_failed"),
        ),
        (
            "name of 201 characters",
            with("name", json!("n".repeat(201))),
            (422, "validation_failed"),
        ),
        (
            "starts_at not a time",
            with("starts_at", json!("tomorrow")),
            (422, "validation_failed"),
        ),
        (
            "nothing to sell",
            json!({"name": "x", "starts_at": "2026-12-31T20:00:00Z", "hold_ttl_seconds": 60})
                .to_string(),
            (422, "validation_failed"),
        ),
        (
            "missing name",
            json!({"starts_at": "2026-12-31T20:00:00Z", "hold_ttl_seconds": 60, "seats": []})
                .to_string(),
            (422, "validation_failed"),
        ),
        (
            "duplicate seat",
            duplicate.to_string(),
            (422, "validation_failed"),
        ),
        (
            "price over the limit",
            pricey.to_string(),
            (422, "validation_failed"),
        ),
        (
            "section of 201 characters",
            long_section.to_string(),
            (422, "validation_failed"),
        ),
        (
            "seat id with a space",
            bad_seat_id.to_string(),
            (422, "validation_failed"),
        ),
        (
            "unknown seat field",
            seat_extra.to_string(),
            (422, "validation_failed"),
        ),
        ("body over 16 MiB", huge, (413, "payload_too_large")),
    ];
    for (what, body, expected) in cases {
        expect_refused(
            &app,
            &admin,
            raw(Method::PUT, "/v1/shows/bad", json_type, body),
            expected,
        )
        .await;
        let read = app
            .call(Method::GET, "/v1/shows/bad", None, None, &[])
            .await;
        assert_eq!(
            read.status,
            StatusCode::NOT_FOUND,
            "{what} created the show"
        );
    }
    let long_id = format!("/v1/shows/{}", "x".repeat(65));
    expect_refused(
        &app,
        &admin,
        raw(
            Method::PUT,
            &long_id,
            json_type,
            show_body(2, 60).to_string(),
        ),
        (422, "validation_failed"),
    )
    .await;
    expect_refused(
        &app,
        &admin,
        raw(
            Method::PUT,
            "/v1/shows/bad.id",
            json_type,
            show_body(2, 60).to_string(),
        ),
        (422, "validation_failed"),
    )
    .await;
    assert_eq!(app.event_count().await, 0);
    app.stop().await;
}
