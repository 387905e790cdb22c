//! Tickets and the door over HTTP: tickets of every kind of sale, codes
//! verified with the public key alone, transfers (one wins, even against a
//! check-in), a cancelled line's ticket refused at the door, offline
//! scanners' uploads in either order ending alike, bad scans refused and
//! recorded, and verify equal with tickets and scans in the log.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::checkout::hold_for;
use crate::support::{fire_at_once, Answer, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        every_sale_has_tickets_whose_codes_verify_with_the_public_key_alone,
        a_transfer_hands_the_ticket_on_with_a_new_code_and_revokes_the_old,
        eight_concurrent_transfers_of_one_ticket_have_one_winner,
        a_transfer_racing_a_check_in_has_one_winner_and_the_loser_is_told,
        the_door_admits_once_lets_out_and_refuses_what_the_state_forbids,
        a_cancelled_lines_ticket_is_refused_at_the_door,
        two_offline_scanners_end_alike_whichever_uploads_first,
        bad_scans_are_refused_naming_why_and_recorded,
        verify_is_clean_with_tickets_and_scans_in_the_log,
        transfers_revocations_and_admissions_are_told_to_webhooks,
    ]
}

/// A show of `seats` seats and a pool, with two gates.
async fn door_show(app: &TestApp, show: &str, seats: usize) {
    let mut body = crate::support::show_body(seats, 480);
    body["checkin"] = json!({"gates": [{"gate_id": "north", "label": "North"},
                                       {"gate_id": "south", "label": "South"}]});
    app.create_show_from(show, &body).await;
}

async fn get(app: &TestApp, path: &str, token: &str) -> Answer {
    app.call(Method::GET, path, Some(token), None, &[]).await
}

async fn post(app: &TestApp, path: &str, token: &str, body: &Value) -> Answer {
    app.call(Method::POST, path, Some(token), Some(body), &[])
        .await
}

fn tickets(answer: &Answer) -> Vec<Value> {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body["tickets"].as_array().expect("tickets").clone()
}

/// A purchase of `seats` by `buyer`: its booking id.
async fn bought(app: &TestApp, buyer: &str, show: &str, seats: &[&str]) -> String {
    let hold = hold_for(app, buyer, show, seats).await;
    let bought = app.purchase(buyer, &hold, "pm_sim_ok").await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    bought.str("booking_id")
}

/// The one ticket of a booking of one seat.
async fn ticket_of(app: &TestApp, buyer: &str, booking: &str) -> Value {
    let answer = get(app, &format!("/v1/bookings/{booking}/tickets"), buyer).await;
    let mut tickets = tickets(&answer);
    assert_eq!(tickets.len(), 1, "{}", answer.body);
    tickets.remove(0)
}

/// Verifies `code` with nothing but the show's public keys, as a scanner
/// offline does: the payload it names, if the signature holds.
async fn verified(app: &TestApp, show: &str, code: &str) -> Option<Value> {
    let keys = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/ticket-keys"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(keys.status, StatusCode::OK, "{}", keys.body);
    let (payload, signature) = code.split_once('.')?;
    let json: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(signature).ok()?).ok()?;
    let key = keys.body["keys"]
        .as_array()?
        .iter()
        .find(|k| k["key_id"] == json["key_id"] && k["algorithm"] == "Ed25519")?;
    let bytes: [u8; 32] = URL_SAFE_NO_PAD
        .decode(key["public_key"].as_str()?)
        .ok()?
        .try_into()
        .ok()?;
    let public = VerifyingKey::from_bytes(&bytes).ok()?;
    public.verify(payload.as_bytes(), &signature).ok()?;
    Some(json)
}

async fn scan(
    app: &TestApp,
    show: &str,
    code: &str,
    (gate, direction, nonce): (&str, &str, &str),
) -> Answer {
    let scanner = app.scanner("door-1", &[show]);
    let body = json!({"code": code, "gate": gate, "direction": direction, "nonce": nonce});
    post(app, &format!("/v1/shows/{show}/checkins"), &scanner, &body).await
}

async fn transfer(app: &TestApp, token: &str, ticket: &str, to: &str) -> Answer {
    let body = json!({"to": to, "holder_name": "Bob Builder"});
    post(app, &format!("/v1/tickets/{ticket}/transfer"), token, &body).await
}

async fn every_sale_has_tickets_whose_codes_verify_with_the_public_key_alone(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "gig", 6).await;
    let alice = app.buyer("alice");
    // A purchase of two seats: two tickets.
    let booking = bought(&app, &alice, "gig", &["S1", "S2"]).await;
    let purchased = tickets(&get(&app, &format!("/v1/bookings/{booking}/tickets"), &alice).await);
    assert_eq!(purchased.len(), 2);
    // An order of a seat and two places: three tickets.
    let seat = hold_for(&app, &alice, "gig", &["S3"]).await;
    let body = json!({"pool_id": "floor", "quantity": 2});
    let places = post(&app, "/v1/shows/gig/holds", &alice, &body)
        .await
        .str("hold_id");
    let order = post(
        &app,
        "/v1/orders",
        &alice,
        &json!({"holds": [seat, places], "payment_method": "pm_sim_ok"}),
    )
    .await;
    assert_eq!(order.status, StatusCode::CREATED, "{}", order.body);
    let ordered = tickets(
        &get(
            &app,
            &format!("/v1/orders/{}/tickets", order.str("order_id")),
            &alice,
        )
        .await,
    );
    assert_eq!(ordered.len(), 3);
    assert_eq!(ordered[1]["pool_id"], "floor");
    // The box office, paid and comped.
    let admin = app.admin();
    for payment in ["cash", "comp"] {
        let body = json!({"seats": [if payment == "cash" { "S4" } else { "S5" }], "buyer": "walk-in", "payment": payment});
        let sold = post(&app, "/v1/shows/gig/bookings", &admin, &body).await;
        assert_eq!(sold.status, StatusCode::CREATED, "{}", sold.body);
        let at_counter = tickets(
            &get(
                &app,
                &format!("/v1/orders/{}/tickets", sold.str("order_id")),
                &admin,
            )
            .await,
        );
        assert_eq!(at_counter.len(), 1, "{payment}");
        assert_eq!(at_counter[0]["holder"], "walk-in");
    }
    for ticket in purchased.iter().chain(&ordered) {
        assert_eq!(ticket["status"], "valid");
        assert_eq!(ticket["version"], 1);
        let code = ticket["code"].as_str().expect("a code");
        assert!(code.len() <= 400, "{code}");
        let payload = verified(&app, "gig", code)
            .await
            .expect("the code verifies offline");
        assert_eq!(payload["ticket_id"], ticket["ticket_id"]);
        assert_eq!(
            (payload["show_id"].as_str(), payload["version"].as_u64()),
            (Some("gig"), Some(1))
        );
    }
    // The buyer's own, across their sales; its QR code in both formats.
    let mine = tickets(&get(&app, "/v1/me/tickets", &alice).await);
    assert_eq!(mine.len(), 5);
    let id = mine[0]["ticket_id"].as_str().expect("an id");
    let svg = app
        .client
        .get(format!("{}/v1/tickets/{id}/qr.svg", app.base))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("svg");
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    let png = app
        .client
        .get(format!("{}/v1/tickets/{id}/qr.png", app.base))
        .bearer_auth(&alice)
        .send()
        .await
        .expect("png");
    assert_eq!(&png.bytes().await.expect("bytes")[..4], b"\x89PNG");
    // Nobody else reads it.
    let mallory = app.buyer("mallory");
    get(&app, &format!("/v1/tickets/{id}"), &mallory)
        .await
        .expect_problem(404, "ticket_not_found");
    app.stop().await;
}

async fn a_transfer_hands_the_ticket_on_with_a_new_code_and_revokes_the_old(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "gift", 2).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "gift", &["S1"]).await;
    let ticket = ticket_of(&app, &alice, &booking).await;
    let id = ticket["ticket_id"].as_str().expect("id").to_owned();
    let old_code = ticket["code"].as_str().expect("code").to_owned();
    let named = app
        .call(
            Method::PATCH,
            &format!("/v1/tickets/{id}"),
            Some(&alice),
            Some(&json!({"holder_name": "Alice A."})),
            &[],
        )
        .await;
    assert_eq!(named.status, StatusCode::OK, "{}", named.body);
    assert_eq!(
        (named.str("holder_name"), named.str("code")),
        ("Alice A.".into(), old_code.clone())
    );

    let moved = transfer(&app, &alice, &id, "bob").await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(
        (
            moved.body["holder"].as_str(),
            moved.body["version"].as_u64()
        ),
        (Some("bob"), Some(2))
    );
    assert_ne!(moved.str("code"), old_code);
    let bob = app.buyer("bob");
    assert_eq!(tickets(&get(&app, "/v1/me/tickets", &bob).await).len(), 1);
    assert!(tickets(&get(&app, "/v1/me/tickets", &alice).await).is_empty());
    get(&app, &format!("/v1/tickets/{id}"), &alice)
        .await
        .expect_problem(404, "ticket_not_found");
    transfer(&app, &bob, &id, "bob")
        .await
        .expect_problem(422, "validation_failed");
    // Scanners learn the old code is revoked; the door refuses it.
    let scanner = app.scanner("door-1", &["gift"]);
    let revoked = get(&app, "/v1/shows/gift/revocations?after=0", &scanner).await;
    assert_eq!(
        revoked.body["revoked"],
        json!([{"ticket_id": id, "version": 1}]),
        "{}",
        revoked.body
    );
    scan(&app, "gift", &old_code, ("north", "entry", "n-old"))
        .await
        .expect_problem(410, "ticket_revoked");
    let admitted = scan(
        &app,
        "gift",
        &moved.str("code"),
        ("north", "entry", "n-new"),
    )
    .await;
    assert_eq!(admitted.status, StatusCode::CREATED, "{}", admitted.body);
    assert_eq!(admitted.body["holder_name"], "Bob Builder");
    transfer(&app, &bob, &id, "carol")
        .await
        .expect_problem(409, "ticket_checked_in");
    app.stop().await;
}

async fn eight_concurrent_transfers_of_one_ticket_have_one_winner(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "race", 1).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "race", &["S1"]).await;
    let id = ticket_of(&app, &alice, &booking).await["ticket_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let calls = (0..8)
        .map(|i| {
            let request = app
                .client
                .post(format!("{}/v1/tickets/{id}/transfer", app.base))
                .bearer_auth(&alice)
                .header("content-type", "application/json")
                .body(json!({"to": format!("friend-{i}")}).to_string());
            async move { TestApp::answer(request.send().await.expect("answered")).await }
        })
        .collect();
    let answers = fire_at_once(calls).await;
    let won: Vec<&Answer> = answers
        .iter()
        .filter(|a| a.status == StatusCode::OK)
        .collect();
    assert_eq!(
        won.len(),
        1,
        "one transfer wins: {:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    for lost in answers.iter().filter(|a| a.status != StatusCode::OK) {
        // The ticket is no longer alice's: not found to her.
        lost.expect_problem(404, "ticket_not_found");
    }
    let admin = app.admin();
    let ticket = get(&app, &format!("/v1/tickets/{id}"), &admin).await;
    assert_eq!(ticket.body["version"], 2);
    assert_eq!(ticket.body["holder"], won[0].body["holder"]);
    app.stop().await;
}

async fn a_transfer_racing_a_check_in_has_one_winner_and_the_loser_is_told(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "duel", 1).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "duel", &["S1"]).await;
    let ticket = ticket_of(&app, &alice, &booking).await;
    let (id, code) = (
        ticket["ticket_id"].as_str().expect("id"),
        ticket["code"].as_str().expect("code"),
    );
    let (moved, scanned) = tokio::join!(
        transfer(&app, &alice, id, "bob"),
        scan(&app, "duel", code, ("north", "entry", "n1"))
    );
    match (moved.status, scanned.status) {
        (StatusCode::OK, _) => scanned.expect_problem(410, "ticket_revoked"),
        (_, StatusCode::CREATED) => moved.expect_problem(409, "ticket_checked_in"),
        other => panic!(
            "one of the two must win: {other:?} {} {}",
            moved.body, scanned.body
        ),
    }
    app.stop().await;
}

async fn the_door_admits_once_lets_out_and_refuses_what_the_state_forbids(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = crate::support::show_body(2, 480);
    body["checkin"] = json!({"gates": [{"gate_id": "north", "label": "North"}], "reentry": false});
    app.create_show_from("once", &body).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "once", &["S2"]).await;
    let code = ticket_of(&app, &alice, &booking).await["code"]
        .as_str()
        .expect("code")
        .to_owned();
    scan(&app, "once", &code, ("north", "exit", "x0"))
        .await
        .expect_problem(409, "not_inside");
    let admitted = scan(&app, "once", &code, ("north", "entry", "e1")).await;
    assert_eq!(admitted.status, StatusCode::CREATED, "{}", admitted.body);
    assert_eq!(
        (
            admitted.body["result"].as_str(),
            admitted.body["seat_id"].as_str()
        ),
        (Some("admitted"), Some("S2"))
    );
    assert_eq!(admitted.body["section"], "A");
    // The same nonce again: the same answer; another entry: where and when.
    let again = scan(&app, "once", &code, ("north", "entry", "e1")).await;
    assert_eq!(
        (again.status, again.body["checkin_id"].clone()),
        (StatusCode::CREATED, admitted.body["checkin_id"].clone())
    );
    let inside = scan(&app, "once", &code, ("north", "entry", "e2")).await;
    inside.expect_problem(409, "already_inside");
    assert_eq!(
        (inside.body["gate"].as_str(), &inside.body["at"]),
        (Some("north"), &admitted.body["at"])
    );
    let out = scan(&app, "once", &code, ("north", "exit", "x1")).await;
    assert_eq!(out.body["result"], "exited", "{}", out.body);
    scan(&app, "once", &code, ("north", "entry", "e3"))
        .await
        .expect_problem(409, "reentry_not_allowed");
    let admin = app.admin();
    let attendance = get(&app, "/v1/shows/once/attendance", &admin).await;
    assert_eq!(attendance.status, StatusCode::OK, "{}", attendance.body);
    assert_eq!(
        (
            &attendance.body["tickets"],
            &attendance.body["entered"],
            &attendance.body["inside"],
            &attendance.body["exited"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(1))
    );
    assert_eq!(
        attendance.body["by_gate"],
        json!([{"gate_id": "north", "entries": 1, "exits": 1}])
    );
    let before = get(
        &app,
        &format!(
            "/v1/shows/once/attendance?as_of={}",
            urlencoding(&admitted.str("at"))
        ),
        &admin,
    )
    .await;
    assert_eq!(before.body["inside"], 1, "as of the entry: {}", before.body);
    app.stop().await;
}

fn urlencoding(value: &str) -> String {
    value.replace('+', "%2B").replace(':', "%3A")
}

async fn a_cancelled_lines_ticket_is_refused_at_the_door(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "undo", 3).await;
    let alice = app.buyer("alice");
    let hold = hold_for(&app, &alice, "undo", &["S1", "S2"]).await;
    let order = post(
        &app,
        "/v1/orders",
        &alice,
        &json!({"holds": [hold], "payment_method": "pm_sim_ok"}),
    )
    .await;
    assert_eq!(order.status, StatusCode::CREATED, "{}", order.body);
    let order_id = order.str("order_id");
    let before = tickets(&get(&app, &format!("/v1/orders/{order_id}/tickets"), &alice).await);
    let cancelled = post(
        &app,
        &format!("/v1/orders/{order_id}/cancel"),
        &app.admin(),
        &json!({"lines": [1]}),
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let after = tickets(&get(&app, &format!("/v1/orders/{order_id}/tickets"), &alice).await);
    assert_eq!(
        (after[0]["status"].as_str(), after[1]["status"].as_str()),
        (Some("revoked"), Some("valid"))
    );
    let code = before[0]["code"].as_str().expect("code");
    scan(&app, "undo", code, ("north", "entry", "n1"))
        .await
        .expect_problem(410, "ticket_revoked");
    let kept = scan(
        &app,
        "undo",
        before[1]["code"].as_str().expect("code"),
        ("south", "entry", "n2"),
    )
    .await;
    assert_eq!(kept.status, StatusCode::CREATED, "{}", kept.body);
    let scanner = app.scanner("door-1", &["undo"]);
    let revoked = get(&app, "/v1/shows/undo/revocations", &scanner).await;
    assert_eq!(
        revoked.body["revoked"][0]["ticket_id"],
        before[0]["ticket_id"]
    );
    app.stop().await;
}

async fn two_offline_scanners_end_alike_whichever_uploads_first(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "offline", 2).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "offline", &["S1"]).await;
    let code = ticket_of(&app, &alice, &booking).await["code"]
        .as_str()
        .expect("code")
        .to_owned();
    let at = |s: i64| (app.clock_now() - chrono::Duration::seconds(600 - s)).to_rfc3339();
    let north = json!({"scans": [{"code": code, "gate": "north", "direction": "entry", "nonce": "a-1", "scanned_at": at(0)}]});
    let south = json!({"scans": [{"code": code, "gate": "south", "direction": "entry", "nonce": "b-1", "scanned_at": at(30)}]});
    let scanner = app.scanner("door-2", &["offline"]);
    let first = post(&app, "/v1/shows/offline/checkins/batch", &scanner, &south).await;
    assert_eq!(
        first.body["results"],
        json!([{"nonce": "b-1", "result": "admitted"}]),
        "{}",
        first.body
    );
    let second = post(&app, "/v1/shows/offline/checkins/batch", &scanner, &north).await;
    assert_eq!(
        second.body["results"][0]["result"], "admitted",
        "the earlier scan came first: {}",
        second.body
    );
    // Sent again: duplicates, nothing counted twice.
    let again = post(&app, "/v1/shows/offline/checkins/batch", &scanner, &north).await;
    assert_eq!(again.body["results"][0]["result"], "duplicate");
    let admin = app.admin();
    let conflicts = get(&app, "/v1/shows/offline/checkins/conflicts", &admin).await;
    let listed = conflicts.body["conflicts"].as_array().expect("conflicts");
    assert_eq!(listed.len(), 1, "{}", conflicts.body);
    assert_eq!(
        (
            listed[0]["scan"]["nonce"].as_str(),
            listed[0]["inside_since"]["nonce"].as_str()
        ),
        (Some("b-1"), Some("a-1"))
    );
    let attendance = get(&app, "/v1/shows/offline/attendance", &admin).await;
    assert_eq!(
        (&attendance.body["inside"], &attendance.body["entered"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        attendance.body["by_gate"],
        json!([{"gate_id": "north", "entries": 1, "exits": 0}, {"gate_id": "south", "entries": 1, "exits": 0}])
    );
    app.stop().await;
}

async fn bad_scans_are_refused_naming_why_and_recorded(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "strict", 2).await;
    door_show(&app, "other", 2).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "other", &["S1"]).await;
    let elsewhere = ticket_of(&app, &alice, &booking).await["code"]
        .as_str()
        .expect("code")
        .to_owned();
    scan(&app, "strict", "garbage", ("north", "entry", "g1"))
        .await
        .expect_problem(422, "invalid_code");
    let (payload, signature) = elsewhere.split_once('.').expect("a code");
    let tampered = format!("{}.{signature}", payload.replacen('e', "f", 1));
    scan(&app, "strict", &tampered, ("north", "entry", "g2"))
        .await
        .expect_problem(422, "invalid_code");
    scan(&app, "strict", &elsewhere, ("north", "entry", "g3"))
        .await
        .expect_problem(403, "wrong_show");
    scan(&app, "other", &elsewhere, ("west", "entry", "g4"))
        .await
        .expect_problem(422, "unknown_gate");
    // A scanner of another show may not scan here; a buyer may not at all.
    let outsider = app.scanner("door-9", &["strict"]);
    let body = json!({"code": elsewhere, "gate": "north", "direction": "entry", "nonce": "g5"});
    post(&app, "/v1/shows/other/checkins", &outsider, &body)
        .await
        .expect_problem(403, "forbidden");
    post(&app, "/v1/shows/other/checkins", &alice, &body)
        .await
        .expect_problem(403, "forbidden");
    // A batch over the limit, or with an unknown gate: refused whole.
    let scanner = app.scanner("door-1", &["other"]);
    let scans: Vec<Value> = (0..1001)
        .map(|i| json!({"code": "x", "gate": "north", "direction": "entry", "nonce": format!("b{i}"), "scanned_at": "2030-01-01T00:00:00Z"}))
        .collect();
    post(
        &app,
        "/v1/shows/other/checkins/batch",
        &scanner,
        &json!({"scans": scans}),
    )
    .await
    .expect_problem(422, "validation_failed");
    let bad_gate = json!({"scans": [{"code": elsewhere, "gate": "west", "direction": "entry", "nonce": "w1", "scanned_at": "2030-01-01T00:00:00Z"}]});
    post(&app, "/v1/shows/other/checkins/batch", &scanner, &bad_gate)
        .await
        .expect_problem(422, "unknown_gate");
    // A garbled code in a batch is answered `invalid`, the rest recorded.
    let mixed = json!({"scans": [
        {"code": "garbage", "gate": "north", "direction": "entry", "nonce": "m1", "scanned_at": "2030-01-01T00:00:00Z"},
        {"code": elsewhere, "gate": "north", "direction": "entry", "nonce": "m2", "scanned_at": "2030-01-01T00:00:00Z"}]});
    let results = post(&app, "/v1/shows/other/checkins/batch", &scanner, &mixed).await;
    assert_eq!(
        results.body["results"],
        json!([{"nonce": "m1", "result": "invalid"}, {"nonce": "m2", "result": "admitted"}])
    );
    // A nonce is printable ASCII; a transfer goes to a buyer id without
    // control characters: each a 422 before anything is read or written.
    let accented =
        json!({"code": elsewhere, "gate": "north", "direction": "entry", "nonce": "n\u{e9}"});
    post(&app, "/v1/shows/other/checkins", &scanner, &accented)
        .await
        .expect_problem(422, "validation_failed");
    let ticket = ticket_of(&app, &alice, &booking).await;
    let ticket_path = format!(
        "/v1/tickets/{}/transfer",
        ticket["ticket_id"].as_str().expect("id")
    );
    post(&app, &ticket_path, &alice, &json!({"to": "bob\u{7}"}))
        .await
        .expect_problem(422, "validation_failed");
    // The door page's worker is every show's, but only for a show id's form.
    app.call(Method::GET, "/shows/%FF/scan-sw.js", None, None, &[])
        .await
        .expect_problem(404, "show_not_found");
    let worker = app
        .call(Method::GET, "/shows/any-show/scan-sw.js", None, None, &[])
        .await;
    assert_eq!(worker.status, StatusCode::OK);
    // Every refused scan is in the show's history.
    let history = get(&app, "/v1/shows/strict/history?limit=100", &app.admin()).await;
    let refused = history.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "ScanRefused")
        .count();
    assert_eq!(refused, 3, "{}", history.body);
    app.stop().await;
}

async fn verify_is_clean_with_tickets_and_scans_in_the_log(env: TestEnv) {
    let app = env.spawn().await;
    door_show(&app, "audit", 3).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "audit", &["S1", "S2"]).await;
    let both = tickets(&get(&app, &format!("/v1/bookings/{booking}/tickets"), &alice).await);
    let code = both[0]["code"].as_str().expect("code");
    assert_eq!(
        scan(&app, "audit", code, ("north", "entry", "v1"))
            .await
            .status,
        StatusCode::CREATED
    );
    let id = both[1]["ticket_id"].as_str().expect("id");
    assert_eq!(
        transfer(&app, &alice, id, "bob").await.status,
        StatusCode::OK
    );
    let cancelled = post(
        &app,
        &format!("/v1/bookings/{booking}/cancel"),
        &alice,
        &json!({}),
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let after = tickets(&get(&app, &format!("/v1/bookings/{booking}/tickets"), &alice).await);
    assert!(after.iter().all(|t| t["status"] == "revoked"), "{after:?}");
    assert_eq!(crate::audit::verify_exit_code(&app).0, 0, "verify");
    app.stop().await;
}

async fn transfers_revocations_and_admissions_are_told_to_webhooks(env: TestEnv) {
    use crate::receiver::{Mode, Receiver};
    use crate::webhooks::{quick, register, WAIT};
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let app = env.spawn_with_webhooks(quick()).await;
    let types = ["ticket.transferred", "ticket.revoked", "ticket.checked_in"];
    register(&app, &receiver.url, &types).await;
    door_show(&app, "told", 2).await;
    let alice = app.buyer("alice");
    let booking = bought(&app, &alice, "told", &["S1", "S2"]).await;
    let both = tickets(&get(&app, &format!("/v1/bookings/{booking}/tickets"), &alice).await);
    let (first, second) = (
        both[0]["ticket_id"].as_str().expect("id"),
        both[1]["code"].as_str().expect("code"),
    );
    let moved = transfer(&app, &alice, first, "bob").await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
    assert_eq!(
        scan(&app, "told", second, ("south", "entry", "w1"))
            .await
            .status,
        StatusCode::CREATED
    );
    let of_type = |requests: &[crate::receiver::Received], ty: &str| {
        requests.iter().map(|r| r.json()).find(|e| e["type"] == ty)
    };
    for ty in types {
        let requests = receiver
            .wait_for(ty, WAIT, |r| of_type(r, ty).is_some())
            .await;
        let event = of_type(&requests, ty).expect("one of the type");
        match ty {
            "ticket.transferred" => {
                assert_eq!(
                    (event["data"]["from"].as_str(), event["data"]["to"].as_str()),
                    (Some("alice"), Some("bob"))
                );
                assert_eq!(event["data"]["ticket"]["ticket_id"], first);
            }
            "ticket.revoked" => assert_eq!(event["data"]["version"], 1),
            _ => assert_eq!(
                (
                    event["data"]["gate"].as_str(),
                    event["data"]["mode"].as_str()
                ),
                (Some("south"), Some("online"))
            ),
        }
    }
    app.stop().await;
}
