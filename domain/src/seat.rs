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

use crate::aggregate::{event_names, impl_aggregate, Decider, Timed};
use crate::ids::{BookingId, BuyerId, ChannelId, HoldId};
use crate::pricing::ItemPrice;

/// The expiry rule, written once: a hold is active strictly before its
/// `expires_at` and has expired from that instant on. Commands and queries
/// both ask this, with the `now` they captured.
pub fn has_expired(expires_at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now >= expires_at
}

/// The latest instant a hold may be extended to: `max_hold` after it was
/// placed. Every buyer's hold is placed to expire one show TTL after the
/// instant it is placed at (the placing command's `now`), and a show never
/// changes, so the placement time is `placed_expires_at - ttl`: known from
/// the hold's own `HoldPlaced` event, on every instance and after any
/// replay, old events included. The waiting list's offer lasts the list's
/// `offer_seconds` instead, and is never extended: its cap is its first
/// expiry.
pub fn extension_cap(hold: &Extendable, ttl: Duration, max_hold: Duration) -> DateTime<Utc> {
    match hold.offer {
        true => hold.placed_expires_at,
        false => hold.placed_expires_at - ttl + max_hold,
    }
}

/// What the extension rule needs of a hold, for both unit types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extendable {
    /// The `expires_at` it was placed with.
    pub placed_expires_at: DateTime<Utc>,
    /// As placed, or as last extended.
    pub expires_at: DateTime<Utc>,
    /// The waiting list's offer.
    pub offer: bool,
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
    hold: Extendable,
    ttl: Duration,
    max_hold: Duration,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, ExtensionRefusal> {
    if has_expired(hold.expires_at, now) {
        return Err(ExtensionRefusal::Expired);
    }
    let cap = extension_cap(&hold, ttl, max_hold);
    if hold.expires_at >= cap {
        return Err(ExtensionRefusal::Limit);
    }
    let to = (now + ttl).min(cap);
    Ok((to > hold.expires_at).then_some(to))
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
    /// Its end (release, expiry, cancellation of its booking) returns the
    /// seat to the show's waiting list ([`SeatState::Returned`]) rather
    /// than to sale.
    #[serde(default, rename = "line")]
    pub returns_to_waitlist: bool,
    /// The waiting list's offer: never extended past the offer's time.
    #[serde(default)]
    pub offer: bool,
}

impl SeatHold {
    pub fn extendable(&self) -> Extendable {
        Extendable {
            placed_expires_at: self.placed_expires_at,
            expires_at: self.expires_at,
            offer: self.offer,
        }
    }

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
        /// Its cancellation returns the seat to the waiting list.
        #[serde(default, rename = "line")]
        returns_to_waitlist: bool,
    },
    /// Freed on a show with a waiting list: owed to the waiting list until the waiting list
    /// offers it to an entry (a hold placed with [`WaitlistRole::Offer`]) or passes
    /// it on to sale ([`SeatEvent::SeatPassed`]). A buyer's hold is refused
    /// it; a reader sees it held.
    Returned,
}

/// How a hold meets the show's waiting list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WaitlistRole {
    /// The show keeps none, or the hold is a sales channel's (whose freed
    /// seats stay the channel's): a freed seat is for sale at once.
    #[default]
    None,
    /// A buyer's hold on a show with a waiting list: it may not take a seat
    /// owed to the waiting list (returned, or held by a returning hold that has expired
    /// and whose expiry is not yet judged), and its end returns the seat.
    Buyer,
    /// The waiting list's offer to its entry: it takes a seat owed to the waiting list; its
    /// end returns the seat again (to the next entry).
    Offer,
}

impl WaitlistRole {
    /// Whether a hold so placed returns its seat to the waiting list when it ends.
    pub fn returns(self) -> bool {
        self != WaitlistRole::None
    }
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
    /// The status the stream records, before expiry is applied. A seat
    /// owed to the waiting list reads held: it is not for sale.
    pub fn recorded_status(&self) -> SeatStatus {
        match &self.state {
            SeatState::Available => SeatStatus::Available,
            SeatState::Held(_) | SeatState::Returned => SeatStatus::Held,
            SeatState::Booked { .. } => SeatStatus::Booked,
        }
    }

    /// When the seat frees by itself at read time: its hold's `expires_at`,
    /// unless the hold's end returns the seat to the waiting list (then the
    /// seat reads held past it, until the waiting list judges it).
    pub fn frees_at(&self) -> Option<DateTime<Utc>> {
        match &self.state {
            SeatState::Held(hold) if !hold.returns_to_waitlist => Some(hold.expires_at),
            _ => None,
        }
    }

    pub fn status_at(&self, now: DateTime<Utc>) -> SeatStatus {
        SeatStatus::at(self.recorded_status(), self.frees_at(), now)
    }

    /// Whether the seat is owed to the waiting list at `now`: returned, or
    /// held by a returning hold that has expired.
    pub fn is_owed_to_waitlist(&self, now: DateTime<Utc>) -> bool {
        match &self.state {
            SeatState::Returned => true,
            SeatState::Held(hold) => hold.returns_to_waitlist && !hold.is_active_at(now),
            _ => false,
        }
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
        role: WaitlistRole,
    },
    /// Move the seat, free now, to `channel`: off public sale.
    Allocate { channel: ChannelId },
    /// Give the seat back to public sale from `channel`, unless it is held
    /// or booked through the channel; on a show with a waiting list
    /// (`returns_to_waitlist`), to the waiting list first.
    Deallocate {
        channel: ChannelId,
        returns_to_waitlist: bool,
    },
    /// The waiting list wants the seat it is owed no more (no entry it
    /// satisfies): back to sale. Nothing on a seat not owed to the waiting list.
    Pass,
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
        /// Its end returns the seat to the show's waiting list.
        #[serde(default, rename = "line", skip_serializing_if = "std::ops::Not::not")]
        returns_to_waitlist: bool,
        /// The waiting list's offer: it lasts the list's `offer_seconds`
        /// and is never extended.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        offer: bool,
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
        /// Given back to the show's waiting list first.
        #[serde(default, rename = "line", skip_serializing_if = "std::ops::Not::not")]
        returns_to_waitlist: bool,
    },
    /// Owed to the waiting list, which wanted it not: for sale again.
    SeatPassed,
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
    SeatPassed => "SeatPassed",
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
            role,
        } => {
            if seat.channel != *channel && !is_retry(seat, *hold_id, now) {
                return Err(SeatError::NotForSale);
            }
            let placing = Placing {
                hold_id: *hold_id,
                buyer,
                expires_at: *expires_at,
                price: price.as_ref(),
                role: *role,
            };
            place_hold(seat, &placing, now)
        }
        SeatCommand::Allocate { channel } => allocate(seat, channel, now),
        SeatCommand::Deallocate {
            channel,
            returns_to_waitlist,
        } => deallocate(seat, channel, *returns_to_waitlist, now),
        SeatCommand::Pass => Ok(pass(seat, now)),
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
    returns_to_waitlist: bool,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    if seat.channel.as_ref() != Some(channel) {
        return Ok(vec![]);
    }
    let mut events = free_at(seat, now)?;
    events.push(SeatEvent::SeatDeallocated {
        channel: channel.clone(),
        returns_to_waitlist,
    });
    Ok(events)
}

/// The waiting list passes on a seat it is owed (its expiry recorded first, if a
/// returning hold's): for sale again. Nothing on any other seat.
fn pass(seat: &Seat, now: DateTime<Utc>) -> Vec<SeatEvent> {
    match &seat.state {
        SeatState::Returned => vec![SeatEvent::SeatPassed],
        SeatState::Held(hold) if seat.is_owed_to_waitlist(now) => vec![
            SeatEvent::HoldExpired {
                hold_id: hold.hold_id,
            },
            SeatEvent::SeatPassed,
        ],
        _ => vec![],
    }
}

/// What makes the seat free at `now`: nothing, or the expiry of a hold past
/// its `expires_at`; a seat held or booked is not free, nor one owed to the
/// waiting list (the list decides where it goes).
fn free_at(seat: &Seat, now: DateTime<Utc>) -> Result<Vec<SeatEvent>, SeatError> {
    if seat.is_owed_to_waitlist(now) {
        return Err(SeatError::HeldByAnother);
    }
    match &seat.state {
        SeatState::Available => Ok(vec![]),
        SeatState::Held(hold) if hold.is_active_at(now) => Err(SeatError::HeldByAnother),
        SeatState::Held(expired) => Ok(vec![SeatEvent::HoldExpired {
            hold_id: expired.hold_id,
        }]),
        SeatState::Booked { .. } => Err(SeatError::Booked),
        SeatState::Returned => Err(SeatError::HeldByAnother),
    }
}

/// A hold as [`SeatCommand::PlaceHold`] asks for it.
struct Placing<'a> {
    hold_id: HoldId,
    buyer: &'a BuyerId,
    expires_at: DateTime<Utc>,
    price: Option<&'a ItemPrice>,
    role: WaitlistRole,
}

/// Holds an available seat, or one whose last hold has expired (that
/// expiry is recorded first). A seat owed to the waiting list is taken by
/// the waiting list's offer alone.
fn place_hold(
    seat: &Seat,
    placing: &Placing<'_>,
    now: DateTime<Utc>,
) -> Result<Vec<SeatEvent>, SeatError> {
    let Placing {
        hold_id,
        buyer,
        expires_at,
        price,
        role,
    } = *placing;
    if expires_at <= now {
        return Err(SeatError::ExpiryNotInFuture);
    }
    let placed = SeatEvent::HoldPlaced {
        hold_id,
        buyer: buyer.clone(),
        expires_at,
        price: price.cloned(),
        returns_to_waitlist: role.returns(),
        offer: role == WaitlistRole::Offer,
    };
    if seat.is_owed_to_waitlist(now) && role != WaitlistRole::Offer {
        return Err(SeatError::HeldByAnother);
    }
    match &seat.state {
        SeatState::Available | SeatState::Returned => Ok(vec![placed]),
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
            match extended_expiry(current.extendable(), ttl, max_hold, now) {
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
                returns_to_waitlist,
                offer,
            } => {
                self.price = price.clone();
                self.state = SeatState::Held(SeatHold {
                    hold_id: *hold_id,
                    buyer: buyer.clone(),
                    expires_at: *expires_at,
                    placed_expires_at: *expires_at,
                    returns_to_waitlist: *returns_to_waitlist,
                    offer: *offer,
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
                if let SeatState::Held(h) = &self.state {
                    self.end_hold(*hold_id == h.hold_id, h.returns_to_waitlist);
                }
            }
            SeatEvent::HoldConverted {
                hold_id,
                booking_id,
            } => self.converted(*hold_id, *booking_id),
            SeatEvent::BookingCancelled { booking_id } => self.cancelled(*booking_id),
            SeatEvent::SeatAllocated { channel } => self.channel = Some(channel.clone()),
            SeatEvent::SeatDeallocated {
                returns_to_waitlist,
                ..
            } => {
                self.channel = None;
                self.returned_if(*returns_to_waitlist && self.state == SeatState::Available);
            }
            SeatEvent::SeatPassed if self.state == SeatState::Returned => {
                self.state = SeatState::Available
            }
            SeatEvent::SeatPassed => {}
        }
    }

    /// Booked by `hold_id`'s sale, if the seat is held by it.
    fn converted(&mut self, hold_id: HoldId, booking_id: BookingId) {
        if let SeatState::Held(hold) = &self.state {
            if hold.hold_id == hold_id {
                self.state = SeatState::Booked {
                    hold_id,
                    booking_id,
                    buyer: hold.buyer.clone(),
                    returns_to_waitlist: hold.returns_to_waitlist,
                };
            }
        }
    }

    /// Owes the free seat to the waiting list, if `owed`.
    fn returned_if(&mut self, owed: bool) {
        if owed {
            self.state = SeatState::Returned;
        }
    }

    /// The hold ended (released, expired), if it was the seat's.
    fn end_hold(&mut self, its: bool, returns_to_waitlist: bool) {
        if its {
            self.state = freed(returns_to_waitlist);
            self.price = None;
        }
    }

    /// The booking `booking_id` was cancelled: the seat is freed, if it
    /// is that booking's.
    fn cancelled(&mut self, booking_id: BookingId) {
        if let SeatState::Booked {
            booking_id: b,
            returns_to_waitlist,
            ..
        } = &self.state
        {
            if *b == booking_id {
                self.state = freed(*returns_to_waitlist);
                self.price = None;
            }
        }
    }
}

/// What a seat is once its hold or booking ends: owed to the waiting list
/// if the hold was placed so, else free.
fn freed(returns_to_waitlist: bool) -> SeatState {
    if returns_to_waitlist {
        SeatState::Returned
    } else {
        SeatState::Available
    }
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
            returns_to_waitlist: false,
            offer: false,
        }
    }
    fn place(n: u128, who: &str, until: i64) -> SeatCommand {
        place_as(n, who, until, WaitlistRole::None)
    }
    fn place_as(n: u128, who: &str, until: i64, role: WaitlistRole) -> SeatCommand {
        SeatCommand::PlaceHold {
            hold_id: hold(n),
            buyer: buyer(who),
            expires_at: t(until),
            price: None,
            channel: None,
            role,
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

    mod waiting_list {
        use super::*;

        fn held_for_waitlist(n: u128, until: i64) -> Seat {
            let mut seat = given(&[]);
            for event in decide(
                &seat,
                &place_as(n, "alice", until, WaitlistRole::Buyer),
                t(0),
            )
            .unwrap()
            {
                seat.apply_event(&event);
            }
            seat
        }

        fn after(mut seat: Seat, events: Vec<SeatEvent>) -> Seat {
            for event in &events {
                seat.apply_event(event);
            }
            seat
        }

        #[test]
        fn a_returning_hold_is_stored_under_its_first_name_and_read_back_from_it() {
            // The field was `line` before the waiting list had one name:
            // logs written then must read the same, and new ones alike.
            let held = held_for_waitlist(1, 480);
            let SeatState::Held(hold) = &held.state else {
                panic!("held: {:?}", held.state);
            };
            let stored = serde_json::to_value(hold).unwrap();
            assert_eq!(stored["line"], true, "{stored}");
            assert!(stored.get("returns_to_waitlist").is_none(), "{stored}");
            let written_before = serde_json::json!({"HoldPlaced": {
                "hold_id": Uuid::from_u128(1), "buyer": "alice",
                "expires_at": t(480), "line": true}});
            let read: SeatEvent = serde_json::from_value(written_before).unwrap();
            assert!(
                matches!(
                    read,
                    SeatEvent::HoldPlaced {
                        returns_to_waitlist: true,
                        ..
                    }
                ),
                "{read:?}"
            );
        }

        #[test]
        fn a_released_returning_hold_owes_the_seat_to_the_waitlist_and_a_buyer_is_refused_it() {
            let held = held_for_waitlist(1, 480);
            let released = after(
                held.clone(),
                decide(&held, &SeatCommand::ReleaseHold { hold_id: hold(1) }, t(10)).unwrap(),
            );
            assert_eq!(released.state, SeatState::Returned);
            assert_eq!(released.status_at(t(10)), SeatStatus::Held);
            let bob = place_as(2, "bob", 900, WaitlistRole::Buyer);
            assert_eq!(
                decide(&released, &bob, t(11)),
                Err(SeatError::HeldByAnother)
            );
            let offer = place_as(3, "carol", 900, WaitlistRole::Offer);
            assert!(matches!(
                decide(&released, &offer, t(11)).as_deref(),
                Ok([SeatEvent::HoldPlaced {
                    returns_to_waitlist: true,
                    ..
                }])
            ));
        }

        #[test]
        fn at_the_instant_a_returning_hold_expires_the_seat_is_owed_to_the_waitlist_not_for_sale() {
            let held = held_for_waitlist(1, 480);
            assert_eq!(held.status_at(t(480)), SeatStatus::Held, "read time");
            assert!(held.is_owed_to_waitlist(t(480)));
            let bob = place_as(2, "bob", 900, WaitlistRole::Buyer);
            assert_eq!(decide(&held, &bob, t(480)), Err(SeatError::HeldByAnother));
            let allocate = SeatCommand::Allocate {
                channel: ChannelId::parse("partner-x").unwrap(),
            };
            assert_eq!(
                decide(&held, &allocate, t(480)),
                Err(SeatError::HeldByAnother)
            );
            let offer = place_as(3, "carol", 900, WaitlistRole::Offer);
            assert_eq!(
                decide(&held, &offer, t(480)).unwrap()[0],
                SeatEvent::HoldExpired { hold_id: hold(1) }
            );
        }

        #[test]
        fn a_passed_seat_is_for_sale_again_and_a_hold_without_a_waitlist_frees_it_at_once() {
            let held = held_for_waitlist(1, 480);
            let passed = after(
                held.clone(),
                decide(&held, &SeatCommand::Pass, t(480)).unwrap(),
            );
            assert_eq!(passed.state, SeatState::Available);
            assert_eq!(decide(&passed, &SeatCommand::Pass, t(481)), Ok(vec![]));
            let bob = place_as(2, "bob", 900, WaitlistRole::Buyer);
            assert!(decide(&passed, &bob, t(481)).is_ok());
            assert_eq!(
                decide(&held, &SeatCommand::Pass, t(10)),
                Ok(vec![]),
                "still held"
            );
            let mut plain = given(&[]);
            for event in
                decide(&plain, &place_as(1, "alice", 480, WaitlistRole::None), t(0)).unwrap()
            {
                plain.apply_event(&event);
            }
            assert_eq!(plain.status_at(t(480)), SeatStatus::Available);
            assert!(decide(&plain, &bob, t(480)).is_ok());
        }

        #[test]
        fn a_cancelled_returning_booking_and_a_channel_give_back_owe_the_seat_to_the_waitlist() {
            let held = held_for_waitlist(1, 480);
            let convert = SeatCommand::ConvertHold {
                hold_id: hold(1),
                booking_id: BookingId(uuid::Uuid::from_u128(9)),
            };
            let booked = after(held.clone(), decide(&held, &convert, t(10)).unwrap());
            let cancel = SeatCommand::CancelBooking {
                booking_id: BookingId(uuid::Uuid::from_u128(9)),
            };
            let cancelled = after(booked.clone(), decide(&booked, &cancel, t(20)).unwrap());
            assert_eq!(cancelled.state, SeatState::Returned);
            let channel = ChannelId::parse("partner-x").unwrap();
            let allocated = given(&[SeatEvent::SeatAllocated {
                channel: channel.clone(),
            }]);
            let back = SeatCommand::Deallocate {
                channel,
                returns_to_waitlist: true,
            };
            let given_back = after(allocated.clone(), decide(&allocated, &back, t(0)).unwrap());
            assert_eq!(
                (given_back.state, given_back.channel),
                (SeatState::Returned, None)
            );
        }
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
                role: WaitlistRole::None,
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
                returns_to_waitlist: false,
            };
            let seat = given(&[allocated("partner-x")]);
            assert_eq!(
                decide(&seat, &back, t(0)),
                Ok(vec![SeatEvent::SeatDeallocated {
                    channel: channel("partner-x"),
                    returns_to_waitlist: false,
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
                returns_to_waitlist: false,
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
    fn it_should_never_extend_the_waiting_lists_offer() {
        // An offer lasting 900 s, longer than the show's TTL of 100 s.
        let offered = SeatEvent::HoldPlaced {
            hold_id: hold(1),
            buyer: buyer("alice"),
            expires_at: t(900),
            price: None,
            returns_to_waitlist: true,
            offer: true,
        };
        let seat = given(&[offered]);
        assert_eq!(
            decide(&seat, &extend(1), t(850)),
            Err(SeatError::ExtensionLimit)
        );
        let placed = decide(
            &Seat::default(),
            &place_as(2, "bob", 900, WaitlistRole::Offer),
            t(0),
        );
        assert!(matches!(
            placed.as_deref(),
            Ok([SeatEvent::HoldPlaced {
                offer: true,
                returns_to_waitlist: true,
                ..
            }])
        ));
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
