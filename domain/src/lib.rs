//! The pure heart of the booking service.
//!
//! # Layout
//!
//! - [`aggregate`]: what every stream has in common: the [`aggregate::Decider`]
//!   trait (a pure `decide` and `evolve`) and the cqrs-es glue derived from it.
//! - [`ids`]: identifiers parsed once at the edge ("parse, don't validate").
//! - [`limits`]: every limit of the product, each beside the rule it protects.
//! - [`money`]: currencies (ISO 4217) and amounts in their minor unit.
//! - [`show`]: a show definition (seats and pools) and its validation.
//! - [`venue`]: a seating chart used by many shows: stage, sections,
//!   categories, seats at their positions, pools.
//! - [`pricing`]: prices by category and ticket type, changing over time.
//! - [`allowance`]: the Allowance stream: one per show and buyer, the
//!   per-buyer limit (`max_seats_per_buyer`) as a stream version.
//! - [`best_available`]: the service's choice of a block of seats side by side.
//! - [`checkout`]: the Checkout stream: the purchase process of one hold.
//! - [`pool`]: general-admission pool shards and their conditional decrement.
//! - [`waiting_room`]: the waiting room of an onsale: queue numbers, the
//!   admission schedule, the room's stream and a buyer's queue entry.
//! - [`waitlist`]: the Waitlist stream: a show's waiting list for freed
//!   inventory, its offers and what it passes on to sale.
//! - [`seat`]: the Seat stream: one stream per show and seat; its commands,
//!   events, errors and the pure `decide` function.
//! - [`ticket`]: the Ticket stream: one per sold seat or place, issued,
//!   named, transferred, revoked and scanned at the door.
//!
//! Nothing here performs IO, reads a clock or touches a database: time is
//! passed in as `now`, so every decision is a plain function of its inputs
//! and is tested with given/when/then.

pub mod aggregate;
pub mod allowance;
pub mod best_available;
pub mod checkout;
pub mod definition;
pub mod ids;
pub mod limits;
pub mod money;
pub mod order;
pub mod places;
pub mod pool;
pub mod pricing;
pub mod seat;
pub mod show;
pub mod ticket;
pub mod venue;
pub mod waiting_room;
pub mod waitlist;

/// The version written beside every event we emit. Events are forever: a
/// change of an event's shape gets a new version and an upcaster, never an
/// edit of the old one.
pub const EVENT_VERSION: &str = "1.0";
