//! Live availability under load: subscribers of one large show while
//! writers hold its seats (`--only live`).
//!
//! Each writer records when its hold's 201 arrived; each subscriber records
//! when the change naming that seat as held arrived. The latency is the
//! difference (0 when the change beat the 201 to the client: the change is
//! computed after the commit, the 201 is written after it too).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use booking::auth::Role;
use serde_json::{json, Value};

use crate::report::Figures;
use crate::Target;

/// The figures: 1,000 subscribers, a 20,000-seat show, 64 writers.
pub const SUBSCRIBERS: usize = 1_000;
pub const SEATS: usize = 20_000;

/// Resident memory of this process, in kB (Linux).
pub(crate) fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

fn seat_name(n: usize) -> String {
    format!("L{n}")
}

async fn create_show(target: &Target, show: &str) -> anyhow::Result<()> {
    let seats: Vec<Value> = (0..SEATS)
        .map(|n| {
            json!({"seat_id": seat_name(n), "section": format!("{}", n / 1000), "row": format!("{}", n / 50 % 20),
                   "number": n % 50 + 1, "price_cents": 5000})
        })
        .collect();
    let response = target
        .client
        .put(format!("{}/v1/shows/{show}", target.base))
        .bearer_auth(target.token("bench-admin", Role::Admin))
        .json(&json!({"name": show, "starts_at": "2027-01-01T20:00:00Z", "hold_ttl_seconds": 7200, "seats": seats}))
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "create show: {}",
        response.status()
    );
    Ok(())
}

/// One subscriber: reads its stream until `stop`, noting when each seat
/// was first reported held.
async fn subscribe(
    target: Target,
    show: String,
    connected: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    events: Arc<AtomicUsize>,
) -> anyhow::Result<Vec<(usize, Instant)>> {
    let mut response = target
        .client
        .get(format!(
            "{}/v1/shows/{show}/availability/stream",
            target.base
        ))
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "subscribe: {}",
        response.status()
    );
    let mut buffer = String::new();
    let mut seen = Vec::new();
    let mut counted = false;
    while !stop.load(Ordering::Relaxed) {
        let chunk = match tokio::time::timeout(Duration::from_millis(200), response.chunk()).await {
            Err(_) => continue,
            Ok(chunk) => chunk?,
        };
        let Some(chunk) = chunk else { break };
        let at = Instant::now();
        // Look for the end of an event only in what is new (a 20,000-seat
        // snapshot arrives in dozens of chunks; scanning it whole each time
        // made the client, not the service, the bottleneck).
        let from = buffer.len().saturating_sub(1);
        buffer.push_str(std::str::from_utf8(&chunk)?);
        let mut search_from = from;
        while let Some(found) = buffer[search_from..].find("\n\n") {
            let end = search_from + found;
            // Copied whole, not char by char (`drain().collect()` was 3 % of
            // the machine's CPU with 1,000 subscribers, in this client).
            let block = buffer[..end + 2].to_owned();
            buffer.replace_range(..end + 2, "");
            search_from = 0;
            let is_change = block.lines().any(|l| l == "event: change");
            let is_snapshot = block.lines().any(|l| l == "event: snapshot");
            if is_snapshot && !counted {
                counted = true;
                connected.fetch_add(1, Ordering::SeqCst);
            }
            if !is_change {
                continue;
            }
            events.fetch_add(1, Ordering::Relaxed);
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            // Read into the fields the client needs, not a `Value` tree (the
            // client shares the service's two cores: what it spends is not
            // the service's).
            let change: SeenChange<'_> = serde_json::from_str(&data)?;
            for seat in change.seats.iter().filter(|seat| seat.status == "held") {
                if let Some(n) = seat.seat_id.get(1..).and_then(|s| s.parse().ok()) {
                    seen.push((n, at));
                }
            }
        }
    }
    Ok(seen)
}

/// What the client reads of a `change` event.
#[derive(serde::Deserialize)]
struct SeenChange<'a> {
    #[serde(borrow)]
    seats: Vec<SeenSeat<'a>>,
}

#[derive(serde::Deserialize)]
struct SeenSeat<'a> {
    #[serde(borrow)]
    seat_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    status: std::borrow::Cow<'a, str>,
}

/// `subscribers` streams spread over `targets` (round robin), `writers`
/// holding distinct seats through the first target for `duration`.
pub async fn subscribers(
    targets: &[&Target],
    writers: usize,
    duration: Duration,
    elsewhere: Option<&str>,
) -> anyhow::Result<Figures> {
    let first = targets[0];
    let show = format!(
        "live{}{}",
        targets.len(),
        if elsewhere.is_some() { "x" } else { "" }
    );
    create_show(first, &show).await?;
    // Another database of the server with a transaction open throughout
    // (issue #49): transaction ids are the server's, and the live feed must
    // not wait for that one to end.
    let foreign = match elsewhere {
        Some(url) => Some(open_transaction(url).await?),
        None => None,
    };
    let before_kb = rss_kb();
    let connected = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let events = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for i in 0..SUBSCRIBERS {
        let target = targets[i % targets.len()].clone();
        readers.push(tokio::spawn(subscribe(
            target,
            show.clone(),
            connected.clone(),
            stop.clone(),
            events.clone(),
        )));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while connected.load(Ordering::SeqCst) < SUBSCRIBERS {
        anyhow::ensure!(Instant::now() < deadline, "subscribers did not all connect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let per_subscriber_kb = rss_kb().saturating_sub(before_kb) as f64 / SUBSCRIBERS as f64;

    // Writers: distinct seats, each hold's 201 instant noted.
    let next = Arc::new(AtomicUsize::new(0));
    let answered: Arc<Mutex<HashMap<usize, Instant>>> = Arc::default();
    let started = Instant::now();
    let mut holders = Vec::new();
    for w in 0..writers {
        let target = first.clone();
        let (next, answered, show) = (next.clone(), answered.clone(), show.clone());
        holders.push(tokio::spawn(async move {
            let token = target.token(&format!("live-writer-{w}"), Role::Buyer);
            let mut statuses = Vec::new();
            while started.elapsed() < duration {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= SEATS {
                    break;
                }
                let sent = Instant::now();
                let response = target
                    .client
                    .post(format!("{}/v1/shows/{show}/holds", target.base))
                    .bearer_auth(&token)
                    .json(&json!({"seats": [seat_name(n)]}))
                    .send()
                    .await;
                let status = response.map(|r| r.status().as_u16()).unwrap_or(0);
                if status == 201 {
                    if let Ok(mut answered) = answered.lock() {
                        answered.insert(n, Instant::now());
                    }
                }
                statuses.push((status, sent.elapsed()));
            }
            statuses
        }));
    }
    let mut holds = Vec::new();
    for holder in holders {
        holds.extend(holder.await?);
    }
    let wall = started.elapsed();
    // Let the last changes arrive, then stop the readers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    if let Some(mut foreign) = foreign {
        sqlx::query("ROLLBACK").execute(&mut foreign).await?;
    }
    let answered = answered.lock().map(|a| a.clone()).unwrap_or_default();
    let mut latencies = Vec::new();
    let mut missing = 0usize;
    // The lags by the second of the run the hold was answered in, and those
    // of the first seconds apart from the rest: a backlog at the start (as
    // when the live feed, idle until this scenario, read the whole log since
    // the service's start before the first change came through) shows in
    // the first seconds and is not the steady state. All are reported.
    let mut by_second: Vec<Vec<Duration>> = Vec::new();
    for reader in readers {
        let seen: HashMap<usize, Instant> = reader.await??.into_iter().collect();
        for (seat, at) in &answered {
            match seen.get(seat) {
                Some(received) => {
                    let lag = received.saturating_duration_since(*at);
                    let second = at.saturating_duration_since(started).as_secs() as usize;
                    if by_second.len() <= second {
                        by_second.resize_with(second + 1, Vec::new);
                    }
                    by_second[second].push(lag);
                    latencies.push((200u16, lag))
                }
                None => missing += 1,
            }
        }
    }
    let ramp_seconds = (RAMP.as_secs() as usize).min(by_second.len());
    let mut ramp: Vec<Duration> = by_second[..ramp_seconds].concat();
    let mut steady: Vec<Duration> = by_second[ramp_seconds..].concat();
    let p99_by_second: Vec<String> = by_second
        .iter_mut()
        .map(|lags| percentile_ms(lags, 99.0))
        .collect();
    let delivered = events.load(Ordering::SeqCst);
    let mut figures = Figures::from_latencies(
        &format!(
            "live: {SUBSCRIBERS} subscribers{} of a {SEATS}-seat show, {writers} writers{}",
            if targets.len() > 1 {
                format!(" over {} instances", targets.len())
            } else {
                String::new()
            },
            if elsewhere.is_some() {
                ", another database's transaction open"
            } else {
                ""
            }
        ),
        first.store,
        &latencies,
        wall,
    );
    let placed = holds.iter().filter(|(s, _)| *s == 201).count();
    figures.requests = latencies.len() + missing;
    figures.ok = latencies.len();
    figures.failed = missing;
    figures.refused = 0;
    figures.per_second = delivered as f64 / wall.as_secs_f64();
    figures.note = format!(
        "p50/p99 = hold 201 -> its change at each subscriber; per second = change events delivered (all subscribers); \
         {placed} holds placed ({:.0}/s); {missing} (subscriber, hold) pairs never seen; \
         memory {per_subscriber_kb:.1} kB per subscriber (client and server sides, one process); \
         p50/p99 of holds answered in the first {} s: {} / {} ms, after: {} / {} ms; \
         p99 ms by second of the run: {}",
        placed as f64 / wall.as_secs_f64(),
        RAMP.as_secs(),
        percentile_ms(&mut ramp, 50.0),
        percentile_ms(&mut ramp, 99.0),
        percentile_ms(&mut steady, 50.0),
        percentile_ms(&mut steady, 99.0),
        p99_by_second.join(", "),
    );
    Ok(figures)
}

/// A transaction holding a transaction id, open in the database `url`
/// names until the connection is told to roll back.
async fn open_transaction(url: &str) -> anyhow::Result<sqlx::PgConnection> {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url).await?;
    sqlx::query("BEGIN").execute(&mut connection).await?;
    let _: String = sqlx::query_scalar("SELECT pg_current_xact_id()::text")
        .fetch_one(&mut connection)
        .await?;
    Ok(connection)
}

/// The first seconds of the writers, reported apart (see `subscribers`).
const RAMP: Duration = Duration::from_secs(2);

/// The `p`th percentile of `lags` in milliseconds ("—" if there are none).
fn percentile_ms(lags: &mut [Duration], p: f64) -> String {
    if lags.is_empty() {
        return "—".into();
    }
    lags.sort_unstable();
    format!("{:.1}", crate::report::percentile(lags, p))
}
