//! The PostgreSQL append: the commands that arrive together go in one call
//! of `booking_append_group(text, jsonb, int[])`, one transaction and one
//! WAL flush for the group, written set-based ([`PgAppender`]); a command
//! alone, the projector and replay call `booking_append(text, jsonb)`. Both
//! take the document's show first: a database sharded by show delegates the
//! call to the worker that owns it.
//!
//! The functions' bodies live in `sql/postgres/`, applied with `CREATE OR
//! REPLACE` after the migrations at every start ([`install_functions`]):
//! changing what they write is an edit of those files, never a new migration
//! that restates them, and shipped migrations stay byte for byte as they
//! were applied.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use domain::ids::ShowId;
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::store::batch::{AppendOutcome, NewEvent, MAX_EVENTS_PER_BATCH};
use crate::store::document::{Claim, Document};
use crate::store::postgres::primary::Primary;
use crate::store::StoreError;

/// The current definitions of our functions, one statement each.
const FUNCTIONS: [&str; 6] = [
    include_str!("../../../sql/postgres/booking_json_union.sql"),
    include_str!("../../../sql/postgres/booking_upsert_checkouts.sql"),
    include_str!("../../../sql/postgres/booking_take_positions.sql"),
    include_str!("../../../sql/postgres/booking_apply.sql"),
    include_str!("../../../sql/postgres/booking_append.sql"),
    include_str!("../../../sql/postgres/booking_append_group.sql"),
];

/// Functions of earlier versions that no file defines any more, dropped at
/// start (after the current definitions). An instance of the earlier
/// version still running beside this one, mid-upgrade, finds its group
/// function gone: its group fails as an error, and it appends the group's
/// documents one by one (`write_group`), slower but right.
const RETIRED: [&str; 5] = [
    "DROP FUNCTION IF EXISTS booking_append_group(jsonb)",
    // Before the show came first (#49).
    "DROP FUNCTION IF EXISTS booking_append_group(jsonb, int[])",
    "DROP FUNCTION IF EXISTS booking_append(jsonb)",
    // Before positions were per show (#49, migration 0025).
    "DROP FUNCTION IF EXISTS booking_apply(jsonb, bigint, bigint)",
    "DROP FUNCTION IF EXISTS booking_raise_epoch()",
];

/// Serializes instances that start at once against one database: two
/// concurrent `CREATE OR REPLACE` of one function fail with "tuple
/// concurrently updated".
const INSTALL_LOCK_KEY: i64 = 0x626f_6f6b_696e_6701;

/// Applies the functions' current bodies (after the migrations), before the
/// service serves, under one lock, so that instances starting together do
/// it one after another.
pub async fn install_functions(pool: &sqlx::PgPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.map_err(StoreError::classify)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(INSTALL_LOCK_KEY)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::classify)?;
    for function in FUNCTIONS.iter().chain(&RETIRED) {
        sqlx::query(function)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::classify)?;
    }
    tx.commit().await.map_err(StoreError::classify)
}

/// The SQLSTATEs `booking_apply` answers for refusals (not errors), and
/// what each means: the one list, in the order of `booking_apply.sql`,
/// which spells them (a test holds the two equal).
const REFUSALS: [(&str, AppendOutcome); 4] = [
    ("BK408", AppendOutcome::Late),
    ("BK409", AppendOutcome::Conflict),
    ("BK422", AppendOutcome::IdempotencyKeyTaken),
    ("BK412", AppendOutcome::CheckpointMoved),
];

/// The refusal a SQLSTATE stands for, if it is one of ours.
fn refusal_of(code: &str) -> Option<AppendOutcome> {
    REFUSALS
        .iter()
        .find(|(sqlstate, _)| *sqlstate == code)
        .map(|(_, outcome)| *outcome)
}

/// Tables whose unique_violation is a refusal: `booking_apply` checks
/// their primary keys before its plain inserts, and only another
/// transaction's insert of the same key, committed while this one waited
/// for it, gets past the check (booking_apply.sql). Nothing of the call is
/// written. Recognised by SQLSTATE and table, not by the constraint's name:
/// a sharded PostgreSQL (Citus) names a shard's constraint after the shard
/// (`events_pkey_102080`), or none. `events` has one other unique index,
/// on positions, which no refusal touches: a duplicate position is a bug,
/// and is told apart by its index's name (as a prefix, which a shard's
/// suffix keeps).
const REFUSING_TABLES: [(&str, AppendOutcome); 2] = [
    ("events", AppendOutcome::Conflict),
    ("idempotency_keys", AppendOutcome::IdempotencyKeyTaken),
];

/// The unique index on `events.position` (migration 0001).
const POSITION_INDEX: &str = "events_position";

/// The refusal `booking_append` raised, if the error is one.
pub(crate) fn refusal(err: &sqlx::Error) -> Option<AppendOutcome> {
    let err = err.as_database_error()?;
    refusal_in(&RaisedError {
        code: err.code().as_deref(),
        table: err.table(),
        constraint: err.constraint(),
        message: err.message(),
    })
}

/// What an error carries that tells a refusal: its SQLSTATE and, for a
/// unique_violation, the table and constraint if the server named them.
#[derive(Debug, Clone, Copy)]
struct RaisedError<'a> {
    code: Option<&'a str>,
    table: Option<&'a str>,
    constraint: Option<&'a str>,
    message: &'a str,
}

/// The unique_violation SQLSTATE.
const UNIQUE_VIOLATION: &str = "23505";

/// The refusal an error stands for, if it is one. A unique_violation is
/// read by its table, or, where the server did not name it, from its
/// message: Citus 13 passes a worker's unique_violation on with its code
/// and message but no table or constraint (`ReportResultError`: a routed
/// insert, a delegated function), or as `internal_error` with the message
/// alone (`ReportCopyError`: rows copied to a shard). Both were seen on a
/// coordinator and two workers (13.2.2).
fn refusal_in(err: &RaisedError<'_>) -> Option<AppendOutcome> {
    let code = err.code?;
    let unique = code == UNIQUE_VIOLATION;
    if unique {
        if let Some(table) = err.table {
            return unique_refusal(table, err.constraint);
        }
    }
    if unique || code == SHARD_ERROR {
        let (table, constraint) = shard_duplicate(err.message)?;
        return unique_refusal(table, Some(constraint));
    }
    refusal_of(code)
}

/// The SQLSTATE a sharded PostgreSQL (Citus) gives a worker's error that
/// it raises again on the coordinator without a code (`internal_error`):
/// among them a shard's unique_violation met while it copies rows to the
/// shard (`ReportCopyError` in Citus's `multi_copy.c`), with the worker's
/// message and no table.
const SHARD_ERROR: &str = "XX000";

/// The start of PostgreSQL's message for a unique_violation, which Citus
/// passes on as it is; the constraint's name follows, quoted. (The
/// server's `lc_messages` must be English, as it is by default, for this
/// to be recognised: otherwise such a duplicate stays an error, a 503.)
const DUPLICATE_MESSAGE: &str = "duplicate key value violates unique constraint \"";

/// `(table, constraint)` of a shard's unique_violation that Citus raised
/// as `internal_error` (`SHARD_ERROR`): the constraint from the message,
/// and the table from a primary key's name (`<table>_pkey`, without the
/// shard's number); for another constraint, its name without the number,
/// which no refusing table has.
fn shard_duplicate(message: &str) -> Option<(&str, &str)> {
    let constraint = message.strip_prefix(DUPLICATE_MESSAGE)?.split('"').next()?;
    let name = unsharded(constraint);
    Some((name.strip_suffix("_pkey").unwrap_or(name), constraint))
}

/// A shard's table or index is named after its own with the shard's
/// number after it (`events_102080`, `events_pkey_102080`): that name.
fn unsharded(name: &str) -> &str {
    name.rsplit_once('_')
        .filter(|(_, suffix)| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
        .map_or(name, |(name, _)| name)
}

/// What a unique_violation on `table` (through `constraint`, if named)
/// means: a refusal, or `None` for an error.
fn unique_refusal(table: &str, constraint: Option<&str>) -> Option<AppendOutcome> {
    if constraint.is_some_and(|name| name.starts_with(POSITION_INDEX)) {
        return None;
    }
    let table = unsharded(table);
    REFUSING_TABLES
        .iter()
        .find(|(name, _)| *name == table)
        .map(|(_, outcome)| *outcome)
}

/// `$1` the document's show ([`Document::show_id`], NULL for one of many
/// shows), `$2` the document.
pub(crate) const APPEND: &str = "SELECT booking_append($1, $2::jsonb)";
const APPEND_GROUP: &str = "SELECT booking_append_group($1, $2::jsonb, $3::int[])";
/// Projection-only batches (the projector, replay) need not wait for their
/// commit to reach the disk: they are derived from the log, and a batch lost
/// in a crash is lost with its checkpoint move, so it is simply redone.
const APPEND_ROWS_ONLY: &str =
    "SELECT set_config('synchronous_commit', 'off', true), booking_append($1, $2::jsonb)";

/// Appends a serialized document of `show` ([`Document::show_id`]) alone.
pub async fn append(
    pool: &sqlx::PgPool,
    show: Option<&ShowId>,
    document: &str,
    rows_only: bool,
) -> Result<AppendOutcome, StoreError> {
    let sql = if rows_only { APPEND_ROWS_ONLY } else { APPEND };
    let show = show.map(ShowId::as_str);
    match sqlx::query(sql)
        .bind(show)
        .bind(document)
        .execute(pool)
        .await
    {
        Ok(_) => Ok(AppendOutcome::Appended),
        Err(err) => match refusal(&err) {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::classify(err)),
        },
    }
}

/// How long an append whose connection broke during its transaction waits
/// for a primary to ask whether it committed ([`settle`]). A planned
/// switchover takes seconds; a crash, what the failover manager's timeouts
/// add up to: pg_auto_failover's defaults, 20 s to declare the primary
/// unhealthy and 30 s of demote timeout, measured 52 s without writes
/// (BENCHMARKS.md), when this was 30 s and such appends answered 503 after
/// it. Past this the buyer is told 503, and a retry with the same
/// idempotency key settles the outcome.
pub const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// Connections lost again while settling, at most, before giving up.
const SETTLE_ATTEMPTS: usize = 3;

/// Settles an append whose connection was lost while it ran: it may have
/// committed, or not, and a buyer must not be told 503 for a hold that
/// exists (nor 201 for one that does not). On the primary reached next
/// (waiting up to [`SETTLE_WITHIN`] for one), the document is appended
/// again. Its events are at fixed sequences, so that cannot write them
/// twice: if the first attempt had committed, the second is refused (a
/// conflict, or the idempotency key), and the batch's first event, found
/// in the log with this payload, says it was ours. If it had not, the
/// second attempt is the append, on the same decision: nothing it read
/// has moved, or the sequences would be taken. (A commit still in flight
/// on the server when the connection broke holds its rows' locks: the
/// second attempt waits for it and then sees it.)
pub async fn settle(
    pool: &sqlx::PgPool,
    primary: &Primary,
    show: Option<&ShowId>,
    document: &str,
    first: &NewEvent,
    lost: String,
) -> Result<AppendOutcome, StoreError> {
    metrics::counter!("appends_in_doubt_total").increment(1);
    tracing::warn!(%lost, "an append lost its connection; settling whether it committed");
    for _ in 0..SETTLE_ATTEMPTS {
        if !primary.wait(SETTLE_WITHIN).await {
            break;
        }
        let settled = match append(pool, show, document, false).await {
            Ok(AppendOutcome::Appended) => Ok(AppendOutcome::Appended),
            Ok(refusal) => match landed(pool, first).await {
                Ok(true) => Ok(AppendOutcome::Appended),
                Ok(false) => Ok(refusal),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        match settled {
            Err(StoreError::ConnectionLost(_) | StoreError::Unavailable(_)) => continue,
            settled => {
                let outcome = match &settled {
                    Ok(AppendOutcome::Appended) => "appended",
                    Ok(_) => "refused",
                    Err(_) => "error",
                };
                metrics::counter!("appends_settled_total", "outcome" => outcome).increment(1);
                return settled;
            }
        }
    }
    metrics::counter!("appends_settled_total", "outcome" => "unknown").increment(1);
    Err(StoreError::ConnectionLost(format!(
        "{lost}; whether the write committed could not be settled: retry with the same idempotency key"
    )))
}

/// Whether `event` is in the log as written (same stream, sequence, type
/// and payload): the mark of a batch that committed.
async fn landed(pool: &sqlx::PgPool, event: &NewEvent) -> Result<bool, StoreError> {
    let found: Option<bool> = sqlx::query_scalar(
        "SELECT event_type = $4 AND payload = $5::jsonb FROM events \
         WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence = $3 AND show_id = $6",
    )
    .bind(event.aggregate_type)
    .bind(&event.aggregate_id)
    .bind(event.sequence)
    .bind(&event.event_type)
    .bind(event.payload.get())
    .bind(event.show_id.as_str())
    .fetch_optional(pool)
    .await
    .map_err(StoreError::classify)?;
    Ok(found == Some(true))
}

/// Commands appended in one transaction at most. The group is what queued
/// while the groups before it were being written (nothing waits to fill
/// one): under light load a command goes alone, at once; in an onsale, one
/// commit and one WAL flush serve up to this many holds.
pub const PG_GROUP_COMMIT: usize = 64;

/// Groups written at once, each on a connection of the command pool. One
/// group runs on one backend, one document after another: a second and a
/// third keep the server's cores busy while a group waits for its flush,
/// and fewer groups in flight make larger groups (fewer commits).
pub const PG_APPENDERS: usize = 3;

/// Appends waiting for an appender at most; more wait to be queued.
const PG_QUEUE: usize = 4_096;

type Reply = oneshot::Sender<Result<AppendOutcome, StoreError>>;

/// One command's append document, waiting for its group.
struct PgJob {
    document: String,
    events: usize,
    /// The show the append is for: a group holds one show, so that on a
    /// log sharded by show a group's transaction stays on one shard.
    show: Option<ShowId>,
    /// What the document takes that another may also take
    /// ([`Document::claims`]).
    claims: Vec<Claim>,
    reply: Reply,
}

impl PgJob {
    /// A document's job, and where its answer will come.
    fn of(
        document: &Document<'_>,
    ) -> Result<(Self, oneshot::Receiver<Result<AppendOutcome, StoreError>>), StoreError> {
        let (reply, answer) = oneshot::channel();
        let job = Self {
            document: document.to_json()?,
            events: document.events.len(),
            show: document.show_id.cloned(),
            claims: document.claims(),
            reply,
        };
        Ok((job, answer))
    }

    /// Appends this job's document alone, through `booking_append`.
    async fn append_alone(&self, pool: &sqlx::PgPool) -> Result<AppendOutcome, StoreError> {
        append(pool, self.show.as_ref(), &self.document, false).await
    }
}

struct Queue {
    jobs: mpsc::Receiver<PgJob>,
    /// Jobs taken from the queue that did not join the last group (another
    /// show's, or its events would have passed [`MAX_EVENTS_PER_BATCH`]),
    /// in arrival order: the next groups start with them. At most
    /// [`PG_QUEUE`], the channel's capacity.
    carried: VecDeque<PgJob>,
}

/// A group to write, and what its documents take from one another.
struct Group {
    jobs: Vec<PgJob>,
    /// `(n, m, code)` triples, flat, in increasing `n`: document `n` takes
    /// what an earlier document `m` takes (1-based), and is refused with
    /// `code` (409: a stream's sequence, 422: a key) if `m` is written.
    /// `booking_append_group` settles them in order, so each document is
    /// refused as if written alone after the ones before it.
    after: Vec<i32>,
    /// Each claim of the group, with the documents that take it.
    claimed: HashMap<Claim, Vec<i32>>,
}

impl Group {
    fn new() -> Self {
        Self {
            jobs: Vec::new(),
            after: Vec::new(),
            claimed: HashMap::new(),
        }
    }

    /// Adds a job, with what it takes from the jobs before it; gives it
    /// back if it would write a hold's row a job of the group writes.
    fn add(&mut self, job: PgJob) -> Result<(), PgJob> {
        let hold_taken = (job.claims.iter())
            .any(|c| matches!(c, Claim::Hold(_)) && self.claimed.contains_key(c));
        if hold_taken {
            return Err(job);
        }
        let n = i32::try_from(self.jobs.len() + 1).unwrap_or(i32::MAX);
        let mut pairs: HashSet<(i32, i32)> = HashSet::new();
        for claim in &job.claims {
            let earlier = self.claimed.entry(*claim).or_default();
            let code = match claim {
                Claim::Event(_) => Some(REFUSED_AT_A_SEQUENCE),
                Claim::Key(_) => Some(REFUSED_AT_A_KEY),
                // None before it (checked above): only kept, for later jobs.
                Claim::Hold(_) => None,
            };
            if let Some(code) = code {
                for &m in earlier.iter() {
                    if pairs.insert((m, code)) {
                        self.after.extend([n, m, code]);
                    }
                }
            }
            earlier.push(n);
        }
        self.jobs.push(job);
        Ok(())
    }
}

/// The codes of [`Group::after`]: the refusals `BK409` and `BK422`.
const REFUSED_AT_A_SEQUENCE: i32 = 409;
const REFUSED_AT_A_KEY: i32 = 422;

impl Queue {
    /// The next group: the first job to arrive, and every job of the same
    /// show waiting behind it that fits ([`PG_GROUP_COMMIT`] jobs,
    /// [`MAX_EVENTS_PER_BATCH`] events, since the group's events share one
    /// transaction's positions; no hold's row written by two); other jobs
    /// wait for the next group.
    async fn next_group(&mut self) -> Option<Group> {
        let first = match self.carried.pop_front() {
            Some(job) => job,
            None => self.jobs.recv().await?,
        };
        let mut events = first.events;
        let show = first.show.clone();
        let mut group = Group::new();
        // The first job is always taken (it takes nothing from none).
        let _ = group.add(first);
        let mut passed = VecDeque::new();
        while group.jobs.len() < PG_GROUP_COMMIT {
            let job = match self.carried.pop_front() {
                Some(job) => job,
                // Jobs passed over wait outside the channel: take no more
                // from it than it holds, so that a crowd of other shows is
                // held back by the channel's bound, as one show's is.
                None if passed.len() >= PG_QUEUE => break,
                None => match self.jobs.try_recv() {
                    Ok(job) => job,
                    Err(_) => break,
                },
            };
            if job.show != show || events + job.events > MAX_EVENTS_PER_BATCH {
                passed.push_back(job);
                continue;
            }
            let job_events = job.events;
            match group.add(job) {
                Ok(()) => events += job_events,
                // A hold's row this group writes: the next group, written
                // after this one or beside it (then its insert waits for
                // this one's commit, fails, and is written alone).
                Err(job) => passed.push_back(job),
            }
        }
        // The jobs passed over go first next time, in the order they came.
        passed.append(&mut self.carried);
        self.carried = passed;
        Some(group)
    }
}

/// Group commit on PostgreSQL: [`PG_APPENDERS`] tasks take the commands'
/// appends from one queue, each writing what queued up as one group.
pub struct PgAppender {
    jobs: mpsc::Sender<PgJob>,
}

impl PgAppender {
    pub fn start(pool: sqlx::PgPool) -> Self {
        let (jobs, queue) = mpsc::channel(PG_QUEUE);
        let queue = Arc::new(Mutex::new(Queue {
            jobs: queue,
            carried: VecDeque::new(),
        }));
        for _ in 0..PG_APPENDERS {
            let (pool, queue) = (pool.clone(), queue.clone());
            tokio::spawn(async move {
                loop {
                    // The lock is held while waiting for the first job and
                    // taking the rest, never while writing: the next
                    // appender forms the next group meanwhile.
                    let group = queue.lock().await.next_group().await;
                    let Some(group) = group else { return };
                    write_group(&pool, group).await;
                }
            });
        }
        Self { jobs }
    }

    /// Appends a command's document with its group: one with events and
    /// no checkpoint (`booking_append_group`'s terms; others go alone,
    /// through [`append`]).
    pub async fn append(&self, document: &Document<'_>) -> Result<AppendOutcome, StoreError> {
        let stopped = || StoreError::Unavailable("the PostgreSQL appender has stopped".into());
        let (job, answer) = PgJob::of(document)?;
        self.jobs.send(job).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Appends the documents as the appender would if they had queued at the
/// same instant: in the groups its queue makes of them, each written as
/// [`PgAppender`] writes one, in order. Answers each document in order.
pub async fn append_together(
    pool: &sqlx::PgPool,
    documents: &[Document<'_>],
) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError> {
    let (sender, jobs) = mpsc::channel(documents.len().max(1));
    let mut answers = Vec::with_capacity(documents.len());
    for document in documents {
        let (job, answer) = PgJob::of(document)?;
        // The channel holds every document: a send cannot wait.
        sender
            .try_send(job)
            .map_err(|e| StoreError::Unavailable(format!("queueing a group: {e}")))?;
        answers.push(answer);
    }
    drop(sender);
    let mut queue = Queue {
        jobs,
        carried: VecDeque::new(),
    };
    while let Some(group) = queue.next_group().await {
        write_group(pool, group).await;
    }
    let mut outcomes = Vec::with_capacity(answers.len());
    for answer in answers {
        outcomes.push(
            answer
                .await
                .unwrap_or_else(|_| Err(StoreError::Unavailable("a group was not written".into()))),
        );
    }
    Ok(outcomes)
}

/// A group's outcome for each of its documents, from the function's answer:
/// NULL is appended, a SQLSTATE a refusal.
fn outcome_of(code: Option<&str>) -> Result<AppendOutcome, StoreError> {
    let Some(code) = code else {
        return Ok(AppendOutcome::Appended);
    };
    refusal_of(code).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "booking_append_group answered {code:?} for a document"
        ))
    })
}

/// The same error for every member of a group whose call failed without a
/// verdict from the server (connection lost, pool exhausted): whether it
/// committed is not known, exactly as for a command alone.
fn shared_error(error: &StoreError) -> StoreError {
    match error {
        StoreError::ConnectionLost(why) => StoreError::ConnectionLost(why.clone()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// The group's documents as one JSON array.
fn documents_of(group: &[PgJob]) -> String {
    let size: usize = group.iter().map(|job| job.document.len() + 1).sum();
    let mut documents = String::with_capacity(size + 2);
    documents.push('[');
    for (i, job) in group.iter().enumerate() {
        if i > 0 {
            documents.push(',');
        }
        documents.push_str(&job.document);
    }
    documents.push(']');
    documents
}

/// Writes one group and answers each member. A group of one is an ordinary
/// `booking_append`. A group the server refused with an error (not a
/// refusal: those are per document) was rolled back whole; its documents
/// are then appended one by one, so that the error is answered to its own
/// command alone and its neighbours are written (a deadlock with another
/// instance's group, too, costs only the retry).
async fn write_group(pool: &sqlx::PgPool, group: Group) {
    let Group {
        jobs: group, after, ..
    } = group;
    if group.len() == 1 {
        for job in group {
            let outcome = job.append_alone(pool).await;
            let _ = job.reply.send(outcome);
        }
        return;
    }
    metrics::counter!("append_groups_total").increment(1);
    metrics::counter!("append_group_members_total").increment(group.len() as u64);
    let show = group.first().and_then(|job| job.show.as_ref());
    let answer: Result<Vec<Option<String>>, sqlx::Error> = sqlx::query_scalar(APPEND_GROUP)
        .bind(show.map(ShowId::as_str))
        .bind(documents_of(&group))
        .bind(after)
        .fetch_one(pool)
        .await;
    match answer {
        Ok(outcomes) if outcomes.len() == group.len() => {
            for (job, outcome) in group.into_iter().zip(outcomes) {
                let _ = job.reply.send(outcome_of(outcome.as_deref()));
            }
        }
        Ok(outcomes) => {
            let wrong = format!(
                "booking_append_group answered {} outcomes for {} documents",
                outcomes.len(),
                group.len()
            );
            for job in group {
                let _ = job.reply.send(Err(StoreError::Corrupt(wrong.clone())));
            }
        }
        Err(error) => match StoreError::classify(error) {
            StoreError::Database(error) => {
                metrics::counter!("append_groups_retried_total").increment(1);
                // At debug: a deadlock with another group is expected now
                // and then. A count of retries that follows the groups' is
                // the sign to turn it on (as on Citus, before the keys'
                // lookup was split from the events').
                tracing::debug!(%error, "a group failed: its documents go one by one");
                for job in group {
                    let outcome = job.append_alone(pool).await;
                    let _ = job.reply.send(outcome);
                }
            }
            unavailable => {
                for job in group {
                    let _ = job.reply.send(Err(shared_error(&unavailable)));
                }
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::limits::{MAX_POOL_SHARDS, MAX_SEATS_PER_HOLD};

    const APPLY: &str = include_str!("../../../sql/postgres/booking_apply.sql");

    /// Every `RETURN 'BK…'` in the function, in the order of first use.
    fn codes_in_sql() -> Vec<&'static str> {
        let mut codes: Vec<&str> = Vec::new();
        for code in APPLY
            .split("RETURN '")
            .skip(1)
            .filter_map(|rest| rest.split('\'').next())
        {
            if !codes.contains(&code) {
                codes.push(code);
            }
        }
        codes
    }

    #[test]
    fn a_unique_violation_is_read_by_table_whatever_its_constraint_is_named() {
        for (table, constraint) in [
            ("events", Some("events_pkey")),
            ("events_102080", Some("events_pkey_102080")),
            ("events", None),
        ] {
            assert_eq!(
                unique_refusal(table, constraint),
                Some(AppendOutcome::Conflict),
                "{table} {constraint:?}"
            );
        }
        assert_eq!(
            unique_refusal("idempotency_keys_102090", None),
            Some(AppendOutcome::IdempotencyKeyTaken)
        );
        assert_eq!(unique_refusal("events", Some("events_position")), None);
        assert_eq!(
            unique_refusal("events_102080", Some("events_position_102080")),
            None
        );
        assert_eq!(unique_refusal("checkouts", Some("checkouts_booking")), None);
    }

    #[test]
    fn a_shards_duplicate_raised_without_a_code_is_read_by_its_constraint() {
        let refusal_in = |message: &str| {
            super::refusal_in(&RaisedError {
                code: Some(SHARD_ERROR),
                table: None,
                constraint: None,
                message,
            })
        };
        let duplicate = |constraint: &str| format!("{DUPLICATE_MESSAGE}{constraint}\"");
        assert_eq!(
            refusal_in(&duplicate("events_pkey_102080")),
            Some(AppendOutcome::Conflict)
        );
        assert_eq!(
            refusal_in(&duplicate("events_pkey")),
            Some(AppendOutcome::Conflict)
        );
        assert_eq!(
            refusal_in(&duplicate("idempotency_keys_pkey_102090")),
            Some(AppendOutcome::IdempotencyKeyTaken)
        );
        // A duplicate position is a bug; other tables' keys are errors.
        assert_eq!(refusal_in(&duplicate("events_position_102080")), None);
        assert_eq!(refusal_in(&duplicate("checkouts_booking_102100")), None);
        assert_eq!(refusal_in(&duplicate("holds_pkey_102110")), None);
        // Any other internal error is not a refusal.
        assert_eq!(refusal_in("could not connect to worker"), None);
    }

    /// As Citus 13.2.2 raised them through a coordinator (a routed insert,
    /// a delegated function): 23505, the worker's message, no table.
    #[test]
    fn a_shards_unique_violation_without_a_table_is_read_by_its_message() {
        fn raised(message: &str) -> RaisedError<'_> {
            RaisedError {
                code: Some(UNIQUE_VIOLATION),
                table: None,
                constraint: None,
                message,
            }
        }
        let duplicate = |constraint: &str| format!("{DUPLICATE_MESSAGE}{constraint}\"");
        assert_eq!(
            refusal_in(&raised(&duplicate("events_pkey_102029"))),
            Some(AppendOutcome::Conflict)
        );
        assert_eq!(
            refusal_in(&raised(&duplicate("idempotency_keys_pkey_102061"))),
            Some(AppendOutcome::IdempotencyKeyTaken)
        );
        assert_eq!(
            refusal_in(&raised(&duplicate("events_position_102029"))),
            None
        );
        assert_eq!(refusal_in(&raised("a message of another shape")), None);
        // Plain PostgreSQL names the table: read by it, as before.
        let named = RaisedError {
            code: Some(UNIQUE_VIOLATION),
            table: Some("events"),
            constraint: Some("events_pkey"),
            message: "anything",
        };
        assert_eq!(refusal_in(&named), Some(AppendOutcome::Conflict));
        let position = RaisedError {
            constraint: Some("events_position"),
            ..named
        };
        assert_eq!(refusal_in(&position), None);
        // Our own refusals are read by their SQLSTATE.
        let ours = RaisedError {
            code: Some("BK409"),
            table: None,
            constraint: None,
            message: "",
        };
        assert_eq!(refusal_in(&ours), Some(AppendOutcome::Conflict));
    }

    fn job(show: &str) -> (PgJob, oneshot::Receiver<Result<AppendOutcome, StoreError>>) {
        claiming(show, show, &[])
    }

    fn claiming(
        show: &str,
        name: &str,
        claims: &[Claim],
    ) -> (PgJob, oneshot::Receiver<Result<AppendOutcome, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        let job = PgJob {
            document: name.to_owned(),
            events: 1,
            show: ShowId::parse(show).ok(),
            claims: claims.to_vec(),
            reply,
        };
        (job, answer)
    }

    /// Jobs that take one stream's sequence or one key stay in one group,
    /// each after the earlier ones that take it (every pair, once, in
    /// order); one that writes a hold's row another writes waits for the
    /// next group.
    #[tokio::test]
    async fn a_group_says_which_jobs_take_what_earlier_ones_take() {
        let (sender, jobs) = mpsc::channel(PG_QUEUE);
        let mut queue = Queue {
            jobs,
            carried: VecDeque::new(),
        };
        let mut answers = Vec::new();
        for (name, claims) in [
            ("a", vec![Claim::Event(1), Claim::Key(7), Claim::Hold(1)]),
            ("b", vec![Claim::Event(1), Claim::Event(2)]),
            ("c", vec![Claim::Hold(1)]),
            ("d", vec![Claim::Event(2), Claim::Event(1), Claim::Key(7)]),
        ] {
            let (job, answer) = claiming("show", name, &claims);
            answers.push(answer);
            sender.send(job).await.expect("queued");
        }
        let first = queue.next_group().await.expect("a group");
        let names: Vec<&str> = first.jobs.iter().map(|j| j.document.as_str()).collect();
        assert_eq!(names, ["a", "b", "d"]);
        let (seq, key) = (REFUSED_AT_A_SEQUENCE, REFUSED_AT_A_KEY);
        assert_eq!(first.after, [2, 1, seq, 3, 2, seq, 3, 1, seq, 3, 1, key]);
        let second = queue.next_group().await.expect("a group");
        let names: Vec<&str> = second.jobs.iter().map(|j| j.document.as_str()).collect();
        assert_eq!(names, ["c"]);
        assert!(second.after.is_empty());
    }

    #[tokio::test]
    async fn a_group_holds_one_show_and_the_others_wait_their_turn_in_order() {
        let (sender, jobs) = mpsc::channel(PG_QUEUE);
        let mut queue = Queue {
            jobs,
            carried: VecDeque::new(),
        };
        let mut answers = Vec::new();
        for show in ["a", "b", "a", "c", "b", "a"] {
            let (job, answer) = job(show);
            answers.push(answer);
            sender.send(job).await.expect("queued");
        }
        let mut groups = Vec::new();
        for _ in 0..3 {
            let group = queue.next_group().await.expect("a group");
            groups.push(
                group
                    .jobs
                    .iter()
                    .map(|j| j.document.clone())
                    .collect::<Vec<_>>(),
            );
        }
        assert_eq!(groups, [vec!["a", "a", "a"], vec!["b", "b"], vec!["c"]]);
        assert!(queue.carried.is_empty());
    }

    #[test]
    fn the_refusals_rust_reads_are_the_ones_the_function_returns() {
        let rust: Vec<&str> = REFUSALS.iter().map(|(code, _)| *code).collect();
        assert_eq!(codes_in_sql(), rust);
    }

    #[test]
    fn a_command_sized_part_is_written_row_by_row() {
        let limit: usize = APPLY
            .split("row_by_row_max CONSTANT int := ")
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .and_then(|n| n.trim().parse().ok())
            .expect("booking_apply declares row_by_row_max");
        assert!(limit >= MAX_SEATS_PER_HOLD, "{limit} < MAX_SEATS_PER_HOLD");
        assert!(
            limit >= MAX_POOL_SHARDS as usize,
            "{limit} < MAX_POOL_SHARDS"
        );
    }
}
