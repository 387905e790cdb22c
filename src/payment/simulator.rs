//! The built-in payment simulator: a product feature (demos, load tests,
//! integration tests of clients), durable like a real provider, and shaped
//! like one: a payment is prepared, authorized (perhaps after the buyer's
//! 3-D Secure step), then captured or cancelled, and a captured one can be
//! refunded.
//!
//! Its ledger is a pair of tables in the service's own database
//! (`store/ledger.rs`). A payment is recorded under its idempotency key;
//! the same key returns that payment again, also after a restart. Methods:
//!
//! - `pm_sim_ok`: authorized after the base latency;
//! - `pm_sim_declined`: declined (`card_declined`);
//! - `pm_sim_unavailable`: the provider fails and does nothing;
//! - `pm_sim_delay_<ms>`: authorized after the base latency plus `<ms>`;
//! - `pm_sim_3ds_<ms>`: needs the buyer (a simulated 3-D Secure step) and
//!   is authorized `<ms>` after it was asked, with no one doing anything:
//!   the seat map and demos show the whole flow without Stripe.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use futures::FutureExt;
use projections::time::{from_micros, to_micros};
use serde_json::json;

use super::ledger::{Ledger, SimPayment};
use super::{
    BuyerAction, Decline, Payment, PaymentError, PaymentProvider, PaymentRequest, PaymentState,
    Refund,
};
use crate::clock::Clock;
use crate::store::StoreError;

/// Longest `pm_sim_delay_<ms>`: below the checkout's payment timeout, so a
/// simulated slow payment is slow, not lost.
pub const MAX_SIM_DELAY_MS: u64 = 20_000;

/// Longest `pm_sim_3ds_<ms>`: a buyer takes seconds to minutes with a real
/// challenge; ten minutes covers every demo.
pub const MAX_SIM_3DS_MS: u64 = 600_000;

/// Default base latency of every simulated call.
pub const DEFAULT_LATENCY_MS: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Ok,
    Declined,
    Unavailable,
    Delay(u64),
    ThreeDs(u64),
}

/// Every simulator method begins so; no other provider's does.
pub const SIMULATOR_METHOD_PREFIX: &str = "pm_sim_";

fn parse_method(method: &str) -> Result<Method, PaymentError> {
    let with_ms = |prefix: &str, max: u64| {
        method
            .strip_prefix(prefix)
            .and_then(|ms| ms.parse::<u64>().ok())
            .filter(|ms| *ms <= max)
    };
    match method {
        "pm_sim_ok" => Ok(Method::Ok),
        "pm_sim_declined" => Ok(Method::Declined),
        "pm_sim_unavailable" => Ok(Method::Unavailable),
        _ => with_ms("pm_sim_delay_", MAX_SIM_DELAY_MS)
            .map(Method::Delay)
            .or_else(|| with_ms("pm_sim_3ds_", MAX_SIM_3DS_MS).map(Method::ThreeDs))
            .ok_or_else(|| {
                PaymentError::Invalid(format!(
                    "unknown payment method {method:?}: use pm_sim_ok, pm_sim_declined, \
                     pm_sim_unavailable, pm_sim_delay_<ms> (ms up to {MAX_SIM_DELAY_MS}) or \
                     pm_sim_3ds_<ms> (ms up to {MAX_SIM_3DS_MS})"
                ))
            }),
    }
}

/// The simulator's statuses, as its ledger stores them.
mod status {
    pub const UNCONFIRMED: &str = "unconfirmed";
    pub const REQUIRES_ACTION: &str = "requires_action";
    pub const AUTHORIZED: &str = "authorized";
    pub const DECLINED: &str = "declined";
    pub const CAPTURED: &str = "captured";
    pub const CANCELED: &str = "canceled";
}

pub struct Simulator {
    ledger: Ledger,
    clock: Arc<dyn Clock>,
    latency: Duration,
}

fn store_error(e: StoreError) -> PaymentError {
    // The ledger could not be read or written: like a provider timing out,
    // the outcome is unknown to the caller.
    PaymentError::Unknown(e.to_string())
}

impl Simulator {
    pub fn new(ledger: Ledger, clock: Arc<dyn Clock>, latency: Duration) -> Self {
        Self {
            ledger,
            clock,
            latency,
        }
    }

    /// A payment as the port shows it, at `now`: a simulated 3-D Secure
    /// step past its deadline reads authorized (and is recorded so by the
    /// next call that moves it).
    fn state(payment: &SimPayment, now: DateTime<Utc>) -> PaymentState {
        match payment.status.as_str() {
            status::UNCONFIRMED => PaymentState::Unconfirmed,
            status::REQUIRES_ACTION if Self::authenticated(payment, now) => {
                PaymentState::Authorized
            }
            status::REQUIRES_ACTION => PaymentState::NeedsBuyer(BuyerAction {
                client_secret: format!("{}_secret_sim", payment.payment_id),
                next_action: json!({
                    "type": "simulated_3ds",
                    "completes_at": payment.action_until_us.and_then(from_micros),
                }),
            }),
            status::AUTHORIZED => PaymentState::Authorized,
            status::DECLINED => PaymentState::Declined(Decline {
                code: payment.decline_code.clone(),
                message: "card declined (simulated)".into(),
            }),
            status::CAPTURED => PaymentState::Captured,
            _ => PaymentState::Canceled,
        }
    }

    fn authenticated(payment: &SimPayment, now: DateTime<Utc>) -> bool {
        payment.status == status::REQUIRES_ACTION
            && payment
                .action_until_us
                .is_some_and(|until| until <= to_micros(now))
    }

    fn answer(&self, payment: &SimPayment) -> Payment {
        Payment {
            payment_id: payment.payment_id.clone(),
            state: Self::state(payment, self.clock.now()),
        }
    }

    async fn load(&self, payment_id: &str) -> Result<SimPayment, PaymentError> {
        self.ledger
            .sim_payment(payment_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| PaymentError::Invalid(format!("no payment {payment_id}")))
    }

    /// Moves `payment` to `to` (from its current status), with `change`
    /// applied; returns the payment as it stands after.
    async fn move_to(
        &self,
        payment: &SimPayment,
        change: impl FnOnce(&mut SimPayment),
    ) -> Result<SimPayment, PaymentError> {
        let mut to = payment.clone();
        change(&mut to);
        to.updated_at_us = to_micros(self.clock.now());
        self.ledger
            .move_sim_payment(&payment.status, &to)
            .await
            .map_err(store_error)
    }

    /// A simulated 3-D Secure step that has completed is recorded as
    /// authorized before the payment is moved on.
    async fn settled(&self, payment: SimPayment) -> Result<SimPayment, PaymentError> {
        if !Self::authenticated(&payment, self.clock.now()) {
            return Ok(payment);
        }
        self.move_to(&payment, |p| p.status = status::AUTHORIZED.into())
            .await
    }

    async fn prepare_inner(&self, request: PaymentRequest<'_>) -> Result<Payment, PaymentError> {
        if parse_method(request.payment_method)? == Method::Unavailable {
            tokio::time::sleep(self.latency).await;
            return Err(PaymentError::Unavailable(
                "payment provider unavailable (simulated)".into(),
            ));
        }
        if let Some(legacy) = self.legacy_charge(request.idempotency_key).await? {
            return Ok(legacy);
        }
        let now_us = to_micros(self.clock.now());
        let payment = SimPayment {
            payment_id: format!("pi_sim_{}", uuid::Uuid::new_v4().simple()),
            idempotency_key: request.idempotency_key.to_owned(),
            hold_id: request.hold_id.to_string(),
            amount_minor: request.amount_minor,
            currency: request.currency.code(),
            payment_method: request.payment_method.to_owned(),
            status: status::UNCONFIRMED.into(),
            decline_code: None,
            action_until_us: None,
            created_at_us: now_us,
            updated_at_us: now_us,
        };
        let stands = self
            .ledger
            .record_sim_payment(&payment)
            .await
            .map_err(store_error)?;
        Ok(self.answer(&stands))
    }

    /// A charge the simulator captured under this key before
    /// authorize-then-capture: the payment is that charge, as it ended.
    async fn legacy_charge(&self, key: &str) -> Result<Option<Payment>, PaymentError> {
        let Some(charge) = self.ledger.sim_charge(key).await.map_err(store_error)? else {
            return Ok(None);
        };
        let state = if charge.outcome == status::CAPTURED {
            PaymentState::Captured
        } else {
            PaymentState::Declined(Decline {
                code: Some("card_declined".into()),
                message: "card declined (simulated)".into(),
            })
        };
        Ok(Some(Payment {
            payment_id: charge.charge_id,
            state,
        }))
    }

    async fn authorize_inner(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let payment = self.load(payment_id).await?;
        if payment.status != status::UNCONFIRMED {
            return Ok(self.answer(&payment));
        }
        let method = parse_method(&payment.payment_method)?;
        let extra = match method {
            Method::Delay(ms) => Duration::from_millis(ms),
            _ => Duration::ZERO,
        };
        // The provider's latency: a product feature of the simulator.
        tokio::time::sleep(self.latency + extra).await;
        let now = self.clock.now();
        let moved = self
            .move_to(&payment, |p| match method {
                Method::Declined => {
                    p.status = status::DECLINED.into();
                    p.decline_code = Some("card_declined".into());
                }
                Method::ThreeDs(ms) => {
                    p.status = status::REQUIRES_ACTION.into();
                    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
                    p.action_until_us = Some(to_micros(now + chrono::Duration::milliseconds(ms)));
                }
                Method::Ok | Method::Delay(_) | Method::Unavailable => {
                    p.status = status::AUTHORIZED.into();
                }
            })
            .await?;
        Ok(self.answer(&moved))
    }

    async fn capture_inner(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let payment = self.settled(self.load(payment_id).await?).await?;
        if payment.status != status::AUTHORIZED {
            return Ok(self.answer(&payment));
        }
        tokio::time::sleep(self.latency).await;
        let moved = self
            .move_to(&payment, |p| p.status = status::CAPTURED.into())
            .await?;
        Ok(self.answer(&moved))
    }

    async fn cancel_inner(&self, payment_id: &str) -> Result<Payment, PaymentError> {
        let payment = self.settled(self.load(payment_id).await?).await?;
        if ![
            status::UNCONFIRMED,
            status::REQUIRES_ACTION,
            status::AUTHORIZED,
        ]
        .contains(&payment.status.as_str())
        {
            return Ok(self.answer(&payment));
        }
        let moved = self
            .move_to(&payment, |p| p.status = status::CANCELED.into())
            .await?;
        Ok(self.answer(&moved))
    }

    async fn refund_inner(
        &self,
        payment_id: &str,
        amount_minor: Option<i64>,
        key: &str,
    ) -> Result<Refund, PaymentError> {
        let refund_id = format!("re_{}", uuid::Uuid::new_v4().simple());
        let at_us = to_micros(self.clock.now());
        tokio::time::sleep(self.latency).await;
        if let Some(payment) = self
            .ledger
            .sim_payment(payment_id)
            .await
            .map_err(store_error)?
        {
            if payment.status != status::CAPTURED {
                return Err(PaymentError::Invalid(format!(
                    "payment {payment_id} is not captured"
                )));
            }
            let amount = amount_minor.unwrap_or(payment.amount_minor);
            if !(1..=payment.amount_minor).contains(&amount) {
                return Err(PaymentError::Invalid(format!(
                    "a refund of {amount} of payment {payment_id} of {}",
                    payment.amount_minor
                )));
            }
            let refund_id = self
                .ledger
                .record_sim_payment_refund(&refund_id, key, &payment, amount, at_us)
                .await
                .map_err(store_error)?;
            return Ok(Refund { refund_id });
        }
        // A charge captured before authorize-then-capture.
        let charge = self
            .ledger
            .sim_charge_by_id(payment_id)
            .await
            .map_err(store_error)?
            .filter(|c| c.outcome == status::CAPTURED)
            .ok_or_else(|| PaymentError::Invalid(format!("no captured payment {payment_id}")))?;
        let refund_id = self
            .ledger
            .record_sim_refund(&refund_id, key, payment_id, charge.amount_cents, at_us)
            .await
            .map_err(store_error)?;
        Ok(Refund { refund_id })
    }
}

impl PaymentProvider for Simulator {
    fn name(&self) -> &'static str {
        "simulator"
    }

    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError> {
        parse_method(payment_method).map(|_| ())
    }

    fn takes(&self, payment_method: &str) -> bool {
        payment_method.starts_with(SIMULATOR_METHOD_PREFIX)
    }

    fn prepare<'a>(
        &'a self,
        request: PaymentRequest<'a>,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.prepare_inner(request).boxed()
    }

    fn authorize<'a>(
        &'a self,
        payment_id: &'a str,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.authorize_inner(payment_id).boxed()
    }

    fn retrieve<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        async move {
            if let Some(payment) = self
                .ledger
                .sim_payment(payment_id)
                .await
                .map_err(store_error)?
            {
                return Ok(self.answer(&payment));
            }
            // A charge captured before authorize-then-capture.
            let charge = self
                .ledger
                .sim_charge_by_id(payment_id)
                .await
                .map_err(store_error)?;
            let charge =
                charge.ok_or_else(|| PaymentError::Invalid(format!("no payment {payment_id}")))?;
            let legacy = self.legacy_charge(&charge.idempotency_key).await?;
            legacy.ok_or_else(|| PaymentError::Invalid(format!("no payment {payment_id}")))
        }
        .boxed()
    }

    fn capture<'a>(
        &'a self,
        payment_id: &'a str,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.capture_inner(payment_id).boxed()
    }

    fn cancel<'a>(
        &'a self,
        payment_id: &'a str,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Payment, PaymentError>> {
        self.cancel_inner(payment_id).boxed()
    }

    fn refund<'a>(
        &'a self,
        payment_id: &'a str,
        amount_minor: Option<i64>,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>> {
        self.refund_inner(payment_id, amount_minor, idempotency_key)
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_knows_its_methods() {
        assert_eq!(parse_method("pm_sim_ok"), Ok(Method::Ok));
        assert_eq!(parse_method("pm_sim_declined"), Ok(Method::Declined));
        assert_eq!(parse_method("pm_sim_unavailable"), Ok(Method::Unavailable));
        assert_eq!(parse_method("pm_sim_delay_2500"), Ok(Method::Delay(2500)));
        assert_eq!(parse_method("pm_sim_3ds_1500"), Ok(Method::ThreeDs(1500)));
    }

    #[test]
    fn it_refuses_unknown_methods_and_delays_past_the_limit() {
        for method in [
            "pm_card_visa",
            "pm_sim_delay_",
            "pm_sim_delay_x",
            "pm_sim_delay_20001",
            "pm_sim_3ds_600001",
            "pm_sim_3ds_",
            "",
        ] {
            assert!(
                matches!(parse_method(method), Err(PaymentError::Invalid(_))),
                "{method}"
            );
        }
    }
}
