//! The waiting room of an onsale: who may hold seats, and when.
//!
//! Buyers join a show's queue and get a queue number: those who joined
//! before the sale started are numbered 1..P in a random order fixed at
//! the start (their keys, drawn from the room's seed: joining early earns
//! nothing), later ones P+1, P+2, ... in order of arrival. Admission is
//! computed, never granted: the schedule makes `admit_per_minute`
//! admissions a minute from the start (piecewise as the rate changes, none
//! while the room is paused). Each buyer holds one admission slot: the
//! early joiners slots 1..P, a later buyer the first admission the schedule
//! makes after they joined (`WaitingRoom::slot_after`). A buyer is admitted once
//! the schedule reaches their slot, for `admission_ttl_seconds` from that
//! instant. No job runs for anyone to be let in.
//!
//! The room's stream (one per show) records what shapes the schedule: the
//! seed (drawn once, at the start), rate changes, pauses and resumes
//! (nothing is available, then something is again), each with the instant
//! it takes effect, and the close (sold out). A replay of it gives every
//! instance the same schedule.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{BuyerId, ShowId};

/// Admissions a minute: at least one (a room that admits nobody is a closed
/// sale), at most a million (ten times the biggest onsales' peak).
pub const MIN_ADMIT_PER_MINUTE: u32 = 1;
pub const MAX_ADMIT_PER_MINUTE: u32 = 1_000_000;

/// How long an admission lasts for a buyer to place a hold: at least a
/// minute (a phone on a slow network), at most an hour (longer keeps the
/// schedule's promises about who is next meaningless).
pub const MIN_ADMISSION_TTL_SECONDS: u32 = 60;
pub const MAX_ADMISSION_TTL_SECONDS: u32 = 3_600;

/// How long after it is recorded a change of the schedule (a rate change,
/// a pause, a resume) takes effect: every instance reads the room's stream
/// at least every 100 ms (`query::queue::BOOK_FRESHNESS`), so with half a
/// second's lead every instance knows of a change before it counts, and
/// all of them give every buyer the same standing at every instant.
pub const CHANGE_LEAD_MS: i64 = 500;

pub fn change_lead() -> Duration {
    Duration::milliseconds(CHANGE_LEAD_MS)
}

/// A show's waiting room as its definition sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingRoomSettings {
    pub sale_starts_at: DateTime<Utc>,
    pub admit_per_minute: u32,
    pub admission_ttl_seconds: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomSettingsError {
    #[error(
        "waiting_room.admit_per_minute must be {MIN_ADMIT_PER_MINUTE}..={MAX_ADMIT_PER_MINUTE}"
    )]
    Rate,
    #[error(
        "waiting_room.admission_ttl_seconds must be {MIN_ADMISSION_TTL_SECONDS}..={MAX_ADMISSION_TTL_SECONDS}"
    )]
    AdmissionTtl,
}

impl WaitingRoomSettings {
    pub fn check(&self) -> Result<(), RoomSettingsError> {
        check_rate(self.admit_per_minute)?;
        if !(MIN_ADMISSION_TTL_SECONDS..=MAX_ADMISSION_TTL_SECONDS)
            .contains(&self.admission_ttl_seconds)
        {
            return Err(RoomSettingsError::AdmissionTtl);
        }
        Ok(())
    }

    pub fn admission_ttl(&self) -> Duration {
        Duration::seconds(i64::from(self.admission_ttl_seconds))
    }
}

pub fn check_rate(admit_per_minute: u32) -> Result<(), RoomSettingsError> {
    if (MIN_ADMIT_PER_MINUTE..=MAX_ADMIT_PER_MINUTE).contains(&admit_per_minute) {
        Ok(())
    } else {
        Err(RoomSettingsError::Rate)
    }
}

/// The key that orders a buyer who joined before the sale: a hash of the
/// room's seed and the buyer (FNV-1a over the bytes, then a 64-bit mix).
/// Uniform over buyers whatever their ids; unknown to anyone before the
/// seed is drawn, and the seed is drawn by the service.
pub fn early_key(seed: u64, buyer: &BuyerId) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for byte in buyer.as_str().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64's finaliser: every input bit moves every output bit.
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// Why a room closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// Every seat and place of the show is booked.
    SoldOut,
}

/// What the room's stream records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RoomEvent {
    /// The seed of the order of those who join before the sale starts.
    SeedDrawn {
        seed: u64,
    },
    /// From `at`, the schedule admits this many a minute.
    RateChanged {
        at: DateTime<Utc>,
        admit_per_minute: u32,
    },
    /// Nothing was available at `at`: no one is admitted until a resume.
    Paused {
        at: DateTime<Utc>,
    },
    Resumed {
        at: DateTime<Utc>,
    },
    /// The sale is over: no one is admitted any more, no one joins.
    Closed {
        at: DateTime<Utc>,
        reason: CloseReason,
    },
}

event_names!(RoomEvent {
    SeedDrawn => "SeedDrawn",
    RateChanged => "RateChanged",
    Paused => "AdmissionsPaused",
    Resumed => "AdmissionsResumed",
    Closed => "RoomClosed",
});

/// What can change a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomCommand {
    /// Fix the order of early joiners (once; later draws change nothing).
    DrawSeed { seed: u64 },
    /// The operator changes the rate from `at` on.
    ChangeRate {
        at: DateTime<Utc>,
        admit_per_minute: u32,
    },
    /// Nothing is available at `at` (something is held, nothing free).
    Pause { at: DateTime<Utc> },
    /// Something is available again at `at`.
    Resume { at: DateTime<Utc> },
    /// Everything is booked at `at`.
    Close {
        at: DateTime<Utc>,
        reason: CloseReason,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoomError {
    #[error(transparent)]
    Settings(#[from] RoomSettingsError),
    #[error("the waiting room is closed")]
    Closed,
}

/// Decides a command on a room. Pauses and resumes that change nothing,
/// and a second seed, record nothing: several instances may observe the
/// same moment, and only the first record counts.
pub fn decide(room: &WaitingRoom, command: &RoomCommand) -> Result<Vec<RoomEvent>, RoomError> {
    use RoomCommand as C;
    if room.closed.is_some() && !matches!(command, C::DrawSeed { .. }) {
        return match command {
            C::Close { .. } => Ok(vec![]),
            _ => Err(RoomError::Closed),
        };
    }
    match *command {
        C::DrawSeed { seed } => Ok(draw_seed(room, seed)),
        C::ChangeRate {
            at,
            admit_per_minute,
        } => change_rate(at, admit_per_minute),
        C::Pause { at } => Ok(pause(room, at)),
        C::Resume { at } => Ok(resume(room, at)),
        // Closing a closed room was answered above: only the first close counts.
        C::Close { at, reason } => Ok(vec![RoomEvent::Closed { at, reason }]),
    }
}

/// Fixes the order of early joiners: the first seed drawn is the seed.
fn draw_seed(room: &WaitingRoom, seed: u64) -> Vec<RoomEvent> {
    match room.seed {
        Some(_) => vec![],
        None => vec![RoomEvent::SeedDrawn { seed }],
    }
}

/// A new rate from `at` on, if it is within the room's limits.
fn change_rate(at: DateTime<Utc>, admit_per_minute: u32) -> Result<Vec<RoomEvent>, RoomError> {
    check_rate(admit_per_minute)?;
    Ok(vec![RoomEvent::RateChanged {
        at,
        admit_per_minute,
    }])
}

/// Stops admissions from `at`, unless they are stopped already.
fn pause(room: &WaitingRoom, at: DateTime<Utc>) -> Vec<RoomEvent> {
    if room.is_paused() {
        vec![]
    } else {
        vec![RoomEvent::Paused { at }]
    }
}

/// Admits again from `at`, if admissions were stopped.
fn resume(room: &WaitingRoom, at: DateTime<Utc>) -> Vec<RoomEvent> {
    if room.is_paused() {
        vec![RoomEvent::Resumed { at }]
    } else {
        vec![]
    }
}

impl Decider for WaitingRoom {
    type Command = RoomCommand;
    type Event = RoomEvent;
    type Error = RoomError;

    fn decide(&self, command: &RoomCommand) -> Result<Vec<RoomEvent>, RoomError> {
        decide(self, command)
    }

    fn evolve(&mut self, event: &RoomEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(WaitingRoom, "WaitingRoom");

/// The id of a show's room stream: the show's id.
pub fn waiting_room_stream_id(show: &ShowId) -> String {
    show.as_str().to_owned()
}

/// The id of a buyer's place in a show's queue: `show%buyer` (show ids
/// never hold `%`).
pub fn entry_stream_id(show: &ShowId, buyer: &BuyerId) -> String {
    format!("{}%{}", show.as_str(), buyer.as_str())
}

/// Splits an entry stream id back into its show and buyer.
pub fn parse_entry_stream_id(stream: &str) -> Option<(ShowId, BuyerId)> {
    let (show, buyer) = stream.split_once('%')?;
    Some((ShowId::parse(show).ok()?, BuyerId::parse(buyer).ok()?))
}

/// A buyer's place in a show's queue: joined once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueEntry {
    pub joined: Option<Joined>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Joined {
    pub at: DateTime<Utc>,
    /// Joined before the sale started, by the deciding instance's clock
    /// (see `QueueEvent::QueueJoined`).
    pub early: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum QueueEvent {
    QueueJoined {
        show_id: ShowId,
        buyer: BuyerId,
        at: DateTime<Utc>,
        /// What the deciding instance's clock said (before the start), for
        /// the history. The number follows the log's order instead: a join
        /// recorded before the room's `SeedDrawn` is ordered by the seed,
        /// one recorded after it by arrival (a join decided just before
        /// the start that commits after the seed is the first of the late).
        early: bool,
    },
}

event_names!(QueueEvent {
    QueueJoined => "QueueJoined",
});

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinQueue {
    pub show_id: ShowId,
    pub buyer: BuyerId,
    pub settings: WaitingRoomSettings,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    #[error("the sale is over: everything is booked")]
    SoldOut,
}

/// Joins the queue at `now`, unless already in it (joining again changes
/// nothing) or the room is closed.
pub fn join(
    entry: &QueueEntry,
    room: &WaitingRoom,
    command: &JoinQueue,
    now: DateTime<Utc>,
) -> Result<Vec<QueueEvent>, QueueError> {
    if entry.joined.is_some() {
        return Ok(vec![]);
    }
    if room.closed.is_some() {
        return Err(QueueError::SoldOut);
    }
    Ok(vec![QueueEvent::QueueJoined {
        show_id: command.show_id.clone(),
        buyer: command.buyer.clone(),
        at: now,
        early: now < command.settings.sale_starts_at,
    }])
}

impl QueueEntry {
    pub fn apply_event(&mut self, event: &QueueEvent) {
        let QueueEvent::QueueJoined { at, early, .. } = event;
        self.joined = self.joined.or(Some(Joined {
            at: *at,
            early: *early,
        }));
    }
}

impl Decider for QueueEntry {
    type Command = crate::aggregate::Timed<JoinQueue>;
    type Event = QueueEvent;
    type Error = QueueError;

    fn decide(&self, command: &Self::Command) -> Result<Vec<QueueEvent>, QueueError> {
        // The room is not this stream's: a closed room is refused by the
        // service before it asks; here the entry alone decides.
        join(self, &WaitingRoom::default(), &command.command, command.now)
    }

    fn evolve(&mut self, event: &QueueEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(QueueEntry, "QueueEntry");

/// One stretch of the schedule: from `from`, `per_minute` admissions a
/// minute (0 while paused or closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stretch {
    from: DateTime<Utc>,
    per_minute: u64,
}

/// The room, as its stream adds up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingRoom {
    pub seed: Option<u64>,
    /// Rate changes, pauses and resumes, in the order recorded.
    changes: Vec<(DateTime<Utc>, Change)>,
    pub closed: Option<(DateTime<Utc>, CloseReason)>,
    /// Events applied: the stream's version.
    #[serde(default)]
    pub version: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Change {
    Rate(u32),
    Pause,
    Resume,
}

/// Milliseconds of `rate`-a-minute admission: one admission is 60,000 of
/// these, so a schedule's sum stays exact in integers.
const MS_PER_MINUTE: i128 = 60_000;

impl WaitingRoom {
    pub fn apply_event(&mut self, event: &RoomEvent) {
        self.version += 1;
        match event {
            RoomEvent::SeedDrawn { seed } => self.seed = self.seed.or(Some(*seed)),
            RoomEvent::RateChanged {
                at,
                admit_per_minute,
            } => self.changes.push((*at, Change::Rate(*admit_per_minute))),
            RoomEvent::Paused { at } => self.changes.push((*at, Change::Pause)),
            RoomEvent::Resumed { at } => self.changes.push((*at, Change::Resume)),
            RoomEvent::Closed { at, reason } => {
                self.closed = self.closed.or(Some((*at, *reason)));
            }
        }
    }

    pub fn is_paused(&self) -> bool {
        self.changes
            .iter()
            .rev()
            .find_map(|(_, c)| match c {
                Change::Pause => Some(true),
                Change::Resume => Some(false),
                Change::Rate(_) => None,
            })
            .unwrap_or(false)
    }

    /// The rate in force (the last change, else the show's).
    pub fn rate(&self, settings: &WaitingRoomSettings) -> u32 {
        self.changes
            .iter()
            .rev()
            .find_map(|(_, c)| match c {
                Change::Rate(rate) => Some(*rate),
                _ => None,
            })
            .unwrap_or(settings.admit_per_minute)
    }

    /// The schedule from the sale's start: stretches of one rate, each
    /// lasting until the next begins (the last one forever, or until the
    /// room closed).
    fn stretches(&self, settings: &WaitingRoomSettings) -> Vec<Stretch> {
        let start = settings.sale_starts_at;
        let (mut rate, mut paused) = (u64::from(settings.admit_per_minute), false);
        let mut stretches = vec![];
        let mut at = start;
        for (when, change) in &self.changes {
            let when = (*when).max(start);
            if when > at {
                stretches.push(Stretch {
                    from: at,
                    per_minute: if paused { 0 } else { rate },
                });
                at = when;
            }
            match change {
                Change::Rate(r) => rate = u64::from(*r),
                Change::Pause => paused = true,
                Change::Resume => paused = false,
            }
        }
        stretches.push(Stretch {
            from: at,
            per_minute: if paused { 0 } else { rate },
        });
        if let Some((closed_at, _)) = self.closed {
            let closed_at = closed_at.max(start);
            stretches.retain(|s| s.from < closed_at);
            stretches.push(Stretch {
                from: closed_at,
                per_minute: 0,
            });
        }
        stretches
    }

    /// How many buyers the schedule has admitted by `now`.
    pub fn admitted_by(&self, settings: &WaitingRoomSettings, now: DateTime<Utc>) -> u64 {
        if now <= settings.sale_starts_at {
            return 0;
        }
        let stretches = self.stretches(settings);
        let mut admission_ms: i128 = 0;
        for (i, stretch) in stretches.iter().enumerate() {
            if stretch.from >= now {
                break;
            }
            let until = stretches.get(i + 1).map_or(now, |next| next.from.min(now));
            let ms = i128::from((until - stretch.from).num_milliseconds().max(0));
            admission_ms += ms * i128::from(stretch.per_minute);
        }
        u64::try_from(admission_ms / MS_PER_MINUTE).unwrap_or(u64::MAX)
    }

    /// The instant the schedule admits its `number`th buyer; `None` if it
    /// never will as things stand (paused or closed before).
    pub fn admitted_at(
        &self,
        settings: &WaitingRoomSettings,
        number: u64,
    ) -> Option<DateTime<Utc>> {
        let need = i128::from(number) * MS_PER_MINUTE;
        let stretches = self.stretches(settings);
        let mut admission_ms: i128 = 0;
        for (i, stretch) in stretches.iter().enumerate() {
            let rate = i128::from(stretch.per_minute);
            let next = stretches.get(i + 1).map(|n| n.from);
            if rate > 0 {
                // The first whole millisecond at which the sum reaches `need`.
                let ms = (need - admission_ms + rate - 1) / rate;
                let at = stretch.from + Duration::milliseconds(i64::try_from(ms).ok()?);
                if next.is_none_or(|next| at <= next) {
                    return Some(at.max(settings.sale_starts_at));
                }
            }
            if let Some(next) = next {
                admission_ms += rate * i128::from((next - stretch.from).num_milliseconds());
            }
        }
        None
    }

    /// The admission slot of a buyer who joins at `joined_at` behind a
    /// buyer whose slot is `previous` (0: nobody): the schedule's next
    /// admission after the join, and after the previous buyer's. Slots are
    /// the numbers of the schedule's admissions: those who joined before
    /// the start hold 1..P (their queue numbers); a later buyer cannot use
    /// an admission the schedule made before they came (it would be over
    /// at once, and a crowd arriving together would all be let in at once
    /// on admissions nobody used), nor one made while the room was paused.
    pub fn slot_after(
        &self,
        settings: &WaitingRoomSettings,
        previous: u64,
        joined_at: DateTime<Utc>,
    ) -> u64 {
        previous.max(self.admitted_by(settings, joined_at)) + 1
    }

    /// Where a buyer whose admission slot is `slot` stands at `now`.
    pub fn standing(
        &self,
        settings: &WaitingRoomSettings,
        slot: u64,
        now: DateTime<Utc>,
    ) -> Standing {
        if let Some((_, reason)) = self.closed {
            return Standing::Closed(reason);
        }
        let admitted = self.admitted_by(settings, now);
        if slot <= admitted {
            return match self.admitted_at(settings, slot) {
                Some(at) if now < at + settings.admission_ttl() => Standing::Admitted {
                    until: at + settings.admission_ttl(),
                },
                _ => Standing::Expired,
            };
        }
        let wait = match self.admitted_at(settings, slot) {
            Some(at) => at - now,
            // Paused: as if admissions went on at the current rate from now.
            None => {
                let rate = i128::from(self.rate(settings).max(1));
                let behind = i128::from(slot - admitted);
                Duration::milliseconds(
                    i64::try_from(behind * MS_PER_MINUTE / rate).unwrap_or(i64::MAX),
                )
            }
        };
        Standing::Waiting {
            estimated_wait: wait.max(Duration::zero()),
        }
    }
}

/// Where one buyer stands in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Not admitted yet; admitted in about `estimated_wait` as things stand.
    Waiting {
        estimated_wait: Duration,
    },
    /// May place holds until `until`.
    Admitted {
        until: DateTime<Utc>,
    },
    /// Was admitted, and let the admission pass without a hold.
    Expired,
    Closed(CloseReason),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn settings(per_minute: u32) -> WaitingRoomSettings {
        WaitingRoomSettings {
            sale_starts_at: at(0),
            admit_per_minute: per_minute,
            admission_ttl_seconds: 600,
        }
    }

    fn given(events: &[RoomEvent]) -> WaitingRoom {
        let mut room = WaitingRoom::default();
        events.iter().for_each(|e| room.apply_event(e));
        room
    }

    #[test]
    fn it_should_admit_no_one_before_the_start_and_the_rate_after() {
        let room = WaitingRoom::default();
        let s = settings(600);
        assert_eq!(room.admitted_by(&s, at(-5)), 0);
        assert_eq!(room.admitted_by(&s, at(0)), 0);
        assert_eq!(room.admitted_by(&s, at(1)), 10);
        assert_eq!(room.admitted_by(&s, at(60)), 600);
        assert_eq!(room.admitted_at(&s, 10), Some(at(1)));
        assert_eq!(
            room.admitted_at(&s, 1),
            Some(at(0) + Duration::milliseconds(100))
        );
    }

    #[test]
    fn it_should_follow_a_rate_change_from_its_instant() {
        let room = given(&[RoomEvent::RateChanged {
            at: at(60),
            admit_per_minute: 60,
        }]);
        let s = settings(600);
        assert_eq!(room.admitted_by(&s, at(60)), 600);
        assert_eq!(room.admitted_by(&s, at(120)), 660);
        assert_eq!(room.admitted_at(&s, 601), Some(at(61)));
    }

    #[test]
    fn it_should_admit_no_one_while_paused_and_go_on_after() {
        let room = given(&[
            RoomEvent::Paused { at: at(10) },
            RoomEvent::Resumed { at: at(70) },
        ]);
        let s = settings(60);
        assert_eq!(room.admitted_by(&s, at(10)), 10);
        assert_eq!(room.admitted_by(&s, at(69)), 10);
        assert_eq!(room.admitted_by(&s, at(80)), 20);
        assert_eq!(room.admitted_at(&s, 11), Some(at(71)));
        let paused = given(&[RoomEvent::Paused { at: at(10) }]);
        assert_eq!(paused.admitted_at(&s, 11), None);
        assert!(paused.is_paused());
    }

    #[test]
    fn it_should_tell_a_buyer_ahead_then_admitted_then_expired() {
        let room = WaitingRoom::default();
        let s = settings(60);
        assert_eq!(
            room.standing(&s, 5, at(2)),
            Standing::Waiting {
                estimated_wait: Duration::seconds(3)
            }
        );
        assert_eq!(
            room.standing(&s, 5, at(5)),
            Standing::Admitted { until: at(605) }
        );
        assert_eq!(room.standing(&s, 5, at(605)), Standing::Expired);
    }

    #[test]
    fn a_late_buyer_gets_the_next_admission_after_joining_never_an_old_one() {
        let s = settings(60);
        let room = WaitingRoom::default();
        // Ten early joiners hold slots 1..10; the schedule passed them long
        // ago (an hour in, 3,600 admissions made) when a buyer comes.
        let late = room.slot_after(&s, 10, at(3_600));
        assert_eq!(late, 3_601);
        assert_eq!(room.admitted_at(&s, late), Some(at(3_601)));
        assert_eq!(
            room.standing(&s, late, at(3_600) + Duration::milliseconds(500)),
            Standing::Waiting {
                estimated_wait: Duration::milliseconds(500)
            }
        );
        // A crowd arriving together is let in at the rate, one a second.
        let crowd: Vec<u64> = (0..3)
            .scan(late, |prev, _| {
                *prev = room.slot_after(&s, *prev, at(3_600));
                Some(*prev)
            })
            .collect();
        assert_eq!(crowd, vec![3_602, 3_603, 3_604]);
        assert_eq!(room.admitted_at(&s, 3_604), Some(at(3_604)));
    }

    #[test]
    fn a_buyer_who_joins_while_paused_waits_for_the_resume() {
        let s = settings(60);
        let paused = given(&[RoomEvent::Paused { at: at(10) }]);
        let slot = paused.slot_after(&s, 3, at(20));
        assert_eq!(slot, 11);
        assert!(matches!(
            paused.standing(&s, slot, at(30)),
            Standing::Waiting { .. }
        ));
        let resumed = given(&[
            RoomEvent::Paused { at: at(10) },
            RoomEvent::Resumed { at: at(40) },
        ]);
        assert_eq!(resumed.admitted_at(&s, slot), Some(at(41)));
    }

    #[test]
    fn it_should_close_for_everyone_when_sold_out() {
        let room = given(&[RoomEvent::Closed {
            at: at(30),
            reason: CloseReason::SoldOut,
        }]);
        let s = settings(60);
        assert_eq!(
            room.standing(&s, 1, at(40)),
            Standing::Closed(CloseReason::SoldOut)
        );
        assert_eq!(room.admitted_by(&s, at(100)), 30);
    }

    #[test]
    fn early_keys_spread_and_differ_by_seed() {
        let buyers: Vec<BuyerId> = (0..1000)
            .map(|i| BuyerId::parse(&format!("b{i}")).unwrap())
            .collect();
        let keys: std::collections::HashSet<u64> = buyers.iter().map(|b| early_key(7, b)).collect();
        assert_eq!(keys.len(), 1000);
        let below_half = buyers
            .iter()
            .filter(|b| early_key(7, b) < u64::MAX / 2)
            .count();
        assert!((400..600).contains(&below_half), "{below_half}");
        assert_ne!(early_key(7, &buyers[0]), early_key(8, &buyers[0]));
    }

    #[test]
    fn it_should_draw_the_seed_once() {
        let drawn = given(&[RoomEvent::SeedDrawn { seed: 1 }]);
        assert_eq!(
            decide(&WaitingRoom::default(), &RoomCommand::DrawSeed { seed: 2 }),
            Ok(vec![RoomEvent::SeedDrawn { seed: 2 }])
        );
        assert_eq!(
            decide(&drawn, &RoomCommand::DrawSeed { seed: 2 }),
            Ok(vec![])
        );
        assert_eq!(drawn.seed, Some(1));
    }

    #[test]
    fn it_should_record_a_pause_once_and_a_resume_only_after_a_pause() {
        let open = WaitingRoom::default();
        assert_eq!(
            decide(&open, &RoomCommand::Resume { at: at(1) }),
            Ok(vec![])
        );
        let paused = given(&[RoomEvent::Paused { at: at(1) }]);
        assert_eq!(
            decide(&paused, &RoomCommand::Pause { at: at(2) }),
            Ok(vec![])
        );
        assert_eq!(
            decide(&paused, &RoomCommand::Resume { at: at(3) }),
            Ok(vec![RoomEvent::Resumed { at: at(3) }])
        );
    }

    #[test]
    fn it_should_refuse_a_rate_out_of_range_and_changes_to_a_closed_room() {
        let rate = |r| RoomCommand::ChangeRate {
            at: at(1),
            admit_per_minute: r,
        };
        assert!(decide(&WaitingRoom::default(), &rate(0)).is_err());
        assert!(decide(&WaitingRoom::default(), &rate(120)).is_ok());
        let closed = given(&[RoomEvent::Closed {
            at: at(5),
            reason: CloseReason::SoldOut,
        }]);
        assert_eq!(decide(&closed, &rate(120)), Err(RoomError::Closed));
        let close = RoomCommand::Close {
            at: at(6),
            reason: CloseReason::SoldOut,
        };
        assert_eq!(decide(&closed, &close), Ok(vec![]));
    }

    #[test]
    fn it_should_join_once_early_before_the_start_and_late_after() {
        let buyer = BuyerId::parse("alice").unwrap();
        let command = JoinQueue {
            show_id: ShowId::parse("s").unwrap(),
            buyer: buyer.clone(),
            settings: settings(60),
        };
        let early = join(
            &QueueEntry::default(),
            &WaitingRoom::default(),
            &command,
            at(-1),
        )
        .unwrap();
        assert!(matches!(
            early[..],
            [QueueEvent::QueueJoined { early: true, .. }]
        ));
        let late = join(
            &QueueEntry::default(),
            &WaitingRoom::default(),
            &command,
            at(0),
        )
        .unwrap();
        assert!(matches!(
            late[..],
            [QueueEvent::QueueJoined { early: false, .. }]
        ));
        let mut joined = QueueEntry::default();
        joined.apply_event(&early[0]);
        assert_eq!(
            join(&joined, &WaitingRoom::default(), &command, at(5)),
            Ok(vec![])
        );
        let closed = given(&[RoomEvent::Closed {
            at: at(5),
            reason: CloseReason::SoldOut,
        }]);
        assert_eq!(
            join(&QueueEntry::default(), &closed, &command, at(6)),
            Err(QueueError::SoldOut)
        );
        assert_eq!(
            parse_entry_stream_id(&entry_stream_id(&command.show_id, &buyer)),
            Some((command.show_id.clone(), buyer))
        );
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        let mut s = settings(0);
        assert_eq!(s.check(), Err(RoomSettingsError::Rate));
        s.admit_per_minute = 1_000_001;
        assert_eq!(s.check(), Err(RoomSettingsError::Rate));
        s.admit_per_minute = 600;
        s.admission_ttl_seconds = 59;
        assert_eq!(s.check(), Err(RoomSettingsError::AdmissionTtl));
        s.admission_ttl_seconds = 3_601;
        assert_eq!(s.check(), Err(RoomSettingsError::AdmissionTtl));
        s.admission_ttl_seconds = 60;
        assert_eq!(s.check(), Ok(()));
    }
}
