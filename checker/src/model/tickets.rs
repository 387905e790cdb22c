//! The checker's fold of the Ticket streams: one stream per ticket, each
//! issued once for one line of one sale (`TicketIssued`, naming the sale's
//! checkout and line and the seat or pool place it admits), revoked when
//! that line is cancelled (`TicketRevoked`). Written from the API's
//! meaning ("Tickets" in docs/api.md), not from the service's code: the
//! holder's name, transfers and scans change nothing folded here (a
//! transfer revokes an older code, never the ticket).

use std::collections::BTreeMap;

use crate::rows::LogEvent;

/// One ticket stream as folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TicketFacts {
    /// The stream id (`show/uuid`).
    pub stream: String,
    pub ticket_id: String,
    pub show_id: String,
    /// The sale: its checkout stream (a hold's id, or an order's), its
    /// booking and its line.
    pub checkout: String,
    pub booking_id: String,
    pub line_id: Option<u64>,
    /// What it admits: a seat, or a place of a pool.
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub ticket_type: String,
    pub holder: String,
    /// How many `TicketIssued` the stream holds (exactly one when sound).
    pub issues: u32,
    /// When the (first) issue was recorded: its append's instant.
    pub issued_us: Option<i64>,
    /// When the ticket was revoked as a whole (its line cancelled).
    pub revoked_us: Option<i64>,
}

impl TicketFacts {
    /// Issued and not revoked: a code of it may admit.
    pub fn valid(&self) -> bool {
        self.issues > 0 && self.revoked_us.is_none()
    }

    /// The unit it admits: the seat id, or the pool id for a place.
    pub fn unit(&self) -> Option<&str> {
        self.seat_id.as_deref().or(self.pool_id.as_deref())
    }
}

/// Every Ticket stream, by stream id.
pub fn fold(log: &[LogEvent]) -> BTreeMap<String, TicketFacts> {
    let mut tickets: BTreeMap<String, TicketFacts> = BTreeMap::new();
    for event in log.iter().filter(|e| e.aggregate_type == "Ticket") {
        let ticket = tickets
            .entry(event.aggregate_id.clone())
            .or_insert_with(|| TicketFacts {
                stream: event.aggregate_id.clone(),
                ..TicketFacts::default()
            });
        apply(ticket, event);
    }
    tickets
}

fn apply(t: &mut TicketFacts, e: &LogEvent) {
    match e.event_type.as_str() {
        "TicketIssued" => {
            t.issues += 1;
            if t.issues > 1 {
                return;
            }
            let text = |v: Option<&serde_json::Value>| {
                v.and_then(serde_json::Value::as_str).map(str::to_owned)
            };
            let data = e.data();
            let sold = data.get("sold");
            let admits = data.get("admits");
            let field =
                |of: Option<&serde_json::Value>, name: &str| text(of.and_then(|v| v.get(name)));
            t.ticket_id = e.str("ticket_id").unwrap_or_default().to_owned();
            t.show_id = e.str("show_id").unwrap_or_default().to_owned();
            t.holder = e.str("holder").unwrap_or_default().to_owned();
            t.checkout = field(sold, "checkout").unwrap_or_default();
            t.booking_id = field(sold, "booking_id").unwrap_or_default();
            t.line_id = sold
                .and_then(|s| s.get("line_id"))
                .and_then(serde_json::Value::as_u64);
            t.seat_id = field(admits, "seat_id");
            t.pool_id = field(admits, "pool_id");
            t.ticket_type = field(admits, "ticket_type").unwrap_or_default();
            t.issued_us = Some(e.recorded_at_us);
        }
        "TicketRevoked" => {
            t.revoked_us.get_or_insert(e.recorded_at_us);
        }
        _ => {}
    }
}
