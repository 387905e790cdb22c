//! The Allowance stream: one event stream per show and buyer, counting the
//! seats and pool places the buyer has on that show (`max_seats_per_buyer`).
//!
//! The limit is an invariant across many seat and shard streams, so no read
//! may decide it: two requests of one buyer on two instances would both read
//! "3 of 4 used" and both take one more. Instead every hold appends to the
//! buyer's allowance stream in the same all-or-nothing batch as the seats or
//! places it counts. The stream version is then the uniqueness guarantee for
//! the buyer's allowance exactly as a seat stream's version is for a seat:
//! of two concurrent holds, the second append conflicts, is decided again on
//! the new state, and is refused if it no longer fits.
//!
//! The allowance follows the unit streams; it decides only one thing, whether
//! a new hold fits under the limit. Like availability, its count honours
//! `expires_at` at read time: a hold whose expiry has passed gives its units
//! back without any event ([`crate::seat::has_expired`], the one expiry
//! rule). `AllowanceReturned` is recorded when the hold is released, its
//! expiry is recorded, or its booking is cancelled.
//!
//! The count of the allowance is never smaller than what the unit streams
//! hold for the buyer, because
//! - a hold's units are counted until the same instant its seats expire
//!   (the same `expires_at`, the same rule), and an extension never moves
//!   the allowance's expiry earlier, only later;
//! - booked units count until the booking is cancelled, whatever the time;
//! - units are given back only when the unit streams give them back
//!   (`Return` is appended with the release, expiry or cancellation).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::Timed;
use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{BuyerId, HoldId, ShowId};
use crate::seat::has_expired;

/// The id of a buyer's allowance stream on a show: `show_id@buyer`.
///
/// It cannot collide with another stream id, nor two buyers' ids with each
/// other:
/// - a show id is `[A-Za-z0-9_-]`, so the first character of any stream id
///   that is not in that alphabet ends the show id. It is `/` in seat
///   (`show/seat`) and shard (`show/pool#n`) streams and `@` here, so an
///   allowance id is never a seat or shard id, whatever the buyer id holds;
/// - the show is everything before the first `@` and the buyer everything
///   after it, so a buyer id containing `@`, `/` or `#` (any non-control
///   character is allowed) is still read back whole: distinct (show, buyer)
///   pairs give distinct ids ([`parse_allowance_stream_id`] inverts it).
pub fn allowance_stream_id(show: &ShowId, buyer: &BuyerId) -> String {
    format!("{}@{}", show.as_str(), buyer.as_str())
}

/// Splits an allowance stream id back into its show and buyer.
pub fn parse_allowance_stream_id(stream: &str) -> Option<(ShowId, BuyerId)> {
    let (show, buyer) = stream.split_once('@')?;
    Some((ShowId::parse(show).ok()?, BuyerId::parse(buyer).ok()?))
}

/// What the allowance knows of one hold of the buyer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceHold {
    /// Seats plus pool places of the hold on this show.
    pub units: u32,
    /// When the hold stops counting, unless it is booked.
    pub expires_at: DateTime<Utc>,
    /// Converted into a booking: counts until cancelled, never expires.
    pub booked: bool,
}

impl AllowanceHold {
    /// Whether the hold's units count at `now`.
    pub fn counts_at(&self, now: DateTime<Utc>) -> bool {
        self.booked || !has_expired(self.expires_at, now)
    }
}

/// The Allowance aggregate (the fold of an allowance stream). Returned holds
/// are dropped: only holds that count, or counted until they expired, stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allowance {
    pub holds: BTreeMap<HoldId, AllowanceHold>,
}

impl Allowance {
    /// Units the buyer has at `now`: holds not expired at `now` plus booked units.
    pub fn in_use_at(&self, now: DateTime<Utc>) -> u32 {
        self.holds
            .values()
            .filter(|h| h.counts_at(now))
            .fold(0u32, |sum, h| sum.saturating_add(h.units))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowanceCommand {
    /// A hold of `units` until `expires_at`, if it fits under `limit`.
    Take {
        hold_id: HoldId,
        units: u32,
        expires_at: DateTime<Utc>,
        limit: u32,
    },
    /// The hold was extended until `expires_at`.
    Extend {
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
    },
    /// The hold was booked: its units keep counting, with no expiry.
    Convert { hold_id: HoldId },
    /// The hold was released, its expiry recorded, or its booking cancelled.
    Return { hold_id: HoldId },
    /// Some of a booked hold's units were cancelled (an order's lines).
    ReturnUnits { hold_id: HoldId, units: u32 },
}

/// Events are forever: add variants, never change one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AllowanceEvent {
    AllowanceTaken {
        hold_id: HoldId,
        units: u32,
        expires_at: DateTime<Utc>,
    },
    AllowanceExtended {
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
    },
    AllowanceConverted {
        hold_id: HoldId,
    },
    AllowanceReturned {
        hold_id: HoldId,
    },
    AllowanceUnitsReturned {
        hold_id: HoldId,
        units: u32,
    },
}

event_names!(AllowanceEvent {
    AllowanceTaken => "AllowanceTaken",
    AllowanceExtended => "AllowanceExtended",
    AllowanceConverted => "AllowanceConverted",
    AllowanceReturned => "AllowanceReturned",
    AllowanceUnitsReturned => "AllowanceUnitsReturned",
});

/// Why the allowance refuses a command. `LimitReached` is the 409
/// `buyer_limit_reached` answer, with `current` = what the buyer has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AllowanceError {
    #[error("the buyer has {current} of at most {limit} seats on this show")]
    LimitReached { limit: u32, current: u32 },
    #[error("a hold must take at least one unit")]
    ZeroUnits,
    #[error("a hold must expire after the moment it is placed or extended")]
    ExpiryNotInFuture,
    #[error("the hold has expired: extending it would count it again without the limit")]
    HoldExpired,
}

/// The one decision function of the Allowance stream: each command to its
/// own decision below.
pub fn decide(
    allowance: &Allowance,
    command: &AllowanceCommand,
    now: DateTime<Utc>,
) -> Result<Vec<AllowanceEvent>, AllowanceError> {
    match command {
        AllowanceCommand::Take {
            hold_id,
            units,
            expires_at,
            limit,
        } => take(allowance, *hold_id, *units, *expires_at, *limit, now),
        AllowanceCommand::Extend {
            hold_id,
            expires_at,
        } => extend(allowance, *hold_id, *expires_at, now),
        AllowanceCommand::Convert { hold_id } => Ok(convert(allowance, *hold_id)),
        AllowanceCommand::Return { hold_id } => Ok(give_back(allowance, *hold_id)),
        AllowanceCommand::ReturnUnits { hold_id, units } => {
            Ok(give_back_units(allowance, *hold_id, *units))
        }
    }
}

/// `Take`: refused whole if `units + in_use_at(now) > limit`. A hold the
/// allowance already counts (active or booked) is the retried request: no
/// events. A hold present but expired is placed again, as the seat and
/// shard streams place a retried hold again after its expiry: its old
/// entry is returned and the new one taken, within the limit.
fn take(
    allowance: &Allowance,
    hold_id: HoldId,
    units: u32,
    expires_at: DateTime<Utc>,
    limit: u32,
    now: DateTime<Utc>,
) -> Result<Vec<AllowanceEvent>, AllowanceError> {
    if units == 0 {
        return Err(AllowanceError::ZeroUnits);
    }
    if has_expired(expires_at, now) {
        return Err(AllowanceError::ExpiryNotInFuture);
    }
    let mut events = Vec::with_capacity(2);
    match allowance.holds.get(&hold_id) {
        Some(hold) if hold.counts_at(now) => return Ok(vec![]),
        Some(_) => events.push(AllowanceEvent::AllowanceReturned { hold_id }),
        None => {}
    }
    let current = allowance.in_use_at(now);
    if current.saturating_add(units) > limit {
        return Err(AllowanceError::LimitReached { limit, current });
    }
    events.push(AllowanceEvent::AllowanceTaken {
        hold_id,
        units,
        expires_at,
    });
    Ok(events)
}

/// `Extend`: moves `expires_at` later. Unknown, returned or booked holds,
/// and an extension that is not later than the current expiry (a retry,
/// or one arriving out of order), give no events: the allowance never
/// counts a hold for less time than before. An expired hold is refused:
/// it no longer counts, and counting it again would bypass the limit.
fn extend(
    allowance: &Allowance,
    hold_id: HoldId,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<Vec<AllowanceEvent>, AllowanceError> {
    match allowance.holds.get(&hold_id) {
        None => Ok(vec![]),
        Some(hold) if hold.booked || expires_at <= hold.expires_at => Ok(vec![]),
        // Past here the new expiry is later than an unexpired one, so in the future.
        Some(hold) if has_expired(hold.expires_at, now) => Err(AllowanceError::HoldExpired),
        Some(_) => Ok(vec![AllowanceEvent::AllowanceExtended {
            hold_id,
            expires_at,
        }]),
    }
}

/// `Convert`: the units stop expiring. Unknown, returned or already booked
/// holds give no events. An expired hold still converts: the seat and
/// shard streams decided the conversion (they own the units), and the
/// allowance follows the units; refusing would fail the batch and leave a
/// paid booking unrecorded, while counting it is what keeps the count
/// equal to what the buyer really has.
fn convert(allowance: &Allowance, hold_id: HoldId) -> Vec<AllowanceEvent> {
    match allowance.holds.get(&hold_id) {
        Some(hold) if !hold.booked => vec![AllowanceEvent::AllowanceConverted { hold_id }],
        _ => vec![],
    }
}

/// `Return`: gives the units back. Unknown or returned holds: no events.
fn give_back(allowance: &Allowance, hold_id: HoldId) -> Vec<AllowanceEvent> {
    if allowance.holds.contains_key(&hold_id) {
        vec![AllowanceEvent::AllowanceReturned { hold_id }]
    } else {
        vec![]
    }
}

/// `ReturnUnits`: gives back some of a hold's units (at most what it has;
/// all of them returns the hold). Unknown holds: no events.
fn give_back_units(allowance: &Allowance, hold_id: HoldId, units: u32) -> Vec<AllowanceEvent> {
    match allowance.holds.get(&hold_id) {
        Some(hold) if units >= hold.units => vec![AllowanceEvent::AllowanceReturned { hold_id }],
        Some(_) if units > 0 => vec![AllowanceEvent::AllowanceUnitsReturned { hold_id, units }],
        _ => vec![],
    }
}

impl Allowance {
    /// Folds one event into the state. Never fails: events are facts.
    pub fn apply_event(&mut self, event: &AllowanceEvent) {
        match event {
            AllowanceEvent::AllowanceTaken {
                hold_id,
                units,
                expires_at,
            } => {
                self.holds.insert(
                    *hold_id,
                    AllowanceHold {
                        units: *units,
                        expires_at: *expires_at,
                        booked: false,
                    },
                );
            }
            AllowanceEvent::AllowanceExtended {
                hold_id,
                expires_at,
            } => {
                if let Some(hold) = self.holds.get_mut(hold_id) {
                    hold.expires_at = *expires_at;
                }
            }
            AllowanceEvent::AllowanceConverted { hold_id } => {
                if let Some(hold) = self.holds.get_mut(hold_id) {
                    hold.booked = true;
                }
            }
            AllowanceEvent::AllowanceReturned { hold_id } => {
                self.holds.remove(hold_id);
            }
            AllowanceEvent::AllowanceUnitsReturned { hold_id, units } => {
                if let Some(hold) = self.holds.get_mut(hold_id) {
                    hold.units = hold.units.saturating_sub(*units);
                }
            }
        }
    }
}

impl Decider for Allowance {
    type Command = Timed<AllowanceCommand>;
    type Event = AllowanceEvent;
    type Error = AllowanceError;

    fn decide(&self, command: &Self::Command) -> Result<Vec<AllowanceEvent>, AllowanceError> {
        decide(self, &command.command, command.now)
    }

    fn evolve(&mut self, event: &AllowanceEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(Allowance, "Allowance");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EVENT_VERSION;
    use chrono::Duration;
    use cqrs_es::DomainEvent;
    use proptest::prelude::*;
    use uuid::Uuid;

    const LIMIT: u32 = 4;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + Duration::seconds(1_800_000_000 + seconds)
    }
    fn hold(n: u128) -> HoldId {
        HoldId(Uuid::from_u128(n))
    }
    fn take(n: u128, units: u32, until: i64) -> AllowanceCommand {
        AllowanceCommand::Take {
            hold_id: hold(n),
            units,
            expires_at: t(until),
            limit: LIMIT,
        }
    }
    fn taken(n: u128, units: u32, until: i64) -> AllowanceEvent {
        AllowanceEvent::AllowanceTaken {
            hold_id: hold(n),
            units,
            expires_at: t(until),
        }
    }
    fn extended(n: u128, until: i64) -> AllowanceEvent {
        AllowanceEvent::AllowanceExtended {
            hold_id: hold(n),
            expires_at: t(until),
        }
    }
    fn converted(n: u128) -> AllowanceEvent {
        AllowanceEvent::AllowanceConverted { hold_id: hold(n) }
    }
    fn returned(n: u128) -> AllowanceEvent {
        AllowanceEvent::AllowanceReturned { hold_id: hold(n) }
    }

    /// given these events, when this command is decided at `now`, then ...
    fn given(events: &[AllowanceEvent]) -> Allowance {
        let mut allowance = Allowance::default();
        for e in events {
            allowance.apply_event(e);
        }
        allowance
    }

    #[test]
    fn it_should_take_a_hold_that_fits_under_the_limit() {
        let allowance = given(&[]);
        assert_eq!(
            decide(&allowance, &take(1, 2, 100), t(0)),
            Ok(vec![taken(1, 2, 100)])
        );
    }

    #[test]
    fn it_should_take_a_hold_that_reaches_the_limit_exactly() {
        let allowance = given(&[taken(1, 3, 100)]);
        assert_eq!(
            decide(&allowance, &take(2, 1, 100), t(0)),
            Ok(vec![taken(2, 1, 100)])
        );
    }

    #[test]
    fn it_should_refuse_a_hold_one_over_the_limit_whole_with_the_current_count() {
        let allowance = given(&[taken(1, 3, 100)]);
        assert_eq!(
            decide(&allowance, &take(2, 2, 100), t(0)),
            Err(AllowanceError::LimitReached {
                limit: LIMIT,
                current: 3
            })
        );
    }

    #[test]
    fn it_should_count_holds_of_seats_and_places_together() {
        let allowance = given(&[taken(1, 1, 100), taken(2, 2, 100)]);
        assert_eq!(allowance.in_use_at(t(0)), 3);
    }

    #[test]
    fn it_should_give_an_expired_holds_units_back_without_an_event() {
        let allowance = given(&[taken(1, 4, 100)]);
        assert_eq!(allowance.in_use_at(t(99)), 4);
        assert_eq!(allowance.in_use_at(t(100)), 0);
        assert_eq!(
            decide(&allowance, &take(2, 4, 200), t(99)),
            Err(AllowanceError::LimitReached {
                limit: LIMIT,
                current: 4
            })
        );
        assert_eq!(
            decide(&allowance, &take(2, 4, 200), t(100)),
            Ok(vec![taken(2, 4, 200)])
        );
    }

    #[test]
    fn it_should_treat_the_same_hold_again_as_a_no_op() {
        let allowance = given(&[taken(1, 4, 100)]);
        assert_eq!(decide(&allowance, &take(1, 4, 120), t(10)), Ok(vec![]));
        let booked = given(&[taken(1, 4, 100), converted(1)]);
        assert_eq!(decide(&booked, &take(1, 4, 220), t(200)), Ok(vec![]));
    }

    #[test]
    fn it_should_take_a_retried_hold_again_after_it_expired_as_the_seats_do() {
        let allowance = given(&[taken(1, 2, 100), taken(2, 2, 100)]);
        assert_eq!(
            decide(&allowance, &take(1, 2, 200), t(100)),
            Ok(vec![returned(1), taken(1, 2, 200)])
        );
        let full = given(&[taken(1, 2, 100), taken(2, 3, 300)]);
        assert_eq!(
            decide(&full, &take(1, 2, 200), t(100)),
            Err(AllowanceError::LimitReached {
                limit: LIMIT,
                current: 3
            })
        );
    }

    #[test]
    fn it_should_refuse_a_hold_of_no_units_or_already_expired() {
        let allowance = given(&[]);
        assert_eq!(
            decide(&allowance, &take(1, 0, 100), t(0)),
            Err(AllowanceError::ZeroUnits)
        );
        assert_eq!(
            decide(&allowance, &take(1, 1, 0), t(0)),
            Err(AllowanceError::ExpiryNotInFuture)
        );
    }

    #[test]
    fn it_should_keep_an_extended_holds_units_counted_past_the_original_expiry() {
        let allowance = given(&[taken(1, 4, 100)]);
        let extend = AllowanceCommand::Extend {
            hold_id: hold(1),
            expires_at: t(300),
        };
        assert_eq!(
            decide(&allowance, &extend, t(50)),
            Ok(vec![extended(1, 300)])
        );
        let extended = given(&[taken(1, 4, 100), extended(1, 300)]);
        assert_eq!(extended.in_use_at(t(200)), 4);
        assert_eq!(
            decide(&extended, &take(2, 1, 400), t(200)),
            Err(AllowanceError::LimitReached {
                limit: LIMIT,
                current: 4
            })
        );
        assert_eq!(extended.in_use_at(t(300)), 0);
    }

    #[test]
    fn it_should_never_move_an_expiry_earlier() {
        let allowance = given(&[taken(1, 4, 100), extended(1, 300)]);
        for until in [200, 300] {
            let extend = AllowanceCommand::Extend {
                hold_id: hold(1),
                expires_at: t(until),
            };
            assert_eq!(decide(&allowance, &extend, t(50)), Ok(vec![]));
        }
    }

    #[test]
    fn it_should_not_extend_an_expired_hold() {
        let allowance = given(&[taken(1, 4, 100)]);
        let extend = AllowanceCommand::Extend {
            hold_id: hold(1),
            expires_at: t(300),
        };
        assert_eq!(
            decide(&allowance, &extend, t(100)),
            Err(AllowanceError::HoldExpired)
        );
    }

    #[test]
    fn it_should_ignore_an_extension_of_an_unknown_returned_or_booked_hold() {
        let extend = AllowanceCommand::Extend {
            hold_id: hold(1),
            expires_at: t(300),
        };
        for events in [
            vec![],
            vec![taken(1, 2, 100), returned(1)],
            vec![taken(1, 2, 100), converted(1)],
        ] {
            assert_eq!(decide(&given(&events), &extend, t(50)), Ok(vec![]));
        }
    }

    #[test]
    fn it_should_never_expire_booked_units() {
        let allowance = given(&[taken(1, 3, 100)]);
        let convert = AllowanceCommand::Convert { hold_id: hold(1) };
        assert_eq!(decide(&allowance, &convert, t(50)), Ok(vec![converted(1)]));
        let booked = given(&[taken(1, 3, 100), converted(1)]);
        assert_eq!(booked.in_use_at(t(1_000_000)), 3);
        assert_eq!(
            decide(&booked, &take(2, 2, 1_000_100), t(1_000_000)),
            Err(AllowanceError::LimitReached {
                limit: LIMIT,
                current: 3
            })
        );
        assert_eq!(
            decide(&booked, &convert, t(60)),
            Ok(vec![]),
            "converted again"
        );
    }

    #[test]
    fn it_should_follow_the_unit_streams_when_they_convert_an_expired_hold() {
        let allowance = given(&[taken(1, 3, 100)]);
        let convert = AllowanceCommand::Convert { hold_id: hold(1) };
        assert_eq!(decide(&allowance, &convert, t(150)), Ok(vec![converted(1)]));
        let booked = given(&[taken(1, 3, 100), converted(1)]);
        assert_eq!(booked.in_use_at(t(150)), 3);
    }

    #[test]
    fn it_should_ignore_a_conversion_of_an_unknown_or_returned_hold() {
        let convert = AllowanceCommand::Convert { hold_id: hold(1) };
        assert_eq!(decide(&given(&[]), &convert, t(0)), Ok(vec![]));
        let returned = given(&[taken(1, 3, 100), returned(1)]);
        assert_eq!(decide(&returned, &convert, t(0)), Ok(vec![]));
    }

    #[test]
    fn it_should_give_units_back_on_release_expiry_or_cancellation() {
        let ret = AllowanceCommand::Return { hold_id: hold(1) };
        let held = given(&[taken(1, 3, 100)]);
        assert_eq!(decide(&held, &ret, t(10)), Ok(vec![returned(1)]), "release");
        assert_eq!(
            decide(&held, &ret, t(200)),
            Ok(vec![returned(1)]),
            "expiry recorded"
        );
        let booked = given(&[taken(1, 3, 100), converted(1)]);
        assert_eq!(
            decide(&booked, &ret, t(200)),
            Ok(vec![returned(1)]),
            "cancellation"
        );
        let cancelled = given(&[taken(1, 3, 100), converted(1), returned(1)]);
        assert_eq!(cancelled.in_use_at(t(200)), 0);
        assert!(cancelled.holds.is_empty(), "returned holds are pruned");
        assert_eq!(
            decide(&cancelled, &take(2, 4, 300), t(200)),
            Ok(vec![taken(2, 4, 300)])
        );
    }

    #[test]
    fn it_should_ignore_a_return_of_an_unknown_or_returned_hold() {
        let ret = AllowanceCommand::Return { hold_id: hold(1) };
        assert_eq!(decide(&given(&[]), &ret, t(0)), Ok(vec![]));
        let returned = given(&[taken(1, 3, 100), returned(1)]);
        assert_eq!(decide(&returned, &ret, t(0)), Ok(vec![]));
    }

    #[test]
    fn it_should_name_events_by_their_variant_with_a_version() {
        let event = taken(1, 1, 100);
        assert_eq!(event.event_type(), "AllowanceTaken");
        assert_eq!(event.event_version(), EVENT_VERSION);
        assert_eq!(returned(1).event_type(), "AllowanceReturned");
    }

    #[test]
    fn an_allowance_stream_id_round_trips_and_differs_from_seat_and_shard_ids() {
        let show = ShowId::parse("rock").unwrap();
        let buyer = BuyerId::parse("a@b/c#1").unwrap();
        let stream = allowance_stream_id(&show, &buyer);
        assert_eq!(stream, "rock@a@b/c#1");
        assert_eq!(parse_allowance_stream_id(&stream), Some((show, buyer)));
        assert_eq!(parse_allowance_stream_id("rock/A:1"), None);
        let show = ShowId::parse("rock").unwrap();
        let seat = crate::ids::SeatId::parse("A:1").unwrap();
        let pool = crate::ids::PoolId::parse("floor").unwrap();
        let show_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        let end_of_show = |s: &str| s.chars().find(|c| !show_char(*c));
        assert_eq!(end_of_show(&stream), Some('@'));
        assert_eq!(
            end_of_show(&crate::ids::seat_stream_id(&show, &seat)),
            Some('/')
        );
        assert_eq!(
            end_of_show(&crate::pool::shard_stream_id(&show, &pool, 3)),
            Some('/')
        );
    }

    /// A plain model of one buyer on one show: each hold with its units,
    /// expiry and whether it is booked or finished, with the unit streams'
    /// rules written the obvious way (only an active hold converts or is
    /// extended; only a held hold is released or expired; only a booked
    /// hold is cancelled).
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Phase {
        Held,
        Booked,
        Gone,
    }

    #[derive(Default, Debug)]
    struct Model {
        holds: Vec<(u128, u32, i64, Phase)>, // id, units, expires_at, phase
    }

    impl Model {
        fn count(&self, now: i64) -> u32 {
            self.holds
                .iter()
                .filter(|h| h.3 == Phase::Booked || (h.3 == Phase::Held && h.2 > now))
                .map(|h| h.1)
                .sum()
        }
        fn find(&mut self, id: u128) -> Option<&mut (u128, u32, i64, Phase)> {
            self.holds
                .iter_mut()
                .find(|h| h.0 == id && h.3 != Phase::Gone)
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Hold(u128, u32, i64),
        Release(u128),
        Advance(i64),
        RecordExpiry(u128),
        Buy(u128),
        Cancel(u128),
        Extend(u128, i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (1u128..10, 1u32..=4, 1i64..30).prop_map(|(id, u, ttl)| Op::Hold(id, u, ttl)),
            1 => (1u128..10).prop_map(Op::Release),
            2 => (1i64..20).prop_map(Op::Advance),
            1 => (1u128..10).prop_map(Op::RecordExpiry),
            1 => (1u128..10).prop_map(Op::Buy),
            1 => (1u128..10).prop_map(Op::Cancel),
            1 => (1u128..10, 1i64..40).prop_map(|(id, by)| Op::Extend(id, by)),
        ]
    }

    fn run(
        allowance: &mut Allowance,
        command: &AllowanceCommand,
        now: i64,
    ) -> Result<Vec<AllowanceEvent>, AllowanceError> {
        let result = decide(allowance, command, t(now));
        for e in result.clone().unwrap_or_default() {
            allowance.apply_event(&e);
        }
        result
    }

    proptest! {
        #[test]
        fn decisions_agree_with_the_model_and_never_pass_the_limit(
            limit in 1u32..10,
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut allowance = Allowance::default();
            let mut model = Model::default();
            let mut now = 0i64;
            for op in ops {
                match op {
                    Op::Advance(by) => now += by,
                    Op::Hold(id, units, ttl) => {
                        let command = AllowanceCommand::Take {
                            hold_id: hold(id), units, expires_at: t(now + ttl), limit,
                        };
                        let counted = model.find(id).is_some_and(|h| h.3 == Phase::Booked || h.2 > now);
                        let current = model.count(now);
                        let result = run(&mut allowance, &command, now);
                        if counted {
                            prop_assert_eq!(result, Ok(vec![]));
                        } else if current + units > limit {
                            prop_assert_eq!(result, Err(AllowanceError::LimitReached { limit, current }));
                        } else {
                            prop_assert!(result.is_ok(), "{:?}", result);
                            if let Some(h) = model.find(id) { h.3 = Phase::Gone; }
                            model.holds.push((id, units, now + ttl, Phase::Held));
                        }
                    }
                    Op::Release(id) | Op::RecordExpiry(id) => {
                        // A release after expiry is recorded as the expiry;
                        // the sweeper records only holds past their expiry.
                        let sweeper = matches!(op, Op::RecordExpiry(_));
                        let Some(h) = model.find(id) else { continue };
                        if h.3 != Phase::Held || (sweeper && h.2 > now) { continue; }
                        h.3 = Phase::Gone;
                        let result = run(&mut allowance, &AllowanceCommand::Return { hold_id: hold(id) }, now);
                        prop_assert_eq!(result, Ok(vec![returned(id)]));
                    }
                    Op::Buy(id) => {
                        let Some(h) = model.find(id) else { continue };
                        let expected = match h.3 {
                            Phase::Held if h.2 > now => vec![converted(id)],
                            Phase::Booked => vec![], // a retried conversion
                            _ => continue, // the seats refuse: nothing reaches the allowance
                        };
                        h.3 = Phase::Booked;
                        let result = run(&mut allowance, &AllowanceCommand::Convert { hold_id: hold(id) }, now);
                        prop_assert_eq!(result, Ok(expected));
                    }
                    Op::Cancel(id) => {
                        let Some(h) = model.find(id) else { continue };
                        if h.3 != Phase::Booked { continue; }
                        h.3 = Phase::Gone;
                        let result = run(&mut allowance, &AllowanceCommand::Return { hold_id: hold(id) }, now);
                        prop_assert_eq!(result, Ok(vec![returned(id)]));
                    }
                    Op::Extend(id, by) => {
                        let Some(h) = model.find(id) else { continue };
                        if h.3 != Phase::Held || h.2 <= now { continue; }
                        let until = now + by;
                        let expected = if until > h.2 { vec![extended(id, until)] } else { vec![] };
                        h.2 = h.2.max(until);
                        let command = AllowanceCommand::Extend { hold_id: hold(id), expires_at: t(until) };
                        prop_assert_eq!(run(&mut allowance, &command, now), Ok(expected));
                    }
                }
                prop_assert_eq!(allowance.in_use_at(t(now)), model.count(now));
                prop_assert!(allowance.in_use_at(t(now)) <= limit);
            }
        }
    }
}
