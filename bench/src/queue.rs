//! The waiting room under load (`--only queue`, issue #22), on one instance,
//! each measurement on shows of its own:
//!
//! - **streams**: 10,000 buyers joined, each with `GET .../queue/me/stream`
//!   open, the sale starting a few seconds later at 600,000 admissions a
//!   minute (all of them within a second): the service's memory per open
//!   stream, and how late each buyer hears of its admission (the arrival of
//!   its `admitted` event minus the instant the schedule admitted it).
//! - **admission check**: holds per second on two shows alike but for a
//!   waiting room whose every buyer is admitted, in alternating halves.
//! - **joins**: `--queue-joins` distinct buyers join a show whose sale has
//!   not started (every one an early joiner): joins per second, latency,
//!   and bytes on disk per entry.
//! - **queue/me**: the standing of random buyers among those, read before
//!   the start and after it; the first read after the start, which draws
//!   the seed and ranks every early joiner, is reported apart.
//!
//! The service runs on the system clock, and a show's `sale_starts_at` is
//! fixed when the show is created, before anyone joins. So a start is
//! planned: a join rate is measured first on a show of its own
//! (`calibrate`), and a show's start is put far enough ahead for its work
//! to be done at half that rate (the log and the queue grow as the joins
//! go on), plus a margin. Joins that have not finished when the start is a
//! second away stop there, so every join measured is an early joiner; the
//! note says how many joined. The time the joins leave before the start is
//! spent reading `queue/me` before it; then the bench waits for the start.
//!
//! The stream clients run in a child process of this binary
//! (`--queue-stream-client`, `stream_client`): raw HTTP/1.1 over tokio's
//! `TcpStream`, a few hundred bytes each. The memory figures are then the
//! service's alone, as the process the service runs in does nothing else
//! meanwhile: the heap bytes it allocated and did not free while the
//! streams opened (counted by the bench's allocator, `heap`), and the
//! growth of its resident set, which is smaller when the allocator reuses
//! memory an earlier measurement freed (on the second store of a run,
//! nearly all of it). Each process keeps within its own descriptor limit
//! (10,000 sockets on each side).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use booking::auth::Role;
use booking::store::Store;
use chrono::{DateTime, SecondsFormat, Utc};
use domain::waiting_room::{
    MAX_ADMISSION_TTL_SECONDS, MAX_ADMIT_PER_MINUTE, MIN_ADMISSION_TTL_SECONDS,
};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sqlx::Connection;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use crate::report::Figures;
use crate::scenarios::{self, BIG_SHOW_SEATS};
use crate::wal::WalMark;
use crate::Target;

/// Buyers with a queue stream open at once on the one instance.
pub const STREAM_SUBSCRIBERS: usize = 10_000;

/// The streams' show admits 10 buyers a millisecond: every subscriber
/// within a second of the start, so each stream must be woken on time in a
/// burst of 10,000.
const STREAM_ADMIT_PER_MINUTE: u32 = 600_000;

/// The shortest admission there is: a stream still open when its client
/// left ends (`expired`) at the latest a minute after the burst, and the
/// next measurement waits for that (`STREAMS_GONE_WAIT`).
const STREAM_ADMISSION_TTL_SECONDS: u32 = MIN_ADMISSION_TTL_SECONDS;

/// How long after the last scheduled admission the clients still listen
/// for it (an admission heard later counts as never heard).
const DELIVERY_GRACE: Duration = Duration::from_secs(15);

/// How long, at most, the service may take to end the streams whose
/// clients left: a stream ends at its next write (its buyer's admission
/// expiring, at the latest), and 10,000 of them still waking would weigh
/// on the next measurement.
const STREAMS_GONE_WAIT: Duration = Duration::from_secs(STREAM_ADMISSION_TTL_SECONDS as u64 + 15);

/// Seats of the shows whose queues are measured: a few, never held (the
/// room keeper reads their availability every second; a room with nothing
/// available would pause).
const ROOM_SHOW_SEATS: usize = 10;

/// The joins' show, after its start: 10,000 admissions a minute, so that a
/// read finds most buyers waiting, with an `ahead` and an estimate to
/// compute; an admission of ten minutes.
const JOINS_ADMIT_PER_MINUTE: u32 = 10_000;
const JOINS_ADMISSION_TTL_SECONDS: u32 = 600;

/// The admission check's show: its sale started a minute ago, admitting
/// as fast as allowed, for as long as allowed. The schedule is then a
/// million admissions ahead of its queue, so a buyer who joins is
/// admitted within a millisecond, and stays so for an hour.
const HOLDS_ADMIT_PER_MINUTE: u32 = MAX_ADMIT_PER_MINUTE;
const HOLDS_ADMISSION_TTL_SECONDS: u32 = MAX_ADMISSION_TTL_SECONDS;
const HOLDS_SALE_STARTED_SECONDS_AGO: i64 = 60;

/// The admission check's buyers: worker `w` holds as `qh{w}` on both shows.
const HOLD_BUYERS: &str = "qh";

/// Holds placed on each of the admission check's shows before it is
/// measured, for this long: the first holds on a show load its caches,
/// which the first half measured would otherwise pay alone.
const HOLDS_WARM_UP: Duration = Duration::from_secs(1);

/// The calibration's joins: a warm-up whose rate is not counted (the
/// first connections, cold caches), then the joins counted, each for this
/// long or this many buyers.
const CALIBRATION_WARM_UP: Duration = Duration::from_secs(1);
const CALIBRATION: Duration = Duration::from_secs(3);
const CALIBRATION_BUYERS: usize = 30_000;

/// A planned start leaves its work this many times the time the calibrated
/// rate gives it: joins slow down as the log and the queue grow, and a join
/// after the start is no longer an early joiner.
const START_SAFETY: f64 = 2.0;

/// Added to every planned start (creating the show, the first connections).
const START_MARGIN: Duration = Duration::from_secs(5);

/// Joins and reads meant to come before a start stop this long before it:
/// a request sent then is answered before the start.
const STOP_BEFORE_START: Duration = Duration::from_secs(1);

/// Where the service's database lives, to weigh it.
pub enum Disk {
    /// The bench database's URL.
    Postgres(String),
    /// The SQLite file (its `-wal` beside it).
    Sqlite(PathBuf),
}

/// Every measurement of the waiting room, in the order run: the streams
/// first, as the process's memory is measured there, and its resident set
/// says more the less the process has freed before.
pub async fn run(
    target: &Target,
    store: &Store,
    disk: &Disk,
    concurrency: usize,
    duration: Duration,
    joins: usize,
) -> anyhow::Result<Vec<Figures>> {
    let rate = calibrate(target, concurrency).await?;
    let mut results = Vec::new();
    let (opened, delivered) = streams(target, concurrency, rate).await?;
    results.push(opened);
    results.push(delivered);
    let (without, with) = admission_holds(target, store, concurrency, duration).await?;
    results.push(without);
    results.push(with);
    results.extend(joins_and_reads(target, store, disk, concurrency, duration, joins, rate).await?);
    Ok(results)
}

/// `n` with a comma every three digits, for scenario names.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut groups = Vec::new();
    let mut end = digits.len();
    while end > 3 {
        groups.push(&digits[end - 3..end]);
        end -= 3;
    }
    groups.push(&digits[..end]);
    groups.reverse();
    groups.join(",")
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Time from now until `at` (zero once it has passed).
fn until(at: DateTime<Utc>) -> Duration {
    (at - Utc::now()).to_std().unwrap_or_default()
}

/// A sale start for `work` requests at `rate` a second (with the safety
/// factor), then `then`, plus the margin.
fn plan_start(work: usize, rate: f64, then: Duration) -> DateTime<Utc> {
    let work = Duration::from_secs_f64(START_SAFETY * work as f64 / rate.max(1.0));
    let lead = work + then + START_MARGIN;
    Utc::now() + chrono::Duration::from_std(lead).unwrap_or(chrono::Duration::hours(1))
}

/// A show of `seats` seats selling through a waiting room.
async fn room_show(
    target: &Target,
    show: &str,
    seats: usize,
    sale_starts_at: DateTime<Utc>,
    admit_per_minute: u32,
    admission_ttl_seconds: u32,
) -> anyhow::Result<()> {
    let mut body = scenarios::seat_show_body(show, seats);
    body["waiting_room"] = json!({
        "sale_starts_at": rfc3339(sale_starts_at),
        "admit_per_minute": admit_per_minute,
        "admission_ttl_seconds": admission_ttl_seconds,
    });
    scenarios::put_show(target, show, body).await
}

/// Tokens of buyers `{prefix}0` to `{prefix}{count - 1}`, signed on a
/// blocking thread before any of them is sent (signing is the client's
/// cost, not the service's), and the time that took.
async fn sign(
    target: &Target,
    prefix: &str,
    count: usize,
) -> anyhow::Result<(Arc<Vec<String>>, Duration)> {
    let (target, prefix) = (target.clone(), prefix.to_owned());
    let started = Instant::now();
    let tokens = tokio::task::spawn_blocking(move || {
        (0..count)
            .map(|i| target.token(&format!("{prefix}{i}"), Role::Buyer))
            .collect::<Vec<_>>()
    })
    .await?;
    Ok((Arc::new(tokens), started.elapsed()))
}

/// Sends `request` and reads the whole answer: the status (0: no answer)
/// and the time to its last byte.
async fn send(request: reqwest::RequestBuilder) -> (u16, Duration) {
    let started = Instant::now();
    let status = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(_) => status,
                Err(_) => 0,
            }
        }
        Err(_) => 0,
    };
    (status, started.elapsed())
}

/// Answers 201: joins that created an entry.
fn created(answers: &[(u16, Duration)]) -> usize {
    answers.iter().filter(|(s, _)| *s == 201).count()
}

/// Joins the buyers of `tokens` to `show` in order, each once, at
/// `concurrency` connections, until all have or `duration` has passed.
/// Every answer is of a buyer sent a join: the first `answers.len()` tokens.
async fn join_all(
    target: &Arc<Target>,
    show: &str,
    tokens: &Arc<Vec<String>>,
    concurrency: usize,
    duration: Duration,
) -> (Duration, Vec<(u16, Duration)>) {
    let next = Arc::new(AtomicUsize::new(0));
    let url = format!("{}/v1/shows/{show}/queue", target.base);
    scenarios::for_duration(concurrency, duration, {
        let (target, tokens) = (target.clone(), tokens.clone());
        move |_| {
            let (target, tokens, next, url) =
                (target.clone(), tokens.clone(), next.clone(), url.clone());
            async move {
                let token = tokens.get(next.fetch_add(1, Ordering::Relaxed))?;
                let request = target
                    .client
                    .post(&url)
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body("{}");
                Some(send(request).await)
            }
        }
    })
    .await
}

/// `queue/me` of buyers drawn at random among the first `sent` of
/// `tokens`, at `concurrency` connections for `duration`.
async fn reads(
    target: &Arc<Target>,
    show: &str,
    tokens: &Arc<Vec<String>>,
    sent: usize,
    concurrency: usize,
    duration: Duration,
) -> (Duration, Vec<(u16, Duration)>) {
    let url = format!("{}/v1/shows/{show}/queue/me", target.base);
    scenarios::for_duration(concurrency, duration, {
        let (target, tokens) = (target.clone(), tokens.clone());
        move |_| {
            let (target, tokens, url) = (target.clone(), tokens.clone(), url.clone());
            async move {
                let buyer = rand::thread_rng().gen_range(0..sent.max(1));
                let token = tokens.get(buyer)?;
                Some(send(target.client.get(&url).bearer_auth(token)).await)
            }
        }
    })
    .await
}

/// Joins per second on a show of its own whose sale is a year away, at
/// `concurrency` connections, after a warm-up: what the planned starts are
/// computed from.
async fn calibrate(target: &Target, concurrency: usize) -> anyhow::Result<f64> {
    let show = "queuecalibration";
    let far = Utc::now() + chrono::Duration::days(365);
    room_show(
        target,
        show,
        ROOM_SHOW_SEATS,
        far,
        JOINS_ADMIT_PER_MINUTE,
        JOINS_ADMISSION_TTL_SECONDS,
    )
    .await?;
    let (warm_up, _) = sign(target, "qw", CALIBRATION_BUYERS).await?;
    let (tokens, _) = sign(target, "qc", CALIBRATION_BUYERS).await?;
    let target = Arc::new(target.clone());
    join_all(&target, show, &warm_up, concurrency, CALIBRATION_WARM_UP).await;
    let (wall, answers) = join_all(&target, show, &tokens, concurrency, CALIBRATION).await;
    let joined = created(&answers);
    anyhow::ensure!(
        joined > 0,
        "calibration: no join answered 201 in {} answers",
        answers.len()
    );
    Ok(joined as f64 / wall.as_secs_f64())
}

/// Holds per second on two shows of `BIG_SHOW_SEATS` seats alike but for a
/// waiting room (its sale started, every buyer joined beforehand and
/// admitted), at `concurrency` connections: the distinct-seat holds of
/// `scenarios::holds`, one buyer a worker. Each side runs `duration` in
/// all, as two halves in the order none, room, room, none (a drift over the
/// run weighs on both alike), after a warm-up on each, the projector
/// drained between halves.
pub async fn admission_holds(
    target: &Target,
    store: &Store,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Figures, Figures)> {
    struct Arm {
        show: &'static str,
        next: Arc<AtomicUsize>,
        wall: Duration,
        answers: Vec<(u16, Duration)>,
    }
    let mut arms = ["queueholdsnone", "queueholdsroom"].map(|show| Arm {
        show,
        next: Arc::new(AtomicUsize::new(0)),
        wall: Duration::ZERO,
        answers: Vec::new(),
    });
    let (plain, room) = (arms[0].show, arms[1].show);
    scenarios::put_show(
        target,
        plain,
        scenarios::seat_show_body(plain, BIG_SHOW_SEATS),
    )
    .await?;
    let started = Utc::now() - chrono::Duration::seconds(HOLDS_SALE_STARTED_SECONDS_AGO);
    room_show(
        target,
        room,
        BIG_SHOW_SEATS,
        started,
        HOLDS_ADMIT_PER_MINUTE,
        HOLDS_ADMISSION_TTL_SECONDS,
    )
    .await?;
    let target = Arc::new(target.clone());
    // Each worker's buyer joins the room; once all have, each is asked
    // where it stands.
    let tokens: Vec<String> = (0..concurrency)
        .map(|worker| target.token(&format!("{HOLD_BUYERS}{worker}"), Role::Buyer))
        .collect();
    for (worker, token) in tokens.iter().enumerate() {
        let join = target
            .client
            .post(format!("{}/v1/shows/{room}/queue", target.base))
            .bearer_auth(token)
            .header("content-type", "application/json")
            .body("{}");
        let (status, _) = send(join).await;
        anyhow::ensure!(status == 201, "join {room} as worker {worker}: {status}");
    }
    for arm in &arms {
        scenarios::hold_seats(
            &target,
            arm.show,
            HOLD_BUYERS,
            arm.next.clone(),
            concurrency,
            HOLDS_WARM_UP,
            1,
        )
        .await;
    }
    scenarios::drain_projector(store).await?;
    let mut admitted = 0;
    for token in &tokens {
        let me = target
            .client
            .get(format!("{}/v1/shows/{room}/queue/me", target.base))
            .bearer_auth(token)
            .send()
            .await?
            .json::<Value>()
            .await?;
        admitted += usize::from(me["status"] == "admitted");
    }
    let half = duration / 2;
    for with_room in [false, true, true, false] {
        let arm = &mut arms[usize::from(with_room)];
        let (wall, answers) = scenarios::hold_seats(
            &target,
            arm.show,
            HOLD_BUYERS,
            arm.next.clone(),
            concurrency,
            half,
            1,
        )
        .await;
        arm.wall += wall;
        arm.answers.extend(answers);
        scenarios::drain_projector(store).await?;
    }
    let [none, with_room] = &arms;
    let halves = "halves run none, room, room, none";
    let mut without = Figures::from_latencies(
        "holds (distinct seats, no waiting room)",
        target.store,
        &none.answers,
        none.wall,
    );
    without.note = format!("{concurrency} buyers, one a connection; {halves}");
    let mut with = Figures::from_latencies(
        "holds (distinct seats, waiting room, every buyer admitted)",
        target.store,
        &with_room.answers,
        with_room.wall,
    );
    let ratio = with.per_second / without.per_second.max(f64::MIN_POSITIVE);
    with.note = format!(
        "{concurrency} buyers, one a connection, joined beforehand ({admitted} admitted when the \
         holds began; a refused hold is a 4xx here); {halves}; {ratio:.2}× the holds/s without the \
         room (the admission check's cost: {:.0}%)",
        100.0 * (1.0 - ratio)
    );
    Ok((without, with))
}

/// The database's size on disk: by table on PostgreSQL (every table,
/// indexes and TOAST included); on SQLite the file and its WAL, after a
/// checkpoint that moves the WAL's pages into the file and empties it
/// (without it the WAL's size is a high-water mark, not what it holds).
async fn weigh(disk: &Disk, store: &Store) -> anyhow::Result<HashMap<String, i64>> {
    match disk {
        Disk::Postgres(url) => {
            let mut conn = sqlx::PgConnection::connect(url).await?;
            let sizes: Vec<(String, i64)> = sqlx::query_as(
                "SELECT c.relname::text, pg_total_relation_size(c.oid) \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE c.relkind IN ('r', 'p', 'm') \
                   AND n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'",
            )
            .fetch_all(&mut conn)
            .await?;
            conn.close().await?;
            Ok(sizes.into_iter().collect())
        }
        Disk::Sqlite(path) => {
            store
                .database()
                .execute_raw("PRAGMA wal_checkpoint(TRUNCATE)")
                .await?;
            let size = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len() as i64);
            let wal = PathBuf::from(format!("{}-wal", path.display()));
            Ok(HashMap::from([
                ("file".to_owned(), size(path)),
                ("wal".to_owned(), size(&wal)),
            ]))
        }
    }
}

/// What `count` entries added between two weighings, per entry: the total,
/// and on PostgreSQL each table that grew.
fn bytes_per_entry(
    disk: &Disk,
    before: &HashMap<String, i64>,
    after: &HashMap<String, i64>,
    count: usize,
) -> String {
    let per = |bytes: i64| bytes as f64 / count.max(1) as f64;
    let mut grown: Vec<(&String, i64)> = after
        .iter()
        .map(|(name, size)| (name, size - before.get(name).copied().unwrap_or(0)))
        .filter(|(_, grew)| *grew != 0)
        .collect();
    grown.sort_by_key(|(_, grew)| std::cmp::Reverse(*grew));
    let total: i64 = grown.iter().map(|(_, grew)| grew).sum();
    match disk {
        Disk::Postgres(_) => {
            let tables: Vec<String> = grown
                .iter()
                .map(|(name, grew)| format!("{name} {:.0}", per(*grew)))
                .collect();
            format!(
                "on disk {:.0} bytes per entry (pg_total_relation_size growth over the joins: {})",
                per(total),
                tables.join(", ")
            )
        }
        Disk::Sqlite(_) => format!(
            "on disk {:.0} bytes per entry (growth of the file and its -wal, each weighed after a \
             TRUNCATE checkpoint)",
            per(total)
        ),
    }
}

/// The joins, then `queue/me` before the start, the first read after it,
/// and reads after it, on one show of `count` early joiners.
async fn joins_and_reads(
    target: &Target,
    store: &Store,
    disk: &Disk,
    concurrency: usize,
    duration: Duration,
    count: usize,
    rate: f64,
) -> anyhow::Result<Vec<Figures>> {
    let show = "queuejoins";
    let (tokens, signing) = sign(target, "qj", count).await?;
    // The joins at the calibrated rate, then a run of reads before the start.
    let starts = plan_start(count, rate, duration);
    room_show(
        target,
        show,
        ROOM_SHOW_SEATS,
        starts,
        JOINS_ADMIT_PER_MINUTE,
        JOINS_ADMISSION_TTL_SECONDS,
    )
    .await?;
    let target = Arc::new(target.clone());
    let weighed = weigh(disk, store).await?;
    let wal = match disk {
        Disk::Postgres(url) => Some((WalMark::now(url).await?, url)),
        Disk::Sqlite(_) => None,
    };
    let (wall, answers) = join_all(
        &target,
        show,
        &tokens,
        concurrency,
        until(starts).saturating_sub(STOP_BEFORE_START),
    )
    .await;
    let (sent, entries) = (answers.len(), created(&answers));
    let count_name = thousands(count);
    let mut joins = Figures::from_latencies(
        &format!("waiting room: {count_name} joins (a buyer each, before the sale starts)"),
        target.store,
        &answers,
        wall,
    );
    let disk_note = bytes_per_entry(disk, &weighed, &weigh(disk, store).await?, entries);
    let left = until(starts);
    joins.note = format!(
        "{entries} of {count} buyers joined ({sent} sent) before the start, planned from a \
         calibrated {rate:.0} joins/s; {concurrency} connections; tokens signed beforehand in \
         {} ms, not counted; {disk_note}",
        signing.as_millis()
    );
    if let Some((wal, url)) = wal {
        wal.annotate(url, &mut joins).await?;
    }
    let mut results = vec![joins];

    // Before the start: every position provisional, in join order.
    let before = left.saturating_sub(STOP_BEFORE_START).min(duration);
    if before.is_zero() {
        results[0]
            .note
            .push_str("; no time left before the start to read queue/me");
    } else {
        let (wall, answers) = reads(&target, show, &tokens, sent, concurrency, before).await;
        let mut figures = Figures::from_latencies(
            &format!("waiting room: queue/me before the start, {count_name} in the queue"),
            target.store,
            &answers,
            wall,
        );
        figures.note = format!(
            "random buyers among the {sent} sent a join, {concurrency} connections; \
             per second = reads/s"
        );
        results.push(figures);
    }

    // The first read after the start draws the seed (unless the room
    // keeper, once a second, came first) and ranks every early joiner by
    // key: one sort, under the show's queue lock, that every read waits for.
    tokio::time::sleep(until(starts)).await;
    let late_ms = (Utc::now() - starts).num_milliseconds();
    let buyer = rand::thread_rng().gen_range(0..sent.max(1));
    let started = Instant::now();
    let first = target
        .client
        .get(format!("{}/v1/shows/{show}/queue/me", target.base))
        .bearer_auth(tokens.get(buyer).context("a buyer to read")?)
        .send()
        .await;
    let (status, body) = match first {
        Ok(response) => (response.status().as_u16(), response.bytes().await.ok()),
        Err(_) => (0, None),
    };
    let latency = started.elapsed();
    let body: Value = body
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let mut figures = Figures::from_latencies(
        &format!("waiting room: first queue/me after the start (ranks {count_name})"),
        target.store,
        &[(status, latency)],
        latency,
    );
    figures.note = format!(
        "one read, sent {late_ms} ms after the start: drawing the seed and ranking the {entries} \
         early joiners (whoever asked first, this read or the room keeper); it answered {} \
         (position {}, estimated wait {} s)",
        body["status"], body["position"], body["estimated_wait_seconds"]
    );
    results.push(figures);

    let (wall, answers) = reads(&target, show, &tokens, sent, concurrency, duration).await;
    let mut figures = Figures::from_latencies(
        &format!("waiting room: queue/me after the start, {count_name} in the queue"),
        target.store,
        &answers,
        wall,
    );
    figures.note = format!(
        "random buyers among the {sent} sent a join, {concurrency} connections, {} admitted a \
         minute; per second = reads/s",
        JOINS_ADMIT_PER_MINUTE
    );
    results.push(figures);
    Ok(results)
}

/// What the harness tells the stream client: the first line of its stdin,
/// then one token a line.
#[derive(Debug, Serialize, Deserialize)]
struct ClientOrders {
    /// `host:port` of the service.
    addr: String,
    /// The stream's path.
    path: String,
    admission_ttl_seconds: i64,
    /// Streams being opened at once (connect to first event).
    open_concurrency: usize,
    /// When to stop listening for admissions.
    listen_until: DateTime<Utc>,
}

/// What the stream client tells the harness: a JSON line each on stdout.
#[derive(Debug, Serialize, Deserialize)]
enum ClientReport {
    /// Every stream has sent its first event, or failed to open.
    Opened {
        /// Connect to first `queue` event, of each stream opened.
        open_us: Vec<u64>,
        /// From the first connect to the last first event.
        wall_us: u64,
        failed: usize,
        /// Why the first that failed did.
        failure: Option<String>,
        /// Streams whose first event already said `admitted` (opened after
        /// their admission: no delivery to time).
        admitted_at_once: usize,
        /// CPU the client's process has used so far.
        cpu_ms: u64,
    },
    /// Every admission heard, or the time to listen is over.
    Delivered {
        /// (the instant the schedule admitted the buyer, in µs since the
        /// epoch; its `admitted` event's arrival after it, in µs), of
        /// each admission heard.
        heard: Vec<(i64, i64)>,
        /// Streams that never said `admitted` (ended, or too late).
        unheard: usize,
        /// CPU the client's process has used in all.
        cpu_ms: u64,
    },
}

/// Opened streams, then how their admissions arrived: 10,000 buyers
/// joined to a show whose sale starts once all their streams are open (the
/// start planned for the joins and the opens at the calibrated rate).
/// Returns the figures of the opening (and the memory) and of the delivery.
pub async fn streams(
    target: &Target,
    concurrency: usize,
    rate: f64,
) -> anyhow::Result<(Figures, Figures)> {
    let show = "queuestreams";
    let subscribers = STREAM_SUBSCRIBERS;
    let starts = plan_start(2 * subscribers, rate, Duration::ZERO);
    room_show(
        target,
        show,
        ROOM_SHOW_SEATS,
        starts,
        STREAM_ADMIT_PER_MINUTE,
        STREAM_ADMISSION_TTL_SECONDS,
    )
    .await?;
    let (tokens, _) = sign(target, "qs", subscribers).await?;
    let target = Arc::new(target.clone());
    let (join_wall, joins) = join_all(&target, show, &tokens, concurrency, until(starts)).await;
    let joined = created(&joins);

    // The last admission of the burst: the schedule's `subscribers`th, at
    // STREAM_ADMIT_PER_MINUTE from the start.
    let burst_ms = (subscribers as u64 * 60_000).div_ceil(u64::from(STREAM_ADMIT_PER_MINUTE));
    let orders = ClientOrders {
        addr: target.base.trim_start_matches("http://").to_owned(),
        path: format!("/v1/shows/{show}/queue/me/stream"),
        admission_ttl_seconds: i64::from(STREAM_ADMISSION_TTL_SECONDS),
        open_concurrency: concurrency,
        listen_until: starts
            + chrono::Duration::milliseconds(i64::try_from(burst_ms)?)
            + chrono::Duration::from_std(DELIVERY_GRACE)?,
    };
    let mut input = serde_json::to_string(&orders)?;
    input.push('\n');
    for token in tokens.iter() {
        input.push_str(token);
        input.push('\n');
    }

    // The service's memory before any stream, as the resident set and as
    // the heap's live bytes from here on; the tokens stay alive until it is
    // measured again (freed, their memory would be reused by the streams
    // and hide part of them from the resident set).
    let before_kb = crate::live::rss_kb();
    let heap = crate::heap::Window::open();
    let mut client = tokio::process::Command::new(std::env::current_exe()?)
        .arg("--queue-stream-client")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("start the stream client")?;
    let mut stdin = client.stdin.take().context("the stream client's stdin")?;
    stdin.write_all(input.as_bytes()).await?;
    drop(stdin);
    let stdout = client.stdout.take().context("the stream client's stdout")?;
    let mut reports = BufReader::new(stdout).lines();
    let ClientReport::Opened {
        open_us,
        wall_us,
        failed,
        failure,
        admitted_at_once,
        cpu_ms: open_cpu_ms,
    } = next_report(&mut reports).await?
    else {
        anyhow::bail!("the stream client reported out of order");
    };
    let after_kb = crate::live::rss_kb();
    let heap_bytes = heap.live_bytes();
    drop(heap);
    let ready_before_start_ms = (starts - Utc::now()).num_milliseconds();
    drop(tokens);
    let ClientReport::Delivered {
        heard,
        unheard,
        cpu_ms: all_cpu_ms,
    } = next_report(&mut reports).await?
    else {
        anyhow::bail!("the stream client reported out of order");
    };
    client.wait().await?;
    let gone = streams_gone(&target, STREAMS_GONE_WAIT).await?;

    let opened = open_us.len();
    let per_stream_kb = after_kb.saturating_sub(before_kb) as f64 / opened.max(1) as f64;
    let heap_per_stream_kb = heap_bytes as f64 / 1024.0 / opened.max(1) as f64;
    let open_answers: Vec<(u16, Duration)> = open_us
        .iter()
        .map(|us| (200, Duration::from_micros(*us)))
        .collect();
    let mut open = Figures::from_latencies(
        &format!(
            "waiting room: {} queue streams opened on one instance",
            thousands(subscribers)
        ),
        target.store,
        &open_answers,
        Duration::from_micros(wall_us),
    );
    open.requests = opened + failed;
    open.failed = failed;
    open.note = format!(
        "p50/p99 = connect to the first queue event, {concurrency} opening at once; per second = \
         streams opened/s; service memory per open stream: {heap_per_stream_kb:.1} kB of heap \
         (allocated less freed from the first open until every stream had its first event, \
         counted by the bench's allocator), {per_stream_kb:.1} kB of resident set (VmRSS \
         {before_kb} -> {after_kb} kB; less than the heap when the allocator reuses memory an \
         earlier measurement freed); the process is the service's (the clients run in a child \
         process, which used {:.1} CPU-s to open them); {joined} buyers joined first ({:.0} joins/s); all open {:.1} s before the start; {}",
        open_cpu_ms as f64 / 1000.0,
        joined as f64 / join_wall.as_secs_f64(),
        ready_before_start_ms as f64 / 1000.0,
        failure.map_or("no stream failed".to_owned(), |f| format!("first failure: {f}"))
    );

    let lags: Vec<(u16, Duration)> = heard
        .iter()
        .map(|(_, lag)| (200, Duration::from_micros(u64::try_from(*lag).unwrap_or(0))))
        .collect();
    let early = heard.iter().filter(|(_, lag)| *lag < 0).count();
    let max_ms = heard.iter().map(|(_, lag)| *lag).max().unwrap_or(0) as f64 / 1000.0;
    let start_us = starts.timestamp_micros();
    let last_us = heard
        .iter()
        .map(|(at, lag)| at + lag)
        .max()
        .unwrap_or(start_us);
    let mut delivered = Figures::from_latencies(
        &format!(
            "waiting room: admission told to {} queue streams",
            thousands(subscribers)
        ),
        target.store,
        &lags,
        Duration::from_micros(u64::try_from(last_us - start_us).unwrap_or(0).max(1)),
    );
    delivered.requests = heard.len() + unheard;
    delivered.failed = unheard;
    delivered.note = format!(
        "p50/p99 = arrival of the buyer's admitted event minus the instant the schedule admitted \
         it (admitted_until - admission_ttl_seconds), max {max_ms:.1} ms; {STREAM_ADMIT_PER_MINUTE} \
         a minute: the schedule admits all within {burst_ms} ms of the start; per second = \
         admissions told/s, from the start to the last; {unheard} never told within {} s of the \
         last admission; {admitted_at_once} already admitted when opened, not counted; {early} \
         arrived before their instant (counted 0); the clients' process used {:.1} CPU-s from \
         the opens to the end, on the cores the service runs on; {gone}",
        DELIVERY_GRACE.as_secs(),
        all_cpu_ms.saturating_sub(open_cpu_ms) as f64 / 1000.0,
    );
    Ok((open, delivered))
}

/// The stream client's next report.
async fn next_report(
    reports: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) -> anyhow::Result<ClientReport> {
    let line = reports
        .next_line()
        .await?
        .context("the stream client ended without a report")?;
    Ok(serde_json::from_str(&line)?)
}

/// Waits, at most `limit`, until the service reports no queue stream open
/// (`waiting_room_streams_open` in its metrics), and says how that went.
async fn streams_gone(target: &Target, limit: Duration) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        let metrics = target
            .client
            .get(format!("{}/metrics", target.base))
            .send()
            .await?
            .text()
            .await?;
        let open = metrics
            .lines()
            .find_map(|l| l.strip_prefix("waiting_room_streams_open "))
            .and_then(|v| v.trim().parse::<f64>().ok());
        let waited = started.elapsed().as_secs_f64();
        match open {
            None => return Ok("waiting_room_streams_open is not in the service's metrics".into()),
            Some(open) if open <= 0.0 => {
                return Ok(format!(
                    "the service had ended every stream {waited:.1} s after the clients left"
                ))
            }
            Some(open) if started.elapsed() >= limit => {
                return Ok(format!(
                    "{open} streams still open {waited:.0} s after the clients left"
                ))
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The stream client (`bench --queue-stream-client`, started by `streams`):
/// reads its orders and tokens from stdin, opens a stream per token,
/// `open_concurrency` at a time, reports when all have sent their first
/// event, then listens for each buyer's admission and reports that.
pub async fn stream_client() -> anyhow::Result<()> {
    // Read whole before anything runs: blocking is harmless here.
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let mut lines = input.lines();
    let orders: ClientOrders = serde_json::from_str(lines.next().context("no orders on stdin")?)?;
    let tokens: Vec<String> = lines.filter(|l| !l.is_empty()).map(str::to_owned).collect();
    let listen_until = tokio::time::Instant::now() + until(orders.listen_until);
    let orders = Arc::new(orders);
    let gate = Arc::new(Semaphore::new(orders.open_concurrency.max(1)));
    let (opened_tx, mut opened_rx) = mpsc::unbounded_channel();
    let (heard_tx, mut heard_rx) = mpsc::unbounded_channel();
    let started = Instant::now();
    for token in tokens {
        tokio::spawn(subscribe(
            orders.clone(),
            token,
            gate.clone(),
            opened_tx.clone(),
            heard_tx.clone(),
            listen_until,
        ));
    }
    drop((opened_tx, heard_tx));

    let (mut open_us, mut failed, mut failure, mut admitted_at_once) = (Vec::new(), 0, None, 0);
    while let Some(opened) = opened_rx.recv().await {
        match opened {
            Ok((took, admitted)) => {
                open_us.push(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
                admitted_at_once += usize::from(admitted);
            }
            Err(why) => {
                failed += 1;
                failure.get_or_insert(why);
            }
        }
    }
    report(&ClientReport::Opened {
        open_us,
        wall_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        failed,
        failure,
        admitted_at_once,
        cpu_ms: cpu_ms(),
    })?;

    let (mut heard, mut unheard) = (Vec::new(), 0);
    while let Some(admission) = heard_rx.recv().await {
        match admission {
            Some(timed) => heard.push(timed),
            None => unheard += 1,
        }
    }
    report(&ClientReport::Delivered {
        heard,
        unheard,
        cpu_ms: cpu_ms(),
    })
}

/// Clock ticks a second in `/proc/*/stat` (`USER_HZ`: 100 on every Linux
/// the bench runs on).
const USER_HZ: u64 = 100;

/// CPU (user and system) this process has used, in ms (Linux; 0 if
/// unknown): the stream client's share of the cores it shares with the
/// service.
fn cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command's closing parenthesis, from the state
    // (field 3): utime and stime are fields 14 and 15.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) * 1000 / USER_HZ
}

/// One report, a line on stdout, sent at once.
fn report(report: &ClientReport) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", serde_json::to_string(report)?)?;
    stdout.flush()?;
    Ok(())
}

/// How one stream opened: the time to its first event and whether that
/// said `admitted`, or why it failed.
type Opened = Result<(Duration, bool), String>;

/// How one buyer's admission arrived: (the instant the schedule admitted
/// it, the arrival after it), in µs; `None` if it never did.
type Heard = Option<(i64, i64)>;

/// One buyer's stream, from connect to its `admitted` event.
async fn subscribe(
    orders: Arc<ClientOrders>,
    token: String,
    gate: Arc<Semaphore>,
    opened: mpsc::UnboundedSender<Opened>,
    heard: mpsc::UnboundedSender<Heard>,
    until: tokio::time::Instant,
) {
    let Ok(permit) = gate.acquire().await else {
        return;
    };
    let started = Instant::now();
    let open = async {
        let mut stream = QueueStream::open(&orders.addr, &orders.path, &token).await?;
        let (first, _) = stream.next_queue_event().await?;
        anyhow::Ok((stream, first))
    };
    let (mut stream, first) = match tokio::time::timeout_at(until, open).await {
        Ok(Ok(opened_stream)) => opened_stream,
        Ok(Err(why)) => {
            let _ = opened.send(Err(format!("{why:#}")));
            return;
        }
        Err(_) => {
            let _ = opened.send(Err("no first event before the end".into()));
            return;
        }
    };
    drop(permit);
    let admitted_at_once = first["status"] == "admitted";
    let _ = opened.send(Ok((started.elapsed(), admitted_at_once)));
    drop(opened);
    if admitted_at_once {
        return;
    }
    let ttl = chrono::Duration::seconds(orders.admission_ttl_seconds);
    let admission = loop {
        match tokio::time::timeout_at(until, stream.next_queue_event()).await {
            Ok(Ok((view, arrived))) => match view["status"].as_str() {
                Some("admitted") => {
                    break view["admitted_until"]
                        .as_str()
                        .and_then(|u| DateTime::parse_from_rfc3339(u).ok())
                        .map(|u| u.with_timezone(&Utc) - ttl)
                        .and_then(|at| {
                            let lag = (arrived - at).num_microseconds()?;
                            Some((at.timestamp_micros(), lag))
                        });
                }
                Some("waiting") => {}
                _ => break None,
            },
            Ok(Err(_)) | Err(_) => break None,
        }
    };
    let _ = heard.send(admission);
}

/// Initial room for what one stream reads: a head, or an event or two.
const STREAM_READ_BUFFER: usize = 1024;

/// A head longer than this is not the service's.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// One queue stream, read with as little as HTTP/1.1 needs: the head, then
/// chunks (`transfer-encoding: chunked`), then server-sent events.
struct QueueStream {
    socket: TcpStream,
    /// Bytes read and not yet decoded.
    raw: Vec<u8>,
    /// Body decoded and not yet split into events.
    text: Vec<u8>,
    chunked: bool,
    /// Bytes left of the chunk being read.
    chunk_left: usize,
    /// When the last read returned: the arrival of what it completed.
    read_at: DateTime<Utc>,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

impl QueueStream {
    /// Connects, asks for the stream, and reads the head: an error unless
    /// it is a 200.
    async fn open(addr: &str, path: &str, token: &str) -> anyhow::Result<Self> {
        let mut socket = TcpStream::connect(addr).await?;
        socket.set_nodelay(true)?;
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
             Accept: text/event-stream\r\n\r\n"
        );
        socket.write_all(request.as_bytes()).await?;
        let mut stream = Self {
            socket,
            raw: Vec::with_capacity(STREAM_READ_BUFFER),
            text: Vec::new(),
            chunked: false,
            chunk_left: 0,
            read_at: Utc::now(),
        };
        let end = loop {
            if let Some(end) = find(&stream.raw, b"\r\n\r\n") {
                break end;
            }
            anyhow::ensure!(stream.raw.len() < MAX_HEAD_BYTES, "no end to the head");
            stream.fill().await?;
        };
        let head = String::from_utf8_lossy(&stream.raw[..end]).to_ascii_lowercase();
        stream.raw.drain(..end + 4);
        let status = head
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        anyhow::ensure!(status == "200", "answered {status}");
        stream.chunked = head
            .lines()
            .any(|l| l.starts_with("transfer-encoding:") && l.contains("chunked"));
        Ok(stream)
    }

    /// Reads what the socket has.
    async fn fill(&mut self) -> anyhow::Result<()> {
        let read = self.socket.read_buf(&mut self.raw).await?;
        self.read_at = Utc::now();
        anyhow::ensure!(read > 0, "closed by the service");
        Ok(())
    }

    /// Moves what `raw` holds of the body into `text`; `false` at the
    /// body's end.
    fn decode(&mut self) -> anyhow::Result<bool> {
        if !self.chunked {
            self.text.append(&mut self.raw);
            return Ok(true);
        }
        loop {
            if self.chunk_left == 0 {
                // The CRLF that ends the previous chunk's data, then the
                // next chunk's size line.
                if self.raw.starts_with(b"\r\n") {
                    self.raw.drain(..2);
                }
                let Some(line_end) = find(&self.raw, b"\r\n") else {
                    return Ok(true);
                };
                let line = std::str::from_utf8(&self.raw[..line_end])?;
                let size = line.split(';').next().unwrap_or_default().trim();
                let size = usize::from_str_radix(size, 16)
                    .with_context(|| format!("chunk size {size:?}"))?;
                self.raw.drain(..line_end + 2);
                if size == 0 {
                    return Ok(false);
                }
                self.chunk_left = size;
            }
            let take = self.chunk_left.min(self.raw.len());
            if take == 0 {
                return Ok(true);
            }
            self.text.extend(self.raw.drain(..take));
            self.chunk_left -= take;
        }
    }

    /// The data of the next `queue` event, and when its last byte arrived.
    async fn next_queue_event(&mut self) -> anyhow::Result<(Value, DateTime<Utc>)> {
        loop {
            anyhow::ensure!(self.decode()?, "the stream ended");
            while let Some(end) = find(&self.text, b"\n\n") {
                let block: Vec<u8> = self.text.drain(..end + 2).collect();
                let block = std::str::from_utf8(&block)?;
                if !block.lines().any(|l| l == "event: queue") {
                    continue;
                }
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                return Ok((serde_json::from_str(&data)?, self.read_at));
            }
            self.fill().await?;
        }
    }
}
