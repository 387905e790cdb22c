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
    tests![a_kill_9_during_checkouts_loses_no_booking_and_no_charge]
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
    let kill_after = rand::thread_rng().gen_range(5..60);
    let (acks_tx, mut acks_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, hold_id) in holds.iter().enumerate() {
        let delay_ms = rand::thread_rng().gen_range(0..400);
        let url = format!("{}/v1/holds/{hold_id}/purchase", service.base);
        let (client, buyer, acks) = (client.clone(), buyers[i].clone(), acks_tx.clone());
        tasks.spawn(async move {
            let body = json!({"payment_method": format!("pm_sim_delay_{delay_ms}")});
            if let Some(answer) = post(&client, url, &buyer, body).await {
                let _ = acks.send((i, answer));
            }
        });
    }
    drop(acks_tx);
    let mut acknowledged: HashMap<usize, Answer> = HashMap::new();
    while acknowledged.len() < kill_after {
        match acks_rx.recv().await {
            Some((i, answer)) => {
                acknowledged.insert(i, answer);
            }
            None => break,
        }
    }
    service.child.kill().await.expect("kill -9");
    while let Some((i, answer)) = acks_rx.recv().await {
        acknowledged.insert(i, answer);
    }
    tasks.shutdown().await;
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
    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_booking"))
        .arg("verify")
        .env("DATABASE_URL", &database_url)
        .env("RUST_LOG", "error")
        .output()
        .expect("booking verify runs");
    assert!(
        verify.status.success(),
        "verify after the crash: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
    println!(
        "crash on {}: killed after {} acknowledgements, {} bookings confirmed before the kill, {} charges in all",
        env.backend.name(),
        kill_after,
        booked_before_kill.len(),
        ledger.len()
    );
    drop(service);
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
