//! The Checkout stream: one per hold, the purchase process that couples a
//! payment to the hold.
//!
//! Money meets inventory here, so every step is recorded before and after
//! the call to the payment provider. Whatever crashes, the stream says how
//! far the purchase got, and a restart finishes it: a captured charge ends in
//! a booking or a refund, never in nothing.
//!
//! ```text
//! Idle ─request─▶ Requested ─captured─▶ Captured ─complete─▶ Completed ─cancel─▶ CancelRequested ─refunded─▶ Cancelled
//!   ▲                 │                     │
//!   └──declined/failed┘                     └─hold lost─▶ RefundRequested ─refunded─▶ Refunded
//! ```
//!
//! The stream is also the arbiter between completing and refunding: both
//! are appended at the stream's version, so a checkout cannot be completed
//! by one process while another decides to refund it.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::{BookingId, BuyerId, HoldId, ShowId};
use crate::EVENT_VERSION;

/// Why a captured charge is being returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundReason {
    /// The hold expired (or its seats were taken) before the payment finished.
    HoldExpired,
    /// The buyer released the hold while the payment was running.
    HoldReleased,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Phase {
    /// No payment attempt is running (none yet, or the last one failed).
    #[default]
    Idle,
    /// A charge was asked for under `idempotency_key`; its outcome is not recorded yet.
    Requested {
        attempt: u32,
        idempotency_key: String,
        payment_method: String,
        amount_cents: i64,
    },
    Captured {
        attempt: u32,
        charge_id: String,
        amount_cents: i64,
    },
    Completed {
        booking_id: BookingId,
        charge_id: String,
        amount_cents: i64,
    },
    RefundRequested {
        charge_id: String,
        amount_cents: i64,
        reason: RefundReason,
    },
    Refunded {
        charge_id: String,
        refund_id: String,
        amount_cents: i64,
        reason: RefundReason,
    },
    CancelRequested {
        booking_id: BookingId,
        charge_id: String,
        amount_cents: i64,
    },
    Cancelled {
        booking_id: BookingId,
        charge_id: String,
        refund_id: String,
        amount_cents: i64,
    },
}

impl Phase {
    /// The name stored in the checkouts read model.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Requested { .. } => "requested",
            Phase::Captured { .. } => "captured",
            Phase::Completed { .. } => "completed",
            Phase::RefundRequested { .. } => "refund_requested",
            Phase::Refunded { .. } => "refunded",
            Phase::CancelRequested { .. } => "cancel_requested",
            Phase::Cancelled { .. } => "cancelled",
        }
    }

    /// A phase that needs the payment provider to finish (what recovery looks for).
    pub fn is_pending(&self) -> bool {
        matches!(
            self,
            Phase::Requested { .. }
                | Phase::Captured { .. }
                | Phase::RefundRequested { .. }
                | Phase::CancelRequested { .. }
        )
    }
}

/// The Checkout aggregate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkout {
    pub hold_id: Option<HoldId>,
    pub show_id: Option<ShowId>,
    pub buyer: Option<BuyerId>,
    pub attempts: u32,
    pub phase: Phase,
}

/// Fixed forever: booking ids are derived from hold ids, so a retried
/// purchase (or a recovery after a crash) names the same booking.
const BOOKING_ID_NAMESPACE: Uuid = Uuid::from_u128(0x2b0e_91d4_7c3a_4f55_8e6d_1a9c_4b70_e3f2);

impl Checkout {
    pub fn booking_id_for(hold_id: HoldId) -> BookingId {
        BookingId(Uuid::new_v5(&BOOKING_ID_NAMESPACE, hold_id.0.as_bytes()))
    }

    /// The provider idempotency key of a payment attempt: one key per
    /// attempt, so a retry of an attempt reaches the same charge, and a new
    /// attempt after a decline can use another payment method.
    pub fn charge_key(hold_id: HoldId, attempt: u32) -> String {
        format!("charge:{hold_id}:{attempt}")
    }

    /// The provider idempotency key of the refund of a charge.
    pub fn refund_key(charge_id: &str) -> String {
        format!("refund:{charge_id}")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutCommand {
    /// Start a payment attempt, unless one is already running or done.
    RequestPurchase {
        hold_id: HoldId,
        show_id: ShowId,
        buyer: BuyerId,
        payment_method: String,
        amount_cents: i64,
    },
    RecordCapture {
        attempt: u32,
        charge_id: String,
    },
    RecordDecline {
        attempt: u32,
        reason: String,
    },
    /// The provider failed and charged nothing.
    RecordFailure {
        attempt: u32,
        reason: String,
    },
    /// Every seat was converted in the same transaction as this event.
    Complete,
    /// The hold could not be converted: the charge must be returned.
    RequestRefund {
        reason: RefundReason,
    },
    RecordRefund {
        refund_id: String,
    },
    RequestCancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CheckoutEvent {
    PurchaseRequested {
        hold_id: HoldId,
        show_id: ShowId,
        buyer: BuyerId,
        attempt: u32,
        idempotency_key: String,
        payment_method: String,
        amount_cents: i64,
    },
    PaymentCaptured {
        attempt: u32,
        charge_id: String,
    },
    PaymentDeclined {
        attempt: u32,
        reason: String,
    },
    PaymentFailed {
        attempt: u32,
        reason: String,
    },
    CheckoutCompleted {
        booking_id: BookingId,
        charge_id: String,
        amount_cents: i64,
    },
    RefundRequested {
        charge_id: String,
        reason: RefundReason,
    },
    PaymentRefunded {
        charge_id: String,
        refund_id: String,
    },
    CancellationRequested {
        booking_id: BookingId,
    },
    CheckoutCancelled {
        booking_id: BookingId,
        refund_id: String,
    },
}

impl CheckoutEvent {
    pub fn name(&self) -> &'static str {
        match self {
            CheckoutEvent::PurchaseRequested { .. } => "PurchaseRequested",
            CheckoutEvent::PaymentCaptured { .. } => "PaymentCaptured",
            CheckoutEvent::PaymentDeclined { .. } => "PaymentDeclined",
            CheckoutEvent::PaymentFailed { .. } => "PaymentFailed",
            CheckoutEvent::CheckoutCompleted { .. } => "CheckoutCompleted",
            CheckoutEvent::RefundRequested { .. } => "RefundRequested",
            CheckoutEvent::PaymentRefunded { .. } => "PaymentRefunded",
            CheckoutEvent::CancellationRequested { .. } => "CancellationRequested",
            CheckoutEvent::CheckoutCancelled { .. } => "CheckoutCancelled",
        }
    }
}

impl DomainEvent for CheckoutEvent {
    fn event_type(&self) -> String {
        self.name().to_owned()
    }

    fn event_version(&self) -> String {
        EVENT_VERSION.to_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckoutError {
    /// The command does not fit the phase (a programming or ordering error;
    /// the service reloads and drives from the phase instead).
    #[error("{command} does not apply in phase {phase}")]
    WrongPhase {
        command: &'static str,
        phase: &'static str,
    },
    #[error("attempt {got} is not the running attempt")]
    StaleAttempt { got: u32 },
}

fn wrong(command: &'static str, checkout: &Checkout) -> CheckoutError {
    CheckoutError::WrongPhase {
        command,
        phase: checkout.phase.name(),
    }
}

fn check_attempt(running: u32, got: u32) -> Result<(), CheckoutError> {
    if running == got {
        Ok(())
    } else {
        Err(CheckoutError::StaleAttempt { got })
    }
}

pub fn decide(
    checkout: &Checkout,
    command: &CheckoutCommand,
) -> Result<Vec<CheckoutEvent>, CheckoutError> {
    use CheckoutCommand as C;
    use CheckoutEvent as E;
    match (command, &checkout.phase) {
        (
            C::RequestPurchase {
                hold_id,
                show_id,
                buyer,
                payment_method,
                amount_cents,
            },
            Phase::Idle,
        ) => {
            let attempt = checkout.attempts + 1;
            Ok(vec![E::PurchaseRequested {
                hold_id: *hold_id,
                show_id: show_id.clone(),
                buyer: buyer.clone(),
                attempt,
                idempotency_key: Checkout::charge_key(*hold_id, attempt),
                payment_method: payment_method.clone(),
                amount_cents: *amount_cents,
            }])
        }
        // An attempt is running or the purchase is decided: resume from the phase.
        (C::RequestPurchase { .. }, _) => Ok(vec![]),
        (
            C::RecordCapture { attempt, charge_id },
            Phase::Requested {
                attempt: running, ..
            },
        ) => {
            check_attempt(*running, *attempt)?;
            Ok(vec![E::PaymentCaptured {
                attempt: *attempt,
                charge_id: charge_id.clone(),
            }])
        }
        (
            C::RecordDecline { attempt, reason },
            Phase::Requested {
                attempt: running, ..
            },
        ) => {
            check_attempt(*running, *attempt)?;
            Ok(vec![E::PaymentDeclined {
                attempt: *attempt,
                reason: reason.clone(),
            }])
        }
        (
            C::RecordFailure { attempt, reason },
            Phase::Requested {
                attempt: running, ..
            },
        ) => {
            check_attempt(*running, *attempt)?;
            Ok(vec![E::PaymentFailed {
                attempt: *attempt,
                reason: reason.clone(),
            }])
        }
        (
            C::Complete,
            Phase::Captured {
                charge_id,
                amount_cents,
                ..
            },
        ) => {
            let hold_id = checkout
                .hold_id
                .ok_or_else(|| wrong("Complete", checkout))?;
            Ok(vec![E::CheckoutCompleted {
                booking_id: Checkout::booking_id_for(hold_id),
                charge_id: charge_id.clone(),
                amount_cents: *amount_cents,
            }])
        }
        (C::RequestRefund { reason }, Phase::Captured { charge_id, .. }) => {
            Ok(vec![E::RefundRequested {
                charge_id: charge_id.clone(),
                reason: *reason,
            }])
        }
        (C::RecordRefund { refund_id }, Phase::RefundRequested { charge_id, .. }) => {
            Ok(vec![E::PaymentRefunded {
                charge_id: charge_id.clone(),
                refund_id: refund_id.clone(),
            }])
        }
        (C::RecordRefund { refund_id }, Phase::CancelRequested { booking_id, .. }) => {
            Ok(vec![E::CheckoutCancelled {
                booking_id: *booking_id,
                refund_id: refund_id.clone(),
            }])
        }
        (C::RequestCancel, Phase::Completed { booking_id, .. }) => {
            Ok(vec![E::CancellationRequested {
                booking_id: *booking_id,
            }])
        }
        // Cancelling again is a no-op.
        (C::RequestCancel, Phase::CancelRequested { .. } | Phase::Cancelled { .. }) => Ok(vec![]),
        (C::RecordCapture { .. }, _) => Err(wrong("RecordCapture", checkout)),
        (C::RecordDecline { .. }, _) => Err(wrong("RecordDecline", checkout)),
        (C::RecordFailure { .. }, _) => Err(wrong("RecordFailure", checkout)),
        (C::Complete, _) => Err(wrong("Complete", checkout)),
        (C::RequestRefund { .. }, _) => Err(wrong("RequestRefund", checkout)),
        (C::RecordRefund { .. }, _) => Err(wrong("RecordRefund", checkout)),
        (C::RequestCancel, _) => Err(wrong("RequestCancel", checkout)),
    }
}

impl Checkout {
    pub fn apply_event(&mut self, event: &CheckoutEvent) {
        use CheckoutEvent as E;
        let phase = std::mem::take(&mut self.phase);
        self.phase = match (event, phase) {
            (
                E::PurchaseRequested {
                    hold_id,
                    show_id,
                    buyer,
                    attempt,
                    idempotency_key,
                    payment_method,
                    amount_cents,
                },
                _,
            ) => {
                self.hold_id = Some(*hold_id);
                self.show_id = Some(show_id.clone());
                self.buyer = Some(buyer.clone());
                self.attempts = *attempt;
                Phase::Requested {
                    attempt: *attempt,
                    idempotency_key: idempotency_key.clone(),
                    payment_method: payment_method.clone(),
                    amount_cents: *amount_cents,
                }
            }
            (E::PaymentCaptured { attempt, charge_id }, Phase::Requested { amount_cents, .. }) => {
                Phase::Captured {
                    attempt: *attempt,
                    charge_id: charge_id.clone(),
                    amount_cents,
                }
            }
            (E::PaymentDeclined { .. } | E::PaymentFailed { .. }, _) => Phase::Idle,
            (
                E::CheckoutCompleted {
                    booking_id,
                    charge_id,
                    amount_cents,
                },
                _,
            ) => Phase::Completed {
                booking_id: *booking_id,
                charge_id: charge_id.clone(),
                amount_cents: *amount_cents,
            },
            (E::RefundRequested { charge_id, reason }, Phase::Captured { amount_cents, .. }) => {
                Phase::RefundRequested {
                    charge_id: charge_id.clone(),
                    amount_cents,
                    reason: *reason,
                }
            }
            (
                E::PaymentRefunded {
                    charge_id,
                    refund_id,
                },
                Phase::RefundRequested {
                    amount_cents,
                    reason,
                    ..
                },
            ) => Phase::Refunded {
                charge_id: charge_id.clone(),
                refund_id: refund_id.clone(),
                amount_cents,
                reason,
            },
            (
                E::CancellationRequested { booking_id },
                Phase::Completed {
                    charge_id,
                    amount_cents,
                    ..
                },
            ) => Phase::CancelRequested {
                booking_id: *booking_id,
                charge_id,
                amount_cents,
            },
            (
                E::CheckoutCancelled {
                    booking_id,
                    refund_id,
                },
                Phase::CancelRequested {
                    charge_id,
                    amount_cents,
                    ..
                },
            ) => Phase::Cancelled {
                booking_id: *booking_id,
                charge_id,
                refund_id: refund_id.clone(),
                amount_cents,
            },
            // An event that does not fit the phase cannot have been decided;
            // keep the phase rather than invent one.
            (_, phase) => phase,
        };
    }
}

impl Aggregate for Checkout {
    const TYPE: &'static str = "Checkout";
    type Command = CheckoutCommand;
    type Event = CheckoutEvent;
    type Error = CheckoutError;
    type Services = ();

    async fn handle(
        &mut self,
        command: Self::Command,
        _services: &Self::Services,
        sink: &EventSink<Self>,
    ) -> Result<(), Self::Error> {
        for event in decide(self, &command)? {
            sink.write(event, self).await;
        }
        Ok(())
    }

    fn apply(&mut self, event: Self::Event) {
        self.apply_event(&event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hold() -> HoldId {
        HoldId(Uuid::from_u128(7))
    }

    fn request(method: &str) -> CheckoutCommand {
        CheckoutCommand::RequestPurchase {
            hold_id: hold(),
            show_id: ShowId::parse("s").unwrap(),
            buyer: BuyerId::parse("alice").unwrap(),
            payment_method: method.into(),
            amount_cents: 10_000,
        }
    }

    /// given the commands so far (each decided and applied), then the checkout.
    fn given(commands: &[CheckoutCommand]) -> Checkout {
        let mut checkout = Checkout::default();
        for command in commands {
            for event in decide(&checkout, command).unwrap() {
                checkout.apply_event(&event);
            }
        }
        checkout
    }

    fn capture(attempt: u32) -> CheckoutCommand {
        CheckoutCommand::RecordCapture {
            attempt,
            charge_id: format!("ch_{attempt}"),
        }
    }

    #[test]
    fn it_should_start_attempt_one_with_a_key_derived_from_the_hold() {
        let events = decide(&Checkout::default(), &request("pm_sim_ok")).unwrap();
        match &events[..] {
            [CheckoutEvent::PurchaseRequested {
                attempt: 1,
                idempotency_key,
                amount_cents: 10_000,
                ..
            }] => assert_eq!(idempotency_key, &Checkout::charge_key(hold(), 1)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn it_should_not_start_a_second_attempt_while_one_runs() {
        let running = given(&[request("pm_sim_ok")]);
        assert_eq!(decide(&running, &request("pm_sim_other")), Ok(vec![]));
        let captured = given(&[request("pm_sim_ok"), capture(1)]);
        assert_eq!(decide(&captured, &request("pm_sim_ok")), Ok(vec![]));
    }

    #[test]
    fn it_should_start_a_new_attempt_with_a_new_key_after_a_decline() {
        let declined = given(&[
            request("pm_sim_declined"),
            CheckoutCommand::RecordDecline {
                attempt: 1,
                reason: "declined".into(),
            },
        ]);
        assert_eq!(declined.phase, Phase::Idle);
        match &decide(&declined, &request("pm_sim_ok")).unwrap()[..] {
            [CheckoutEvent::PurchaseRequested {
                attempt: 2,
                idempotency_key,
                payment_method,
                ..
            }] => {
                assert_eq!(idempotency_key, &Checkout::charge_key(hold(), 2));
                assert_eq!(payment_method, "pm_sim_ok");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn it_should_refuse_an_outcome_for_an_attempt_that_is_not_running() {
        let running = given(&[request("pm_sim_ok")]);
        assert_eq!(
            decide(&running, &capture(2)),
            Err(CheckoutError::StaleAttempt { got: 2 })
        );
    }

    #[test]
    fn it_should_complete_a_captured_checkout_with_the_booking_id_of_the_hold() {
        let captured = given(&[request("pm_sim_ok"), capture(1)]);
        assert_eq!(
            decide(&captured, &CheckoutCommand::Complete),
            Ok(vec![CheckoutEvent::CheckoutCompleted {
                booking_id: Checkout::booking_id_for(hold()),
                charge_id: "ch_1".into(),
                amount_cents: 10_000,
            }])
        );
    }

    #[test]
    fn it_should_not_complete_before_the_charge_is_captured() {
        let running = given(&[request("pm_sim_ok")]);
        assert!(matches!(
            decide(&running, &CheckoutCommand::Complete),
            Err(CheckoutError::WrongPhase { .. })
        ));
    }

    #[test]
    fn it_should_refund_a_captured_charge_whose_hold_was_lost_and_not_complete_it() {
        let refunding = given(&[
            request("pm_sim_ok"),
            capture(1),
            CheckoutCommand::RequestRefund {
                reason: RefundReason::HoldExpired,
            },
        ]);
        assert!(refunding.phase.is_pending());
        assert!(decide(&refunding, &CheckoutCommand::Complete).is_err());
        let refunded = given(&[
            request("pm_sim_ok"),
            capture(1),
            CheckoutCommand::RequestRefund {
                reason: RefundReason::HoldExpired,
            },
            CheckoutCommand::RecordRefund {
                refund_id: "re_1".into(),
            },
        ]);
        assert_eq!(
            refunded.phase,
            Phase::Refunded {
                charge_id: "ch_1".into(),
                refund_id: "re_1".into(),
                amount_cents: 10_000,
                reason: RefundReason::HoldExpired
            }
        );
        assert!(!refunded.phase.is_pending());
        assert_eq!(
            decide(&refunded, &request("pm_sim_ok")),
            Ok(vec![]),
            "never charged again"
        );
    }

    #[test]
    fn it_should_not_refund_a_completed_checkout() {
        let completed = given(&[request("pm_sim_ok"), capture(1), CheckoutCommand::Complete]);
        assert!(decide(
            &completed,
            &CheckoutCommand::RequestRefund {
                reason: RefundReason::HoldExpired
            }
        )
        .is_err());
    }

    #[test]
    fn it_should_cancel_a_completed_booking_once() {
        let booking_id = Checkout::booking_id_for(hold());
        let completed = given(&[request("pm_sim_ok"), capture(1), CheckoutCommand::Complete]);
        assert_eq!(
            decide(&completed, &CheckoutCommand::RequestCancel),
            Ok(vec![CheckoutEvent::CancellationRequested { booking_id }])
        );
        let cancelled = given(&[
            request("pm_sim_ok"),
            capture(1),
            CheckoutCommand::Complete,
            CheckoutCommand::RequestCancel,
            CheckoutCommand::RecordRefund {
                refund_id: "re_9".into(),
            },
        ]);
        assert!(matches!(cancelled.phase, Phase::Cancelled { .. }));
        assert_eq!(
            decide(&cancelled, &CheckoutCommand::RequestCancel),
            Ok(vec![])
        );
    }

    #[test]
    fn it_should_not_cancel_what_was_never_booked() {
        let running = given(&[request("pm_sim_ok")]);
        assert!(decide(&running, &CheckoutCommand::RequestCancel).is_err());
    }
}
