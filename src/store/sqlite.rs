//! The SQLite append: each part of the document in one set-based statement
//! (`json_each`), with the same semantics as `booking_append` on PostgreSQL:
//! every row guarded, hold records moving from `held` once. One task commits
//! the appends that queued up meanwhile together.

use super::batch::AppendOutcome;
use super::document::{to_json, Document};
use super::StoreError;

const EVENTS: &str = "INSERT INTO events \
       (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id, \
        rows_written) \
     SELECT e.value ->> 'aggregate_type', e.value ->> 'aggregate_id', e.value ->> 'sequence', \
            e.value ->> 'event_type', e.value ->> 'event_version', e.value -> 'payload', e.value -> 'metadata', \
            $2, e.value ->> 'show_id', $3 \
     FROM json_each($1) e WHERE true ORDER BY e.key \
     ON CONFLICT DO NOTHING";
const IDEMPOTENCY_KEY: &str = "INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us) \
     SELECT $1 ->> 'buyer', $1 ->> 'key', $1 ->> 'request_hash', $1 ->> 'hold_id', $1 ->> 'created_at_us' \
     WHERE true ON CONFLICT DO NOTHING";
const CHECKPOINT: &str = "UPDATE projector_checkpoints \
     SET position = $1 ->> 'to_position', updated_at_us = $2 \
     WHERE name = $1 ->> 'name' AND position = $1 ->> 'from_position'";
const SEAT_AVAILABILITY: &str = "UPDATE seat_availability AS a SET \
       status = u.value ->> 'status', hold_id = u.value ->> 'hold_id', buyer = u.value ->> 'buyer', \
       expires_at_us = u.value ->> 'expires_at_us', booking_id = u.value ->> 'booking_id', \
       last_seq = u.value ->> 'last_seq' \
     FROM json_each($1) u \
     WHERE a.show_id = u.value ->> 'show_id' AND a.seat_id = u.value ->> 'seat_id' \
       AND a.last_seq < u.value ->> 'last_seq'";
const POOL_SHARDS: &str =
    "UPDATE pool_shards AS s SET sold = u.value ->> 'sold', last_seq = u.value ->> 'last_seq' \
     FROM json_each($1) u \
     WHERE s.show_id = u.value ->> 'show_id' AND s.pool_id = u.value ->> 'pool_id' \
       AND s.shard = u.value ->> 'shard' AND s.last_seq < u.value ->> 'last_seq'";
const HOLDS: &str = "INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'buyer', h.value ->> 'expires_at_us', \
            h.value ->> 'state', h.value ->> 'booking_id', h.value ->> 'pool_id' \
     FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const HOLD_SEATS: &str = "INSERT INTO hold_seats (hold_id, seat_id) \
     SELECT h.value ->> 'hold_id', h.value ->> 'seat_id' FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const POOL_HOLDS: &str = "INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'pool_id', h.value ->> 'shard', \
            h.value ->> 'quantity', h.value ->> 'expires_at_us', h.value ->> 'state' \
     FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
const END_HOLDS: &str = "UPDATE holds AS h SET state = u.value ->> 'state' FROM json_each($1) u \
     WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'";
const END_POOL_HOLDS: &str =
    "UPDATE pool_holds AS p SET state = u.value ->> 'state' FROM json_each($1) u \
     WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'";
const CONVERT_HOLDS: &str =
    "UPDATE holds AS h SET state = 'converted', booking_id = u.value ->> 'booking_id' \
     FROM json_each($1) u WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'";
const CONVERT_POOL_HOLDS: &str =
    "UPDATE pool_holds AS p SET state = 'converted' FROM json_each($1) u \
     WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'";
/// One update per hold, to the latest expiry the part names (a part may
/// name a hold once per unit).
const EXTEND_HOLDS: &str = "UPDATE holds AS h SET expires_at_us = u.expires_at_us \
     FROM (SELECT e.value ->> 'hold_id' AS hold_id, max(e.value ->> 'expires_at_us') AS expires_at_us \
           FROM json_each($1) e GROUP BY 1) u \
     WHERE h.hold_id = u.hold_id AND h.state = 'held' AND h.expires_at_us < u.expires_at_us";
const EXTEND_POOL_HOLDS: &str = "UPDATE pool_holds AS p SET expires_at_us = u.expires_at_us \
     FROM (SELECT e.value ->> 'hold_id' AS hold_id, max(e.value ->> 'expires_at_us') AS expires_at_us \
           FROM json_each($1) e GROUP BY 1) u \
     WHERE p.hold_id = u.hold_id AND p.state = 'held' AND p.expires_at_us < u.expires_at_us";
const CHECKOUTS: &str = "INSERT INTO checkouts \
       (hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id, refund_reason, amount_cents, last_seq, updated_at_us) \
     SELECT c.value ->> 'hold_id', c.value ->> 'show_id', c.value ->> 'buyer', c.value ->> 'phase', \
            c.value ->> 'booking_id', c.value ->> 'charge_id', c.value ->> 'refund_id', c.value ->> 'refund_reason', \
            c.value ->> 'amount_cents', c.value ->> 'last_seq', c.value ->> 'updated_at_us' \
     FROM json_each($1) c WHERE true \
     ON CONFLICT (hold_id) DO UPDATE SET \
       phase = excluded.phase, booking_id = excluded.booking_id, charge_id = excluded.charge_id, \
       refund_id = excluded.refund_id, refund_reason = excluded.refund_reason, \
       amount_cents = excluded.amount_cents, last_seq = excluded.last_seq, updated_at_us = excluded.updated_at_us \
     WHERE checkouts.last_seq < excluded.last_seq";

/// A statement that must affect `rows` rows, or the job is refused with `refusal`.
struct Check {
    sql: &'static str,
    json: String,
    rows: u64,
    refusal: AppendOutcome,
    /// Whether `$2` is the batch's time (events, checkpoint).
    timed: bool,
    /// `$3`, the events' `rows_written` (see `Document::rows_written`).
    rows_written: Option<bool>,
}

/// A batch for SQLite: each part serialized once, owned, ready to cross to
/// the appender task.
pub struct SqliteJob {
    recorded_at_us: i64,
    checks: Vec<Check>,
    parts: Vec<(&'static str, String)>,
}

impl SqliteJob {
    pub fn of(doc: &Document<'_>) -> Result<Self, StoreError> {
        let mut checks = Vec::new();
        if !doc.events.is_empty() {
            checks.push(Check {
                sql: EVENTS,
                json: to_json(&doc.events)?,
                rows: doc.events.len() as u64,
                refusal: AppendOutcome::Conflict,
                timed: true,
                rows_written: Some(doc.rows_written),
            });
        }
        if let Some(key) = &doc.idempotency_key {
            checks.push(Check {
                sql: IDEMPOTENCY_KEY,
                json: to_json(key)?,
                rows: 1,
                refusal: AppendOutcome::IdempotencyKeyTaken,
                timed: false,
                rows_written: None,
            });
        }
        if let Some(checkpoint) = &doc.checkpoint {
            checks.push(Check {
                sql: CHECKPOINT,
                json: to_json(checkpoint)?,
                rows: 1,
                refusal: AppendOutcome::CheckpointMoved,
                timed: true,
                rows_written: None,
            });
        }
        let mut parts = Vec::new();
        let mut part = |sql: &'static str, rows: usize, json: Result<String, StoreError>| {
            if rows > 0 {
                parts.push((sql, json?));
            }
            Ok::<(), StoreError>(())
        };
        part(
            SEAT_AVAILABILITY,
            doc.seat_availability.len(),
            to_json(&doc.seat_availability),
        )?;
        part(
            POOL_SHARDS,
            doc.pool_shards.len(),
            to_json(&doc.pool_shards),
        )?;
        part(HOLDS, doc.holds.len(), to_json(&doc.holds))?;
        part(HOLD_SEATS, doc.hold_seats.len(), to_json(&doc.hold_seats))?;
        part(POOL_HOLDS, doc.pool_holds.len(), to_json(&doc.pool_holds))?;
        part(END_HOLDS, doc.hold_ends.len(), to_json(&doc.hold_ends))?;
        part(END_POOL_HOLDS, doc.hold_ends.len(), to_json(&doc.hold_ends))?;
        part(
            CONVERT_HOLDS,
            doc.hold_conversions.len(),
            to_json(&doc.hold_conversions),
        )?;
        part(
            CONVERT_POOL_HOLDS,
            doc.hold_conversions.len(),
            to_json(&doc.hold_conversions),
        )?;
        part(
            EXTEND_HOLDS,
            doc.hold_extensions.len(),
            to_json(&doc.hold_extensions),
        )?;
        part(
            EXTEND_POOL_HOLDS,
            doc.hold_extensions.len(),
            to_json(&doc.hold_extensions),
        )?;
        part(CHECKOUTS, doc.checkouts.len(), to_json(&doc.checkouts))?;
        Ok(Self {
            recorded_at_us: doc.recorded_at_us,
            checks,
            parts,
        })
    }

    /// Writes the job inside the group's transaction, under a savepoint, so
    /// that a refusal or an error undoes this job and no other.
    ///
    /// Some errors (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY, SQLITE_NOMEM, a
    /// trigger's `RAISE(ROLLBACK)`) may make SQLite roll back the whole
    /// transaction itself. Then the savepoint is gone with it, and `ROLLBACK
    /// TO` fails: that, or any failure to end the savepoint, is
    /// [`JobWrite::TransactionLost`], and the group must not go on (a
    /// `SAVEPOINT` outside a transaction would start a new one, and the jobs
    /// before this one, though they ran, are not written).
    pub(super) async fn write(&self, tx: &mut sqlx::SqliteConnection) -> JobWrite {
        if let Err(error) = sqlx::query("SAVEPOINT job").execute(&mut *tx).await {
            return JobWrite::TransactionLost(error);
        }
        let outcome = self.statements(tx).await;
        let end: &[&str] = match &outcome {
            Ok(AppendOutcome::Appended) => &["RELEASE job"],
            _ => &["ROLLBACK TO job", "RELEASE job"],
        };
        for statement in end {
            if let Err(error) = sqlx::query(statement).execute(&mut *tx).await {
                return JobWrite::TransactionLost(outcome.err().unwrap_or(error));
            }
        }
        JobWrite::Done(outcome)
    }

    async fn statements(
        &self,
        tx: &mut sqlx::SqliteConnection,
    ) -> Result<AppendOutcome, sqlx::Error> {
        for check in &self.checks {
            let mut query = sqlx::query(check.sql).bind(&check.json);
            if check.timed {
                query = query.bind(self.recorded_at_us);
            }
            if let Some(rows_written) = check.rows_written {
                query = query.bind(rows_written);
            }
            let done = query.execute(&mut *tx).await?;
            if done.rows_affected() != check.rows {
                return Ok(check.refusal);
            }
        }
        for (sql, json) in &self.parts {
            sqlx::query(sql).bind(json).execute(&mut *tx).await?;
        }
        Ok(AppendOutcome::Appended)
    }
}

/// Appends to SQLite through one task that commits whatever has queued up
/// together: one transaction and one fsync for a group of appends, each in
/// its own savepoint. SQLite has a single writer and, with `synchronous =
/// FULL`, an fsync per commit; without grouping, an onsale would queue on
/// the disk one hold at a time.
pub struct SqliteAppender {
    jobs: tokio::sync::mpsc::Sender<(
        SqliteJob,
        tokio::sync::oneshot::Sender<Result<AppendOutcome, StoreError>>,
    )>,
}

/// Appends committed together at most.
pub const SQLITE_GROUP_COMMIT: usize = 64;

/// Appends waiting for the writer at most; more wait to be queued.
const SQLITE_QUEUE: usize = 4_096;

impl SqliteAppender {
    pub fn start(pool: sqlx::SqlitePool) -> Self {
        let (jobs, mut queue) = tokio::sync::mpsc::channel::<(
            SqliteJob,
            tokio::sync::oneshot::Sender<_>,
        )>(SQLITE_QUEUE);
        tokio::spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut group = vec![first];
                while group.len() < SQLITE_GROUP_COMMIT {
                    match queue.try_recv() {
                        Ok(job) => group.push(job),
                        Err(_) => break,
                    }
                }
                let answers = write_group(&pool, group.iter().map(|(job, _)| job)).await;
                for ((_, reply), answer) in group.into_iter().zip(answers) {
                    let _ = reply.send(answer);
                }
            }
        });
        Self { jobs }
    }

    pub async fn append(&self, job: SqliteJob) -> Result<AppendOutcome, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send((job, reply))
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?
    }
}

/// What writing one job in a group's transaction came to.
pub(super) enum JobWrite {
    /// The job's savepoint was released or rolled back: its outcome, or
    /// the error that undid it (and only it).
    Done(Result<AppendOutcome, sqlx::Error>),
    /// The transaction is gone (or in a state not known): nothing of the
    /// group is written. The error is the job's own, if it had one.
    TransactionLost(sqlx::Error),
}

/// Writes a group of jobs in one transaction and answers each truthfully:
/// its own outcome if the transaction committed; `Unavailable` ("nothing
/// was written, retry") for every job if it did not, except the job whose
/// error ended the transaction, which gets that error.
async fn write_group<'a>(
    pool: &sqlx::SqlitePool,
    jobs: impl ExactSizeIterator<Item = &'a SqliteJob>,
) -> Vec<Result<AppendOutcome, StoreError>> {
    let size = jobs.len();
    let not_written = |why: &str| StoreError::Unavailable(format!("nothing was written: {why}"));
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(error) => {
            return (0..size)
                .map(|_| Err(not_written(&error.to_string())))
                .collect()
        }
    };
    let mut tx = match sqlx::Connection::begin(&mut *conn).await {
        Ok(tx) => tx,
        Err(error) => {
            return (0..size)
                .map(|_| Err(not_written(&error.to_string())))
                .collect()
        }
    };
    let mut outcomes = Vec::with_capacity(size);
    for (i, job) in jobs.enumerate() {
        match job.write(&mut tx).await {
            JobWrite::Done(outcome) => outcomes.push(outcome),
            JobWrite::TransactionLost(error) => {
                let message = error.to_string();
                // Whatever state the transaction is in, this connection
                // is not used again: closing it ends any transaction left.
                drop(tx);
                conn.close_on_drop();
                let mut answers: Vec<_> = (0..i)
                    .map(|_| {
                        Err(not_written(&format!(
                            "the group's transaction was rolled back: {message}"
                        )))
                    })
                    .collect();
                answers.push(Err(StoreError::classify(error)));
                answers.extend((i + 1..size).map(|_| {
                    Err(not_written(&format!(
                        "the group's transaction was rolled back: {message}"
                    )))
                }));
                return answers;
            }
        }
    }
    match tx.commit().await {
        Ok(()) => outcomes
            .into_iter()
            .map(|outcome| outcome.map_err(StoreError::classify))
            .collect(),
        Err(error) => {
            // The commit itself failed: none of the group is written.
            conn.close_on_drop();
            let message = error.to_string();
            (0..size)
                .map(|_| Err(not_written(&format!("the commit failed: {message}"))))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    const INSERT: &str = "INSERT INTO t SELECT value FROM json_each($1)";

    fn job(value: i64) -> SqliteJob {
        SqliteJob {
            recorded_at_us: 0,
            checks: Vec::new(),
            parts: vec![(INSERT, format!("[{value}]"))],
        }
    }

    /// A one-connection pool like the store's writer, with a table `t`
    /// whose trigger fails the insert of 13 (`RAISE(ABORT)`: the statement
    /// only) and of 666 (`RAISE(ROLLBACK)`: the whole transaction, as SQLite
    /// may do itself on SQLITE_FULL or SQLITE_IOERR).
    async fn writer(dir: &tempfile::TempDir) -> sqlx::SqlitePool {
        let url = format!("sqlite://{}", dir.path().join("db").display());
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
            .unwrap()
            .create_if_missing(true);
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .unwrap();
        for statement in [
            "CREATE TABLE t (x INTEGER)",
            "CREATE TRIGGER abort BEFORE INSERT ON t WHEN NEW.x = 13 \
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
            "CREATE TRIGGER rollback BEFORE INSERT ON t WHEN NEW.x = 666 \
             BEGIN SELECT RAISE(ROLLBACK, 'the transaction is gone'); END",
        ] {
            sqlx::query(statement).execute(&pool).await.unwrap();
        }
        pool
    }

    async fn written(pool: &sqlx::SqlitePool) -> Vec<i64> {
        sqlx::query_scalar("SELECT x FROM t ORDER BY x")
            .fetch_all(pool)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_member_whose_statement_fails_is_the_only_one_undone() {
        let dir = tempfile::tempdir().unwrap();
        let pool = writer(&dir).await;
        let jobs = [job(1), job(13), job(3)];
        let answers = write_group(&pool, jobs.iter()).await;
        assert!(matches!(answers[0], Ok(AppendOutcome::Appended)));
        assert!(
            matches!(answers[1], Err(StoreError::Database(_))),
            "{:?}",
            answers[1]
        );
        assert!(matches!(answers[2], Ok(AppendOutcome::Appended)));
        assert_eq!(written(&pool).await, [1, 3]);
    }

    #[tokio::test]
    async fn a_group_whose_transaction_sqlite_rolled_back_reports_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let pool = writer(&dir).await;
        let jobs = [job(1), job(666), job(3)];
        let answers = write_group(&pool, jobs.iter()).await;
        assert!(
            matches!(answers[0], Err(StoreError::Unavailable(_))),
            "{:?}",
            answers[0]
        );
        assert!(answers[1].is_err());
        assert!(
            matches!(answers[2], Err(StoreError::Unavailable(_))),
            "{:?}",
            answers[2]
        );
        assert_eq!(
            written(&pool).await,
            Vec::<i64>::new(),
            "no member was written"
        );
        // The writer is usable again: the next group commits.
        let jobs = [job(4), job(5)];
        let answers = write_group(&pool, jobs.iter()).await;
        assert!(answers
            .iter()
            .all(|a| matches!(a, Ok(AppendOutcome::Appended))));
        assert_eq!(written(&pool).await, [4, 5]);
    }
}
