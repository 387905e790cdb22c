//! Background workers: recovery of unfinished checkouts, the sweeper that
//! records expiries, and the periodic runner both use.

pub mod recovery;
pub mod runner;
pub mod sweeper;
