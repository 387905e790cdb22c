//! Tickets at the door (issue #48, `--only door`).
//!
//! Online: 8 scanners at 500 scans/s between them (each at its own steady
//! pace, entries then exits of its own tickets), against the plain hold of
//! one seat by 8 buyers at the same pace in the same run; then the scanners
//! unpaced, for the ceiling.
//!
//! Offline: 4 scanners upload 5,000 scans each in batches of 1,000, at
//! once: 10 % of them duplicate nonces (a scan sent again), 1 % entries with
//! revoked codes (tickets transferred before the door opened), and some
//! tickets let in by two scanners without an exit between. What the
//! service ends with (conflicts listed, entries and exits by gate,
//! duplicates answered) is checked against a model of the door's rules
//! computed here from the scans alone; a difference fails the run.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use booking::auth::Role;
use chrono::{DateTime, Utc};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::report::Figures;
use crate::scenarios::{post, put_show, seat_show, seat_show_body, BIG_SHOW_SEATS};
use crate::Target;

/// Scanners at the door online, and the pace the issue sets between them.
const SCANNERS: usize = 8;
const SCANS_PER_SECOND: f64 = 500.0;
/// Tickets each online scanner cycles through (entries, then exits).
const TICKETS_PER_SCANNER: usize = 100;

/// Offline: scanners, and what each uploads.
const OFFLINE_SCANNERS: usize = 4;
const OFFLINE_SCANS: usize = 5_000;
/// Tickets each offline scanner owns, scanned in 4 passes (in, out, in,
/// out): 4,400 scans.
const OWNED: usize = 1_100;
const PASSES: usize = 4;
/// Entries each scanner makes of the next scanner's tickets while they are
/// inside (conflicts), and of revoked codes (1 %).
const SHARED: usize = 50;
const REVOKED: usize = 50;
/// One scan in ten sent again (10 %): after every 9th fresh scan, a copy of
/// an earlier one.
const DUPLICATE_EVERY: usize = 9;
/// What the service takes in one upload.
const BATCH: usize = 1_000;
/// Seats a box-office sale takes at once (a hold's limit).
const SALE: usize = 50;

pub async fn run(target: &Target, seconds: Duration) -> anyhow::Result<Vec<Figures>> {
    let mut figures = online(target, seconds).await?;
    figures.push(offline(target).await?);
    Ok(figures)
}

/// Sells `count` seats of `show` at the box office (50 a sale, 8 at once)
/// and returns their tickets (`ticket_id`, `code`) in seat order.
async fn sell(target: &Target, show: &str, count: usize) -> anyhow::Result<Vec<(String, String)>> {
    let admin = target.token("bench-admin", Role::Admin);
    let sales: Vec<usize> = (0..count.div_ceil(SALE)).collect();
    let mut tickets: Vec<(usize, Vec<(String, String)>)> = Vec::new();
    for chunk in sales.chunks(8) {
        let mut tasks = tokio::task::JoinSet::new();
        for &sale in chunk {
            let (target, admin, show) = (target.clone(), admin.clone(), show.to_owned());
            tasks.spawn(async move {
                let seats: Vec<String> = (sale * SALE..((sale + 1) * SALE).min(count))
                    .map(|n| format!("S{}", n + 1))
                    .collect();
                let body =
                    json!({"seats": seats, "buyer": format!("door-{sale}"), "payment": "cash"});
                let path = format!("/v1/shows/{show}/bookings");
                let (status, _, booking) = post(&target, &path, &admin, &body).await;
                anyhow::ensure!(status == 201, "box office sale: {status} {booking}");
                // The box office answers an order paid offline.
                let id = booking["order_id"].as_str().unwrap_or_default();
                let listed: Value = target
                    .client
                    .get(format!("{}/v1/orders/{id}/tickets", target.base))
                    .bearer_auth(&admin)
                    .send()
                    .await?
                    .json()
                    .await?;
                let mut tickets: Vec<(String, String, String)> = listed["tickets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| {
                        let field = |name: &str| t[name].as_str().unwrap_or_default().to_owned();
                        (field("seat_id"), field("ticket_id"), field("code"))
                    })
                    .collect();
                anyhow::ensure!(tickets.len() == seats.len(), "tickets of a sale: {listed}");
                tickets.sort_by_key(|(seat, _, _)| seat[1..].parse::<usize>().unwrap_or(0));
                Ok((
                    sale,
                    tickets
                        .into_iter()
                        .map(|(_, id, code)| (id, code))
                        .collect(),
                ))
            });
        }
        while let Some(sold) = tasks.join_next().await {
            tickets.push(sold??);
        }
    }
    tickets.sort_by_key(|(sale, _)| *sale);
    Ok(tickets.into_iter().flat_map(|(_, t)| t).collect())
}

/// `workers` workers, each calling `make` at `rate / workers` a second
/// (never catching up a call it was late for) until `duration` is over.
async fn paced<F, Fut>(
    workers: usize,
    rate: Option<f64>,
    duration: Duration,
    make: F,
) -> (Duration, Vec<(u16, Duration)>)
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = (u16, Duration)> + Send + 'static,
{
    let make = Arc::new(make);
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..workers {
        let make = make.clone();
        let every = rate.map(|r| Duration::from_secs_f64(workers as f64 / r));
        tasks.spawn(async move {
            let mut answers = Vec::new();
            // Spread over the first interval, so the workers do not beat together.
            let mut next = tokio::time::Instant::now()
                + every.map_or(Duration::ZERO, |e| {
                    e.mul_f64(worker as f64 / workers as f64)
                });
            let mut call = 0;
            while Instant::now() < deadline {
                if let Some(every) = every {
                    tokio::time::sleep_until(next).await;
                    next = (next + every).max(tokio::time::Instant::now());
                }
                answers.push(make(worker, call).await);
                call += 1;
            }
            answers
        });
    }
    let mut all = Vec::new();
    while let Some(answers) = tasks.join_next().await {
        all.extend(answers.unwrap_or_default());
    }
    (started.elapsed(), all)
}

/// The online door against the plain hold, at the same pace.
async fn online(target: &Target, seconds: Duration) -> anyhow::Result<Vec<Figures>> {
    let holds_show = "door-holds";
    seat_show(target, holds_show, BIG_SHOW_SEATS).await?;
    let show = "door-online";
    put_show(
        target,
        show,
        seat_show_body(show, SCANNERS * TICKETS_PER_SCANNER),
    )
    .await?;
    let tickets = Arc::new(sell(target, show, SCANNERS * TICKETS_PER_SCANNER).await?);
    let target = Arc::new(target.clone());

    let next_seat = Arc::new(AtomicUsize::new(0));
    let (wall, answers) = paced(SCANNERS, Some(SCANS_PER_SECOND), seconds, {
        let target = target.clone();
        move |worker, call| {
            let (target, next_seat) = (target.clone(), next_seat.clone());
            // A buyer per hold: no per-buyer limit in the way.
            let token = target.token(&format!("dh{worker}-{call}"), Role::Buyer);
            async move {
                let seat = next_seat.fetch_add(1, Ordering::Relaxed) % BIG_SHOW_SEATS + 1;
                let body = json!({"seats": [format!("S{seat}")]});
                let (status, took, _) = post(
                    &target,
                    &format!("/v1/shows/{holds_show}/holds"),
                    &token,
                    &body,
                )
                .await;
                (status, took)
            }
        }
    })
    .await;
    let holds = Figures::from_latencies(
        "plain hold, 8 buyers at 500/s",
        target.store,
        &answers,
        wall,
    );

    let mut figures = vec![holds];
    for (label, rate) in [
        (
            "online check-in, 8 scanners at 500/s",
            Some(SCANS_PER_SECOND),
        ),
        ("online check-in, 8 scanners unpaced", None),
    ] {
        let (wall, answers) = paced(SCANNERS, rate, seconds, {
            let (target, tickets) = (target.clone(), tickets.clone());
            // Each round of scanners starts where the ticket's state is:
            // the unpaced round continues from the paced one's passes.
            let offset = figures.len() * 1_000_000;
            move |worker, call| {
                let (target, tickets) = (target.clone(), tickets.clone());
                let token = target.scanner(&format!("door-{worker}"), show);
                async move {
                    let n = call % TICKETS_PER_SCANNER;
                    let pass = call / TICKETS_PER_SCANNER;
                    let (_, code) = &tickets[worker * TICKETS_PER_SCANNER + n];
                    let body = json!({
                        "code": code, "gate": "main",
                        "direction": if pass.is_multiple_of(2) { "entry" } else { "exit" },
                        "nonce": format!("w{worker}-{}", offset + call),
                    });
                    let (status, took, _) = post(
                        &target,
                        &format!("/v1/shows/{show}/checkins"),
                        &token,
                        &body,
                    )
                    .await;
                    (status, took)
                }
            }
        })
        .await;
        let mut scans = Figures::from_latencies(label, target.store, &answers, wall);
        scans.note = format!("{} refused", scans.refused);
        figures.push(scans);
        // The next round starts with every ticket outside: the paced round
        // may end mid-pass.
        if rate.is_some() {
            leave_all(&target, show, &tickets).await?;
        }
    }
    let (hold_p99, scan_p99) = (figures[0].p99_ms, figures[1].p99_ms);
    figures[1].note = format!(
        "p99 {:.2}x the plain hold's at the same pace; {}",
        scan_p99 / hold_p99.max(f64::EPSILON),
        figures[1].note
    );
    Ok(figures)
}

/// Lets every ticket of `show` out (an exit by the admin; refused for those
/// not inside), so that the next round starts with everyone outside.
async fn leave_all(
    target: &Target,
    show: &str,
    tickets: &[(String, String)],
) -> anyhow::Result<()> {
    let admin = target.token("bench-admin", Role::Admin);
    for (n, (_, code)) in tickets.iter().enumerate() {
        let body =
            json!({"code": code, "gate": "main", "direction": "exit", "nonce": format!("out-{n}")});
        let (status, _, answer) =
            post(target, &format!("/v1/shows/{show}/checkins"), &admin, &body).await;
        anyhow::ensure!(status == 201 || status == 409, "exit: {status} {answer}");
    }
    Ok(())
}

/// One scan an offline scanner made.
#[derive(Clone)]
struct Scan {
    ticket: usize,
    code: String,
    gate: String,
    entry: bool,
    nonce: String,
    at: DateTime<Utc>,
    /// A code revoked before the door opened.
    revoked: bool,
}

impl Scan {
    fn body(&self) -> Value {
        json!({"code": self.code, "gate": self.gate,
               "direction": if self.entry { "entry" } else { "exit" },
               "nonce": self.nonce, "scanned_at": self.at.to_rfc3339()})
    }
}

/// What the door must end with, from the scans alone (docs/api.md,
/// "Check-in": applied in `scanned_at` order; an entry while inside or with
/// a revoked code is a conflict and still lets the person in).
#[derive(Debug, PartialEq, Eq, Default)]
struct Door {
    conflicts: usize,
    entries: usize,
    exits: usize,
}

fn model(scans: &[Scan]) -> Door {
    let mut seen = std::collections::HashSet::new();
    let mut by_ticket: BTreeMap<usize, Vec<&Scan>> = BTreeMap::new();
    for scan in scans.iter().filter(|s| seen.insert(s.nonce.clone())) {
        by_ticket.entry(scan.ticket).or_default().push(scan);
    }
    let mut door = Door::default();
    for scans in by_ticket.values_mut() {
        scans.sort_by_key(|s| s.at);
        let mut inside = false;
        for scan in scans.iter() {
            if scan.entry {
                door.entries += 1;
                door.conflicts += usize::from(scan.revoked || inside);
                inside = true;
            } else {
                door.exits += 1;
                inside = false;
            }
        }
    }
    door
}

/// The four scanners' uploads: each scanner's own tickets in four passes,
/// entries of the next scanner's tickets while they are inside, entries of
/// revoked codes, and one scan in ten sent again.
fn offline_scans(
    tickets: &[(String, String)],
    revoked: &[(usize, String)],
    start: DateTime<Utc>,
) -> Vec<Vec<Scan>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(48);
    let at = |ms: usize| start + chrono::Duration::milliseconds(ms as i64);
    (0..OFFLINE_SCANNERS)
        .map(|k| {
            let gate = format!("g{k}");
            let mut fresh = Vec::new();
            let scan = |ticket: usize, code: &str, entry: bool, ms: usize, revoked: bool| Scan {
                ticket,
                code: code.to_owned(),
                gate: gate.clone(),
                entry,
                nonce: String::new(),
                at: at(ms),
                revoked,
            };
            for pass in 0..PASSES {
                for i in 0..OWNED {
                    let ticket = k * OWNED + i;
                    let ms = (pass * OWNED + i) * 10 + k;
                    fresh.push(scan(
                        ticket,
                        &tickets[ticket].1,
                        pass.is_multiple_of(2),
                        ms,
                        false,
                    ));
                }
            }
            // The next scanner's first tickets, while their first entry
            // holds them inside (between its pass 0 and pass 1).
            let next = (k + 1) % OFFLINE_SCANNERS;
            for i in 0..SHARED {
                let ticket = next * OWNED + i;
                let ms = i * 10 + 5_000 + k;
                fresh.push(scan(ticket, &tickets[ticket].1, true, ms, false));
            }
            for (i, (ticket, code)) in revoked[k * REVOKED..(k + 1) * REVOKED].iter().enumerate() {
                fresh.push(scan(*ticket, code, true, 20_000 + i * 10 + k, true));
            }
            fresh.sort_by_key(|s| s.at);
            for (n, scan) in fresh.iter_mut().enumerate() {
                scan.nonce = format!("s{k}-{n}");
            }
            // Uploaded in the order scanned, one in ten sent again.
            let mut upload = Vec::with_capacity(OFFLINE_SCANS);
            for (n, scan) in fresh.iter().enumerate() {
                upload.push(scan.clone());
                if (n + 1).is_multiple_of(DUPLICATE_EVERY) {
                    upload.push(fresh[rng.gen_range(0..=n)].clone());
                }
            }
            upload
        })
        .collect()
}

/// The offline uploads, at once, checked against the model.
async fn offline(target: &Target) -> anyhow::Result<Figures> {
    let show = "door-offline";
    let owned = OFFLINE_SCANNERS * OWNED;
    let count = owned + OFFLINE_SCANNERS * REVOKED;
    let mut body = seat_show_body(show, count);
    body["checkin"] = json!({"gates": (0..OFFLINE_SCANNERS)
        .map(|k| json!({"gate_id": format!("g{k}"), "label": format!("Gate {k}")}))
        .collect::<Vec<_>>()});
    put_show(target, show, body).await?;
    let tickets = sell(target, show, count).await?;
    // The last tickets change hands: the codes sold first are revoked.
    let admin = target.token("bench-admin", Role::Admin);
    let mut revoked = Vec::new();
    for (n, (ticket_id, code)) in tickets.iter().enumerate().skip(owned) {
        let path = format!("/v1/tickets/{ticket_id}/transfer");
        let body = json!({"to": format!("friend-{n}"), "holder_name": "A Friend"});
        let (status, _, answer) = post(target, &path, &admin, &body).await;
        anyhow::ensure!(status == 200, "transfer: {status} {answer}");
        revoked.push((n, code.clone()));
    }
    let start = Utc::now() - chrono::Duration::hours(1);
    let uploads = offline_scans(&tickets, &revoked, start);
    let all: Vec<Scan> = uploads.iter().flatten().cloned().collect();
    let want = model(&all);

    let target = Arc::new(target.clone());
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (k, scans) in uploads.into_iter().enumerate() {
        let target = target.clone();
        let token = target.scanner(&format!("offline-{k}"), show);
        tasks.spawn(async move {
            let mut answers = Vec::new();
            let mut results: HashMap<String, usize> = HashMap::new();
            for batch in scans.chunks(BATCH) {
                let body = json!({"scans": batch.iter().map(Scan::body).collect::<Vec<_>>()});
                let path = format!("/v1/shows/{show}/checkins/batch");
                let (status, took, answer) = post(&target, &path, &token, &body).await;
                answers.push((status, took));
                for result in answer["results"].as_array().into_iter().flatten() {
                    let name = result["result"].as_str().unwrap_or("none").to_owned();
                    *results.entry(name).or_default() += 1;
                }
            }
            (answers, results)
        });
    }
    let mut answers = Vec::new();
    let mut results: HashMap<String, usize> = HashMap::new();
    while let Some(done) = tasks.join_next().await {
        let (batches, counted) = done?;
        answers.extend(batches);
        for (name, n) in counted {
            *results.entry(name).or_default() += n;
        }
    }
    let wall = started.elapsed();

    let scanner = target.scanner("offline-check", show);
    let attendance: Value = get(&target, &format!("/v1/shows/{show}/attendance"), &scanner).await?;
    let conflicts: Value = get(
        &target,
        &format!("/v1/shows/{show}/checkins/conflicts"),
        &admin,
    )
    .await?;
    let gates = attendance["by_gate"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let sum = |field: &str| gates.iter().filter_map(|g| g[field].as_u64()).sum::<u64>() as usize;
    let got = Door {
        conflicts: conflicts["conflicts"].as_array().map_or(0, Vec::len),
        entries: sum("entries"),
        exits: sum("exits"),
    };
    let duplicates = all.len()
        - all
            .iter()
            .map(|s| &s.nonce)
            .collect::<std::collections::HashSet<_>>()
            .len();
    let answered_duplicates = results.get("duplicate").copied().unwrap_or(0);
    anyhow::ensure!(
        got == want && answered_duplicates == duplicates,
        "the door after the offline uploads is not what its rules make of the scans: \
         service {got:?} with {answered_duplicates} duplicates, model {want:?} with {duplicates}"
    );
    let mut figures = Figures::from_latencies(
        "offline sync, 4 scanners x 5,000 scans (batches of 1,000)",
        target.store,
        &answers,
        wall,
    );
    figures.per_second = all.len() as f64 / wall.as_secs_f64();
    figures.note = format!(
        "per_second: scans accepted a second (latency: per batch); checked against the model: \
         {} conflicts listed, {} entries and {} exits by gate, {duplicates} duplicates answered \
         as such; results {:?}",
        want.conflicts,
        want.entries,
        want.exits,
        results.into_iter().collect::<BTreeMap<_, _>>()
    );
    Ok(figures)
}

async fn get(target: &Target, path: &str, token: &str) -> anyhow::Result<Value> {
    let response = target
        .client
        .get(format!("{}{path}", target.base))
        .bearer_auth(token)
        .send()
        .await?;
    let status = response.status();
    let body: Value = response.json().await?;
    anyhow::ensure!(status.is_success(), "GET {path}: {status} {body}");
    Ok(body)
}
