//! # booking
//!
//! An event-sourced seat reservation service. A seat is sold at most once,
//! however many buyers press "select" in the same second.
//!
//! ## Layout
//!
//! - [`app`]: builds the service from [`app::Settings`] and runs it; tests
//!   bind port 0 and pass their own clock and shutdown signal.
//! - [`http`]: routes, extractors and the problem+json error contract.
//! - [`holds`], [`shows`]: the application services a handler calls. A
//!   command locks its streams in-process ([`streams`]), decides with the
//!   pure functions of the `domain` crate, and appends through [`store`].
//! - [`store`]: PostgreSQL or SQLite; the event log (read through the
//!   cqrs-es repositories), our all-or-nothing append, and the read models
//!   the `projections` crate describes.
//! - [`auth`], [`clock`], [`config`]: identity, injected time, settings.

pub mod advice;
pub mod app;
pub mod audit;
pub mod auth;
pub mod availability;
pub mod batch;
pub mod checkout;
pub mod clock;
pub mod config;
pub mod holds;
pub mod http;
pub mod inventory;
pub mod metrics;
pub mod payment;
pub mod projector;
pub mod recovery;
pub mod shows;
pub mod store;
pub mod streams;
pub mod sweeper;
pub mod verify;
pub mod worker;
