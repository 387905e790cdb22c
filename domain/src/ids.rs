//! Identifiers, parsed once where they enter the system.
//!
//! Each newtype can only hold a value that satisfies its rule, so code past
//! the edge never re-checks them.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::limits::{
    MAX_BUYER_ID_CHARS, MAX_IDEMPOTENCY_KEY_BYTES, MAX_SCAN_NONCE_CHARS, MAX_SEAT_ID_CHARS,
    MAX_SHOW_ID_CHARS, MIN_IDEMPOTENCY_RETENTION_HOURS,
};

/// Why an identifier was refused; the message names the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} must be 1..={max} characters of {alphabet}")]
    Malformed {
        what: &'static str,
        max: usize,
        alphabet: &'static str,
    },
}

fn check(
    value: &str,
    what: &'static str,
    max: usize,
    alphabet: &'static str,
    allowed: impl Fn(char) -> bool,
) -> Result<(), IdError> {
    let chars = value.chars().count();
    if chars == 0 || chars > max || !value.chars().all(allowed) {
        return Err(IdError::Malformed {
            what,
            max,
            alphabet,
        });
    }
    Ok(())
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $what:literal, $max:expr, $alphabet:literal, $allowed:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: &str) -> Result<Self, IdError> {
                check(value, $what, $max, $alphabet, $allowed)?;
                Ok(Self(value.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                Self::parse(&raw).map_err(serde::de::Error::custom)
            }
        }
    };
}

fn is_show_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn is_seat_char(c: char) -> bool {
    is_show_char(c) || c == '.' || c == ':'
}

string_id!(
    /// `[A-Za-z0-9_-]{1,64}`. It never contains `/`, which is what makes
    /// `show/seat` stream ids unambiguous.
    ShowId,
    "show_id",
    MAX_SHOW_ID_CHARS,
    "[A-Za-z0-9_-]",
    is_show_char
);

string_id!(
    /// `[A-Za-z0-9_.:-]{1,32}`, unique within a show.
    SeatId,
    "seat_id",
    MAX_SEAT_ID_CHARS,
    "[A-Za-z0-9_.:-]",
    is_seat_char
);

string_id!(
    /// Same alphabet and length as a seat id, unique within a show.
    PoolId,
    "pool_id",
    MAX_SEAT_ID_CHARS,
    "[A-Za-z0-9_.:-]",
    is_seat_char
);

string_id!(
    /// A venue's seating chart: the same alphabet and length as a show id.
    VenueId,
    "venue_id",
    MAX_SHOW_ID_CHARS,
    "[A-Za-z0-9_-]",
    is_show_char
);

string_id!(
    /// A sales channel of a show (`boxoffice`, `partner-x`): the show id
    /// alphabet.
    ChannelId,
    "channel_id",
    MAX_SHOW_ID_CHARS,
    "[A-Za-z0-9_-]",
    is_show_char
);

string_id!(
    /// A price category of a venue (`premium`): the seat id alphabet.
    CategoryId,
    "category",
    MAX_SEAT_ID_CHARS,
    "[A-Za-z0-9_.:-]",
    is_seat_char
);

string_id!(
    /// A ticket type of a show (`adult`, `child`): the seat id alphabet.
    TicketType,
    "ticket_type",
    MAX_SEAT_ID_CHARS,
    "[A-Za-z0-9_.:-]",
    is_seat_char
);

impl GateId {
    /// `main`: the one gate of a show that names none.
    pub fn main() -> Self {
        Self("main".to_owned())
    }
}

impl TicketType {
    /// `standard`: the one ticket type of a show that lists none.
    pub fn standard() -> Self {
        Self("standard".to_owned())
    }
}

string_id!(
    /// A gate of a show's door (`north`, `main`): the show id alphabet.
    GateId,
    "gate_id",
    MAX_SHOW_ID_CHARS,
    "[A-Za-z0-9_-]",
    is_show_char
);

string_id!(
    /// A scanner's id for one scan (the same scan sent again is the same
    /// answer): 1..=64 printable ASCII characters.
    ScanNonce,
    "nonce",
    MAX_SCAN_NONCE_CHARS,
    "printable ASCII",
    |c: char| c.is_ascii_graphic()
);

string_id!(
    /// The buyer: the `sub` claim of a bearer token, 1..=64 characters.
    BuyerId,
    "sub",
    MAX_BUYER_ID_CHARS,
    "any non-control character",
    |c: char| !c.is_control()
);

string_id!(
    /// `Idempotency-Key`: 1..=255 printable ASCII characters.
    IdempotencyKey,
    "Idempotency-Key",
    MAX_IDEMPOTENCY_KEY_BYTES,
    "printable ASCII",
    |c: char| c.is_ascii_graphic() || c == ' '
);

/// A hold: one buyer's claim on some seats (or pool places) until it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HoldId(pub Uuid);

/// Namespace of hold ids derived from idempotency keys (UUIDv5). Fixed forever.
const HOLD_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a4e_0b5d_4c1e_9a77_3f0e_8d21_b6c4);

/// The periods, counted from the Unix epoch, whose number goes into the
/// hold id of a new idempotency key: one day, the minimum retention of a
/// key. A key is pruned only once older than the retention, so the same key
/// sent again after that falls into a later period and gets a new hold id;
/// never the id of the old hold, whose seat, shard and checkout streams
/// already carry it (a placement with that id would be taken for a retry
/// of the old hold, and a purchase of it answered with the old checkout).
pub const HOLD_ID_PERIOD_SECONDS: i64 = 3_600 * MIN_IDEMPOTENCY_RETENTION_HOURS as i64;

impl HoldId {
    /// A new hold id: a UUIDv7, time-ordered (48 bits of milliseconds, then
    /// 74 random bits). Every table keyed by hold id (holds, hold_seats,
    /// checkouts, pool_holds) then inserts at the right end of its index,
    /// instead of splitting pages all over it as random v4 ids did: fewer
    /// WAL bytes per hold and a hot set of index pages that stays in memory
    /// (BENCHMARKS.md, issue #15). The id still cannot be guessed, and it
    /// tells nothing the buyer does not know (when the hold was placed).
    pub fn random() -> Self {
        // uuid's own `now_v7` would need its `v7` feature; the layout is
        // the same: milliseconds since the epoch, then random bits.
        let millis = Utc::now().timestamp_millis().max(0) as u64;
        let random = *Uuid::new_v4().as_bytes();
        let mut tail = [0u8; 10];
        tail.copy_from_slice(&random[..10]);
        Self(uuid::Builder::from_unix_timestamp_millis(millis, &tail).into_uuid())
    }

    /// The hold id a buyer's new idempotency key stands for, first used at
    /// `at`. Concurrent first requests with the same buyer and key decide
    /// with the same hold id, so the later one finds the seats already held
    /// by "its" hold and succeeds without a new event. (Two that straddle a
    /// period boundary get two ids; the idempotency row, unique per buyer and
    /// key, still lets only one of them append, and the other answers the
    /// winner's hold.) A retry of a stored key never comes here: it is
    /// answered with the hold id its row records, so keys stored before
    /// the period was part of the id keep their holds.
    pub fn for_idempotency_key(buyer: &BuyerId, key: &IdempotencyKey, at: DateTime<Utc>) -> Self {
        let period = at.timestamp().div_euclid(HOLD_ID_PERIOD_SECONDS);
        // The separator cannot occur in a buyer id or a key (no control characters).
        let name = format!("{}\u{0}{}\u{0}{period}", buyer.as_str(), key.as_str());
        Self(Uuid::new_v5(&HOLD_ID_NAMESPACE, name.as_bytes()))
    }
}

impl fmt::Display for HoldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A confirmed purchase of the seats of one hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BookingId(pub Uuid);

impl fmt::Display for BookingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An order: several holds of one buyer and show, paid once. Its purchase
/// is a Checkout stream of its own (the stream id is the order id), and its
/// units are booked under the booking id of the same UUID
/// ([`OrderId::booking_id`]), never under a hold's own: a purchase of one of
/// its holds alone cannot take its conversion for a retry of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderId(pub Uuid);

/// Namespace of order ids (UUIDv5 of the holds). Fixed forever.
const ORDER_ID_NAMESPACE: Uuid = Uuid::from_u128(0x9d3e_5b71_2c48_4a0f_b6e2_71c5_0f3a_d894);

impl OrderId {
    /// The order of a set of holds, whatever their order: a retry with the
    /// same holds, serial or concurrent, on any instance, is the same order
    /// (one stream, one payment).
    pub fn for_holds(holds: &[HoldId]) -> Self {
        let mut sorted = holds.to_vec();
        sorted.sort();
        sorted.dedup();
        let name: Vec<u8> = sorted.iter().flat_map(|h| *h.0.as_bytes()).collect();
        Self(Uuid::new_v5(&ORDER_ID_NAMESPACE, &name))
    }

    /// The booking id the order's units are booked under.
    pub fn booking_id(self) -> BookingId {
        BookingId(self.0)
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One seat or pool place of a confirmed sale, as admitted at the door.
/// Derived from the checkout that sold it and its line, so every process
/// that issues the sale's tickets names the same streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TicketId(pub Uuid);

/// Namespace of ticket ids (UUIDv5 of a checkout and a line). Fixed forever.
const TICKET_ID_NAMESPACE: Uuid = Uuid::from_u128(0x5a2f_c813_77e0_4b6d_a1f9_0c3e_62d4_8b17);

impl TicketId {
    /// The ticket of line `line` (from 1) of the sale whose checkout stream
    /// is `checkout` (a hold's id, or an order's).
    pub fn for_line(checkout: HoldId, line: u32) -> Self {
        let mut name = checkout.0.as_bytes().to_vec();
        name.extend(line.to_be_bytes());
        Self(Uuid::new_v5(&TICKET_ID_NAMESPACE, &name))
    }
}

impl fmt::Display for TicketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The id of a ticket's event stream: `show_id/ticket_id` (the show's
/// first, as every stream of a show).
pub fn ticket_stream_id(show: &ShowId, ticket: &TicketId) -> String {
    format!("{}/{}", show.as_str(), ticket)
}

/// Splits a ticket stream id back into its show and ticket.
pub fn parse_ticket_stream_id(stream: &str) -> Option<(ShowId, TicketId)> {
    let (show, ticket) = stream.split_once('/')?;
    Some((
        ShowId::parse(show).ok()?,
        TicketId(Uuid::parse_str(ticket).ok()?),
    ))
}

/// The id of a seat's event stream: `show_id/seat_id`.
pub fn seat_stream_id(show: &ShowId, seat: &SeatId) -> String {
    format!("{}/{}", show.as_str(), seat.as_str())
}

/// Splits a seat stream id back into its show and seat.
pub fn parse_seat_stream_id(stream: &str) -> Option<(ShowId, SeatId)> {
    let (show, seat) = stream.split_once('/')?;
    Some((ShowId::parse(show).ok()?, SeatId::parse(seat).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_hold_id_is_a_time_ordered_v7_uuid() {
        let before = Utc::now().timestamp_millis() as u64;
        let (a, b) = (HoldId::random(), HoldId::random());
        let after = Utc::now().timestamp_millis() as u64;
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(id.0.get_version_num(), 7);
            let (seconds, nanos) = id.0.get_timestamp().expect("v7 has a timestamp").to_unix();
            let millis = seconds * 1000 + u64::from(nanos) / 1_000_000;
            assert!(
                (before..=after).contains(&millis),
                "{before} {millis} {after}"
            );
        }
    }

    #[test]
    fn a_show_id_allows_letters_digits_dash_and_underscore() {
        assert!(ShowId::parse("New_Year-2026").is_ok());
    }

    #[test]
    fn a_show_id_refuses_a_slash_and_a_dot() {
        assert!(ShowId::parse("a/b").is_err());
        assert!(ShowId::parse("a.b").is_err());
    }

    #[test]
    fn a_show_id_refuses_empty_and_65_characters() {
        assert!(ShowId::parse("").is_err());
        assert!(ShowId::parse(&"a".repeat(64)).is_ok());
        assert!(ShowId::parse(&"a".repeat(65)).is_err());
    }

    #[test]
    fn a_seat_id_allows_dot_and_colon_up_to_32_characters() {
        assert!(SeatId::parse("A.1:b-2_c").is_ok());
        assert!(SeatId::parse(&"s".repeat(32)).is_ok());
        assert!(SeatId::parse(&"s".repeat(33)).is_err());
        assert!(SeatId::parse("A 1").is_err());
    }

    #[test]
    fn an_idempotency_key_is_printable_ascii_up_to_255() {
        assert!(IdempotencyKey::parse("retry-1 of order #7").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("caf\u{e9}").is_err());
        assert!(IdempotencyKey::parse("tab\there").is_err());
    }

    #[test]
    fn a_buyer_id_is_one_to_64_characters_without_controls() {
        assert!(BuyerId::parse("alice@example.com").is_ok());
        assert!(BuyerId::parse(&"b".repeat(65)).is_err());
        assert!(BuyerId::parse("a\u{0}b").is_err());
    }

    #[test]
    fn the_same_buyer_and_key_give_the_same_hold_id_and_others_differ() {
        let alice = BuyerId::parse("alice").unwrap();
        let bob = BuyerId::parse("bob").unwrap();
        let key = IdempotencyKey::parse("k1").unwrap();
        let other = IdempotencyKey::parse("k2").unwrap();
        let at = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let id = |buyer, key, at| HoldId::for_idempotency_key(buyer, key, at);
        let later_that_period = at + chrono::Duration::seconds(60);
        assert_eq!(id(&alice, &key, at), id(&alice, &key, later_that_period));
        assert_ne!(id(&alice, &key, at), id(&bob, &key, at));
        assert_ne!(id(&alice, &key, at), id(&alice, &other, at));
    }

    #[test]
    fn a_key_used_again_after_the_minimum_retention_gets_another_hold_id() {
        let alice = BuyerId::parse("alice").unwrap();
        let key = IdempotencyKey::parse("k1").unwrap();
        let retention = chrono::Duration::hours(MIN_IDEMPOTENCY_RETENTION_HOURS as i64);
        for first in [0, 1, 43_199, 86_399] {
            let at = DateTime::from_timestamp(1_800_057_600 + first, 0).unwrap();
            assert_ne!(
                HoldId::for_idempotency_key(&alice, &key, at),
                HoldId::for_idempotency_key(&alice, &key, at + retention),
                "first used {first} s into a period"
            );
        }
    }

    #[test]
    fn a_seat_stream_id_round_trips() {
        let show = ShowId::parse("rock").unwrap();
        let seat = SeatId::parse("A:1/").err();
        assert!(seat.is_some(), "a slash is not a seat character");
        let seat = SeatId::parse("A:1").unwrap();
        let stream = seat_stream_id(&show, &seat);
        assert_eq!(stream, "rock/A:1");
        assert_eq!(parse_seat_stream_id(&stream), Some((show, seat)));
    }
}

/// A buyer's entry in a show's waiting list. Its UUID is also the id of
/// the hold the list offers it ([`EntryId::offer_hold`]): an entry is
/// offered once, so the offer's hold id is fixed by the entry, on every
/// instance that might make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EntryId(pub Uuid);

impl EntryId {
    /// A new entry id (time-ordered, like a hold's: [`HoldId::random`]).
    pub fn random() -> Self {
        Self(HoldId::random().0)
    }

    /// The hold this entry is offered as.
    pub fn offer_hold(&self) -> HoldId {
        HoldId(self.0)
    }
}

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
