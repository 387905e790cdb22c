//! # booking
//!
//! An event-sourced seat reservation service. A seat is sold at most once,
//! however many buyers press "select" in the same second.
//!
//! ## Layout
//!
//! - [`app`]: builds the service from [`app::Settings`] and runs it; tests
//!   bind port 0 and pass their own clock and shutdown signal.
//! - [`edge`]: the accept loop: connection cap, header and idle timers.
//! - [`http`]: routes, extractors and the problem+json error contract.
//! - [`holds`], [`shows`]: the application services a handler calls. A
//!   command locks its streams in-process ([`streams`]), decides with the
//!   pure functions of the `domain` crate, and appends through [`store`].
//! - [`store`]: PostgreSQL or SQLite; the event log (read through the
//!   cqrs-es repositories), our all-or-nothing append, and the read models
//!   the `projections` crate describes.
//! - [`webhooks`]: deliveries driven from the log: endpoints, the
//!   dispatcher (log to recorded deliveries) and the sender.
//! - [`auth`], [`clock`], [`config`]: identity, injected time, settings.

pub mod app;
pub mod auth;
pub mod catalog;
pub mod clock;
pub mod command;
pub mod config;
pub mod edge;
pub mod http;
pub mod live;
pub mod metrics;
pub mod payment;
pub mod query;
pub mod rebuild;
pub mod store;
pub mod webhooks;
pub mod workers;
