//! The seat map in a real browser: Debian's headless Chromium, driven over
//! WebDriver (chromedriver) from this test. Two buyers open the same show;
//! what one does reaches the other's page live.
//!
//! Needs `chromium` and `chromium-driver` (`.ci/run` installs them). The
//! accessibility test also needs axe-core (`.ci/run` installs it from npm
//! into `target/axe`, and says where in `AXE_CORE_JS`).

use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::support::{seat_id, Answer, TestApp, TestEnv};
use crate::tests;
use crate::venues::{show_on, venue_body};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        two_buyers_see_each_other_on_the_seat_map,
        a_buyer_waits_in_the_queue_on_the_page_then_holds,
        a_buyer_joins_the_waiting_list_on_the_page_and_is_offered_a_seat,
        a_buyer_joins_a_sold_out_pools_waiting_list_on_the_page_and_is_offered_places,
        a_buyer_chooses_ticket_types_on_the_venue_map_and_pays_the_hold_amount,
        another_buyers_hold_repaints_the_venue_map_live,
        a_family_pays_seats_and_places_at_once_on_the_page,
        the_seat_maps_have_no_serious_accessibility_violation,
    ]
}

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long the test waits for the browser to show something (a bound for
/// a broken build, not a performance figure).
pub(crate) const PATIENCE: Duration = Duration::from_secs(15);
/// docs/api.md: a write reaches every open map; the issue asks for 1 s.
const LIVE_WITHIN: Duration = Duration::from_secs(1);
/// WebDriver's code for the Enter key.
pub(crate) const ENTER: &str = "\u{E007}";
/// WebDriver's codes for the arrow keys right and down.
const ARROW_RIGHT: &str = "\u{E014}";
const ARROW_DOWN: &str = "\u{E015}";

/// chromedriver on a free port of 127.0.0.1, killed when dropped.
pub(crate) struct Driver {
    child: tokio::process::Child,
    pub(crate) url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

pub(crate) async fn start_driver() -> Driver {
    for path in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            std::path::Path::new(path).exists(),
            "{path} is missing: the browser test needs Debian's chromium and chromium-driver \
             (apt-get install -y chromium chromium-driver; .ci/run installs them)"
        );
    }
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        probe.local_addr().expect("its address").port()
    };
    let child = tokio::process::Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver starts");
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = client.get(format!("{url}/status")).send().await;
        if let Ok(response) = ready {
            let status: serde_json::Value = response.json().await.unwrap_or_default();
            if status["value"]["ready"] == json!(true) {
                break;
            }
        }
        assert!(Instant::now() < deadline, "chromedriver never became ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Driver { child, url }
}

pub(crate) async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1100,900", "--no-first-run", "--no-default-browser-check",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

/// The attribute of the first element `css` selects, once present.
pub(crate) async fn attr(client: &Client, css: &str, name: &str) -> Option<String> {
    match client.find(Locator::Css(css)).await {
        Ok(element) => element.attr(name).await.ok().flatten(),
        Err(_) => None,
    }
}

/// Waits until the attribute satisfies `want`, within `within`; returns it.
pub(crate) async fn wait_attr(
    client: &Client,
    css: &str,
    name: &str,
    within: Duration,
    want: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = attr(client, css, name).await {
            if want(&value) {
                return value;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{css} [{name}] did not become what the test waits for within {within:?} (now {:?})",
            attr(client, css, name).await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(crate) async fn text(client: &Client, css: &str) -> String {
    client
        .find(Locator::Css(css))
        .await
        .expect("element")
        .text()
        .await
        .expect("text")
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("click {css}: {e}"));
}

fn seat(n: usize) -> String {
    format!("[data-seat-id=\"{}\"]", seat_id(n))
}

async fn open_map(client: &Client, app: &TestApp, show: &str, token: &str) {
    client
        .goto(&format!("{}/shows/{show}#token={token}", app.base))
        .await
        .expect("the page opens");
    wait_attr(client, "#connection", "data-connection", PATIENCE, |v| {
        v == "live"
    })
    .await;
}

async fn two_buyers_see_each_other_on_the_seat_map(env: TestEnv) {
    // Two browsers at once: one such test at a time on the machine.
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("map-{}", uuid::Uuid::new_v4().simple());
    let mut body = crate::support::show_body(20, 120);
    body["channels"] = json!([{"channel_id": "boxoffice", "label": "Box office"}]);
    app.create_show_from(&show, &body).await;
    let token_a = app.buyer("map-buyer-a");
    let token_b = app.buyer("map-buyer-b");

    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let a = browser(&driver, &profiles.path().join("a")).await;
    let b = browser(&driver, &profiles.path().join("b")).await;
    open_map(&a, &app, &show, &token_a).await;
    open_map(&b, &app, &show, &token_b).await;
    assert_eq!(
        attr(&a, &seat(1), "data-status").await.as_deref(),
        Some("available")
    );
    assert_eq!(
        attr(&a, "[data-pool-id=\"floor\"]", "data-available")
            .await
            .as_deref(),
        Some("100")
    );
    // Text labels, not colour alone.
    let label = attr(&a, &seat(1), "aria-label").await.expect("a label");
    assert!(label.contains("available"), "{label}");

    // A selects a seat and holds it; B's map shows it held within 1 s.
    click(&a, &seat(1)).await;
    wait_attr(&a, &seat(1), "data-status", PATIENCE, |v| v == "selected").await;
    click(&a, "[data-action=\"hold\"]").await;
    let hold_id = wait_attr(&a, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    wait_attr(&b, &seat(1), "data-status", LIVE_WITHIN, |v| v == "held").await;
    let hold = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&token_a),
            None,
            &[],
        )
        .await;
    assert_eq!(hold.body["seats"], json!([seat_id(1)]));

    // A's countdown runs; extending moves its expiry.
    let countdown = text(&a, "#countdown").await;
    assert!(countdown.contains(':'), "a countdown, not {countdown:?}");
    let expires = attr(&a, "#hold", "data-expires-at")
        .await
        .expect("expires_at");
    click(&a, "[data-action=\"extend\"]").await;
    let extended = wait_attr(&a, "#hold", "data-expires-at", PATIENCE, |v| v != expires).await;
    let (before, after): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        (expires.parse().unwrap(), extended.parse().unwrap());
    assert!(after > before, "the extension moved the expiry later");

    // By keyboard, B chooses a free seat; a seat someone else takes first is
    // taken from B's choice, in words.
    a.find(Locator::Css(&seat(3)))
        .await
        .unwrap()
        .send_keys(ENTER)
        .await
        .unwrap();
    wait_attr(&a, &seat(3), "data-status", PATIENCE, |v| v == "selected").await;
    let mut b_seat = b.find(Locator::Css(&seat(2))).await.unwrap();
    b_seat.send_keys(ENTER).await.unwrap();
    wait_attr(&b, &seat(2), "data-status", PATIENCE, |v| v == "selected").await;
    let other = app.buyer("map-buyer-c");
    let taken = app.hold(&other, &show, &[&seat_id(2)], None).await;
    assert_eq!(taken.status, StatusCode::CREATED);
    wait_attr(&b, &seat(2), "data-status", LIVE_WITHIN, |v| v == "held").await;
    let message = text(&b, "#message").await;
    assert!(message.contains("taken"), "told in words: {message:?}");
    b_seat = b.find(Locator::Css(&seat(2))).await.unwrap();
    assert_eq!(
        b_seat.attr("aria-checked").await.unwrap().as_deref(),
        Some("false")
    );

    // A pays with a card that asks for 3-D Secure (the simulator's bank
    // answers after two seconds); the page waits, then B sees the seat booked.
    a.find(Locator::Css("#payment-method"))
        .await
        .expect("the method list")
        .select_by_value("pm_sim_3ds_2000")
        .await
        .expect("the 3-D Secure card");
    click(&a, "[data-action=\"pay\"]").await;
    wait_attr(&a, "#hold", "data-payment", PATIENCE, |v| {
        v == "requires_action"
    })
    .await;
    confirmed_booking(&app, &a, &token_a).await;
    wait_attr(&b, &seat(1), "data-status", PATIENCE, |v| v == "booked").await;
    wait_attr(&a, &seat(1), "data-status", PATIENCE, |v| v == "booked").await;

    // Best available from B's page, and a refusal shown in words.
    click(&b, "[data-action=\"best\"]").await;
    let best = wait_attr(&b, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    let best = app
        .call(
            Method::GET,
            &format!("/v1/holds/{best}"),
            Some(&token_b),
            None,
            &[],
        )
        .await;
    assert_eq!(best.body["seats"].as_array().map(Vec::len), Some(2));
    click(&b, "[data-action=\"release\"]").await;
    let deadline = Instant::now() + PATIENCE;
    while attr(&b, "#hold", "data-hold-id").await.is_some() {
        assert!(
            Instant::now() < deadline,
            "the released hold stayed on the page"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Seats kept for the box office: not for sale on the page, said in
    // words, not choosable, and the legend says why.
    assert_eq!(
        attr(&a, "[data-legend=\"not_for_sale\"]", "hidden")
            .await
            .as_deref(),
        Some("true")
    );
    let kept = app
        .call(
            Method::POST,
            &format!("/v1/shows/{show}/allocations"),
            Some(&app.admin()),
            Some(&json!({"channel_id": "boxoffice", "seats": [seat_id(20)]})),
            &[],
        )
        .await;
    assert_eq!(kept.status, StatusCode::CREATED, "{}", kept.body);
    wait_attr(&a, &seat(20), "data-status", LIVE_WITHIN, |v| {
        v == "not_for_sale"
    })
    .await;
    assert_eq!(
        attr(&a, &seat(20), "aria-disabled").await.as_deref(),
        Some("true")
    );
    let label = attr(&a, &seat(20), "aria-label").await.expect("a label");
    assert!(label.contains("not for sale"), "{label}");
    assert_eq!(
        attr(&a, "[data-legend=\"not_for_sale\"]", "hidden").await,
        None
    );
    click(&a, &seat(20)).await;
    let message = text(&a, "#message").await;
    assert!(
        message.contains("not for sale"),
        "told in words: {message:?}"
    );

    // The screenshot of a live map (kept for the README in docs/).
    let png = a.screenshot().await.expect("a screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    std::fs::write(
        shots.join(format!("seatmap-{}.png", env.backend.name())),
        &png,
    )
    .expect("screenshot written");

    a.close().await.expect("session A closes");
    b.close().await.expect("session B closes");
    app.stop().await;
}

/// A buyer opens the seat map of a show that sells through a waiting room:
/// the page offers the queue, not the map; the buyer joins behind three
/// others, watches the number of buyers ahead fall as the room lets one in
/// a second, is let in, and the map appears and holds a seat.
async fn a_buyer_waits_in_the_queue_on_the_page_then_holds(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("queue-{}", uuid::Uuid::new_v4().simple());
    let starts = app.clock_now() + chrono::Duration::hours(1);
    let mut body = crate::support::show_body(20, 600);
    body["waiting_room"] = json!({
        "sale_starts_at": starts.to_rfc3339(),
        "admit_per_minute": 60,
        "admission_ttl_seconds": 600,
    });
    app.create_show_from(&show, &body).await;
    // Three buyers join before the start.
    for name in ["queue-early-1", "queue-early-2", "queue-early-3"] {
        let joined = app
            .call(
                Method::POST,
                &format!("/v1/shows/{show}/queue"),
                Some(&app.buyer(name)),
                Some(&json!({})),
                &[],
            )
            .await;
        assert_eq!(joined.status, StatusCode::CREATED, "{}", joined.body);
    }

    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("queue")).await;
    let token = app.buyer("queue-browser");
    open_map(&page, &app, &show, &token).await;
    // Not in the queue yet: the page offers it, and hides the map.
    let join = page
        .find(Locator::Css("[data-action=\"join\"]"))
        .await
        .expect("the join button");
    wait_until(|| async { join.is_displayed().await.unwrap_or(false) }).await;
    let map = page.find(Locator::Css("#map")).await.expect("the map");
    assert!(
        !map.is_displayed().await.expect("displayed?"),
        "the map waits for the admission"
    );
    // The sale starts (the three are drawn in a random order), and the
    // buyer joins behind them.
    app.clock.advance(starts - app.clock_now());
    click(&page, "[data-action=\"join\"]").await;
    // Fourth in the queue, three ahead, then fewer, then let in.
    let position = wait_attr(&page, "#queue", "data-position", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    assert_eq!(position, "4");
    let png = page.screenshot().await.expect("a screenshot");
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    std::fs::write(
        shots.join(format!("queue-{}.png", env.backend.name())),
        &png,
    )
    .expect("screenshot written");
    let mut seen = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = attr(&page, "#queue", "data-queue-status")
            .await
            .unwrap_or_default();
        if status == "admitted" {
            break;
        }
        if let Some(ahead) = attr(&page, "#queue", "data-ahead")
            .await
            .and_then(|a| a.parse::<u64>().ok())
        {
            if seen.last() != Some(&ahead) {
                seen.push(ahead);
            }
        }
        assert!(
            Instant::now() < deadline,
            "not let in within {PATIENCE:?}: {status}, ahead {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        seen.len() >= 2 && seen.windows(2).all(|w| w[0] > w[1]),
        "ahead fell: {seen:?}"
    );
    // Let in: the map shows, and the buyer holds a seat.
    wait_until(|| async { map.is_displayed().await.unwrap_or(false) }).await;
    click(&page, &seat(5)).await;
    wait_attr(&page, &seat(5), "data-status", PATIENCE, |v| {
        v == "selected"
    })
    .await;
    click(&page, "[data-action=\"hold\"]").await;
    let hold_id = wait_attr(&page, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    let hold = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&token),
            None,
            &[],
        )
        .await;
    assert_eq!(hold.body["seats"], json!([seat_id(5)]));
    page.close().await.expect("session closes");
    app.stop().await;
}

/// Waits until `check` holds, within `PATIENCE`.
/// The booking the page says it made, read through the API: confirmed.
async fn a_buyer_joins_the_waiting_list_on_the_page_and_is_offered_a_seat(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("line-{}", uuid::Uuid::new_v4().simple());
    let mut body = crate::support::show_body(2, 600);
    body["waitlist"] = json!({"offer_seconds": 300});
    app.create_show_from(&show, &body).await;
    let holder = app.buyer("line-holder");
    let held = app.hold(&holder, &show, &["S1", "S2"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("line")).await;
    let token = app.buyer("line-browser");
    open_map(&page, &app, &show, &token).await;
    // Sold out: the page offers the waiting list.
    wait_attr(&page, "#waitlist", "data-waitlist-open", PATIENCE, |v| {
        v == "true"
    })
    .await;
    assert_eq!(
        attr(&page, "#waitlist", "data-waitlist-status")
            .await
            .as_deref(),
        Some("")
    );
    run(
        &page,
        "document.querySelector('#waitlist-quantity').value = '1'; return true",
    )
    .await;
    click(&page, "[data-action=\"waitlist-join\"]").await;
    wait_attr(&page, "#waitlist", "data-waitlist-status", PATIENCE, |v| {
        v == "waiting"
    })
    .await;
    assert!(text(&page, "#waitlist-what").await.contains("number 1"));
    // A seat comes back: the waiting list offers it, and the offer lands in the
    // buyer's basket on the page.
    let released = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{}", held.str("hold_id")),
            Some(&holder),
            None,
            &[],
        )
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);
    app.waitlists.run_once().await.expect("judged");
    wait_attr(&page, "#waitlist", "data-waitlist-status", PATIENCE, |v| {
        v == "offered"
    })
    .await;
    assert_eq!(
        attr(&page, "#hold", "hidden").await,
        None,
        "the offer is in the basket"
    );
    let mine = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/waitlist/me"),
            Some(&token),
            None,
            &[],
        )
        .await;
    assert_eq!(mine.body["seats"], json!(["S1"]), "{}", mine.body);
    assert_eq!(
        attr(&page, "#hold-what li", "data-hold-id").await,
        Some(mine.str("hold_id"))
    );
    page.close().await.expect("close");
    app.stop().await;
}

async fn confirmed_booking(app: &TestApp, page: &Client, token: &str) -> Answer {
    let booking_id = wait_attr(page, "#booking", "data-booking-id", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    let booking = app
        .call(
            Method::GET,
            &format!("/v1/bookings/{booking_id}"),
            Some(token),
            None,
            &[],
        )
        .await;
    assert_eq!(booking.status, StatusCode::OK, "{}", booking.body);
    assert_eq!(booking.body["status"], json!("confirmed"));
    booking
}

async fn wait_until<F, Fut>(check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "the page did not get there within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The venue of venues.rs (a stage, two categories, two rows of three seats,
/// the last a wheelchair space, a standing pool) and a show on it with
/// adult and child tickets (premium 120.00 / 60.00, standard 50.00 adults
/// only); returns the show's id.
async fn venue_show(app: &TestApp) -> String {
    let venue = app
        .call(
            Method::PUT,
            "/v1/venues/arena",
            Some(&app.admin()),
            Some(&venue_body()),
            &[],
        )
        .await;
    assert_eq!(venue.status, StatusCode::CREATED, "{}", venue.body);
    let show = format!("venue-{}", uuid::Uuid::new_v4().simple());
    app.create_show_from(&show, &show_on("arena")).await;
    show
}

fn venue_seat(seat_id: &str) -> String {
    format!("[data-seat-id=\"{seat_id}\"]")
}

/// What `script` returns in the page (a WebDriver "execute script").
pub(crate) async fn run(client: &Client, script: &str) -> serde_json::Value {
    client
        .execute(script, Vec::new())
        .await
        .unwrap_or_else(|e| panic!("{script}: {e}"))
}

/// The seat that has the keyboard focus, by its id.
async fn focused_seat(client: &Client) -> serde_json::Value {
    run(
        client,
        "return document.activeElement && document.activeElement.getAttribute('data-seat-id')",
    )
    .await
}

/// A buyer on a show drawn as its venue: the chart's seats carry their
/// category and the wheelchair space says so; the legend prices each
/// category per ticket type; one seat is in the tab order and arrows move
/// between seats by position; the zoom buttons zoom. The buyer selects two
/// premium seats, makes one a child's ticket, holds them, sees the amount
/// (120.00 + 60.00), pays it with the simulator, and both seats show booked.
async fn a_buyer_chooses_ticket_types_on_the_venue_map_and_pays_the_hold_amount(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    // No timing is asserted here: the store of the suite will do.
    let app = env.spawn().await;
    let show = venue_show(&app).await;
    let token = app.buyer("venue-buyer");
    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("venue")).await;
    open_map(&page, &app, &show, &token).await;
    let drawn = wait_attr(&page, "html", "data-seats-drawn", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    assert_eq!(drawn, "6");

    // The chart: categories, the wheelchair space, prices in every label.
    assert_eq!(
        attr(&page, &venue_seat("A-1-1"), "data-category")
            .await
            .as_deref(),
        Some("premium")
    );
    assert_eq!(
        attr(&page, &venue_seat("A-2-3"), "data-accessible")
            .await
            .as_deref(),
        Some("true")
    );
    assert_eq!(
        attr(&page, &venue_seat("A-2-2"), "data-accessible").await,
        None
    );
    let label = attr(&page, &venue_seat("A-1-1"), "aria-label")
        .await
        .expect("a label");
    for said in [
        "Lower A",
        "row 1",
        "seat 1",
        "Premium",
        "€120.00",
        "€60.00",
        "available",
    ] {
        assert!(label.contains(said), "{said} in {label:?}");
    }
    let wheelchair = attr(&page, &venue_seat("A-2-3"), "aria-label")
        .await
        .expect("a label");
    assert!(wheelchair.contains("wheelchair"), "{wheelchair}");
    assert!(wheelchair.contains("€50.00"), "{wheelchair}");
    let price = |category: &str, ticket_type: &str| {
        format!("#categories [data-category=\"{category}\"][data-ticket-type=\"{ticket_type}\"]")
    };
    assert_eq!(
        attr(&page, &price("premium", "adult"), "data-price-cents")
            .await
            .as_deref(),
        Some("12000")
    );
    assert_eq!(
        attr(&page, &price("premium", "child"), "data-price-cents")
            .await
            .as_deref(),
        Some("6000")
    );
    assert_eq!(
        attr(&page, &price("standard", "adult"), "data-price-cents")
            .await
            .as_deref(),
        Some("5000")
    );
    assert_eq!(
        attr(&page, &price("standard", "child"), "data-price-cents").await,
        None
    );

    // The keyboard: one tab stop; right, then down, go by position.
    let stops = run(
        &page,
        "return [...document.querySelectorAll('[data-seat-id][tabindex=\"0\"]')].map(e => e.getAttribute('data-seat-id'))",
    )
    .await;
    assert_eq!(stops, json!(["A-1-1"]));
    run(
        &page,
        "document.querySelector('[data-seat-id][tabindex=\"0\"]').focus()",
    )
    .await;
    assert_eq!(focused_seat(&page).await, json!("A-1-1"));
    let keys = |key: &'static str| {
        let page = page.clone();
        async move {
            page.active_element()
                .await
                .expect("the focused element")
                .send_keys(key)
                .await
                .expect("a key");
        }
    };
    keys(ARROW_RIGHT).await;
    assert_eq!(focused_seat(&page).await, json!("A-1-2"));
    keys(ARROW_DOWN).await;
    assert_eq!(focused_seat(&page).await, json!("A-2-2"));
    let stops = run(
        &page,
        "return [...document.querySelectorAll('[data-seat-id][tabindex=\"0\"]')].map(e => e.getAttribute('data-seat-id'))",
    )
    .await;
    assert_eq!(stops, json!(["A-2-2"]), "the tab stop follows the focus");
    // Zoom by key and by the buttons.
    keys("+").await;
    wait_attr(&page, "#venue", "data-zoom", PATIENCE, |v| v == "1.50").await;
    click(&page, "[data-action=\"zoom-in\"]").await;
    wait_attr(&page, "#venue", "data-zoom", PATIENCE, |v| v == "2.25").await;
    click(&page, "[data-action=\"zoom-out\"]").await;
    wait_attr(&page, "#venue", "data-zoom", PATIENCE, |v| v == "1.50").await;
    click(&page, "[data-action=\"zoom-reset\"]").await;
    wait_attr(&page, "#venue", "data-zoom", PATIENCE, |v| v == "1.00").await;

    // Two premium seats, one of them a child's ticket.
    for seat_id in ["A-1-1", "A-1-2"] {
        click(&page, &venue_seat(seat_id)).await;
        wait_attr(&page, &venue_seat(seat_id), "data-status", PATIENCE, |v| {
            v == "selected"
        })
        .await;
    }
    let chooser = "select[data-ticket-type-for=\"A-1-2\"]";
    let options = run(
        &page,
        &format!(
            "return [...document.querySelector('{}').options].map(o => o.value)",
            chooser.replace('\'', "\\'")
        ),
    )
    .await;
    assert_eq!(options, json!(["adult", "child"]));
    page.find(Locator::Css(chooser))
        .await
        .expect("the ticket type chooser")
        .select_by_value("child")
        .await
        .expect("the child ticket");
    let selection = text(&page, "#selection").await;
    assert!(selection.contains("€180.00"), "{selection}");
    click(&page, "[data-action=\"hold\"]").await;
    let hold_id = wait_attr(&page, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    let amount = wait_attr(&page, "#hold", "data-amount-cents", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    assert_eq!(amount, (12000 + 6000).to_string());
    let shown = text(&page, "#hold-amount").await;
    assert!(
        shown.contains("€180.00"),
        "the amount on the page: {shown:?}"
    );
    let hold = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&token),
            None,
            &[],
        )
        .await;
    assert_eq!(hold.status, StatusCode::OK, "{}", hold.body);
    assert_eq!(hold.body["amount_cents"], json!(12000 + 6000));
    let items = hold.body["items"].as_array().cloned().unwrap_or_default();
    let item = |seat_id: &str| {
        items
            .iter()
            .find(|i| i["seat_id"] == seat_id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(item("A-1-1")["ticket_type"], json!("adult"));
    assert_eq!(item("A-1-2")["ticket_type"], json!("child"));
    assert_eq!(item("A-1-2")["price_cents"], json!(6000));

    // Paid with the simulator: the booking charged the hold's amount.
    page.find(Locator::Css("#payment-method"))
        .await
        .expect("the method list")
        .select_by_value("pm_sim_ok")
        .await
        .expect("the card that pays");
    click(&page, "[data-action=\"pay\"]").await;
    let booking = confirmed_booking(&app, &page, &token).await;
    assert_eq!(booking.body["amount_cents"], json!(12000 + 6000));
    for seat_id in ["A-1-1", "A-1-2"] {
        wait_attr(&page, &venue_seat(seat_id), "data-status", PATIENCE, |v| {
            v == "booked"
        })
        .await;
    }
    let booked = text(&page, "#booking-what").await;
    assert!(booked.contains("€180.00"), "{booked}");

    let png = page.screenshot().await.expect("a screenshot");
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot folder");
    std::fs::write(
        shots.join(format!("seatmap-venue-{}.png", env.backend.name())),
        &png,
    )
    .expect("screenshot written");
    page.close().await.expect("session closes");
    app.stop().await;
}

/// The venue map open in a browser while another buyer holds, then
/// releases, a seat over HTTP: the page repaints that seat each time.
async fn another_buyers_hold_repaints_the_venue_map_live(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = venue_show(&app).await;
    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("watcher")).await;
    open_map(&page, &app, &show, &app.buyer("venue-watcher")).await;
    let seat = venue_seat("A-1-3");
    assert_eq!(
        attr(&page, &seat, "data-status").await.as_deref(),
        Some("available")
    );

    let other = app.buyer("venue-other");
    let held = app
        .call(
            Method::POST,
            &format!("/v1/shows/{show}/holds"),
            Some(&other),
            Some(&json!({"seats": [{"seat_id": "A-1-3", "ticket_type": "child"}]})),
            &[],
        )
        .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    wait_attr(&page, &seat, "data-status", PATIENCE, |v| v == "held").await;
    let label = attr(&page, &seat, "aria-label").await.expect("a label");
    assert!(label.ends_with(": held"), "said in words: {label:?}");
    // The rest of the chart is as it was.
    assert_eq!(
        attr(&page, &venue_seat("A-1-2"), "data-status")
            .await
            .as_deref(),
        Some("available")
    );

    app.release(&other, &held.str("hold_id")).await;
    wait_attr(&page, &seat, "data-status", PATIENCE, |v| v == "available").await;
    page.close().await.expect("session closes");
    app.stop().await;
}

/// A buyer holds two seats, then two standing places, and pays once: the
/// page sends one order for both holds, and the service charged once.
async fn a_family_pays_seats_and_places_at_once_on_the_page(env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("family-{}", uuid::Uuid::new_v4().simple());
    app.create_show(&show, 10, 480).await;
    let token = app.buyer("family-buyer");
    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("family")).await;
    open_map(&page, &app, &show, &token).await;

    for n in [1, 2] {
        click(&page, &seat(n)).await;
        wait_attr(&page, &seat(n), "data-status", PATIENCE, |v| {
            v == "selected"
        })
        .await;
    }
    click(&page, "[data-action=\"hold\"]").await;
    let seats_hold = wait_attr(&page, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    click(
        &page,
        "[data-pool-id=\"floor\"] [data-action=\"hold-pool\"]",
    )
    .await;
    let both = wait_attr(&page, "#hold", "data-hold-ids", PATIENCE, |v| {
        v.contains(',')
    })
    .await;
    assert!(both.starts_with(&seats_hold), "{both}");
    let amount = wait_attr(&page, "#hold", "data-amount-cents", PATIENCE, |v| {
        v == (2 * 5000 + 2 * 3000).to_string()
    })
    .await;
    assert_eq!(amount, "16000");
    let title = text(&page, "#hold-title").await;
    assert!(title.contains("2 holds"), "{title}");

    page.find(Locator::Css("#payment-method"))
        .await
        .expect("the method list")
        .select_by_value("pm_sim_ok")
        .await
        .expect("the card that pays");
    click(&page, "[data-action=\"pay\"]").await;
    let order_id = wait_attr(&page, "#booking", "data-order-id", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    let order = app
        .call(
            Method::GET,
            &format!("/v1/orders/{order_id}"),
            Some(&token),
            None,
            &[],
        )
        .await;
    assert_eq!(order.status, StatusCode::OK, "{}", order.body);
    assert_eq!(order.body["status"], json!("confirmed"));
    assert_eq!(order.body["amount_cents"], json!(16000));
    assert_eq!(order.body["lines"].as_array().map(Vec::len), Some(4));
    let ledger = app.ledger().sim_ledger().await.expect("ledger");
    assert_eq!(ledger.len(), 1, "one payment for both holds: {ledger:?}");
    for n in [1, 2] {
        wait_attr(&page, &seat(n), "data-status", PATIENCE, |v| v == "booked").await;
    }
    let said = text(&page, "#booking-what").await;
    assert!(said.contains("4 tickets"), "{said}");
    assert!(
        attr(&page, "#hold", "data-hold-ids").await.is_none(),
        "the basket is empty"
    );
    page.close().await.expect("session closes");
    app.stop().await;
}

/// axe-core's source, from `AXE_CORE_JS` or where `.ci/run` installs it
/// (`target/axe`); `None` (the test is skipped, and says so) when it is
/// missing, except under `CI=true`, where that fails the test.
pub(crate) fn axe_source() -> Option<String> {
    let path = std::env::var_os("AXE_CORE_JS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
            tmp.parent()
                .unwrap_or(tmp)
                .join("axe/node_modules/axe-core/axe.min.js")
        });
    match std::fs::read_to_string(&path) {
        Ok(source) => Some(source),
        Err(error) => {
            let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
            let reason = format!(
                "no axe-core at {} ({error}); .ci/run installs it (npm install --no-save \
                 --prefix target/axe axe-core), or set AXE_CORE_JS",
                path.display()
            );
            assert!(
                !ci,
                "the accessibility test needs axe-core under CI=true: {reason}"
            );
            println!("SKIPPED: {reason}");
            None
        }
    }
}

/// Runs axe-core in the page; panics naming every violation of impact
/// `serious` or `critical`.
pub(crate) async fn assert_accessible(client: &Client, axe: &str, state: &str) {
    let results = run(
        client,
        &format!("{axe}\n;return await axe.run(document, {{resultTypes: ['violations']}});"),
    )
    .await;
    let violations = results["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("axe answered no violations list: {results}"));
    let serious: Vec<String> = violations
        .iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .map(|v| {
            let targets: Vec<String> = v["nodes"]
                .as_array()
                .map(|nodes| nodes.iter().map(|n| n["target"].to_string()).collect())
                .unwrap_or_default();
            format!(
                "{} ({}): {} at {}",
                v["id"],
                v["impact"],
                v["help"],
                targets.join(", ")
            )
        })
        .collect();
    assert!(
        serious.is_empty(),
        "axe-core finds on the {state}:\n{}",
        serious.join("\n")
    );
}

/// axe-core, run inside the page, finds no serious or critical violation on
/// the venue map (as it opens, with a seat selected and its ticket type
/// chooser shown, with a hold) nor on the grid of a show without
/// coordinates.
async fn the_seat_maps_have_no_serious_accessibility_violation(env: TestEnv) {
    let Some(axe) = axe_source() else {
        return;
    };
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = venue_show(&app).await;
    let grid = format!("grid-{}", uuid::Uuid::new_v4().simple());
    app.create_show(&grid, 20, 600).await;
    let token = app.buyer("axe-buyer");
    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("axe")).await;

    open_map(&page, &app, &show, &token).await;
    wait_attr(&page, "html", "data-seats-drawn", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    assert_accessible(&page, &axe, "venue map as it opens").await;
    click(&page, &venue_seat("A-1-1")).await;
    wait_attr(
        &page,
        "select[data-ticket-type-for=\"A-1-1\"]",
        "id",
        PATIENCE,
        |v| !v.is_empty(),
    )
    .await;
    assert_accessible(&page, &axe, "venue map with a seat selected").await;
    click(&page, "[data-action=\"hold\"]").await;
    wait_attr(&page, "#hold", "data-hold-id", PATIENCE, |v| !v.is_empty()).await;
    assert_accessible(&page, &axe, "venue map with a hold").await;

    open_map(&page, &app, &grid, &token).await;
    wait_attr(&page, "html", "data-seats-drawn", PATIENCE, |v| {
        !v.is_empty()
    })
    .await;
    assert_accessible(&page, &axe, "grid").await;
    page.close().await.expect("session closes");
    app.stop().await;
}

async fn a_buyer_joins_a_sold_out_pools_waiting_list_on_the_page_and_is_offered_places(
    env: TestEnv,
) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    let show = format!("ga-line-{}", uuid::Uuid::new_v4().simple());
    let body = json!({
        "name": "Festival", "starts_at": "2026-12-31T20:00:00Z", "hold_ttl_seconds": 600,
        "pools": [{"pool_id": "floor", "capacity": 2, "price_cents": 3000}],
        "waitlist": {"offer_seconds": 300}
    });
    app.create_show_from(&show, &body).await;
    let holder = app.buyer("ga-holder");
    let held = app
        .hold_call(
            holder.clone(),
            &show,
            json!({"pool_id": "floor", "quantity": 2}),
        )
        .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    let driver = start_driver().await;
    let profiles = tempfile::tempdir().expect("profiles");
    let page = browser(&driver, &profiles.path().join("ga-line")).await;
    let token = app.buyer("ga-line-browser");
    open_map(&page, &app, &show, &token).await;
    // The pool is sold out: it offers its waiting list; the buyer joins
    // for two places.
    let floor = ".pool[data-pool-id=\"floor\"]";
    wait_attr(&page, floor, "data-waitlist-join", PATIENCE, |v| {
        v == "true"
    })
    .await;
    click(&page, "[data-action=\"waitlist-join-pool\"]").await;
    wait_attr(&page, "#waitlist", "data-waitlist-status", PATIENCE, |v| {
        v == "waiting"
    })
    .await;
    assert!(text(&page, "#waitlist-what").await.contains("2 places in"));
    assert_eq!(
        attr(&page, floor, "data-waitlist-join").await.as_deref(),
        Some("false")
    );
    // The places come back: offered, and the offer lands in the basket.
    let released = app
        .call(
            Method::DELETE,
            &format!("/v1/holds/{}", held.str("hold_id")),
            Some(&holder),
            None,
            &[],
        )
        .await;
    assert_eq!(released.status, StatusCode::NO_CONTENT);
    wait_attr(&page, "#waitlist", "data-waitlist-status", PATIENCE, |v| {
        v == "offered"
    })
    .await;
    let mine = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/waitlist/me"),
            Some(&token),
            None,
            &[],
        )
        .await;
    assert_eq!(mine.body["places"], json!(2), "{}", mine.body);
    assert_eq!(
        attr(&page, "#hold-what li", "data-hold-id").await,
        Some(mine.str("hold_id"))
    );
    page.close().await.expect("close");
    app.stop().await;
}
