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
//!
//! Expiry is decided at read time, without an event; `hold.expired` follows
//! the expiry the sweeper (or a later command) records, so it comes up to
//! a sweeper interval after the hold's `expires_at`. A hold of several
//! seats records one expiry per seat: the subject (`hold.expired:<hold
//! id>`) makes it one delivery per endpoint, from the first of them.

use std::sync::Arc;

use cqrs_es::Aggregate;
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{BookingId, HoldId};
use domain::pool::{PoolEvent, PoolShard};
use domain::seat::{Seat, SeatEvent};
use projections::time::from_micros;
use serde::Serialize;
use serde_json::{json, Value};

use crate::command::checkout::{BookingStatus, CheckoutError, CheckoutService};
use crate::command::holds::{HoldError, HoldService};
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
        (kind, "CheckoutCompleted") if kind == Checkout::TYPE => &[BookingConfirmed],
        (kind, "CheckoutCancelled") if kind == Checkout::TYPE => &[BookingCancelled, RefundIssued],
        (kind, "PaymentRefunded") if kind == Checkout::TYPE => &[RefundIssued],
        (kind, "BookingReversed") if kind == Checkout::TYPE => &[BookingCancelled],
        (kind, "HoldExpired") if kind == Seat::TYPE => &[HoldExpired],
        (kind, "PoolHoldExpired") if kind == PoolShard::TYPE => &[HoldExpired],
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

fn from_hold(error: HoldError) -> StoreError {
    match error {
        HoldError::Store(e) => e,
        other => StoreError::Corrupt(other.to_string()),
    }
}

pub struct Payloads {
    checkouts: Checkouts,
    checkout: Arc<CheckoutService>,
    holds: Arc<HoldService>,
}

impl Payloads {
    pub fn new(
        checkouts: Checkouts,
        checkout: Arc<CheckoutService>,
        holds: Arc<HoldService>,
    ) -> Self {
        Self {
            checkouts,
            checkout,
            holds,
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
    ) -> Result<Vec<(WebhookEventType, String, Value)>, StoreError> {
        let mut found = Vec::new();
        if event.aggregate_type == Checkout::TYPE {
            let hold_id: HoldId = event
                .aggregate_id
                .parse::<uuid::Uuid>()
                .map(HoldId)
                .map_err(|e| corrupt(event, e))?;
            match decode::<CheckoutEvent>(event)? {
                CheckoutEvent::CheckoutCompleted {
                    booking_id,
                    charge_id,
                    amount_cents,
                } => {
                    let view = self
                        .checkout
                        .booking_at_event(
                            &hold_id,
                            booking_id,
                            &charge_id,
                            amount_cents,
                            BookingStatus::Confirmed,
                        )
                        .await
                        .map_err(from_checkout)?;
                    found.push((
                        WebhookEventType::BookingConfirmed,
                        booking_id.to_string(),
                        to_value(event, &view)?,
                    ));
                }
                CheckoutEvent::CheckoutCancelled {
                    booking_id,
                    refund_id,
                } => {
                    let row = self
                        .checkouts
                        .checkout_by_hold(&hold_id)
                        .await?
                        .ok_or_else(|| corrupt(event, "no checkout row"))?;
                    let charge_id = row.charge_id.unwrap_or_default();
                    let amount_cents = row.amount_cents.unwrap_or_default();
                    if types.contains(&WebhookEventType::BookingCancelled) {
                        let view = self
                            .checkout
                            .booking_at_event(
                                &hold_id,
                                booking_id,
                                &charge_id,
                                amount_cents,
                                BookingStatus::Cancelled,
                            )
                            .await
                            .map_err(from_checkout)?;
                        found.push((
                            WebhookEventType::BookingCancelled,
                            booking_id.to_string(),
                            to_value(event, &view)?,
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
                }
                CheckoutEvent::PaymentRefunded {
                    charge_id,
                    refund_id,
                } => {
                    let row = self
                        .checkouts
                        .checkout_by_hold(&hold_id)
                        .await?
                        .ok_or_else(|| corrupt(event, "no checkout row"))?;
                    let refund = RefundView {
                        refund_id: refund_id.clone(),
                        charge_id,
                        hold_id,
                        booking_id: None,
                        amount_cents: row.amount_cents.unwrap_or_default(),
                        reason: row.refund_reason.unwrap_or_else(|| "hold_expired".into()),
                    };
                    found.push((
                        WebhookEventType::RefundIssued,
                        refund_id,
                        to_value(event, &refund)?,
                    ));
                }
                // A booking undone because its payment could not be
                // captured: cancelled, nothing charged.
                CheckoutEvent::BookingReversed { booking_id }
                    if types.contains(&WebhookEventType::BookingCancelled) =>
                {
                    let row = self
                        .checkouts
                        .checkout_by_hold(&hold_id)
                        .await?
                        .ok_or_else(|| corrupt(event, "no checkout row"))?;
                    let view = self
                        .checkout
                        .booking_at_event(
                            &hold_id,
                            booking_id,
                            &row.charge_id.unwrap_or_default(),
                            row.amount_cents.unwrap_or_default(),
                            BookingStatus::Undone,
                        )
                        .await
                        .map_err(from_checkout)?;
                    found.push((
                        WebhookEventType::BookingCancelled,
                        booking_id.to_string(),
                        to_value(event, &view)?,
                    ));
                }
                _ => {}
            }
            return Ok(found);
        }
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
        if let Some(hold_id) = hold_id {
            let view = self
                .holds
                .view_any(&hold_id)
                .await
                .map_err(from_hold)?
                .ok_or_else(|| corrupt(event, "the hold is missing"))?;
            found.push((
                WebhookEventType::HoldExpired,
                hold_id.to_string(),
                to_value(event, &view)?,
            ));
        }
        Ok(found)
    }
}

/// `{"type", "timestamp", "data"}`; the timestamp is when the event was
/// recorded (RFC 3339 UTC).
fn body(event_type: WebhookEventType, recorded_at_us: i64, data: Value) -> String {
    let timestamp = from_micros(recorded_at_us)
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .unwrap_or_default();
    json!({"type": event_type.as_str(), "timestamp": timestamp, "data": data}).to_string()
}
