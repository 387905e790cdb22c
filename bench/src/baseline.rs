//! The physical limit: the seed design's raw SQL hold, on the same
//! PostgreSQL, with the same concurrency, in the same run.
//!
//! ```sql
//! INSERT INTO holds (seat_id, hold_id, expires_at) VALUES ($1, $2, now() + interval '8 minutes')
//! ON CONFLICT (seat_id) DO UPDATE SET hold_id = excluded.hold_id, expires_at = excluded.expires_at
//! WHERE holds.expires_at < now() RETURNING seat_id
//! ```
//!
//! One statement per hold, no HTTP, no events: what a hold costs the
//! database at the least. Every loser of a race on one seat takes the row
//! lock and waits for the winner's commit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgPoolOptions;
use sqlx::Connection;

use crate::report::{Baseline, Figures};
use crate::wal::WalMark;

const HOLD: &str = "INSERT INTO holds (seat_id, hold_id, expires_at) \
     VALUES ($1, $2, now() + interval '8 minutes') \
     ON CONFLICT (seat_id) DO UPDATE SET hold_id = excluded.hold_id, expires_at = excluded.expires_at \
     WHERE holds.expires_at < now() RETURNING seat_id";

pub async fn run(
    admin_url: &str,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Baseline> {
    let database = format!("booking_baseline_{}", uuid::Uuid::new_v4().simple());
    crate::admin_exec(admin_url, &format!("CREATE DATABASE \"{database}\"")).await?;
    let url = crate::with_database(admin_url, &database);
    let result = measure(&url, concurrency, duration).await;
    crate::admin_exec(
        admin_url,
        &format!("DROP DATABASE IF EXISTS \"{database}\" WITH (FORCE)"),
    )
    .await?;
    result
}

async fn measure(url: &str, concurrency: usize, duration: Duration) -> anyhow::Result<Baseline> {
    let mut conn = sqlx::PgConnection::connect(url).await?;
    sqlx::query("CREATE TABLE holds (seat_id text PRIMARY KEY, hold_id uuid NOT NULL, expires_at timestamptz NOT NULL)")
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let pool = PgPoolOptions::new()
        .max_connections(concurrency as u32)
        .min_connections(concurrency as u32)
        .test_before_acquire(false)
        .connect(url)
        .await?;

    // Distinct seats, `concurrency` clients, for `duration`.
    let wal = WalMark::now(url).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (pool, next) = (pool.clone(), next.clone());
        tasks.spawn(async move {
            let mut answers = Vec::new();
            while Instant::now() < deadline {
                let seat = format!("S{}", next.fetch_add(1, Ordering::Relaxed));
                let t = Instant::now();
                let row: Result<Option<(String,)>, _> = sqlx::query_as(HOLD)
                    .bind(&seat)
                    .bind(uuid::Uuid::new_v4())
                    .fetch_optional(&pool)
                    .await;
                let status = match row {
                    Ok(Some(_)) => 201,
                    Ok(None) => 409,
                    Err(_) => 0,
                };
                answers.push((status, t.elapsed()));
            }
            answers
        });
    }
    let mut answers = Vec::new();
    while let Some(part) = tasks.join_next().await {
        answers.extend(part?);
    }
    let mut holds = Figures::from_latencies(
        "raw SQL hold (distinct seats)",
        "postgres",
        &answers,
        started.elapsed(),
    );
    wal.annotate(url, &mut holds).await?;

    // The storm: 3,400 attempts on one seat through the same pool.
    const BUYERS: usize = 3_400;
    let gate = Arc::new(tokio::sync::Barrier::new(BUYERS + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..BUYERS {
        let (pool, gate) = (pool.clone(), gate.clone());
        tasks.spawn(async move {
            gate.wait().await;
            let t = Instant::now();
            let row: Result<Option<(String,)>, _> = sqlx::query_as(HOLD)
                .bind("STORM")
                .bind(uuid::Uuid::new_v4())
                .fetch_optional(&pool)
                .await;
            let status = match row {
                Ok(Some(_)) => 201,
                Ok(None) => 409,
                Err(_) => 0,
            };
            (status, t.elapsed())
        });
    }
    gate.wait().await;
    let released = Instant::now();
    let mut answers = Vec::new();
    while let Some(answer) = tasks.join_next().await {
        answers.push(answer?);
    }
    let wall = released.elapsed();
    let winners = answers.iter().filter(|(s, _)| *s == 201).count();
    let mut storm = Figures::from_latencies(
        "raw SQL storm (3,400 attempts, one seat)",
        "postgres",
        &answers,
        wall,
    );
    storm.note = format!("winners: {winners}");
    sqlx::query("TRUNCATE holds").execute(&pool).await?;
    pool.close().await;
    let pgbench = crate::external::pgbench_holds(url, concurrency, duration).await?;
    Ok(Baseline {
        holds,
        storm,
        pgbench,
    })
}

/// The service's own write, without the service: `booking_append` called
/// directly over `concurrency` connections with the document a distinct-seat
/// hold produces (its event, seat row, hold record and hold seat). What the
/// database can do for this data model, with no HTTP, token, JSON parsing
/// or decision in front of it.
pub async fn direct_append(
    url: &str,
    concurrency: usize,
    duration: Duration,
    show_id: &str,
) -> anyhow::Result<Figures> {
    let pool = PgPoolOptions::new()
        .max_connections(concurrency as u32)
        .test_before_acquire(false)
        .connect(url)
        .await?;
    let wal = WalMark::now(url).await?;
    let next = Arc::new(AtomicUsize::new(1));
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (pool, next, show) = (pool.clone(), next.clone(), show_id.to_owned());
        tasks.spawn(async move {
            let mut answers = Vec::new();
            while Instant::now() < deadline {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n > 100_000 {
                    break;
                }
                let seat = format!("S{n}");
                let hold = uuid::Uuid::new_v4().to_string();
                let expires_us: i64 = 1_893_456_000_000_000;
                // The document `store::document` writes for such a hold
                // (parts named after their tables, rows by column name).
                let doc = serde_json::json!({
                    "show_id": show,
                    "recorded_at_us": 0,
                    "events": [{"aggregate_type": "Seat", "aggregate_id": format!("{show}/{seat}"), "sequence": 1,
                                "event_type": "HoldPlaced", "event_version": "1.0",
                                "payload": {"HoldPlaced": {"hold_id": hold, "buyer": "b", "expires_at": "2030-01-01T00:00:00Z"}},
                                "metadata": {"actor": "b"}, "show_id": show}],
                    "seat_availability": [{"show_id": show, "seat_id": seat, "status": "held", "hold_id": hold, "buyer": "b",
                               "expires_at_us": expires_us, "booking_id": null, "last_seq": 1}],
                    "holds": [{"hold_id": hold, "show_id": show, "buyer": "b", "expires_at_us": expires_us,
                               "state": "held", "booking_id": null, "pool_id": null,
                               "seat_ids": format!("[\"{seat}\"]")}]
                });
                let t = Instant::now();
                let done = sqlx::query("SELECT booking_append($1, $2::jsonb)")
                    .bind(&show)
                    .bind(doc.to_string())
                    .execute(&pool)
                    .await;
                if let (Err(error), true) = (&done, answers.is_empty()) {
                    eprintln!("booking_append failed: {error}");
                }
                answers.push((if done.is_ok() { 201 } else { 0 }, t.elapsed()));
            }
            answers
        });
    }
    let mut answers = Vec::new();
    while let Some(part) = tasks.join_next().await {
        answers.extend(part?);
    }
    pool.close().await;
    let mut figures = Figures::from_latencies(
        "booking_append called directly (no HTTP)",
        "postgres",
        &answers,
        started.elapsed(),
    );
    figures.note = "the service's write for one hold, without the service".into();
    wal.annotate(url, &mut figures).await?;
    Ok(figures)
}
