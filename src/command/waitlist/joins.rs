//! Joining, batched: the line is one stream, so joins to one show append
//! one after another, each waiting for its commit (about 1 ms: some
//! hundreds a second). Instead each join is queued, and whoever holds the
//! line next appends every join queued meanwhile in one round
//! (`domain::waitlist::join_all`, each decided after the ones before it),
//! then answers each. The line's order is still the log's: the order the
//! batches commit in, and within a batch the order of the queue.
//!
//! The batch's events carry the line's actor (`system:waitlist`) as
//! metadata; each `EntryJoined` names its buyer.

use std::collections::HashMap;
use std::sync::Mutex;

use domain::ids::{BuyerId, EntryId, ShowId};
use domain::waitlist::{self, waitlist_stream_id, Ask, Joining, Waitlist, WaitlistError};
use tokio::sync::oneshot;

use super::{LineError, LineKey, WaitlistService};
use crate::command::context::RequestContext;
use crate::command::holds::WAITLIST_ACTOR;
use crate::command::round::{Decided, Decides, Decision, Round, Rounds, Settled, View};

/// A join and where its answer goes.
struct Pending {
    joining: Joining,
    reply: oneshot::Sender<Result<(EntryId, bool), LineError>>,
}

/// Joins queued by show, for the next round on its line.
#[derive(Default)]
pub(super) struct JoinQueue(Mutex<HashMap<ShowId, Vec<Pending>>>);

impl JoinQueue {
    fn push(&self, show_id: &ShowId, pending: Pending) {
        if let Ok(mut queued) = self.0.lock() {
            queued.entry(show_id.clone()).or_default().push(pending);
        }
    }

    fn take(&self, show_id: &ShowId) -> Vec<Pending> {
        match self.0.lock() {
            Ok(mut queued) => queued.remove(show_id).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }
}

/// The decision: every join queued when the line is locked (taken once,
/// decided again as they are after a conflict).
struct JoinAll<'a> {
    queue: &'a JoinQueue,
    show_id: &'a ShowId,
    taken: Vec<Pending>,
}

type Answers = Vec<Result<(EntryId, bool), WaitlistError>>;

impl Decides<Waitlist> for JoinAll<'_> {
    type Output = Answers;
    type Error = LineError;

    fn decide(
        &mut self,
        view: &View<'_, Waitlist>,
    ) -> Result<Decision<Waitlist, Answers>, LineError> {
        let Some(&(line, _)) = view.units.first() else {
            return Err(LineError::Bug("joins without their line".into()));
        };
        self.taken.extend(self.queue.take(self.show_id));
        let joins: Vec<Joining> = self.taken.iter().map(|p| p.joining.clone()).collect();
        let (events, answers) = waitlist::join_all(line, &joins, view.now);
        Ok(Decision::Append(Decided::units(vec![events]), answers))
    }
}

impl WaitlistService {
    /// Queues `buyer`'s join and appends what is queued; the join's answer
    /// (its entry, and whether it joined now).
    pub(super) async fn join_queued(
        &self,
        show_id: &ShowId,
        buyer: &BuyerId,
        ask: Ask,
    ) -> Result<(EntryId, bool), LineError> {
        let (reply, answer) = oneshot::channel();
        let joining = Joining {
            entry_id: EntryId::random(),
            buyer: buyer.clone(),
            ask,
        };
        self.joins.push(show_id, Pending { joining, reply });
        self.append_joins(show_id).await?;
        answer
            .await
            .map_err(|_| LineError::Bug("a queued join was dropped".into()))?
    }

    /// One round appending every join queued for `show_id` (none: nothing
    /// written), each answered.
    async fn append_joins(&self, show_id: &ShowId) -> Result<(), LineError> {
        let ctx = RequestContext::system(WAITLIST_ACTOR)?;
        let key = LineKey {
            show_id: show_id.clone(),
        };
        let units = vec![(waitlist_stream_id(show_id), key)];
        let mut decision = JoinAll {
            queue: &self.joins,
            show_id,
            taken: Vec::new(),
        };
        let rounds: &Rounds = &self.rounds;
        let settled = rounds
            .run(Round::new("waitlist_join", &ctx), units, &mut decision)
            .await;
        let answers = match settled {
            Ok(Settled::Appended(answers) | Settled::Answered(answers)) => answers
                .into_iter()
                .map(|a| a.map_err(|e| refusal(show_id, e)))
                .collect(),
            Ok(Settled::KeyTaken) => vec![],
            Err(error) => {
                tracing::debug!(%error, "waiting list: a batch of joins not appended");
                decision
                    .taken
                    .iter()
                    .map(|_| Err(LineError::Busy))
                    .collect()
            }
        };
        for (pending, answer) in decision.taken.into_iter().zip(answers) {
            let _ = pending.reply.send(answer);
        }
        Ok(())
    }
}

fn refusal(show_id: &ShowId, e: WaitlistError) -> LineError {
    match e {
        WaitlistError::EntryExists(id) => LineError::EntryExists(show_id.clone(), id),
        WaitlistError::Full => LineError::Full,
        other => LineError::Bug(other.to_string()),
    }
}
