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
//! - [`rate_limit`]: requests per second per buyer and per client address
//!   (keyed GCRA on the service's clock); `http` decides who is counted.
//! - [`http`]: routes, extractors and the problem+json error contract; a
//!   handler parses, calls one application function and maps the result.
//! - [`command`]: everything that changes state. Each command is a pure
//!   decision of the `domain` crate run by one round ([`command::round`]:
//!   lock in the one order, refresh, decide at one `now`, append, again on
//!   conflict).
//! - [`query`]: availability, audit history and advice, read from the
//!   tables and the log; [`live`]: the same availability pushed over SSE.
//! - [`rebuild`]: the projector, replay and verify: the log folded into
//!   the read models through the same row builders the commands use
//!   (`projections::rows`).
//! - [`workers`]: recovery of half-done checkouts, the expiry sweeper.
//! - [`webhooks`]: deliveries driven from the log: endpoints, the
//!   dispatcher (log to recorded deliveries) and the sender.
//! - [`catalog`]: show definitions, cached by every instance.
//! - [`payment`]: the payment port and the durable simulator.
//! - [`tickets`]: tickets' codes, signed so any scanner verifies them
//!   offline, their keys, and their QR codes.
//! - [`store`]: PostgreSQL or SQLite; the event log (read through the
//!   cqrs-es repositories), our all-or-nothing append, and the read models.
//! - [`auth`], [`clock`], [`config`], [`metrics`]: identity, injected time,
//!   settings, Prometheus.

pub mod app;
pub mod auth;
pub mod catalog;
pub mod clock;
pub mod command;
pub mod config;
pub mod demo;
pub mod edge;
pub mod http;
pub mod live;
pub mod metrics;
pub mod payment;
pub mod query;
pub mod rate_limit;
pub mod rebuild;
pub mod store;
pub mod tickets;
pub mod webhooks;
pub mod workers;
