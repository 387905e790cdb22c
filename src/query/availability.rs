//! Availability of a show, answered from memory and kept current by reading
//! only the seat rows that changed since the last look (migration 0007).
//!
//! A 100,000-seat show is a 100,000-row read if done whole, every time; an
//! onsale reads it constantly. Each instance keeps the show's rows (recorded
//! status and expiry, by seat ordinal) and a watermark; every request reads
//! the rows changed at or above it (on PostgreSQL: by transactions not yet
//! finished at the previous read's snapshot; on SQLite: at or after the
//! previous log position), so a commit that was in flight during the last
//! read is picked up by the next. Expiry is still applied at query time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use domain::ids::ShowId;
use domain::seat::SeatStatus;
use projections::time::from_micros;

use crate::catalog::CatalogEntry;
use crate::store::{Store, StoreError};

/// Shows whose seat rows an instance keeps (16 bytes a seat).
pub const AVAILABILITY_CACHE_SHOWS: usize = 64;

struct Cached {
    rows: Vec<(SeatStatus, Option<i64>)>,
    watermark: String,
    /// Requests that arrived before the last read started are answered by
    /// it (the same freshness rule as the stream cache): readers arriving
    /// while a read runs share the next one instead of queueing one each.
    fresh_through: u64,
}

struct Slot {
    tickets: std::sync::atomic::AtomicU64,
    cached: tokio::sync::Mutex<Cached>,
}

#[derive(Default)]
pub struct AvailabilityCache {
    shows: Mutex<HashMap<ShowId, Arc<Slot>>>,
}

impl AvailabilityCache {
    fn slot(&self, show_id: &ShowId) -> Arc<Slot> {
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = shows.get(show_id) {
            return slot.clone();
        }
        if shows.len() >= AVAILABILITY_CACHE_SHOWS {
            shows.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        let slot = Arc::new(Slot {
            tickets: std::sync::atomic::AtomicU64::new(0),
            cached: tokio::sync::Mutex::new(Cached {
                rows: Vec::new(),
                watermark: "0".into(),
                fresh_through: 0,
            }),
        });
        shows.insert(show_id.clone(), slot.clone());
        slot
    }

    /// Each seat's status at `now`, in show order.
    pub async fn statuses(
        &self,
        store: &Store,
        entry: &CatalogEntry,
        now: DateTime<Utc>,
    ) -> Result<Vec<SeatStatus>, StoreError> {
        let seats = entry.show.seats.len();
        let rows = {
            use std::sync::atomic::Ordering;
            let slot = self.slot(&entry.show.show_id);
            let ticket = slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
            let mut cached = slot.cached.lock().await;
            if cached.rows.len() != seats {
                cached.rows = vec![(SeatStatus::Available, None); seats];
                cached.watermark = "0".into();
                cached.fresh_through = 0;
            }
            if cached.fresh_through < ticket {
                let starting = slot.tickets.load(Ordering::SeqCst);
                let (changes, next) = store
                    .seat_changes(&entry.show.show_id, &cached.watermark)
                    .await?;
                for (ordinal, status, expires_at_us) in changes {
                    if let Some(row) = cached.rows.get_mut(ordinal) {
                        *row = (status, expires_at_us);
                    }
                }
                cached.watermark = next;
                cached.fresh_through = starting;
            }
            cached.rows.clone()
        };
        Ok(rows
            .into_iter()
            .map(|(recorded, expires_at_us)| {
                SeatStatus::at(recorded, expires_at_us.and_then(from_micros), now)
            })
            .collect())
    }
}
