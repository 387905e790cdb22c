//! The readers of the log under writers that commit late or not at all:
//! 10,000 appends over 50 shows from 16 writers, a random tenth of their
//! transactions rolled back or held open (for up to seconds on PostgreSQL,
//! where a held transaction holds its show's next writers, not another
//! show's; briefly on SQLite, where an open write transaction holds the one
//! writer). Readers tailing the log meanwhile, as the projector, the
//! webhooks dispatcher and the live feed do, must each see every committed
//! event exactly once, each show's in the order of its positions, and
//! nothing rolled back; the read models the projector built must equal a
//! replay of the log. On PostgreSQL a transaction of another database
//! stays open throughout, and must hold no reader back.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use booking::store::{AppendBatch, AppendOutcome, EventLog, LogCursor, LogEvent, LogFilter};
use chrono::Utc;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;

use crate::support::{Backend, TestEnv};
use crate::{tests, HEAVY};

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![every_reader_sees_each_committed_event_once_in_order_while_writers_commit_late]
}

const SHOWS: usize = 50;
const WRITERS: usize = 16;
const APPENDS: usize = 10_000;
/// Tailing readers of whole events (as the projector and the webhooks
/// dispatcher read) and of the shows' heads (as the live feed does).
const EVENT_READERS: usize = 3;
const HEAD_READERS: usize = 1;
/// How long a reader may take to reach the heads once the writers are done.
const CATCH_UP: Duration = Duration::from_secs(60);

/// What becomes of one append's transaction.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Committed,
    RolledBack,
    HeldOpen(Duration),
}

/// One writer's fates: nine in ten committed at once; of the rest half
/// rolled back, half held open before committing, on PostgreSQL for 50 to
/// 500 ms and one in fifty for 2 to 3 s, on SQLite (where it holds every
/// writer) for 1 to 10 ms.
fn fate(rng: &mut rand::rngs::StdRng, backend: Backend) -> Fate {
    let roll: f64 = rng.gen();
    if roll >= 0.1 {
        return Fate::Committed;
    }
    if roll < 0.05 {
        return Fate::RolledBack;
    }
    let ms = match backend {
        Backend::Sqlite => rng.gen_range(1..=10),
        Backend::Postgres if rng.gen_ratio(1, 50) => rng.gen_range(2_000..=3_000),
        Backend::Postgres => rng.gen_range(50..=500),
    };
    Fate::HeldOpen(Duration::from_millis(ms))
}

/// The append with global index `n`: a hold placed on a seat no other
/// append names, so that no two conflict.
fn append_of(n: usize, until: chrono::DateTime<Utc>) -> (String, AppendBatch) {
    let show = format!("reader{}", n % SHOWS);
    let seat = crate::support::seat_id(n / SHOWS + 1);
    let hold = uuid::Uuid::new_v4().to_string();
    let event = crate::audit::bare_hold_event(&show, &seat, 1, &hold, until);
    let stream = event.aggregate_id.clone();
    let mut batch = AppendBatch::new(Utc::now());
    batch.events.push(event);
    (stream, batch)
}

/// Appends `n` for every `n` this writer owns; returns the streams whose
/// events committed.
async fn write(log: EventLog, writer: usize, backend: Backend) -> Vec<String> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(writer as u64);
    let until = Utc::now() + chrono::Duration::hours(1);
    let mut committed = Vec::new();
    for n in (writer..APPENDS).step_by(WRITERS) {
        let (stream, batch) = append_of(n, until);
        let fate = fate(&mut rng, backend);
        let outcome = match fate {
            Fate::Committed => log.append(&batch).await,
            Fate::RolledBack => log.append_held(&batch, Duration::ZERO, false).await,
            Fate::HeldOpen(open_for) => log.append_held(&batch, open_for, true).await,
        };
        assert_eq!(
            outcome.expect("the append is answered"),
            AppendOutcome::Appended,
            "{stream}: {fate:?}"
        );
        if fate != Fate::RolledBack {
            committed.push(stream);
        }
    }
    committed
}

/// One event as a reader saw it: its show, its position and its stream.
type Seen = (String, i64, String);

/// What a reader saw, show by show: each show's events in the order seen.
type ByShow = BTreeMap<String, Vec<(i64, String)>>;

fn by_show(seen: Vec<Seen>) -> ByShow {
    let mut shows = ByShow::new();
    for (show, position, stream) in seen {
        shows.entry(show).or_default().push((position, stream));
    }
    shows
}

fn seen_of(event: LogEvent) -> Seen {
    (
        event.show_id.unwrap_or_default(),
        event.position,
        event.aggregate_id,
    )
}

/// Tails the log from `start` as the projector and the webhooks dispatcher
/// do (`read_after`, pages after a position per show, woken by this
/// process's appends) until the writers are done and it has reached the
/// heads they left.
async fn tail_events(log: EventLog, start: LogCursor, done: Done) -> ByShow {
    let mut appends = log.appends();
    let (mut cursor, mut seen) = (start, Vec::new());
    loop {
        let (page, next) = log.read_after(&cursor, 500).await.expect("a page");
        if next != cursor {
            cursor = next;
            seen.extend(page.into_iter().map(seen_of));
            continue;
        }
        if caught_up(&done, &cursor) {
            return by_show(seen);
        }
        wait_for_more(&mut appends).await;
    }
}

/// Follows the shows' heads as the live feed does (`heads`), and reads each
/// show that moved at once: every event up to a head must be there for a
/// read after it (the feed labels a show's state with its head).
async fn tail_heads(log: EventLog, start: LogCursor, done: Done) -> ByShow {
    let mut appends = log.appends();
    let (mut cursor, mut seen) = (start, Vec::new());
    loop {
        let heads = log.heads().await.expect("the heads");
        let behind = cursor.behind(&heads);
        for (show, after, head) in &behind {
            let events = log
                .read_log(LogFilter::Show(show), *after, APPENDS as i64)
                .await
                .expect("the show's events");
            // On to the head read before the events, whatever they were: a
            // position up to it without an event is a gap (rows the
            // projector rewrote), never one still to come, or this reader
            // would miss it, which the comparison with the log catches.
            events.iter().for_each(|event| cursor.pass(event));
            cursor.move_to(show, *head);
            seen.extend(events.into_iter().map(seen_of));
        }
        if behind.is_empty() && caught_up(&done, &cursor) {
            return by_show(seen);
        }
        wait_for_more(&mut appends).await;
    }
}

/// The heads the writers left, once they are done.
type Done = tokio::sync::watch::Receiver<Option<LogCursor>>;

/// Whether the writers are done and `cursor` has reached the heads they
/// left.
fn caught_up(done: &Done, cursor: &LogCursor) -> bool {
    match &*done.borrow() {
        Some(heads) => {
            let passed = |show: &str, head: i64| cursor.of(show) > head;
            let shows: Vec<String> = (0..SHOWS).map(|show| format!("reader{show}")).collect();
            assert!(
                !shows.iter().any(|show| passed(show, heads.of(show))),
                "a reader passed the head: {cursor:?} > {heads:?}"
            );
            shows.iter().all(|show| cursor.of(show) == heads.of(show))
        }
        None => false,
    }
}

/// What a reader saw, once it reached the head (by `deadline`).
async fn reached_head<T>(reader: tokio::task::JoinHandle<T>, deadline: Instant) -> T {
    tokio::time::timeout_at(deadline.into(), reader)
        .await
        .expect("the reader reaches the head in time")
        .expect("reader")
}

/// How long an idle reader waits before it reads again when this process
/// has not appended: what wakes no one (a held transaction's commit,
/// another test's transaction ending) is seen this late at most.
const IDLE_READ: Duration = Duration::from_millis(20);

/// Until this process appends again, or a moment passes (a transaction
/// held open commits without waking anyone; another test's transaction on
/// the server lets the position bound move).
async fn wait_for_more(appends: &mut tokio::sync::watch::Receiver<u64>) {
    let _ = tokio::time::timeout(IDLE_READ, appends.changed()).await;
}

/// A transaction holding a transaction id, open in another database of the
/// server (`postgres`), and a connection to see that it still is.
struct Foreign {
    connection: sqlx::PgConnection,
    watcher: sqlx::PgConnection,
    pid: i32,
}

async fn open_a_transaction_elsewhere() -> Foreign {
    use sqlx::Connection;
    let url = crate::support::with_database(&crate::support::test_database_url(), "postgres");
    let mut connection = sqlx::PgConnection::connect(&url).await.expect("connect");
    sqlx::query("BEGIN")
        .execute(&mut connection)
        .await
        .expect("begin");
    let (pid, _xid): (i32, String) =
        sqlx::query_as("SELECT pg_backend_pid(), pg_current_xact_id()::text")
            .fetch_one(&mut connection)
            .await
            .expect("an xid");
    let watcher = sqlx::PgConnection::connect(&url).await.expect("connect");
    Foreign {
        connection,
        watcher,
        pid,
    }
}

async fn every_reader_sees_each_committed_event_once_in_order_while_writers_commit_late(
    env: TestEnv,
) {
    let _heavy = HEAVY.acquire().await.expect("semaphore");
    let app = env.spawn().await;
    for show in 0..SHOWS {
        let created = app
            .create_show(&format!("reader{show}"), APPENDS / SHOWS, 3_600)
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    }
    let foreign = match env.backend {
        Backend::Postgres => Some(open_a_transaction_elsewhere().await),
        Backend::Sqlite => None,
    };
    let log = app.store.log();
    let start = log.head_cursor().await.expect("the heads");
    let (finished, done) = tokio::sync::watch::channel(None);
    let readers: Vec<_> = (0..EVENT_READERS)
        .map(|_| tokio::spawn(tail_events(log.clone(), start.clone(), done.clone())))
        .collect();
    let head_readers: Vec<_> = (0..HEAD_READERS)
        .map(|_| tokio::spawn(tail_heads(log.clone(), start.clone(), done.clone())))
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| tokio::spawn(write(log.clone(), writer, env.backend)))
        .collect();
    let mut committed = HashSet::new();
    for writer in writers {
        committed.extend(writer.await.expect("writer"));
    }
    let head = log.head_cursor().await.expect("the heads");
    finished.send_replace(Some(head.clone()));
    let deadline = Instant::now() + CATCH_UP;

    // What the log holds once quiet: every committed append, nothing else,
    // each show's in the order of its positions.
    let mut log_order = ByShow::new();
    for show in 0..SHOWS {
        let show = format!("reader{show}");
        let events = log
            .read_log(LogFilter::Show(&show), start.of(&show), APPENDS as i64)
            .await
            .expect("the show's events");
        let positions: Vec<i64> = events.iter().map(|e| e.position).collect();
        assert!(
            positions.windows(2).all(|w| w[0] < w[1]),
            "{show}'s positions only grow"
        );
        log_order.insert(
            show,
            events
                .into_iter()
                .map(|e| (e.position, e.aggregate_id))
                .collect(),
        );
    }
    let written: Vec<&(i64, String)> = log_order.values().flatten().collect();
    let streams: HashSet<&String> = written.iter().map(|(_, stream)| stream).collect();
    assert_eq!(
        written.len(),
        committed.len(),
        "one event per committed append"
    );
    assert_eq!(
        streams,
        committed.iter().collect(),
        "the committed appends, none rolled back"
    );
    assert!(
        committed.len() < APPENDS && committed.len() > APPENDS * 9 / 10,
        "{} of {APPENDS} committed: a twentieth roll back",
        committed.len()
    );

    for reader in readers.into_iter().chain(head_readers) {
        let seen = reached_head(reader, deadline).await;
        assert_eq!(
            seen, log_order,
            "each committed event once, each show's in its order"
        );
    }

    // The projector, a reader with a checkpoint, applied every one, and its
    // read models are what a replay of the log makes.
    let pass = app.projector.run_once().await.expect("projector");
    // (Its own batches take positions of their shows for the rows they
    // rewrite, so it may stand past the heads the writers left.)
    assert!(
        (0..SHOWS).all(|show| {
            let show = format!("reader{show}");
            pass.cursor.of(&show) >= head.of(&show)
        }),
        "the projector reached the heads: {:?}, heads {head:?}",
        pass.cursor
    );
    if let Some(mut foreign) = foreign {
        let open: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND backend_xid IS NOT NULL",
        )
        .bind(foreign.pid)
        .fetch_one(&mut foreign.watcher)
        .await
        .expect("the other database's transaction");
        assert_eq!(
            open, 1,
            "the other database's transaction was open throughout"
        );
        sqlx::query("ROLLBACK")
            .execute(&mut foreign.connection)
            .await
            .expect("rollback");
    }
    let (code, report) = crate::audit::verify_exit_code(&app);
    assert_eq!(code, 0, "replay equals the live read models: {report}");
    let held = app.seat_statuses("reader0").await;
    let expected = committed
        .iter()
        .filter(|s| s.starts_with("reader0/"))
        .count();
    assert_eq!(held.values().filter(|s| *s == "held").count(), expected);
    app.stop().await;
}
