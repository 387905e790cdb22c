//! The command wing: everything that changes state.
//!
//! A command is a decision run by [`round`]: the one loop that locks the
//! streams it needs in process (in one global order), brings them up to
//! date, decides with the pure functions of the `domain` crate at one `now`,
//! and appends the events with the rows they produce
//! (`projections::rows`) in one transaction at the versions decided on.
//! Nothing here reads a projection to decide: the append decides.
//!
//! By part: `context` (who asked), `streams` (loaded streams kept in
//! memory, and the freshness rule), `units` (seats and pool shards behind
//! one trait), `round`, `holds`, `checkout` and `queue` (the commands).

pub mod allocations;
pub mod checkout;
pub mod context;
pub mod holds;
pub mod prices;
pub mod round;
pub mod streams;
pub mod tickets;
pub mod units;
pub mod waiting_room;
pub mod waitlist;
