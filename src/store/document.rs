//! The append document: a batch as one JSON object whose parts are named
//! after the tables they go to and whose rows carry the column names. The
//! PostgreSQL function `booking_apply` (`sql/postgres/booking_apply.sql`)
//! reads it whole, in one statement and one round trip; SQLite gets each
//! part in one set-based statement (`json_each`), in one transaction.

use std::borrow::Cow;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use domain::ids::{BookingId, HoldId, ShowId};
use projections::availability::SeatAvailabilityRow;
use projections::checkouts::CheckoutRow;
use projections::holds::{HoldChange, HoldRow, HoldState, PoolHoldRow};
use projections::pools::PoolShardRow;
use projections::time::to_micros;
use serde::Serialize;

use super::batch::{AppendBatch, CheckpointMove, IdempotencyKeyRow, NewEvent};
use super::StoreError;

/// A hold moving from `held` to a final state (only from `held`, once).
#[derive(Debug, Clone, Serialize)]
pub struct HoldEnd<'a> {
    pub hold_id: HoldId,
    /// The hold's show: part of the key of its rows (a log sharded by show
    /// routes the update to one shard).
    pub show_id: &'a ShowId,
    pub state: HoldState,
}

/// A hold converted into a booking (only from `held`, once).
#[derive(Debug, Clone, Serialize)]
pub struct HoldConversion<'a> {
    pub hold_id: HoldId,
    pub show_id: &'a ShowId,
    pub booking_id: BookingId,
}

/// A hold extended to a later `expires_at_us`: its record and its pool
/// parts take it while `held`, and only if it is later than theirs.
#[derive(Debug, Clone, Serialize)]
pub struct HoldExtension<'a> {
    pub hold_id: HoldId,
    pub show_id: &'a ShowId,
    pub expires_at_us: i64,
}

#[derive(Debug, Default, Serialize)]
pub struct Document<'a> {
    /// The show the append is for ([`AppendBatch::show`]).
    pub show_id: Option<&'a ShowId>,
    /// When the batch was recorded: every event's `recorded_at_us`, the
    /// checkpoint's `updated_at_us`.
    pub recorded_at_us: i64,
    pub events: Vec<&'a NewEvent>,
    pub seat_availability: Vec<&'a SeatAvailabilityRow>,
    pub pool_shards: Vec<&'a PoolShardRow>,
    /// One row per hold: a seat hold's placement names it once per seat,
    /// and the row carries all of them.
    pub holds: Vec<Cow<'a, HoldRow>>,
    pub pool_holds: Vec<&'a PoolHoldRow>,
    pub hold_ends: Vec<HoldEnd<'a>>,
    pub hold_conversions: Vec<HoldConversion<'a>>,
    pub hold_extensions: Vec<HoldExtension<'a>>,
    pub checkouts: Vec<&'a CheckoutRow>,
    pub idempotency_key: Option<&'a IdempotencyKeyRow>,
    pub checkpoint: Option<&'a CheckpointMove>,
    /// The events' rows are in this document (a command's batch, built by
    /// the same builders the projector uses): written into each event's
    /// `rows_written`, so that the projector passes over it.
    pub rows_written: bool,
    /// The batch's `commit_by` ([`AppendBatch::commit_by`]): refused
    /// (`Late`) once the store's clock is past it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_by_us: Option<i64>,
    /// Where each hold's row is in `holds`.
    #[serde(skip)]
    pub(super) hold_rows: HashMap<HoldId, usize>,
}

impl<'a> Document<'a> {
    pub fn of(batch: &'a AppendBatch) -> Self {
        let mut doc = Document {
            show_id: batch.show(),
            recorded_at_us: to_micros(batch.recorded_at),
            events: batch.events.iter().collect(),
            seat_availability: batch.rows.seats.iter().collect(),
            pool_shards: batch.rows.shards.iter().collect(),
            checkouts: batch.rows.checkouts.iter().collect(),
            idempotency_key: batch.idempotency.as_ref(),
            checkpoint: batch.checkpoint.as_ref(),
            commit_by_us: batch.commit_by.map(to_micros),
            ..Document::default()
        };
        for change in &batch.rows.hold_changes {
            doc.add_change(change);
        }
        doc.rows_written = !batch.rows_only && doc.rows() > 0;
        doc
    }

    fn add_change(&mut self, change: &'a HoldChange) {
        match change {
            HoldChange::Placed { hold, part } => {
                self.add_hold(hold);
                self.pool_holds.extend(part);
            }
            HoldChange::Ended {
                hold_id,
                show_id,
                state,
            } => self.hold_ends.push(HoldEnd {
                hold_id: *hold_id,
                show_id,
                state: *state,
            }),
            HoldChange::Converted {
                hold_id,
                show_id,
                booking_id,
            } => self.hold_conversions.push(HoldConversion {
                hold_id: *hold_id,
                show_id,
                booking_id: *booking_id,
            }),
            HoldChange::Extended {
                hold_id,
                show_id,
                expires_at_us,
            } => self.hold_extensions.push(HoldExtension {
                hold_id: *hold_id,
                show_id,
                expires_at_us: *expires_at_us,
            }),
        }
    }

    /// A hold's row, or its seats and items added to the row the document
    /// has.
    pub fn add_hold(&mut self, hold: &'a HoldRow) {
        match self.hold_rows.get(&hold.hold_id) {
            Some(&at) => {
                let row = self.holds[at].to_mut();
                row.seat_ids.extend(&hold.seat_ids);
                row.items.extend(&hold.items);
            }
            None => {
                self.hold_rows.insert(hold.hold_id, self.holds.len());
                self.holds.push(Cow::Borrowed(hold));
            }
        }
    }

    /// Rows in the document, of every kind.
    pub fn rows(&self) -> usize {
        self.seat_availability.len()
            + self.pool_shards.len()
            + self.holds.len()
            + self.pool_holds.len()
            + self.checkouts.len()
    }

    pub fn to_json(&self) -> Result<String, StoreError> {
        to_json(self)
    }

    /// What this document takes that another document may also take:
    /// every event's stream and sequence, the idempotency key, every hold
    /// whose row it writes. How a PostgreSQL group is formed and refused
    /// (`PgAppender`, `booking_append_group.sql`).
    pub fn claims(&self) -> Vec<Claim> {
        let hash = |value: &dyn Fn(&mut DefaultHasher)| {
            let mut hasher = DefaultHasher::new();
            value(&mut hasher);
            hasher.finish()
        };
        let events = self.events.iter().map(|e| {
            Claim::Event(hash(&|h| {
                (e.aggregate_type, &e.aggregate_id, e.sequence).hash(h)
            }))
        });
        let key = self
            .idempotency_key
            .map(|k| Claim::Key(hash(&|h| (k.buyer.as_str(), k.key.as_str()).hash(h))));
        let holds = self
            .holds
            .iter()
            .map(|row| Claim::Hold(hash(&|h| row.hold_id.hash(h))));
        events.chain(key).chain(holds).collect()
    }
}

/// Something a document takes that another may take too, as a hash (two
/// that share one by chance are only treated as taking the same thing: a
/// document refused or waiting that need not have been, never one written
/// that should not have been).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Claim {
    /// A stream's sequence: refused (a conflict) if an earlier document
    /// that takes it is written.
    Event(u64),
    /// An idempotency key: refused likewise (the key taken).
    Key(u64),
    /// A hold's row, which a second document would extend (the projector's
    /// case, never a command's): not written beside the first.
    Hold(u64),
}

pub fn to_json(value: &impl Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("batch JSON: {e}")))
}
