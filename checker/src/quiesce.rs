//! Quiescence: with the crowd and the faults stopped and every instance
//! up, the buyers tidy up (leave the waiting lists, release what they
//! hold, settle requests whose outcome they never learnt), then the run
//! waits, polling with a deadline, until nothing is left to happen: no
//! checkout unfinished, no hold live, nothing owed to a waiting list.

use std::time::{Duration, Instant};

use reqwest::Method;

use crate::api::Request;
use crate::database::Reader;
use crate::generator::Client;
use crate::model::Model;
use crate::report::Violation;
use crate::rows::UNFINISHED_PHASES;
use crate::shows::ShowSpec;

/// How often the quiet state is read again.
const POLL: Duration = Duration::from_millis(500);

impl Client {
    /// A buyer's tidying: first out of every waiting list (so nothing new
    /// is offered to it), then its holds released.
    pub async fn tidy(&mut self) {
        for request in std::mem::take(&mut self.known.unknown_holds) {
            let outcome = self.send(request.clone()).await;
            if let Some(hold) = crate::generator::knowledge::KnownHold::from_answer(outcome.body())
            {
                self.known.holds.push(hold);
            }
        }
        for request in std::mem::take(&mut self.known.again) {
            let outcome = self.send(request.clone()).await;
            self.learn_payment(&request, &outcome, &[]);
        }
        let shows: Vec<ShowSpec> = self
            .shows
            .iter()
            .filter(|s| s.has_waitlist())
            .cloned()
            .collect();
        for show in shows {
            self.leave_waitlist(&show.show_id).await;
        }
        for hold in std::mem::take(&mut self.known.holds) {
            self.send(Request::new(
                "tidy_release",
                Method::DELETE,
                format!("/v1/holds/{}", hold.hold_id),
            ))
            .await;
        }
    }

    /// Leaves the show's line, then releases the entry's offer if it has
    /// one (read before and after leaving).
    async fn leave_waitlist(&mut self, show_id: &str) {
        let mine = self
            .send(Request::new(
                "tidy_entry",
                Method::GET,
                format!("/v1/shows/{show_id}/waitlist/me"),
            ))
            .await;
        let Some(entry) = mine.body()["entry_id"].as_str().map(str::to_owned) else {
            return;
        };
        self.send(Request::new(
            "tidy_leave",
            Method::DELETE,
            format!("/v1/waitlist/{entry}"),
        ))
        .await;
        let after = self
            .send(Request::new(
                "tidy_entry",
                Method::GET,
                format!("/v1/waitlist/{entry}"),
            ))
            .await;
        // An offer may have come between the two reads; releasing a hold
        // that is no longer held changes nothing.
        let offer = after.body()["hold_id"]
            .as_str()
            .or(mine.body()["hold_id"].as_str());
        if let Some(hold) = offer.map(str::to_owned) {
            let path = format!("/v1/holds/{hold}");
            self.send(Request::new("tidy_release", Method::DELETE, path))
                .await;
        }
    }
}

/// What still keeps the run from being quiet (empty: quiet).
pub fn unquiet(
    model: &Model,
    phases: &[crate::rows::CheckoutPhase],
    now_us: i64,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in phases
        .iter()
        .filter(|c| UNFINISHED_PHASES.contains(&c.phase.as_str()))
    {
        out.push(Violation::new(
            "quiescence",
            format!("checkout {} is still {}", c.id, c.phase),
            vec![c.id.clone()],
        ));
    }
    for h in model.holds.values().filter(|h| h.live_at(now_us)) {
        out.push(Violation::new(
            "quiescence",
            format!("hold {} is still live", h.hold_id),
            vec![h.hold_id.clone()],
        ));
    }
    for s in model.seats.values().filter(|s| s.owed_at(now_us)) {
        out.push(Violation::new(
            "nothing_owed_at_end",
            format!(
                "seat {} reads held, owed to the waiting list, with no live hold",
                s.stream
            ),
            vec![s.stream.clone()],
        ));
    }
    for s in model.shards.values().filter(|s| s.owed_at(now_us) > 0) {
        out.push(Violation::new(
            "nothing_owed_at_end",
            format!(
                "{} places of {} owed to the waiting list with no live hold",
                s.owed_at(now_us),
                s.stream
            ),
            vec![s.stream.clone()],
        ));
    }
    out
}

/// Polls until quiet, or until `deadline` passes (then what is still
/// unquiet are the violations).
pub async fn await_quiet(
    reader: &Reader,
    shows: &[ShowSpec],
    deadline: Duration,
) -> Vec<Violation> {
    let started = Instant::now();
    loop {
        let state = async {
            let log = reader.events().await?;
            let phases = reader.phases().await?;
            anyhow::Ok(unquiet(
                &Model::build(&log, shows),
                &phases,
                chrono::Utc::now().timestamp_micros(),
            ))
        };
        let last = match state.await {
            Ok(unquiet) if unquiet.is_empty() => return unquiet,
            Ok(unquiet) => unquiet,
            Err(e) => vec![Violation::new(
                "quiescence",
                format!("the database could not be read: {e}"),
                vec![],
            )],
        };
        if started.elapsed() > deadline {
            let after = |v: Violation| Violation {
                detail: format!(
                    "{}s after the crowd stopped: {}",
                    deadline.as_secs(),
                    v.detail
                ),
                ..v
            };
            return last.into_iter().map(after).collect();
        }
        tokio::time::sleep(POLL).await;
    }
}
