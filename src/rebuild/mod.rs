//! Rebuilding read models from the log: the fold every rebuild shares
//! ([`fold`]), the projector that tails the log, replay and verify.

pub mod fold;
pub mod projector;
pub mod replay;
pub mod verify;
