//! Background workers: recovery of unfinished checkouts, the sweeper that
//! records expiries, the room keeper of waiting rooms, the
//! waiting lists' judge, and the periodic
//! runner they use.

pub mod recovery;
pub mod runner;
pub mod sweeper;
pub mod waiting_room;
pub mod waitlist;
