//! No 5xx, except 503 `busy` with `Retry-After` while a fault is in
//! progress (or just after: connections come back), and 503
//! `payment_unavailable` for a payment the simulator was told to fail, or
//! with `Retry-After` while the database is restarted (the simulator keeps
//! its ledger in the service's database: the provider is down with it).

use crate::evidence::Evidence;
use crate::history::Record;
use crate::model::Model;
use crate::report::Violation;

/// After a fault ends, how long a 503 `busy` may still come: a request
/// that began during it, and the pool's reconnection.
const AFTER_FAULT_US: i64 = 15_000_000;

fn during_fault(evidence: &Evidence, r: &Record) -> bool {
    during(evidence, r, |_| true)
}

/// Whether `r` overlaps a fault `which` picks (or the time after it).
fn during(evidence: &Evidence, r: &Record, which: impl Fn(&str) -> bool) -> bool {
    evidence.faults.iter().any(|f| {
        which(&f.what) && r.end_us >= f.start_us && r.start_us <= f.end_us + AFTER_FAULT_US
    })
}

fn told_to_fail(r: &Record) -> bool {
    r.body.as_ref().and_then(|b| b["payment_method"].as_str()) == Some("pm_sim_unavailable")
}

pub fn no_server_errors(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in evidence
        .history
        .iter()
        .filter(|r| r.outcome.status().is_some_and(|s| s >= 500))
    {
        let code = r.outcome.code();
        let retry_after = r.outcome.body().get("retry_after_header").is_some();
        let allowed = match (r.outcome.status(), code) {
            (Some(503), Some("busy")) => retry_after && during_fault(evidence, r),
            (Some(503), Some("payment_unavailable")) => {
                told_to_fail(r)
                    || (retry_after && during(evidence, r, |what| what.contains("RestartDatabase")))
            }
            _ => false,
        };
        if !allowed {
            out.push(Violation::new(
                "no_server_errors",
                format!(
                    "{} {} answered {} {:?}",
                    r.method,
                    r.path,
                    r.outcome.status().unwrap_or(0),
                    code
                ),
                vec![
                    r.request_id.clone(),
                    r.path.split('/').nth(3).unwrap_or_default().to_owned(),
                ],
            ));
        }
    }
    for crashed in &evidence.crashed {
        out.push(Violation::new("instances_survive", crashed.clone(), vec![]));
    }
    out
}
