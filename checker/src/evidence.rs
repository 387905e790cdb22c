//! Everything the properties are checked against, gathered once the run
//! is quiet: the history, the log, the ledger, the checkouts' phases, the
//! read models as the HTTP API answers them, the faults and `verify`.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::Value;

use crate::api::{Api, Caller, Request};
use crate::faults::FaultWindow;
use crate::history::Record;
use crate::rows::{CheckoutPhase, Ledger, LogEvent};
use crate::shows::ShowSpec;

/// The read models of one show, read once quiet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShowReads {
    pub availability: Value,
    pub report: Value,
    pub export: Value,
    pub export_csv: String,
}

#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub shows: Vec<ShowSpec>,
    pub history: Vec<Record>,
    pub log: Vec<LogEvent>,
    pub ledger: Ledger,
    pub phases: Vec<CheckoutPhase>,
    pub reads: BTreeMap<String, ShowReads>,
    /// When the reads were made (µs since the epoch).
    pub read_at_us: i64,
    pub faults: Vec<FaultWindow>,
    /// `booking verify`'s report when it did not exit 0.
    pub verify: Option<String>,
    /// The waiting lists' cap in force.
    pub max_entries: usize,
    /// Instances found exited by themselves (not killed by a fault).
    pub crashed: Vec<String>,
    /// Whether quiescence was reached: the read models are compared with
    /// the fold, and open authorizations counted, only then (a run that
    /// never got quiet has that as its violation).
    pub quiet: bool,
    /// What the service answered at setup that the contract does not allow.
    pub setup: Vec<crate::report::Violation>,
}

/// Reads each show's availability, report and export (JSON and CSV) as
/// an admin, from instance 0.
pub async fn read_models(
    api: &Api,
    admin: &Caller,
    shows: &[ShowSpec],
) -> BTreeMap<String, ShowReads> {
    let mut reads = BTreeMap::new();
    for show in shows {
        let id = &show.show_id;
        let get = |op, path: String| Request::new(op, Method::GET, path);
        let availability = api
            .send(
                admin,
                0,
                get("read_availability", format!("/v1/shows/{id}/availability")),
            )
            .await;
        let report = api
            .send(
                admin,
                0,
                get("read_report", format!("/v1/shows/{id}/report")),
            )
            .await;
        let export = api
            .send(
                admin,
                0,
                get("read_export", format!("/v1/shows/{id}/bookings")),
            )
            .await;
        let mut csv = get("read_export_csv", format!("/v1/shows/{id}/bookings"));
        csv.accept = Some("text/csv");
        let export_csv = api.send(admin, 0, csv).await;
        reads.insert(
            id.clone(),
            ShowReads {
                availability: availability.body().clone(),
                report: report.body().clone(),
                export: export.body().clone(),
                export_csv: export_csv.body().as_str().unwrap_or_default().to_owned(),
            },
        );
    }
    reads
}
