//! Which webhook events an event of the log gives, and what they carry:
//! the booking, refund or hold as the API shows it.
//!
//! | log event | stream | webhook event |
//! |---|---|---|
//! | `CheckoutCompleted` | Checkout | `booking.confirmed` (the booking) |
//! | `CheckoutCancelled` | Checkout | `booking.cancelled` (the booking) and `refund.issued` (its refund) |
//! | `PaymentRefunded` | Checkout | `refund.issued` (a charge that outlived its hold) |
//! | `HoldExpired` | Seat | `hold.expired` (the hold) |
//! | `PoolHoldExpired` | PoolShard | `hold.expired` (the hold) |
//! | `CheckoutCompleted` of an order | Checkout | `order.confirmed` (the order) |
//! | `LinesCancelled` | Checkout | `order.cancelled` (the order, and that cancellation's refund) |
//! | `EntryOffered` | Waitlist | `waitlist.offered` (the entry, its buyer and the offer's hold) |
//!
//! Expiry is decided at read time, without an event; `hold.expired` follows
//! the expiry the sweeper (or a later command) records, so it comes up to
//! a sweeper interval after the hold's `expires_at`. A hold of several
//! seats records one expiry per seat: the subject (`hold.expired:<hold
//! id>`) makes it one delivery per endpoint, from the first of them.

use std::sync::Arc;

use cqrs_es::Aggregate;
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{BookingId, HoldId, OrderId};
use domain::pool::{PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent};
use domain::ticket::{Mode, Outcome, Ticket, TicketEvent};
use domain::waitlist::{Waitlist, WaitlistEvent};
use projections::checkouts::CheckoutRow;
use projections::time::from_micros;
use serde::Serialize;
use serde_json::{json, Value};

use crate::command::checkout::{BookingStatus, CheckoutError, CheckoutService};
use crate::command::holds::{HoldError, HoldService};
use crate::command::tickets::{TicketRef, TicketService};
use crate::store::{Checkouts, LogEvent, StoreError, WebhookEventType};

/// One webhook event an event of the log gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub event_type: WebhookEventType,
    /// What it is about, once per endpoint: `<type>:<id>`.
    pub subject: String,
    /// The body every attempt sends: `{"type", "timestamp", "data"}`.
    pub body: String,
}

/// A refund as a webhook shows it (no route of the API shows one).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RefundView {
    pub refund_id: String,
    pub charge_id: String,
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    /// The booking refunded by a cancellation; none for a charge that
    /// outlived its hold.
    #[schema(value_type = Option<uuid::Uuid>)]
    pub booking_id: Option<BookingId>,
    pub amount_cents: i64,
    /// `booking_cancelled`, `hold_expired` or `hold_released`.
    pub reason: String,
}

/// The webhook event types `event` can give, known from its type alone:
/// the dispatcher reads nothing more for an event no endpoint wants.
pub fn types_of(event: &LogEvent) -> &'static [WebhookEventType] {
    use WebhookEventType::*;
    match (event.aggregate_type.as_str(), event.event_type.as_str()) {
        // A hold's purchase or an order's: `checkout_data` tells which.
        (kind, "CheckoutCompleted") if kind == Checkout::TYPE => {
            &[BookingConfirmed, OrderConfirmed]
        }
        (kind, "LinesCancelled") if kind == Checkout::TYPE => &[OrderCancelled],
        (kind, "CheckoutCancelled") if kind == Checkout::TYPE => &[BookingCancelled, RefundIssued],
        (kind, "PaymentRefunded") if kind == Checkout::TYPE => &[RefundIssued],
        (kind, "BookingReversed") if kind == Checkout::TYPE => &[BookingCancelled],
        (kind, "HoldExpired") if kind == Seat::TYPE => &[HoldExpired],
        (kind, "PoolHoldExpired") if kind == PoolShard::TYPE => &[HoldExpired],
        (kind, "EntryOffered") if kind == Waitlist::TYPE => &[WaitlistOffered],
        // A transfer revokes the code it replaces.
        (kind, "TicketTransferred") if kind == Ticket::TYPE => &[TicketTransferred, TicketRevoked],
        (kind, "TicketRevoked") if kind == Ticket::TYPE => &[TicketRevoked],
        // Only an admission: `ticket_data` tells.
        (kind, "TicketScanned") if kind == Ticket::TYPE => &[TicketCheckedIn],
        _ => &[],
    }
}

fn corrupt(event: &LogEvent, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!(
        "event {} of {}: {what}",
        event.position, event.aggregate_id
    ))
}

fn to_value<T: Serialize>(event: &LogEvent, view: &T) -> Result<Value, StoreError> {
    serde_json::to_value(view).map_err(|e| corrupt(event, e))
}

fn decode<E: serde::de::DeserializeOwned>(event: &LogEvent) -> Result<E, StoreError> {
    serde_json::from_str(&event.payload).map_err(|e| corrupt(event, e))
}

/// A store error stays one (the pass is retried); anything else means the
/// read models disagree with the log, which the projector repairs.
fn from_checkout(error: CheckoutError) -> StoreError {
    match error {
        CheckoutError::Store(e) => e,
        other => StoreError::Corrupt(other.to_string()),
    }
}

fn from_ticket(error: crate::command::tickets::TicketError) -> StoreError {
    match error {
        crate::command::tickets::TicketError::Store(e) => e,
        other => StoreError::Corrupt(other.to_string()),
    }
}

/// The ticket a ticket event is of (its stream `show/uuid`).
fn ticket_of(event: &LogEvent) -> Result<TicketRef, StoreError> {
    let (show_id, ticket_id) = domain::ids::parse_ticket_stream_id(&event.aggregate_id)
        .ok_or_else(|| corrupt(event, "not a ticket's stream"))?;
    Ok(TicketRef { show_id, ticket_id })
}

fn from_hold(error: HoldError) -> StoreError {
    match error {
        HoldError::Store(e) => e,
        other => StoreError::Corrupt(other.to_string()),
    }
}

/// The order webhook a checkout's event gives, if any (with a
/// cancellation's refund): an order's units are booked under its own id,
/// so its completion is told apart from a hold's purchase by it.
fn order_occurrence(
    stream: HoldId,
    event: &CheckoutEvent,
) -> Option<(WebhookEventType, Option<Value>)> {
    match event {
        CheckoutEvent::CheckoutCompleted { booking_id, .. } if booking_id.0 == stream.0 => {
            Some((WebhookEventType::OrderConfirmed, None))
        }
        CheckoutEvent::LinesCancelled {
            refund_id,
            amount_cents,
            lines,
            ..
        } => {
            let refund =
                json!({"refund_id": refund_id, "amount_cents": amount_cents, "lines": lines});
            Some((WebhookEventType::OrderCancelled, Some(refund)))
        }
        _ => None,
    }
}

/// A webhook event an event of the log gives: its type, the id of what it
/// is about, and its data.
type Found = (WebhookEventType, String, Value);

pub struct Payloads {
    checkouts: Checkouts,
    checkout: Arc<CheckoutService>,
    holds: Arc<HoldService>,
    tickets: Arc<TicketService>,
}

impl Payloads {
    pub fn new(
        checkouts: Checkouts,
        (checkout, holds, tickets): (Arc<CheckoutService>, Arc<HoldService>, Arc<TicketService>),
    ) -> Self {
        Self {
            checkouts,
            checkout,
            holds,
            tickets,
        }
    }

    /// The webhook events of `event` that `wanted` asks for, with their
    /// bodies. None if what they would show is gone (a corrupt read model:
    /// logged, and the event skipped rather than blocking every endpoint).
    pub async fn occurrences(
        &self,
        event: &LogEvent,
        wanted: impl Fn(WebhookEventType) -> bool,
    ) -> Result<Vec<Occurrence>, StoreError> {
        let types: Vec<WebhookEventType> = types_of(event)
            .iter()
            .copied()
            .filter(|t| wanted(*t))
            .collect();
        if types.is_empty() {
            return Ok(Vec::new());
        }
        match self.data_of(event, &types).await {
            Ok(found) => Ok(found
                .into_iter()
                .map(|(event_type, subject, data)| Occurrence {
                    event_type,
                    subject: format!("{event_type}:{subject}"),
                    body: body(event_type, event.recorded_at_us, data),
                })
                .collect()),
            Err(StoreError::Corrupt(why)) => {
                tracing::error!(position = event.position, %why, "no webhook for an event whose rows are missing");
                Ok(Vec::new())
            }
            Err(other) => Err(other),
        }
    }

    async fn data_of(
        &self,
        event: &LogEvent,
        types: &[WebhookEventType],
    ) -> Result<Vec<Found>, StoreError> {
        if event.aggregate_type == Checkout::TYPE {
            return self.checkout_data(event, types).await;
        }
        if event.aggregate_type == Waitlist::TYPE {
            return Ok(vec![self.waitlist_offered(event).await?]);
        }
        if event.aggregate_type == Ticket::TYPE {
            return self.ticket_data(event, types).await;
        }
        match expired_hold(event)? {
            Some(hold_id) => Ok(vec![self.hold_expired(event, hold_id).await?]),
            None => Ok(Vec::new()),
        }
    }

    /// What a checkout's event gives: a booking confirmed, cancelled or
    /// undone, a refund.
    async fn checkout_data(
        &self,
        event: &LogEvent,
        types: &[WebhookEventType],
    ) -> Result<Vec<Found>, StoreError> {
        let hold_id: HoldId = event
            .aggregate_id
            .parse::<uuid::Uuid>()
            .map(HoldId)
            .map_err(|e| corrupt(event, e))?;
        let decoded = decode::<CheckoutEvent>(event)?;
        if let Some((event_type, refund)) = order_occurrence(hold_id, &decoded) {
            return self.order_event(event, types, event_type, refund).await;
        }
        match decoded {
            CheckoutEvent::CheckoutCompleted {
                booking_id,
                charge_id,
                amount_cents,
            } if types.contains(&WebhookEventType::BookingConfirmed) => {
                let view = self
                    .booking_view(
                        event,
                        &hold_id,
                        booking_id,
                        &charge_id,
                        amount_cents,
                        BookingStatus::Confirmed,
                    )
                    .await?;
                let id = booking_id.to_string();
                Ok(vec![(WebhookEventType::BookingConfirmed, id, view)])
            }
            CheckoutEvent::CheckoutCancelled {
                booking_id,
                refund_id,
            } => {
                self.booking_cancelled(event, types, hold_id, booking_id, refund_id)
                    .await
            }
            CheckoutEvent::PaymentRefunded {
                charge_id,
                refund_id,
            } => Ok(vec![
                self.payment_refunded(event, hold_id, charge_id, refund_id)
                    .await?,
            ]),
            // A booking undone because its payment could not be captured:
            // cancelled, nothing charged (an order's is no booking's).
            CheckoutEvent::BookingReversed { booking_id }
                if types.contains(&WebhookEventType::BookingCancelled)
                    && booking_id.0 != hold_id.0 =>
            {
                Ok(vec![
                    self.booking_reversed(event, hold_id, booking_id).await?,
                ])
            }
            _ => Ok(Vec::new()),
        }
    }

    /// An order's event: the order as of it (and, for a cancellation, its
    /// refund), if `types` asks for `event_type`. The subject is the order
    /// and the event's sequence: one delivery per confirmation and per
    /// cancellation.
    async fn order_event(
        &self,
        event: &LogEvent,
        types: &[WebhookEventType],
        event_type: WebhookEventType,
        refund: Option<Value>,
    ) -> Result<Vec<Found>, StoreError> {
        if !types.contains(&event_type) {
            return Ok(Vec::new());
        }
        let order_id = OrderId(
            event
                .aggregate_id
                .parse::<uuid::Uuid>()
                .map_err(|e| corrupt(event, e))?,
        );
        let sequence = usize::try_from(event.sequence).map_err(|e| corrupt(event, e))?;
        let order = self
            .checkout
            .order_at(order_id, sequence)
            .await
            .map_err(from_checkout)?;
        let mut data = to_value(event, &order)?;
        if let Some(refund) = refund {
            data["refund"] = refund;
        }
        Ok(vec![(
            event_type,
            format!("{order_id}:{}", event.sequence),
            data,
        )])
    }

    /// A booking cancelled: the booking and the refund of its charge, those
    /// of the two `types` asks for.
    async fn booking_cancelled(
        &self,
        event: &LogEvent,
        types: &[WebhookEventType],
        hold_id: HoldId,
        booking_id: BookingId,
        refund_id: String,
    ) -> Result<Vec<Found>, StoreError> {
        let row = self.checkout_row(event, &hold_id).await?;
        let charge_id = row.charge_id.unwrap_or_default();
        let amount_cents = row.amount_cents.unwrap_or_default();
        let mut found = Vec::new();
        if types.contains(&WebhookEventType::BookingCancelled) {
            let view = self
                .booking_view(
                    event,
                    &hold_id,
                    booking_id,
                    &charge_id,
                    amount_cents,
                    BookingStatus::Cancelled,
                )
                .await?;
            found.push((
                WebhookEventType::BookingCancelled,
                booking_id.to_string(),
                view,
            ));
        }
        if types.contains(&WebhookEventType::RefundIssued) {
            let refund = RefundView {
                refund_id: refund_id.clone(),
                charge_id,
                hold_id,
                booking_id: Some(booking_id),
                amount_cents,
                reason: "booking_cancelled".into(),
            };
            found.push((
                WebhookEventType::RefundIssued,
                refund_id,
                to_value(event, &refund)?,
            ));
        }
        Ok(found)
    }

    /// A charge refunded without a booking to cancel (it outlived its hold).
    async fn payment_refunded(
        &self,
        event: &LogEvent,
        hold_id: HoldId,
        charge_id: String,
        refund_id: String,
    ) -> Result<Found, StoreError> {
        let row = self.checkout_row(event, &hold_id).await?;
        let refund = RefundView {
            refund_id: refund_id.clone(),
            charge_id,
            hold_id,
            booking_id: None,
            amount_cents: row.amount_cents.unwrap_or_default(),
            reason: row.refund_reason.unwrap_or_else(|| "hold_expired".into()),
        };
        Ok((
            WebhookEventType::RefundIssued,
            refund_id,
            to_value(event, &refund)?,
        ))
    }

    /// A booking undone (its payment could not be captured), shown as
    /// cancelled.
    async fn booking_reversed(
        &self,
        event: &LogEvent,
        hold_id: HoldId,
        booking_id: BookingId,
    ) -> Result<Found, StoreError> {
        let row = self.checkout_row(event, &hold_id).await?;
        let view = self
            .booking_view(
                event,
                &hold_id,
                booking_id,
                &row.charge_id.unwrap_or_default(),
                row.amount_cents.unwrap_or_default(),
                BookingStatus::Undone,
            )
            .await?;
        Ok((
            WebhookEventType::BookingCancelled,
            booking_id.to_string(),
            view,
        ))
    }

    /// `waitlist.offered`: the entry (`{show_id}.{uuid}`), its buyer and
    /// the offer's hold as the API shows it.
    async fn waitlist_offered(&self, event: &LogEvent) -> Result<Found, StoreError> {
        let WaitlistEvent::EntryOffered {
            entry_id,
            hold_id,
            buyer,
            ..
        } = decode(event)?
        else {
            return Err(corrupt(event, "not an offer"));
        };
        let mut hold = self
            .holds
            .view_any(&hold_id)
            .await
            .map_err(from_hold)?
            .ok_or_else(|| corrupt(event, "the offer's hold is missing"))?;
        hold.offer = true;
        let entry = format!("{}.{entry_id}", event.aggregate_id);
        let data = json!({
            "entry_id": entry,
            "show_id": event.aggregate_id,
            "buyer": buyer,
            "hold": to_value(event, &hold)?,
        });
        Ok((WebhookEventType::WaitlistOffered, entry, data))
    }

    /// What a ticket's event gives: `ticket.transferred` (from, to, the
    /// new version) with `ticket.revoked` of the code it replaces,
    /// `ticket.revoked` (its line cancelled: the version revoked),
    /// `ticket.checked_in` (an admission: the gate, the instant, online or
    /// offline), each with the ticket as the API shows it now.
    async fn ticket_data(
        &self,
        event: &LogEvent,
        types: &[WebhookEventType],
    ) -> Result<Vec<Found>, StoreError> {
        use WebhookEventType as W;
        let told: Vec<(WebhookEventType, Value)> = match decode::<TicketEvent>(event)? {
            TicketEvent::TicketTransferred {
                from, to, version, ..
            } => vec![
                (
                    W::TicketTransferred,
                    json!({"from": from, "to": to, "version": version}),
                ),
                (
                    W::TicketRevoked,
                    json!({"version": version.saturating_sub(1)}),
                ),
            ],
            TicketEvent::TicketRevoked { version } => {
                vec![(W::TicketRevoked, json!({"version": version}))]
            }
            TicketEvent::TicketScanned { scan } if scan.outcome == Outcome::Admitted => vec![(
                W::TicketCheckedIn,
                json!({"gate": scan.gate, "at": scan.scanned_at, "nonce": scan.nonce,
                       "mode": if scan.mode == Mode::Online { "online" } else { "offline" }}),
            )],
            _ => Vec::new(),
        };
        let told: Vec<_> = told
            .into_iter()
            .filter(|(t, _)| types.contains(t))
            .collect();
        if told.is_empty() {
            return Ok(Vec::new());
        }
        let ticket = ticket_of(event)?;
        let views = self
            .tickets
            .views(std::slice::from_ref(&ticket))
            .await
            .map_err(from_ticket)?;
        let view = match views.first() {
            Some(view) => to_value(event, view)?,
            None => Value::Null,
        };
        let subject = format!("{ticket}:{}", event.sequence);
        Ok(told
            .into_iter()
            .map(|(event_type, mut data)| {
                data["ticket"] = view.clone();
                (event_type, subject.clone(), data)
            })
            .collect())
    }

    /// `hold.expired`: the hold as the API shows it.
    async fn hold_expired(&self, event: &LogEvent, hold_id: HoldId) -> Result<Found, StoreError> {
        let view = self
            .holds
            .view_any(&hold_id)
            .await
            .map_err(from_hold)?
            .ok_or_else(|| corrupt(event, "the hold is missing"))?;
        Ok((
            WebhookEventType::HoldExpired,
            hold_id.to_string(),
            to_value(event, &view)?,
        ))
    }

    /// The checkout row of the hold: a checkout event without one is a
    /// corrupt read model.
    async fn checkout_row(
        &self,
        event: &LogEvent,
        hold_id: &HoldId,
    ) -> Result<CheckoutRow, StoreError> {
        self.checkouts
            .checkout_by_hold(hold_id)
            .await?
            .ok_or_else(|| corrupt(event, "no checkout row"))
    }

    /// The booking as the API shows it, in `status`, with its charge.
    async fn booking_view(
        &self,
        event: &LogEvent,
        hold_id: &HoldId,
        booking_id: BookingId,
        charge_id: &str,
        amount_cents: i64,
        status: BookingStatus,
    ) -> Result<Value, StoreError> {
        let view = self
            .checkout
            .booking_at_event(hold_id, booking_id, charge_id, amount_cents, status)
            .await
            .map_err(from_checkout)?;
        to_value(event, &view)
    }
}

/// The hold whose expiry a seat's or a pool shard's event records, if it
/// records one.
fn expired_hold(event: &LogEvent) -> Result<Option<HoldId>, StoreError> {
    let hold_id = if event.aggregate_type == Seat::TYPE {
        match decode::<SeatEvent>(event)? {
            SeatEvent::HoldExpired { hold_id } => Some(hold_id),
            _ => None,
        }
    } else if event.aggregate_type == PoolShard::TYPE {
        match decode::<PoolEvent>(event)? {
            PoolEvent::PoolHoldExpired { hold_id } => Some(hold_id),
            _ => None,
        }
    } else {
        None
    };
    Ok(hold_id)
}

/// `{"type", "timestamp", "data"}`; the timestamp is when the event was
/// recorded (RFC 3339 UTC).
fn body(event_type: WebhookEventType, recorded_at_us: i64, data: Value) -> String {
    let timestamp = from_micros(recorded_at_us)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default();
    json!({"type": event_type.as_str(), "timestamp": timestamp, "data": data}).to_string()
}
