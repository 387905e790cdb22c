//! Live availability (docs/api.md, "Live availability"): a snapshot, then
//! every change, over real HTTP; expiry pushed at its instant; resumption;
//! a slow reader; other instances on one PostgreSQL.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{seat_entries, seat_id, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_stream_starts_with_a_snapshot_and_then_sends_every_change,
        an_expiry_arrives_at_its_instant_though_no_event_records_it,
        an_extension_moves_the_expiry_a_stream_waits_for,
        last_event_id_resumes_with_the_changes_missed,
        a_slow_subscriber_gets_a_new_snapshot_never_a_gap,
        pool_counts_change_live,
        past_the_subscriber_cap_a_stream_is_refused_busy,
        bad_stream_requests_are_problems,
    ]
}

pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_hold_on_one_instance_reaches_a_subscriber_on_another,
        a_lost_listener_connection_loses_no_change,
    ]
}

/// How long a test waits for an event it expects (a bound for a broken
/// build, not a performance figure).
const PATIENCE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct SseEvent {
    pub event: String,
    pub id: Option<String>,
    pub data: Value,
}

impl SseEvent {
    pub fn position(&self) -> i64 {
        self.data["position"].as_i64().expect("position")
    }

    /// `(seat_id, status)` of every seat the event names.
    pub fn seats(&self) -> Vec<(String, String)> {
        seat_entries(&self.data)
    }
}

/// A server-sent-event client over reqwest.
pub struct EventStream {
    response: reqwest::Response,
    buffer: String,
    pub comments: usize,
    /// Bytes of the body read so far.
    pub bytes: usize,
}

impl EventStream {
    pub async fn open(app: &TestApp, show_id: &str, last_event_id: Option<&str>) -> Self {
        Self::open_at(&app.client, &app.base, show_id, last_event_id).await
    }

    /// `open` on a service at `base` (say, the binary, run by the test).
    pub async fn open_at(
        client: &reqwest::Client,
        base: &str,
        show_id: &str,
        last_event_id: Option<&str>,
    ) -> Self {
        let mut request = client
            .get(format!("{base}/v1/shows/{show_id}/availability/stream"))
            .header("accept", "text/event-stream")
            .header("accept-encoding", "gzip, br")
            // A stream lives as long as its test reads it: the client's
            // 120 s for a whole request cut a long one off on a loaded
            // machine (each read has its own deadline, `next`).
            .timeout(Duration::from_secs(900));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.expect("stream opens");
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        assert!(
            response.headers().get("content-encoding").is_none(),
            "a stream is never compressed"
        );
        Self {
            response,
            buffer: String::new(),
            comments: 0,
            bytes: 0,
        }
    }

    /// The next event, or `None` if none came within `within`.
    pub async fn next_within(&mut self, within: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = String::from("message");
                let mut id = None;
                let mut data = String::new();
                let mut comment = false;
                for line in block.lines() {
                    if let Some(rest) = line.strip_prefix("event:") {
                        event = rest.trim().to_owned();
                    } else if let Some(rest) = line.strip_prefix("id:") {
                        id = Some(rest.trim().to_owned());
                    } else if let Some(rest) = line.strip_prefix("data:") {
                        data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                    } else if line.starts_with(':') {
                        comment = true;
                    }
                }
                if data.is_empty() {
                    if comment {
                        self.comments += 1;
                    }
                    continue;
                }
                let data = serde_json::from_str(&data).expect("event data is JSON");
                return Some(SseEvent { event, id, data });
            }
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .ok()?
                .expect("stream reads");
            match chunk {
                Some(bytes) => {
                    self.bytes += bytes.len();
                    self.buffer
                        .push_str(std::str::from_utf8(&bytes).expect("UTF-8"));
                }
                None => return None,
            }
        }
    }

    pub async fn next(&mut self) -> SseEvent {
        self.next_within(PATIENCE)
            .await
            .expect("an event within the test's patience")
    }

    /// Reads events until one names `seat` with `status`; returns it.
    pub async fn until_seat(&mut self, seat: &str, status: &str) -> SseEvent {
        loop {
            let event = self.next().await;
            if event
                .seats()
                .iter()
                .any(|(id, s)| id == seat && s == status)
            {
                return event;
            }
        }
    }
}

async fn opened_show(app: &TestApp, seats: usize, ttl: u32) -> String {
    let show = format!("live-{}", uuid::Uuid::new_v4().simple());
    app.create_show(&show, seats, ttl).await;
    show
}

async fn snapshot(stream: &mut EventStream) -> SseEvent {
    let first = stream.next().await;
    assert_eq!(first.event, "snapshot", "the first event is a snapshot");
    assert_eq!(first.id, Some(first.position().to_string()));
    first
}

async fn a_stream_starts_with_a_snapshot_and_then_sends_every_change(env: TestEnv) {
    let app = env.spawn().await;
    let show = opened_show(&app, 6, 600).await;
    let buyer = app.buyer("live-buyer");
    let mut stream = EventStream::open(&app, &show, None).await;
    let first = snapshot(&mut stream).await;
    assert_eq!(first.data["show_id"], json!(show));
    assert_eq!(first.seats().len(), 6);
    assert!(first.seats().iter().all(|(_, s)| s == "available"));
    assert_eq!(first.data["summary"]["available"], json!(6));

    // A hold.
    let held = app
        .hold(&buyer, &show, &[&seat_id(1), &seat_id(2)], None)
        .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let change = stream.until_seat(&seat_id(2), "held").await;
    assert_eq!(change.event, "change");
    assert_eq!(change.id, Some(change.position().to_string()));
    assert!(change.position() >= first.position());
    let mut last = change.position();

    // A release.
    app.release(&buyer, &held.str("hold_id")).await;
    let change = stream.until_seat(&seat_id(1), "available").await;
    assert!(change.position() > last, "positions increase");
    last = change.position();

    // A purchase.
    let held = app.hold(&buyer, &show, &[&seat_id(3)], None).await;
    let bought = app
        .purchase(&buyer, &held.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let change = stream.until_seat(&seat_id(3), "booked").await;
    assert!(change.position() > last);
    last = change.position();

    // A cancellation.
    let cancelled = app
        .call(
            Method::POST,
            &format!("/v1/bookings/{}/cancel", bought.str("booking_id")),
            Some(&buyer),
            None,
            &[],
        )
        .await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let change = stream.until_seat(&seat_id(3), "available").await;
    assert!(change.position() > last);
    // A change names only what changed.
    assert_eq!(change.seats(), vec![(seat_id(3), "available".to_owned())]);
    app.stop().await;
}

async fn an_expiry_arrives_at_its_instant_though_no_event_records_it(env: TestEnv) {
    let app = env.spawn().await;
    let show = opened_show(&app, 4, 2).await;
    let buyer = app.buyer("live-expiry");
    let mut stream = EventStream::open(&app, &show, None).await;
    snapshot(&mut stream).await;
    let held = app.hold(&buyer, &show, &[&seat_id(1)], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let expires_at: DateTime<Utc> = held.str("expires_at").parse().unwrap();
    stream.until_seat(&seat_id(1), "held").await;
    let change = stream.until_seat(&seat_id(1), "available").await;
    let arrived = app.clock_now();
    assert!(arrived >= expires_at, "not before its expiry");
    let late = (arrived - expires_at).to_std().unwrap();
    assert!(
        late <= Duration::from_millis(1500),
        "the expiry arrived {late:?} after expires_at"
    );
    assert_eq!(change.event, "change");
    // No event recorded it (the sweeper is off in tests).
    let history = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/history"),
            Some(&app.admin()),
            None,
            &[],
        )
        .await;
    assert!(
        history.body["events"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["type"] != json!("HoldExpired")),
        "the expiry came from the timer, not from an event"
    );
    app.stop().await;
}

async fn an_extension_moves_the_expiry_a_stream_waits_for(env: TestEnv) {
    let app = env.spawn().await;
    // Long enough that the hold is still held when the feed sees it: the
    // feed reads below the cluster's oldest snapshot, which another test's
    // transaction may hold back for a second or two (with 2 s, the hold
    // had sometimes expired before its change was computed, and its
    // "held" never came).
    let show = opened_show(&app, 4, 5).await;
    let buyer = app.buyer("live-extend");
    let mut stream = EventStream::open(&app, &show, None).await;
    snapshot(&mut stream).await;
    let held = app.hold(&buyer, &show, &[&seat_id(2)], None).await;
    let first_expiry: DateTime<Utc> = held.str("expires_at").parse().unwrap();
    stream.until_seat(&seat_id(2), "held").await;
    // A second later (on the service's clock), so the expiry surely moves.
    app.clock.advance(chrono::Duration::milliseconds(1000));
    let extended = app
        .call(
            Method::POST,
            &format!("/v1/holds/{}/extend", held.str("hold_id")),
            Some(&buyer),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!(extended.status, StatusCode::OK, "{}", extended.body);
    let new_expiry: DateTime<Utc> = extended.str("expires_at").parse().unwrap();
    assert!(new_expiry > first_expiry);
    let change = stream.until_seat(&seat_id(2), "available").await;
    let arrived = app.clock_now();
    assert!(
        arrived >= new_expiry,
        "the seat came free at {arrived}, before its extended expiry {new_expiry}"
    );
    assert_eq!(change.event, "change");
    app.stop().await;
}

async fn last_event_id_resumes_with_the_changes_missed(env: TestEnv) {
    let app = env.spawn().await;
    let show = opened_show(&app, 8, 600).await;
    let buyer = app.buyer("live-resume");
    let mut stream = EventStream::open(&app, &show, None).await;
    snapshot(&mut stream).await;
    app.hold(&buyer, &show, &[&seat_id(1)], None).await;
    let seen = stream.until_seat(&seat_id(1), "held").await;
    let last = seen.id.clone().unwrap();
    drop(stream);

    // Changes while away.
    let second = app.hold(&buyer, &show, &[&seat_id(2)], None).await;
    assert_eq!(second.status, StatusCode::CREATED);
    let third = app.hold(&buyer, &show, &[&seat_id(3)], None).await;
    assert_eq!(third.status, StatusCode::CREATED);
    // (A subscriber that stayed sees both, so the instance has computed them.)
    let mut witness = EventStream::open(&app, &show, None).await;
    let mut state = BTreeMap::new();
    loop {
        let event = witness.next().await;
        for (seat, status) in event.seats() {
            state.insert(seat, status);
        }
        if state.get(&seat_id(2)).is_some_and(|s| s == "held")
            && state.get(&seat_id(3)).is_some_and(|s| s == "held")
        {
            break;
        }
    }

    let mut resumed = EventStream::open(&app, &show, Some(&last)).await;
    let mut missed = BTreeMap::new();
    while !(missed.contains_key(&seat_id(2)) && missed.contains_key(&seat_id(3))) {
        let event = resumed.next().await;
        assert_eq!(
            event.event, "change",
            "a recent Last-Event-ID resumes with changes"
        );
        assert!(event.position() >= last.parse::<i64>().unwrap());
        for (seat, status) in event.seats() {
            missed.insert(seat, status);
        }
    }
    assert_eq!(missed[&seat_id(2)], "held");
    assert_eq!(missed[&seat_id(3)], "held");

    // A position of the show's from before the instance watched it: a new
    // snapshot. (Positions are each show's own.)
    let later = opened_show(&app, 2, 600).await;
    let held = app.hold(&buyer, &later, &[&seat_id(1)], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let mut too_old = EventStream::open(&app, &later, Some("0")).await;
    let first = too_old.next().await;
    assert_eq!(first.event, "snapshot");
    assert!(first.position() > 0);
    // A Last-Event-ID that is no position the stream could have sent (not
    // a number, negative, past i64): 422, as the document declares.
    for garbage in ["not-a-position", "-1", "9223372036854775808", ""] {
        let answer = app
            .call(
                Method::GET,
                &format!("/v1/shows/{show}/availability/stream"),
                None,
                None,
                &[("last-event-id", garbage)],
            )
            .await;
        answer.expect_problem(422, "validation_failed");
    }
    app.stop().await;
}

/// Writers of the slow-subscriber test, and the hold-and-release rounds of each.
const WRITERS: usize = 8;
/// How much the slow-subscriber test sends past the reader that stopped:
/// twice the broadcast's frames, once two megabytes have gone by (its
/// socket buffers and the service's write buffer hold about one).
const STALLED_CHANGES: usize = booking::live::channel::BROADCAST_FRAMES * 2;
const STALLED_BYTES: usize = 2 << 20;
/// The stalled socket's receive buffer: small, but at least two segments of
/// loopback's 64 kB MSS (below one, Linux falls back on zero-window probes
/// that back off for minutes once the reader reads again).
const RECEIVE_BUFFER: u32 = 128 * 1024;

/// Opens a stream over a socket whose receive buffer is tiny and then does
/// not read it: the service's writes stall, so its subscriber falls behind
/// the show's broadcast.
async fn stalled_stream(app: &TestApp, show: &str) -> tokio::net::TcpStream {
    let addr: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(RECEIVE_BUFFER).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = format!(
        "GET /v1/shows/{show}/availability/stream HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Decodes an HTTP/1.1 chunked body already read whole (what a stalled
/// reader finally reads); stops at the first incomplete chunk.
fn dechunk(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let Some(start) = text.find("\r\n\r\n") else {
        return String::new();
    };
    let mut rest = &text[start + 4..];
    let mut body = String::new();
    while let Some(end) = rest.find("\r\n") {
        let Ok(size) = usize::from_str_radix(rest[..end].trim(), 16) else {
            break;
        };
        let data_start = end + 2;
        if size == 0 || rest.len() < data_start + size + 2 {
            break;
        }
        body.push_str(&rest[data_start..data_start + size]);
        rest = &rest[data_start + size + 2..];
    }
    body
}

async fn a_slow_subscriber_gets_a_new_snapshot_never_a_gap(env: TestEnv) {
    let app = std::sync::Arc::new(env.spawn().await);
    let show = opened_show(&app, WRITERS * 50 + 1, 600).await;
    let mut slow = stalled_stream(&app, &show).await;
    let mut fast = EventStream::open(&app, &show, None).await;
    snapshot(&mut fast).await;
    // Writers hold and release blocks of 50 seats (changes of up to 2.5 kB
    // a block) until the stalled socket and the service's write buffer are
    // full (about a megabyte) and the broadcast has gone more than its
    // frames past the subscriber that stopped reading.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (app, show, stop) = (app.clone(), show.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let buyer = app.buyer(&format!("live-slow-{w}"));
            let seats: Vec<String> = (1..=50).map(|n| seat_id(w * 50 + n)).collect();
            let seats: Vec<&str> = seats.iter().map(String::as_str).collect();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let held = app.hold(&buyer, &show, &seats, None).await;
                assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
                app.release(&buyer, &held.str("hold_id")).await;
            }
        }));
    }
    let mut changes_past_the_stall = 0;
    while changes_past_the_stall < STALLED_CHANGES {
        if fast.next().await.event == "change" && fast.bytes >= STALLED_BYTES {
            changes_past_the_stall += 1;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for writer in writers {
        writer.await.expect("writer");
    }
    // A last change after every other, then the slow reader reads all it was sent.
    let last_seat = seat_id(WRITERS * 50 + 1);
    let buyer = app.buyer("live-slow-last");
    let last = app.hold(&buyer, &show, &[&last_seat], None).await;
    assert_eq!(last.status, StatusCode::CREATED);
    fast.until_seat(&last_seat, "held").await;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut state: BTreeMap<String, String> = BTreeMap::new();
    let mut snapshots = 0;
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(
            Instant::now() < deadline,
            "the slow reader never caught up: {} bytes, {snapshots} snapshots so far",
            raw.len(),
        );
        // Read while data comes; decode once it pauses.
        let read = tokio::time::timeout(Duration::from_millis(300), slow.read(&mut buf)).await;
        if let Ok(read) = read {
            let n = read.expect("the stream reads");
            assert!(n > 0, "the stream stays open");
            raw.extend_from_slice(&buf[..n]);
            continue;
        }
        state.clear();
        snapshots = 0;
        for block in dechunk(&raw).split("\n\n") {
            let kind = block
                .lines()
                .find_map(|l| l.strip_prefix("event:"))
                .map(str::trim);
            let data: String = block
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let Ok(data) = serde_json::from_str::<Value>(&data) else {
                continue;
            };
            if kind == Some("snapshot") {
                snapshots += 1;
                state.clear();
            }
            for seat in data["seats"].as_array().into_iter().flatten() {
                state.insert(
                    seat["seat_id"].as_str().unwrap().to_owned(),
                    seat["status"].as_str().unwrap().to_owned(),
                );
            }
        }
        if state.get(&last_seat).is_some_and(|s| s == "held") {
            break;
        }
    }
    assert!(
        snapshots >= 2,
        "a subscriber that fell behind is sent a new snapshot (got {snapshots}; it read {} bytes, \
         {} lagged on the instance; the one that kept up read {} bytes)",
        raw.len(),
        app.live.lagged(),
        fast.bytes
    );
    // What it pieced together is the show's availability: no gap.
    assert_eq!(state, app.seat_statuses(&show).await);
    drop(fast);
    if let Ok(app) = std::sync::Arc::try_unwrap(app) {
        app.stop().await;
    }
}

async fn pool_counts_change_live(env: TestEnv) {
    let app = env.spawn().await;
    let show = format!("live-pool-{}", uuid::Uuid::new_v4().simple());
    app.create_show_from(
        &show,
        &json!({"name": "Live floor", "starts_at": "2030-01-01T20:00:00Z", "hold_ttl_seconds": 600,
                    "pools": [{"pool_id": "floor", "capacity": 100, "price_cents": 2500}]}),
    )
    .await;
    let buyer = app.buyer("live-pool");
    let mut stream = EventStream::open(&app, &show, None).await;
    let first = snapshot(&mut stream).await;
    assert_eq!(first.data["pools"][0]["available"], json!(100));
    let held = app
        .call(
            Method::POST,
            &format!("/v1/shows/{show}/holds"),
            Some(&buyer),
            Some(&json!({"pool_id": "floor", "quantity": 3})),
            &[],
        )
        .await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let change = stream.next().await;
    assert_eq!(change.event, "change");
    assert_eq!(
        change.data["pools"],
        json!([{"pool_id": "floor", "capacity": 100, "available": 97, "held": 3, "sold": 0}])
    );
    assert_eq!(change.data["seats"], json!([]));
    app.stop().await;
}

async fn past_the_subscriber_cap_a_stream_is_refused_busy(env: TestEnv) {
    let app = env
        .spawn_with_edge(booking::edge::EdgeSettings {
            max_subscribers: 2,
            ..booking::edge::EdgeSettings::default()
        })
        .await;
    let show = opened_show(&app, 2, 600).await;
    let mut one = EventStream::open(&app, &show, None).await;
    snapshot(&mut one).await;
    let mut two = EventStream::open(&app, &show, None).await;
    snapshot(&mut two).await;
    let third = app
        .call(
            Method::GET,
            &format!("/v1/shows/{show}/availability/stream"),
            None,
            None,
            &[],
        )
        .await;
    third.expect_problem(503, "busy");
    // A stream that ends gives its place back.
    drop(one);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let response = app
            .client
            .get(format!("{}/v1/shows/{show}/availability/stream", app.base))
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::OK {
            break;
        }
        assert!(Instant::now() < deadline, "the place never came back");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    app.stop().await;
}

async fn bad_stream_requests_are_problems(env: TestEnv) {
    let app = env.spawn().await;
    app.call(
        Method::GET,
        "/v1/shows/nope/availability/stream",
        None,
        None,
        &[],
    )
    .await
    .expect_problem(404, "show_not_found");
    app.call(
        Method::GET,
        "/v1/shows/%FF/availability/stream",
        None,
        None,
        &[],
    )
    .await
    .expect_problem(404, "show_not_found");
    app.call(
        Method::POST,
        "/v1/shows/nope/availability/stream",
        None,
        None,
        &[],
    )
    .await
    .expect_problem(405, "method_not_allowed");
    app.call(Method::GET, "/shows/nope", None, None, &[])
        .await
        .expect_problem(404, "show_not_found");
    app.stop().await;
}

async fn a_hold_on_one_instance_reaches_a_subscriber_on_another(env: TestEnv) {
    let (a, b) = env.spawn_pair().await;
    let show = opened_show(&a, 20, 600).await;
    let buyer = a.buyer("live-pair");
    let mut on_b = EventStream::open(&b, &show, None).await;
    snapshot(&mut on_b).await;
    for n in 1..=5 {
        let held = a.hold(&buyer, &show, &[&seat_id(n)], None).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
        let answered = Instant::now();
        on_b.until_seat(&seat_id(n), "held").await;
        let took = answered.elapsed();
        assert!(
            took <= Duration::from_secs(1),
            "a hold on A reached B's subscriber {took:?} after its 201"
        );
    }
    a.stop().await;
    b.stop().await;
}

async fn a_lost_listener_connection_loses_no_change(env: TestEnv) {
    let (a, b) = env.spawn_pair().await;
    let show = opened_show(&a, 20, 600).await;
    let buyer = a.buyer("live-listener");
    let mut on_b = EventStream::open(&b, &show, None).await;
    snapshot(&mut on_b).await;
    // Cut every listening connection of this database (A's and B's).
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&a.database_url)
        .await
        .unwrap();
    let mut cut = 0;
    let deadline = Instant::now() + PATIENCE;
    while cut < 2 {
        assert!(Instant::now() < deadline, "the listeners never showed up");
        let killed: Vec<bool> = sqlx::query_scalar(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        cut += killed.into_iter().filter(|k| *k).count();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Changes made while the listeners reconnect, and after.
    for n in 1..=5 {
        let held = a.hold(&buyer, &show, &[&seat_id(n)], None).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    }
    let mut state = BTreeMap::new();
    while (1..=5).any(|n| state.get(&seat_id(n)) != Some(&"held".to_owned())) {
        for (seat, status) in on_b.next().await.seats() {
            state.insert(seat, status);
        }
    }
    a.stop().await;
    b.stop().await;
}
