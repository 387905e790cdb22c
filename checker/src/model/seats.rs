//! The checker's own fold of a seat's stream, event by event, and what it
//! refuses: a seat converted for a hold that does not hold it (while
//! another sale is live, or after the hold was lost), a hold placed over a
//! live hold or a booking, and a public hold taking a seat owed to the
//! show's waiting list.
//!
//! Time: an event's `recorded_at_us` is never earlier than the decision
//! that made it (the service decides, then appends), so a hold whose
//! `expires_at` is after the event's record was live when it was decided.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::Violation;
use crate::rows::LogEvent;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeatState {
    Free,
    Held {
        hold: String,
        expires_us: i64,
        returns_to_waitlist: bool,
    },
    Booked {
        booking: String,
        hold: String,
        returns_to_waitlist: bool,
    },
    /// Freed from a returning hold or a returning booking: owed to the waiting list
    /// until offered or passed.
    Returned,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatFold {
    pub stream: String,
    pub state: SeatState,
    pub channel: Option<String>,
}

impl SeatFold {
    /// The seat's status as availability should read it at `now_us`.
    pub fn status_at(&self, now_us: i64) -> &'static str {
        match &self.state {
            SeatState::Booked { .. } => "booked",
            SeatState::Held { expires_us, .. } if *expires_us > now_us => "held",
            SeatState::Held {
                returns_to_waitlist: true,
                ..
            }
            | SeatState::Returned => "held",
            _ if self.channel.is_some() => "not_for_sale",
            _ => "available",
        }
    }

    /// Owed to the waiting list at `now_us` (held by no live hold).
    pub fn owed_at(&self, now_us: i64) -> bool {
        match &self.state {
            SeatState::Returned => true,
            SeatState::Held {
                returns_to_waitlist: true,
                expires_us,
                ..
            } => *expires_us <= now_us,
            _ => false,
        }
    }
}

/// Folds every seat stream; `offers` are the hold ids the waiting lists
/// offered (the only holds that may take an owed seat).
pub fn fold(
    log: &[LogEvent],
    offers: &BTreeSet<String>,
    out: &mut Vec<Violation>,
) -> BTreeMap<String, SeatFold> {
    let mut seats: BTreeMap<String, SeatFold> = BTreeMap::new();
    for event in log.iter().filter(|e| e.aggregate_type == "Seat") {
        let seat = seats
            .entry(event.aggregate_id.clone())
            .or_insert_with(|| SeatFold {
                stream: event.aggregate_id.clone(),
                state: SeatState::Free,
                channel: None,
            });
        apply(seat, event, offers, out);
    }
    seats
}

fn apply(seat: &mut SeatFold, e: &LogEvent, offers: &BTreeSet<String>, out: &mut Vec<Violation>) {
    let hold = e.str("hold_id").unwrap_or_default().to_owned();
    match e.event_type.as_str() {
        "HoldPlaced" => place(seat, e, hold, offers, out),
        "HoldReleased" | "HoldExpired" => {
            if let SeatState::Held {
                hold: h,
                returns_to_waitlist,
                ..
            } = &seat.state
            {
                if *h == hold {
                    seat.state = freed(*returns_to_waitlist);
                }
            }
        }
        "HoldExtended" => {
            if let SeatState::Held {
                hold: h,
                expires_us,
                ..
            } = &mut seat.state
            {
                if *h == hold {
                    *expires_us = e.time_us("expires_at").unwrap_or(*expires_us);
                }
            }
        }
        "HoldConverted" => convert(seat, e, hold, out),
        "BookingCancelled" => {
            let booking = e.str("booking_id").unwrap_or_default();
            if let SeatState::Booked {
                booking: b,
                returns_to_waitlist,
                ..
            } = &seat.state
            {
                if b == booking {
                    seat.state = freed(*returns_to_waitlist);
                }
            }
        }
        "SeatAllocated" => allocate(seat, e, out),
        "SeatDeallocated" => {
            seat.channel = None;
            if e.flag("line") && seat.state == SeatState::Free {
                seat.state = SeatState::Returned;
            }
        }
        "SeatPassed" if seat.owed_at(e.recorded_at_us) => seat.state = SeatState::Free,
        _ => {}
    }
}

fn freed(returns_to_waitlist: bool) -> SeatState {
    if returns_to_waitlist {
        SeatState::Returned
    } else {
        SeatState::Free
    }
}

fn place(
    seat: &mut SeatFold,
    e: &LogEvent,
    hold: String,
    offers: &BTreeSet<String>,
    out: &mut Vec<Violation>,
) {
    let at = e.recorded_at_us;
    let ids = vec![hold.clone(), seat.stream.clone()];
    match &seat.state {
        SeatState::Booked { booking, .. } => out.push(Violation::new(
            "no_double_sale",
            format!(
                "{}: hold {hold} placed on a seat booked by {booking}",
                seat.stream
            ),
            [ids.clone(), vec![booking.clone()]].concat(),
        )),
        SeatState::Held {
            hold: other,
            expires_us,
            ..
        } if *other != hold && *expires_us > at => out.push(Violation::new(
            "one_live_hold_per_seat",
            format!(
                "{}: hold {hold} placed while hold {other} was live",
                seat.stream
            ),
            [ids.clone(), vec![other.clone()]].concat(),
        )),
        _ if seat.owed_at(at) && !offers.contains(&hold) => out.push(Violation::new(
            "waitlist_first",
            format!(
                "{}: hold {hold}, not the waiting list's offer, took a seat owed to the waiting list",
                seat.stream
            ),
            ids,
        )),
        _ => {}
    }
    seat.state = SeatState::Held {
        hold,
        expires_us: e.time_us("expires_at").unwrap_or(at),
        returns_to_waitlist: e.flag("line"),
    };
}

fn convert(seat: &mut SeatFold, e: &LogEvent, hold: String, out: &mut Vec<Violation>) {
    let booking = e.str("booking_id").unwrap_or_default().to_owned();
    let mut ids = vec![hold.clone(), booking.clone(), seat.stream.clone()];
    let returns_to_waitlist = match &seat.state {
        SeatState::Held {
            hold: h,
            returns_to_waitlist,
            ..
        } if *h == hold => *returns_to_waitlist,
        SeatState::Booked {
            booking: b,
            hold: h,
            returns_to_waitlist,
        } if *b == booking && *h == hold => *returns_to_waitlist,
        other => {
            if let SeatState::Booked { booking: b, .. } = other {
                ids.push(b.clone());
            }
            out.push(Violation::new(
                "no_double_sale",
                format!(
                    "{}: hold {hold} converted into {booking} while the seat was {other:?}",
                    seat.stream
                ),
                ids,
            ));
            false
        }
    };
    seat.state = SeatState::Booked {
        booking,
        hold,
        returns_to_waitlist,
    };
}

fn allocate(seat: &mut SeatFold, e: &LogEvent, out: &mut Vec<Violation>) {
    let live = match &seat.state {
        SeatState::Booked { .. } | SeatState::Returned => true,
        SeatState::Held {
            expires_us,
            returns_to_waitlist,
            ..
        } => *returns_to_waitlist || *expires_us > e.recorded_at_us,
        SeatState::Free => false,
    };
    if live {
        out.push(Violation::new(
            "allocation_only_when_free",
            format!(
                "{}: allocated to a channel while {:?}",
                seat.stream, seat.state
            ),
            vec![seat.stream.clone()],
        ));
    }
    seat.channel = e.str("channel").map(str::to_owned);
}
