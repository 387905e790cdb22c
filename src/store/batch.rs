//! The write contract: everything one command, or one projection batch,
//! writes in one transaction. A command's events go in at the sequences it
//! decided on; a duplicate `(aggregate_type, aggregate_id, sequence)`
//! anywhere refuses the whole batch, which is what makes a multi-seat hold
//! all or nothing. The read-model rows the events produce are written in the
//! same transaction, so a crash can never leave them behind.
//!
//! Each table's row is one named type (from the `projections` crate, or
//! here for the command-side tables); its field names are the column names,
//! both in the JSON document the database reads (`document.rs`) and
//! in every read back (`tables.rs`).

use chrono::{DateTime, Utc};
use cqrs_es::{Aggregate, DomainEvent};
use domain::ids::{BuyerId, HoldId, IdempotencyKey, ShowId};
use projections::rows::Rows;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::StoreError;

/// Events one append may hold. A command writes a few (a hold of 50 seats,
/// 50); a batch this large is a tool's or a mistake's, and it would hold its
/// show's head (every other writer of the show) for as long as it takes to
/// write. (Until migration 0025 it was also the positions a transaction
/// owned, `xid * 65536 + n`; the bound stays where clients met it.)
pub const MAX_EVENTS_PER_BATCH: usize = 65_535;

/// One event to insert at the sequence its stream was decided on: a row of
/// `events` without the columns the database assigns (position, txid) or
/// the batch shares (`recorded_at_us`).
#[derive(Debug, Clone, Serialize)]
pub struct NewEvent {
    pub aggregate_type: &'static str,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    pub event_version: String,
    /// The event as JSON, serialized once.
    pub payload: Box<RawValue>,
    pub metadata: Box<RawValue>,
    /// The stream's show: every stream is of one show (its id names it),
    /// and the log's keys name it (a log sharded by show places it by it).
    pub show_id: ShowId,
}

/// A row of `idempotency_keys`: a buyer's key with the hold it produced,
/// written in the hold's own transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyKeyRow {
    pub buyer: BuyerId,
    pub key: IdempotencyKey,
    pub request_hash: String,
    pub hold_id: HoldId,
    pub created_at_us: i64,
}

/// Moves checkpoint `name` to the positions `shows` (a [`LogCursor`]'s JSON)
/// and its count of moves from `from_moves` to `to_moves`, only if it is
/// still at `from_moves` (compare-and-set: another reader moved it
/// otherwise).
///
/// [`LogCursor`]: crate::store::LogCursor
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointMove {
    pub name: String,
    pub from_moves: i64,
    pub to_moves: i64,
    pub shows: String,
}

impl CheckpointMove {
    /// The next move of `checkpoint` (read as `from`) to `to`.
    pub fn next(name: &str, from: &crate::store::Checkpoint, to: &crate::store::LogCursor) -> Self {
        Self {
            name: name.to_owned(),
            from_moves: from.moves,
            to_moves: from.moves + 1,
            shows: to.to_json(),
        }
    }
}

/// Everything one command writes.
#[derive(Debug, Clone)]
pub struct AppendBatch {
    pub recorded_at: DateTime<Utc>,
    pub events: Vec<NewEvent>,
    /// The rows the events produce (`projections::rows`).
    pub rows: Rows,
    pub idempotency: Option<IdempotencyKeyRow>,
    /// Moves a projector's checkpoint in the same transaction.
    pub checkpoint: Option<CheckpointMove>,
    /// A projection batch: the builders add rows but no events (the events
    /// are already in the log).
    pub rows_only: bool,
    /// The latest instant the batch may commit at: past it the store
    /// refuses it ([`AppendOutcome::Late`]) and the command decides again.
    /// A price change's (it must be known to every instance before it
    /// takes effect: `command/prices.rs`). Checked against the database's
    /// clock on PostgreSQL and the writer's on SQLite, in the transaction,
    /// before anything is written.
    pub commit_by: Option<DateTime<Utc>>,
}

impl AppendBatch {
    /// The show this append is for: every stream a command writes belongs
    /// to one show (its id is in the stream's id), so the first event's
    /// show is the batch's. `None` for a batch without events or one whose
    /// events name none (a projection batch, a tool's bare events). A
    /// sharded log routes an append by it (see `PgAppender`: a group holds
    /// one show).
    pub fn show(&self) -> Option<&ShowId> {
        self.events.first().map(|event| &event.show_id)
    }

    /// A batch of read-model rows for events already in the log.
    pub fn projection(recorded_at: DateTime<Utc>) -> Self {
        Self {
            rows_only: true,
            ..Self::new(recorded_at)
        }
    }

    pub fn new(recorded_at: DateTime<Utc>) -> Self {
        Self {
            recorded_at,
            events: Vec::new(),
            rows: Rows::default(),
            idempotency: None,
            checkpoint: None,
            rows_only: false,
            commit_by: None,
        }
    }

    /// Adds `events` of stream `id` (of type `A`), decided at `version`:
    /// they go in at the sequences after it. A projection batch takes no
    /// events (they are in the log already).
    pub fn push_events<A: Aggregate>(
        &mut self,
        id: &str,
        version: usize,
        events: &[A::Event],
        metadata: &str,
        show_id: &ShowId,
    ) -> Result<(), StoreError> {
        if self.rows_only || events.is_empty() {
            return Ok(());
        }
        let unserializable =
            |e: serde_json::Error| StoreError::Corrupt(format!("an event's JSON: {e}"));
        let metadata = RawValue::from_string(metadata.to_owned()).map_err(unserializable)?;
        for (i, event) in events.iter().enumerate() {
            self.events.push(NewEvent {
                aggregate_type: A::TYPE,
                aggregate_id: id.to_owned(),
                sequence: (version + i + 1) as i64,
                event_type: event.event_type(),
                event_version: event.event_version(),
                payload: serde_json::value::to_raw_value(event).map_err(unserializable)?,
                metadata: metadata.clone(),
                show_id: show_id.clone(),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendOutcome {
    Appended,
    /// Some stream had moved past the version the decision was made on.
    /// Nothing was written.
    Conflict,
    /// The buyer's idempotency key was taken by another request meanwhile.
    /// Nothing was written.
    IdempotencyKeyTaken,
    /// The checkpoint was moved by another projector meanwhile. Nothing was written.
    CheckpointMoved,
    /// The batch reached the store after its `commit_by`. Nothing was written.
    Late,
}
