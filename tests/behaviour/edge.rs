//! The edge under a hostile crowd (docs/api.md): unfinished request heads,
//! made-up methods, requests that take too long.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use booking::edge::EdgeSettings;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::support::{Backend, TestApp, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        unfinished_request_heads_never_exhaust_descriptors,
        made_up_methods_add_no_metric_series,
        a_slow_request_gets_busy_and_the_purchase_still_completes,
        a_hold_whose_write_outlasts_the_request_timeout_answers_the_hold,
        idle_and_silent_connections_are_closed_at_their_timers,
        a_stalled_body_gets_408_and_its_connection_closed,
    ]
}

/// The child's descriptor limit: low, so that 2,000 connections would
/// exhaust it without the connection cap.
const CHILD_NOFILE: libc::rlim_t = 1024;
/// Connections that never finish their head: about twice the child's limit.
const SLOW_CONNECTIONS: usize = 2_000;
const HEADER_TIMEOUT_SECONDS: u64 = 2;

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

/// Raises this process's soft descriptor limit to its hard limit.
fn raise_own_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we own.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
    assert!(
        limit.rlim_cur as usize > SLOW_CONNECTIONS + 500,
        "the test needs more descriptors than {SLOW_CONNECTIONS}: hard limit {}",
        limit.rlim_max
    );
}

async fn unfinished_request_heads_never_exhaust_descriptors(env: TestEnv) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    raise_own_descriptor_limit();
    let (database_url, _dir) = env.database_url().await;
    let mut command = Command::new(env!("CARGO_BIN_EXE_booking"));
    command
        .arg("serve")
        .env("DATABASE_URL", &database_url)
        .env("BOOKING_ADDR", "127.0.0.1:0")
        .env(
            "BOOKING_JWT_SECRET",
            "edge-test-secret-of-at-least-32-bytes",
        )
        .env("BOOKING_DB_CONNECTIONS", "8")
        .env(
            "BOOKING_HEADER_TIMEOUT_SECONDS",
            HEADER_TIMEOUT_SECONDS.to_string(),
        )
        .env_remove("BOOKING_MAX_CONNECTIONS")
        .env("BOOKING_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // SAFETY: between fork and exec only setrlimit runs, which is
    // async-signal-safe and touches no memory but the struct on our stack.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: CHILD_NOFILE,
                rlim_max: CHILD_NOFILE,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().expect("the booking binary starts");
    let log = Arc::new(Mutex::new(String::new()));
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut stderr = child.stderr.take().expect("stderr");
    let child = Killed(child);
    {
        let log = log.clone();
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            log.lock().unwrap().push_str(&text);
        });
    }
    let (addr, cap) = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stdout.next_line().await.expect("read stdout") {
            log.lock().unwrap().push_str(&line);
            let Ok(entry) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if entry["fields"]["message"] == "booking is listening" {
                return Some((
                    entry["fields"]["addr"].as_str().unwrap().to_owned(),
                    entry["fields"]["max_connections"].as_u64().unwrap(),
                ));
            }
        }
        None
    })
    .await
    .expect("the service listens within a minute")
    .expect("the service announces its address");
    assert!(
        cap < CHILD_NOFILE,
        "the default cap must clamp itself below the descriptor limit: {cap}"
    );
    {
        let log = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                log.lock().unwrap().push_str(&line);
                log.lock().unwrap().push('\n');
            }
        });
    }

    let mut slow = Vec::with_capacity(SLOW_CONNECTIONS);
    for _ in 0..SLOW_CONNECTIONS {
        let mut stream = TcpStream::connect(&addr).await.expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("partial head");
        slow.push(stream);
    }

    let started = Instant::now();
    let limit = Duration::from_secs(HEADER_TIMEOUT_SECONDS + 5);
    let client = reqwest::Client::builder()
        .timeout(limit)
        .build()
        .expect("client");
    let health = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .expect("a fresh request is answered while the slow heads are open");
    assert_eq!(health.status(), StatusCode::OK);
    assert!(
        started.elapsed() < limit,
        "answered after {:?}",
        started.elapsed()
    );
    drop(slow);
    let text = log.lock().unwrap().clone();
    assert!(
        !text.contains("Too many open files"),
        "the service ran out of descriptors:\n{text}"
    );
    drop(child);
}

/// Distinct made-up methods sent; each would be a new series if the method
/// were a label.
const MADE_UP_METHODS: usize = 3_000;
/// /metrics may grow by this much: counters of existing series gain digits
/// (and the 405's series may be new), no series per method.
const METRICS_GROWTH_BYTES: usize = 4 * 1024;

async fn metrics_size(app: &TestApp) -> usize {
    app.client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .len()
}

async fn made_up_methods_add_no_metric_series(env: TestEnv) {
    let app = env.spawn().await;
    // One of them first, so that the series of a 405 on an unmatched route
    // exists before the measure.
    let warm = app
        .call(
            Method::from_bytes(b"XWARM").unwrap(),
            "/healthz",
            None,
            None,
            &[],
        )
        .await;
    warm.expect_problem(405, "method_not_allowed");
    let before = metrics_size(&app).await;
    for i in 0..MADE_UP_METHODS {
        let method = Method::from_bytes(format!("XM{i:04}").as_bytes()).unwrap();
        let answer = app.call(method, "/healthz", None, None, &[]).await;
        answer.expect_problem(405, "method_not_allowed");
    }
    let after = metrics_size(&app).await;
    assert!(
        after <= before + METRICS_GROWTH_BYTES,
        "/metrics grew from {before} to {after} bytes"
    );
    let text = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("XM0001"), "a made-up method is a label");
    assert!(text.contains("method=\"other\""), "{text}");
    app.stop().await;
}

async fn a_slow_request_gets_busy_and_the_purchase_still_completes(env: TestEnv) {
    let app = env
        .spawn_with_edge(EdgeSettings {
            request_timeout: Duration::from_secs(1),
            ..EdgeSettings::default()
        })
        .await;
    app.create_show("slow", 2, 480).await;
    let buyer = app.buyer("patient");
    let hold = app.hold(&buyer, "slow", &["S1"], None).await;
    let hold_id = hold.str("hold_id");
    let started = Instant::now();
    let timed_out = app.purchase(&buyer, &hold_id, "pm_sim_delay_3000").await;
    timed_out.expect_problem(503, "busy");
    assert!(
        started.elapsed() < Duration::from_millis(2_900),
        "the 503 came at the request timeout, not after the payment"
    );
    let retry_after = app
        .client
        .post(format!("{}/v1/holds/{hold_id}/purchase", app.base))
        .bearer_auth(&buyer)
        .header("content-type", "application/json")
        .body(r#"{"payment_method":"pm_sim_delay_3000"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(retry_after.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        retry_after.headers().get("retry-after").is_some(),
        "503 busy carries Retry-After"
    );
    // The purchase was recorded before the provider call: recovery (not
    // bounded by a request timer) finishes it, charging once.
    let report = app.recovery.run_once().await.expect("recovery");
    assert!(report.finished() >= 1, "{report:?}");
    let done = app.purchase(&buyer, &hold_id, "pm_sim_delay_3000").await;
    assert!(
        done.status == StatusCode::OK || done.status == StatusCode::CREATED,
        "{}: {}",
        done.status,
        done.body
    );
    let booking_id = done.str("booking_id");
    let again = app.purchase(&buyer, &hold_id, "pm_sim_delay_3000").await;
    assert_eq!(again.str("booking_id"), booking_id, "the same booking");
    let ledger = app.ledger().sim_ledger().await.unwrap();
    assert_eq!(ledger.len(), 1, "one charge: {ledger:?}");
    app.stop().await;
}

/// Another writer holding the store's write lock: PostgreSQL's `events`
/// table locked against writes (reads go on), SQLite's one writer's lock
/// taken (`BEGIN IMMEDIATE`). Held until `release`.
enum WriteBlocker {
    Postgres(sqlx::PgConnection),
    Sqlite(sqlx::SqliteConnection),
}

impl WriteBlocker {
    async fn take(backend: Backend, database_url: &str) -> Self {
        use sqlx::{Connection, Executor};
        match backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(database_url).await.unwrap();
                conn.execute("BEGIN; LOCK TABLE events IN EXCLUSIVE MODE")
                    .await
                    .unwrap();
                Self::Postgres(conn)
            }
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(database_url).await.unwrap();
                conn.execute("BEGIN IMMEDIATE").await.unwrap();
                Self::Sqlite(conn)
            }
        }
    }

    async fn release(self) {
        use sqlx::Executor;
        match self {
            Self::Postgres(mut conn) => {
                conn.execute("ROLLBACK").await.unwrap();
            }
            Self::Sqlite(mut conn) => {
                conn.execute("ROLLBACK").await.unwrap();
            }
        }
    }
}

async fn a_hold_whose_write_outlasts_the_request_timeout_answers_the_hold(env: TestEnv) {
    // Long enough for the hold to reach its append on a busy machine; the
    // store's own wait for its writer (`ACQUIRE_TIMEOUT`, 4 s) is longer
    // than the time the test keeps the write lock past this.
    let limit = Duration::from_millis(1_500);
    let app = env
        .spawn_with_edge(EdgeSettings {
            request_timeout: limit,
            ..EdgeSettings::default()
        })
        .await;
    app.create_show("late", 2, 480).await;
    let buyer = app.buyer("late-buyer");
    let blocker = WriteBlocker::take(env.backend, &app.database_url).await;
    let mut hold = Box::pin(app.hold(&buyer, "late", &["S1"], None));
    // Still unanswered well past the request timeout: not cut to a 503
    // while its write waits.
    let early = tokio::time::timeout(limit + Duration::from_millis(500), &mut hold).await;
    assert!(
        early.is_err(),
        "answered before its write could land: {}",
        early
            .map(|a| format!("{} {}", a.status, a.body))
            .unwrap_or_default()
    );
    blocker.release().await;
    let held = hold.await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    let hold_id = held.str("hold_id");
    let read = app
        .call(
            Method::GET,
            &format!("/v1/holds/{hold_id}"),
            Some(&buyer),
            None,
            &[],
        )
        .await;
    assert_eq!(
        read.status,
        StatusCode::OK,
        "the hold is the buyer's: {}",
        read.body
    );
    assert_eq!(read.body["seats"][0], "S1", "{}", read.body);
    assert_eq!(read.body["status"], "held", "{}", read.body);

    app.stop().await;
}

/// Reads until the server closes the connection, or fails at `deadline`.
async fn closed_by_server(stream: &mut TcpStream, deadline: Duration) -> Vec<u8> {
    let mut seen = Vec::new();
    tokio::time::timeout(deadline, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the connection is still open after {deadline:?}"));
    seen
}

async fn idle_and_silent_connections_are_closed_at_their_timers(env: TestEnv) {
    let app = env
        .spawn_with_edge(EdgeSettings {
            header_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(2),
            ..EdgeSettings::default()
        })
        .await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    // Silent from the start: closed at the header timer.
    let mut silent = TcpStream::connect(&addr).await.unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut silent, Duration::from_secs(4))
        .await
        .is_empty());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the header timer"
    );

    // One answered request, then idle: kept past the header timer, closed
    // at the idle timer.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = Instant::now();
    let seen = closed_by_server(&mut idle, Duration::from_secs(6)).await;
    let idle_for = answered.elapsed();
    assert!(
        String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&seen)
    );
    assert!(
        idle_for >= Duration::from_millis(1_900),
        "closed after {idle_for:?}: the header timer must not cut an idle keep-alive connection"
    );
    app.stop().await;
}

async fn a_stalled_body_gets_408_and_its_connection_closed(env: TestEnv) {
    let app = env.spawn().await;
    app.create_show("stall", 2, 480).await;
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/shows/stall/holds HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"seats\"",
        app.buyer("staller")
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let seen = closed_by_server(
        &mut stream,
        booking::http::extract::BODY_READ_TIMEOUT + Duration::from_secs(5),
    )
    .await;
    let text = String::from_utf8_lossy(&seen);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    assert!(
        started.elapsed() >= booking::http::extract::BODY_READ_TIMEOUT - Duration::from_millis(100),
        "not before the body-read timeout"
    );
    // Nothing was held.
    let statuses = app.seat_statuses("stall").await;
    assert!(statuses.values().all(|s| s == "available"), "{statuses:?}");
    app.stop().await;
}
