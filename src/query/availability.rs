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
//!
//! The answer itself is kept too ([`AvailabilityCache::rendered`]): each
//! request still computes the statuses at its own instant (so an expiry is
//! never missed: no event marks it), and the kept answer is served as long
//! as those statuses and the pools' figures are the ones it was written
//! from; otherwise it is written again. Its tag, and its compressed forms
//! once made, go with it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use domain::ids::{ChannelId, ShowId, TicketType};
use domain::seat::SeatStatus;
use projections::time::{from_micros, to_micros};
use serde::Serialize;

use crate::catalog::CatalogEntry;
use crate::clock::Clock;
use crate::query::rendered::{Piece, Rendered};
use crate::store::{PoolFigures, SeatChange, Shows, StoreError, WHOLE_SHOW};

/// Shows whose seat rows an instance keeps (32 bytes a seat, and a ticket
/// type and price for a seat held or booked).
pub const AVAILABILITY_CACHE_SHOWS: usize = 64;

/// Who an availability answer is for: the public, or one sales channel's
/// buyers. A seat free for sale but not in the viewer's inventory (another
/// channel's, or public sale's for a channel) reads `not_for_sale`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Viewer {
    #[default]
    Public,
    Channel(ChannelId),
}

impl Viewer {
    pub fn channel(&self) -> Option<&ChannelId> {
        match self {
            Viewer::Public => None,
            Viewer::Channel(channel) => Some(channel),
        }
    }

    /// What a seat of `channel` whose status at the instant is `status`
    /// shows this viewer.
    pub fn sees(&self, status: SeatStatus, channel: Option<&ChannelId>) -> SeatStatus {
        if status == SeatStatus::Available && channel != self.channel() {
            SeatStatus::NotForSale
        } else {
            status
        }
    }

    /// A pool's figures as this viewer sees them: for the public, the
    /// places allocated to channels apart; for a channel, its own places.
    pub fn pool(&self, figures: &PoolFigures) -> PoolNow {
        match self {
            Viewer::Public => PoolNow {
                held: figures.held.get(&None).copied().unwrap_or(0),
                sold: figures.sold,
                allocated: figures.allocated.values().sum(),
                available: None,
            },
            Viewer::Channel(channel) => {
                let allocated = figures.allocated.get(channel).copied().unwrap_or(0);
                let held = (figures.held.get(&Some(channel.clone()))).copied();
                PoolNow {
                    held: held.unwrap_or(0),
                    sold: figures.sold,
                    allocated,
                    available: Some(allocated.saturating_sub(held.unwrap_or(0))),
                }
            }
        }
    }
}

/// A pool as a viewer sees it at an instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolNow {
    pub held: u32,
    pub sold: u32,
    /// Places allocated to channels (the public's view) or to the viewing
    /// channel, not sold.
    pub allocated: u32,
    /// A channel's free places; `None`: the public's, from the rest.
    pub available: Option<u32>,
}

impl PoolNow {
    pub fn available(&self, capacity: u32) -> u32 {
        self.available
            .unwrap_or_else(|| capacity.saturating_sub(self.held + self.sold + self.allocated))
    }
}

/// A seat row as an instance keeps it: the recorded status and expiry, the
/// channel it is allocated to (its place in the show's list), and what its
/// hold or booking sold it as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSeat {
    pub status: SeatStatus,
    pub expires_at_us: Option<i64>,
    channel: Option<u8>,
    pub sale: Option<Box<(TicketType, i64)>>,
}

impl Default for KeptSeat {
    fn default() -> Self {
        Self {
            status: SeatStatus::Available,
            expires_at_us: None,
            channel: None,
            sale: None,
        }
    }
}

/// A channel the show does not list (never allocated through the API).
const UNLISTED_CHANNEL: u8 = u8::MAX;

impl KeptSeat {
    fn of(entry: &CatalogEntry, change: SeatChange) -> Self {
        let channel = change.channel.map(|channel| {
            (entry.show.channels.iter())
                .position(|c| c.channel_id == channel)
                .and_then(|i| u8::try_from(i).ok())
                .unwrap_or(UNLISTED_CHANNEL)
        });
        Self {
            status: change.status,
            expires_at_us: change.expires_at_us,
            channel,
            sale: change.sale.map(Box::new),
        }
    }

    /// Its status at `now`, expiry applied.
    pub fn status_at(&self, now: DateTime<Utc>) -> SeatStatus {
        SeatStatus::at(self.status, self.expires_at_us.and_then(from_micros), now)
    }

    /// The place in the show's list of the channel it is allocated to.
    pub fn channel_slot(&self) -> Option<usize> {
        self.channel.map(usize::from)
    }

    /// The channel it is allocated to.
    pub fn channel<'a>(&self, entry: &'a CatalogEntry) -> Option<&'a ChannelId> {
        self.channel.map(|i| {
            (entry.show.channels.get(usize::from(i))).map_or(&*UNLISTED, |c| &c.channel_id)
        })
    }
}

static UNLISTED: std::sync::LazyLock<ChannelId> = std::sync::LazyLock::new(|| {
    ChannelId::parse("unlisted").unwrap_or_else(|_| unreachable!("a valid channel id"))
});

struct Cached {
    rows: Vec<KeptSeat>,
    watermark: String,
    /// Requests that arrived before the last read started are answered by
    /// it (the same freshness rule as the stream cache): readers arriving
    /// while a read runs share the next one instead of queueing one each.
    fresh_through: u64,
}

/// Parts of one show whose rendered answers are kept: the whole show, each
/// section asked for, and one for every name that is no section (they all
/// answer the same empty seat list). Past it, parts not being answered are
/// dropped. A show's parts partition its seats, so its kept answers hold at
/// most about twice its whole answer (5.6 MB for 100,000 seats, plus 340
/// KB gzip); the bound is on the count of small ones a show of many small
/// sections would otherwise keep.
pub const KEPT_PARTS_PER_SHOW: usize = 64;

struct Slot {
    tickets: std::sync::atomic::AtomicU64,
    cached: tokio::sync::Mutex<Cached>,
    /// Kept answers by part and viewer (each channel's view is its own).
    parts: Mutex<HashMap<(Part, Viewer), Arc<PartSlot>>>,
}

/// What one availability answer covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Part {
    Whole,
    Section(String),
    NoSuchSection,
}

impl Part {
    /// The part a request for `section` (or the whole show) answers.
    fn of(entry: &CatalogEntry, section: Option<&str>) -> Part {
        match section {
            None => Part::Whole,
            Some(name) if entry.show.seats.iter().any(|seat| seat.section == name) => {
                Part::Section(name.to_owned())
            }
            Some(_) => Part::NoSuchSection,
        }
    }

    /// The ordinals of the part's seats, in show order.
    fn seats(&self, entry: &CatalogEntry) -> Vec<usize> {
        match self {
            Part::Whole => (0..entry.show.seats.len()).collect(),
            Part::Section(name) => (entry.show.seats.iter().enumerate())
                .filter(|(_, seat)| seat.section == *name)
                .map(|(ordinal, _)| ordinal)
                .collect(),
            Part::NoSuchSection => Vec::new(),
        }
    }
}

/// One part's kept answer, and the tickets that let requests arriving while
/// it is being checked or written share the result (as [`Cached`] does).
struct PartSlot {
    tickets: std::sync::atomic::AtomicU64,
    kept: tokio::sync::Mutex<Option<Kept>>,
}

struct Kept {
    /// The part's seats in blocks: the statuses each was written from, and
    /// its piece of the answer.
    blocks: Vec<Block>,
    /// The pools' figures the answer was written from.
    pools: Vec<PoolNow>,
    /// Its `as_of`: never served to a request whose instant is before it.
    as_of: DateTime<Utc>,
    fresh_through: u64,
    rendered: Arc<Rendered>,
}

/// Seats per block of a kept answer. A change writes its block again (and
/// deflates it again for gzip), about 28 KB of a 100,000-seat show's 5.6 MB;
/// each block's own deflate stream costs its code tables and a flush: 2 %
/// more bytes on the wire than one stream for the whole answer (295.5 KB
/// against 290 KB for 100,000 seats, BENCHMARKS.md).
pub const SEATS_PER_BLOCK: usize = 512;

/// [`SEATS_PER_BLOCK`] seats of a part (the last block may hold fewer): the
/// statuses it shows, their counts, and its piece of the answer (the seat
/// entries, each but the part's first preceded by a comma).
struct Block {
    statuses: Vec<SeatStatus>,
    summary: Summary,
    piece: Arc<Piece>,
}

/// The blocks of a part whose seats (ordinals, in show order) show
/// `statuses`: each block of `kept` whose statuses are the same is taken as
/// it is, the others are written again.
fn blocks_of(
    entry: &CatalogEntry,
    seats: &[usize],
    statuses: &[SeatStatus],
    mut kept: Vec<Block>,
) -> Vec<Block> {
    kept.truncate(statuses.len().div_ceil(SEATS_PER_BLOCK));
    let mut kept = kept.into_iter();
    seats
        .chunks(SEATS_PER_BLOCK)
        .zip(statuses.chunks(SEATS_PER_BLOCK))
        .enumerate()
        .map(|(index, (seats, statuses))| {
            if let Some(block) = kept.next().filter(|b| b.statuses == statuses) {
                return block;
            }
            let mut out = String::with_capacity(statuses.len() * 57);
            let mut summary = Summary::default();
            for (n, (&seat, &status)) in seats.iter().zip(statuses).enumerate() {
                if index > 0 || n > 0 {
                    out.push(',');
                }
                summary.count(status);
                let prefix = entry.seat_json_prefix.get(seat).map_or("", |p| &**p);
                push_seat(&mut out, prefix, status);
            }
            Block {
                statuses: statuses.to_vec(),
                summary,
                piece: Arc::new(Piece::new(out)),
            }
        })
        .collect()
}

/// The answer of a part whose seats (ordinals, in show order) show
/// `statuses`, at `as_of`: a head, the blocks (those of `kept` still true
/// taken as they are) and a tail; and the blocks, to keep.
fn write_answer(
    entry: &CatalogEntry,
    seats: &[usize],
    statuses: &[SeatStatus],
    pools: &[PoolNow],
    as_of: DateTime<Utc>,
    kept: Vec<Block>,
) -> serde_json::Result<(Vec<Block>, Rendered)> {
    let blocks = blocks_of(entry, seats, statuses, kept);
    let summary = (blocks.iter()).fold(Summary::default(), |sum, b| sum + b.summary);
    let mut pieces = Vec::with_capacity(blocks.len() + 2);
    pieces.push(Arc::new(Piece::new(document_head(entry, None, as_of)?)));
    pieces.extend(blocks.iter().map(|b| b.piece.clone()));
    pieces.push(Arc::new(Piece::new(document_tail(entry, pools, summary)?)));
    Ok((blocks, Rendered::from_pieces(pieces)))
}

/// Why a rendered answer could not be given.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("availability could not be rendered: {0}")]
    Render(String),
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
                watermark: WHOLE_SHOW.into(),
                fresh_through: 0,
            }),
            parts: Mutex::new(HashMap::new()),
        });
        shows.insert(show_id.clone(), slot.clone());
        slot
    }

    /// Each seat's status at `now` as `viewer` sees it, in show order.
    pub async fn statuses(
        &self,
        shows: &Shows,
        entry: &CatalogEntry,
        viewer: &Viewer,
        now: DateTime<Utc>,
    ) -> Result<Vec<SeatStatus>, StoreError> {
        Ok(self
            .statuses_and_next_expiry(shows, entry, viewer, now)
            .await?
            .0)
    }

    /// The show's seat rows as kept, brought up to date (the rows changed
    /// since the last look read), handed to `f` under the show's lock.
    pub async fn with_rows<R>(
        &self,
        shows: &Shows,
        entry: &CatalogEntry,
        f: impl FnOnce(&[KeptSeat]) -> R,
    ) -> Result<R, StoreError> {
        use std::sync::atomic::Ordering;
        let seats = entry.show.seats.len();
        let slot = self.slot(&entry.show.show_id);
        let ticket = slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
        let mut cached = slot.cached.lock().await;
        if cached.rows.len() != seats {
            cached.rows = vec![KeptSeat::default(); seats];
            cached.watermark = WHOLE_SHOW.into();
            cached.fresh_through = 0;
        }
        if cached.fresh_through < ticket {
            let starting = slot.tickets.load(Ordering::SeqCst);
            let (changes, next) = shows
                .seat_changes(&entry.show.show_id, &cached.watermark)
                .await?;
            for change in changes {
                let ordinal = change.ordinal;
                if let Some(row) = cached.rows.get_mut(ordinal) {
                    *row = KeptSeat::of(entry, change);
                }
            }
            cached.watermark = next;
            cached.fresh_through = starting;
        }
        Ok(f(&cached.rows))
    }

    /// Each seat's status at `now` as `viewer` sees it, in show order, and
    /// the earliest `expires_at` (µs) after `now` of a seat still held: the
    /// instant the answer next changes without any event (the live feed's
    /// timer).
    pub async fn statuses_and_next_expiry(
        &self,
        shows: &Shows,
        entry: &CatalogEntry,
        viewer: &Viewer,
        now: DateTime<Utc>,
    ) -> Result<(Vec<SeatStatus>, Option<i64>), StoreError> {
        let now_us = to_micros(now);
        self.with_rows(shows, entry, |rows| {
            let mut next_expiry: Option<i64> = None;
            let statuses = rows
                .iter()
                .map(|row| {
                    let status = row.status_at(now);
                    if let (SeatStatus::Held, Some(at)) = (status, row.expires_at_us) {
                        if at > now_us {
                            next_expiry = Some(next_expiry.map_or(at, |n| n.min(at)));
                        }
                    }
                    viewer.sees(status, row.channel(entry))
                })
                .collect();
            (statuses, next_expiry)
        })
        .await
    }
}

/// Availability of a show at one instant: what the availability answer,
/// the live stream's snapshot and its changes are written from.
#[derive(Debug, Clone, PartialEq)]
pub struct Current {
    /// Each seat's status, in show order.
    pub statuses: Vec<SeatStatus>,
    /// Each pool's figures, in show order.
    pub pools: Vec<PoolNow>,
    /// The earliest instant (µs) after this one at which a held seat or
    /// pool place expires: the answer changes then without any event.
    pub next_expiry_us: Option<i64>,
}

impl AvailabilityCache {
    /// Seats from the cache, pools from their shards, both at `now`, as
    /// `viewer` sees them.
    pub async fn current(
        &self,
        shows: &Shows,
        entry: &CatalogEntry,
        viewer: &Viewer,
        now: DateTime<Utc>,
    ) -> Result<Current, StoreError> {
        let (statuses, seats_next) = self
            .statuses_and_next_expiry(shows, entry, viewer, now)
            .await?;
        if entry.show.pools.is_empty() {
            return Ok(Current {
                statuses,
                pools: Vec::new(),
                next_expiry_us: seats_next,
            });
        }
        let show_id = &entry.show.show_id;
        let now_us = to_micros(now);
        let figures = shows.pool_figures(&entry.show, now_us).await?;
        let pools_next = shows.next_pool_expiry(show_id, now_us).await?;
        let pools = entry
            .show
            .pools
            .iter()
            .map(|pool| {
                figures
                    .get(&pool.pool_id)
                    .map_or_else(PoolNow::default, |f| viewer.pool(f))
            })
            .collect();
        let next_expiry_us = match (seats_next, pools_next) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(Current {
            statuses,
            pools,
            next_expiry_us,
        })
    }
}

impl AvailabilityCache {
    /// The availability answer of the show (or of one `section`) at the
    /// clock's instant, rendered once and served again while the statuses
    /// and pools it shows are still the current ones. Its `as_of` is the
    /// instant it was rendered at: what it says was true then and is still
    /// true at the time of the query. A request that arrives while the part
    /// is being checked or rendered is answered by the next check (started
    /// after it arrived) instead of queueing one of its own.
    pub async fn rendered(
        &self,
        shows: &Shows,
        entry: &Arc<CatalogEntry>,
        section: Option<&str>,
        viewer: &Viewer,
        clock: &dyn Clock,
    ) -> Result<Arc<Rendered>, RenderError> {
        use std::sync::atomic::Ordering;
        let part = Part::of(entry, section);
        let part_slot = self.part_slot(&entry.show.show_id, &part, viewer);
        let ticket = part_slot.tickets.fetch_add(1, Ordering::SeqCst) + 1;
        let mut kept = part_slot.kept.lock().await;
        if let Some(kept) = kept.as_ref().filter(|k| k.fresh_through >= ticket) {
            return Ok(kept.rendered.clone());
        }
        let starting = part_slot.tickets.load(Ordering::SeqCst);
        let now = clock.now();
        let current = self.current(shows, entry, viewer, now).await?;
        let seats = part.seats(entry);
        let statuses: Vec<SeatStatus> = (seats.iter())
            .map(|&ordinal| current.statuses.get(ordinal).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| RenderError::Render("a seat without a status".into()))?;
        if let Some(still) = kept.as_mut().filter(|k| {
            k.as_of <= now
                && k.pools == current.pools
                && (k.blocks.iter().flat_map(|b| &b.statuses)).eq(&statuses)
        }) {
            still.fresh_through = starting;
            return Ok(still.rendered.clone());
        }
        let before = kept.take().map(|k| k.blocks).unwrap_or_default();
        let entry = entry.clone();
        let pools = current.pools;
        let (blocks, pools, rendered) = tokio::task::spawn_blocking(move || {
            let (blocks, rendered) = write_answer(&entry, &seats, &statuses, &pools, now, before)?;
            Ok::<_, serde_json::Error>((blocks, pools, rendered))
        })
        .await
        .map_err(|e| RenderError::Render(e.to_string()))?
        .map_err(|e| RenderError::Render(e.to_string()))?;
        let rendered = Arc::new(rendered);
        *kept = Some(Kept {
            blocks,
            pools,
            as_of: now,
            fresh_through: starting,
            rendered: rendered.clone(),
        });
        Ok(rendered)
    }

    fn part_slot(&self, show_id: &ShowId, part: &Part, viewer: &Viewer) -> Arc<PartSlot> {
        let slot = self.slot(show_id);
        let mut parts = slot.parts.lock().unwrap_or_else(|p| p.into_inner());
        let key = (part.clone(), viewer.clone());
        if let Some(part_slot) = parts.get(&key) {
            return part_slot.clone();
        }
        if parts.len() >= KEPT_PARTS_PER_SHOW {
            parts.retain(|_, part_slot| Arc::strong_count(part_slot) > 1);
        }
        let part_slot = Arc::new(PartSlot {
            tickets: std::sync::atomic::AtomicU64::new(0),
            kept: tokio::sync::Mutex::new(None),
        });
        parts.insert(key, part_slot.clone());
        part_slot
    }
}

/// One pool in an availability answer or a live change.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PoolAvailability<'a> {
    pool_id: &'a str,
    capacity: u32,
    available: u32,
    held: u32,
    sold: u32,
    /// Places allocated to sales channels (for a channel's view: to it),
    /// not sold: outside `available`. Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    allocated: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Seats by status (pools report their own figures).
#[derive(Serialize, Default, Clone, Copy, PartialEq, Debug, utoipa::ToSchema)]
pub struct Summary {
    available: u32,
    held: u32,
    booked: u32,
    /// Seats allocated to a channel (for a channel's view: free seats not
    /// its own). Absent when none.
    #[serde(skip_serializing_if = "is_zero")]
    not_for_sale: u32,
}

impl Summary {
    fn count(&mut self, status: SeatStatus) {
        match status {
            SeatStatus::Available => self.available += 1,
            SeatStatus::Held => self.held += 1,
            SeatStatus::Booked => self.booked += 1,
            SeatStatus::NotForSale => self.not_for_sale += 1,
        }
    }
}

impl std::ops::Add for Summary {
    type Output = Summary;

    fn add(self, other: Summary) -> Summary {
        Summary {
            available: self.available + other.available,
            held: self.held + other.held,
            booked: self.booked + other.booked,
            not_for_sale: self.not_for_sale + other.not_for_sale,
        }
    }
}

fn pool_entry<'a>(pool: &'a domain::places::PoolSpec, now: PoolNow) -> PoolAvailability<'a> {
    PoolAvailability {
        pool_id: pool.pool_id.as_str(),
        capacity: pool.capacity,
        available: now.available(pool.capacity),
        held: now.held,
        sold: now.sold,
        allocated: now.allocated,
    }
}

fn push_seat(out: &mut String, prefix: &str, status: SeatStatus) {
    out.push_str(prefix);
    out.push_str(status.as_str());
    out.push_str("\"}");
}

/// Writes the availability answer (docs/api.md, "Availability") from the
/// show's preserialized seat entries: for 100,000 seats, a concatenation.
/// With `position`, it is the live stream's `snapshot`. The kept answers
/// ([`AvailabilityCache::rendered`]) are the same bytes, written as a head,
/// blocks of seats and a tail.
pub fn render_document(
    entry: &CatalogEntry,
    section: Option<&str>,
    as_of: DateTime<Utc>,
    statuses: &[SeatStatus],
    pools: &[PoolNow],
    position: Option<i64>,
) -> serde_json::Result<String> {
    let show = &entry.show;
    let mut out = document_head(entry, position, as_of)?;
    out.reserve(statuses.len() * 57);
    let mut summary = Summary::default();
    let mut first = true;
    for ((spec, prefix), status) in show.seats.iter().zip(&entry.seat_json_prefix).zip(statuses) {
        if section.is_some_and(|s| s != spec.section) {
            continue;
        }
        summary.count(*status);
        if !first {
            out.push(',');
        }
        first = false;
        push_seat(&mut out, prefix, *status);
    }
    out.push_str(&document_tail(entry, pools, summary)?);
    Ok(out)
}

/// The answer up to its first seat entry.
fn document_head(
    entry: &CatalogEntry,
    position: Option<i64>,
    as_of: DateTime<Utc>,
) -> serde_json::Result<String> {
    let mut out = String::with_capacity(256);
    out.push_str("{\"show_id\":");
    out.push_str(&serde_json::to_string(entry.show.show_id.as_str())?);
    if let Some(position) = position {
        out.push_str(",\"position\":");
        out.push_str(&position.to_string());
    }
    out.push_str(",\"as_of\":");
    out.push_str(&serde_json::to_string(&as_of)?);
    out.push_str(",\"seats\":[");
    Ok(out)
}

/// The answer after its last seat entry: the pools and the summary.
fn document_tail(
    entry: &CatalogEntry,
    pools: &[PoolNow],
    summary: Summary,
) -> serde_json::Result<String> {
    let pools: Vec<PoolAvailability<'_>> = (entry.show.pools.iter())
        .zip(pools)
        .map(|(pool, figures)| pool_entry(pool, *figures))
        .collect();
    let mut out = String::from("],\"pools\":");
    out.push_str(&serde_json::to_string(&pools)?);
    out.push_str(",\"summary\":");
    out.push_str(&serde_json::to_string(&summary)?);
    out.push('}');
    Ok(out)
}

/// Writes a live `change` (docs/api.md, "Live availability"): the seats and
/// pools of `now` that differ from `before`, or `None` when nothing does.
pub fn render_change(
    entry: &CatalogEntry,
    position: i64,
    before: &Current,
    now: &Current,
) -> serde_json::Result<Option<String>> {
    let mut seats = String::new();
    for ((prefix, old), new) in entry
        .seat_json_prefix
        .iter()
        .zip(&before.statuses)
        .zip(&now.statuses)
    {
        if old != new {
            if !seats.is_empty() {
                seats.push(',');
            }
            push_seat(&mut seats, prefix, *new);
        }
    }
    let pools: Vec<PoolAvailability<'_>> = entry
        .show
        .pools
        .iter()
        .zip(before.pools.iter().zip(&now.pools))
        .filter(|(_, (old, new))| old != new)
        .map(|(pool, (_, new))| pool_entry(pool, *new))
        .collect();
    if seats.is_empty() && pools.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "{{\"position\":{position},\"seats\":[{seats}],\"pools\":{}}}",
        serde_json::to_string(&pools)?
    )))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalog::ShowDefinition;
    use domain::money::Currency;

    /// A show of `seats` seats in sections A and B (alternating runs of 300)
    /// and one pool.
    pub(crate) fn entry(seats: usize) -> CatalogEntry {
        let seats: Vec<serde_json::Value> = (0..seats)
            .map(|n| {
                let section = if (n / 300) % 2 == 0 { "A" } else { "B" };
                serde_json::json!({"seat_id": format!("S{n}"), "section": section,
                    "row": "1", "number": n + 1, "price_cents": 1000})
            })
            .collect();
        let definition: ShowDefinition = serde_json::from_value(serde_json::json!({
            "name": "blocks", "starts_at": "2030-01-01T20:00:00Z", "hold_ttl_seconds": 600,
            "seats": seats, "pools": [{"pool_id": "floor", "capacity": 50, "price_cents": 500}]
        }))
        .unwrap();
        let show = definition
            .with_default_currency(Currency::EUR)
            .to_show(ShowId::parse("blocks").unwrap(), None)
            .unwrap();
        CatalogEntry::new(show, String::new())
    }

    /// The kept answer's bytes for `section`, written by `write_answer`
    /// (from `kept`), and its blocks.
    fn from_blocks(
        entry: &CatalogEntry,
        section: Option<&str>,
        statuses: &[SeatStatus],
        kept: Vec<Block>,
        as_of: DateTime<Utc>,
    ) -> (String, Vec<Block>) {
        let seats = Part::of(entry, section).seats(entry);
        let part: Vec<SeatStatus> = seats.iter().map(|&n| statuses[n]).collect();
        let (blocks, rendered) = write_answer(
            entry,
            &seats,
            &part,
            &[PoolNow {
                held: 3,
                sold: 4,
                ..PoolNow::default()
            }],
            as_of,
            kept,
        )
        .unwrap();
        (String::from_utf8(rendered.joined()).unwrap(), blocks)
    }

    #[test]
    fn an_answer_in_blocks_is_the_document_and_a_change_writes_only_its_block() {
        let entry = entry(SEATS_PER_BLOCK * 3 + 17);
        let as_of = DateTime::<Utc>::from_timestamp(1_900_000_000, 0).unwrap();
        let mut statuses = vec![SeatStatus::Available; entry.show.seats.len()];
        statuses[5] = SeatStatus::Held;
        statuses[SEATS_PER_BLOCK * 3 + 16] = SeatStatus::Booked;
        for section in [None, Some("A"), Some("B"), Some("none")] {
            let (body, blocks) = from_blocks(&entry, section, &statuses, Vec::new(), as_of);
            let document = render_document(
                &entry,
                section,
                as_of,
                &statuses,
                &[PoolNow {
                    held: 3,
                    sold: 4,
                    ..PoolNow::default()
                }],
                None,
            )
            .unwrap();
            assert_eq!(body, document, "section {section:?}");
            let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert!(parsed["seats"].is_array());
            if section.is_none() {
                assert_eq!(blocks.len(), 4);
                assert_eq!(
                    parsed["summary"],
                    serde_json::json!({"available": SEATS_PER_BLOCK * 3 + 15, "held": 1, "booked": 1})
                );
            }
        }
        // One seat of the second block changes: the other blocks' pieces
        // are the very ones kept, the second is written again.
        let (_, kept) = from_blocks(&entry, None, &statuses, Vec::new(), as_of);
        let pieces: Vec<Arc<Piece>> = kept.iter().map(|b| b.piece.clone()).collect();
        statuses[SEATS_PER_BLOCK + 1] = SeatStatus::Held;
        let (body, blocks) = from_blocks(&entry, None, &statuses, kept, as_of);
        assert_eq!(
            body,
            render_document(
                &entry,
                None,
                as_of,
                &statuses,
                &[PoolNow {
                    held: 3,
                    sold: 4,
                    ..PoolNow::default()
                }],
                None
            )
            .unwrap()
        );
        let same: Vec<bool> = (blocks.iter().zip(&pieces))
            .map(|(block, piece)| Arc::ptr_eq(&block.piece, piece))
            .collect();
        assert_eq!(same, [true, false, true, true]);
        // A part that shrank (kept blocks beyond its end) drops them.
        let (body, blocks) = from_blocks(&entry, Some("none"), &statuses, blocks, as_of);
        assert!(blocks.is_empty());
        assert!(body.contains("\"seats\":[]"));
    }
}
