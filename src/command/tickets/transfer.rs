//! A ticket named or handed on by its holder: one round on the ticket's
//! stream each, so a transfer racing a check-in, or another transfer, is
//! decided by the stream's version (one wins; the other is told why).

use domain::ids::BuyerId;
use domain::ticket::{self, Ticket, TicketCommand, TicketError as Refusal};

use super::{unit, TicketError, TicketRef, TicketService, TicketView};
use crate::command::context::RequestContext;
use crate::command::round::{Decided, Decides, Decision, Round, Settled, View};

/// The decision: `command` on the ticket, by an actor who holds it (or an
/// admin); whom it was held by when decided is the check.
struct Changing<'a> {
    command: TicketCommand,
    ctx: &'a RequestContext,
}

impl Decides<Ticket> for Changing<'_> {
    type Output = ();
    type Error = TicketError;

    fn decide(&mut self, view: &View<'_, Ticket>) -> Result<Decision<Ticket, ()>, TicketError> {
        let Some(&(ticket, _)) = view.units.first() else {
            return Err(TicketError::Bug(
                "a ticket's change without its stream".into(),
            ));
        };
        let holder = ticket.issued.as_ref().map(|i| i.holder.as_str());
        if !holder.is_some_and(|h| self.ctx.actor.may_act_for(h)) {
            return Err(TicketError::NotFound);
        }
        let events = ticket::decide(ticket, &self.command, view.now).map_err(refusal)?;
        Ok(Decision::Append(Decided::units(vec![events]), ()))
    }
}

fn refusal(e: Refusal) -> TicketError {
    match e {
        Refusal::NotIssued => TicketError::NotFound,
        Refusal::Revoked => TicketError::Revoked,
        Refusal::CheckedIn => TicketError::CheckedIn,
        Refusal::TransferClosed => TicketError::TransferClosed,
        Refusal::ToSelf => {
            TicketError::Invalid("to: a ticket is transferred to someone else".into())
        }
        Refusal::HolderName => TicketError::Invalid(format!("holder_name: {e}")),
        Refusal::ScanLimit => TicketError::Invalid(e.to_string()),
    }
}

impl TicketService {
    /// `PATCH /v1/tickets/{id}` `{"holder_name"}`: the same code, a name.
    pub async fn name(
        &self,
        ctx: &RequestContext,
        ticket: &TicketRef,
        holder_name: String,
    ) -> Result<TicketView, TicketError> {
        ticket::check_holder_name(&holder_name).map_err(refusal)?;
        self.change(ctx, ticket, TicketCommand::Name { holder_name })
            .await
    }

    /// `POST /v1/tickets/{id}/transfer`: held by `to` from now on, a new
    /// version and code, the old code revoked in the same decision.
    pub async fn transfer(
        &self,
        ctx: &RequestContext,
        ticket: &TicketRef,
        to: BuyerId,
        holder_name: Option<String>,
    ) -> Result<TicketView, TicketError> {
        if let Some(name) = &holder_name {
            ticket::check_holder_name(name).map_err(refusal)?;
        }
        let entry = self
            .catalog
            .get(&ticket.show_id)
            .await?
            .ok_or(TicketError::NotFound)?;
        let command = TicketCommand::Transfer {
            to,
            holder_name,
            until: entry.show.transfer_until,
        };
        self.change(ctx, ticket, command).await
    }

    /// Runs one change of the ticket and answers it as it is then.
    async fn change(
        &self,
        ctx: &RequestContext,
        ticket: &TicketRef,
        command: TicketCommand,
    ) -> Result<TicketView, TicketError> {
        let round = Round::new("ticket", ctx);
        let mut changing = Changing { command, ctx };
        match self
            .rounds
            .run(round, vec![unit(ticket)], &mut changing)
            .await?
        {
            Settled::Appended(()) | Settled::Answered(()) => {}
            Settled::KeyTaken => return Err(TicketError::Bug("a ticket took a key".into())),
        }
        let state = self.load(ticket).await?.ok_or(TicketError::NotFound)?;
        self.view(ticket, &state).await
    }
}
