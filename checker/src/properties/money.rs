//! Money, payment by payment, from the simulator's ledger against the log:
//! what a payment captured is what its confirmed lines cost plus what was
//! refunded; no refund above the capture; no capture without a sale; the
//! refunds the log recorded are the ledger's; by the end every
//! authorization is captured or cancelled.
//!
//! The decision on checkouts waiting for their buyer (3-D Secure): the
//! simulator completes the step by itself within seconds and recovery
//! drives the checkout on, so after quiescence none may be left waiting;
//! a payment left `requires_action` or `authorized` is a violation.

use crate::evidence::Evidence;
use crate::model::checkouts::CheckoutFacts;
use crate::model::Model;
use crate::report::Violation;

/// What a checkout's confirmed lines (or its purchase) cost now.
fn confirmed_cost(c: &CheckoutFacts) -> i64 {
    if !c.stands() {
        return 0;
    }
    if c.is_order() {
        c.confirmed_lines().map(|l| l.price_cents).sum()
    } else {
        c.completed.as_ref().map_or(0, |(_, amount)| *amount)
    }
}

pub fn balances(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for p in &evidence.ledger.payments {
        let ids = vec![p.payment_id.clone(), p.hold_id.clone()];
        let refunded: i64 = (evidence.ledger.refunds.iter())
            .filter(|r| r.payment_id == p.payment_id)
            .map(|r| p.cents(r.amount_minor))
            .sum();
        let captured = p.cents(p.amount_minor);
        let checkout = model.checkouts.get(&p.hold_id);
        if p.status != "captured" {
            if refunded > 0 {
                out.push(Violation::new(
                    "money_balances",
                    format!(
                        "payment {} ({}) refunded {refunded} without a capture",
                        p.payment_id, p.status
                    ),
                    ids,
                ));
            }
            continue;
        }
        let Some(c) = checkout.filter(|c| {
            c.completed
                .as_ref()
                .is_some_and(|(charge, _)| *charge == p.payment_id)
        }) else {
            out.push(Violation::new(
                "no_capture_without_sale",
                format!(
                    "payment {} captured {captured} for {}, which completed no sale with it",
                    p.payment_id, p.hold_id
                ),
                ids,
            ));
            continue;
        };
        let cost = confirmed_cost(c);
        if refunded > captured || captured != cost + refunded {
            out.push(Violation::new("money_balances", format!("payment {}: captured {captured}, confirmed lines cost {cost}, refunded {refunded}", p.payment_id), ids.clone()));
        }
        let logged: i64 = c.line_refunds.iter().map(|(_, _, a)| a).sum::<i64>()
            + if c.cancelled.is_some() { captured } else { 0 };
        if logged != refunded {
            out.push(Violation::new(
                "money_balances",
                format!(
                    "payment {}: the log refunded {logged}, the ledger {refunded}",
                    p.payment_id
                ),
                ids,
            ));
        }
    }
    out
}

pub fn authorizations_settled(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    if !evidence.quiet {
        return Vec::new();
    }
    (evidence.ledger.payments.iter())
        .filter(|p| p.status == "authorized" || p.status == "requires_action")
        .map(|p| {
            Violation::new(
                "authorizations_settled",
                format!(
                    "payment {} for {} is still {} after quiescence",
                    p.payment_id, p.hold_id, p.status
                ),
                vec![p.payment_id.clone(), p.hold_id.clone()],
            )
        })
        .collect()
}
