//! The door's page and the ticket's page in a real browser (Debian's
//! headless Chromium over WebDriver, as the seat map's tests). The network
//! is cut and restored through the DevTools protocol (chromedriver's
//! `goog/cdp/execute`, `Network.emulateNetworkConditions`), so the page
//! itself finds out it is offline, as at a gate with no signal.

use std::time::Duration;

use fantoccini::{Client, Locator};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::browser::{
    assert_accessible, attr, axe_source, browser, start_driver, text, wait_attr, Driver, ENTER,
    PATIENCE,
};
use crate::checkout::hold_for;
use crate::support::{seat_id, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        the_door_page_keeps_admitting_without_the_network_and_sends_its_queue_when_back,
        a_ticket_page_shows_the_code_and_what_the_door_checks,
    ]
}

/// How long the page may take to notice the network is back and send its
/// queue: it looks every 2 s (door.js, `EVERY_MS`); a bound for a broken
/// build, not a performance figure.
const RECONNECT_WITHIN: Duration = Duration::from_secs(20);

/// The page's network through the DevTools protocol (chromedriver's
/// `goog/cdp/execute`): the page's own requests, and its service worker's,
/// which Chromium sends apart from the page's (a DevTools session of their
/// own, reached through `Target.sendMessageToTarget`).
struct Network<'a> {
    driver: &'a Driver,
    session: String,
    /// The DevTools sessions of the service workers, once attached.
    workers: Vec<String>,
}

impl<'a> Network<'a> {
    async fn of(driver: &'a Driver, client: &Client) -> Network<'a> {
        let session = client
            .session_id()
            .await
            .expect("a session id")
            .expect("a session");
        Network {
            driver,
            session,
            workers: Vec::new(),
        }
    }

    async fn cdp(&self, cmd: &str, params: Value) -> Value {
        let answer = reqwest::Client::new()
            .post(format!(
                "{}/session/{}/goog/cdp/execute",
                self.driver.url, self.session
            ))
            .json(&json!({"cmd": cmd, "params": params}))
            .send()
            .await
            .expect("chromedriver answers");
        let status = answer.status();
        let body: Value = answer.json().await.unwrap_or_default();
        assert!(status.is_success(), "{cmd} refused: {body}");
        body["value"].clone()
    }

    /// Cuts (`offline`) or restores the network of the page and of every
    /// service worker it has.
    async fn set(&mut self, offline: bool) {
        let conditions = json!({"offline": offline, "latency": 0,
                                "downloadThroughput": -1, "uploadThroughput": -1});
        self.cdp("Network.enable", json!({})).await;
        self.cdp("Network.emulateNetworkConditions", conditions.clone())
            .await;
        if self.workers.is_empty() {
            let targets = self.cdp("Target.getTargets", json!({})).await;
            for target in targets["targetInfos"].as_array().into_iter().flatten() {
                if target["type"] == "service_worker" {
                    let attached = self
                        .cdp(
                            "Target.attachToTarget",
                            json!({"targetId": target["targetId"], "flatten": false}),
                        )
                        .await;
                    let session = attached["sessionId"].as_str().expect("a session");
                    self.workers.push(session.to_owned());
                }
            }
            assert!(!self.workers.is_empty(), "the door page has its worker");
        }
        for worker in &self.workers {
            for (id, (method, params)) in [
                ("Network.enable", json!({})),
                ("Network.emulateNetworkConditions", conditions.clone()),
            ]
            .into_iter()
            .enumerate()
            {
                let message = json!({"id": id + 1, "method": method, "params": params});
                self.cdp(
                    "Target.sendMessageToTarget",
                    json!({"sessionId": worker, "message": message.to_string()}),
                )
                .await;
            }
        }
    }
}

/// Scans `code` as a hardware scanner does: types it into the field and
/// presses Enter; waits for the answer to change and returns the verdict
/// (`data-result`) and its detail.
async fn scan(client: &Client, code: &str) -> (String, String) {
    // Cleared first so that two equal answers in a row are told apart.
    crate::browser::run(
        client,
        "document.getElementById('scan-result').dataset.result = 'none'; return null;",
    )
    .await;
    let field = client
        .find(Locator::Css("#scan-code"))
        .await
        .expect("the code field");
    field
        .send_keys(&format!("{code}{ENTER}"))
        .await
        .expect("the code typed");
    let result = wait_attr(client, "#scan-result", "data-result", PATIENCE, |v| {
        v != "none"
    })
    .await;
    (result, text(client, "#scan-result").await)
}

async fn pending(client: &Client) -> String {
    attr(client, "#scan-queue", "data-pending")
        .await
        .unwrap_or_default()
}

/// Four single-seat purchases by one buyer: their tickets, in seat order.
async fn four_tickets(app: &TestApp, show: &str) -> Vec<Value> {
    let buyer = app.buyer("door-buyer");
    let mut tickets = Vec::new();
    for n in 1..=4 {
        let seat = seat_id(n);
        let hold = hold_for(app, &buyer, show, &[&seat]).await;
        let bought = app.purchase(&buyer, &hold, "pm_sim_ok").await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
        let listed = app
            .call(
                Method::GET,
                &format!("/v1/bookings/{}/tickets", bought.str("booking_id")),
                Some(&buyer),
                None,
                &[],
            )
            .await;
        assert_eq!(listed.status, StatusCode::OK, "{}", listed.body);
        tickets.push(listed.body["tickets"][0].clone());
    }
    tickets
}

/// The door on a night with bad signal: a steward scans online, the
/// network goes, three more codes are scanned (one of them revoked by a
/// transfer before the door opened: refused offline), the page is
/// reloaded without the network (its worker opens it; the queue and whom
/// it let in survive), the network returns, and the queue reaches the
/// service: attendance counts exactly the three let in.
async fn the_door_page_keeps_admitting_without_the_network_and_sends_its_queue_when_back(
    env: TestEnv,
) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("door-{}", uuid::Uuid::new_v4().simple());
    let mut body = crate::support::show_body(10, 600);
    body["checkin"] = json!({"gates": [{"gate_id": "north", "label": "North gate"},
                                       {"gate_id": "south", "label": "South gate"}]});
    app.create_show_from(&show, &body).await;
    let tickets = four_tickets(&app, &show).await;
    let code = |n: usize| tickets[n]["code"].as_str().expect("a code").to_owned();
    // The fourth ticket changes hands before the door opens: the code the
    // buyer still has on a screenshot is revoked.
    let moved = app
        .call(
            Method::POST,
            &format!(
                "/v1/tickets/{}/transfer",
                tickets[3]["ticket_id"].as_str().expect("id")
            ),
            Some(&app.buyer("door-buyer")),
            Some(&json!({"to": "door-friend", "holder_name": "A Friend"})),
            &[],
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);

    let scanner = app.scanner("gate-steward", &[&show]);
    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("door")).await;
    page.goto(&format!("{}/shows/{show}/scan#token={scanner}", app.base))
        .await
        .expect("the door page opens");
    wait_attr(&page, "body", "data-ready", PATIENCE, |v| v == "true").await;
    wait_attr(&page, "body", "data-offline-ready", PATIENCE, |v| {
        v == "true"
    })
    .await;
    assert_eq!(
        attr(&page, "body", "data-online").await.as_deref(),
        Some("true")
    );
    page.find(Locator::Css("#scan-gate"))
        .await
        .expect("the gate list")
        .select_by_value("south")
        .await
        .expect("the south gate");
    if let Some(axe) = axe_source() {
        assert_accessible(&page, &axe, "door page as it opens").await;
    }

    // Online: the service answers, with the seat for the steward to check.
    let (result, detail) = scan(&page, &code(0)).await;
    assert_eq!(result, "admitted", "{detail}");
    assert!(detail.contains("Section A · Row 1 · Seat 1"), "{detail}");
    assert!(
        detail.contains("Standard ticket"),
        "the ticket type: {detail}"
    );
    if let Some(axe) = axe_source() {
        assert_accessible(&page, &axe, "door page showing an admission").await;
    }

    // The network goes. Two codes are let in on the public key alone; the
    // screenshot of the transferred ticket is refused from the revocations
    // the page fetched.
    let mut network = Network::of(&driver, &page).await;
    network.set(true).await;
    let (result, detail) = scan(&page, &code(1)).await;
    assert_eq!(result, "admitted", "{detail}");
    assert!(detail.contains(&format!("Seat {}", seat_id(2))), "{detail}");
    wait_attr(&page, "body", "data-online", PATIENCE, |v| v == "false").await;
    let (result, _) = scan(&page, &code(2)).await;
    assert_eq!(result, "admitted");
    let (result, detail) = scan(&page, &code(3)).await;
    assert_eq!(result, "refused");
    assert!(detail.contains("Revoked"), "{detail}");
    // A scanner's garbage (longer than any code) is refused and kept, cut
    // to what the service takes, so it never blocks the upload.
    let (result, detail) = scan(&page, &"x".repeat(450)).await;
    assert_eq!(result, "refused");
    assert!(detail.contains("Not a valid ticket"), "{detail}");
    assert_eq!(pending(&page).await, "4");
    // Nothing has reached the service yet.
    let attendance = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/attendance"),
            Some(&scanner),
            None,
            &[],
        )
        .await;
    assert_eq!(attendance.body["inside"], json!(1), "{}", attendance.body);

    // A reload with no network: the worker's copy opens, the queue and the
    // admissions are still there (the second ticket is inside).
    page.refresh().await.expect("the page reloads offline");
    let served = crate::browser::run(
        &page,
        "return performance.getEntriesByType('navigation')[0].deliveryType;",
    )
    .await;
    assert_eq!(served, json!("cache-storage"), "the worker's copy opened");
    wait_attr(&page, "#scan-queue", "data-pending", PATIENCE, |v| v == "4").await;
    wait_attr(&page, "body", "data-online", PATIENCE, |v| v == "false").await;
    let gate =
        crate::browser::run(&page, "return document.getElementById('scan-gate').value;").await;
    assert_eq!(gate, json!("south"), "the gate chosen is kept");
    let (result, detail) = scan(&page, &code(1)).await;
    assert_eq!(result, "refused", "let in twice offline: {detail}");
    assert!(detail.contains("Already inside"), "{detail}");
    assert_eq!(pending(&page).await, "5");

    // The network returns: the page sends its queue.
    network.set(false).await;
    wait_attr(
        &page,
        "#scan-queue",
        "data-pending",
        RECONNECT_WITHIN,
        |v| v == "0",
    )
    .await;
    wait_attr(&page, "body", "data-online", PATIENCE, |v| v == "true").await;
    assert_eq!(
        text(&page, "#scan-queue").await,
        "0 scans to send",
        "nothing was dropped"
    );
    let attendance = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/attendance"),
            Some(&scanner),
            None,
            &[],
        )
        .await;
    assert_eq!(attendance.status, StatusCode::OK, "{}", attendance.body);
    assert_eq!(
        (
            &attendance.body["inside"],
            &attendance.body["entered"],
            &attendance.body["exited"]
        ),
        (&json!(3), &json!(3), &json!(0)),
        "{}",
        attendance.body
    );
    let south = attendance.body["by_gate"]
        .as_array()
        .expect("by gate")
        .iter()
        .find(|g| g["gate_id"] == "south")
        .cloned()
        .expect("the south gate");
    assert_eq!(south["entries"], json!(3), "{}", attendance.body);
    // The refusals made at the door are in the log, and no conflict: the
    // page never let a ticket in twice.
    let conflicts = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/checkins/conflicts"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(conflicts.body["conflicts"], json!([]), "{}", conflicts.body);
    // Online again, the service answers: the second ticket is inside.
    let (result, detail) = scan(&page, &code(1)).await;
    assert_eq!(result, "refused");
    assert!(detail.contains("Already inside"), "{detail}");

    page.close().await.expect("session closes");
    app.stop().await;
}

/// A buyer opens a ticket's page: the QR code (fetched with the buyer's
/// token), the seat, the ticket type and the name the door checks; a
/// stranger's token shows nothing of it; axe-core finds nothing serious.
async fn a_ticket_page_shows_the_code_and_what_the_door_checks(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("ticket-{}", uuid::Uuid::new_v4().simple());
    app.create_show(&show, 10, 600).await;
    let buyer = app.buyer("door-buyer");
    let ticket = four_tickets(&app, &show).await.remove(0);
    let ticket_id = ticket["ticket_id"].as_str().expect("id").to_owned();
    let named = app
        .call(
            Method::PATCH,
            &format!("/v1/tickets/{ticket_id}"),
            Some(&buyer),
            Some(&json!({"holder_name": "Ada Lovelace"})),
            &[],
        )
        .await;
    assert_eq!(named.status, StatusCode::OK, "{}", named.body);

    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("ticket")).await;
    page.goto(&format!("{}/tickets/{ticket_id}#token={buyer}", app.base))
        .await
        .expect("the ticket page opens");
    wait_attr(&page, "body", "data-ready", PATIENCE, |v| v == "true").await;
    assert_eq!(
        attr(&page, "body", "data-ticket").await.as_deref(),
        Some("valid")
    );
    let facts = text(&page, "#ticket-facts").await;
    let seat = format!(
        "Section\n{}\nRow\n{}\nSeat\n{}",
        ticket["section"].as_str().expect("section"),
        ticket["row"].as_str().expect("row"),
        ticket["number"]
    );
    for want in [seat.as_str(), "Ticket type\nStandard", "Name\nAda Lovelace"] {
        assert!(facts.contains(want), "{want} in {facts:?}");
    }
    let qr = attr(&page, "#ticket-qr", "src").await.unwrap_or_default();
    assert!(qr.starts_with("blob:"), "the QR code shown: {qr:?}");
    let drawn = crate::browser::run(
        &page,
        "const i = document.getElementById('ticket-qr'); return i.complete && i.naturalWidth > 0;",
    )
    .await;
    assert_eq!(drawn, json!(true), "the QR code image decodes");
    // The code as text, for a door whose scanner cannot read the image
    // (inside a closed <details>, so read from the document).
    let code = crate::browser::run(
        &page,
        "return document.getElementById('ticket-code').textContent;",
    )
    .await;
    assert_eq!(code, ticket["code"]);
    if let Some(axe) = axe_source() {
        assert_accessible(&page, &axe, "ticket page").await;
    }

    let stranger = app.buyer("someone-else");
    page.goto(&format!(
        "{}/tickets/{ticket_id}#token={stranger}",
        app.base
    ))
    .await
    .expect("the page opens");
    // A new fragment alone does not reload the page.
    page.refresh().await.expect("reload");
    wait_attr(&page, "body", "data-ticket", PATIENCE, |v| v == "error").await;
    assert_eq!(
        attr(&page, "#ticket-figure", "hidden").await.as_deref(),
        Some("true")
    );
    page.close().await.expect("session closes");
    app.stop().await;
}
