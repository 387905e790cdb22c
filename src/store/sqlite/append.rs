//! The SQLite append: each part of the document in one set-based statement
//! (`json_each`), with the same semantics as `booking_append` on PostgreSQL:
//! every row guarded, hold records moving from `held` once. One task commits
//! the appends that queued up meanwhile together, in one statement per table
//! for the whole group (`write_together`): SQLite has one writer, and its
//! time per statement, not per row, was what an onsale queued on.

use std::collections::HashSet;

use crate::store::batch::AppendOutcome;
use crate::store::document::{to_json, Document};
use crate::store::StoreError;

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
     SET position = $1 ->> 'to_moves', shows = $1 ->> 'shows', updated_at_us = $2 \
     WHERE name = $1 ->> 'name' AND position = $1 ->> 'from_moves'";
/// Seat and shard rows: the latest of each row a part names (a group may
/// name one twice), guarded by the row's sequence.
const SEAT_AVAILABILITY: &str = "UPDATE seat_availability AS a SET \
       status = u.value ->> 'status', hold_id = u.value ->> 'hold_id', buyer = u.value ->> 'buyer', \
       expires_at_us = u.value ->> 'expires_at_us', booking_id = u.value ->> 'booking_id', \
       channel = u.value ->> 'channel', ticket_type = u.value ->> 'ticket_type', \
       price_cents = u.value ->> 'price_cents', last_seq = u.value ->> 'last_seq' \
     FROM (SELECT value, max(value ->> 'last_seq') FROM json_each($1) \
           GROUP BY value ->> 'show_id', value ->> 'seat_id') u \
     WHERE a.show_id = u.value ->> 'show_id' AND a.seat_id = u.value ->> 'seat_id' \
       AND a.last_seq < u.value ->> 'last_seq'";
const POOL_SHARDS: &str =
    "UPDATE pool_shards AS s SET sold = u.value ->> 'sold', allocated = u.value ->> 'allocated', \
       sales = u.value ->> 'sales', returned = u.value ->> 'returned', \
       last_seq = u.value ->> 'last_seq' \
     FROM (SELECT value, max(value ->> 'last_seq') FROM json_each($1) \
           GROUP BY value ->> 'show_id', value ->> 'pool_id', value ->> 'shard') u \
     WHERE s.show_id = u.value ->> 'show_id' AND s.pool_id = u.value ->> 'pool_id' \
       AND s.shard = u.value ->> 'shard' AND s.last_seq < u.value ->> 'last_seq'";
/// A hold's row; one already there (a projector batch that ended inside
/// the hold's placement) takes the union of the seats and of the items.
const HOLDS: &str = "INSERT INTO holds (hold_id, show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'buyer', h.value ->> 'expires_at_us', \
            h.value ->> 'state', h.value ->> 'booking_id', h.value ->> 'pool_id', h.value ->> 'seat_ids', \
            h.value ->> 'items' \
     FROM json_each($1) h WHERE true \
     ON CONFLICT (hold_id) DO UPDATE SET seat_ids = \
       (SELECT json_group_array(value) FROM \
          (SELECT value FROM json_each(holds.seat_ids) UNION SELECT value FROM json_each(excluded.seat_ids) \
           ORDER BY value)), \
       items = \
       (SELECT json_group_array(json(value)) FROM \
          (SELECT value FROM json_each(holds.items) UNION SELECT value FROM json_each(excluded.items) \
           ORDER BY value)) \
     WHERE excluded.seat_ids <> '[]' OR excluded.items <> '[]'";
const POOL_HOLDS: &str = "INSERT INTO pool_holds (hold_id, show_id, pool_id, shard, quantity, expires_at_us, state, \
                            channel, ticket_type, price_cents) \
     SELECT h.value ->> 'hold_id', h.value ->> 'show_id', h.value ->> 'pool_id', h.value ->> 'shard', \
            h.value ->> 'quantity', h.value ->> 'expires_at_us', h.value ->> 'state', \
            h.value ->> 'channel', h.value ->> 'ticket_type', h.value ->> 'price_cents' \
     FROM json_each($1) h WHERE true ON CONFLICT DO NOTHING";
/// A part's first row for each hold it names: a hold ends or converts once,
/// and the first of a group's members to say so is the one that did (rows
/// named twice in one `UPDATE ... FROM` would update with either).
macro_rules! first_per_hold {
    () => {
        "(SELECT value, min(key) FROM json_each($1) GROUP BY value ->> 'hold_id') u"
    };
}
const END_HOLDS: &str = concat!(
    "UPDATE holds AS h SET state = u.value ->> 'state' FROM ",
    first_per_hold!(),
    " WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'"
);
const END_POOL_HOLDS: &str = concat!(
    "UPDATE pool_holds AS p SET state = u.value ->> 'state' FROM ",
    first_per_hold!(),
    " WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'"
);
const CONVERT_HOLDS: &str = concat!(
    "UPDATE holds AS h SET state = 'converted', booking_id = u.value ->> 'booking_id' FROM ",
    first_per_hold!(),
    " WHERE h.hold_id = u.value ->> 'hold_id' AND h.state = 'held'"
);
const CONVERT_POOL_HOLDS: &str = concat!(
    "UPDATE pool_holds AS p SET state = 'converted' FROM ",
    first_per_hold!(),
    " WHERE p.hold_id = u.value ->> 'hold_id' AND p.state = 'held'"
);
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

/// The parts of a document that decide whether it is written, each with
/// what the group writer needs to decide it without writing first.
struct Events {
    json: String,
    /// `(aggregate_type, aggregate_id, sequence)` of each event: two members
    /// of one group may not take the same one.
    keys: Vec<(&'static str, String, i64)>,
}

struct Key {
    json: String,
    buyer: String,
    key: String,
}

/// The parts that follow the checks, in the order a document writes them
/// (records inserted before they end, are converted or extended). A job's
/// parts are a subsequence of this list, and a group writes each in one
/// statement, in this order.
const PARTS: [&str; 11] = [
    SEAT_AVAILABILITY,
    POOL_SHARDS,
    HOLDS,
    POOL_HOLDS,
    END_HOLDS,
    END_POOL_HOLDS,
    CONVERT_HOLDS,
    CONVERT_POOL_HOLDS,
    EXTEND_HOLDS,
    EXTEND_POOL_HOLDS,
    CHECKOUTS,
];

/// The document's parts that have rows, each with its statement, in the
/// order of [`PARTS`].
fn parts_of(doc: &Document<'_>) -> Result<Vec<(&'static str, String)>, StoreError> {
    let parts = [
        (
            SEAT_AVAILABILITY,
            doc.seat_availability.len(),
            to_json(&doc.seat_availability),
        ),
        (
            POOL_SHARDS,
            doc.pool_shards.len(),
            to_json(&doc.pool_shards),
        ),
        (HOLDS, doc.holds.len(), to_json(&doc.holds)),
        (POOL_HOLDS, doc.pool_holds.len(), to_json(&doc.pool_holds)),
        (END_HOLDS, doc.hold_ends.len(), to_json(&doc.hold_ends)),
        (END_POOL_HOLDS, doc.hold_ends.len(), to_json(&doc.hold_ends)),
        (
            CONVERT_HOLDS,
            doc.hold_conversions.len(),
            to_json(&doc.hold_conversions),
        ),
        (
            CONVERT_POOL_HOLDS,
            doc.hold_conversions.len(),
            to_json(&doc.hold_conversions),
        ),
        (
            EXTEND_HOLDS,
            doc.hold_extensions.len(),
            to_json(&doc.hold_extensions),
        ),
        (
            EXTEND_POOL_HOLDS,
            doc.hold_extensions.len(),
            to_json(&doc.hold_extensions),
        ),
        (CHECKOUTS, doc.checkouts.len(), to_json(&doc.checkouts)),
    ];
    parts
        .into_iter()
        .filter(|(_, rows, _)| *rows > 0)
        .map(|(sql, _, json)| Ok((sql, json?)))
        .collect()
}

/// A batch for SQLite: each part serialized once, owned, ready to cross to
/// the appender task.
pub struct SqliteJob {
    recorded_at_us: i64,
    /// Refused (`Late`) if the writer reaches it after this instant.
    commit_by_us: Option<i64>,
    /// The events' `rows_written` (see `Document::rows_written`).
    rows_written: bool,
    events: Option<Events>,
    idempotency_key: Option<Key>,
    checkpoint: Option<String>,
    parts: Vec<(&'static str, String)>,
}

impl SqliteJob {
    pub fn of(doc: &Document<'_>) -> Result<Self, StoreError> {
        let events = if doc.events.is_empty() {
            None
        } else {
            Some(Events {
                json: to_json(&doc.events)?,
                keys: doc
                    .events
                    .iter()
                    .map(|e| (e.aggregate_type, e.aggregate_id.clone(), e.sequence))
                    .collect(),
            })
        };
        let idempotency_key = doc
            .idempotency_key
            .map(|key| {
                Ok::<_, StoreError>(Key {
                    json: to_json(key)?,
                    buyer: key.buyer.as_str().to_owned(),
                    key: key.key.as_str().to_owned(),
                })
            })
            .transpose()?;
        Ok(Self {
            recorded_at_us: doc.recorded_at_us,
            commit_by_us: doc.commit_by_us,
            rows_written: doc.rows_written,
            events,
            idempotency_key,
            checkpoint: doc.checkpoint.map(to_json).transpose()?,
            parts: parts_of(doc)?,
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
    pub(crate) async fn write(&self, tx: &mut sqlx::SqliteConnection) -> JobWrite {
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

    /// Whether the writer reached the job after its `commit_by_us`, on this
    /// process's clock (one machine's: the instances' clocks are kept in
    /// step, as read-time expiry already assumes). The group commits
    /// within the same write, milliseconds later.
    fn is_late(&self) -> bool {
        self.commit_by_us
            .is_some_and(|by| projections::time::to_micros(chrono::Utc::now()) > by)
    }

    /// The job's statements alone: each check must affect its rows, or the
    /// job is refused (the caller undoes what the checks before it wrote).
    async fn statements(
        &self,
        tx: &mut sqlx::SqliteConnection,
    ) -> Result<AppendOutcome, sqlx::Error> {
        if self.is_late() {
            return Ok(AppendOutcome::Late);
        }
        if let Some(events) = &self.events {
            let done = sqlx::query(EVENTS)
                .bind(&events.json)
                .bind(self.recorded_at_us)
                .bind(self.rows_written)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != events.keys.len() as u64 {
                return Ok(AppendOutcome::Conflict);
            }
        }
        if let Some(key) = &self.idempotency_key {
            let done = sqlx::query(IDEMPOTENCY_KEY)
                .bind(&key.json)
                .execute(&mut *tx)
                .await?;
            if done.rows_affected() != 1 {
                return Ok(AppendOutcome::IdempotencyKeyTaken);
            }
        }
        if let Some(checkpoint) = &self.checkpoint {
            if !move_checkpoint(tx, checkpoint, self.recorded_at_us).await? {
                return Ok(AppendOutcome::CheckpointMoved);
            }
        }
        for (sql, json) in &self.parts {
            sqlx::query(sql).bind(json).execute(&mut *tx).await?;
        }
        Ok(AppendOutcome::Appended)
    }
}

async fn move_checkpoint(
    tx: &mut sqlx::SqliteConnection,
    checkpoint: &str,
    at_us: i64,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(CHECKPOINT)
        .bind(checkpoint)
        .bind(at_us)
        .execute(&mut *tx)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The members of a group whose events meet an event already in the log
/// (`$1`: one array of events per member; answers the members' indexes).
const EVENTS_IN_LOG: &str = "SELECT DISTINCT j.key FROM json_each($1) j, json_each(j.value) e \
     WHERE EXISTS (SELECT 1 FROM events v WHERE v.aggregate_type = e.value ->> 'aggregate_type' \
       AND v.aggregate_id = e.value ->> 'aggregate_id' AND v.sequence = e.value ->> 'sequence')";
/// The members whose idempotency key is already taken (`$1`: one key per member).
const KEYS_TAKEN: &str = "SELECT j.key FROM json_each($1) j \
     WHERE EXISTS (SELECT 1 FROM idempotency_keys k \
       WHERE k.buyer = j.value ->> 'buyer' AND k.key = j.value ->> 'key')";
/// The events of a group's written members, in the group's order (`$1`:
/// `[recorded_at_us, rows_written, events]` per member). No conflict is left
/// to meet: the group checked them all. Each member's two numbers are read
/// once (a materialized CTE): read per event from the member's value, they
/// cost a translation of the member's whole JSON each, quadratic in its
/// events (an allocation of 5,000 seats took 17 s; measured with perf,
/// `jsonTranslateBlobToText`).
const GROUP_EVENTS: &str = "WITH m AS MATERIALIZED (SELECT j.key AS k, j.value ->> 0 AS recorded_at_us, \
       j.value ->> 1 AS rows_written, j.value -> 2 AS events FROM json_each($1) j) \
     INSERT INTO events \
       (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id, \
        rows_written) \
     SELECT e.value ->> 'aggregate_type', e.value ->> 'aggregate_id', e.value ->> 'sequence', \
            e.value ->> 'event_type', e.value ->> 'event_version', e.value -> 'payload', e.value -> 'metadata', \
            m.recorded_at_us, e.value ->> 'show_id', m.rows_written \
     FROM m, json_each(m.events) e ORDER BY m.k, e.key";
const GROUP_KEYS: &str = "INSERT INTO idempotency_keys (buyer, key, request_hash, hold_id, created_at_us) \
     SELECT k.value ->> 'buyer', k.value ->> 'key', k.value ->> 'request_hash', k.value ->> 'hold_id', \
            k.value ->> 'created_at_us' \
     FROM json_each($1) k";

/// JSON values as one array (`a`, `b` into `[a,b]`).
fn array_of<'a>(values: impl Iterator<Item = &'a str>) -> String {
    let mut array = String::from("[");
    for value in values {
        if array.len() > 1 {
            array.push(',');
        }
        array.push_str(value);
    }
    array.push(']');
    array
}

/// JSON arrays as one (`[a,b]`, `[c]` into `[a,b,c]`).
fn concat_arrays<'a>(arrays: impl Iterator<Item = &'a str>) -> String {
    array_of(arrays.filter_map(|array| {
        let inner = array.trim().strip_prefix('[')?.strip_suffix(']')?.trim();
        (!inner.is_empty()).then_some(inner)
    }))
}

/// The members that `lookup` finds: it gets one JSON value per member that
/// has a `part` (an array of them) and answers the indexes of those it
/// found in that array.
async fn members_found(
    tx: &mut sqlx::SqliteConnection,
    lookup: &str,
    jobs: &[&SqliteJob],
    part: impl Fn(&SqliteJob) -> Option<&str>,
) -> Result<HashSet<usize>, sqlx::Error> {
    let with: Vec<(usize, &str)> = jobs
        .iter()
        .enumerate()
        .filter_map(|(i, job)| Some((i, part(job)?)))
        .collect();
    if with.is_empty() {
        return Ok(HashSet::new());
    }
    let found: Vec<i64> = sqlx::query_scalar(lookup)
        .bind(array_of(with.iter().map(|(_, json)| *json)))
        .fetch_all(&mut *tx)
        .await?;
    Ok(found
        .into_iter()
        .filter_map(|n| with.get(usize::try_from(n).ok()?).map(|(i, _)| *i))
        .collect())
}

/// Writes a group in one statement per table: the checks of every member
/// first (each refusal decided as if the members were written one after
/// the other, in order), then each table's rows of the members written.
/// `Ok(None)` for a member written; an error undoes nothing by itself (the
/// caller rolls the transaction back and writes the members one by one).
async fn write_together(
    tx: &mut sqlx::SqliteConnection,
    jobs: &[&SqliteJob],
) -> Result<Vec<Option<AppendOutcome>>, sqlx::Error> {
    let outcomes = refusals(tx, jobs).await?;
    let written: Vec<&SqliteJob> = jobs
        .iter()
        .zip(&outcomes)
        .filter(|(_, outcome)| outcome.is_none())
        .map(|(job, _)| *job)
        .collect();
    write_members(tx, &written).await?;
    Ok(outcomes)
}

/// Each member's refusal, `None` for one to write: decided as if the
/// members were written one after the other, in order (an event or a key
/// an earlier member takes refuses a later one). Only a checkpoint's move,
/// the last check, writes.
async fn refusals(
    tx: &mut sqlx::SqliteConnection,
    jobs: &[&SqliteJob],
) -> Result<Vec<Option<AppendOutcome>>, sqlx::Error> {
    let in_log = members_found(tx, EVENTS_IN_LOG, jobs, |job| {
        job.events.as_ref().map(|e| e.json.as_str())
    })
    .await?;
    let taken = members_found(tx, KEYS_TAKEN, jobs, |job| {
        job.idempotency_key.as_ref().map(|k| k.json.as_str())
    })
    .await?;

    let mut outcomes = Vec::with_capacity(jobs.len());
    let mut streams: HashSet<(&str, &str, i64)> = HashSet::new();
    let mut keys: HashSet<(&str, &str)> = HashSet::new();
    for (i, job) in jobs.iter().enumerate() {
        let event_keys = job.events.iter().flat_map(|e| &e.keys);
        let outcome = if job.is_late() {
            Some(AppendOutcome::Late)
        } else if in_log.contains(&i)
            || event_keys
                .clone()
                .any(|(t, id, seq)| streams.contains(&(*t, id.as_str(), *seq)))
        {
            Some(AppendOutcome::Conflict)
        } else if job.idempotency_key.as_ref().is_some_and(|k| {
            taken.contains(&i) || keys.contains(&(k.buyer.as_str(), k.key.as_str()))
        }) {
            Some(AppendOutcome::IdempotencyKeyTaken)
        } else if let Some(checkpoint) = &job.checkpoint {
            // The last check, and the only one that writes: a member that
            // passes it is written.
            (!move_checkpoint(tx, checkpoint, job.recorded_at_us).await?)
                .then_some(AppendOutcome::CheckpointMoved)
        } else {
            None
        };
        if outcome.is_none() {
            streams.extend(event_keys.map(|(t, id, seq)| (*t, id.as_str(), *seq)));
            if let Some(k) = &job.idempotency_key {
                keys.insert((k.buyer.as_str(), k.key.as_str()));
            }
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}

/// The written members' events, keys and parts: one statement per table.
async fn write_members(
    tx: &mut sqlx::SqliteConnection,
    written: &[&SqliteJob],
) -> Result<(), sqlx::Error> {
    let events: Vec<String> = written
        .iter()
        .filter_map(|job| {
            let events = job.events.as_ref()?;
            Some(format!(
                "[{},{},{}]",
                job.recorded_at_us, job.rows_written, events.json
            ))
        })
        .collect();
    if !events.is_empty() {
        sqlx::query(GROUP_EVENTS)
            .bind(array_of(events.iter().map(String::as_str)))
            .execute(&mut *tx)
            .await?;
    }
    if written.iter().any(|job| job.idempotency_key.is_some()) {
        let json = array_of(
            written
                .iter()
                .filter_map(|job| job.idempotency_key.as_ref().map(|k| k.json.as_str())),
        );
        sqlx::query(GROUP_KEYS).bind(json).execute(&mut *tx).await?;
    }
    let rank = |sql: &str| PARTS.iter().position(|p| *p == sql).unwrap_or(PARTS.len());
    let mut statements: Vec<&'static str> = written
        .iter()
        .flat_map(|job| job.parts.iter().map(|(sql, _)| *sql))
        .collect();
    statements.sort_by_key(|sql| rank(sql));
    statements.dedup();
    for sql in statements {
        let json = concat_arrays(written.iter().flat_map(|job| {
            job.parts
                .iter()
                .filter(move |(s, _)| *s == sql)
                .map(|(_, json)| json.as_str())
        }));
        sqlx::query(sql).bind(json).execute(&mut *tx).await?;
    }
    Ok(())
}

/// Appends to SQLite through one task that commits whatever has queued up
/// together: one transaction, one fsync and one statement per table for a
/// group of appends (`write_group`). SQLite has a single writer and, with `synchronous =
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
                let jobs: Vec<&SqliteJob> = group.iter().map(|(job, _)| job).collect();
                let answers = write_group(&pool, &jobs).await;
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
pub(crate) enum JobWrite {
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
///
/// The group is first written together, one statement per table
/// ([`write_together`]). A statement that fails there fails for the whole
/// group, and one member's bad row must not be its neighbours' error: then
/// the transaction is rolled back and the members are written again one by
/// one, each under a savepoint ([`write_one_by_one`]), where the error is
/// its own.
pub(crate) async fn write_group(
    pool: &sqlx::SqlitePool,
    jobs: &[&SqliteJob],
) -> Vec<Result<AppendOutcome, StoreError>> {
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(error) => return not_written(jobs.len(), &error.to_string()),
    };
    let mut tx = match sqlx::Connection::begin(&mut *conn).await {
        Ok(tx) => tx,
        Err(error) => return not_written(jobs.len(), &error.to_string()),
    };
    match write_together(&mut tx, jobs).await {
        Ok(outcomes) => {
            return match tx.commit().await {
                Ok(()) => outcomes
                    .into_iter()
                    .map(|outcome| Ok(outcome.unwrap_or(AppendOutcome::Appended)))
                    .collect(),
                Err(error) => {
                    // The commit itself failed: none of the group is written.
                    conn.close_on_drop();
                    not_written(jobs.len(), &format!("the commit failed: {error}"))
                }
            };
        }
        Err(_) => {
            if tx.rollback().await.is_err() {
                // SQLite may have ended the transaction itself; a
                // connection in a state not known is not used again.
                conn.close_on_drop();
                drop(conn);
                conn = match pool.acquire().await {
                    Ok(conn) => conn,
                    Err(error) => return not_written(jobs.len(), &error.to_string()),
                };
            }
        }
    }
    write_one_by_one(&mut conn, jobs).await
}

fn not_written(size: usize, why: &str) -> Vec<Result<AppendOutcome, StoreError>> {
    (0..size)
        .map(|_| {
            Err(StoreError::Unavailable(format!(
                "nothing was written: {why}"
            )))
        })
        .collect()
}

/// The group in one transaction, each member under a savepoint of its own.
async fn write_one_by_one(
    conn: &mut sqlx::pool::PoolConnection<sqlx::Sqlite>,
    jobs: &[&SqliteJob],
) -> Vec<Result<AppendOutcome, StoreError>> {
    let size = jobs.len();
    let mut tx = match sqlx::Connection::begin(&mut **conn).await {
        Ok(tx) => tx,
        Err(error) => return not_written(size, &error.to_string()),
    };
    let mut outcomes = Vec::with_capacity(size);
    for (i, job) in jobs.iter().enumerate() {
        match job.write(&mut tx).await {
            JobWrite::Done(outcome) => outcomes.push(outcome),
            JobWrite::TransactionLost(error) => {
                let message = format!("the group's transaction was rolled back: {error}");
                // Whatever state the transaction is in, this connection
                // is not used again: closing it ends any transaction left.
                drop(tx);
                conn.close_on_drop();
                let mut answers = not_written(size, &message);
                answers[i] = Err(StoreError::classify(error));
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
            not_written(size, &format!("the commit failed: {error}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use domain::ids::{BuyerId, HoldId, IdempotencyKey, ShowId};
    use serde_json::value::RawValue;
    use uuid::Uuid;

    use super::*;
    use crate::store::batch::{IdempotencyKeyRow, NewEvent};

    const INSERT: &str = "INSERT INTO t SELECT value FROM json_each($1)";

    fn job(value: i64) -> SqliteJob {
        SqliteJob {
            recorded_at_us: 0,
            commit_by_us: None,
            rows_written: false,
            events: None,
            idempotency_key: None,
            checkpoint: None,
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

    fn event(stream: &str, sequence: i64) -> NewEvent {
        NewEvent {
            aggregate_type: "Seat",
            aggregate_id: stream.to_owned(),
            sequence,
            event_type: "HoldPlaced".to_owned(),
            event_version: "1.0".to_owned(),
            payload: RawValue::from_string("{}".to_owned()).unwrap(),
            metadata: RawValue::from_string("{}".to_owned()).unwrap(),
            show_id: ShowId::parse("show").unwrap(),
        }
    }

    fn key(key: &str) -> IdempotencyKeyRow {
        IdempotencyKeyRow {
            buyer: BuyerId::parse("buyer").unwrap(),
            key: IdempotencyKey::parse(key).unwrap(),
            request_hash: String::new(),
            hold_id: HoldId(Uuid::new_v4()),
            created_at_us: 1,
        }
    }

    fn command(events: &[NewEvent], key: Option<&IdempotencyKeyRow>) -> SqliteJob {
        SqliteJob::of(&Document {
            recorded_at_us: 1,
            events: events.iter().collect(),
            idempotency_key: key,
            rows_written: true,
            ..Document::default()
        })
        .unwrap()
    }

    /// The group is written in one statement per table, and each member is
    /// refused as it would have been written alone after the ones before
    /// it: at an event the log holds, at an event a member before it took,
    /// at an idempotency key a member before it took; the rest are written.
    #[tokio::test]
    async fn a_group_written_together_refuses_each_member_as_if_written_in_turn() {
        let dir = tempfile::tempdir().unwrap();
        let pool = writer(&dir).await;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .unwrap();
        let logged = [event("s-1", 1)];
        let answers = write_group(&pool, &[&command(&logged, None)]).await;
        assert!(matches!(answers[..], [Ok(AppendOutcome::Appended)]));

        let (k1, k2) = (key("k1"), key("k2"));
        let (e2, e1, e32, e4, e5) = (
            [event("s-2", 1)],
            [event("s-1", 1)],
            [event("s-3", 1), event("s-2", 1)],
            [event("s-4", 1)],
            [event("s-5", 1)],
        );
        let jobs = [
            command(&e2, Some(&k1)),
            command(&e1, None),
            command(&e32, None),
            command(&e4, Some(&k1)),
            command(&e5, Some(&k2)),
        ];
        let answers = write_group(&pool, &jobs.iter().collect::<Vec<_>>()).await;
        let answers: Vec<_> = answers.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            answers,
            [
                AppendOutcome::Appended,
                AppendOutcome::Conflict,
                AppendOutcome::Conflict,
                AppendOutcome::IdempotencyKeyTaken,
                AppendOutcome::Appended,
            ]
        );
        let log: Vec<(String, i64)> =
            sqlx::query_as("SELECT aggregate_id, recorded_at_us FROM events ORDER BY position")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(
            log,
            [
                ("s-1".to_owned(), 1),
                ("s-2".to_owned(), 1),
                ("s-5".to_owned(), 1)
            ]
        );
        let keys: Vec<(String, String)> =
            sqlx::query_as("SELECT key, hold_id FROM idempotency_keys ORDER BY key")
                .fetch_all(&pool)
                .await
                .unwrap();
        assert_eq!(
            keys,
            [
                ("k1".to_owned(), k1.hold_id.to_string()),
                ("k2".to_owned(), k2.hold_id.to_string())
            ]
        );
    }

    #[tokio::test]
    async fn a_member_whose_statement_fails_is_the_only_one_undone() {
        let dir = tempfile::tempdir().unwrap();
        let pool = writer(&dir).await;
        let jobs = [job(1), job(13), job(3)];
        let answers = write_group(&pool, &jobs.iter().collect::<Vec<_>>()).await;
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
        let answers = write_group(&pool, &jobs.iter().collect::<Vec<_>>()).await;
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
        let answers = write_group(&pool, &jobs.iter().collect::<Vec<_>>()).await;
        assert!(answers
            .iter()
            .all(|a| matches!(a, Ok(AppendOutcome::Appended))));
        assert_eq!(written(&pool).await, [4, 5]);
    }
}
