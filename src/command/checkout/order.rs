//! Orders: `POST /v1/orders` (several holds paid once), `GET
//! /v1/orders/{id}` and `POST /v1/orders/{id}/cancel` (lines cancelled and
//! refunded in part). An order is a checkout of its own, driven by the
//! same steps as a hold's purchase (`drive.rs`); its id is derived from
//! its holds, so a retry with the same holds, on any instance, is the same
//! order and the same payment.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use domain::checkout::{Checkout, CheckoutCommand, Phase};
use domain::ids::{CategoryId, HoldId, OrderId, PoolId, SeatId, ShowId, TicketType};
use domain::limits::MAX_HOLDS_PER_ORDER;
use domain::order::{BoxOfficeSale, LineId, Order, OrderLine, OrderTerms};
use serde::Serialize;

use super::{CheckoutError, CheckoutService, Driven, OrderSubject, Subject};
use crate::auth::Actor;
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::holds::hold_items;
use crate::payment::offline::offline_method;
use crate::store::{HoldRecord, StoreError};

/// An order as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OrderView {
    #[schema(value_type = uuid::Uuid)]
    pub order_id: OrderId,
    pub show_id: String,
    pub buyer: String,
    /// `confirmed`, `partially_cancelled` or `cancelled`.
    pub status: &'static str,
    pub amount_cents: i64,
    pub currency: String,
    pub charge_id: String,
    pub refunded_cents: i64,
    pub lines: Vec<WaitlistView>,
    /// One per cancellation, in the order they were made.
    pub refunds: Vec<RefundView>,
    /// A box-office sale: who sold it, how it was paid, the clerk's note
    /// (absent: paid online).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sale: Option<SaleView>,
    /// `offline` for a box-office sale: refunds are made at the counter,
    /// nothing is sent to a provider (absent: refunds go to the provider).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund: Option<&'static str>,
}

/// A box-office sale as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SaleView {
    pub sold_by: String,
    /// `cash`, `card_present`, `invoice` or `comp`.
    pub payment: &'static str,
    pub note: Option<String>,
}

impl SaleView {
    fn of(sale: &BoxOfficeSale) -> Self {
        Self {
            sold_by: sale.sold_by.to_string(),
            payment: sale.payment.as_str(),
            note: sale.note.clone(),
        }
    }
}

/// One line of an order: a seat, or one place of a pool.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WaitlistView {
    pub line_id: LineId,
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    pub seat_id: Option<String>,
    pub pool_id: Option<String>,
    pub category: Option<String>,
    pub ticket_type: String,
    pub price_cents: i64,
    /// `confirmed` or `cancelled`.
    pub status: &'static str,
}

/// The refund of one cancellation of lines.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RefundView {
    pub refund_id: String,
    pub amount_cents: i64,
    pub lines: Vec<LineId>,
}

/// An order waiting on its buyer (3-D Secure), as the API shows it (202).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct OrderActionView {
    #[schema(value_type = uuid::Uuid)]
    pub order_id: OrderId,
    /// `requires_action`.
    pub status: &'static str,
    pub payment_intent: String,
    pub client_secret: String,
    #[schema(value_type = Object)]
    pub next_action: serde_json::Value,
    /// The earliest expiry of the order's holds, extended while the buyer
    /// authenticates.
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug)]
pub enum Ordered {
    /// This request confirmed the order (201).
    New(OrderView),
    /// An earlier or concurrent request did (200).
    Existing(OrderView),
    /// The provider needs the buyer first (202).
    WaitingOnBuyer(OrderActionView),
}

impl OrderView {
    /// The order as a checkout records it, once it is paid.
    pub fn of(checkout: &Checkout, order: &Order, currency: String) -> Option<Self> {
        let (charge_id, status) = match &checkout.phase {
            Phase::Completed { charge_id, .. } | Phase::LinesCancelRequested { charge_id, .. } => {
                let status = if order.cancelled.is_empty() {
                    "confirmed"
                } else {
                    "partially_cancelled"
                };
                (charge_id, status)
            }
            Phase::Cancelled { charge_id, .. } => (charge_id, "cancelled"),
            _ => return None,
        };
        Some(Self {
            order_id: order.order_id(),
            show_id: checkout.show_id.as_ref()?.to_string(),
            buyer: checkout.buyer.as_ref()?.to_string(),
            status,
            amount_cents: order.terms.amount_cents(),
            currency,
            charge_id: charge_id.clone(),
            refunded_cents: order.refunded_cents(),
            lines: order
                .terms
                .lines
                .iter()
                .map(|l| WaitlistView::of(l, order.cancelled.contains(&l.line_id)))
                .collect(),
            refunds: order
                .refunds
                .iter()
                .map(|r| RefundView {
                    refund_id: r.refund_id.clone(),
                    amount_cents: r.amount_cents,
                    lines: r.lines.clone(),
                })
                .collect(),
            sale: order.terms.sale.as_ref().map(SaleView::of),
            refund: order.terms.sale.as_ref().map(|_| "offline"),
        })
    }
}

impl WaitlistView {
    fn of(line: &OrderLine, cancelled: bool) -> Self {
        Self {
            line_id: line.line_id,
            hold_id: line.hold_id,
            seat_id: line.seat_id.as_ref().map(SeatId::to_string),
            pool_id: line.pool_id.as_ref().map(PoolId::to_string),
            category: line.category.as_ref().map(CategoryId::to_string),
            ticket_type: line.ticket_type.to_string(),
            price_cents: line.price_cents,
            status: if cancelled { "cancelled" } else { "confirmed" },
        }
    }
}

/// An order's lines: one per seat and per pool place of each hold, in the
/// order the holds were named, priced as the holds' events priced them.
pub(super) fn lines_of(
    records: &[HoldRecord],
    entry: &CatalogEntry,
) -> Result<Vec<OrderLine>, StoreError> {
    let corrupt = |e: String| StoreError::Corrupt(format!("an order's line: {e}"));
    let mut lines = Vec::new();
    for record in records {
        for item in hold_items(record, entry) {
            let seat_id = item
                .seat_id
                .as_deref()
                .map(SeatId::parse)
                .transpose()
                .map_err(|e| corrupt(e.to_string()))?;
            let pool_id = item
                .pool_id
                .as_deref()
                .map(PoolId::parse)
                .transpose()
                .map_err(|e| corrupt(e.to_string()))?;
            let category = item
                .category
                .as_deref()
                .map(CategoryId::parse)
                .transpose()
                .map_err(|e| corrupt(e.to_string()))?;
            let ticket_type =
                TicketType::parse(&item.ticket_type).map_err(|e| corrupt(e.to_string()))?;
            for _ in 0..item.quantity {
                lines.push(OrderLine {
                    line_id: lines.len() as LineId + 1,
                    hold_id: record.hold_id,
                    seat_id: seat_id.clone(),
                    pool_id: pool_id.clone(),
                    category: category.clone(),
                    ticket_type: ticket_type.clone(),
                    price_cents: item.price_cents,
                });
            }
        }
    }
    Ok(lines)
}

/// The holds of an order as asked: 1..=MAX_HOLDS_PER_ORDER, none twice.
pub fn check_holds(holds: &[HoldId]) -> Result<(), CheckoutError> {
    if holds.is_empty() || holds.len() > MAX_HOLDS_PER_ORDER {
        return Err(CheckoutError::Invalid(format!(
            "holds must name 1..={MAX_HOLDS_PER_ORDER} holds"
        )));
    }
    if holds.iter().collect::<BTreeSet<_>>().len() != holds.len() {
        return Err(CheckoutError::Invalid(
            "holds must not name a hold twice".into(),
        ));
    }
    Ok(())
}

impl CheckoutService {
    /// `POST /v1/orders`.
    pub async fn place_order(
        &self,
        ctx: &RequestContext,
        holds: Vec<HoldId>,
        payment_method: String,
    ) -> Result<Ordered, CheckoutError> {
        check_holds(&holds)?;
        self.payments
            .check_method(&payment_method)
            .map_err(|e| CheckoutError::Invalid(format!("payment_method: {e}")))?;
        self.pay_order(ctx, holds, payment_method, None).await
    }

    /// A box-office sale: the order of `holds` (an admin's, placed for the
    /// buyer), paid at the counter as `sale` says, outside any provider.
    pub async fn place_box_office_order(
        &self,
        ctx: &RequestContext,
        holds: Vec<HoldId>,
        sale: BoxOfficeSale,
    ) -> Result<Ordered, CheckoutError> {
        check_holds(&holds)?;
        let payment_method = offline_method(sale.payment);
        self.pay_order(ctx, holds, payment_method, Some(sale)).await
    }

    /// The order of `holds`, paid with `payment_method` (checked): its
    /// terms fixed, then driven to its end.
    async fn pay_order(
        &self,
        ctx: &RequestContext,
        holds: Vec<HoldId>,
        payment_method: String,
        sale: Option<BoxOfficeSale>,
    ) -> Result<Ordered, CheckoutError> {
        let (records, entry) = self.order_holds(&ctx.actor, &holds).await?;
        let order_id = OrderId::for_holds(&holds);
        let terms = OrderTerms {
            order_id,
            holds: holds.clone(),
            lines: lines_of(&records, &entry)?,
            sale,
        };
        let buyer = records[0].buyer.clone();
        let request = CheckoutCommand::RequestOrder {
            terms,
            show_id: entry.show.show_id.clone(),
            buyer,
            payment_method,
            currency: entry.show.currency,
        };
        let subject = Subject::Order(OrderSubject {
            order_id,
            show_id: entry.show.show_id.clone(),
            holds,
        });
        let mut checkout = self.rounds.lock_checkout(subject.key()).await?;
        let completed_here = match self
            .drive(ctx, &subject, &mut checkout, Some(&request))
            .await?
        {
            Driven::Settled { completed_here } => completed_here,
            Driven::WaitingOnBuyer {
                payment_id,
                action,
                expires_at,
            } => {
                return Ok(Ordered::WaitingOnBuyer(OrderActionView {
                    order_id,
                    status: "requires_action",
                    payment_intent: payment_id,
                    client_secret: action.client_secret,
                    next_action: action.next_action,
                    expires_at,
                }))
            }
        };
        let view = self.order_answer(checkout.aggregate()).await?;
        Ok(if completed_here {
            Ordered::New(view)
        } else {
            Ordered::Existing(view)
        })
    }

    /// The holds of an order, each the actor's, all on one show.
    async fn order_holds(
        &self,
        actor: &Actor,
        holds: &[HoldId],
    ) -> Result<(Vec<HoldRecord>, std::sync::Arc<CatalogEntry>), CheckoutError> {
        let mut records: Vec<HoldRecord> = Vec::with_capacity(holds.len());
        for hold_id in holds {
            let record = self
                .records
                .hold(hold_id)
                .await?
                .ok_or(CheckoutError::HoldNotFound)?;
            if !actor.may_act_for(record.buyer.as_str()) {
                return Err(CheckoutError::Forbidden);
            }
            if let Some(first) = records.first() {
                if first.show_id != record.show_id || first.buyer != record.buyer {
                    return Err(CheckoutError::Invalid(
                        "holds must all be one buyer's, on one show".into(),
                    ));
                }
            }
            records.push(record);
        }
        let entry = self.show_of(&records[0]).await?;
        Ok((records, entry))
    }

    /// The answer for a settled order: the order, or why there is none.
    async fn order_answer(&self, checkout: &Checkout) -> Result<OrderView, CheckoutError> {
        let order = checkout
            .order
            .as_ref()
            .ok_or_else(|| CheckoutError::Bug("an order's checkout without its order".into()))?;
        match &checkout.phase {
            Phase::Voided { reason, .. } => {
                return Err(CheckoutError::OrderHoldsLost {
                    reason: *reason,
                    holds: order.lost.clone(),
                    voided: true,
                })
            }
            Phase::Reversed { booking_id, .. } => return Err(CheckoutError::Reversed(*booking_id)),
            // No attempt running (the last was declined or failed): not paid.
            Phase::Idle => return Err(CheckoutError::OrderNotConfirmed),
            _ => {}
        }
        let currency = self.order_currency(checkout).await?;
        OrderView::of(checkout, order, currency).ok_or(CheckoutError::Busy)
    }

    /// The currency the order was charged in.
    async fn order_currency(&self, checkout: &Checkout) -> Result<String, CheckoutError> {
        let Some(show_id) = &checkout.show_id else {
            return Ok(self.catalog.default_currency().to_string());
        };
        Ok(self
            .catalog
            .get(show_id)
            .await?
            .map_or_else(|| self.catalog.default_currency(), |e| e.show.currency)
            .to_string())
    }

    /// An order's checkout as the log has it, if it is an order the actor
    /// may see.
    pub(super) async fn order_checkout(
        &self,
        actor: &Actor,
        order_id: OrderId,
    ) -> Result<Checkout, CheckoutError> {
        let (checkout, _) = self.rounds.read_checkout(HoldId(order_id.0)).await?;
        let Some(buyer) = checkout.buyer.as_ref().filter(|_| checkout.order.is_some()) else {
            return Err(CheckoutError::OrderNotFound);
        };
        if !actor.may_act_for(buyer.as_str()) {
            return Err(CheckoutError::Forbidden);
        }
        Ok(checkout)
    }

    /// `GET /v1/orders/{id}`: a paid order, or why it is not (409 as its
    /// placement would answer; 409 `busy` while it is being paid).
    pub async fn order(
        &self,
        actor: &Actor,
        order_id: OrderId,
    ) -> Result<OrderView, CheckoutError> {
        let checkout = self.order_checkout(actor, order_id).await?;
        self.order_answer(&checkout).await
    }

    /// An order as of its checkout's `sequence`-th event (what a webhook
    /// about that event carries).
    pub async fn order_at(
        &self,
        order_id: OrderId,
        sequence: usize,
    ) -> Result<OrderView, CheckoutError> {
        let (checkout, _) = self
            .rounds
            .read_checkout_through(HoldId(order_id.0), sequence)
            .await?;
        let order = checkout
            .order
            .as_ref()
            .ok_or(CheckoutError::OrderNotFound)?;
        let currency = self.order_currency(&checkout).await?;
        OrderView::of(&checkout, order, currency).ok_or(CheckoutError::OrderNotConfirmed)
    }

    /// `POST /v1/orders/{id}/cancel`: cancels `lines` (every line still
    /// confirmed when empty) and refunds them in one partial refund. The
    /// same request again answers the same order.
    pub async fn cancel_order_lines(
        &self,
        ctx: &RequestContext,
        order_id: OrderId,
        lines: Vec<LineId>,
    ) -> Result<OrderView, CheckoutError> {
        let read = self.order_checkout(&ctx.actor, order_id).await?;
        if !ctx.actor.is_admin() {
            self.check_buyer_window(read.show_id.as_ref()).await?;
        }
        if let Some(order) = &read.order {
            order
                .lines_to_cancel(&lines)
                .map_err(CheckoutError::UnknownLine)?;
        }
        let subject = order_subject(&read)?;
        let mut checkout = self.rounds.lock_checkout(subject.key()).await?;
        // A cancellation left half way (a crash, another request) ends first.
        self.drive(ctx, &subject, &mut checkout, None).await?;
        let command = CheckoutCommand::RequestLinesCancel { lines };
        self.record(ctx, &mut checkout, &command).await?;
        self.drive(ctx, &subject, &mut checkout, None).await?;
        match &checkout.aggregate().phase {
            Phase::Completed { .. } | Phase::Cancelled { .. } => {
                self.order_answer(checkout.aggregate()).await
            }
            Phase::LinesCancelRequested { .. } => Err(CheckoutError::Busy),
            _ => Err(CheckoutError::OrderNotConfirmed),
        }
    }

    /// A buyer cancels only until the show's `buyer_cancellation_until`.
    async fn check_buyer_window(&self, show_id: Option<&ShowId>) -> Result<(), CheckoutError> {
        let Some(show_id) = show_id else {
            return Ok(());
        };
        let until = self
            .catalog
            .get(show_id)
            .await?
            .and_then(|e| e.show.buyer_cancellation_until);
        match until {
            Some(until) if self.clock.now() >= until => Err(CheckoutError::CancellationClosed),
            _ => Ok(()),
        }
    }

    /// The checkout (and order) a recovery or a provider's notice drives.
    pub(super) async fn subject_of(
        &self,
        id: HoldId,
        checkout: &Checkout,
    ) -> Result<Subject, CheckoutError> {
        match checkout.order {
            Some(_) => order_subject(checkout),
            None => Ok(Subject::Hold(self.stored_hold(&id).await?)),
        }
    }
}

/// The subject of an order's checkout.
fn order_subject(checkout: &Checkout) -> Result<Subject, CheckoutError> {
    let (Some(order), Some(show_id)) = (&checkout.order, &checkout.show_id) else {
        return Err(CheckoutError::OrderNotFound);
    };
    Ok(Subject::Order(OrderSubject {
        order_id: order.order_id(),
        show_id: ShowId::clone(show_id),
        holds: order.terms.holds.clone(),
    }))
}
