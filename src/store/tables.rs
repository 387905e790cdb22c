//! The read-model tables as a whole: what replay writes and what verify
//! compares. Every table's row is its one named type (see [`super::batch`]);
//! here are the columns each is read back with, the in-memory form of all
//! tables ([`Tables`]), how rows apply to it with the semantics the SQL
//! writers have, the statements that reset them, and the append documents
//! a rebuilt set is written back in. The port that dumps, resets and writes
//! the live tables is `projection_tables.rs`.

use std::borrow::Cow;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

use domain::ids::{HoldId, PoolId, SeatId, ShowId};
use projections::availability::SeatAvailabilityRow;
use projections::checkouts::CheckoutRow;
use projections::holds::{HoldChange, HoldRow, HoldState, PoolHoldRow};
use projections::pools::PoolShardRow;
use serde::de::DeserializeOwned;

use super::batch::AppendBatch;
use super::document::Document;
use super::{StoreError, StoreResult};

/// The columns each row type is read back with: its field names. A unit
/// test holds each list against the type's serialized form, so a column
/// added to a type and not here (or the reverse) fails the build's tests.
pub const SEAT_AVAILABILITY_COLUMNS: &[&str] = &[
    "show_id",
    "seat_id",
    "status",
    "hold_id",
    "buyer",
    "expires_at_us",
    "booking_id",
    "channel",
    "ticket_type",
    "price_cents",
    "last_seq",
];
pub const POOL_SHARD_COLUMNS: &[&str] = &[
    "show_id",
    "pool_id",
    "shard",
    "sold",
    "allocated",
    "sales",
    "returned",
    "last_seq",
];
pub const HOLD_COLUMNS: &[&str] = &[
    "hold_id",
    "show_id",
    "buyer",
    "expires_at_us",
    "state",
    "booking_id",
    "pool_id",
    "seat_ids",
    "items",
];
pub const POOL_HOLD_COLUMNS: &[&str] = &[
    "hold_id",
    "shard",
    "show_id",
    "pool_id",
    "quantity",
    "expires_at_us",
    "state",
    "channel",
    "ticket_type",
    "price_cents",
];
pub const CHECKOUT_COLUMNS: &[&str] = &[
    "hold_id",
    "show_id",
    "buyer",
    "phase",
    "booking_id",
    "charge_id",
    "refund_id",
    "refund_reason",
    "amount_cents",
    "last_seq",
    "updated_at_us",
];

/// Rows of every projection, keyed as the tables are.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tables {
    pub seat_availability: BTreeMap<(ShowId, SeatId), SeatAvailabilityRow>,
    pub pool_shards: BTreeMap<(ShowId, PoolId, u32), PoolShardRow>,
    pub holds: BTreeMap<HoldId, HoldRow>,
    pub pool_holds: BTreeMap<(HoldId, u32), PoolHoldRow>,
    pub checkouts: BTreeMap<HoldId, CheckoutRow>,
}

impl Tables {
    /// Applies a batch of rows as the SQL writers do: a seat, shard or
    /// checkout row is replaced only by a later stream sequence; a hold
    /// record is inserted once and moves from `held` once. The rows move in:
    /// a whole-log fold applies millions of them.
    pub fn apply(&mut self, batch: AppendBatch) {
        for row in batch.rows.seats {
            match self
                .seat_availability
                .entry((row.show_id.clone(), row.seat_id.clone()))
            {
                Entry::Vacant(slot) => {
                    slot.insert(row);
                }
                Entry::Occupied(mut slot) if slot.get().last_seq < row.last_seq => {
                    slot.insert(row);
                }
                Entry::Occupied(_) => {}
            }
        }
        for row in batch.rows.shards {
            match self
                .pool_shards
                .entry((row.show_id.clone(), row.pool_id.clone(), row.shard))
            {
                Entry::Vacant(slot) => {
                    slot.insert(row);
                }
                Entry::Occupied(mut slot) if slot.get().last_seq < row.last_seq => {
                    slot.insert(row);
                }
                Entry::Occupied(_) => {}
            }
        }
        for change in batch.rows.hold_changes {
            self.apply_hold_change(change);
        }
        for row in batch.rows.checkouts {
            match self.checkouts.entry(row.hold_id) {
                Entry::Vacant(slot) => {
                    slot.insert(row);
                }
                Entry::Occupied(mut slot) if slot.get().last_seq < row.last_seq => {
                    slot.insert(row);
                }
                Entry::Occupied(_) => {}
            }
        }
    }

    fn apply_hold_change(&mut self, change: HoldChange) {
        match change {
            HoldChange::Placed { hold, part } => {
                match self.holds.entry(hold.hold_id) {
                    Entry::Vacant(slot) => {
                        slot.insert(*hold);
                    }
                    Entry::Occupied(mut slot) => {
                        let row = slot.get_mut();
                        row.seat_ids.extend(&hold.seat_ids);
                        row.items.extend(&hold.items);
                    }
                }
                if let Some(part) = part {
                    self.pool_holds
                        .entry((part.hold_id, part.shard))
                        .or_insert(part);
                }
            }
            HoldChange::Ended { hold_id, state, .. } => self.end(hold_id, state, None),
            HoldChange::Converted {
                hold_id,
                booking_id,
                ..
            } => self.end(hold_id, HoldState::Converted, Some(booking_id)),
            HoldChange::Extended {
                hold_id,
                expires_at_us,
                ..
            } => self.extend(hold_id, expires_at_us),
        }
    }

    /// As `booking_append` and the SQLite statements: a `held` record (and
    /// its `held` pool parts) takes a later expiry, never an earlier one.
    fn extend(&mut self, hold_id: HoldId, expires_at_us: i64) {
        if let Some(hold) = self.holds.get_mut(&hold_id) {
            if hold.state == HoldState::Held && hold.expires_at_us < expires_at_us {
                hold.expires_at_us = expires_at_us;
            }
        }
        for (_, part) in self
            .pool_holds
            .range_mut((hold_id, u32::MIN)..=(hold_id, u32::MAX))
        {
            if part.state == HoldState::Held && part.expires_at_us < expires_at_us {
                part.expires_at_us = expires_at_us;
            }
        }
    }

    fn end(
        &mut self,
        hold_id: HoldId,
        state: HoldState,
        booking_id: Option<domain::ids::BookingId>,
    ) {
        if let Some(hold) = self.holds.get_mut(&hold_id) {
            if hold.state == HoldState::Held {
                hold.state = state;
                if booking_id.is_some() {
                    hold.booking_id = booking_id;
                }
            }
        }
        for (_, part) in self
            .pool_holds
            .range_mut((hold_id, u32::MIN)..=(hold_id, u32::MAX))
        {
            if part.state == HoldState::Held {
                part.state = state;
            }
        }
    }

    /// The rebuilt rows of `only` as append documents of at most `chunk`
    /// rows each, every row once, in its final state (hold records inserted
    /// as they ended).
    pub(super) fn documents(&self, chunk: usize, only: &[Table]) -> Vec<Document<'_>> {
        let mut docs = vec![Document::default()];
        let chunk = chunk.max(1);
        if only.contains(&Table::SeatAvailability) {
            fill(
                &mut docs,
                chunk,
                self.seat_availability.values(),
                |d, row| d.seat_availability.push(row),
            );
        }
        if only.contains(&Table::PoolShards) {
            fill(&mut docs, chunk, self.pool_shards.values(), |d, row| {
                d.pool_shards.push(row)
            });
        }
        if only.contains(&Table::Holds) {
            // Each hold once, whole: no need to look for its row.
            fill(&mut docs, chunk, self.holds.values(), |d, row| {
                d.holds.push(Cow::Borrowed(row))
            });
        }
        if only.contains(&Table::PoolHolds) {
            fill(&mut docs, chunk, self.pool_holds.values(), |d, row| {
                d.pool_holds.push(row)
            });
        }
        if only.contains(&Table::Checkouts) {
            fill(&mut docs, chunk, self.checkouts.values(), |d, row| {
                d.checkouts.push(row)
            });
        }
        docs.retain(|d| d.rows() > 0);
        docs
    }
}

/// One row of `table` from its JSON object (see `SqlPool::row_object`).
pub(crate) fn decode_row<T: DeserializeOwned>(table: &str, text: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("a row of {table}: {e}")))
}

/// Adds `rows` to the documents (`add` puts one in its part), starting a
/// new document whenever the last one holds `chunk` rows.
fn fill<'a, T: 'a>(
    docs: &mut Vec<Document<'a>>,
    chunk: usize,
    rows: impl Iterator<Item = &'a T>,
    add: impl Fn(&mut Document<'a>, &'a T),
) {
    for row in rows {
        if docs.last().is_none_or(|d| d.rows() >= chunk) {
            docs.push(Document::default());
        }
        if let Some(doc) = docs.last_mut() {
            add(doc, row);
        }
    }
}

/// The read models, by the name `booking replay --projection` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Projection {
    /// `seat_availability` and `pool_shards`.
    Availability,
    /// `holds` and `pool_holds`.
    Holds,
    /// `checkouts` (bookings).
    Checkouts,
}

/// A read-model table a rebuild writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    SeatAvailability,
    PoolShards,
    Holds,
    PoolHolds,
    Checkouts,
}

impl Table {
    pub const ALL: [Table; 5] = [
        Table::SeatAvailability,
        Table::PoolShards,
        Table::Holds,
        Table::PoolHolds,
        Table::Checkouts,
    ];
}

impl Projection {
    pub const ALL: [Projection; 3] = [
        Projection::Availability,
        Projection::Holds,
        Projection::Checkouts,
    ];

    /// The tables it is made of.
    pub(super) fn tables(self) -> &'static [Table] {
        match self {
            Projection::Availability => &[Table::SeatAvailability, Table::PoolShards],
            Projection::Holds => &[Table::Holds, Table::PoolHolds],
            Projection::Checkouts => &[Table::Checkouts],
        }
    }

    /// Back to the state before any event: seat and shard rows free (their
    /// place in the show stays), hold and checkout rows gone.
    pub(super) fn reset_sql(self) -> &'static [&'static str] {
        match self {
            Projection::Availability => &[
                "UPDATE seat_availability SET status = 'available', hold_id = NULL, buyer = NULL, \
                 expires_at_us = NULL, booking_id = NULL, channel = NULL, ticket_type = NULL, \
                 price_cents = NULL, last_seq = 0",
                "UPDATE pool_shards SET sold = 0, allocated = '{}', sales = '[]', returned = 0, \
                 last_seq = 0",
            ],
            Projection::Holds => &["DELETE FROM pool_holds", "DELETE FROM holds"],
            Projection::Checkouts => &["DELETE FROM checkouts"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::ids::{BookingId, BuyerId};
    use domain::seat::SeatStatus;
    use projections::holds::SeatIds;
    use serde::Serialize;
    use uuid::Uuid;

    fn field_names(row: &impl Serialize) -> Vec<String> {
        match serde_json::to_value(row) {
            Ok(serde_json::Value::Object(map)) => {
                let mut names: Vec<String> = map.keys().cloned().collect();
                names.sort();
                names
            }
            other => panic!("a row serializes as an object, not {other:?}"),
        }
    }

    fn sorted(columns: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
        names.sort();
        names
    }

    #[test]
    fn every_column_list_is_its_row_types_field_list() {
        let show = ShowId::parse("s").unwrap();
        let hold = HoldId(Uuid::from_u128(1));
        let buyer = BuyerId::parse("b").unwrap();
        let pool = PoolId::parse("floor").unwrap();
        let seat = SeatAvailabilityRow {
            show_id: show.clone(),
            seat_id: SeatId::parse("A-1").unwrap(),
            status: SeatStatus::Held,
            hold_id: Some(hold),
            buyer: Some(buyer.clone()),
            expires_at_us: Some(1),
            booking_id: Some(BookingId(Uuid::from_u128(2))),
            channel: None,
            ticket_type: None,
            price_cents: None,
            last_seq: 1,
        };
        assert_eq!(sorted(SEAT_AVAILABILITY_COLUMNS), field_names(&seat));
        let shard = PoolShardRow {
            show_id: show.clone(),
            pool_id: pool.clone(),
            shard: 0,
            sold: 0,
            allocated: Default::default(),
            sales: Default::default(),
            returned: 0,
            last_seq: 1,
        };
        assert_eq!(sorted(POOL_SHARD_COLUMNS), field_names(&shard));
        let row = HoldRow {
            hold_id: hold,
            show_id: show.clone(),
            buyer: buyer.clone(),
            expires_at_us: 1,
            state: HoldState::Held,
            booking_id: None,
            pool_id: None,
            seat_ids: SeatIds::one(SeatId::parse("A-1").unwrap()),
            items: Default::default(),
        };
        assert_eq!(sorted(HOLD_COLUMNS), field_names(&row));
        let part = PoolHoldRow {
            hold_id: hold,
            shard: 0,
            show_id: show.clone(),
            pool_id: pool,
            quantity: 1,
            expires_at_us: 1,
            state: HoldState::Held,
            channel: None,
            ticket_type: None,
            price_cents: None,
        };
        assert_eq!(sorted(POOL_HOLD_COLUMNS), field_names(&part));
        let checkout = CheckoutRow {
            hold_id: hold,
            show_id: show,
            buyer,
            phase: "requested".into(),
            booking_id: None,
            charge_id: None,
            refund_id: None,
            refund_reason: None,
            amount_cents: None,
            last_seq: 1,
            updated_at_us: 0,
        };
        assert_eq!(sorted(CHECKOUT_COLUMNS), field_names(&checkout));
    }
}
