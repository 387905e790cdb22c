//! Judging after a request freed seats, shared: every release of a
//! crowd would otherwise run a judgement of its own, one after another on
//! the show's waiting list. A request asks for a judgement that starts after its
//! own write (a ticket); whoever judges next takes every ticket asked for
//! until it starts, and the requests it covers are answered by it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use domain::ids::ShowId;

use super::{WaitlistError, WaitlistService};

/// Per show: the tickets asked for, and the judgements' turn (its value:
/// the last ticket a finished judgement covered).
#[derive(Default)]
pub(super) struct Judgements(Mutex<HashMap<ShowId, Arc<Turn>>>);

#[derive(Default)]
struct Turn {
    asked: AtomicU64,
    covered: tokio::sync::Mutex<u64>,
}

impl Judgements {
    fn turn(&self, show_id: &ShowId) -> Option<Arc<Turn>> {
        let mut turns = self.0.lock().ok()?;
        Some(turns.entry(show_id.clone()).or_default().clone())
    }
}

impl WaitlistService {
    /// After a request freed seats of `show_id` (a release, a cancellation,
    /// a channel's give-back): the waiting list judged before the request is
    /// answered, so that what no entry wants is on sale again by then, as
    /// on a show without a list. Nothing on a show without one; a
    /// judgement that fails now is left to the worker's next pass (logged).
    pub async fn judge_freed(&self, show_id: &ShowId) {
        // A show without a list (the catalog's, cached): nothing to wait for.
        if self.show(show_id).await.is_err() {
            return;
        }
        let Some(turn) = self.judgements.turn(show_id) else {
            return;
        };
        // A ticket for a judgement that starts after this request's write.
        let ticket = turn.asked.fetch_add(1, Ordering::AcqRel) + 1;
        let mut covered = turn.covered.lock().await;
        if *covered >= ticket {
            // A judgement that started after this request's write is done.
            return;
        }
        let upto = turn.asked.load(Ordering::Acquire);
        match self.judge(show_id).await {
            Ok(_) => *covered = upto,
            Err(WaitlistError::NoWaitlist | WaitlistError::ShowNotFound) => *covered = upto,
            Err(error) => {
                tracing::debug!(%error, show_id = show_id.as_str(), "waiting list: left to the next pass")
            }
        }
    }
}
