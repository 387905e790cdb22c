//! The built-in payment simulator: a product feature (demos, load tests,
//! integration tests of clients), durable like a real provider.
//!
//! Its ledger is a pair of tables in the service's own database. A charge is
//! recorded under its idempotency key; the same key returns that charge
//! again, also after a restart. Methods:
//!
//! - `pm_sim_ok`: captured after the base latency;
//! - `pm_sim_declined`: declined (the decline is remembered under the key);
//! - `pm_sim_unavailable`: the provider fails and charges nothing;
//! - `pm_sim_delay_<ms>`: captured after the base latency plus `<ms>`.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{Charge, ChargeRequest, PaymentError, PaymentProvider, Refund};
use crate::clock::Clock;
use crate::store::{SimCharge, Store, StoreError};
use projections::time::to_micros;

/// Longest `pm_sim_delay_<ms>`: below the checkout's payment timeout, so a
/// simulated slow payment is slow, not lost.
pub const MAX_SIM_DELAY_MS: u64 = 20_000;

/// Default base latency of every simulated call.
pub const DEFAULT_LATENCY_MS: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Ok,
    Declined,
    Unavailable,
    Delay(u64),
}

fn parse_method(method: &str) -> Result<Method, PaymentError> {
    match method {
        "pm_sim_ok" => Ok(Method::Ok),
        "pm_sim_declined" => Ok(Method::Declined),
        "pm_sim_unavailable" => Ok(Method::Unavailable),
        other => {
            let delay = other
                .strip_prefix("pm_sim_delay_")
                .and_then(|ms| ms.parse::<u64>().ok())
                .filter(|ms| *ms <= MAX_SIM_DELAY_MS);
            delay.map(Method::Delay).ok_or_else(|| {
                PaymentError::Invalid(format!(
                    "unknown payment method {other:?}: use pm_sim_ok, pm_sim_declined, \
                     pm_sim_unavailable or pm_sim_delay_<ms> (ms up to {MAX_SIM_DELAY_MS})"
                ))
            })
        }
    }
}

pub struct Simulator {
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    latency: Duration,
}

fn store_error(e: StoreError) -> PaymentError {
    // The ledger could not be read or written: like a provider timing out,
    // the outcome is unknown to the caller.
    PaymentError::Indeterminate(e.to_string())
}

impl Simulator {
    pub fn new(store: Arc<Store>, clock: Arc<dyn Clock>, latency: Duration) -> Self {
        Self {
            store,
            clock,
            latency,
        }
    }

    fn outcome(charge: SimCharge) -> Result<Charge, PaymentError> {
        if charge.outcome == "captured" {
            Ok(Charge {
                charge_id: charge.charge_id,
                amount_cents: charge.amount_cents,
            })
        } else {
            Err(PaymentError::Declined("card declined (simulated)".into()))
        }
    }

    async fn charge_inner(&self, request: ChargeRequest<'_>) -> Result<Charge, PaymentError> {
        let method = parse_method(request.payment_method)?;
        if let Some(existing) = self
            .store
            .sim_charge(request.idempotency_key)
            .await
            .map_err(store_error)?
        {
            return Self::outcome(existing);
        }
        let extra = match method {
            Method::Delay(ms) => Duration::from_millis(ms),
            _ => Duration::ZERO,
        };
        // The provider's latency: a product feature of the simulator.
        tokio::time::sleep(self.latency + extra).await;
        let outcome = match method {
            Method::Unavailable => {
                return Err(PaymentError::Unavailable(
                    "payment provider unavailable (simulated)".into(),
                ))
            }
            Method::Declined => "declined",
            Method::Ok | Method::Delay(_) => "captured",
        };
        let charge = SimCharge {
            charge_id: format!("ch_{}", uuid::Uuid::new_v4().simple()),
            idempotency_key: request.idempotency_key.to_owned(),
            amount_cents: request.amount_cents,
            payment_method: request.payment_method.to_owned(),
            outcome: outcome.to_owned(),
        };
        let stands = self
            .store
            .record_sim_charge(&charge, to_micros(self.clock.now()))
            .await
            .map_err(store_error)?;
        Self::outcome(stands)
    }

    async fn refund_inner(&self, charge_id: &str, key: &str) -> Result<Refund, PaymentError> {
        let charge = self
            .store
            .sim_charge_by_id(charge_id)
            .await
            .map_err(store_error)?
            .filter(|c| c.outcome == "captured")
            .ok_or_else(|| PaymentError::Invalid(format!("no captured charge {charge_id}")))?;
        tokio::time::sleep(self.latency).await;
        let refund_id = self
            .store
            .record_sim_refund(
                &format!("re_{}", uuid::Uuid::new_v4().simple()),
                key,
                charge_id,
                charge.amount_cents,
                to_micros(self.clock.now()),
            )
            .await
            .map_err(store_error)?;
        Ok(Refund { refund_id })
    }
}

impl PaymentProvider for Simulator {
    fn check_method(&self, payment_method: &str) -> Result<(), PaymentError> {
        parse_method(payment_method).map(|_| ())
    }

    fn charge<'a>(
        &'a self,
        request: ChargeRequest<'a>,
    ) -> BoxFuture<'a, Result<Charge, PaymentError>> {
        self.charge_inner(request).boxed()
    }

    fn refund<'a>(
        &'a self,
        charge_id: &'a str,
        idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<Refund, PaymentError>> {
        self.refund_inner(charge_id, idempotency_key).boxed()
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
    }

    #[test]
    fn it_refuses_unknown_methods_and_delays_past_the_limit() {
        for method in [
            "pm_card_visa",
            "pm_sim_delay_",
            "pm_sim_delay_x",
            "pm_sim_delay_20001",
            "",
        ] {
            assert!(
                matches!(parse_method(method), Err(PaymentError::Invalid(_))),
                "{method}"
            );
        }
    }
}
