//! A sale's tickets, as its checkout issues and revokes them.
//!
//! Issued with the capture: `RecordCapture` on the checkout and
//! `TicketIssued` on a new stream per line, in one append, so a confirmed
//! sale has its tickets and an unconfirmed one none (a crash between the
//! two cannot happen). Revoked before a cancelled line's units are freed:
//! the cancellation's first step after it is recorded, again on every
//! drive of it until it ends (revoking twice is nothing), so a seat or
//! place freed for sale never has a valid ticket.

use chrono::{DateTime, Utc};
use domain::checkout::{decide, Checkout, CheckoutCommand};
use domain::ids::{BookingId, BuyerId, HoldId, OrderId, ShowId, TicketId};
use domain::order::OrderLine;
use domain::ticket::{self, Admits, Issued, Sold, Ticket, TicketCommand};

use super::CheckoutError;
use crate::command::round::{Decided, Decides, Decision, View};
use crate::command::streams::ShowKey;
use crate::command::tickets::TicketRef;

/// Whose sale a checkout's tickets are: its stream, its booking, its
/// order (if it is one), its show and buyer.
pub(super) struct Sale<'a> {
    pub(super) checkout: HoldId,
    pub(super) order_id: Option<OrderId>,
    pub(super) booking_id: BookingId,
    pub(super) show_id: &'a ShowId,
    pub(super) holder: &'a BuyerId,
}

impl Sale<'_> {
    /// The ticket of each line, with its stream.
    pub(super) fn tickets(
        &self,
        lines: &[OrderLine],
        now: DateTime<Utc>,
    ) -> Vec<((String, ShowKey), Issued)> {
        lines
            .iter()
            .map(|line| {
                let ticket = self.ticket_of(line.line_id);
                let issued = Issued {
                    ticket_id: ticket.ticket_id,
                    show_id: self.show_id.clone(),
                    sold: Sold {
                        checkout: self.checkout,
                        order_id: self.order_id,
                        booking_id: self.booking_id,
                        line_id: line.line_id,
                    },
                    admits: Admits {
                        seat_id: line.seat_id.clone(),
                        pool_id: line.pool_id.clone(),
                        category: line.category.clone(),
                        ticket_type: line.ticket_type.clone(),
                    },
                    holder: self.holder.clone(),
                    holder_name: None,
                    issued_at: now,
                };
                (crate::command::tickets::unit(&ticket), issued)
            })
            .collect()
    }

    /// The ticket of line `line_id` of this sale.
    pub(super) fn ticket_of(&self, line_id: u32) -> TicketRef {
        TicketRef {
            show_id: self.show_id.clone(),
            ticket_id: TicketId::for_line(self.checkout, line_id),
        }
    }
}

/// The decision: the checkout's `command` (its capture), with a ticket
/// issued on each unit (a new ticket stream each, in the units' order).
/// A checkout past the command is `Moved`, and nothing is issued.
pub(super) struct IssuingWith<'a> {
    pub(super) command: &'a CheckoutCommand,
    /// One per unit, in the units' order.
    pub(super) issues: Vec<Issued>,
}

impl Decides<Ticket> for IssuingWith<'_> {
    type Output = bool;
    type Error = CheckoutError;

    fn decide(&mut self, view: &View<'_, Ticket>) -> Result<Decision<Ticket, bool>, CheckoutError> {
        let checkout: &Checkout = view
            .checkout
            .ok_or_else(|| CheckoutError::Bug("issuing tickets without the checkout".into()))?;
        let Ok(events) = decide(checkout, self.command) else {
            return Ok(Decision::Moved(false));
        };
        let mut units = Vec::with_capacity(view.units.len());
        for ((ticket, _), issued) in view.units.iter().zip(&self.issues) {
            let issue = TicketCommand::Issue(Box::new(issued.clone()));
            // Assumed new, a stream issued already is found at the append
            // (its version): the round reads it and decides again.
            let issuing = ticket::decide(ticket, &issue, view.now)
                .map_err(|e| CheckoutError::Bug(format!("issuing a ticket: {e}")))?;
            units.push(issuing);
        }
        let decided = Decided {
            checkout: events,
            ..Decided::units(units)
        };
        Ok(Decision::Append(decided, true))
    }
}

/// The decision: every unit (a ticket stream) revoked; one never issued,
/// or revoked already, is left as it is.
pub(super) struct Revoking;

impl Decides<Ticket> for Revoking {
    type Output = ();
    type Error = CheckoutError;

    fn decide(&mut self, view: &View<'_, Ticket>) -> Result<Decision<Ticket, ()>, CheckoutError> {
        let units = view
            .units
            .iter()
            .map(|(ticket, _)| ticket::decide(ticket, &TicketCommand::Revoke, view.now))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CheckoutError::Bug(format!("revoking a ticket: {e}")))?;
        Ok(Decision::Append(Decided::units(units), ()))
    }
}

impl super::CheckoutService {
    /// Records `command` (the capture) with the sale's tickets, one per
    /// line, in one append; whether it applied.
    pub(super) async fn record_with_tickets(
        &self,
        ctx: &crate::command::context::RequestContext,
        subject: &super::Subject,
        checkout: &mut crate::command::round::CheckoutLock,
        command: &CheckoutCommand,
    ) -> Result<bool, CheckoutError> {
        let lines = self.sale_lines(subject, checkout.aggregate()).await?;
        let Some(sale) = sale_of(subject, checkout.aggregate()) else {
            return Err(CheckoutError::Bug(
                "a capture of a checkout without its buyer".into(),
            ));
        };
        let mut tickets = sale.tickets(&lines, self.clock.now());
        // The round locks ticket streams in stream-id order (`Stream::sort`,
        // stable): sorted so here, the issues stay beside their streams.
        tickets.sort_by(|a, b| a.0 .0.cmp(&b.0 .0));
        let (units, issues): (Vec<_>, Vec<_>) = tickets.into_iter().unzip();
        let round = crate::command::round::Round::new("capture", ctx)
            .with_checkout(checkout)
            .assuming_new();
        let mut issuing = IssuingWith { command, issues };
        Ok(match self.rounds.run(round, units, &mut issuing).await? {
            crate::command::round::Settled::Appended(applies)
            | crate::command::round::Settled::Answered(applies) => applies,
            crate::command::round::Settled::KeyTaken => false,
        })
    }

    /// Revokes the tickets of `lines` of the checkout's sale (before their
    /// units are freed); those never issued are left as they are.
    pub(super) async fn revoke_tickets(
        &self,
        ctx: &crate::command::context::RequestContext,
        sale: &Sale<'_>,
        lines: impl IntoIterator<Item = u32>,
    ) -> Result<(), CheckoutError> {
        let mut units: Vec<(String, ShowKey)> = lines
            .into_iter()
            .map(|line| crate::command::tickets::unit(&sale.ticket_of(line)))
            .collect();
        if units.is_empty() {
            return Ok(());
        }
        units.sort_by(|a, b| a.0.cmp(&b.0));
        let round = crate::command::round::Round::new("revoke_tickets", ctx);
        self.rounds.run(round, units, &mut Revoking).await?;
        Ok(())
    }

    /// Revokes every ticket of a hold's purchase being cancelled.
    pub(super) async fn revoke_booking_tickets(
        &self,
        ctx: &crate::command::context::RequestContext,
        subject: &super::Subject,
        checkout: &Checkout,
    ) -> Result<(), CheckoutError> {
        let lines = self.sale_lines(subject, checkout).await?;
        let Some(sale) = sale_of(subject, checkout) else {
            return Ok(());
        };
        self.revoke_tickets(ctx, &sale, lines.iter().map(|l| l.line_id))
            .await
    }

    /// The lines of the checkout's sale: an order's terms, or the lines a
    /// hold's items make (as an order of that one hold would have).
    pub(super) async fn sale_lines(
        &self,
        subject: &super::Subject,
        checkout: &Checkout,
    ) -> Result<Vec<OrderLine>, CheckoutError> {
        match (subject, &checkout.order) {
            (_, Some(order)) => Ok(order.terms.lines.clone()),
            (super::Subject::Hold(record), None) => {
                let entry = self.show_of(record).await?;
                Ok(super::order::lines_of(
                    std::slice::from_ref(record),
                    &entry,
                )?)
            }
            (super::Subject::Order(order), None) => Err(CheckoutError::Bug(format!(
                "order {} without its terms",
                order.order_id
            ))),
        }
    }
}

/// The sale a checkout is, once it has a show and a buyer.
pub(super) fn sale_of<'a>(subject: &super::Subject, checkout: &'a Checkout) -> Option<Sale<'a>> {
    let (show_id, holder) = (checkout.show_id.as_ref()?, checkout.buyer.as_ref()?);
    let key = subject.key();
    let (order_id, booking_id) = match &checkout.order {
        Some(order) => (Some(order.order_id()), order.order_id().booking_id()),
        None => (None, Checkout::booking_id_for(key)),
    };
    Some(Sale {
        checkout: key,
        order_id,
        booking_id,
        show_id,
        holder,
    })
}

impl super::CheckoutService {
    /// `GET /v1/orders/{id}/tickets`: the order's tickets, one per line
    /// (to its buyer or an admin; whoever holds them now reads each).
    pub async fn order_tickets(
        &self,
        actor: &crate::auth::Actor,
        order_id: OrderId,
    ) -> Result<Vec<TicketRef>, CheckoutError> {
        let checkout = self.order_checkout(actor, order_id).await?;
        let (Some(order), Some(show_id)) = (&checkout.order, &checkout.show_id) else {
            return Err(CheckoutError::OrderNotFound);
        };
        let key = HoldId(order_id.0);
        Ok(order
            .terms
            .lines
            .iter()
            .map(|line| TicketRef {
                show_id: show_id.clone(),
                ticket_id: TicketId::for_line(key, line.line_id),
            })
            .collect())
    }

    /// `GET /v1/bookings/{id}/tickets`: a booking's tickets (an order's
    /// booking: the order's).
    pub async fn booking_tickets(
        &self,
        actor: &crate::auth::Actor,
        booking_id: BookingId,
    ) -> Result<Vec<TicketRef>, CheckoutError> {
        if let Ok(tickets) = self.order_tickets(actor, OrderId(booking_id.0)).await {
            return Ok(tickets);
        }
        let row = self.booking_record(actor, booking_id).await?;
        let record = self.stored_hold(&row.hold_id).await?;
        let subject = super::Subject::Hold(record);
        let (checkout, _) = self.rounds.read_checkout(row.hold_id).await?;
        let lines = self.sale_lines(&subject, &checkout).await?;
        let show_id = subject_show(&subject);
        Ok(lines
            .iter()
            .map(|line| TicketRef {
                show_id: show_id.clone(),
                ticket_id: TicketId::for_line(row.hold_id, line.line_id),
            })
            .collect())
    }
}

fn subject_show(subject: &super::Subject) -> ShowId {
    match subject {
        super::Subject::Hold(record) => record.show_id.clone(),
        super::Subject::Order(order) => order.show_id.clone(),
    }
}
