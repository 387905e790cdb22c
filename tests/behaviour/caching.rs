//! Large read answers: compression, `ETag` and `If-None-Match`; and the
//! retention of idempotency keys.

use std::io::Read;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::support::{TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        read_answers_in_gzip_and_br_decode_to_the_identity_json,
        if_none_match_with_the_current_tag_is_304_without_a_body,
        a_hold_changes_the_availability_tag_and_the_old_tag_gets_200,
        an_unchanged_availability_is_served_again_byte_for_byte_with_its_tag,
        a_hold_expiring_changes_the_availability_without_any_event,
        a_pool_hold_changes_the_availability_tag_and_its_sections,
        a_key_past_its_retention_is_pruned_and_then_places_a_new_hold,
        a_key_inside_its_retention_still_returns_the_same_hold,
    ]
}

/// A raw answer: status, headers and undecoded body bytes.
struct Raw {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    bytes: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("header text").to_owned())
    }

    fn etag(&self) -> String {
        self.header("etag").expect("an ETag")
    }

    /// The body, decoded per Content-Encoding, as JSON.
    fn json(&self) -> Value {
        let mut decoded = Vec::new();
        match self.header("content-encoding").as_deref() {
            None => decoded.clone_from(&self.bytes),
            Some("gzip") => {
                flate2::read::GzDecoder::new(&self.bytes[..])
                    .read_to_end(&mut decoded)
                    .expect("gzip decodes");
            }
            Some("br") => {
                brotli::Decompressor::new(&self.bytes[..], 4096)
                    .read_to_end(&mut decoded)
                    .expect("br decodes");
            }
            Some(other) => panic!("unexpected content-encoding {other}"),
        }
        serde_json::from_slice(&decoded).expect("JSON body")
    }
}

async fn get(app: &TestApp, path: &str, token: Option<&str>, headers: &[(&str, &str)]) -> Raw {
    let mut request = app
        .client
        .request(Method::GET, format!("{}{path}", app.base));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("answered");
    Raw {
        status: response.status(),
        headers: response.headers().clone(),
        bytes: response.bytes().await.expect("body").to_vec(),
    }
}

/// A show with one held seat, and every cached read of it (with the token
/// it needs).
async fn cached_reads(app: &TestApp, show: &str) -> Vec<(String, Option<String>)> {
    app.create_show(show, 20, 480).await;
    let alice = app.buyer("alice");
    let held = app.hold(&alice, show, &["S1"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    // The show history tails the log: on PostgreSQL another test's open
    // transaction can hold it back for a moment, and an empty page is too
    // small to be compressed.
    let admin = app.admin();
    let earlier = (app.clock_now() - chrono::Duration::milliseconds(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        .replace('+', "%2B");
    vec![
        (format!("/v1/shows/{show}/availability"), None),
        (format!("/v1/shows/{show}/availability?section=A"), None),
        (
            format!("/v1/shows/{show}/availability?as_of={earlier}"),
            Some(admin.clone()),
        ),
        (format!("/v1/shows/{show}"), None),
        (format!("/v1/shows/{show}/history"), Some(admin.clone())),
        (
            format!("/v1/shows/{show}/seats/S1/history"),
            Some(admin.clone()),
        ),
    ]
}

/// The JSON without what moves with every request (availability's `as_of`).
fn stable(mut body: Value) -> Value {
    if let Some(object) = body.as_object_mut() {
        if object.contains_key("seats") && object.contains_key("summary") {
            object.remove("as_of");
        }
    }
    body
}

async fn read_answers_in_gzip_and_br_decode_to_the_identity_json(env: TestEnv) {
    let app = env.spawn().await;
    for (path, token) in cached_reads(&app, "zip").await {
        let token = token.as_deref();
        let identity = get(&app, &path, token, &[("accept-encoding", "identity")]).await;
        assert_eq!(identity.status, StatusCode::OK, "{path}");
        assert_eq!(identity.header("content-encoding"), None, "{path}");
        assert_eq!(
            identity.header("content-type").as_deref(),
            Some("application/json")
        );
        assert!(identity.etag().starts_with('"'), "{path}: a strong tag");
        for encoding in ["gzip", "br"] {
            let encoded = get(&app, &path, token, &[("accept-encoding", encoding)]).await;
            assert_eq!(encoded.status, StatusCode::OK, "{path}");
            assert_eq!(
                encoded.header("content-encoding").as_deref(),
                Some(encoding),
                "{path}"
            );
            assert_eq!(
                encoded.header("content-type").as_deref(),
                Some("application/json")
            );
            assert_eq!(encoded.etag(), identity.etag(), "{path}: one tag");
            assert_eq!(
                stable(encoded.json()),
                stable(identity.json()),
                "{path} in {encoding}"
            );
        }
    }
    // Errors stay problem+json, untagged.
    let missing = get(&app, "/v1/shows/nope/availability", None, &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.header("etag"), None);
    app.stop().await;
}

async fn if_none_match_with_the_current_tag_is_304_without_a_body(env: TestEnv) {
    let app = env.spawn().await;
    for (path, token) in cached_reads(&app, "tags").await {
        let token = token.as_deref();
        let first = get(&app, &path, token, &[]).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        let tag = first.etag();
        let weak = format!("W/{tag}");
        let list = format!("\"other\", {tag}");
        for condition in [tag.as_str(), weak.as_str(), list.as_str(), "*"] {
            for encoding in ["identity", "gzip", "br"] {
                let again = get(
                    &app,
                    &path,
                    token,
                    &[("if-none-match", condition), ("accept-encoding", encoding)],
                )
                .await;
                assert_eq!(
                    again.status,
                    StatusCode::NOT_MODIFIED,
                    "{path} with {condition} ({encoding})"
                );
                assert!(again.bytes.is_empty(), "{path}: no body");
                assert_eq!(again.etag(), tag, "{path}: the tag again");
                assert_eq!(again.header("content-encoding"), None);
            }
        }
        let other = get(&app, &path, token, &[("if-none-match", "\"other\"")]).await;
        assert_eq!(other.status, StatusCode::OK, "{path}");
        assert_eq!(stable(other.json()), stable(first.json()));
    }
    app.stop().await;
}

async fn a_hold_changes_the_availability_tag_and_the_old_tag_gets_200(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("moves", 10, 480).await;
    let path = "/v1/shows/moves/availability";
    let before = get(&app, path, None, &[]).await;
    let old_tag = before.etag();
    let unchanged = get(&app, path, None, &[("if-none-match", &old_tag)]).await;
    assert_eq!(unchanged.status, StatusCode::NOT_MODIFIED);

    let held = app.hold(&app.buyer("bob"), "moves", &["S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let after = get(&app, path, None, &[("if-none-match", &old_tag)]).await;
    assert_eq!(after.status, StatusCode::OK);
    assert_ne!(after.etag(), old_tag);
    let seat = |body: &Value| {
        body["seats"]
            .as_array()
            .expect("seats")
            .iter()
            .find(|s| s["seat_id"] == "S2")
            .map(|s| s["status"].clone())
    };
    assert_eq!(seat(&after.json()), Some(json!("held")));
    let current = get(&app, path, None, &[("if-none-match", &after.etag())]).await;
    assert_eq!(current.status, StatusCode::NOT_MODIFIED);
    app.stop().await;
}

/// Availability of `show` (with `query`), in identity and gzip.
async fn both_encodings(app: &TestApp, path: &str, extra: &[(&str, &str)]) -> (Raw, Raw) {
    let mut identity_headers = vec![("accept-encoding", "identity")];
    identity_headers.extend_from_slice(extra);
    let mut gzip_headers = vec![("accept-encoding", "gzip, deflate, br")];
    gzip_headers.extend_from_slice(extra);
    let identity = get(app, path, None, &identity_headers).await;
    let gzip = get(app, path, None, &gzip_headers).await;
    (identity, gzip)
}

async fn an_unchanged_availability_is_served_again_byte_for_byte_with_its_tag(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("still", 20, 480).await;
    let held = app.hold(&app.buyer("ann"), "still", &["S3"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    for path in [
        "/v1/shows/still/availability",
        "/v1/shows/still/availability?section=A",
        "/v1/shows/still/availability?section=B",
        "/v1/shows/still/availability?section=nowhere",
    ] {
        let (identity, gzip) = both_encodings(&app, path, &[]).await;
        assert_eq!(identity.status, StatusCode::OK, "{path}");
        assert_eq!(gzip.header("content-encoding").as_deref(), Some("gzip"));
        assert_eq!(gzip.header("vary").as_deref(), Some("accept-encoding"));
        assert_eq!(gzip.etag(), identity.etag(), "{path}: one tag");
        // One rendered answer: even `as_of` is the same in both encodings.
        assert_eq!(gzip.json(), identity.json(), "{path}: gzip decodes to it");
        // Time passes, nothing changes: the same bytes, the same tag.
        app.clock.advance(chrono::Duration::seconds(5));
        let (again, again_gzip) = both_encodings(&app, path, &[]).await;
        assert_eq!(again.etag(), identity.etag(), "{path}");
        assert_eq!(again.bytes, identity.bytes, "{path}: byte for byte");
        assert_eq!(again_gzip.bytes, gzip.bytes, "{path}: compressed once");
        let tag = identity.etag();
        let (unchanged, unchanged_gzip) =
            both_encodings(&app, path, &[("if-none-match", &tag)]).await;
        for answer in [&unchanged, &unchanged_gzip] {
            assert_eq!(answer.status, StatusCode::NOT_MODIFIED, "{path}");
            assert!(answer.bytes.is_empty(), "{path}: no body");
            assert_eq!(answer.etag(), tag);
            assert_eq!(answer.header("content-encoding"), None);
        }
    }
    // The answer's `as_of` is when it was rendered; its statuses are still
    // the current ones.
    let answer = get(&app, "/v1/shows/still/availability", None, &[])
        .await
        .json();
    let as_of: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(answer["as_of"].clone()).expect("as_of");
    assert!(as_of <= app.clock_now());
    app.stop().await;
}

async fn a_hold_expiring_changes_the_availability_without_any_event(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("lapse", 20, 60).await;
    let held = app
        .hold(&app.buyer("ann"), "lapse", &["S1", "S12"], None)
        .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let seat = |body: &Value, id: &str| {
        body["seats"]
            .as_array()
            .expect("seats")
            .iter()
            .find(|s| s["seat_id"] == id)
            .map(|s| s["status"].clone())
    };
    let paths = [
        "/v1/shows/lapse/availability",
        "/v1/shows/lapse/availability?section=B",
    ];
    let mut before = Vec::new();
    for path in paths {
        let (identity, gzip) = both_encodings(&app, path, &[]).await;
        assert_eq!(seat(&identity.json(), "S12"), Some(json!("held")), "{path}");
        assert_eq!(seat(&gzip.json(), "S12"), Some(json!("held")), "{path}");
        before.push((identity.etag(), identity.bytes));
    }
    let events = app.event_count().await;
    // Just before the expiry: still held, still the same answer.
    app.clock.advance(chrono::Duration::seconds(59));
    for (path, (tag, _)) in paths.iter().zip(&before) {
        let again = get(&app, path, None, &[("if-none-match", tag)]).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{path}");
    }
    // Past it, with no sweep and no event: the seats are available, under a
    // new tag, in every encoding.
    app.clock.advance(chrono::Duration::seconds(2));
    for (path, (tag, bytes)) in paths.iter().zip(&before) {
        let (identity, gzip) = both_encodings(&app, path, &[("if-none-match", tag)]).await;
        for answer in [&identity, &gzip] {
            assert_eq!(answer.status, StatusCode::OK, "{path}: not the kept answer");
            assert_ne!(&answer.etag(), tag, "{path}");
            assert_eq!(seat(&answer.json(), "S12"), Some(json!("available")));
        }
        assert_ne!(&identity.bytes, bytes);
        assert_eq!(identity.json()["summary"]["held"], 0, "{path}");
    }
    assert_eq!(app.event_count().await, events, "no event was needed");
    app.stop().await;
}

async fn a_pool_hold_changes_the_availability_tag_and_its_sections(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("pooled", 20, 480).await;
    let whole = "/v1/shows/pooled/availability";
    let section = "/v1/shows/pooled/availability?section=A";
    let before = get(&app, whole, None, &[]).await;
    let before_section = get(&app, section, None, &[]).await;
    let placed = app
        .call(
            Method::POST,
            "/v1/shows/pooled/holds",
            Some(&app.buyer("pat")),
            Some(&json!({"pool_id": "floor", "quantity": 2})),
            &[],
        )
        .await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    for (path, old) in [(whole, &before), (section, &before_section)] {
        let after = get(&app, path, None, &[("if-none-match", &old.etag())]).await;
        assert_eq!(after.status, StatusCode::OK, "{path}");
        assert_ne!(after.etag(), old.etag(), "{path}");
        assert_eq!(after.json()["pools"][0]["held"], 2, "{path}");
    }
    // A seat held in section B changes the whole answer, not section A's.
    let a = get(&app, section, None, &[]).await;
    let held = app.hold(&app.buyer("pat"), "pooled", &["S15"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let a_again = get(&app, section, None, &[("if-none-match", &a.etag())]).await;
    assert_eq!(a_again.status, StatusCode::NOT_MODIFIED);
    let whole_after = get(&app, whole, None, &[]).await;
    assert_eq!(whole_after.json()["summary"]["held"], 1);
    app.stop().await;
}

const RETENTION_HOURS: i64 = domain::limits::MIN_IDEMPOTENCY_RETENTION_HOURS as i64;

/// A buyer token still valid once the clock has moved past the retention.
fn lasting_buyer(app: &TestApp) -> String {
    let ttl = chrono::Duration::hours(2 * RETENTION_HOURS);
    app.token_lasting("alice", booking::auth::Role::Buyer, ttl)
}

async fn a_key_past_its_retention_is_pruned_and_then_places_a_new_hold(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("prune", 10, 480).await;
    let alice = lasting_buyer(&app);
    let first = app.hold(&alice, "prune", &["S1"], Some("k-old")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let old_hold = first.str("hold_id");
    // The first hold is bought: its checkout stream now carries its id.
    let bought = app.purchase(&alice, &old_hold, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);

    app.clock
        .advance(chrono::Duration::hours(RETENTION_HOURS) + chrono::Duration::minutes(1));
    app.sweeper.run_once().await.unwrap();
    assert_eq!(app.sweeper.prune_keys().await.unwrap(), 0, "already pruned");

    // The key is new again: another request under it is not "reused"; the
    // same seat is sold, so the new hold is refused like anyone's.
    let sold = app.hold(&alice, "prune", &["S1"], Some("k-old")).await;
    sold.expect_problem(409, "seat_taken");
    let again = app.hold(&alice, "prune", &["S2"], Some("k-old")).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    let new_hold = again.str("hold_id");
    assert_ne!(new_hold, old_hold, "a new hold, never the old one's id");
    // Its purchase is its own, not the old hold's booking.
    let bought_again = app.purchase(&alice, &new_hold, "pm_sim_ok").await;
    assert_eq!(
        bought_again.status,
        StatusCode::CREATED,
        "{}",
        bought_again.body
    );
    assert_ne!(bought_again.body["booking_id"], bought.body["booking_id"]);
    // And the retry within the new key's retention is that new hold.
    let retry = app.hold(&alice, "prune", &["S2"], Some("k-old")).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
    assert_eq!(retry.str("hold_id"), new_hold);
    app.stop().await;
}

async fn a_key_inside_its_retention_still_returns_the_same_hold(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("keep", 10, 480).await;
    let alice = lasting_buyer(&app);
    let first = app.hold(&alice, "keep", &["S1"], Some("k-kept")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);

    app.clock
        .advance(chrono::Duration::hours(RETENTION_HOURS) - chrono::Duration::minutes(1));
    app.sweeper.run_once().await.unwrap();
    let again = app.hold(&alice, "keep", &["S1"], Some("k-kept")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.str("hold_id"), first.str("hold_id"));
    assert_eq!(again.str("status"), "expired");
    let reused = app.hold(&alice, "keep", &["S2"], Some("k-kept")).await;
    reused.expect_problem(422, "idempotency_key_reused");
    app.stop().await;
}
