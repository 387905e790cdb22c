//! Read models: how events become the rows that availability and hold
//! queries read.
//!
//! Everything here is pure. [`rows`] is the one place where events become
//! rows, for commands and rebuilds alike; the store (in `src/`) writes what
//! it returns in the same transaction as the events they come from, and
//! guards each row by the stream sequence it last applied, so applying an
//! event twice (a replay, a retried batch) changes nothing.
//!
//! Expiry is never written here: rows keep `expires_at`, and the status a
//! reader sees is computed at query time with [`domain::seat::SeatStatus::at`].

pub mod availability;
pub mod checkouts;
pub mod holds;
pub mod json_text;
pub mod pools;
pub mod rows;
pub mod time;
