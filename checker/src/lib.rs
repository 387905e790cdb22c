//! A model checker for the booking service's whole sale.
//!
//! A seeded crowd of clients (dozens of buyers and a box-office clerk)
//! drives one to three instances of the real `booking` binary on one
//! database (SQLite or PostgreSQL), through every command, while faults
//! happen (an instance killed with SIGKILL and started again; on
//! PostgreSQL, the server of a cluster of the run's own restarted). Every
//! request and answer is recorded (the history). Once the crowd stops and
//! the service is quiet, the history, the event log, the read models and
//! the payment simulator's ledger are held to the service's invariants.
//!
//! # Layout
//!
//! - `run`: one run, from a fresh database to the verdict; `config` its
//!   settings; `report` what it ends with.
//! - Driving: `instances` (the binary started, killed, started again),
//!   `cluster` (a PostgreSQL of the run's own), `database` (the run's
//!   database and the reads of it), `api` (one request, recorded),
//!   `history`, `tokens`, `faults`.
//! - The sale: `shows` and `catalog` (the shows and why each), `setup`,
//!   `generator` (the crowd: each client's choices from its own seeded
//!   generator and what it knows), `quiesce`.
//! - Checking: `rows` (the log, ledger and phases as plain rows),
//!   `model` (the checker's own folds of the streams, written from the
//!   API's meaning, not from the service's code), `evidence`, and
//!   `properties`: pure functions of the evidence and the model, each
//!   tested with hand-made bad histories.
//!
//! The checker never links the service: it is an independent model of it.
//! `domain` is used only for an order's id (derived from its holds) and
//! for limits.

pub mod api;
pub mod catalog;
pub mod cluster;
pub mod config;
pub mod database;
pub mod evidence;
pub mod faults;
pub mod generator;
pub mod history;
pub mod instances;
pub mod model;
pub mod properties;
pub mod quiesce;
pub mod report;
pub mod rows;
pub mod run;
pub mod setup;
pub mod shows;
pub mod tokens;

pub use config::{Config, Store};
pub use report::{Failure, Report, Violation};
pub use run::run;
