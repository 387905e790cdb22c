//! The real `booking` binary, killed with SIGKILL in the middle of an onsale
//! and restarted on the same database.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::Duration;

use booking::auth::{Role, TokenKeys};
use booking::payment::ledger::Ledger;
use booking::store::Store;
use domain::seat::Seat;
use rand::Rng;
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::support::{show_body, token_from, Answer, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_kill_9_during_checkouts_loses_no_booking_and_no_charge,
        a_kill_9_during_orders_and_cancellations_loses_no_order_and_no_refund,
        a_kill_9_during_a_batch_upload_loses_no_scan_and_counts_none_twice,
    ]
}

const CHECKOUTS: usize = 100;

/// A `booking serve` child process and the address it listens on.
pub struct Service {
    pub child: Child,
    pub base: String,
}

pub async fn start(database_url: &str, secret: &str) -> Service {
    start_with(database_url, secret, &[]).await
}

/// `start`, with more settings in the environment.
pub async fn start_with(database_url: &str, secret: &str, settings: &[(&str, &str)]) -> Service {
    let mut child = Command::new(env!("CARGO_BIN_EXE_booking"))
        .arg("serve")
        .envs(settings.iter().copied())
        .env("DATABASE_URL", database_url)
        .env("BOOKING_ADDR", "127.0.0.1:0")
        .env("BOOKING_JWT_SECRET", secret)
        .env("BOOKING_PAYMENT_LATENCY_MS", "50")
        .env("BOOKING_DB_CONNECTIONS", "8")
        .env("BOOKING_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("the booking binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // The service logs its address once recovery is done and it listens.
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            let Ok(log) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if log["fields"]["message"] == "booking is listening" {
                return log["fields"]["addr"].as_str().map(str::to_owned);
            }
        }
        None
    })
    .await
    .expect("the service listens within a minute")
    .expect("the service announces its address");
    // Keep draining the log so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Service {
        child,
        base: format!("http://{addr}"),
    }
}

pub async fn post(
    client: &reqwest::Client,
    url: String,
    token: &str,
    body: Value,
) -> Option<Answer> {
    let response = client
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    Some(TestApp::answer(response).await)
}

async fn a_kill_9_during_checkouts_loses_no_booking_and_no_charge(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| token_from(&keys, sub, role, chrono::Duration::hours(1));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    let mut service = start(&database_url, &secret).await;
    let put = client
        .put(format!("{}/v1/shows/crash", service.base))
        .bearer_auth(token("ops", Role::Admin))
        .header("content-type", "application/json")
        .body(show_body(CHECKOUTS, 480).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);

    let buyers: Vec<String> = (0..CHECKOUTS)
        .map(|i| token(&format!("b{i}"), Role::Buyer))
        .collect();
    let mut holds = Vec::with_capacity(CHECKOUTS);
    for (i, buyer) in buyers.iter().enumerate() {
        let url = format!("{}/v1/shows/crash/holds", service.base);
        let hold = post(
            &client,
            url,
            buyer,
            json!({"seats": [format!("S{}", i + 1)]}),
        )
        .await
        .expect("hold answered");
        assert_eq!(hold.status, StatusCode::CREATED);
        holds.push(hold.str("hold_id"));
    }

    // 100 concurrent checkouts with payments of random length; the service
    // is killed once a random number of them have been acknowledged.
    let calls = holds
        .iter()
        .enumerate()
        .map(|(i, hold_id)| {
            let delay_ms = rand::thread_rng().gen_range(0..400);
            let url = format!("{}/v1/holds/{hold_id}/purchase", service.base);
            let body = json!({"payment_method": format!("pm_sim_delay_{delay_ms}")});
            (i, url, buyers[i].clone(), body)
        })
        .collect();
    let (kill_after, acknowledged) = kill_during(&mut service, calls, 5..60, &client).await;
    let booked_before_kill: HashMap<usize, String> = acknowledged
        .iter()
        .filter(|(_, a)| a.status == StatusCode::CREATED)
        .map(|(i, a)| (*i, a.str("charge_id")))
        .collect();
    assert!(
        booked_before_kill.len() >= kill_after.min(CHECKOUTS) / 2,
        "acknowledgements arrived"
    );

    // Restart on the same database: recovery runs before it listens.
    let service = start(&database_url, &secret).await;
    let store = Store::connect(&database_url, 2).await.unwrap();
    assert!(
        store
            .checkouts()
            .pending_checkouts(1000)
            .await
            .unwrap()
            .is_empty(),
        "recovery finished everything"
    );

    // Every simulator charge ended in a booking or a refund.
    let ledger = Ledger::of(&store).sim_ledger().await.unwrap();
    let mut charges_per_hold: BTreeMap<String, usize> = BTreeMap::new();
    for charge in ledger.iter().filter(|c| c.outcome == "captured") {
        let hold_id = charge_hold(&store, &charge.charge_id).await;
        *charges_per_hold.entry(hold_id.clone()).or_default() += 1;
        if charge.refund_id.is_none() {
            let i = holds
                .iter()
                .position(|h| *h == hold_id)
                .expect("a hold of ours");
            let url = format!("{}/v1/holds/{hold_id}/purchase", service.base);
            let retry = post(
                &client,
                url,
                &buyers[i],
                json!({"payment_method": "pm_sim_ok"}),
            )
            .await
            .expect("answered");
            assert_eq!(
                retry.status,
                StatusCode::OK,
                "charged, so booked: {}",
                retry.body
            );
            assert_eq!(retry.str("charge_id"), charge.charge_id);
        }
    }
    assert!(
        charges_per_hold.values().all(|n| *n == 1),
        "one charge per hold"
    );

    // Every purchase acknowledged before the kill still has its booking,
    // and a retry returns the same charge.
    for (i, charge_id) in &booked_before_kill {
        let url = format!("{}/v1/holds/{}/purchase", service.base, holds[*i]);
        let retry = post(
            &client,
            url,
            &buyers[*i],
            json!({"payment_method": "pm_sim_ok"}),
        )
        .await
        .expect("answered");
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
        assert_eq!(&retry.str("charge_id"), charge_id);
        assert_eq!(retry.body["status"], "confirmed");
    }

    // No seat is in two bookings.
    for n in 1..=CHECKOUTS {
        let events = store
            .log()
            .stream_events::<Seat>(&format!("crash/S{n}"), 0)
            .await
            .unwrap();
        let conversions = events
            .iter()
            .filter(|e| e.event_type == "HoldConverted")
            .count();
        assert!(conversions <= 1, "S{n} converted {conversions} times");
    }
    // The projections equal a fresh replay of the log.
    assert_verified(&database_url, "the crash");
    println!(
        "crash on {}: killed after {} acknowledgements, {} bookings confirmed before the kill, {} charges in all",
        env.backend.name(),
        kill_after,
        booked_before_kill.len(),
        ledger.len()
    );
    drop(service);
}

/// `booking verify`: the projections equal a fresh replay of the log.
fn assert_verified(database_url: &str, after: &str) {
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_booking"))
        .arg("verify")
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "error")
        .output()
        .expect("booking verify runs");
    assert!(
        verify.status.success(),
        "verify after {after}: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

/// The hold a simulator payment is for.
async fn charge_hold(store: &Store, payment_id: &str) -> String {
    Ledger::of(store)
        .sim_payment(payment_id)
        .await
        .unwrap()
        .expect("payment")
        .hold_id
}

const ORDERS: usize = 100;
const HOLDS_PER_ORDER: usize = 3;
const CANCELLATIONS: usize = 50;

/// Fires `calls` at once, kills the service once a random number of them
/// (from `range`) are answered, and returns that number and every answer
/// that arrived.
async fn kill_during(
    service: &mut Service,
    calls: Vec<(usize, String, String, Value)>,
    range: std::ops::Range<usize>,
    client: &reqwest::Client,
) -> (usize, HashMap<usize, Answer>) {
    let kill_after = rand::thread_rng().gen_range(range);
    let (acks_tx, mut acks_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, url, token, body) in calls {
        let (client, acks) = (client.clone(), acks_tx.clone());
        tasks.spawn(async move {
            if let Some(answer) = post(&client, url, &token, body).await {
                let _ = acks.send((i, answer));
            }
        });
    }
    drop(acks_tx);
    let mut answered = HashMap::new();
    while answered.len() < kill_after {
        match acks_rx.recv().await {
            Some((i, answer)) => {
                answered.insert(i, answer);
            }
            None => break,
        }
    }
    service.child.kill().await.expect("kill -9");
    while let Some((i, answer)) = acks_rx.recv().await {
        answered.insert(i, answer);
    }
    tasks.shutdown().await;
    (kill_after, answered)
}

/// Restarts on the same database (recovery runs before it listens) and
/// checks nothing is left half way.
async fn restart(database_url: &str, secret: &str) -> (Service, Store) {
    let service = start(database_url, secret).await;
    let store = Store::connect(database_url, 2).await.unwrap();
    let pending = store.checkouts().pending_checkouts(1000).await.unwrap();
    assert!(
        pending.is_empty(),
        "recovery finished everything: {pending:?}"
    );
    (service, store)
}

async fn get_json(client: &reqwest::Client, url: String, token: &str) -> Answer {
    let response = client
        .get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("answered");
    TestApp::answer(response).await
}

async fn a_kill_9_during_orders_and_cancellations_loses_no_order_and_no_refund(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let token = |sub: &str, role| token_from(&keys, sub, role, chrono::Duration::hours(1));
    let admin = token("ops", Role::Admin);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut service = start(&database_url, &secret).await;
    let put = client
        .put(format!("{}/v1/shows/orders", service.base))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body(show_body(ORDERS * HOLDS_PER_ORDER, 480).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);

    // 100 buyers, each with three holds of a seat each.
    let buyers: Vec<String> = (0..ORDERS)
        .map(|i| token(&format!("b{i}"), Role::Buyer))
        .collect();
    let mut holds: Vec<Vec<String>> = Vec::with_capacity(ORDERS);
    for (i, buyer) in buyers.iter().enumerate() {
        let mut mine = Vec::new();
        for k in 0..HOLDS_PER_ORDER {
            let seat = format!("S{}", i * HOLDS_PER_ORDER + k + 1);
            let url = format!("{}/v1/shows/orders/holds", service.base);
            let hold = post(&client, url, buyer, json!({"seats": [seat]}))
                .await
                .expect("hold");
            assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.body);
            mine.push(hold.str("hold_id"));
        }
        holds.push(mine);
    }

    // 100 orders of random payment lengths; killed after some are answered.
    let calls = (0..ORDERS)
        .map(|i| {
            let delay_ms = rand::thread_rng().gen_range(0..400);
            let body =
                json!({"holds": holds[i], "payment_method": format!("pm_sim_delay_{delay_ms}")});
            (
                i,
                format!("{}/v1/orders", service.base),
                buyers[i].clone(),
                body,
            )
        })
        .collect();
    let (_, answered) = kill_during(&mut service, calls, 5..60, &client).await;
    let confirmed_before: HashMap<usize, String> = answered
        .iter()
        .filter(|(_, a)| a.status == StatusCode::CREATED)
        .map(|(i, a)| (*i, a.str("charge_id")))
        .collect();

    let (service, store) = restart(&database_url, &secret).await;
    // Every order asked again: confirmed with the one payment it had, or
    // never charged; no captured money without a confirmed order.
    let ledger = Ledger::of(&store).sim_ledger().await.unwrap();
    let mut orders: Vec<Option<Answer>> = Vec::with_capacity(ORDERS);
    for i in 0..ORDERS {
        let url = format!("{}/v1/orders", service.base);
        let body = json!({"holds": holds[i], "payment_method": "pm_sim_ok"});
        let again = post(&client, url, &buyers[i], body)
            .await
            .expect("answered");
        let paid = ledger
            .iter()
            .filter(|c| c.outcome == "captured")
            .filter(|c| again.body["charge_id"].as_str() == Some(c.charge_id.as_str()))
            .count();
        if let Some(charge_id) = confirmed_before.get(&i) {
            assert_eq!(again.status, StatusCode::OK, "{}", again.body);
            assert_eq!(&again.str("charge_id"), charge_id, "the same payment");
        }
        if again.status == StatusCode::OK || again.status == StatusCode::CREATED {
            assert!(paid <= 1);
            orders.push(Some(again));
        } else {
            orders.push(None);
        }
    }
    for charge in ledger.iter().filter(|c| c.outcome == "captured") {
        assert!(
            orders
                .iter()
                .flatten()
                .any(|o| o.str("charge_id") == charge.charge_id),
            "captured {} without a confirmed order",
            charge.charge_id
        );
    }
    // No seat is booked twice, and a seat is booked only for a confirmed order.
    let statuses = get_json(
        &client,
        format!("{}/v1/shows/orders/availability", service.base),
        &admin,
    )
    .await;
    let booked: BTreeMap<String, String> = crate::support::seat_entries(&statuses.body)
        .into_iter()
        .collect();
    for (i, order) in orders.iter().enumerate() {
        for k in 0..HOLDS_PER_ORDER {
            let seat = format!("S{}", i * HOLDS_PER_ORDER + k + 1);
            let expected = if order.is_some() {
                "booked"
            } else {
                "available"
            };
            if order.is_some() || booked[&seat] != "held" {
                assert_eq!(booked[&seat], expected, "{seat} of order {i}");
            }
        }
    }

    // 50 concurrent partial cancellations (one random line each), killed
    // mid-way; recovery finishes each: refunded once, its seat free.
    let confirmed: Vec<(usize, String)> = orders
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.as_ref().map(|o| (i, o.str("order_id"))))
        .take(CANCELLATIONS)
        .collect();
    let mut service = service;
    let calls = confirmed
        .iter()
        .map(|(i, order_id)| {
            let line = rand::thread_rng().gen_range(1..=HOLDS_PER_ORDER);
            let url = format!("{}/v1/orders/{order_id}/cancel", service.base);
            (*i, url, admin.clone(), json!({"lines": [line]}))
        })
        .collect();
    let (_, answered) = kill_during(
        &mut service,
        calls,
        1..CANCELLATIONS.min(confirmed.len()).max(2),
        &client,
    )
    .await;
    let (service, store) = restart(&database_url, &secret).await;
    let ledger = Ledger::of(&store);
    for (i, order_id) in &confirmed {
        let read = get_json(
            &client,
            format!("{}/v1/orders/{order_id}", service.base),
            &admin,
        )
        .await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.body);
        let refunds = ledger.sim_refunds_of(&read.str("charge_id")).await.unwrap();
        let listed = read.body["refunds"].as_array().expect("refunds").len();
        assert_eq!(
            refunds.len(),
            listed,
            "order {i}: one provider refund per cancellation"
        );
        assert!(
            listed <= 1,
            "order {i}: one cancellation asked, refunded at most once"
        );
        let cancelled: Vec<&Value> = read.body["lines"]
            .as_array()
            .expect("lines")
            .iter()
            .filter(|l| l["status"] == "cancelled")
            .collect();
        assert_eq!(cancelled.len(), listed, "order {i}");
        assert_eq!(
            read.body["refunded_cents"].as_i64(),
            Some(refunds.iter().map(|(_, a)| a).sum::<i64>())
        );
        if let Some(answer) = answered.get(i) {
            if answer.status == StatusCode::OK {
                assert_eq!(listed, 1, "an acknowledged cancellation stands");
            }
        }
        for line in cancelled {
            let seat = line["seat_id"].as_str().expect("a seat line");
            let statuses = get_json(
                &client,
                format!("{}/v1/shows/orders/availability", service.base),
                &admin,
            )
            .await;
            let free: BTreeMap<String, String> = crate::support::seat_entries(&statuses.body)
                .into_iter()
                .collect();
            assert_eq!(free[seat], "available", "{seat} of a cancelled line");
        }
    }
    assert_verified(&database_url, "the crashes");
    println!(
        "orders crash on {}: {} confirmed before the kill, {} orders paid, {} cancellations",
        env.backend.name(),
        confirmed_before.len(),
        orders.iter().flatten().count(),
        confirmed.len()
    );
    drop(service);
}

/// Tickets the door batch test scans: one box-office sale of this many seats.
const DOOR_TICKETS: usize = 200;

/// An offline scanner's upload of 1,000 scans is cut by a kill -9 of the
/// service; sent again to the restarted service, every scan is recorded
/// once (those that landed before the kill are `duplicate`), and the door
/// counts each entry and exit once.
async fn a_kill_9_during_a_batch_upload_loses_no_scan_and_counts_none_twice(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let (database_url, _dir) = env.database_url().await;
    let secret = uuid::Uuid::new_v4().to_string();
    let keys = TokenKeys::new(&secret);
    let admin = token_from(&keys, "ops", Role::Admin, chrono::Duration::hours(1));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut service = start(&database_url, &secret).await;
    let show = show_body(DOOR_TICKETS, 480);
    let created = client
        .put(format!("{}/v1/shows/door", service.base))
        .bearer_auth(&admin)
        .json(&show)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let mut codes: Vec<String> = Vec::with_capacity(DOOR_TICKETS);
    // Sales of a hold's most seats each (MAX_SEATS_PER_HOLD).
    for first in (1..=DOOR_TICKETS).step_by(50) {
        let seats: Vec<String> = (first..first + 50).map(|n| format!("S{n}")).collect();
        let sale = json!({"seats": seats, "buyer": "group", "payment": "invoice"});
        let url = format!("{}/v1/shows/door/bookings", service.base);
        let sold = post(&client, url, &admin, sale).await.expect("answered");
        assert_eq!(sold.status, StatusCode::CREATED, "{}", sold.body);
        let url = format!(
            "{}/v1/orders/{}/tickets",
            service.base,
            sold.str("order_id")
        );
        let tickets = client.get(url).bearer_auth(&admin).send().await.unwrap();
        let tickets: Value = tickets.json().await.unwrap();
        let sold_codes = tickets["tickets"].as_array().unwrap().iter();
        codes.extend(sold_codes.map(|t| t["code"].as_str().unwrap().to_owned()));
    }
    assert_eq!(codes.len(), DOOR_TICKETS);

    // 1,000 scans: each ticket in, out, in, out, in (5 scans), in order.
    let start_at = chrono::Utc::now() - chrono::Duration::hours(1);
    let scans: Vec<Value> = (0..5)
        .flat_map(|round| {
            let codes = &codes;
            (0..DOOR_TICKETS).map(move |t| {
                json!({"code": codes[t], "gate": "main",
                       "direction": if round % 2 == 0 { "entry" } else { "exit" },
                       "nonce": format!("s-{round}-{t}"),
                       "scanned_at": (start_at + chrono::Duration::seconds(60 * round + t as i64)).to_rfc3339()})
            })
        })
        .collect();
    let batch = json!({"scans": scans});
    let scanner = scanner_for(&keys, "door");
    let url = format!("{}/v1/shows/door/checkins/batch", service.base);
    let upload = {
        let (client, scanner, batch) = (client.clone(), scanner.clone(), batch.clone());
        tokio::spawn(async move { post(&client, url, &scanner, batch).await })
    };
    // Anywhere from before the request is read to after its commit.
    let delay = rand::thread_rng().gen_range(0..1_500);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    service.child.kill().await.expect("kill -9");
    let cut = upload.await.expect("joined");
    let service = start(&database_url, &secret).await;
    let again = post(
        &client,
        format!("{}/v1/shows/door/checkins/batch", service.base),
        &scanner,
        batch,
    )
    .await
    .expect("answered after the restart");
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let results = again.body["results"].as_array().unwrap();
    assert_eq!(results.len(), 1000);
    let landed_before = results
        .iter()
        .filter(|r| r["result"] == "duplicate")
        .count();
    assert!(
        landed_before == 0 || landed_before == 1000,
        "one round for the batch: all of it landed or none ({landed_before})"
    );
    if cut.as_ref().is_some_and(|a| a.status == StatusCode::OK) {
        assert_eq!(
            landed_before, 1000,
            "answered 200 before the kill, so recorded"
        );
    }
    let url = format!("{}/v1/shows/door/attendance", service.base);
    let attendance: Value = client
        .get(url)
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(attendance["inside"], DOOR_TICKETS, "{attendance}");
    assert_eq!(
        attendance["by_gate"],
        json!([{"gate_id": "main", "entries": 3 * DOOR_TICKETS, "exits": 2 * DOOR_TICKETS}])
    );
    println!(
        "batch upload on {}: killed after {delay} ms, {landed_before} scans had landed",
        env.backend.name()
    );
    drop(service);
}

fn scanner_for(keys: &TokenKeys, show: &str) -> String {
    let grant = booking::auth::Grant {
        channels: Vec::new(),
        shows: vec![domain::ids::ShowId::parse(show).unwrap()],
    };
    let sub = domain::ids::BuyerId::parse("door-1").unwrap();
    keys.issue_granting(&sub, Role::Scanner, &grant, chrono::Duration::hours(1))
        .unwrap()
}
