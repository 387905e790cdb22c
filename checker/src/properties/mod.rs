//! The properties, each a pure function of the evidence (history, log,
//! ledger, reads) and of the checker's model of the log, so that a test
//! can hand one a bad history and see it refused. `ALL` is the list a run
//! checks, in the order a failure reports them.

pub mod acknowledged;
pub mod answers;
pub mod errors;
pub mod holds;
pub mod money;
pub mod reads;
pub mod tickets;
pub mod units;
pub mod waitlist;

#[cfg(test)]
mod tests;

use crate::evidence::Evidence;
use crate::model::Model;
use crate::report::Violation;

pub type Check = fn(&Evidence, &Model) -> Vec<Violation>;

/// Every property: its name (as the summary lists it) and its check.
pub const ALL: &[(&str, Check)] = &[
    ("units sold once (seat and shard folds)", units::folded),
    (
        "checkout sales are unit sales",
        units::conversions_are_unit_sales,
    ),
    ("log sales agree", units::bookings_agree),
    (
        "cancellations free their own lines",
        units::cancellations_free_their_lines,
    ),
    ("acknowledged sales stand", acknowledged::sales_stand),
    ("unknown outcomes at most once", acknowledged::at_most_once),
    ("money balances", money::balances),
    ("authorizations settled", money::authorizations_settled),
    ("tickets follow sales", tickets::follow_sales),
    ("refusals change nothing", answers::refusals_change_nothing),
    (
        "refused orders keep holds, voided tells the truth",
        answers::refused_orders_keep_holds,
    ),
    ("released holds never sold", answers::released_never_sold),
    (
        "price changes truthful, yen expressible",
        answers::price_changes_truthful,
    ),
    ("availability agrees", reads::availability_agrees),
    ("report agrees", reads::report_agrees),
    ("export agrees", reads::export_agrees),
    ("export CSV safe", reads::export_csv_safe),
    ("verify clean", reads::verify_clean),
    (
        "waitlist full only when full",
        waitlist::full_only_when_full,
    ),
    ("offers end in time", waitlist::offers_end_in_time),
    ("holds within max_hold", holds::within_max_hold),
    (
        "priced by the table in force",
        holds::priced_by_table_in_force,
    ),
    ("no server errors", errors::no_server_errors),
    ("shows read back as defined", setup_answers),
];

/// What the shows' creation and reading back answered against the
/// contract (checked at setup, reported with the rest).
fn setup_answers(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    evidence.setup.clone()
}

/// Checks every property: the names of those that held, and every
/// violation found.
pub fn check_all(evidence: &Evidence) -> (Vec<&'static str>, Vec<Violation>) {
    let model = Model::build(&evidence.log, &evidence.shows);
    let mut held = Vec::new();
    let mut violations = Vec::new();
    for (name, check) in ALL {
        let found = check(evidence, &model);
        if found.is_empty() {
            held.push(*name);
        }
        violations.extend(found);
    }
    (held, violations)
}
