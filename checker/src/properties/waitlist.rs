//! The waiting lists' own answers: a join refused `waitlist_full` only
//! when the live entries (waiting or offered, not left) reached the cap
//! at some instant while it ran; an offer never extended past its
//! `offer_seconds`. (Passing freed inventory over a waiting entry, and a
//! public hold taking an owed seat, are refused by the folds.)

use crate::evidence::Evidence;
use crate::model::Model;
use crate::report::Violation;

pub fn full_only_when_full(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    let acked = acknowledged_leaves(evidence);
    for r in evidence
        .history
        .iter()
        .filter(|r| r.op == "join" && r.outcome.code() == Some("waitlist_full"))
    {
        let show = r.path.split('/').nth(3).unwrap_or_default();
        let most = model
            .waitlists
            .get(show)
            .map_or(0, |l| l.most_live_between(r.start_us, r.end_us, &acked));
        if most < evidence.max_entries {
            out.push(Violation::new(
                "waitlist_full_only_when_full",
                format!(
                    "{show}: join refused waitlist_full with at most {most} live entries of {}",
                    evidence.max_entries
                ),
                vec![r.request_id.clone()],
            ));
        }
    }
    out
}

/// When each leave was acknowledged (its request's end), by request id:
/// an event's `recorded_at_us` is its decision's instant, and it may
/// commit later; a join decided before the commit still sees the entry.
fn acknowledged_leaves(evidence: &Evidence) -> std::collections::HashMap<&str, i64> {
    evidence
        .history
        .iter()
        .filter(|r| r.method == "DELETE" && r.path.starts_with("/v1/waitlist/"))
        .map(|r| (r.request_id.as_str(), r.end_us))
        .collect()
}

pub fn offers_end_in_time(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for list in model.waitlists.values() {
        let Some(offer_seconds) = evidence
            .shows
            .iter()
            .find(|s| s.show_id == list.show_id)
            .and_then(|s| s.offer_seconds)
        else {
            continue;
        };
        for (hold_id, (offered_us, _)) in &list.offers {
            let Some(hold) = model.holds.get(hold_id) else {
                continue;
            };
            let bound = offered_us + i64::from(offer_seconds) * 1_000_000;
            if hold.expires_us > bound {
                out.push(Violation::new(
                    "offer_within_offer_seconds",
                    format!(
                        "offer {hold_id} on {} extended to {} µs past its offer_seconds",
                        list.show_id,
                        hold.expires_us - bound
                    ),
                    vec![hold_id.clone()],
                ));
            }
        }
    }
    out
}
