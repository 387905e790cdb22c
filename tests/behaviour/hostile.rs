//! The edge under a hostile crowd (docs/api.md): paths that are not valid
//! UTF-8, bad query strings, unknown methods and control characters in show
//! text are problem+json with a stable code on both stores.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::bad_input::{expect_refused, raw};
use crate::support::{show_body, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        hostile_paths_queries_and_methods_are_problems,
        control_characters_in_show_text_are_refused_on_both_stores,
    ]
}

/// Every rejection axum itself could make (path, query, method) is
/// problem+json with a stable code (docs/api.md, "The edge under a hostile
/// crowd"): a segment that is not valid UTF-8 is the not-found of its id.
async fn hostile_paths_queries_and_methods_are_problems(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("bad", 3, 480).await;
    let alice = app.buyer("alice");
    let admin = app.admin();
    let before = app.event_count().await;
    let brew = Method::from_bytes(b"BREW").expect("a method");
    let cases: Vec<(Method, &str, &str, (u16, &str))> = vec![
        (
            Method::GET,
            "/v1/shows/%FF",
            &alice,
            (404, "show_not_found"),
        ),
        (
            Method::PUT,
            "/v1/shows/%FF",
            &admin,
            (422, "validation_failed"),
        ),
        (
            Method::GET,
            "/v1/shows/%FF/availability",
            &alice,
            (404, "show_not_found"),
        ),
        (
            Method::POST,
            "/v1/shows/%FF/holds",
            &alice,
            (404, "show_not_found"),
        ),
        (
            Method::GET,
            "/v1/holds/%FF",
            &alice,
            (404, "hold_not_found"),
        ),
        (
            Method::DELETE,
            "/v1/holds/%FF",
            &alice,
            (404, "hold_not_found"),
        ),
        (
            Method::POST,
            "/v1/holds/%FF/purchase",
            &alice,
            (404, "hold_not_found"),
        ),
        (
            Method::GET,
            "/v1/bookings/%FF",
            &alice,
            (404, "booking_not_found"),
        ),
        (
            Method::POST,
            "/v1/bookings/%FF/cancel",
            &alice,
            (404, "booking_not_found"),
        ),
        (
            Method::GET,
            "/v1/shows/bad/seats/%FF/history",
            &admin,
            (404, "unknown_seat"),
        ),
        (
            Method::GET,
            "/v1/shows/%C3%28/history",
            &admin,
            (404, "show_not_found"),
        ),
        (
            Method::GET,
            "/v1/shows/bad/history?limit=abc",
            &admin,
            (422, "validation_failed"),
        ),
        (
            Method::GET,
            "/v1/shows/bad/history?after=%FF",
            &admin,
            (422, "validation_failed"),
        ),
        (
            Method::GET,
            "/v1/shows/bad/history?limit=1&unknown=1",
            &admin,
            (422, "validation_failed"),
        ),
        (
            Method::GET,
            "/v1/shows/bad/availability?as_of=",
            &admin,
            (422, "validation_failed"),
        ),
        (
            brew.clone(),
            "/v1/holds/x",
            &alice,
            (405, "method_not_allowed"),
        ),
        (brew, "/v1/shows/%FF", &alice, (405, "method_not_allowed")),
        (Method::GET, "/v1/%FF", &alice, (404, "not_found")),
    ];
    for (method, path, token, expected) in cases {
        let content_type =
            matches!(method, Method::PUT | Method::POST).then_some("application/json");
        let body = if method == Method::PUT {
            show_body(2, 60).to_string()
        } else {
            "{}".into()
        };
        expect_refused(&app, token, raw(method, path, content_type, body), expected).await;
    }
    assert_eq!(app.event_count().await, before);
    app.stop().await;
}

/// A control character (NUL included) in a show's name, section or row is
/// 422 naming the field on both stores, and creates nothing (PostgreSQL's
/// text type refuses NUL, which must not surface as a 500).
async fn control_characters_in_show_text_are_refused_on_both_stores(env: TestEnv) {
    let app = env.spawn().await;
    let admin = app.admin();
    let mut cases: Vec<(String, Value)> = Vec::new();
    for (field, value) in [
        ("section", "A\u{0}"),
        ("row", "1\n2"),
        ("section", "\u{1b}[31mred"),
    ] {
        let mut body = show_body(3, 480);
        body["seats"][1][field] = json!(value);
        cases.push((format!("seats[1].{field}"), body));
    }
    let mut name = show_body(3, 480);
    name["name"] = json!("Rock\u{0}Night");
    cases.push(("name".into(), name));
    for (field, body) in cases {
        let answer = app
            .call(Method::PUT, "/v1/shows/ctl", Some(&admin), Some(&body), &[])
            .await;
        answer.expect_problem(422, "validation_failed");
        assert!(
            answer.body["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&field)),
            "{field}: {}",
            answer.body
        );
        let read = app
            .call(Method::GET, "/v1/shows/ctl", None, None, &[])
            .await;
        assert_eq!(
            read.status,
            StatusCode::NOT_FOUND,
            "{field} created the show"
        );
    }
    assert_eq!(app.event_count().await, 0);
    app.stop().await;
}
