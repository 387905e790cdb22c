//! The query wing: answers computed from the read models and the log,
//! never changing them. Availability applies the expiry rule at the instant
//! of the query; audit and advice read the log; the waiting
//! room's queue is read from the log and kept in memory (`queue`).

pub mod advice;
pub mod audit;
pub mod availability;
pub mod door;
pub mod rendered;
pub mod report;
pub mod waiting_room;
pub mod waitlist;
