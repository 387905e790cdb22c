//! The rules a show's or a venue's definition is checked by, and what
//! each refuses ([`ShowError`], whose message goes back to the client as
//! `detail`): texts, prices, seats and pools. Below the show and the venue,
//! which both check their places with them.

use std::collections::{HashMap, HashSet};

use crate::ids::{GateId, PoolId, SeatId, VenueId};
use crate::limits::{
    MAX_COORDINATE, MAX_HOLD_SECONDS_CAP, MAX_HOLD_TTL_SECONDS, MAX_POOLS_PER_SHOW,
    MAX_POOL_CAPACITY, MAX_POOL_SHARDS, MAX_PRICE_CENTS, MAX_SEATS_PER_BUYER, MAX_SEATS_PER_SHOW,
    MAX_SEAT_NUMBER, MAX_SEAT_RANK, MAX_TEXT_CHARS, MIN_HOLD_TTL_SECONDS, MIN_MAX_HOLD_SECONDS,
    MIN_SEATS_PER_BUYER,
};
use crate::money::MoneyError;
use crate::places::{PoolSpec, SeatSpec};
use crate::pricing::PriceError;
use crate::waiting_room::RoomSettingsError;
use crate::waitlist::WaitlistSettingsError;

/// Everything a show definition can be refused for. The message names the
/// field and the limit, because it goes back to the client as `detail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShowError {
    #[error("{field} must be 1..={MAX_TEXT_CHARS} characters")]
    TextLength { field: String },
    #[error("{field} must not contain control characters (NUL, tab, newline, ...)")]
    ControlCharacter { field: String },
    #[error("hold_ttl_seconds must be {MIN_HOLD_TTL_SECONDS}..={MAX_HOLD_TTL_SECONDS}")]
    HoldTtl,
    #[error(
        "max_hold_seconds must be {MIN_MAX_HOLD_SECONDS}..={MAX_HOLD_SECONDS_CAP} and at least hold_ttl_seconds"
    )]
    MaxHold,
    #[error("{field} must be 0..={MAX_PRICE_CENTS} cents")]
    Price { field: String },
    #[error("{field} must be 1..{MAX_SEAT_NUMBER}")]
    SeatNumber { field: String },
    #[error("{field} must be 0..={MAX_SEAT_RANK} (MAX_SEAT_RANK)")]
    Rank { field: String },
    #[error("{field} must be 1..={MAX_POOL_CAPACITY}")]
    Capacity { field: String },
    #[error("{field} must be 1..={MAX_POOL_SHARDS} and at most the capacity")]
    Shards { field: String },
    #[error("a show has at most {MAX_SEATS_PER_SHOW} seats")]
    TooManySeats,
    #[error("a show has at most {MAX_POOLS_PER_SHOW} pools")]
    TooManyPools,
    #[error("a show needs at least one seat or one pool")]
    Empty,
    #[error("seat_id {0} appears more than once")]
    DuplicateSeat(SeatId),
    #[error("pool_id {0} appears more than once")]
    DuplicatePool(PoolId),
    #[error(
        "max_seats_per_buyer must be {MIN_SEATS_PER_BUYER}..={MAX_SEATS_PER_BUYER} (MAX_SEATS_PER_BUYER)"
    )]
    MaxSeatsPerBuyer,
    #[error("{field}: {error}")]
    Money { field: String, error: MoneyError },
    #[error(transparent)]
    WaitingRoom(#[from] RoomSettingsError),
    #[error(transparent)]
    Waitlist(#[from] WaitlistSettingsError),
    #[error("{field}: at most {max}")]
    TooMany { field: String, max: usize },
    #[error("{field} must be a colour #rrggbb")]
    Color { field: String },
    #[error("{field} is listed twice")]
    Listed { field: String },
    #[error("{field} is not listed")]
    Unlisted { field: String },
    #[error("{field} is required")]
    Missing { field: String },
    #[error("{field}: not with {other}")]
    Either { field: String, other: String },
    #[error("venue_id: there is no venue {0}")]
    UnknownVenue(VenueId),
    #[error(
        "{field} must be a finite number within {MAX_COORDINATE} of 0 (a width or height above 0)"
    )]
    Coordinate { field: String },
    #[error(transparent)]
    Pricing(#[from] PriceError),
    #[error("checkin.gates: gate {0} is listed twice")]
    DuplicateGate(GateId),
}

/// A show's text (name, section, row): 1..=MAX_TEXT_CHARS characters, all
/// printable (`check_printable`).
pub(crate) fn check_text(value: &str, field: impl Fn() -> String) -> Result<(), ShowError> {
    let chars = value.chars().count();
    if chars == 0 || chars > MAX_TEXT_CHARS {
        return Err(ShowError::TextLength { field: field() });
    }
    check_printable(value, field)
}

/// No control character (Unicode Cc: NUL, tab, newline, escape, DEL, ...):
/// they are invisible on a seat map and in logs, and PostgreSQL's text type
/// refuses NUL, so the domain refuses them for both stores alike.
fn check_printable(value: &str, field: impl Fn() -> String) -> Result<(), ShowError> {
    if value.chars().any(char::is_control) {
        return Err(ShowError::ControlCharacter { field: field() });
    }
    Ok(())
}

fn check_price(price_cents: i64, field: impl Fn() -> String) -> Result<(), ShowError> {
    if !(0..=MAX_PRICE_CENTS).contains(&price_cents) {
        return Err(ShowError::Price { field: field() });
    }
    Ok(())
}

/// A show sells something, and no more seats or pools than the limits allow.
pub(crate) fn check_counts(seats: &[SeatSpec], pools: &[PoolSpec]) -> Result<(), ShowError> {
    if seats.is_empty() && pools.is_empty() {
        return Err(ShowError::Empty);
    }
    if seats.len() > MAX_SEATS_PER_SHOW {
        return Err(ShowError::TooManySeats);
    }
    if pools.len() > MAX_POOLS_PER_SHOW {
        return Err(ShowError::TooManyPools);
    }
    Ok(())
}

/// Checks every seat and indexes it by id (its position in the show's
/// order), refusing a seat id given twice.
pub(crate) fn index_seats(seats: &[SeatSpec]) -> Result<HashMap<SeatId, usize>, ShowError> {
    let mut seat_index = HashMap::with_capacity(seats.len());
    for (i, seat) in seats.iter().enumerate() {
        check_seat(i, seat)?;
        if seat_index.insert(seat.seat_id.clone(), i).is_some() {
            return Err(ShowError::DuplicateSeat(seat.seat_id.clone()));
        }
    }
    Ok(seat_index)
}

/// The rules of one seat, `seats[i]` in the errors.
fn check_seat(i: usize, seat: &SeatSpec) -> Result<(), ShowError> {
    check_text(&seat.section, || format!("seats[{i}].section"))?;
    check_text(&seat.row, || format!("seats[{i}].row"))?;
    check_price(seat.price_cents, || format!("seats[{i}].price_cents"))?;
    if seat.number == 0 || seat.number >= MAX_SEAT_NUMBER {
        return Err(ShowError::SeatNumber {
            field: format!("seats[{i}].number"),
        });
    }
    if seat
        .rank
        .is_some_and(|rank| !(0..=MAX_SEAT_RANK).contains(&rank))
    {
        return Err(ShowError::Rank {
            field: format!("seats[{i}].rank"),
        });
    }
    Ok(())
}

/// Checks every pool, refusing a pool id given twice.
pub(crate) fn check_pools(pools: &[PoolSpec]) -> Result<(), ShowError> {
    let mut pool_ids = HashSet::with_capacity(pools.len());
    for (i, pool) in pools.iter().enumerate() {
        check_pool(i, pool)?;
        if !pool_ids.insert(pool.pool_id.clone()) {
            return Err(ShowError::DuplicatePool(pool.pool_id.clone()));
        }
    }
    Ok(())
}

/// The rules of one pool, `pools[i]` in the errors.
fn check_pool(i: usize, pool: &PoolSpec) -> Result<(), ShowError> {
    check_price(pool.price_cents, || format!("pools[{i}].price_cents"))?;
    if pool.capacity == 0 || pool.capacity > MAX_POOL_CAPACITY {
        return Err(ShowError::Capacity {
            field: format!("pools[{i}].capacity"),
        });
    }
    if pool.shards == 0 || pool.shards > MAX_POOL_SHARDS || pool.shards > pool.capacity {
        return Err(ShowError::Shards {
            field: format!("pools[{i}].shards"),
        });
    }
    Ok(())
}
