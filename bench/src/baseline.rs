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

use crate::report::Figures;

const HOLD: &str = "INSERT INTO holds (seat_id, hold_id, expires_at) \
     VALUES ($1, $2, now() + interval '8 minutes') \
     ON CONFLICT (seat_id) DO UPDATE SET hold_id = excluded.hold_id, expires_at = excluded.expires_at \
     WHERE holds.expires_at < now() RETURNING seat_id";

pub struct Baseline {
    pub holds: Figures,
    pub storm: Figures,
}

/// A point in PostgreSQL's write-ahead log. The difference between two is
/// how many bytes of WAL the cluster wrote in between: every commit waits for
/// its WAL to be flushed, so bytes per hold is the write amplification that
/// bounds a write-heavy scenario. Exact and immediate, unlike `pg_stat_wal`,
/// which backends report only every second or so.
#[derive(Clone, Copy)]
pub struct WalMark(f64);

impl WalMark {
    pub async fn now(url: &str) -> anyhow::Result<Self> {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let (lsn,): (f64,) =
            sqlx::query_as("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8")
                .fetch_one(&mut conn)
                .await?;
        conn.close().await?;
        Ok(Self(lsn))
    }

    /// "WAL per success" since this mark, over the `ok` answers of `figures`,
    /// appended to its note. Cluster-wide: it includes the service's
    /// background work (projector checkpoint) during the scenario.
    pub async fn annotate(self, url: &str, figures: &mut Figures) -> anyhow::Result<()> {
        let bytes = Self::now(url).await?.0 - self.0;
        let per = bytes / figures.ok.max(1) as f64;
        let wal = format!("WAL per success: {per:.0} bytes");
        figures.note = if figures.note.is_empty() {
            wal
        } else {
            format!("{}; {wal}", figures.note)
        };
        Ok(())
    }
}

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
    pool.close().await;
    Ok(Baseline { holds, storm })
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
                let doc = serde_json::json!({
                    "events": [{"t": "Seat", "i": format!("{show}/{seat}"), "s": 1, "et": "HoldPlaced", "ev": "1.0",
                                "p": {"HoldPlaced": {"hold_id": hold, "buyer": "b", "expires_at": "2030-01-01T00:00:00Z"}},
                                "m": {"actor": "b"}, "r": 0, "sh": show, "n": 1}],
                    "seats": [{"show_id": show, "seat_id": seat, "status": "held", "hold_id": hold, "buyer": "b",
                               "expires_at_us": expires_us, "booking_id": null, "seq": 1}],
                    "shards": [], "pool_holds": [], "ends": [], "converts": [], "checkouts": [],
                    "holds": [{"hold_id": hold, "show_id": show, "buyer": "b", "expires_at_us": expires_us, "pool_id": null}],
                    "hold_seats": [{"hold_id": hold, "seat_id": seat}],
                    "idempotency": null, "checkpoint": null
                });
                let t = Instant::now();
                let done = sqlx::query("SELECT booking_append($1::jsonb)")
                    .bind(doc.to_string())
                    .execute(&pool)
                    .await;
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
