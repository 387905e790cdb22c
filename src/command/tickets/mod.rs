//! Tickets: one per sold seat or place (the domain's Ticket stream).
//!
//! The checkout issues a sale's tickets in the append that records its
//! capture (`checkout/tickets.rs`: a sale is confirmed and has its tickets
//! at once, or neither), and revokes a line's ticket before its seat or
//! place is freed (a freed unit never has a valid ticket). The rest is the
//! ticket's own: its holder names it or hands it on (`transfer.rs`), and
//! the door scans it (`scan.rs`). Each is a round on ticket streams, so
//! what races on one ticket (a transfer and a check-in, two transfers) is
//! decided by its version.

use domain::ticket::{Ticket, TicketEvent};

use crate::command::streams::{show_stream, ShowKey};
pub use crate::tickets::TicketRef;

// A ticket stream has no read-model rows: readers fold it from the log.
show_stream!(Ticket, TicketEvent, tickets);

/// A ticket's stream as a round locks it.
pub fn unit(ticket: &TicketRef) -> (String, ShowKey) {
    let key = ShowKey {
        show_id: ticket.show_id.clone(),
    };
    (ticket.stream_id(), key)
}

mod read;
mod scan;
mod transfer;

pub use read::{CheckedInView, TicketView};
pub use scan::{BatchScan, CheckinView, Refused, ScanAsked, ScanResult};

use std::sync::Arc;

use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::round::{RoundError, Rounds};
use crate::store::{EventLog, StoreError};
use crate::tickets::keys::KeyRing;

/// Why a ticket command or read is refused.
#[derive(Debug, thiserror::Error)]
pub enum TicketError {
    /// 404 `ticket_not_found` (also to whoever may not see it).
    #[error("no such ticket")]
    NotFound,
    /// 409 `ticket_checked_in`.
    #[error("the ticket has been checked in")]
    CheckedIn,
    /// 409 `transfer_closed`.
    #[error("transfers of this show's tickets have closed")]
    TransferClosed,
    /// 409 `ticket_revoked` (a transfer or a name of a revoked ticket).
    #[error("the ticket is revoked")]
    Revoked,
    /// 422 `validation_failed`, naming the field.
    #[error("{0}")]
    Invalid(String),
    /// 403 `forbidden`.
    #[error("not yours")]
    Forbidden,
    /// A refused scan, recorded (see `scan.rs`).
    #[error("scan refused: {}", .0.code())]
    Scan(Refused),
    /// 404 `show_not_found`.
    #[error("show not found")]
    ShowNotFound,
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RoundError for TicketError {
    fn contended() -> Self {
        TicketError::Busy
    }

    fn bug(what: String) -> Self {
        TicketError::Bug(what)
    }
}

/// The tickets' own commands and reads: naming, transfers, the door.
pub struct TicketService {
    rounds: Arc<Rounds>,
    log: EventLog,
    catalog: Arc<ShowCatalog>,
    keys: Arc<KeyRing>,
    clock: Arc<dyn Clock>,
}

impl TicketService {
    pub fn new(
        rounds: Arc<Rounds>,
        log: EventLog,
        catalog: Arc<ShowCatalog>,
        keys: Arc<KeyRing>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            rounds,
            log,
            catalog,
            keys,
            clock,
        }
    }

    /// The keys a scanner verifies codes with (newest first).
    pub fn public_keys(&self) -> Vec<crate::tickets::keys::PublicKeyView> {
        self.keys.public_keys()
    }
}
