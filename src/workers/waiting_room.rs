//! The room keeper: looks at the inventory of every show with a waiting
//! room this instance serves, and tells the room (`WaitingRoomService::keep`):
//! nothing available but some held pauses admissions (nobody is let in to
//! find nothing), something available again resumes them, everything booked
//! closes the room (`sold_out`). It also draws the seed of a room it has
//! served once the sale has started, so that the order of early joiners is
//! fixed at the start even if nobody asks then (after a restart, the first
//! request on the show, or the first to ask after the start, draws it).
//!
//! Who is admitted never waits for it: admission is computed at read time
//! from the schedule. The keeper only changes the schedule, as the log
//! records (several instances may look at once: a pause already recorded
//! records nothing).

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::ShowCatalog;
use crate::clock::Clock;
use crate::command::waiting_room::{Stock, WaitingRoomError, WaitingRoomService};
use crate::query::availability::{AvailabilityCache, Viewer};
use crate::store::Shows;
use domain::ids::ShowId;

/// The default time between passes (`BOOKING_ROOM_INTERVAL_SECONDS`): a
/// room pauses, resumes or closes within about a second of the inventory
/// changing, and a pass reads each show's availability once (from the
/// cache the availability answers use).
pub const DEFAULT_ROOM_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct WaitingRoomKeeper {
    shows: Shows,
    catalog: Arc<ShowCatalog>,
    availability: Arc<AvailabilityCache>,
    waiting_rooms: Arc<WaitingRoomService>,
    clock: Arc<dyn Clock>,
}

impl WaitingRoomKeeper {
    pub fn new(
        shows: Shows,
        catalog: Arc<ShowCatalog>,
        availability: Arc<AvailabilityCache>,
        waiting_rooms: Arc<WaitingRoomService>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            shows,
            catalog,
            availability,
            waiting_rooms,
            clock,
        }
    }

    /// One pass over the rooms this instance has served: returns how many
    /// open rooms it looked at. A room that cannot be kept now (the
    /// database away, a close recorded by another instance meanwhile) does
    /// not keep the others from their look: the first error is returned
    /// after the pass.
    pub async fn run_once(&self) -> Result<usize, WaitingRoomError> {
        let mut looked = 0;
        let mut first_error = None;
        for (show_id, open) in self.waiting_rooms.rooms().await {
            match self.keep(&show_id, open).await {
                Ok(true) => looked += 1,
                Ok(false) => {}
                Err(error) => {
                    tracing::debug!(%error, show_id = show_id.as_str(), "room keeper: room not kept this pass");
                    first_error.get_or_insert(error);
                }
            }
        }
        first_error.map_or(Ok(looked), Err)
    }

    /// Keeps one room; `false` if there was nothing to look at.
    async fn keep(&self, show_id: &ShowId, open: bool) -> Result<bool, WaitingRoomError> {
        let Some(entry) = self.catalog.get(show_id).await? else {
            return Ok(false);
        };
        let now = self.clock.now();
        if now >= entry.show.starts_at {
            // The show has begun: its sale is over. Its queue is dropped
            // from memory (a standing asked for later is read from the log
            // again), and nothing more is looked at for it.
            self.waiting_rooms.forget(show_id);
            return Ok(false);
        }
        if !open {
            // Closed (sold out): kept in memory to answer `closed` until
            // the show begins.
            return Ok(false);
        }
        let current = self
            .availability
            .current(&self.shows, &entry, &Viewer::Public, now)
            .await?;
        let stock = Stock::of(&current, entry.show.pools.iter().map(|p| p.capacity));
        self.waiting_rooms.keep(show_id, stock).await?;
        Ok(true)
    }
}
