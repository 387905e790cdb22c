//! Events into rows, in one place: what a stream's new events write to the
//! read-model tables. A command calls these with the events it decided, the
//! projector and every rebuild with the events it read from the log; both
//! get the same rows, because there is only this one way to make them.
//!
//! Each function takes the stream's state just before the events and the
//! version it is at, and adds one row for the stream (its state after the
//! last event, guarded by the sequence of that event) and the change each
//! event makes to its hold's record.

use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{PoolId, SeatId, ShowId};
use domain::pool::{PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent};

use crate::availability::SeatAvailabilityRow;
use crate::checkouts::CheckoutRow;
use crate::holds::{hold_change, pool_hold_change, HoldChange};
use crate::pools::PoolShardRow;

/// The rows a batch of events produces, table by table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rows {
    pub seats: Vec<SeatAvailabilityRow>,
    pub shards: Vec<PoolShardRow>,
    /// In event order: a hold's record follows its units' events as they
    /// happened.
    pub hold_changes: Vec<HoldChange>,
    pub checkouts: Vec<CheckoutRow>,
}

/// The sequence of the last of `count` events appended at `version`.
fn last_sequence(version: usize, count: usize) -> i64 {
    (version + count) as i64
}

impl Rows {
    /// A seat's `events`, appended to its stream at `version` (state
    /// `before`): its availability row and its hold record's changes.
    pub fn seat(
        &mut self,
        show_id: &ShowId,
        seat_id: &SeatId,
        before: &Seat,
        version: usize,
        events: &[SeatEvent],
    ) {
        if events.is_empty() {
            return;
        }
        let mut after = before.clone();
        for event in events {
            after.apply_event(event);
            self.hold_changes
                .extend(hold_change(show_id, seat_id, event));
        }
        let last_seq = last_sequence(version, events.len());
        self.seats
            .push(SeatAvailabilityRow::of(show_id, seat_id, last_seq, &after));
    }

    /// A pool shard's `events` (shard `index` of `pool_id`): its row of
    /// places sold and its holds' records.
    pub fn shard(
        &mut self,
        show_id: &ShowId,
        pool_id: &PoolId,
        index: u32,
        before: &PoolShard,
        version: usize,
        events: &[PoolEvent],
    ) {
        if events.is_empty() {
            return;
        }
        let mut after = before.clone();
        for event in events {
            after.apply_event(event);
            self.hold_changes
                .extend(pool_hold_change(show_id, pool_id, index, event));
        }
        let last_seq = last_sequence(version, events.len());
        self.shards
            .push(PoolShardRow::of(show_id, pool_id, index, last_seq, &after));
    }

    /// A checkout's `events`, the last of them recorded at `updated_at_us`:
    /// its row (none while the checkout has no purchase requested).
    pub fn checkout(
        &mut self,
        before: &Checkout,
        version: usize,
        events: &[CheckoutEvent],
        updated_at_us: i64,
    ) {
        if events.is_empty() {
            return;
        }
        let after = Self::checkout_after(before, events);
        let last_seq = last_sequence(version, events.len());
        self.checkouts
            .extend(CheckoutRow::of(&after, last_seq, updated_at_us));
    }

    /// A checkout's state after `events` (its show is what the events are
    /// filed under).
    pub fn checkout_after(before: &Checkout, events: &[CheckoutEvent]) -> Checkout {
        let mut after = before.clone();
        events.iter().for_each(|event| after.apply_event(event));
        after
    }

    pub fn is_empty(&self) -> bool {
        self.seats.is_empty()
            && self.shards.is_empty()
            && self.hold_changes.is_empty()
            && self.checkouts.is_empty()
    }

    /// Adds `other`'s rows after these.
    pub fn extend(&mut self, other: Rows) {
        self.seats.extend(other.seats);
        self.shards.extend(other.shards);
        self.hold_changes.extend(other.hold_changes);
        self.checkouts.extend(other.checkouts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};
    use domain::ids::{BuyerId, HoldId};
    use domain::seat::SeatStatus;
    use uuid::Uuid;

    fn at() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_800_000_000, 0).unwrap()
    }

    #[test]
    fn a_seats_events_give_one_row_at_the_last_sequence_and_a_change_each() {
        let show = ShowId::parse("s").unwrap();
        let seat = SeatId::parse("A-1").unwrap();
        let hold_id = HoldId(Uuid::from_u128(7));
        let events = [
            SeatEvent::HoldPlaced {
                hold_id,
                buyer: BuyerId::parse("a").unwrap(),
                expires_at: at(),
                price: None,
                returns_to_waitlist: false,
                offer: false,
            },
            SeatEvent::HoldReleased { hold_id },
        ];
        let mut rows = Rows::default();
        rows.seat(&show, &seat, &Seat::default(), 3, &events);
        assert_eq!(rows.seats.len(), 1);
        assert_eq!(rows.seats[0].last_seq, 5);
        assert_eq!(rows.seats[0].status, SeatStatus::Available);
        assert_eq!(rows.hold_changes.len(), 2);
    }

    #[test]
    fn no_events_give_no_rows() {
        let show = ShowId::parse("s").unwrap();
        let pool = PoolId::parse("floor").unwrap();
        let mut rows = Rows::default();
        rows.shard(&show, &pool, 0, &PoolShard::default(), 0, &[]);
        rows.checkout(&Checkout::default(), 0, &[], 0);
        assert!(rows.is_empty());
    }
}
