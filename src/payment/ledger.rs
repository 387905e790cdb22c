//! The payment simulator's ledger. Its tables are the store's
//! (`store/ledger.rs`): only the store's folder knows the database.

pub use crate::store::ledger::{Ledger, LedgerCharge, SimCharge, SimPayment};
