//! Checkout: payment coupled to the hold (DESIGN.md §5).
//!
//! A purchase is driven through the Checkout stream's phases, one recorded
//! step at a time: request (recorded before the charge), charge, capture
//! (recorded after), then either convert every seat and complete in one
//! transaction, or, if the hold was lost meanwhile, request and record a
//! refund. Each step is appended at the stream's version, so two processes
//! driving one checkout (a retry on another instance, the recovery worker)
//! cannot both act on the same step; and every provider call carries an
//! idempotency key derived from the stream, so repeating a step after a
//! crash reaches the same charge or refund.
//!
//! [`CheckoutService::recover`] drives a checkout left half way (found by
//! the recovery worker) with the same code, minus starting a new attempt.

use std::sync::Arc;
use std::time::Duration;

use domain::checkout::{decide, Checkout, CheckoutCommand, Phase, RefundReason};
use domain::ids::{BookingId, BuyerId, HoldId, ShowId};
use projections::holds::{HoldState, HoldStatus};
use projections::time::from_micros;
use serde::Serialize;

use crate::auth::{Actor, Role};
use crate::batch::push_checkout;
use crate::clock::Clock;
use crate::holds::RequestContext;
use crate::inventory::{units_of, HoldUnits, Inventory, Refusal, Unit};
use crate::payment::{ChargeRequest, PaymentError, PaymentProvider};
use crate::shows::ShowCatalog;
use crate::store::{AppendBatch, AppendOutcome, CheckoutRecord, HoldRecord, Store, StoreError};
use crate::streams::{
    append_locked, append_tracked, refresh_all, LockedStream, StreamCache, Tracked,
};

/// How long one call to the payment provider may take before its outcome is
/// treated as unknown. The attempt then stays open: a retry, or the recovery
/// worker, repeats it with the same idempotency key.
pub const PAYMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Steps one request may drive a checkout through. A purchase needs at most
/// five (request, capture, convert, refund request, refund); the rest absorb
/// conflicts with another instance driving the same checkout.
pub const MAX_DRIVE_STEPS: usize = 16;

/// The actor recorded on events the recovery worker appends.
pub const RECOVERY_ACTOR: &str = "system:recovery";

#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error("hold not found")]
    HoldNotFound,
    #[error("booking not found")]
    BookingNotFound,
    #[error("not yours")]
    Forbidden,
    #[error("the hold has expired")]
    HoldExpired { refunded: bool },
    #[error("the hold was released")]
    HoldReleased { refunded: bool },
    #[error("payment declined: {0}")]
    PaymentDeclined(String),
    #[error("payment provider unavailable: {0}")]
    PaymentUnavailable(String),
    #[error("{0}")]
    Invalid(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A booking as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BookingView {
    #[schema(value_type = uuid::Uuid)]
    pub booking_id: BookingId,
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    pub show_id: String,
    pub seats: Vec<String>,
    pub pool_id: Option<String>,
    pub quantity: Option<u32>,
    pub amount_cents: i64,
    pub charge_id: String,
    /// `confirmed` or `cancelled`.
    pub status: &'static str,
    pub refunded: bool,
}

#[derive(Debug)]
pub enum Purchased {
    /// This request completed the purchase (201).
    New(BookingView),
    /// An earlier or concurrent request did (200): the same booking.
    Existing(BookingView),
}

/// What recovery did with one checkout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovered {
    Completed,
    Refunded,
    Cancelled,
    /// The payment attempt ended without a charge.
    Closed,
    /// Another request in this process is driving it right now.
    Busy,
    /// The provider could not be reached; the next run tries again.
    Pending,
}

pub struct CheckoutService {
    store: Arc<Store>,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    payments: Arc<dyn PaymentProvider>,
    inventory: Arc<Inventory>,
    checkouts: StreamCache<Checkout>,
}

/// The last step of a checkout, on its units.
enum Finish {
    Convert,
    Cancel { refund_id: String },
}

/// A request to start a payment attempt, when the checkout is idle.
struct Attempt {
    show_id: ShowId,
    buyer: BuyerId,
    payment_method: String,
    amount_cents: i64,
}

impl CheckoutService {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        payments: Arc<dyn PaymentProvider>,
        inventory: Arc<Inventory>,
    ) -> Self {
        Self {
            store,
            catalog,
            clock,
            payments,
            inventory,
            checkouts: StreamCache::default(),
        }
    }

    async fn hold_record(
        &self,
        actor: &Actor,
        hold_id: HoldId,
    ) -> Result<HoldRecord, CheckoutError> {
        let record = self
            .store
            .hold(&hold_id.to_string())
            .await?
            .ok_or(CheckoutError::HoldNotFound)?;
        if !actor.may_act_for(&record.buyer) {
            return Err(CheckoutError::Forbidden);
        }
        Ok(record)
    }

    /// `POST /v1/holds/{id}/purchase`.
    pub async fn purchase(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        payment_method: String,
    ) -> Result<Purchased, CheckoutError> {
        self.payments
            .check_method(&payment_method)
            .map_err(|e| CheckoutError::Invalid(e.to_string()))?;
        let record = self.hold_record(&ctx.actor, hold_id).await?;
        let show_id = corrupt_unless(ShowId::parse(&record.show_id), &record.hold_id)?;
        let entry = self
            .catalog
            .get(&self.store, &show_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("show of hold {hold_id} is missing")))?;
        let amount_cents = match units_of(&record, &entry.show)? {
            HoldUnits::Seats(units) => units
                .iter()
                .filter_map(|(_, key)| entry.show.seat(&key.seat_id))
                .map(|(_, spec)| spec.price_cents)
                .sum(),
            HoldUnits::Pool(units) => {
                let price = units
                    .first()
                    .and_then(|(_, key)| entry.show.pool(&key.pool_id))
                    .map_or(0, |pool| pool.price_cents);
                price * i64::from(record.quantity().unwrap_or(0))
            }
        };
        let buyer = corrupt_unless(BuyerId::parse(&record.buyer), &record.hold_id)?;
        let attempt = Attempt {
            show_id,
            buyer,
            payment_method,
            amount_cents,
        };
        let mut locked = self.checkouts.lock(&[hold_id.to_string()]).await;
        let completed_here = self
            .drive(ctx, &record, &mut locked[0], Some(&attempt))
            .await?;
        let view = self.answer(&record, locked[0].aggregate()).await?;
        Ok(if completed_here {
            Purchased::New(view)
        } else {
            Purchased::Existing(view)
        })
    }

    /// Drives the checkout until it settles. Returns whether this drive
    /// appended the completion. With `attempt`, an idle checkout starts a
    /// payment (after checking the hold is still valid); without, it stops.
    async fn drive(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut LockedStream<Checkout>,
        attempt: Option<&Attempt>,
    ) -> Result<bool, CheckoutError> {
        let hold_id = record_hold_id(record)?;
        let mut completed_here = false;
        for _ in 0..MAX_DRIVE_STEPS {
            refresh_all(&self.store, std::slice::from_mut(checkout)).await?;
            let phase = checkout.aggregate().phase.clone();
            match phase {
                Phase::Idle => {
                    // Without a request to start an attempt (recovery, cancel) there
                    // is nothing to finish.
                    let Some(attempt) = attempt else {
                        return Ok(completed_here);
                    };
                    self.check_hold_before_charging(record)?;
                    let command = CheckoutCommand::RequestPurchase {
                        hold_id,
                        show_id: attempt.show_id.clone(),
                        buyer: attempt.buyer.clone(),
                        payment_method: attempt.payment_method.clone(),
                        amount_cents: attempt.amount_cents,
                    };
                    self.record(ctx, checkout, &command).await?;
                }
                Phase::Requested {
                    attempt: number,
                    idempotency_key,
                    payment_method,
                    amount_cents,
                } => {
                    let request = ChargeRequest {
                        idempotency_key: &idempotency_key,
                        amount_cents,
                        payment_method: &payment_method,
                    };
                    let started = std::time::Instant::now();
                    let outcome =
                        tokio::time::timeout(PAYMENT_TIMEOUT, self.payments.charge(request))
                            .await
                            .unwrap_or_else(|_| {
                                Err(PaymentError::Indeterminate(format!(
                                    "no answer within {PAYMENT_TIMEOUT:?}"
                                )))
                            });
                    let label = match &outcome {
                        Ok(_) => "captured",
                        Err(PaymentError::Declined(_)) => "declined",
                        Err(PaymentError::Unavailable(_)) => "unavailable",
                        Err(PaymentError::Indeterminate(_)) => "unknown",
                        Err(PaymentError::Invalid(_)) => "invalid",
                    };
                    metrics::histogram!("payment_latency_seconds", "outcome" => label)
                        .record(started.elapsed().as_secs_f64());
                    match outcome {
                        Ok(charge) => {
                            let command = CheckoutCommand::RecordCapture {
                                attempt: number,
                                charge_id: charge.charge_id,
                            };
                            self.record(ctx, checkout, &command).await?;
                        }
                        Err(PaymentError::Declined(reason)) => {
                            let command = CheckoutCommand::RecordDecline {
                                attempt: number,
                                reason: reason.clone(),
                            };
                            if self.record(ctx, checkout, &command).await? {
                                return Err(CheckoutError::PaymentDeclined(reason));
                            }
                        }
                        Err(PaymentError::Unavailable(reason) | PaymentError::Invalid(reason)) => {
                            let command = CheckoutCommand::RecordFailure {
                                attempt: number,
                                reason: reason.clone(),
                            };
                            if self.record(ctx, checkout, &command).await? {
                                return Err(CheckoutError::PaymentUnavailable(reason));
                            }
                        }
                        Err(PaymentError::Indeterminate(reason)) => {
                            tracing::warn!(%hold_id, %reason, "payment outcome unknown; the attempt stays open");
                            return Err(CheckoutError::PaymentUnavailable(reason));
                        }
                    }
                }
                Phase::Captured { .. } => {
                    if self.convert(ctx, record, checkout).await? {
                        completed_here = true;
                    }
                }
                Phase::RefundRequested { charge_id, .. } => {
                    let refund_id = self.refund(&charge_id).await?;
                    let command = CheckoutCommand::RecordRefund { refund_id };
                    self.record(ctx, checkout, &command).await?;
                }
                Phase::CancelRequested { charge_id, .. } => {
                    let refund_id = self.refund(&charge_id).await?;
                    self.free_units(ctx, record, refund_id, checkout).await?;
                }
                Phase::Completed { .. } | Phase::Refunded { .. } | Phase::Cancelled { .. } => {
                    return Ok(completed_here);
                }
            }
        }
        Err(CheckoutError::Busy)
    }

    /// A purchase of a hold that is no longer valid charges nothing.
    fn check_hold_before_charging(&self, record: &HoldRecord) -> Result<(), CheckoutError> {
        let expires_at = from_micros(record.expires_at_us)
            .ok_or_else(|| StoreError::Corrupt(format!("hold {} expiry", record.hold_id)))?;
        match HoldStatus::at(record.state, expires_at, self.clock.now()) {
            HoldStatus::Held => Ok(()),
            HoldStatus::Expired => Err(CheckoutError::HoldExpired { refunded: false }),
            HoldStatus::Released => Err(CheckoutError::HoldReleased { refunded: false }),
            // Converted means the checkout completed, which the drive sees first.
            HoldStatus::Converted => Err(CheckoutError::Busy),
        }
    }

    /// Decides and appends one checkout command on its own. Returns whether it
    /// was appended (false: another process moved the stream; drive again).
    async fn record(
        &self,
        ctx: &RequestContext,
        checkout: &mut LockedStream<Checkout>,
        command: &CheckoutCommand,
    ) -> Result<bool, CheckoutError> {
        let events = match decide(checkout.aggregate(), command) {
            Ok(events) => events,
            Err(e) => {
                // The stream moved under us; the next step reads the phase again.
                tracing::debug!(error = %e, "checkout command no longer applies");
                checkout.invalidate();
                return Ok(false);
            }
        };
        if events.is_empty() {
            return Ok(true);
        }
        let mut batch = AppendBatch::new(self.clock.now());
        push_checkout(&mut batch, &checkout.view(), &events, &ctx.metadata())?;
        let outcome = append_locked(&self.store, &batch, std::slice::from_mut(checkout)).await?;
        if outcome == AppendOutcome::Appended {
            checkout.appended(events);
            return Ok(true);
        }
        Ok(false)
    }

    async fn refund(&self, charge_id: &str) -> Result<String, CheckoutError> {
        let key = Checkout::refund_key(charge_id);
        let refund = tokio::time::timeout(PAYMENT_TIMEOUT, self.payments.refund(charge_id, &key))
            .await
            .map_err(|_| CheckoutError::PaymentUnavailable("refund timed out".into()))?
            .map_err(|e| CheckoutError::PaymentUnavailable(e.to_string()))?;
        tracing::warn!(%charge_id, refund_id = %refund.refund_id, "charge refunded");
        metrics::counter!("refunds_total").increment(1);
        Ok(refund.refund_id)
    }

    /// The units of the hold, from its record and its show.
    async fn hold_units(&self, record: &HoldRecord) -> Result<HoldUnits, CheckoutError> {
        let show_id = corrupt_unless(ShowId::parse(&record.show_id), &record.hold_id)?;
        let entry = self
            .catalog
            .get(&self.store, &show_id)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!("show of hold {} is missing", record.hold_id))
            })?;
        Ok(units_of(record, &entry.show)?)
    }

    /// Converts every unit of the hold and completes the checkout in one
    /// append; or, if any unit refuses, asks for a refund. Returns whether
    /// the completion was appended by this call.
    async fn convert(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        checkout: &mut LockedStream<Checkout>,
    ) -> Result<bool, CheckoutError> {
        let hold_id = record_hold_id(record)?;
        let inventory = &self.inventory;
        match self.hold_units(record).await? {
            HoldUnits::Seats(units) => {
                self.finish_units(
                    ctx,
                    hold_id,
                    checkout,
                    &inventory.seats,
                    &units,
                    Finish::Convert,
                )
                .await
            }
            HoldUnits::Pool(units) => {
                self.finish_units(
                    ctx,
                    hold_id,
                    checkout,
                    &inventory.shards,
                    &units,
                    Finish::Convert,
                )
                .await
            }
        }
    }

    /// Frees the units of a cancelled booking and records its refund, in one append.
    async fn free_units(
        &self,
        ctx: &RequestContext,
        record: &HoldRecord,
        refund_id: String,
        checkout: &mut LockedStream<Checkout>,
    ) -> Result<bool, CheckoutError> {
        let hold_id = record_hold_id(record)?;
        let inventory = &self.inventory;
        let finish = Finish::Cancel { refund_id };
        match self.hold_units(record).await? {
            HoldUnits::Seats(units) => {
                self.finish_units(ctx, hold_id, checkout, &inventory.seats, &units, finish)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.finish_units(ctx, hold_id, checkout, &inventory.shards, &units, finish)
                    .await
            }
        }
    }

    /// The last step of a purchase or a cancellation: every unit of the hold
    /// and the checkout, appended together. For a purchase, a unit that no
    /// longer holds the hold turns the step into a refund request. Returns
    /// whether this call appended the step.
    async fn finish_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        checkout: &mut LockedStream<Checkout>,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        finish: Finish,
    ) -> Result<bool, CheckoutError> {
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        let mut locked = cache.lock(&ids).await;
        refresh_all(&self.store, &mut locked).await?;
        let now = self.clock.now();
        let booking_id = Checkout::booking_id_for(hold_id);
        let (decided, command) = match finish {
            Finish::Convert => {
                let mut decided = Vec::with_capacity(locked.len());
                for (stream, (_, key)) in locked.iter().zip(units) {
                    match stream.aggregate().convert(key, hold_id, booking_id, now) {
                        Ok(events) => decided.push(events),
                        Err(refusal) => {
                            drop(locked);
                            let reason = self.refund_reason(hold_id, refusal).await?;
                            tracing::warn!(%hold_id, ?reason, "payment finished after the hold was lost; refunding");
                            let command = CheckoutCommand::RequestRefund { reason };
                            self.record(ctx, checkout, &command).await?;
                            return Ok(false);
                        }
                    }
                }
                (decided, CheckoutCommand::Complete)
            }
            Finish::Cancel { refund_id } => {
                let decided = locked
                    .iter()
                    .zip(units)
                    .map(|(stream, (_, key))| stream.aggregate().cancel(key, booking_id, now))
                    .collect();
                (decided, CheckoutCommand::RecordRefund { refund_id })
            }
        };
        let Ok(recorded) = decide(checkout.aggregate(), &command) else {
            // The checkout moved on meanwhile; the drive reads it again.
            checkout.invalidate();
            return Ok(false);
        };
        let metadata = ctx.metadata();
        let mut batch = AppendBatch::new(now);
        for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
            U::push(&mut batch, key, &stream.view(), events, &metadata)?;
        }
        push_checkout(&mut batch, &checkout.view(), &recorded, &metadata)?;
        let mut tracked: Vec<&mut (dyn Tracked + Send)> = locked
            .iter_mut()
            .map(|s| s as &mut (dyn Tracked + Send))
            .collect();
        tracked.push(checkout);
        if append_tracked(&self.store, &batch, tracked).await? != AppendOutcome::Appended {
            return Ok(false);
        }
        for (stream, events) in locked.iter_mut().zip(decided) {
            stream.appended(events);
        }
        checkout.appended(recorded);
        Ok(true)
    }

    /// Why the charge goes back: the buyer released the hold, or it expired
    /// (or lost its seats, which only happens after expiry).
    async fn refund_reason(
        &self,
        hold_id: HoldId,
        refusal: Refusal,
    ) -> Result<RefundReason, CheckoutError> {
        let released = matches!(
            self.store
                .hold(&hold_id.to_string())
                .await?
                .map(|r| r.state),
            Some(HoldState::Released)
        );
        Ok(if released && refusal == Refusal::Lost {
            RefundReason::HoldReleased
        } else {
            RefundReason::HoldExpired
        })
    }

    /// The answer for a settled checkout: the booking, or why there is none.
    async fn answer(
        &self,
        record: &HoldRecord,
        checkout: &Checkout,
    ) -> Result<BookingView, CheckoutError> {
        match &checkout.phase {
            Phase::Completed {
                booking_id,
                charge_id,
                amount_cents,
            }
            | Phase::CancelRequested {
                booking_id,
                charge_id,
                amount_cents,
            } => {
                self.booking_view(record, *booking_id, charge_id, *amount_cents, false)
                    .await
            }
            Phase::Cancelled {
                booking_id,
                charge_id,
                amount_cents,
                ..
            } => {
                self.booking_view(record, *booking_id, charge_id, *amount_cents, true)
                    .await
            }
            Phase::Refunded { reason, .. } => Err(match reason {
                RefundReason::HoldExpired => CheckoutError::HoldExpired { refunded: true },
                RefundReason::HoldReleased => CheckoutError::HoldReleased { refunded: true },
            }),
            Phase::Idle
            | Phase::Requested { .. }
            | Phase::Captured { .. }
            | Phase::RefundRequested { .. } => Err(CheckoutError::Busy),
        }
    }

    async fn booking_view(
        &self,
        record: &HoldRecord,
        booking_id: BookingId,
        charge_id: &str,
        amount_cents: i64,
        cancelled: bool,
    ) -> Result<BookingView, CheckoutError> {
        let mut seats = record.seats.clone();
        if let Ok(show_id) = ShowId::parse(&record.show_id) {
            if let Some(entry) = self.catalog.get(&self.store, &show_id).await? {
                entry.sort_seats(&mut seats);
            }
        }
        Ok(BookingView {
            booking_id,
            hold_id: record_hold_id(record)?,
            quantity: record.quantity(),
            pool_id: record.pool.as_ref().map(|(pool_id, _)| pool_id.clone()),
            show_id: record.show_id.clone(),
            seats,
            amount_cents,
            charge_id: charge_id.to_owned(),
            status: if cancelled { "cancelled" } else { "confirmed" },
            refunded: cancelled,
        })
    }

    async fn booking_record(
        &self,
        actor: &Actor,
        booking_id: BookingId,
    ) -> Result<CheckoutRecord, CheckoutError> {
        let record = self
            .store
            .checkout_by_booking(&booking_id.to_string())
            .await?
            .ok_or(CheckoutError::BookingNotFound)?;
        if !actor.may_act_for(&record.buyer) {
            return Err(CheckoutError::Forbidden);
        }
        Ok(record)
    }

    async fn stored_hold(&self, hold_id: &str) -> Result<HoldRecord, CheckoutError> {
        Ok(self.store.hold(hold_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("hold {hold_id} of a checkout is missing"))
        })?)
    }

    /// `GET /v1/bookings/{id}`.
    pub async fn booking(
        &self,
        actor: &Actor,
        booking_id: BookingId,
    ) -> Result<BookingView, CheckoutError> {
        let checkout = self.booking_record(actor, booking_id).await?;
        let hold = self.stored_hold(&checkout.hold_id).await?;
        let charge_id = checkout.charge_id.unwrap_or_default();
        let amount_cents = checkout.amount_cents.unwrap_or_default();
        let cancelled = checkout.phase == "cancelled";
        self.booking_view(&hold, booking_id, &charge_id, amount_cents, cancelled)
            .await
    }

    /// `POST /v1/bookings/{id}/cancel`: refunds and frees the seats. Cancelling
    /// again answers the same cancelled booking.
    pub async fn cancel(
        &self,
        ctx: &RequestContext,
        booking_id: BookingId,
    ) -> Result<BookingView, CheckoutError> {
        let checkout = self.booking_record(&ctx.actor, booking_id).await?;
        let hold = self.stored_hold(&checkout.hold_id).await?;
        let mut locked = self
            .checkouts
            .lock(std::slice::from_ref(&checkout.hold_id))
            .await;
        refresh_all(&self.store, &mut locked).await?;
        self.record(ctx, &mut locked[0], &CheckoutCommand::RequestCancel)
            .await?;
        self.drive(ctx, &hold, &mut locked[0], None).await?;
        match &locked[0].aggregate().phase {
            Phase::Cancelled { .. } => self.answer(&hold, locked[0].aggregate()).await,
            _ => Err(CheckoutError::Busy),
        }
    }

    /// Finishes a checkout left half way, unless this process is driving it.
    pub async fn recover(&self, hold_id: HoldId) -> Result<Recovered, CheckoutError> {
        let Some(mut checkout) = self.checkouts.try_lock(&hold_id.to_string()) else {
            return Ok(Recovered::Busy);
        };
        let ctx = RequestContext {
            actor: Actor {
                id: corrupt_unless(BuyerId::parse(RECOVERY_ACTOR), RECOVERY_ACTOR)?,
                role: Role::Admin,
            },
            request_id: uuid::Uuid::new_v4().to_string(),
            idempotency_key: None,
        };
        let hold = self.stored_hold(&hold_id.to_string()).await?;
        match self.drive(&ctx, &hold, &mut checkout, None).await {
            Ok(_) => {}
            Err(CheckoutError::PaymentUnavailable(_)) => return Ok(Recovered::Pending),
            Err(CheckoutError::PaymentDeclined(_)) => return Ok(Recovered::Closed),
            Err(other) => return Err(other),
        }
        Ok(match checkout.aggregate().phase {
            Phase::Completed { .. } => Recovered::Completed,
            Phase::Refunded { .. } => Recovered::Refunded,
            Phase::Cancelled { .. } => Recovered::Cancelled,
            Phase::Idle => Recovered::Closed,
            _ => Recovered::Pending,
        })
    }
}

fn record_hold_id(record: &HoldRecord) -> Result<HoldId, StoreError> {
    corrupt_unless(record.hold_id.parse().map(HoldId), &record.hold_id)
}

fn corrupt_unless<T, E: std::fmt::Display>(
    value: Result<T, E>,
    what: &str,
) -> Result<T, StoreError> {
    value.map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

impl CheckoutService {
    /// Checkouts waiting on the payment provider, oldest first.
    pub async fn pending(&self, limit: i64) -> Result<Vec<HoldId>, CheckoutError> {
        let ids = self.store.pending_checkouts(limit).await?;
        ids.iter()
            .map(|id| Ok(HoldId(corrupt_unless(id.parse(), id)?)))
            .collect()
    }
}
