//! A ticket as the API shows it, folded from its stream, with its code
//! signed for its current version.

use chrono::{DateTime, Utc};
use domain::ids::BuyerId;
use domain::ticket::{Ticket, TicketEvent};
use serde::Serialize;

use super::{TicketError, TicketRef, TicketService};
use crate::auth::Actor;
use crate::catalog::CatalogEntry;
use crate::store::StoreError;
use crate::tickets::code;

/// A ticket as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TicketView {
    /// `{show_id}.{uuid}`.
    pub ticket_id: String,
    pub show_id: String,
    /// The order it was sold in (a purchase of one hold: its booking).
    #[schema(value_type = Option<uuid::Uuid>)]
    pub order_id: Option<domain::ids::OrderId>,
    #[schema(value_type = uuid::Uuid)]
    pub booking_id: domain::ids::BookingId,
    pub line_id: u32,
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub section: Option<String>,
    pub row: Option<String>,
    pub number: Option<u32>,
    pub category: Option<String>,
    pub ticket_type: String,
    /// The buyer who holds it now (a token's `sub`).
    #[schema(value_type = String)]
    pub holder: BuyerId,
    pub holder_name: Option<String>,
    /// `valid` or `revoked`.
    pub status: &'static str,
    /// 1 at issue, one more at each transfer.
    pub version: u32,
    /// What its QR code holds: `<payload>.<signature>` (docs/api.md).
    pub code: String,
    /// Its last entry while inside, else `null`.
    pub checked_in: Option<CheckedInView>,
}

/// Where a ticket stands at the door.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CheckedInView {
    pub inside: bool,
    pub gate: String,
    pub at: DateTime<Utc>,
}

impl TicketService {
    /// The ticket as its stream has it now (not issued: `None`).
    pub(super) async fn load(&self, ticket: &TicketRef) -> Result<Option<Ticket>, StoreError> {
        let stream = ticket.stream_id();
        let mut state = Ticket::default();
        for event in self.log.stream_events::<Ticket>(&stream, 0).await? {
            let payload: TicketEvent = serde_json::from_value(event.payload).map_err(|e| {
                StoreError::Corrupt(format!("ticket {stream}#{}: {e}", event.sequence))
            })?;
            state.apply_event(&payload);
        }
        Ok(state.issued.is_some().then_some(state))
    }

    /// `GET /v1/tickets/{id}`: the ticket, to its holder or an admin.
    pub async fn ticket(
        &self,
        actor: &Actor,
        ticket: &TicketRef,
    ) -> Result<TicketView, TicketError> {
        let state = self.load(ticket).await?.ok_or(TicketError::NotFound)?;
        let holder = state
            .issued
            .as_ref()
            .map(|i| i.holder.as_str())
            .unwrap_or_default();
        if !actor.may_act_for(holder) {
            return Err(TicketError::NotFound);
        }
        self.view(ticket, &state).await
    }

    /// The views of `tickets` as they are now (those never issued left out).
    pub async fn views(&self, tickets: &[TicketRef]) -> Result<Vec<TicketView>, TicketError> {
        let mut views = Vec::with_capacity(tickets.len());
        for ticket in tickets {
            if let Some(state) = self.load(ticket).await? {
                views.push(self.view(ticket, &state).await?);
            }
        }
        Ok(views)
    }

    /// `GET /v1/me/tickets`: the caller's valid tickets, by show then seat.
    pub async fn tickets_of(&self, holder: &BuyerId) -> Result<Vec<TicketView>, TicketError> {
        let mut tickets = Vec::new();
        for stream in self.log.ticket_streams_of(holder.as_str()).await? {
            let Some((show_id, ticket_id)) = domain::ids::parse_ticket_stream_id(&stream) else {
                continue;
            };
            tickets.push(TicketRef { show_id, ticket_id });
        }
        let mut views: Vec<TicketView> = self
            .views(&tickets)
            .await?
            .into_iter()
            .filter(|v| &v.holder == holder && v.status == "valid")
            .collect();
        views.sort_by(|a, b| {
            (&a.show_id, a.line_id, &a.ticket_id).cmp(&(&b.show_id, b.line_id, &b.ticket_id))
        });
        Ok(views)
    }

    /// The ticket as the API shows it, its code signed for its version.
    pub(super) async fn view(
        &self,
        ticket: &TicketRef,
        state: &Ticket,
    ) -> Result<TicketView, TicketError> {
        let issued = state.issued.as_ref().ok_or(TicketError::NotFound)?;
        let entry = self.catalog.get(&ticket.show_id).await?;
        let place = entry
            .as_deref()
            .zip(issued.admits.seat_id.as_ref())
            .and_then(|(entry, seat)| seat_place(entry, seat));
        let inside = state.at_door(self.clock.now()).inside;
        Ok(TicketView {
            ticket_id: ticket.to_string(),
            show_id: ticket.show_id.to_string(),
            order_id: issued.sold.order_id,
            booking_id: issued.sold.booking_id,
            line_id: issued.sold.line_id,
            seat_id: issued.admits.seat_id.as_ref().map(ToString::to_string),
            pool_id: issued.admits.pool_id.as_ref().map(ToString::to_string),
            section: place
                .as_ref()
                .map(|p| p.0.clone())
                .or_else(|| issued.admits.pool_id.as_ref().map(ToString::to_string)),
            row: place.as_ref().map(|p| p.1.clone()),
            number: place.map(|p| p.2),
            category: issued.admits.category.as_ref().map(ToString::to_string),
            ticket_type: issued.admits.ticket_type.to_string(),
            holder: issued.holder.clone(),
            holder_name: issued.holder_name.clone(),
            status: if state.revoked { "revoked" } else { "valid" },
            version: state.version,
            code: code::sign(
                self.keys.signing(),
                ticket,
                state.version,
                Some(admitted(issued)),
            ),
            checked_in: inside.map(|scan| CheckedInView {
                inside: true,
                gate: scan.gate.to_string(),
                at: scan.scanned_at,
            }),
        })
    }
}

/// What the ticket admits, as its code tells a door offline.
fn admitted(issued: &domain::ticket::Issued) -> code::Admitted {
    code::Admitted {
        seat_id: issued.admits.seat_id.as_ref().map(ToString::to_string),
        pool_id: issued.admits.pool_id.as_ref().map(ToString::to_string),
        ticket_type: issued.admits.ticket_type.to_string(),
    }
}

/// A seat's section, row and number, as the show lists it.
fn seat_place(entry: &CatalogEntry, seat: &domain::ids::SeatId) -> Option<(String, String, u32)> {
    let (_, spec) = entry.show.seat(seat)?;
    Some((spec.section.clone(), spec.row.clone(), spec.number))
}
