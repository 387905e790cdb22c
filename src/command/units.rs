//! What a hold holds: seats, or places in pool shards. Releasing, extending,
//! converting and cancelling work the same way on both, so the services drive them
//! through one trait instead of two copies of every loop.

use chrono::{DateTime, Duration, Utc};
use domain::ids::seat_stream_id;
use domain::ids::{BookingId, HoldId, PoolId, SeatId, ShowId};
use domain::places::PoolSpec;
use domain::pool::{
    self, shard_capacity, shard_stream_id, PoolCommand, PoolError, PoolEvent, PoolShard,
};
use domain::seat::{self, Seat, SeatCommand, SeatError, SeatEvent};
use domain::show::Show;
use projections::rows::Rows;

use crate::command::streams::{Inventory, Stream, StreamCache};
use crate::store::{HoldRecord, StoreError};

/// Why a unit refuses to move a hold on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The hold expired before this instant.
    Expired,
    /// The hold no longer holds this unit (released, or expired and taken).
    Lost,
    /// The hold was converted into a booking already.
    Converted,
    /// The hold already expires at its cap (`max_hold_seconds` after placement).
    ExtensionLimit,
}

/// One unit of inventory a hold can hold, as a stream type (its key: the
/// show and seat, or shard and capacity).
pub trait Unit: Stream {
    fn release(
        &self,
        key: &Self::Key,
        hold_id: HoldId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal>;
    /// Extends an active hold to `now + ttl`, at most `max_hold` after its
    /// placement; nothing if that is not later than its expiry.
    fn extend(
        &self,
        key: &Self::Key,
        hold_id: HoldId,
        ttl: Duration,
        max_hold: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal>;
    /// The `expires_at` an extension decided on this unit moves the hold to.
    fn extended_to(events: &[Self::Event]) -> Option<DateTime<Utc>>;
    /// Records the expiry of a hold past its `expires_at` (nothing otherwise).
    fn expire(&self, key: &Self::Key, hold_id: HoldId, now: DateTime<Utc>) -> Vec<Self::Event>;
    fn convert(
        &self,
        key: &Self::Key,
        hold_id: HoldId,
        booking_id: BookingId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal>;
    fn cancel(
        &self,
        key: &Self::Key,
        booking_id: BookingId,
        now: DateTime<Utc>,
    ) -> Vec<Self::Event>;
    /// Gives back at most `places` of the units `hold_id` sold to
    /// `booking_id` here (a seat: itself, whatever `places` is), and says
    /// how many it gave back: an order's lines are cancelled a place at a
    /// time, and one order books several holds' places on a shard under
    /// its one booking id, each line given back from its own hold's.
    fn give_back(
        &self,
        key: &Self::Key,
        sold: (BookingId, HoldId),
        places: u32,
        now: DateTime<Utc>,
    ) -> (Vec<Self::Event>, u32);
    /// The shard a pool unit is (`None`: a seat).
    fn shard(key: &Self::Key) -> Option<u32>;
}

#[derive(Debug, Clone)]
pub struct SeatKey {
    pub show_id: ShowId,
    pub seat_id: SeatId,
}

impl SeatKey {
    /// A seat of `show_id` with its stream id.
    pub fn unit(show_id: &ShowId, seat_id: &SeatId) -> (String, Self) {
        let key = SeatKey {
            show_id: show_id.clone(),
            seat_id: seat_id.clone(),
        };
        (seat_stream_id(show_id, seat_id), key)
    }
}

#[derive(Debug, Clone)]
pub struct ShardKey {
    pub show_id: ShowId,
    pub pool_id: PoolId,
    pub index: u32,
    pub capacity: u32,
}

impl ShardKey {
    /// Shard `index` of pool `spec` with its stream id.
    pub fn unit(show_id: &ShowId, spec: &PoolSpec, index: u32) -> (String, Self) {
        let key = ShardKey {
            show_id: show_id.clone(),
            pool_id: spec.pool_id.clone(),
            index,
            capacity: shard_capacity(spec.capacity, spec.shards, index),
        };
        (shard_stream_id(show_id, &spec.pool_id, index), key)
    }
}

fn seat_refusal(e: SeatError) -> Refusal {
    match e {
        SeatError::HoldExpired => Refusal::Expired,
        SeatError::HoldConverted => Refusal::Converted,
        SeatError::ExtensionLimit => Refusal::ExtensionLimit,
        _ => Refusal::Lost,
    }
}

fn pool_refusal(e: PoolError) -> Refusal {
    match e {
        PoolError::HoldExpired => Refusal::Expired,
        PoolError::HoldConverted => Refusal::Converted,
        PoolError::ExtensionLimit => Refusal::ExtensionLimit,
        _ => Refusal::Lost,
    }
}

impl Unit for Seat {
    fn release(
        &self,
        _: &SeatKey,
        hold_id: HoldId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        seat::decide(self, &SeatCommand::ReleaseHold { hold_id }, now).map_err(seat_refusal)
    }

    fn extend(
        &self,
        _: &SeatKey,
        hold_id: HoldId,
        ttl: Duration,
        max_hold: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        let command = SeatCommand::ExtendHold {
            hold_id,
            ttl,
            max_hold,
        };
        seat::decide(self, &command, now).map_err(seat_refusal)
    }

    fn extended_to(events: &[Self::Event]) -> Option<DateTime<Utc>> {
        events.iter().find_map(|e| match e {
            SeatEvent::HoldExtended { expires_at, .. } => Some(*expires_at),
            _ => None,
        })
    }

    fn expire(&self, _: &SeatKey, hold_id: HoldId, now: DateTime<Utc>) -> Vec<Self::Event> {
        seat::decide(self, &SeatCommand::ExpireHold { hold_id }, now).unwrap_or_default()
    }

    fn convert(
        &self,
        _: &SeatKey,
        hold_id: HoldId,
        booking_id: BookingId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        let command = SeatCommand::ConvertHold {
            hold_id,
            booking_id,
        };
        seat::decide(self, &command, now).map_err(seat_refusal)
    }

    fn cancel(&self, _: &SeatKey, booking_id: BookingId, now: DateTime<Utc>) -> Vec<Self::Event> {
        seat::decide(self, &SeatCommand::CancelBooking { booking_id }, now).unwrap_or_default()
    }

    fn give_back(
        &self,
        key: &SeatKey,
        (booking_id, _): (BookingId, HoldId),
        _places: u32,
        now: DateTime<Utc>,
    ) -> (Vec<Self::Event>, u32) {
        let events = self.cancel(key, booking_id, now);
        let freed = u32::from(!events.is_empty());
        (events, freed)
    }

    fn shard(_: &SeatKey) -> Option<u32> {
        None
    }
}

impl Stream for Seat {
    type Key = SeatKey;

    fn show_id(key: &SeatKey) -> &ShowId {
        &key.show_id
    }

    fn rows(rows: &mut Rows, key: &SeatKey, before: &Self, version: usize, events: &[SeatEvent]) {
        rows.seat(&key.show_id, &key.seat_id, before, version, events);
    }

    fn cache(inventory: &Inventory) -> &StreamCache<Self> {
        &inventory.seats
    }

    /// Seats lock in stream-id order.
    fn sort(units: &mut [(String, SeatKey)]) {
        units.sort_by(|a, b| a.0.cmp(&b.0));
    }
}

impl Unit for PoolShard {
    fn release(
        &self,
        key: &ShardKey,
        hold_id: HoldId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        pool::decide(
            self,
            key.capacity,
            &PoolCommand::ReleaseHold { hold_id },
            now,
        )
        .map_err(pool_refusal)
    }

    fn extend(
        &self,
        key: &ShardKey,
        hold_id: HoldId,
        ttl: Duration,
        max_hold: Duration,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        let command = PoolCommand::ExtendHold {
            hold_id,
            ttl,
            max_hold,
        };
        pool::decide(self, key.capacity, &command, now).map_err(pool_refusal)
    }

    fn extended_to(events: &[Self::Event]) -> Option<DateTime<Utc>> {
        events.iter().find_map(|e| match e {
            PoolEvent::PoolHoldExtended { expires_at, .. } => Some(*expires_at),
            _ => None,
        })
    }

    fn expire(&self, key: &ShardKey, hold_id: HoldId, now: DateTime<Utc>) -> Vec<Self::Event> {
        pool::decide(
            self,
            key.capacity,
            &PoolCommand::ExpireHold { hold_id },
            now,
        )
        .unwrap_or_default()
    }

    fn convert(
        &self,
        key: &ShardKey,
        hold_id: HoldId,
        booking_id: BookingId,
        now: DateTime<Utc>,
    ) -> Result<Vec<Self::Event>, Refusal> {
        let command = PoolCommand::ConvertHold {
            hold_id,
            booking_id,
        };
        pool::decide(self, key.capacity, &command, now).map_err(pool_refusal)
    }

    fn cancel(
        &self,
        key: &ShardKey,
        booking_id: BookingId,
        now: DateTime<Utc>,
    ) -> Vec<Self::Event> {
        pool::decide(
            self,
            key.capacity,
            &PoolCommand::CancelBooking { booking_id },
            now,
        )
        .unwrap_or_default()
    }

    fn give_back(
        &self,
        key: &ShardKey,
        (booking_id, hold_id): (BookingId, HoldId),
        places: u32,
        now: DateTime<Utc>,
    ) -> (Vec<Self::Event>, u32) {
        let command = PoolCommand::ReturnPlaces {
            booking_id,
            hold_id,
            quantity: places,
        };
        let events = pool::decide(self, key.capacity, &command, now).unwrap_or_default();
        let freed = events
            .iter()
            .map(|e| match e {
                PoolEvent::PoolPlacesReturned { quantity, .. } => *quantity,
                _ => 0,
            })
            .sum();
        (events, freed)
    }

    fn shard(key: &ShardKey) -> Option<u32> {
        Some(key.index)
    }
}

impl Stream for PoolShard {
    type Key = ShardKey;

    fn show_id(key: &ShardKey) -> &ShowId {
        &key.show_id
    }

    fn rows(rows: &mut Rows, key: &ShardKey, before: &Self, version: usize, events: &[PoolEvent]) {
        rows.shard(
            &key.show_id,
            &key.pool_id,
            key.index,
            before,
            version,
            events,
        );
    }

    fn cache(inventory: &Inventory) -> &StreamCache<Self> {
        &inventory.shards
    }

    /// Shards lock in index order.
    fn sort(units: &mut [(String, ShardKey)]) {
        units.sort_by_key(|(_, key)| key.index);
    }
}

/// The units a hold holds, each with its stream id, in lock order.
pub enum HoldUnits {
    Seats(Vec<(String, SeatKey)>),
    Pool(Vec<(String, ShardKey)>),
}

fn corrupt(hold_id: HoldId, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("hold {hold_id}: {e}"))
}

/// The units of a stored hold, in lock order.
pub fn units_of(record: &HoldRecord, show: &Show) -> Result<HoldUnits, StoreError> {
    let show_id = &show.show_id;
    match &record.pool {
        None => {
            let mut units: Vec<(String, SeatKey)> = record
                .seats
                .iter()
                .map(|seat_id| SeatKey::unit(show_id, seat_id))
                .collect();
            Seat::sort(&mut units);
            Ok(HoldUnits::Seats(units))
        }
        Some((pool_id, parts)) => {
            let spec = show
                .pool(pool_id)
                .ok_or_else(|| corrupt(record.hold_id, "its pool is not in the show"))?;
            let mut units: Vec<(String, ShardKey)> = parts
                .iter()
                .map(|&(index, _)| ShardKey::unit(show_id, spec, index))
                .collect();
            PoolShard::sort(&mut units);
            Ok(HoldUnits::Pool(units))
        }
    }
}

/// Units as a decision's tests are given them.
#[cfg(test)]
pub(crate) mod fixtures {
    use chrono::{DateTime, Duration, Utc};
    use domain::ids::{BuyerId, HoldId};
    use domain::seat::{self, Seat, SeatCommand};

    pub(crate) fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    /// A seat `hold_id` holds from `now()` for ten minutes.
    pub(crate) fn seat_held_by(hold_id: HoldId) -> Seat {
        let mut seat = Seat::default();
        let command = SeatCommand::PlaceHold {
            hold_id,
            buyer: BuyerId::parse("buyer-1").expect("a buyer"),
            expires_at: now() + Duration::minutes(10),
            price: None,
            channel: None,
            role: domain::seat::WaitlistRole::None,
        };
        for event in seat::decide(&seat, &command, now()).expect("a free seat is held") {
            cqrs_es::Aggregate::apply(&mut seat, event);
        }
        seat
    }

    /// The key of seat `A-1` of show `show`.
    pub(crate) fn seat_key() -> super::SeatKey {
        let show_id = domain::ids::ShowId::parse("show").expect("a show id");
        let seat_id = domain::ids::SeatId::parse("A-1").expect("a seat id");
        super::SeatKey::unit(&show_id, &seat_id).1
    }
}
