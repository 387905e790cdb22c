//! Tickets at the door: the codes a scanner reads, signed so that any
//! scanner verifies them offline with the public key alone (`code`), the
//! keys they are signed with (`keys`), and the code drawn as a QR code
//! (`qr`). What a ticket is, and what it may do, is the domain's Ticket
//! stream (`domain::ticket`).

pub mod code;
pub mod keys;
pub mod qr;

use std::fmt;

use domain::ids::{ShowId, TicketId};

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

    /// The ticket's stream id: `show_id/uuid`.
    pub fn stream_id(&self) -> String {
        domain::ids::ticket_stream_id(&self.show_id, &self.ticket_id)
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
            ticket.stream_id(),
            "rock-nye/00000000-0000-0000-0000-000000000009"
        );
        assert_eq!(TicketRef::parse("no-dot"), None);
    }
}
