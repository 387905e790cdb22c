//! The command wing: everything that changes state.
//!
//! A command takes its request context, locks the streams it needs in
//! process ([`streams`]), decides with the pure functions of the `domain`
//! crate, builds the events and the read-model rows they produce ([`rows`],
//! [`units`]) and appends them in one transaction through the store. Nothing
//! here reads a projection to decide: the append at the decided versions is
//! what decides.

pub mod allowance;
pub mod checkout;
pub mod context;
pub mod holds;
pub mod rows;
pub mod streams;
pub mod units;
