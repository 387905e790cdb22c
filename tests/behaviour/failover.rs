//! PostgreSQL failover (API.md, "Database failover"): the service, pointed
//! at a two-node pg_auto_failover cluster by a multi-host URL, moves to the
//! new primary on its own, answers 503 `busy` (never a 500) while there is
//! none, loses no hold or booking it acknowledged, tells no buyer 503 for a
//! hold that exists, and its live streams, webhooks and recovery carry on.
//!
//! Each test runs the real binary (every worker as in production) on a
//! cluster of its own (`failover_cluster`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use reqwest::StatusCode;
use serde_json::{json, Value};

use booking::auth::{Role, TokenKeys};
use booking::payment::ledger::Ledger;
use booking::store::Store;

use crate::cluster::{psql, unavailable};
use crate::crash::{post, start_with, Service};
use crate::failover_cluster::FailoverCluster;
use crate::live::EventStream;
use crate::receiver::{Mode, Receiver};
use crate::support::{seat_entries, seat_id, show_body, token_from, Answer, TestApp, TestEnv};
use crate::tests;

pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_planned_failover_under_holds_and_purchases_loses_nothing,
        a_killed_primary_under_holds_and_purchases_loses_nothing,
        hosts_all_down_or_standby_start_unready_and_become_ready_with_a_primary,
    ]
}

const BUYERS: usize = 16;
/// The load lasts this long at least (issue #24: 25 s, the switch at 8 s).
const RUN: Duration = Duration::from_secs(25);
const SWITCH_AT: Duration = Duration::from_secs(8);
/// Holds succeed again within this of the new primary accepting writes.
const BACK_WITHIN: Duration = Duration::from_secs(15);
/// A buyer's pause between two requests: steady load, not a storm.
const PACE: Duration = Duration::from_millis(50);
/// Every this many holds of a buyer, the buyer buys the hold.
const BUY_EVERY: usize = 3;
/// Seats in the show: more than the buyers can hold in the run.
const SEATS: usize = 8_000;
/// A 503 comes within this (API.md, "Failure semantics").
const BUSY_WITHIN: Duration = Duration::from_secs(5);
/// How long the end state (webhooks, live stream, recovery) may take.
const SETTLE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    /// `pg_autoctl perform failover`.
    Planned,
    /// The primary's postgres stopped with `-m immediate` and its keeper killed.
    Crash,
}

/// One answer a buyer got.
struct Sent {
    what: String,
    status: StatusCode,
    code: Option<String>,
    retry_after: bool,
    problem: bool,
    answered_at: Instant,
    took: Duration,
    body: String,
}

impl Sent {
    fn of(what: String, answer: &Answer, retry_after: bool, took: Duration) -> Self {
        Self {
            what,
            status: answer.status,
            code: answer.code().map(str::to_owned),
            retry_after,
            problem: answer.content_type == "application/problem+json",
            answered_at: Instant::now(),
            took,
            body: answer.body.to_string(),
        }
    }

    /// A 503 as the contract has it: `busy` with Retry-After, or, for a
    /// purchase, `payment_unavailable` (the simulator keeps its payments in
    /// the same database: while no primary takes writes, it cannot settle
    /// one either; safe to retry).
    fn is_busy(&self) -> bool {
        self.status == StatusCode::SERVICE_UNAVAILABLE
            && self.problem
            && match self.code.as_deref() {
                Some("busy") => self.retry_after,
                Some("payment_unavailable") => self.what.starts_with("purchase"),
                _ => false,
            }
    }
}

/// POSTs `body` to `path`; `None` if the service did not answer at all.
async fn send(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    token: &str,
    key: Option<&str>,
    body: Value,
) -> Option<(Answer, bool, Duration)> {
    let started = Instant::now();
    let mut request = client
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.ok()?;
    let retry_after = response.headers().contains_key("retry-after");
    let answer = TestApp::answer(response).await;
    Some((answer, retry_after, started.elapsed()))
}

/// What the buyers were told, in all.
#[derive(Default)]
struct Told {
    sent: Vec<Sent>,
    /// Seat -> hold id, for every hold answered 201 (or 200 on a retry).
    held: BTreeMap<String, String>,
    /// Hold id -> booking id, for every purchase answered 201 or 200.
    booked: BTreeMap<String, String>,
}

impl Told {
    /// Fails naming (up to 20 of) the answers `bad` picks, if any.
    fn assert_none(&self, what: &str, bad: impl Fn(&Sent) -> bool) {
        let found: Vec<String> = self
            .sent
            .iter()
            .filter(|s| bad(s))
            .take(20)
            .map(|s| format!("{}: {} after {:?}: {}", s.what, s.status, s.took, s.body))
            .collect();
        assert!(found.is_empty(), "{what}:\n{}", found.join("\n"));
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or_default()
}

/// One buyer: holds seat after seat (a 503 is retried with the same key,
/// as a client would), and buys every `BUY_EVERY`th hold (a 503 retried).
async fn buyer(
    service: (reqwest::Client, String),
    token: String,
    show: String,
    b: usize,
    stop: Arc<AtomicBool>,
    told: Arc<Mutex<Told>>,
) {
    let (client, base) = service;
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let seat = seat_id(b + 1 + n * BUYERS);
        let key = format!("k-{seat}");
        let Some((answer, retry_after, took)) = send(
            &client,
            &base,
            &format!("/v1/shows/{show}/holds"),
            &token,
            Some(&key),
            json!({ "seats": [seat] }),
        )
        .await
        else {
            tokio::time::sleep(PACE).await;
            continue;
        };
        let held = answer.status.is_success();
        let hold_id = answer.body["hold_id"].as_str().map(str::to_owned);
        {
            let mut told = told.lock().unwrap();
            told.sent
                .push(Sent::of(format!("hold {seat}"), &answer, retry_after, took));
            if let (true, Some(hold_id)) = (held, &hold_id) {
                told.held.insert(seat.clone(), hold_id.clone());
            }
        }
        if let (true, Some(hold_id)) = (held, hold_id) {
            n += 1;
            if n % BUY_EVERY == 0 {
                buy(&client, &base, &token, &hold_id, &stop, &told).await;
            }
        }
        tokio::time::sleep(PACE).await;
    }
}

async fn buy(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    hold_id: &str,
    stop: &AtomicBool,
    told: &Mutex<Told>,
) {
    while !stop.load(Ordering::SeqCst) {
        let Some((answer, retry_after, took)) = send(
            client,
            base,
            &format!("/v1/holds/{hold_id}/purchase"),
            token,
            None,
            json!({"payment_method": "pm_sim_ok"}),
        )
        .await
        else {
            tokio::time::sleep(PACE).await;
            continue;
        };
        {
            let mut told = told.lock().unwrap();
            told.sent.push(Sent::of(
                format!("purchase {hold_id}"),
                &answer,
                retry_after,
                took,
            ));
            if answer.status.is_success() {
                told.booked
                    .insert(hold_id.to_owned(), answer.str("booking_id"));
            }
        }
        if answer.status != StatusCode::SERVICE_UNAVAILABLE {
            return;
        }
        tokio::time::sleep(PACE).await;
    }
}

/// The seat statuses a live stream's events add up to: the last snapshot,
/// and every change after it in order.
#[derive(Default)]
struct LiveView {
    seats: BTreeMap<String, String>,
    last_position: i64,
    snapshots: usize,
}

impl LiveView {
    fn apply(&mut self, event: &crate::live::SseEvent) {
        let position = event.position();
        // Equal is allowed: a change no event records (an expiry) carries
        // the position it was computed at.
        assert!(
            position >= self.last_position || event.event == "snapshot",
            "live positions go back: {position} after {}",
            self.last_position
        );
        if event.event == "snapshot" {
            self.seats.clear();
            self.snapshots += 1;
        }
        for (seat, status) in event.seats() {
            self.seats.insert(seat, status);
        }
        self.last_position = position;
    }
}

async fn admin_put(
    client: &reqwest::Client,
    base: &str,
    token: &str,
    path: &str,
    body: Value,
) -> Answer {
    let response = client
        .put(format!("{base}{path}"))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("answered");
    TestApp::answer(response).await
}

async fn get(client: &reqwest::Client, base: &str, token: Option<&str>, path: &str) -> Answer {
    let mut request = client.get(format!("{base}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    TestApp::answer(request.send().await.expect("answered")).await
}

/// Waits until `node` of `cluster` takes a write (it is a primary); when.
async fn writable(cluster: &Arc<FailoverCluster>, node: usize, within: Duration) -> Instant {
    let deadline = Instant::now() + within;
    let url = cluster.node_url(node);
    loop {
        let url = url.clone();
        let wrote = tokio::task::spawn_blocking(move || {
            psql(
                &url,
                &["CREATE TEMP TABLE failover_probe (x int); INSERT INTO failover_probe VALUES (1)"],
            )
        })
        .await
        .expect("probe");
        if wrote.is_ok() {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "node {node} took no write within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The binary as a buyer-facing instance runs it, with the rate limits off
/// (16 scripted buyers at machine speed are not a crowd to limit) and quick
/// webhook retries.
async fn service_on(url: &str, secret: &str) -> Service {
    start_with(
        url,
        secret,
        &[
            ("BOOKING_BUYER_RATE_PER_SECOND", "0"),
            ("BOOKING_CLIENT_RATE_PER_SECOND", "0"),
            ("BOOKING_WEBHOOK_BACKOFF_MS", "500"),
            ("BOOKING_WEBHOOK_MAX_BACKOFF_MS", "2000"),
        ],
    )
    .await
}

async fn through_a_switch(switch: Switch) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let cluster = match tokio::task::spawn_blocking(|| FailoverCluster::start("booking"))
        .await
        .expect("cluster start")
    {
        Ok(cluster) => Arc::new(cluster),
        Err(reason) => return unavailable(&reason),
    };
    let first_primary = cluster.primary().expect("a primary");
    // What the test relies on: commits wait for the standby (pg_auto_failover's
    // default with one standby in sync).
    let sync = psql(
        &cluster.node_url(first_primary),
        &["SHOW synchronous_standby_names", "SHOW synchronous_commit"],
    )
    .expect("settings");
    assert!(
        sync.contains("ANY 1 (") && sync.lines().any(|l| l.trim() == "on"),
        "not synchronous: {sync}"
    );
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| token_from(&keys, sub, role, chrono::Duration::hours(1));
    let admin = token("ops", Role::Admin);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(90))
        .build()
        .unwrap();
    let service = service_on(&cluster.url(), &secret).await;
    let base = service.base.clone();

    let show = "failover";
    let created = admin_put(
        &client,
        &base,
        &admin,
        &format!("/v1/shows/{show}"),
        show_body(SEATS, 3600),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let receiver = Receiver::start(Mode::Answer(204)).await;
    let registered = send(
        &client,
        &base,
        "/v1/webhooks",
        &admin,
        None,
        json!({"url": receiver.url, "events": ["booking.confirmed"]}),
    )
    .await
    .expect("answered")
    .0;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{}",
        registered.body
    );
    let mut stream = EventStream::open_at(&client, &base, show, None).await;

    let stop = Arc::new(AtomicBool::new(false));
    let told: Arc<Mutex<Told>> = Arc::default();
    let started = Instant::now();
    let mut buyers = tokio::task::JoinSet::new();
    for b in 0..BUYERS {
        buyers.spawn(buyer(
            (client.clone(), base.clone()),
            token(&format!("buyer{b}"), Role::Buyer),
            show.to_owned(),
            b,
            stop.clone(),
            told.clone(),
        ));
    }
    // The live stream is read all along, so that it never backs up.
    let view: Arc<Mutex<LiveView>> = Arc::default();
    let live = {
        let view = view.clone();
        tokio::spawn(async move {
            while let Some(event) = stream.next_within(Duration::from_secs(300)).await {
                view.lock().unwrap().apply(&event);
            }
        })
    };

    tokio::time::sleep_until((started + SWITCH_AT).into()).await;
    let switch_started_us = now_us();
    let switched = Instant::now();
    {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || match switch {
            Switch::Planned => cluster.perform_failover(),
            Switch::Crash => cluster.kill_primary().map(drop),
        })
        .await
        .expect("switch")
        .expect("the switch is made");
    }
    let writable_at = writable(&cluster, 1 - first_primary, Duration::from_secs(120)).await;
    let writable_at_us = now_us();
    let new_primary = 1 - first_primary;
    println!(
        "{switch:?}: the new primary took writes {:?} after the switch began",
        writable_at - switched
    );
    // The load goes on for the run, and until a hold succeeded after the
    // new primary took writes (or the time for that is up).
    loop {
        let back = told.lock().unwrap().sent.iter().any(|s| {
            s.what.starts_with("hold") && s.status.is_success() && s.answered_at > writable_at
        });
        if started.elapsed() >= RUN && (back || writable_at.elapsed() > BACK_WITHIN) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    while let Some(joined) = buyers.join_next().await {
        joined.expect("buyer task");
    }
    let told = std::mem::take(&mut *told.lock().unwrap());

    // No 500: every answer is a success, a 503 busy with Retry-After, or a
    // refusal a buyer can read (4xx problem+json).
    told.assert_none("answers that break the contract", |s| {
        s.status.is_server_error() && !s.is_busy()
    });
    // A hold of a free seat is held or refused for now (503), and a
    // purchase of one's own hold is booked or 503: any 4xx is an answer
    // the buyer cannot trust.
    told.assert_none("refusals of valid requests", |s| s.status.is_client_error());
    told.assert_none(&format!("503s slower than {BUSY_WITHIN:?}"), |s| {
        s.status == StatusCode::SERVICE_UNAVAILABLE && s.took > BUSY_WITHIN
    });
    let busy = told.sent.iter().filter(|s| s.is_busy()).count();
    // The window without writes the buyers saw: the longest time between
    // two successful holds from the switch on.
    let mut held_at: Vec<Instant> = told
        .sent
        .iter()
        .filter(|s| s.what.starts_with("hold") && s.status.is_success())
        .map(|s| s.answered_at)
        .collect();
    held_at.sort();
    let window = held_at
        .windows(2)
        .filter(|pair| pair[1] > switched)
        .map(|pair| pair[1] - pair[0])
        .max()
        .unwrap_or_default();
    println!("{switch:?}: no hold succeeded for {window:?} around the switch");
    let first_hold_back = told
        .sent
        .iter()
        .filter(|s| {
            s.what.starts_with("hold") && s.status.is_success() && s.answered_at > writable_at
        })
        .map(|s| s.answered_at)
        .min();
    println!(
        "{switch:?}: {} answers, {} holds, {} bookings, {busy} busy; first hold {:?} after the new primary took writes",
        told.sent.len(),
        told.held.len(),
        told.booked.len(),
        first_hold_back.map(|t| t - writable_at)
    );
    let back = first_hold_back.expect("a hold succeeded after the switch");
    assert!(
        back - writable_at <= BACK_WITHIN,
        "holds succeeded again only {:?} after the new primary took writes",
        back - writable_at
    );

    // The service moved: it names the new primary, and counted the switch.
    let ready = get(&client, &base, None, "/readyz").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.body);
    assert_eq!(
        ready.body["database_host"],
        json!(format!("127.0.0.1:{}", cluster.ports[new_primary])),
        "{}",
        ready.body
    );
    let metrics = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    assert!(
        metrics
            .lines()
            .any(|line| line.starts_with("db_primary_switches_total ") && !line.ends_with(" 0")),
        "no switch counted:\n{}",
        metrics
            .lines()
            .filter(|l| l.starts_with("db_"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    println!(
        "{switch:?}: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("db_") || l.starts_with("appends_"))
            .collect::<Vec<_>>()
            .join("; ")
    );

    // Recovery finishes what was in flight on the new primary: no checkout
    // is left pending, and every simulator charge is a booking or a refund.
    let store = Store::connect(&cluster.url(), 2).await.expect("the store");
    let deadline = Instant::now() + SETTLE;
    while !store
        .checkouts()
        .pending_checkouts(1000)
        .await
        .expect("pending")
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "checkouts still pending after {SETTLE:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for charge in Ledger::of(&store).sim_ledger().await.expect("ledger") {
        if charge.outcome != "captured" || charge.refund_id.is_some() {
            continue;
        }
        let payment = Ledger::of(&store)
            .sim_payment(&charge.charge_id)
            .await
            .expect("payment")
            .expect("the charge's payment");
        let hold_id = payment.hold_id.to_string();
        let booked = told.booked.contains_key(&hold_id)
            || get(
                &client,
                &base,
                Some(&admin),
                &format!("/v1/holds/{hold_id}"),
            )
            .await
            .body["status"]
                == "converted";
        assert!(
            booked,
            "charge {} for hold {hold_id}: no booking and no refund",
            charge.charge_id
        );
    }

    // Every acknowledged hold is still held or booked, every acknowledged
    // booking exists, and no seat is taken that a buyer was told 503 for.
    let availability = get(
        &client,
        &base,
        None,
        &format!("/v1/shows/{show}/availability"),
    )
    .await;
    assert_eq!(availability.status, StatusCode::OK, "{}", availability.body);
    let statuses: BTreeMap<String, String> = seat_entries(&availability.body).into_iter().collect();
    for seat in told.held.keys() {
        let status = statuses.get(seat).map(String::as_str);
        assert!(
            matches!(status, Some("held" | "booked")),
            "{seat} was held (201) and is {status:?} now"
        );
    }
    let taken: BTreeSet<&String> = statuses
        .iter()
        .filter(|(_, status)| *status != "available")
        .map(|(seat, _)| seat)
        .collect();
    let told_held: BTreeSet<&String> = told.held.keys().collect();
    let untold: Vec<&&String> = taken.difference(&told_held).collect();
    assert!(
        untold.is_empty(),
        "seats taken whose buyers were not told 201: {untold:?}"
    );
    for (hold_id, booking_id) in &told.booked {
        let booking = get(
            &client,
            &base,
            Some(&admin),
            &format!("/v1/bookings/{booking_id}"),
        )
        .await;
        assert_eq!(
            booking.status,
            StatusCode::OK,
            "booking of {hold_id}: {}",
            booking.body
        );
        assert_eq!(booking.body["status"], "confirmed");
    }

    // Positions stay ordered across the switch: every event written on the
    // new primary comes after every event written before the switch.
    let positions = psql(
        &cluster.node_url(new_primary),
        &[&format!(
            "SELECT coalesce((SELECT max(position) FROM events WHERE recorded_at_us < {switch_started_us}), 0) \
             < coalesce((SELECT min(position) FROM events WHERE recorded_at_us > {writable_at_us}), 9223372036854775807)"
        )],
    )
    .expect("positions");
    assert!(
        positions.contains(" t"),
        "positions after the switch are not all after those before: {positions}"
    );

    // Webhooks deliver every booking (at least once, one webhook id each).
    let booking_ids: BTreeSet<String> = told.booked.values().cloned().collect();
    let requests = receiver
        .wait_for(
            "a booking.confirmed for every booking",
            SETTLE,
            |requests| {
                let delivered: BTreeSet<String> = requests
                    .iter()
                    .map(|r| {
                        r.json()["data"]["booking_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    })
                    .collect();
                booking_ids.is_subset(&delivered)
            },
        )
        .await;
    let mut ids_per_booking: HashMap<String, BTreeSet<String>> = HashMap::new();
    for request in &requests {
        ids_per_booking
            .entry(
                request.json()["data"]["booking_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
            .or_default()
            .insert(request.webhook_id());
    }
    assert!(
        ids_per_booking.values().all(|ids| ids.len() == 1),
        "a booking delivered as two events: {ids_per_booking:?}"
    );

    // The live stream adds up to the availability now: no change was lost
    // across the switch (or a new snapshot replaced what was).
    let deadline = Instant::now() + SETTLE;
    loop {
        assert!(!live.is_finished(), "the live stream ended");
        let now = get(
            &client,
            &base,
            None,
            &format!("/v1/shows/{show}/availability"),
        )
        .await;
        let expected: BTreeMap<String, String> = seat_entries(&now.body).into_iter().collect();
        let (agrees, snapshots, differ) = {
            let view = view.lock().unwrap();
            let differ: Vec<String> = expected
                .iter()
                .filter(|(seat, status)| view.seats.get(*seat) != Some(status))
                .take(10)
                .map(|(seat, status)| format!("{seat}: {status} vs {:?}", view.seats.get(seat)))
                .collect();
            (view.seats == expected, view.snapshots, differ)
        };
        if agrees {
            println!("{switch:?}: the live stream agrees, after {snapshots} snapshots");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the live stream disagrees with availability: {differ:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    live.abort();
    drop(service);
}

async fn a_planned_failover_under_holds_and_purchases_loses_nothing(_env: TestEnv) {
    through_a_switch(Switch::Planned).await;
}

async fn a_killed_primary_under_holds_and_purchases_loses_nothing(_env: TestEnv) {
    through_a_switch(Switch::Crash).await;
}

/// The service is started while the primary is dead and the other host is
/// a standby: it starts (the address answers), is not ready, answers 503
/// `busy`, and becomes ready, and takes holds, once the monitor has
/// promoted the standby.
async fn hosts_all_down_or_standby_start_unready_and_become_ready_with_a_primary(_env: TestEnv) {
    let _heavy = crate::HEAVY.acquire().await.expect("semaphore");
    let cluster = match tokio::task::spawn_blocking(|| FailoverCluster::start("booking"))
        .await
        .expect("cluster start")
    {
        Ok(cluster) => Arc::new(cluster),
        Err(reason) => return unavailable(&reason),
    };
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let admin = token_from(&keys, "ops", Role::Admin, chrono::Duration::hours(1));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let dead = {
        let cluster = cluster.clone();
        tokio::task::spawn_blocking(move || cluster.kill_primary())
            .await
            .expect("kill")
            .expect("the primary is killed")
    };
    let standby = 1 - dead;
    let killed = Instant::now();
    // One host down, the other a standby (until the monitor promotes it).
    let service = service_on(&cluster.url(), &secret).await;
    let base = service.base.clone();
    let ready = get(&client, &base, None, "/readyz").await;
    let created = admin_put(
        &client,
        &base,
        &admin,
        "/v1/shows/unready",
        show_body(10, 600),
    )
    .await;
    // Whether the standby takes writes now; if not now, then not when the
    // two requests above were answered either.
    let promoted = psql(&cluster.node_url(standby), &["SHOW transaction_read_only"])
        .map(|shown| !shown.contains(" on"))
        .unwrap_or(false);
    if !promoted {
        // Asked before the standby was promoted (it takes the monitor about
        // 16 s): not ready, and 503 busy with Retry-After.
        ready.expect_problem(503, "not_ready");
        created.expect_problem(503, "busy");
    }
    let health = get(&client, &base, None, "/healthz").await;
    assert_eq!(health.status, StatusCode::OK, "{}", health.body);
    // Ready once the standby is promoted.
    let deadline = Instant::now() + Duration::from_secs(120);
    let ready_after = loop {
        let ready = get(&client, &base, None, "/readyz").await;
        if ready.status == StatusCode::OK {
            assert_eq!(
                ready.body["database_host"],
                json!(format!("127.0.0.1:{}", cluster.ports[standby]))
            );
            break killed.elapsed();
        }
        assert_eq!(
            ready.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            ready.body
        );
        assert!(
            Instant::now() < deadline,
            "not ready within 120 s: {}",
            ready.body
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let created = admin_put(
        &client,
        &base,
        &admin,
        "/v1/shows/unready",
        show_body(10, 600),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let buyer = token_from(&keys, "buyer", Role::Buyer, chrono::Duration::hours(1));
    let held = post(
        &client,
        format!("{base}/v1/shows/unready/holds"),
        &buyer,
        json!({"seats": [seat_id(1)]}),
    )
    .await
    .expect("answered");
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    println!(
        "started on a dead primary and a standby; asked before promotion: {}; ready {ready_after:?} after the kill",
        !promoted
    );
    drop(service);
}
