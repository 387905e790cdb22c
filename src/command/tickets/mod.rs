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

use std::fmt;

use domain::ids::{ShowId, TicketId};
use domain::ticket::{Ticket, TicketEvent};

use crate::command::streams::{show_stream, ShowKey};

// A ticket stream has no read-model rows: readers fold it from the log.
show_stream!(Ticket, TicketEvent, tickets);

/// A ticket as the API names it: `{show_id}.{uuid}` (its show first, so a
/// read finds its stream, `show_id/uuid`, without an index).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TicketRef {
    pub show_id: ShowId,
    pub ticket_id: TicketId,
}

impl TicketRef {
    pub fn parse(text: &str) -> Option<Self> {
        let (show, id) = text.rsplit_once('.')?;
        Some(Self {
            show_id: ShowId::parse(show).ok()?,
            ticket_id: TicketId(uuid::Uuid::parse_str(id).ok()?),
        })
    }

    /// The ticket's stream and its key, as a round locks it.
    pub fn stream(&self) -> (String, ShowKey) {
        (
            domain::ids::ticket_stream_id(&self.show_id, &self.ticket_id),
            ShowKey {
                show_id: self.show_id.clone(),
            },
        )
    }
}

impl fmt::Display for TicketRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.show_id, self.ticket_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_ref_round_trips_and_names_its_stream() {
        let ticket = TicketRef {
            show_id: ShowId::parse("rock-nye").unwrap(),
            ticket_id: TicketId(uuid::Uuid::from_u128(9)),
        };
        let text = ticket.to_string();
        assert_eq!(TicketRef::parse(&text), Some(ticket.clone()));
        assert_eq!(
            ticket.stream().0,
            "rock-nye/00000000-0000-0000-0000-000000000009"
        );
        assert_eq!(TicketRef::parse("no-dot"), None);
    }
}
