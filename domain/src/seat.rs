//! The Seat stream: one event stream per show and seat.
//!
//! A seat is available, held by one hold until its `expires_at`, or booked.
//! Expiry needs no event to take effect: a hold whose `expires_at` has passed
//! no longer holds the seat, whatever the stream says. `HoldExpired` is
//! recorded when someone acts on the seat after that instant, as the audit
//! record of what happened.
//!
//! The stream version is the unit of concurrency: a decision is appended at
//! the version it was made on, and the store refuses it if anyone appended
//! first. [`decide`] is therefore pure and cheap, and is simply run again
//! after a conflict.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{BookingId, BuyerId, ChannelId, HoldId};
use crate::pricing::ItemPrice;

/// The expiry rule, written once: a hold is active strictly before its
/// `expires_at` and has expired from that instant on. Commands and queries
/// both ask this, with the `now` they captured.
pub fn has_expired(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= expires_at
}

/// The latest instant a hold may be extended to: `max_hold` after it was
/// placed. Every hold is placed to expire one show TTL after the instant it
/// is placed at (the placing command's `now`), and a show never changes, so
/// the placement time is `placed_expires_at - ttl`: known from the hold's
/// own `HoldPlaced` event, on every instance and after any replay, old
/// events included.
pub fn extension_cap(
    placed_expires_at: DateTime<Utc>,
    ttl: Duration,
    max_hold: Duration,
) -> DateTime<Utc> {
    placed_expires_at - ttl + max_hold
}

/// Why an extension is refused, for both unit types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionRefusal {
    /// The hold has expired at `now`.
    Expired,
    /// The hold already expires at its cap.
    Limit,
}

/// The one extension rule: an active hold moves to `now + ttl`, but never
/// past [`extension_cap`]. A hold already at its cap is refused
/// ([`ExtensionRefusal::Limit`]); an extension that would not move the
/// expiry later (asked again at the same instant, or by an instance whose
/// clock is behind) is `Ok(None)`: nothing to do.
pub fn extended_expiry(
    placed_expires_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    ttl: Duration,
    max_hold: Duration,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, ExtensionRefusal> {
    if has_expired(expires_at, now) {
        return Err(ExtensionRefusal::Expired);
    }
    let cap = extension_cap(placed_expires_at, ttl, max_hold);
    if expires_at >= cap {
        return Err(ExtensionRefusal::Limit);
    }
    let to = (now + ttl).min(cap);
    Ok((to > expires_at).then_some(to))
}

/// A hold as a seat sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeatHold {
    pub hold_id: HoldId,
    pub buyer: BuyerId,
    /// When the hold expires: as placed, or as last extended.
    pub expires_at: DateTime<Utc>,
    /// The `expires_at` the hold was placed with (extensions never move it):
    /// what the extension cap is measured from ([`extension_cap`]).
    pub placed_expires_at: DateTime<Utc>,
}

impl SeatHold {
    /// A hold is active strictly before `expires_at`; at that instant it has expired.
    pub fn is_active_at(&self, now: DateTime<Utc>) -> bool {
        !has_expired(self.expires_at, now)
    }
}

/// What the stream's events add up to. `Held` records the last hold placed,
/// even after it expired: whether it still holds the seat is a question
/// asked with a `now` ([`Seat::status_at`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeatState {
    #[default]
    Available,
    Held(SeatHold),
    Booked {
        hold_id: HoldId,
        booking_id: BookingId,
        buyer: BuyerId,
    },
}

/// What a reader sees at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatStatus {
    Available,
    Held,
    Booked,
    /// Free, but allocated to a sales channel the reader does not buy
    /// through (or, to a channel's buyer, in another inventory): a reader's
    /// view only, never recorded.
    NotForSale,
}

impl SeatStatus {
    /// The status a reader sees at `now`: a seat recorded as held reads as
    /// available once its hold's `expires_at` has passed. This is the one
    /// place the expiry rule for reads is written; queries call it.
    pub fn at(recorded: SeatStatus, expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Self {
        match (recorded, expires_at) {
            (SeatStatus::Held, Some(expires_at)) if has_expired(expires_at, now) => {
                SeatStatus::Available
            }
            (recorded, _) => recorded,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SeatStatus::Available => "available",
            SeatStatus::Held => "held",
            SeatStatus::Booked => "booked",
            SeatStatus::NotForSale => "not_for_sale",
        }
    }
}

/// The Seat aggregate (the fold of a seat stream).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seat {
    pub state: SeatState,
    /// The sales channel the seat is allocated to (`None`: public sale).
    /// Only that channel's buyers may hold it; it stays the channel's
    /// through holds, expiries and bookings until it is given back.
    #[serde(default)]
    pub channel: Option<ChannelId>,
    /// What the seat costs its current hold or booking, as the hold's
    /// `HoldPlaced` priced it (`None` while free, or for a hold placed before
    /// prices were in the events): what a report counts as revenue.
    #[serde(default)]
    pub price: Option<ItemPrice>,
}

impl Seat {
    /// The status the stream records, before expiry is applied.
    pub fn recorded_status(&self) -> SeatStatus {
        match &self.state {
            SeatState::Available => SeatStatus::Available,
            SeatState::Held(_) => SeatStatus::Held,
            SeatState::Booked { .. } => SeatStatus::Booked,
        }
    }

    pub fn status_at(&self, now: DateTime<Utc>) -> SeatStatus {
        let expires_at = match &self.state {
            SeatState::Held(hold) => Some(hold.expires_at),
            _ => None,
        };
        SeatStatus::at(self.recorded_status(), expires_at, now)
    }

    /// The hold that holds this seat at `now`, if any.
    pub fn active_hold(&self, now: DateTime<Utc>) -> Option<&SeatHold> {
        match &self.state {
            SeatState::Held(hold) if hold.is_active_at(now) => Some(hold),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatCommand {
    /// Hold the seat for `hold_id` until `expires_at`, at `price`, from
    /// `channel`'s inventory (`None`: public sale).
    PlaceHold {
        hold_id: HoldId,
        buyer: BuyerId,
        expires_at: DateTime<Utc>,
        price: Option<ItemPrice>,
        channel: Option<ChannelId>,
    },
    /// Move the seat, free now, to `channel`: off public sale.
    Allocate { channel: ChannelId },
    /// Give the seat back to public sale from `channel`, unless it is held
    /// or booked through the channel.
    Deallocate { channel: ChannelId },
    /// The buyer gives the seat back.
    ReleaseHold { hold_id: HoldId },
    /// Record that the hold has expired (the sweeper, or a release after expiry).
    ExpireHold { hold_id: HoldId },
    /// The hold was paid for: book the seat, if the hold still holds it at `now`.
    ConvertHold {
        hold_id: HoldId,
        booking_id: BookingId,
    },
    /// The booking was cancelled (and refunded): the seat is free again.
    CancelBooking { booking_id: BookingId },
    /// Extend the hold to `now + ttl`, at most `max_hold` after its
    /// placement (the show's `hold_ttl_seconds` and `max_hold_seconds`).
    ExtendHold {
        hold_id: HoldId,
        ttl: Duration,
        max_hold: Duration,
    },
}

/// Events are forever: add variants, never change one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeatEvent {
    HoldPlaced {
        hold_id: HoldId,
        buyer: BuyerId,
        expires_at: DateTime<Utc>,
        /// What the seat costs this hold, fixed at its decision (absent in
        /// events recorded before prices were: the show's seat price).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        price: Option<ItemPrice>,
    },
    HoldReleased {
        hold_id: HoldId,
    },
    HoldExpired {
        hold_id: HoldId,
    },
    HoldConverted {
        hold_id: HoldId,
        booking_id: BookingId,
    },
    BookingCancelled {
        booking_id: BookingId,
    },
    /// The hold now expires at `expires_at` (later than before).
    HoldExtended {
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
    },
    SeatAllocated {
        channel: ChannelId,
    },
    SeatDeallocated {
        channel: ChannelId,
    },
}

event_names!(SeatEvent {
    HoldPlaced => "HoldPlaced",
    HoldReleased => "HoldReleased",
    HoldExpired => "HoldExpired",
    HoldConverted => "HoldConverted",
    BookingCancelled => "BookingCancelled",
    HoldExtended => "HoldExtended",
    SeatAllocated => "SeatAllocated",
    SeatDeallocated => "SeatDeallocated",
});

/// Why a seat refuses a command. Compared by value in tests; mapped to an
/// HTTP answer at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SeatError {
    #[error("the seat is held by another hold")]
    HeldByAnother,
    /// Allocated to another channel (or to one, for a public hold; or
    /// public, for a channel's hold).
    #[error("the seat is not for sale here")]
    NotForSale,
    #[error("the seat is booked")]
    Booked,
    #[error("the hold has been converted into a booking")]
    HoldConverted,
    #[error("a hold must expire after the moment it is placed")]
    ExpiryNotInFuture,
    #[error("the hold has expired")]
    HoldExpired,
    #[error("the hold no longer holds this seat")]
    HoldLost,
    #[error("the hold already lasts as long as the show allows")]
    ExtensionLimit,
}

/// The one decision function of the Seat stream: each command to its own
/// decision below.
pub fn decide(
    seat: &Seat,
    command: &SeatCommand,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    match command {
        SeatCommand::PlaceHold {
            hold_id,
            buyer,
            expires_at,
            price,
            channel,
        } => {
            if seat.channel != *channel && !is_retry(seat, *hold_id, now) {
                return Err(SeatError::NotForSale);
            }
            place_hold(seat, *hold_id, buyer, *expires_at, price.as_ref(), now)
        }
        SeatCommand::Allocate { channel } => allocate(seat, channel, now),
        SeatCommand::Deallocate { channel } => deallocate(seat, channel, now),
        SeatCommand::ReleaseHold { hold_id } => release_hold(seat, *hold_id, now),
        SeatCommand::ExpireHold { hold_id } => Ok(expire_hold(seat, *hold_id, now)),
        SeatCommand::ConvertHold {
            hold_id,
            booking_id,
        } => convert_hold(seat, *hold_id, *booking_id, now),
        SeatCommand::CancelBooking { booking_id } => Ok(cancel_booking(seat, *booking_id)),
        SeatCommand::ExtendHold {
            hold_id,
            ttl,
            max_hold,
        } => extend_hold(seat, *hold_id, *ttl, *max_hold, now),
    }
}

/// The same hold asking again while it holds the seat (a retried request).
fn is_retry(seat: &Seat, hold_id: HoldId, now: DateTime<Utc>) -> bool {
    matches!(&seat.state, SeatState::Held(h) if h.hold_id == hold_id && h.is_active_at(now))
}

/// The seat, free at `now` (an expired hold's expiry recorded first),
/// moves to `channel`; allocated to it already, nothing to do.
fn allocate(
    seat: &Seat,
    channel: &ChannelId,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    match &seat.channel {
        Some(current) if current == channel => return Ok(vec![]),
        Some(_) => return Err(SeatError::NotForSale),
        None => {}
    }
    let mut events = free_at(seat, now)?;
    events.push(SeatEvent::SeatAllocated {
        channel: channel.clone(),
    });
    Ok(events)
}

/// The seat goes back to public sale from `channel`, if it is free at
/// `now`; one not allocated to `channel` has nothing to give back.
fn deallocate(
    seat: &Seat,
    channel: &ChannelId,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    if seat.channel.as_ref() != Some(channel) {
        return Ok(vec![]);
    }
    let mut events = free_at(seat, now)?;
    events.push(SeatEvent::SeatDeallocated {
        channel: channel.clone(),
    });
    Ok(events)
}

/// What makes the seat free at `now`: nothing, or the expiry of a hold past
/// its `expires_at`; a seat held or booked is not free.
fn free_at(seat: &Seat, now: DateTime<Utc>) -> Result<Vec<SeatEvent>, SeatError> {
    match &seat.state {
        SeatState::Available => Ok(vec![]),
        SeatState::Held(hold) if hold.is_active_at(now) => Err(SeatError::HeldByAnother),
        SeatState::Held(expired) => Ok(vec![SeatEvent::HoldExpired {
            hold_id: expired.hold_id,
        }]),
        SeatState::Booked { .. } => Err(SeatError::Booked),
    }
}

/// Holds an available seat, or one whose last hold has expired (that
/// expiry is recorded first).
fn place_hold(
    seat: &Seat,
    hold_id: HoldId,
    buyer: &BuyerId,
    expires_at: DateTime<Utc>,
    price: Option<&ItemPrice>,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    if expires_at <= now {
        return Err(SeatError::ExpiryNotInFuture);
    }
    let placed = SeatEvent::HoldPlaced {
        hold_id,
        buyer: buyer.clone(),
        expires_at,
        price: price.cloned(),
    };
    match &seat.state {
        SeatState::Available => Ok(vec![placed]),
        // The same hold asking again (a retried request): nothing to do.
        SeatState::Held(current) if current.hold_id == hold_id && current.is_active_at(now) => {
            Ok(vec![])
        }
        SeatState::Held(current) if current.is_active_at(now) => Err(SeatError::HeldByAnother),
        SeatState::Held(expired) => Ok(vec![
            SeatEvent::HoldExpired {
                hold_id: expired.hold_id,
            },
            placed,
        ]),
        SeatState::Booked { .. } => Err(SeatError::Booked),
    }
}

/// The buyer gives the seat back; a hold already past its expiry is
/// recorded as expired instead.
fn release_hold(
    seat: &Seat,
    hold_id: HoldId,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    match &seat.state {
        SeatState::Held(current) if current.hold_id == hold_id => {
            if current.is_active_at(now) {
                Ok(vec![SeatEvent::HoldReleased { hold_id }])
            } else {
                Ok(vec![SeatEvent::HoldExpired { hold_id }])
            }
        }
        SeatState::Booked {
            hold_id: booked_by, ..
        } if *booked_by == hold_id => Err(SeatError::HoldConverted),
        // The hold no longer holds this seat: releasing again is a no-op.
        _ => Ok(vec![]),
    }
}

/// Records the expiry of the hold, if it still holds the seat and has expired.
fn expire_hold(seat: &Seat, hold_id: HoldId, now: DateTime<Utc>) -> Vec<SeatEvent> {
    match &seat.state {
        SeatState::Held(current) if current.hold_id == hold_id && !current.is_active_at(now) => {
            vec![SeatEvent::HoldExpired { hold_id }]
        }
        _ => vec![],
    }
}

/// Books the seat for a paid hold, if the hold still holds it at `now`.
fn convert_hold(
    seat: &Seat,
    hold_id: HoldId,
    booking_id: BookingId,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    match &seat.state {
        SeatState::Held(current) if current.hold_id == hold_id => {
            if current.is_active_at(now) {
                Ok(vec![SeatEvent::HoldConverted {
                    hold_id,
                    booking_id,
                }])
            } else {
                Err(SeatError::HoldExpired)
            }
        }
        // Converted already (a retried conversion): nothing to do.
        SeatState::Booked {
            hold_id: booked_by,
            booking_id: booked_as,
            ..
        } if *booked_by == hold_id && *booked_as == booking_id => Ok(vec![]),
        _ => Err(SeatError::HoldLost),
    }
}

/// Frees the seat of a cancelled booking; any other booking's cancel is a no-op.
fn cancel_booking(seat: &Seat, booking_id: BookingId) -> Vec<SeatEvent> {
    match &seat.state {
        SeatState::Booked {
            booking_id: current,
            ..
        } if *current == booking_id => vec![SeatEvent::BookingCancelled { booking_id }],
        _ => vec![],
    }
}

/// Moves the hold's expiry by [`extended_expiry`], the rule both unit types share.
fn extend_hold(
    seat: &Seat,
    hold_id: HoldId,
    ttl: Duration,
    max_hold: Duration,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    match &seat.state {
        SeatState::Held(current) if current.hold_id == hold_id => {
            match extended_expiry(
                current.placed_expires_at,
                current.expires_at,
                ttl,
                max_hold,
                now,
            ) {
                Ok(Some(expires_at)) => Ok(vec![SeatEvent::HoldExtended {
                    hold_id,
                    expires_at,
                }]),
                Ok(None) => Ok(vec![]),
                Err(ExtensionRefusal::Expired) => Err(SeatError::HoldExpired),
                Err(ExtensionRefusal::Limit) => Err(SeatError::ExtensionLimit),
            }
        }
        SeatState::Booked {
            hold_id: booked_by, ..
        } if *booked_by == hold_id => Err(SeatError::HoldConverted),
        // Released, or expired and recorded (perhaps taken since).
        _ => Err(SeatError::HoldLost),
    }
}

impl Seat {
    /// Folds one event into the state. Never fails: events are facts.
    pub fn apply_event(&mut self, event: &SeatEvent) {
        match event {
            SeatEvent::HoldPlaced {
                hold_id,
                buyer,
                expires_at,
                price,
            } => {
                self.price = price.clone();
                self.state = SeatState::Held(SeatHold {
                    hold_id: *hold_id,
                    buyer: buyer.clone(),
                    expires_at: *expires_at,
                    placed_expires_at: *expires_at,
                });
            }
            SeatEvent::HoldExtended {
                hold_id,
                expires_at,
            } => {
                if let SeatState::Held(hold) = &mut self.state {
                    if hold.hold_id == *hold_id {
                        hold.expires_at = *expires_at;
                    }
                }
            }
            SeatEvent::HoldReleased { hold_id } | SeatEvent::HoldExpired { hold_id } => {
                if matches!(&self.state, SeatState::Held(h) if h.hold_id == *hold_id) {
                    self.state = SeatState::Available;
                    self.price = None;
                }
            }
            SeatEvent::HoldConverted {
                hold_id,
                booking_id,
            } => {
                if let SeatState::Held(hold) = &self.state {
                    if hold.hold_id == *hold_id {
                        self.state = SeatState::Booked {
                            hold_id: *hold_id,
                            booking_id: *booking_id,
                            buyer: hold.buyer.clone(),
                        };
                    }
                }
            }
            SeatEvent::BookingCancelled { booking_id } => {
                if matches!(&self.state, SeatState::Booked { booking_id: b, .. } if b == booking_id)
                {
                    self.state = SeatState::Available;
                    self.price = None;
                }
            }
            SeatEvent::SeatAllocated { channel } => self.channel = Some(channel.clone()),
            SeatEvent::SeatDeallocated { .. } => self.channel = None,
        }
    }
}

/// A command with the instant it is decided at, captured once per request so
/// that every seat of a multi-seat command sees the same `now`.
#[derive(Debug, Clone)]
pub struct Timed<C> {
    pub command: C,
    pub now: DateTime<Utc>,
}

impl Decider for Seat {
    type Command = Timed<SeatCommand>;
    type Event = SeatEvent;
    type Error = SeatError;

    fn decide(&self, command: &Self::Command) -> Result<Vec<SeatEvent>, SeatError> {
        decide(self, &command.command, command.now)
    }

    fn evolve(&mut self, event: &SeatEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(Seat, "Seat");

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::EVENT_VERSION;
    use chrono::Duration;
    use cqrs_es::DomainEvent;
    use uuid::Uuid;

    pub(crate) fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(1_800_000_000 + seconds)
    }
    pub(crate) fn hold(n: u128) -> HoldId {
        HoldId(Uuid::from_u128(n))
    }
    pub(crate) fn buyer(name: &str) -> BuyerId {
        BuyerId::parse(name).unwrap()
    }
    fn placed(n: u128, who: &str, until: i64) -> SeatEvent {
        SeatEvent::HoldPlaced {
            hold_id: hold(n),
            buyer: buyer(who),
            expires_at: t(until),
            price: None,
        }
    }
    fn place(n: u128, who: &str, until: i64) -> SeatCommand {
        SeatCommand::PlaceHold {
            hold_id: hold(n),
            buyer: buyer(who),
            expires_at: t(until),
            price: None,
            channel: None,
        }
    }

    /// given these events, when this command is decided at `now`, then ...
    fn given(events: &[SeatEvent]) -> Seat {
        let mut seat = Seat::default();
        for e in events {
            seat.apply_event(e);
        }
        seat
    }

    mod channels {
        use super::*;

        fn channel(name: &str) -> ChannelId {
            ChannelId::parse(name).unwrap()
        }

        fn allocated(name: &str) -> SeatEvent {
            SeatEvent::SeatAllocated {
                channel: channel(name),
            }
        }

        fn place_from(n: u128, name: Option<&str>) -> SeatCommand {
            let SeatCommand::PlaceHold {
                hold_id,
                buyer,
                expires_at,
                price,
                ..
            } = place(n, "partner-buyer", 480)
            else {
                unreachable!("place is a PlaceHold");
            };
            SeatCommand::PlaceHold {
                hold_id,
                buyer,
                expires_at,
                price,
                channel: name.map(channel),
            }
        }

        #[test]
        fn it_should_allocate_a_free_seat_once() {
            let free = given(&[]);
            let allocate = SeatCommand::Allocate {
                channel: channel("partner-x"),
            };
            assert_eq!(
                decide(&free, &allocate, t(0)),
                Ok(vec![allocated("partner-x")])
            );
            let done = given(&[allocated("partner-x")]);
            assert_eq!(decide(&done, &allocate, t(0)), Ok(vec![]), "again: a no-op");
            let other = SeatCommand::Allocate {
                channel: channel("boxoffice"),
            };
            assert_eq!(decide(&done, &other, t(0)), Err(SeatError::NotForSale));
        }

        #[test]
        fn it_should_not_allocate_a_seat_held_or_booked_but_one_whose_hold_expired() {
            let allocate = SeatCommand::Allocate {
                channel: channel("partner-x"),
            };
            let held = given(&[placed(1, "alice", 480)]);
            assert_eq!(
                decide(&held, &allocate, t(10)),
                Err(SeatError::HeldByAnother)
            );
            assert_eq!(
                decide(&held, &allocate, t(480)),
                Ok(vec![
                    SeatEvent::HoldExpired { hold_id: hold(1) },
                    allocated("partner-x")
                ])
            );
            let booked = given(&[
                placed(1, "alice", 480),
                SeatEvent::HoldConverted {
                    hold_id: hold(1),
                    booking_id: BookingId(Uuid::from_u128(9)),
                },
            ]);
            assert_eq!(decide(&booked, &allocate, t(10)), Err(SeatError::Booked));
        }

        #[test]
        fn it_should_sell_an_allocated_seat_only_through_its_channel() {
            let seat = given(&[allocated("partner-x")]);
            assert_eq!(
                decide(&seat, &place_from(1, None), t(0)),
                Err(SeatError::NotForSale)
            );
            assert_eq!(
                decide(&seat, &place_from(1, Some("boxoffice")), t(0)),
                Err(SeatError::NotForSale)
            );
            assert!(decide(&seat, &place_from(1, Some("partner-x")), t(0)).is_ok());
            let public = given(&[]);
            assert_eq!(
                decide(&public, &place_from(1, Some("partner-x")), t(0)),
                Err(SeatError::NotForSale),
                "a channel's buyers hold only the channel's inventory"
            );
        }

        #[test]
        fn it_should_give_back_a_free_seat_but_not_one_sold_through_the_channel() {
            let back = SeatCommand::Deallocate {
                channel: channel("partner-x"),
            };
            let seat = given(&[allocated("partner-x")]);
            assert_eq!(
                decide(&seat, &back, t(0)),
                Ok(vec![SeatEvent::SeatDeallocated {
                    channel: channel("partner-x")
                }])
            );
            let mut held = seat.clone();
            for event in decide(&seat, &place_from(1, Some("partner-x")), t(0)).unwrap() {
                held.apply_event(&event);
            }
            assert_eq!(decide(&held, &back, t(10)), Err(SeatError::HeldByAnother));
            assert_eq!(
                held.channel,
                Some(channel("partner-x")),
                "held, still the channel's"
            );
            assert_eq!(
                decide(&given(&[]), &back, t(0)),
                Ok(vec![]),
                "nothing to give back"
            );
            let mut returned = seat;
            returned.apply_event(&SeatEvent::SeatDeallocated {
                channel: channel("partner-x"),
            });
            assert!(
                decide(&returned, &place_from(2, None), t(0)).is_ok(),
                "public again"
            );
        }
    }

    #[test]
    fn it_should_hold_an_available_seat() {
        let seat = given(&[]);
        assert_eq!(
            decide(&seat, &place(1, "alice", 480), t(0)),
            Ok(vec![placed(1, "alice", 480)])
        );
    }

    #[test]
    fn it_should_not_hold_a_seat_held_by_another_active_hold() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(
            decide(&seat, &place(2, "bob", 500), t(10)),
            Err(SeatError::HeldByAnother)
        );
    }

    #[test]
    fn it_should_treat_the_same_hold_again_as_a_no_op() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(decide(&seat, &place(1, "alice", 490), t(10)), Ok(vec![]));
    }

    #[test]
    fn it_should_expire_the_old_hold_and_place_the_new_one_after_expiry() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(
            decide(&seat, &place(2, "bob", 960), t(480)),
            Ok(vec![
                SeatEvent::HoldExpired { hold_id: hold(1) },
                placed(2, "bob", 960)
            ])
        );
    }

    #[test]
    fn it_should_consider_a_hold_active_until_the_instant_before_expires_at() {
        let seat = given(&[placed(1, "alice", 480)]);
        let just_before = t(480) - Duration::microseconds(1);
        assert_eq!(seat.status_at(just_before), SeatStatus::Held);
        assert_eq!(seat.status_at(t(480)), SeatStatus::Available);
        assert_eq!(
            decide(&seat, &place(2, "bob", 960), just_before),
            Err(SeatError::HeldByAnother)
        );
    }

    #[test]
    fn it_should_refuse_a_hold_that_expires_at_or_before_now() {
        let seat = given(&[]);
        assert_eq!(
            decide(&seat, &place(1, "alice", 0), t(0)),
            Err(SeatError::ExpiryNotInFuture)
        );
    }

    #[test]
    fn it_should_release_an_active_hold() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(
            decide(&seat, &SeatCommand::ReleaseHold { hold_id: hold(1) }, t(5)),
            Ok(vec![SeatEvent::HoldReleased { hold_id: hold(1) }])
        );
    }

    #[test]
    fn it_should_record_expiry_when_releasing_an_expired_hold() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(
            decide(
                &seat,
                &SeatCommand::ReleaseHold { hold_id: hold(1) },
                t(500)
            ),
            Ok(vec![SeatEvent::HoldExpired { hold_id: hold(1) }])
        );
    }

    #[test]
    fn it_should_do_nothing_when_releasing_a_released_hold() {
        let seat = given(&[
            placed(1, "alice", 480),
            SeatEvent::HoldReleased { hold_id: hold(1) },
        ]);
        assert_eq!(
            decide(&seat, &SeatCommand::ReleaseHold { hold_id: hold(1) }, t(5)),
            Ok(vec![])
        );
    }

    #[test]
    fn it_should_not_let_a_stale_release_touch_the_next_hold() {
        let seat = given(&[
            placed(1, "alice", 480),
            SeatEvent::HoldExpired { hold_id: hold(1) },
            placed(2, "bob", 960),
        ]);
        assert_eq!(
            decide(
                &seat,
                &SeatCommand::ReleaseHold { hold_id: hold(1) },
                t(500)
            ),
            Ok(vec![])
        );
        assert_eq!(seat.active_hold(t(500)).map(|h| h.hold_id), Some(hold(2)));
    }

    #[test]
    fn it_should_make_a_released_seat_available_again() {
        let seat = given(&[
            placed(1, "alice", 480),
            SeatEvent::HoldReleased { hold_id: hold(1) },
        ]);
        assert_eq!(seat.status_at(t(5)), SeatStatus::Available);
        assert_eq!(
            decide(&seat, &place(2, "bob", 500), t(5)),
            Ok(vec![placed(2, "bob", 500)])
        );
    }

    #[test]
    fn it_should_expire_only_a_hold_past_its_expiry() {
        let seat = given(&[placed(1, "alice", 480)]);
        let expire = SeatCommand::ExpireHold { hold_id: hold(1) };
        assert_eq!(decide(&seat, &expire, t(479)), Ok(vec![]));
        assert_eq!(
            decide(&seat, &expire, t(480)),
            Ok(vec![SeatEvent::HoldExpired { hold_id: hold(1) }])
        );
    }

    #[test]
    fn it_should_not_expire_another_hold() {
        let seat = given(&[placed(2, "bob", 480)]);
        let expire = SeatCommand::ExpireHold { hold_id: hold(1) };
        assert_eq!(decide(&seat, &expire, t(900)), Ok(vec![]));
    }

    fn booking(n: u128) -> BookingId {
        BookingId(Uuid::from_u128(1000 + n))
    }
    fn convert(n: u128) -> SeatCommand {
        SeatCommand::ConvertHold {
            hold_id: hold(n),
            booking_id: booking(n),
        }
    }
    fn converted(n: u128) -> SeatEvent {
        SeatEvent::HoldConverted {
            hold_id: hold(n),
            booking_id: booking(n),
        }
    }

    #[test]
    fn it_should_convert_an_active_hold_into_a_booking() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(decide(&seat, &convert(1), t(479)), Ok(vec![converted(1)]));
        let booked = given(&[placed(1, "alice", 480), converted(1)]);
        assert_eq!(booked.status_at(t(10_000)), SeatStatus::Booked);
    }

    #[test]
    fn it_should_not_convert_an_expired_hold() {
        let seat = given(&[placed(1, "alice", 480)]);
        assert_eq!(
            decide(&seat, &convert(1), t(480)),
            Err(SeatError::HoldExpired)
        );
    }

    #[test]
    fn it_should_not_convert_a_hold_that_lost_the_seat() {
        let taken = given(&[
            placed(1, "alice", 480),
            SeatEvent::HoldExpired { hold_id: hold(1) },
            placed(2, "bob", 960),
        ]);
        assert_eq!(
            decide(&taken, &convert(1), t(500)),
            Err(SeatError::HoldLost)
        );
        let released = given(&[
            placed(1, "alice", 480),
            SeatEvent::HoldReleased { hold_id: hold(1) },
        ]);
        assert_eq!(
            decide(&released, &convert(1), t(5)),
            Err(SeatError::HoldLost)
        );
        let sold = given(&[placed(2, "bob", 480), converted(2)]);
        assert_eq!(decide(&sold, &convert(1), t(5)), Err(SeatError::HoldLost));
    }

    #[test]
    fn it_should_treat_a_repeated_conversion_as_a_no_op() {
        let seat = given(&[placed(1, "alice", 480), converted(1)]);
        assert_eq!(decide(&seat, &convert(1), t(10_000)), Ok(vec![]));
    }

    #[test]
    fn it_should_not_hold_or_release_a_booked_seat() {
        let seat = given(&[placed(1, "alice", 480), converted(1)]);
        assert_eq!(
            decide(&seat, &place(2, "bob", 960), t(500)),
            Err(SeatError::Booked)
        );
        assert_eq!(
            decide(&seat, &SeatCommand::ReleaseHold { hold_id: hold(1) }, t(5)),
            Err(SeatError::HoldConverted)
        );
    }

    #[test]
    fn it_should_free_a_seat_when_its_booking_is_cancelled_and_only_then() {
        let seat = given(&[placed(1, "alice", 480), converted(1)]);
        let cancel = SeatCommand::CancelBooking {
            booking_id: booking(1),
        };
        let cancelled = SeatEvent::BookingCancelled {
            booking_id: booking(1),
        };
        assert_eq!(decide(&seat, &cancel, t(5)), Ok(vec![cancelled.clone()]));
        let freed = given(&[placed(1, "alice", 480), converted(1), cancelled]);
        assert_eq!(freed.status_at(t(5)), SeatStatus::Available);
        assert_eq!(
            decide(&freed, &cancel, t(5)),
            Ok(vec![]),
            "cancelling again"
        );
        assert_eq!(
            decide(&freed, &place(2, "bob", 960), t(6)),
            Ok(vec![placed(2, "bob", 960)])
        );
        let other = SeatCommand::CancelBooking {
            booking_id: booking(9),
        };
        assert_eq!(
            decide(&seat, &other, t(5)),
            Ok(vec![]),
            "another booking's cancel"
        );
    }

    /// TTL 100 s, at most 250 s in all: placed at 0, the cap is 250.
    fn extend(n: u128) -> SeatCommand {
        SeatCommand::ExtendHold {
            hold_id: hold(n),
            ttl: Duration::seconds(100),
            max_hold: Duration::seconds(250),
        }
    }
    fn extended(n: u128, until: i64) -> SeatEvent {
        SeatEvent::HoldExtended {
            hold_id: hold(n),
            expires_at: t(until),
        }
    }

    #[test]
    fn it_should_extend_an_active_hold_to_now_plus_the_ttl() {
        let seat = given(&[placed(1, "alice", 100)]);
        assert_eq!(decide(&seat, &extend(1), t(60)), Ok(vec![extended(1, 160)]));
        let seat = given(&[placed(1, "alice", 100), extended(1, 160)]);
        assert_eq!(
            seat.status_at(t(120)),
            SeatStatus::Held,
            "past the first expiry"
        );
        assert_eq!(seat.status_at(t(160)), SeatStatus::Available);
        assert_eq!(seat.active_hold(t(159)).map(|h| h.expires_at), Some(t(160)));
    }

    #[test]
    fn it_should_extend_no_later_than_max_hold_after_placement() {
        let seat = given(&[placed(1, "alice", 100), extended(1, 230)]);
        assert_eq!(
            decide(&seat, &extend(1), t(200)),
            Ok(vec![extended(1, 250)]),
            "capped at placement (0) + 250"
        );
        let capped = given(&[placed(1, "alice", 100), extended(1, 230), extended(1, 250)]);
        assert_eq!(
            decide(&capped, &extend(1), t(240)),
            Err(SeatError::ExtensionLimit)
        );
    }

    #[test]
    fn it_should_treat_an_extension_that_moves_nothing_as_a_no_op() {
        let seat = given(&[placed(1, "alice", 100), extended(1, 160)]);
        assert_eq!(
            decide(&seat, &extend(1), t(60)),
            Ok(vec![]),
            "the same instant"
        );
        assert_eq!(
            decide(&seat, &extend(1), t(50)),
            Ok(vec![]),
            "a clock behind"
        );
    }

    #[test]
    fn it_should_refuse_to_extend_an_expired_hold() {
        let seat = given(&[placed(1, "alice", 100)]);
        assert_eq!(
            decide(&seat, &extend(1), t(100)),
            Err(SeatError::HoldExpired)
        );
        let extended_then_expired = given(&[placed(1, "alice", 100), extended(1, 160)]);
        assert_eq!(
            decide(&extended_then_expired, &extend(1), t(160)),
            Err(SeatError::HoldExpired)
        );
    }

    #[test]
    fn it_should_refuse_to_extend_a_released_converted_or_lost_hold() {
        let released = given(&[
            placed(1, "alice", 100),
            SeatEvent::HoldReleased { hold_id: hold(1) },
        ]);
        assert_eq!(
            decide(&released, &extend(1), t(5)),
            Err(SeatError::HoldLost)
        );
        let taken = given(&[
            placed(1, "alice", 100),
            SeatEvent::HoldExpired { hold_id: hold(1) },
            placed(2, "bob", 300),
        ]);
        assert_eq!(decide(&taken, &extend(1), t(150)), Err(SeatError::HoldLost));
        let booked = given(&[placed(1, "alice", 100), converted(1)]);
        assert_eq!(
            decide(&booked, &extend(1), t(5)),
            Err(SeatError::HoldConverted)
        );
    }

    #[test]
    fn it_should_not_let_an_extension_of_an_old_hold_move_the_next_one() {
        let mut seat = given(&[
            placed(1, "alice", 100),
            SeatEvent::HoldExpired { hold_id: hold(1) },
            placed(2, "bob", 300),
        ]);
        seat.apply_event(&extended(1, 400));
        assert_eq!(seat.active_hold(t(300)), None);
    }

    #[test]
    fn it_should_name_events_by_their_variant_with_a_version() {
        let event = placed(1, "alice", 480);
        assert_eq!(event.event_type(), "HoldPlaced");
        assert_eq!(event.event_version(), EVENT_VERSION);
    }
}
