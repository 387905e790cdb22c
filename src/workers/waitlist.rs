//! The waiting lists' judge: every pass, each show that keeps a waiting
//! list is judged (`WaitlistService::judge`): the seats owed to its waiting list
//! offered to its entries in order, the rest passed on to sale. A show
//! that has begun is judged too: holds and the box office still sell it,
//! and a returning hold that ends then owes its seat to the waiting list like any
//! other (skipping it would leave that seat `held` for ever). Several
//! instances judge at once; the waiting list's stream version keeps their offers
//! apart.
//!
//! The pass is what bounds the time from a seat freeing (a release, a
//! cancellation, a give-back, or a returning hold's `expires_at`) to its offer:
//! one interval plus a judgement (API.md promises 2 s).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::ids::ShowId;
use tokio::sync::Mutex;

use crate::command::waitlist::{Judged, WaitlistError, WaitlistService};
use crate::store::Shows;

/// The default time between passes (`BOOKING_WAITLIST_INTERVAL_MS`): an
/// offer follows the freeing within about this, well inside the 2 s the
/// API promises; a pass over a show with nothing owed is two indexed reads.
pub const DEFAULT_WAITLIST_INTERVAL: Duration = Duration::from_millis(250);

/// How long the list of shows with a waiting list is used before it is
/// read again (a show created meanwhile is judged from then on).
pub const SHOWS_FRESHNESS: Duration = Duration::from_secs(2);

#[derive(Clone)]
pub struct WaitlistJudge {
    shows: Shows,
    waitlists: Arc<WaitlistService>,
    known: Arc<Mutex<Option<Known>>>,
}

/// The shows with a waiting list, when they were listed, and every show
/// looked at so far: whether it keeps a list (fixed once a show is
/// created, so each show's definition is looked at once).
struct Known {
    listed_at: Instant,
    with_waitlist: Vec<ShowId>,
    keeps_waitlist: HashMap<ShowId, bool>,
}

impl WaitlistJudge {
    pub fn new(shows: Shows, waitlists: Arc<WaitlistService>) -> Self {
        Self {
            shows,
            waitlists,
            known: Arc::default(),
        }
    }

    /// One pass over every show with a waiting list: what it did in all. A
    /// show that cannot be judged now does not keep the others from theirs;
    /// the first error is returned after the pass.
    pub async fn run_once(&self) -> Result<Judged, WaitlistError> {
        let mut total = Judged::default();
        let mut first_error = None;
        for show_id in self.shows_with_waitlists().await? {
            match self.waitlists.judge(&show_id).await {
                Ok(judged) => total += judged,
                Err(WaitlistError::NoWaitlist | WaitlistError::ShowNotFound) => {}
                Err(error) => {
                    tracing::debug!(%error, show_id = show_id.as_str(), "waiting list: not judged this pass");
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(total), Err)
    }

    /// The shows that keep a waiting list.
    async fn shows_with_waitlists(&self) -> Result<Vec<ShowId>, WaitlistError> {
        let mut known = self.known.lock().await;
        if let Some(known) = known.as_ref() {
            if known.listed_at.elapsed() < SHOWS_FRESHNESS {
                return Ok(known.with_waitlist.clone());
            }
        }
        let mut keeps_waitlist = known.take().map(|k| k.keeps_waitlist).unwrap_or_default();
        let mut with_waitlist = Vec::new();
        for show_id in self.shows.show_ids().await? {
            let keeps = match keeps_waitlist.get(&show_id) {
                Some(&keeps) => keeps,
                None => match self.waitlists.keeps_waitlist(&show_id).await? {
                    Some(keeps) => *keeps_waitlist.entry(show_id.clone()).or_insert(keeps),
                    None => false,
                },
            };
            if keeps {
                with_waitlist.push(show_id);
            }
        }
        *known = Some(Known {
            listed_at: Instant::now(),
            with_waitlist: with_waitlist.clone(),
            keeps_waitlist,
        });
        Ok(with_waitlist)
    }
}
