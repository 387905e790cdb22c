//! The waiting room as read: each show's queue kept in memory, brought up
//! to date from the log (the show's room stream and its buyers' queue
//! entries, `LogFilter::Queue`), and every buyer's number and standing
//! computed from it at the instant of the read.
//!
//! Numbers are derived from the log's order, never stored, and never change
//! once read: the log is read tailing (never past a transaction still
//! open), so what it shows below the read position is final. Buyers whose
//! join precedes the room's seed in the log (everyone who joined before the
//! sale started: the seed is drawn at the start) are numbered 1..P by their
//! key (`waiting_room::early_key`, from the seed); later ones P+1, P+2, ...
//! in log order. Every instance reads the same log, so every instance gives
//! a buyer the same number. Nothing here writes: the seed is drawn by the
//! command side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cqrs_es::Aggregate;
use domain::ids::{BuyerId, ShowId};
use domain::waiting_room::{
    early_key, QueueEntry, QueueEvent, RoomEvent, WaitingRoom, WaitingRoomSettings,
};
use tokio::sync::Mutex as AsyncMutex;

use crate::store::{EventLog, LogEvent, LogFilter, StoreError};

/// How long a queue read may use what the book last read of the log: a
/// join on another instance shows within this. Every status read and every
/// hold on a show with a waiting room would otherwise read the log once
/// more. Changes to the schedule take effect later than this
/// (`waiting_room::CHANGE_LEAD_MS`), so every instance knows of one before it
/// counts.
pub const BOOK_FRESHNESS: Duration = Duration::from_millis(100);

/// How long a command waits for the log to show the book what it just
/// appended (its own join, a seed, a rate change) before answering with
/// what the book has: a read of the show shows a write once the show's
/// writers before it have committed, in milliseconds but for a long
/// transaction of the same show.
pub const BOOK_SETTLE_WAIT: Duration = Duration::from_secs(2);

/// The first pause between two reads while waiting; it doubles up to the
/// last.
const SETTLE_FIRST_PAUSE: Duration = Duration::from_millis(2);
const SETTLE_LAST_PAUSE: Duration = Duration::from_millis(50);

/// Log events read per statement while catching up.
const BOOK_PAGE: i64 = 10_000;

/// At most this many joins of this instance wait to be read back from the
/// log (they are, within a read or two; the bound keeps a stalled log from
/// growing it).
const MAX_PENDING_JOINS: usize = 100_000;

/// Where a buyer stands among the joins, in log order.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// Joined before the room's seed: `order` among those (from 1, in log
    /// order); `rank` their number once the seed is known.
    Early { order: u64, rank: Option<u64> },
    /// Joined after the seed: the `index`th of those (from 0).
    Late { index: usize },
}

/// One show's queue, as far as the log was read.
#[derive(Default)]
pub struct ShowWaitingRoom {
    /// The log position read to.
    after: i64,
    read_at: Option<Instant>,
    pub room: WaitingRoom,
    places: HashMap<BuyerId, Place>,
    /// Joins before the seed, in log order (emptied once ranked).
    early: Vec<BuyerId>,
    /// How many joined before the seed (`P`): the late ones come after.
    early_count: u64,
    /// The admission slot of each later joiner, in log order (increasing:
    /// `WaitingRoom::slot_after`).
    late_slots: Vec<u64>,
    /// The show's room settings (slots are counted on its schedule).
    settings: Option<WaitingRoomSettings>,
    /// Joins this instance appended that its reads of the log have not
    /// reached yet, in the order appended.
    pending: HashMap<BuyerId, u64>,
    pending_seq: u64,
}

/// A buyer's number in a queue, or where it will come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Number {
    /// Fixed: the schedule admits the buyer as it reaches it.
    Fixed(u64),
    /// Not fixed yet: a place among the early joiners (in join order)
    /// until the start draws the order, or an estimate for a join the log
    /// has not shown yet.
    Provisional(u64),
}

impl Number {
    pub fn value(self) -> u64 {
        match self {
            Number::Fixed(n) | Number::Provisional(n) => n,
        }
    }
}

impl ShowWaitingRoom {
    fn apply(&mut self, event: &LogEvent) -> Result<(), StoreError> {
        let corrupt =
            |e: serde_json::Error| StoreError::Corrupt(format!("event {}: {e}", event.position));
        if event.aggregate_type == WaitingRoom::TYPE {
            let room: RoomEvent = serde_json::from_str(&event.payload).map_err(corrupt)?;
            let sealed = self.room.seed.is_some();
            self.room.apply_event(&room);
            if !sealed && self.room.seed.is_some() {
                self.rank_early();
            }
        } else if event.aggregate_type == QueueEntry::TYPE {
            let QueueEvent::QueueJoined { buyer, at, .. } =
                serde_json::from_str(&event.payload).map_err(corrupt)?;
            self.join(buyer, at);
        }
        Ok(())
    }

    /// Adds a join read from the log (once per buyer: a second record of
    /// it changes nothing).
    fn join(&mut self, buyer: BuyerId, at: DateTime<Utc>) {
        self.pending.remove(&buyer);
        if self.places.contains_key(&buyer) {
            return;
        }
        let place = match (self.room.seed, &self.settings) {
            (Some(_), Some(settings)) => {
                let previous = self.late_slots.last().copied().unwrap_or(self.early_count);
                self.late_slots
                    .push(self.room.slot_after(settings, previous, at));
                Place::Late {
                    index: self.late_slots.len() - 1,
                }
            }
            _ => {
                self.early_count += 1;
                self.early.push(buyer.clone());
                Place::Early {
                    order: self.early_count,
                    rank: None,
                }
            }
        };
        self.places.insert(buyer, place);
    }

    /// The seed is known: the early joiners' numbers, by their keys.
    fn rank_early(&mut self) {
        let Some(seed) = self.room.seed else {
            return;
        };
        let mut keyed: Vec<(u64, BuyerId)> = std::mem::take(&mut self.early)
            .into_iter()
            .map(|b| (early_key(seed, &b), b))
            .collect();
        keyed.sort_unstable();
        for (i, (_, buyer)) in keyed.into_iter().enumerate() {
            if let Some(Place::Early { rank, .. }) = self.places.get_mut(&buyer) {
                *rank = Some(i as u64 + 1);
            }
        }
    }

    /// A join this instance appended, before the log shows it.
    fn joined_here(&mut self, buyer: BuyerId) {
        if !self.places.contains_key(&buyer) && self.pending.len() < MAX_PENDING_JOINS {
            self.pending_seq += 1;
            self.pending.entry(buyer).or_insert(self.pending_seq);
        }
    }

    /// Buyers in the queue as far as the log was read.
    pub fn len(&self) -> u64 {
        self.early_count + self.late_slots.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buyer's number and admission slot (none until the number is
    /// fixed); `None` if the buyer is not in the queue.
    pub fn number(&self, buyer: &BuyerId) -> Option<(Number, Option<u64>)> {
        let Some(place) = self.places.get(buyer) else {
            // Joined here, not read back yet: behind everyone read so far,
            // in the order this instance appended.
            let seq = *self.pending.get(buyer)?;
            let before = self.pending.values().filter(|s| **s < seq).count() as u64;
            return Some((Number::Provisional(self.len() + before + 1), None));
        };
        Some(match *place {
            Place::Early {
                rank: Some(rank), ..
            } => (Number::Fixed(rank), Some(rank)),
            Place::Early { order, rank: None } => (Number::Provisional(order), None),
            Place::Late { index } => (
                Number::Fixed(self.early_count + index as u64 + 1),
                self.late_slots.get(index).copied(),
            ),
        })
    }

    /// Whether the buyer joined: read from the log, or appended here.
    pub fn contains(&self, buyer: &BuyerId) -> bool {
        self.places.contains_key(buyer) || self.pending.contains_key(buyer)
    }

    /// Whether the log has shown this buyer's join (a number that never
    /// changes), not just this instance's append.
    pub fn has_read(&self, buyer: &BuyerId) -> bool {
        self.places.contains_key(buyer)
    }

    /// How many buyers the schedule has let in by the time it made
    /// `admissions` admissions (slots up to it that somebody holds).
    fn let_in(&self, admissions: u64) -> u64 {
        admissions.min(self.early_count)
            + self.late_slots.partition_point(|slot| *slot <= admissions) as u64
    }

    /// Buyers with a number below `number` who are not let in at `now`.
    pub fn ahead(&self, settings: &WaitingRoomSettings, number: u64, now: DateTime<Utc>) -> u64 {
        let let_in = self.let_in(self.room.admitted_by(settings, now));
        number.saturating_sub(1).saturating_sub(let_in)
    }

    /// Buyers waiting, and admitted now (their admission not yet over).
    pub fn counts(&self, settings: &WaitingRoomSettings, now: DateTime<Utc>) -> (u64, u64) {
        let let_in = self.let_in(self.room.admitted_by(settings, now));
        let over = self.let_in(
            self.room
                .admitted_by(settings, now - settings.admission_ttl()),
        );
        (self.len() - let_in, let_in - over)
    }
}

/// The queues of the shows with a waiting room this instance serves.
pub struct WaitingRoomBook {
    log: EventLog,
    shows: Mutex<HashMap<ShowId, Arc<AsyncMutex<ShowWaitingRoom>>>>,
}

impl WaitingRoomBook {
    pub fn new(log: EventLog) -> Self {
        Self {
            log,
            shows: Mutex::default(),
        }
    }

    fn queue(&self, show_id: &ShowId) -> Arc<AsyncMutex<ShowWaitingRoom>> {
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        shows.entry(show_id.clone()).or_default().clone()
    }

    /// Runs `read` on the show's queue, read from the log up to now (or
    /// within `BOOK_FRESHNESS`). `read_since`, when given, asks for a log
    /// read begun at or after that instant: callers asking at once share
    /// one read instead of queueing a read each behind the show's lock.
    /// `settings` are the show's (a show's waiting room never changes).
    pub async fn read<R>(
        &self,
        show_id: &ShowId,
        settings: &WaitingRoomSettings,
        read_since: Option<Instant>,
        read: impl FnOnce(&mut ShowWaitingRoom) -> R,
    ) -> Result<R, StoreError> {
        let queue = self.queue(show_id);
        let mut queue = queue.lock().await;
        queue.settings.get_or_insert(*settings);
        let stale = queue.read_at.is_none_or(|at| {
            read_since.is_some_and(|since| at < since) || at.elapsed() >= BOOK_FRESHNESS
        });
        if stale {
            self.catch_up(show_id, &mut queue).await?;
        }
        Ok(read(&mut queue))
    }

    /// Reads the log until the queue shows what `shown` asks (a write this
    /// instance just made), for up to `BOOK_SETTLE_WAIT`, then runs `read`
    /// on it, shown or not.
    pub async fn read_until<R>(
        &self,
        show_id: &ShowId,
        settings: &WaitingRoomSettings,
        shown: impl Fn(&ShowWaitingRoom) -> bool,
        read: impl FnOnce(&mut ShowWaitingRoom) -> R,
    ) -> Result<R, StoreError> {
        let started = Instant::now();
        let mut pause = SETTLE_FIRST_PAUSE;
        let queue = self.queue(show_id);
        loop {
            {
                let mut queue = queue.lock().await;
                queue.settings.get_or_insert(*settings);
                if !shown(&queue) {
                    self.catch_up(show_id, &mut queue).await?;
                }
                if shown(&queue) || started.elapsed() >= BOOK_SETTLE_WAIT {
                    return Ok(read(&mut queue));
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(SETTLE_LAST_PAUSE);
        }
    }

    /// Reads what the log holds past the queue's position.
    async fn catch_up(
        &self,
        show_id: &ShowId,
        queue: &mut ShowWaitingRoom,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        loop {
            let events = self
                .log
                .read_log(LogFilter::Queue(show_id.as_str()), queue.after, BOOK_PAGE)
                .await?;
            for event in &events {
                queue.apply(event)?;
            }
            match events.last() {
                Some(last) => queue.after = last.position,
                None => break,
            }
            if (events.len() as i64) < BOOK_PAGE {
                break;
            }
        }
        queue.read_at = Some(started);
        Ok(())
    }

    /// The shows whose queues this instance has read, each with whether
    /// its room is open (not closed).
    pub async fn rooms(&self) -> Vec<(ShowId, bool)> {
        let shows: Vec<(ShowId, Arc<AsyncMutex<ShowWaitingRoom>>)> = {
            let shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
            shows
                .iter()
                .map(|(id, q)| (id.clone(), q.clone()))
                .collect()
        };
        let mut rooms = Vec::with_capacity(shows.len());
        for (show_id, queue) in shows {
            let open = queue.lock().await.room.closed.is_none();
            rooms.push((show_id, open));
        }
        rooms
    }

    /// Drops what the book holds of a show (its room and every entry); a
    /// later read of it reads the show's queue from the log again.
    pub fn forget(&self, show_id: &ShowId) {
        let mut shows = self.shows.lock().unwrap_or_else(|p| p.into_inner());
        shows.remove(show_id);
    }

    /// A join this instance appended: known at once, before the log shows
    /// it to a read of the show (read your writes), with a provisional number.
    pub async fn joined(&self, show_id: &ShowId, buyer: BuyerId) {
        let queue = self.queue(show_id);
        queue.lock().await.joined_here(buyer);
    }

    /// A room event this instance appended: the next read goes to the log
    /// (which has it, in its place among the joins).
    pub async fn room_changed(&self, show_id: &ShowId) {
        let queue = self.queue(show_id);
        queue.lock().await.read_at = None;
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Duration, Utc};
    use domain::ids::BuyerId;
    use domain::waiting_room::{RoomEvent, WaitingRoomSettings};

    use super::{Number, ShowWaitingRoom};

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).expect("instant")
    }

    fn buyer(name: &str) -> BuyerId {
        BuyerId::parse(name).expect("buyer")
    }

    /// One a second from `at(0)`, each admission for a minute.
    fn queue() -> ShowWaitingRoom {
        let mut queue = ShowWaitingRoom {
            settings: Some(WaitingRoomSettings {
                sale_starts_at: at(0),
                admit_per_minute: 60,
                admission_ttl_seconds: 60,
            }),
            ..ShowWaitingRoom::default()
        };
        for name in ["a", "b", "c"] {
            queue.join(buyer(name), at(-10));
        }
        queue
    }

    #[test]
    fn early_joiners_are_provisional_until_the_seed_then_a_permutation() {
        let mut q = queue();
        assert_eq!(q.number(&buyer("b")), Some((Number::Provisional(2), None)));
        q.room.apply_event(&RoomEvent::SeedDrawn { seed: 42 });
        q.rank_early();
        let mut numbers: Vec<u64> = ["a", "b", "c"]
            .iter()
            .map(|n| match q.number(&buyer(n)) {
                Some((Number::Fixed(n), Some(slot))) if slot == n => n,
                other => panic!("{other:?}"),
            })
            .collect();
        numbers.sort_unstable();
        assert_eq!(numbers, vec![1, 2, 3]);
    }

    #[test]
    fn a_late_joiner_comes_after_the_early_ones_with_the_next_admission() {
        let mut q = queue();
        q.room.apply_event(&RoomEvent::SeedDrawn { seed: 42 });
        q.rank_early();
        // Ten seconds in, ten admissions made, three of them used.
        q.join(buyer("d"), at(10));
        q.join(buyer("e"), at(10));
        assert_eq!(q.number(&buyer("d")), Some((Number::Fixed(4), Some(11))));
        assert_eq!(q.number(&buyer("e")), Some((Number::Fixed(5), Some(12))));
        let settings = q.settings.expect("settings");
        // At 10.5 s the early three are in, d and e wait (e behind d).
        let now = at(10) + Duration::milliseconds(500);
        assert_eq!(q.ahead(&settings, 5, now), 1);
        assert_eq!(q.counts(&settings, now), (2, 3));
        // At 12 s both are in; at 61 s the first early admission is over.
        assert_eq!(q.counts(&settings, at(12)), (0, 5));
        assert_eq!(q.counts(&settings, at(61)), (0, 4));
        // A join seen twice is one join.
        q.join(buyer("d"), at(11));
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn a_join_of_this_instance_is_provisional_until_the_log_shows_it() {
        let mut q = queue();
        q.joined_here(buyer("x"));
        q.joined_here(buyer("y"));
        assert!(q.contains(&buyer("y")) && !q.has_read(&buyer("y")));
        assert_eq!(q.number(&buyer("y")), Some((Number::Provisional(5), None)));
        q.join(buyer("x"), at(-5));
        assert_eq!(q.number(&buyer("x")), Some((Number::Provisional(4), None)));
        assert_eq!(q.number(&buyer("y")), Some((Number::Provisional(5), None)));
    }
}
