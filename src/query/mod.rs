//! The query wing: answers computed from the read models and the log,
//! never changing them. Availability applies the expiry rule at the instant
//! of the query; audit and advice read the log.

pub mod advice;
pub mod audit;
pub mod availability;
pub mod rendered;
