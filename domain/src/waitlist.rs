//! The Waitlist stream: one per show that keeps a waiting list.
//!
//! Buyers join in the order the stream records them (its sequence is the
//! waiting list's order), one entry each, asking for a quantity of seats (of a
//! category or a section, side by side or not) or places of a pool.
//! Inventory that frees on such a show is owed to the waiting list
//! ([`crate::seat::SeatState::Returned`], a shard's returned places):
//! the waiting list offers it to the first waiting entry it satisfies ([`judge`]),
//! as a hold in that buyer's name recorded with [`WaitlistEvent::EntryOffered`]
//! in the same append, or passes it on to sale ([`WaitlistEvent::Passed`])
//! when no entry wants it. Both are appended at this stream's version, so
//! two instances never offer one unit twice nor pass over an entry that
//! joined meanwhile. Each entry is offered once.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{BuyerId, CategoryId, EntryId, HoldId, PoolId, SeatId, ShowId};
use crate::limits::{
    MAX_OFFER_SECONDS, MAX_WAITLIST_ENTRIES, MAX_WAITLIST_QUANTITY, MIN_OFFER_SECONDS,
};
use crate::places::SeatSpec;

/// A show's waiting list, as its definition sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitlistSettings {
    /// How long an offer's hold lasts.
    pub offer_seconds: u32,
    /// How many entries may be on the list at once (waiting or offered;
    /// `None`: `MAX_WAITLIST_ENTRIES`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_entries: Option<u32>,
}

impl WaitlistSettings {
    pub fn check(&self) -> Result<(), WaitlistSettingsError> {
        if !(MIN_OFFER_SECONDS..=MAX_OFFER_SECONDS).contains(&self.offer_seconds) {
            return Err(WaitlistSettingsError::OfferSeconds);
        }
        match self.max_entries {
            Some(n) if n == 0 || n as usize > MAX_WAITLIST_ENTRIES => {
                Err(WaitlistSettingsError::MaxEntries)
            }
            _ => Ok(()),
        }
    }

    /// Entries the list takes at once.
    pub fn max_entries(&self) -> usize {
        self.max_entries
            .map_or(MAX_WAITLIST_ENTRIES, |n| n as usize)
    }

    pub fn offer_ttl(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::from(self.offer_seconds))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitlistSettingsError {
    #[error("waitlist.offer_seconds must be {MIN_OFFER_SECONDS}..={MAX_OFFER_SECONDS}")]
    OfferSeconds,
    #[error("waitlist.max_entries must be 1..={MAX_WAITLIST_ENTRIES}")]
    MaxEntries,
}

/// The stream id of a show's waiting list: the show's id (one per show).
pub fn waitlist_stream_id(show_id: &ShowId) -> String {
    show_id.to_string()
}

/// What an entry waits for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Ask {
    pub quantity: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<CategoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<PoolId>,
    /// Seats in one row with consecutive numbers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adjacent: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    #[error("quantity must be 1..={MAX_WAITLIST_QUANTITY}")]
    Quantity,
    #[error("pool_id: not with {0} (a pool has no seats)")]
    PoolWith(&'static str),
}

impl Ask {
    /// The ask's own rules (the show's are checked by the service: that
    /// the category, section or pool is the show's).
    pub fn check(&self) -> Result<(), AskError> {
        if !(1..=MAX_WAITLIST_QUANTITY).contains(&self.quantity) {
            return Err(AskError::Quantity);
        }
        if self.pool_id.is_some() {
            for (given, field) in [
                (self.category.is_some(), "category"),
                (self.section.is_some(), "section"),
                (self.adjacent, "adjacent"),
            ] {
                if given {
                    return Err(AskError::PoolWith(field));
                }
            }
        }
        Ok(())
    }

    /// Whether a seat is of the kind asked for (its quantity and adjacency
    /// aside).
    pub fn wants_seat(&self, seat: &SeatSpec) -> bool {
        self.pool_id.is_none()
            && self
                .category
                .as_ref()
                .is_none_or(|c| seat.category.as_ref() == Some(c))
            && self.section.as_ref().is_none_or(|s| &seat.section == s)
    }

    /// The seats of `free` (in the show's order) that satisfy the ask, if
    /// some do: the first `quantity` of the kind asked for, or, adjacent,
    /// the first run of them in one row with consecutive numbers.
    pub fn choose<'s>(&self, free: &[&'s SeatSpec]) -> Option<Vec<&'s SeatSpec>> {
        let quantity = self.quantity as usize;
        let wanted = free.iter().copied().filter(|s| self.wants_seat(s));
        if !self.adjacent {
            let chosen: Vec<&SeatSpec> = wanted.take(quantity).collect();
            return (chosen.len() == quantity).then_some(chosen);
        }
        let mut rows: HashMap<(&str, &str), Vec<&SeatSpec>> = HashMap::new();
        let mut order = Vec::new();
        for seat in wanted {
            let key = (seat.section.as_str(), seat.row.as_str());
            let row = rows.entry(key).or_insert_with(|| {
                order.push(key);
                Vec::new()
            });
            row.push(seat);
        }
        order.into_iter().find_map(|key| {
            let mut row = rows.remove(&key)?;
            row.sort_by_key(|s| s.number);
            row.windows(quantity)
                .find(|w| w.windows(2).all(|p| p[1].number == p[0].number + 1))
                .map(<[&SeatSpec]>::to_vec)
        })
    }
}

/// Where an entry stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EntryStatus {
    Waiting,
    /// Offered these units as the hold `hold_id`, until `expires_at`.
    /// Whether the offer was bought, lapsed or released is the hold's
    /// story; the entry is not offered again.
    Offered {
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seats: Vec<SeatId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        places: Option<u32>,
    },
    Left,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub entry_id: EntryId,
    pub buyer: BuyerId,
    pub ask: Ask,
    pub joined_at: DateTime<Utc>,
    /// Its number in the waiting list: 1 for the first to join, in log order (a
    /// buyer who left and joined again has a new one).
    pub number: usize,
    pub status: EntryStatus,
}

/// The fold of a show's waiting list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waitlist {
    /// Every entry, in the order the log recorded them; a buyer's entry
    /// they left is dropped when they join again, so a buyer has one
    /// entry here at most (joining and leaving in a loop grows nothing).
    pub entries: Vec<Entry>,
    /// Where each entry is in `entries`.
    index: HashMap<EntryId, usize>,
    /// Each buyer's entry.
    by_buyer: HashMap<BuyerId, usize>,
    /// Entries joined so far: the next one's number.
    #[serde(default)]
    joined: usize,
    /// Entries waiting or offered (not left): what the list's cap counts.
    #[serde(default)]
    on_list: usize,
}

impl Waitlist {
    pub fn entry(&self, entry_id: &EntryId) -> Option<&Entry> {
        self.index.get(entry_id).map(|&i| &self.entries[i])
    }

    /// The buyer's entry, unless they left it.
    pub fn entry_of(&self, buyer: &BuyerId) -> Option<&Entry> {
        let entry = &self.entries[*self.by_buyer.get(buyer)?];
        (entry.status != EntryStatus::Left).then_some(entry)
    }

    /// A waiting entry's place among those waiting (1: offered next).
    pub fn place(&self, entry_id: &EntryId) -> Option<usize> {
        let at = *self.index.get(entry_id)?;
        (self.entries[at].status == EntryStatus::Waiting).then(|| {
            1 + self.entries[..at]
                .iter()
                .filter(|e| e.status == EntryStatus::Waiting)
                .count()
        })
    }

    /// Entries on the list now (waiting or offered): a buyer who left
    /// counts no more.
    pub fn on_list(&self) -> usize {
        self.on_list
    }

    /// The entries still waiting, in the waiting list's order.
    pub fn waiting(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| e.status == EntryStatus::Waiting)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitlistCommand {
    Join {
        entry_id: EntryId,
        buyer: BuyerId,
        ask: Ask,
        /// The list's cap (`WaitlistSettings::max_entries`).
        max_entries: usize,
    },
    Leave {
        entry_id: EntryId,
    },
    /// Offer `entry_id` these units as its hold (placed in the same append).
    Offer {
        entry_id: EntryId,
        expires_at: DateTime<Utc>,
        seats: Vec<SeatId>,
        places: Option<u32>,
    },
    /// Freed seats (or a pool's places) no waiting entry wants: back on sale.
    Pass {
        seats: Vec<SeatId>,
        places: Option<(PoolId, u32)>,
    },
}

/// Events are forever: add variants, never change one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitlistEvent {
    EntryJoined {
        entry_id: EntryId,
        buyer: BuyerId,
        ask: Ask,
        joined_at: DateTime<Utc>,
    },
    EntryLeft {
        entry_id: EntryId,
    },
    EntryOffered {
        entry_id: EntryId,
        /// The entry's buyer, whose hold the offer is.
        buyer: BuyerId,
        hold_id: HoldId,
        expires_at: DateTime<Utc>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seats: Vec<SeatId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        places: Option<u32>,
    },
    /// Freed inventory the waiting list passed on to sale (no entry wanted it).
    Passed {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        seats: Vec<SeatId>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        places: Option<(PoolId, u32)>,
    },
}

event_names!(WaitlistEvent {
    EntryJoined => "EntryJoined",
    EntryLeft => "EntryLeft",
    EntryOffered => "EntryOffered",
    Passed => "Passed",
});

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WaitlistRefusal {
    /// The buyer waits already, for something else.
    #[error("the buyer has an entry in this waiting list already")]
    EntryExists(EntryId),
    #[error("the waiting list is full")]
    Full,
    #[error("the entry is not waiting")]
    NotWaiting,
    #[error("no such entry")]
    UnknownEntry,
}

/// The one decision function of the stream.
pub fn decide(
    list: &Waitlist,
    command: &WaitlistCommand,
    now: DateTime<Utc>,
) -> Result<Vec<WaitlistEvent>, WaitlistRefusal> {
    match command {
        WaitlistCommand::Join {
            entry_id,
            buyer,
            ask,
            max_entries,
        } => join(list, (*entry_id, buyer, ask), *max_entries, now),
        WaitlistCommand::Leave { entry_id } => match list.entry(entry_id) {
            None => Err(WaitlistRefusal::UnknownEntry),
            Some(entry) if entry.status == EntryStatus::Left => Ok(vec![]),
            Some(_) => Ok(vec![WaitlistEvent::EntryLeft {
                entry_id: *entry_id,
            }]),
        },
        WaitlistCommand::Offer {
            entry_id,
            expires_at,
            seats,
            places,
        } => match list.entry(entry_id) {
            None => Err(WaitlistRefusal::UnknownEntry),
            Some(entry) if entry.status != EntryStatus::Waiting => Err(WaitlistRefusal::NotWaiting),
            Some(entry) => Ok(vec![WaitlistEvent::EntryOffered {
                entry_id: *entry_id,
                buyer: entry.buyer.clone(),
                hold_id: entry_id.offer_hold(),
                expires_at: *expires_at,
                seats: seats.clone(),
                places: *places,
            }]),
        },
        WaitlistCommand::Pass { seats, places } => {
            if seats.is_empty() && places.is_none() {
                return Ok(vec![]);
            }
            Ok(vec![WaitlistEvent::Passed {
                seats: seats.clone(),
                places: places.clone(),
            }])
        }
    }
}

/// One buyer's join in a batch ([`join_all`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joining {
    pub entry_id: EntryId,
    pub buyer: BuyerId,
    pub ask: Ask,
}

/// Several joins decided at once, in order, as if each were decided after
/// the ones before it (a buyer twice in one batch: the second is the
/// first's entry, or refused for another ask): the events of all, and for
/// each its entry and whether it joined now.
#[allow(clippy::type_complexity)]
pub fn join_all(
    list: &Waitlist,
    joins: &[Joining],
    max_entries: usize,
    now: DateTime<Utc>,
) -> (
    Vec<WaitlistEvent>,
    Vec<Result<(EntryId, bool), WaitlistRefusal>>,
) {
    let mut events = Vec::new();
    let mut joined: HashMap<&BuyerId, (EntryId, &Ask)> = HashMap::new();
    let mut answers = Vec::with_capacity(joins.len());
    for join in joins {
        if let Some((entry_id, ask)) = joined.get(&join.buyer) {
            answers.push(if *ask == &join.ask {
                Ok((*entry_id, false))
            } else {
                Err(WaitlistRefusal::EntryExists(*entry_id))
            });
            continue;
        }
        if list.on_list() + events.len() >= max_entries && list.entry_of(&join.buyer).is_none() {
            answers.push(Err(WaitlistRefusal::Full));
            continue;
        }
        let joining = (join.entry_id, &join.buyer, &join.ask);
        answers.push(match self::join(list, joining, max_entries, now) {
            Ok(new) if new.is_empty() => {
                let existing = list.entry_of(&join.buyer).map(|e| e.entry_id);
                existing
                    .map(|id| (id, false))
                    .ok_or(WaitlistRefusal::UnknownEntry)
            }
            Ok(new) => {
                events.extend(new);
                joined.insert(&join.buyer, (join.entry_id, &join.ask));
                Ok((join.entry_id, true))
            }
            Err(e) => Err(e),
        });
    }
    (events, answers)
}

/// A buyer joins once: the same ask again is the same entry (nothing to
/// write), another is refused while the first stands. A buyer who left
/// may join again, at the end of the waiting list. The list takes `max_entries`
/// at once; entries that left count for nothing.
fn join(
    list: &Waitlist,
    (entry_id, buyer, ask): (EntryId, &BuyerId, &Ask),
    max_entries: usize,
    now: DateTime<Utc>,
) -> Result<Vec<WaitlistEvent>, WaitlistRefusal> {
    if let Some(entry) = list.entry_of(buyer) {
        return if &entry.ask == ask {
            Ok(vec![])
        } else {
            Err(WaitlistRefusal::EntryExists(entry.entry_id))
        };
    }
    if list.on_list() >= max_entries {
        return Err(WaitlistRefusal::Full);
    }
    Ok(vec![WaitlistEvent::EntryJoined {
        entry_id,
        buyer: buyer.clone(),
        ask: ask.clone(),
        joined_at: now,
    }])
}

impl Waitlist {
    /// Folds one event into the state. Never fails: events are facts.
    pub fn apply_event(&mut self, event: &WaitlistEvent) {
        match event {
            WaitlistEvent::EntryJoined {
                entry_id,
                buyer,
                ask,
                joined_at,
            } => {
                self.drop_left(buyer);
                self.joined += 1;
                self.on_list += 1;
                let at = self.entries.len();
                self.entries.push(Entry {
                    entry_id: *entry_id,
                    buyer: buyer.clone(),
                    ask: ask.clone(),
                    joined_at: *joined_at,
                    number: self.joined,
                    status: EntryStatus::Waiting,
                });
                self.index.insert(*entry_id, at);
                self.by_buyer.insert(buyer.clone(), at);
            }
            WaitlistEvent::EntryLeft { entry_id } => {
                if self
                    .entry(entry_id)
                    .is_some_and(|e| e.status != EntryStatus::Left)
                {
                    self.on_list -= 1;
                }
                self.set_status(entry_id, EntryStatus::Left);
            }
            WaitlistEvent::EntryOffered {
                entry_id,
                hold_id,
                expires_at,
                seats,
                places,
                ..
            } => {
                let offered = EntryStatus::Offered {
                    hold_id: *hold_id,
                    expires_at: *expires_at,
                    seats: seats.clone(),
                    places: *places,
                };
                self.set_status(entry_id, offered);
            }
            WaitlistEvent::Passed { .. } => {}
        }
    }

    /// The entry `buyer` left, if they had one: dropped as they join again
    /// (every later entry moves up one place in `entries`).
    fn drop_left(&mut self, buyer: &BuyerId) {
        let Some(&at) = self.by_buyer.get(buyer) else {
            return;
        };
        if self.entries[at].status != EntryStatus::Left {
            return;
        }
        let left = self.entries.remove(at);
        self.index.remove(&left.entry_id);
        self.by_buyer.remove(buyer);
        for (i, entry) in self.entries.iter().enumerate().skip(at) {
            self.index.insert(entry.entry_id, i);
            self.by_buyer.insert(entry.buyer.clone(), i);
        }
    }

    fn set_status(&mut self, entry_id: &EntryId, status: EntryStatus) {
        if let Some(&at) = self.index.get(entry_id) {
            self.entries[at].status = status;
        }
    }
}

/// What the waiting list does with the seats it is owed: offers, in the waiting list's order,
/// and the seats no waiting entry wants.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Judgement {
    /// Each entry offered, with the seats it is offered, in the waiting list's order.
    pub offers: Vec<(EntryId, Vec<SeatId>)>,
    /// Seats no waiting entry wants: for sale again.
    pub passed: Vec<SeatId>,
}

/// Walks the waiting entries in the waiting list's order and gives each the first seats
/// of `owed` (in the show's order) that satisfy it, until none are left;
/// what no entry wants is passed on. Entries in `skip` are passed over
/// (their buyer could not take an offer now: a per-buyer limit).
pub fn judge(list: &Waitlist, owed: &[&SeatSpec], skip: &[EntryId]) -> Judgement {
    let mut free: Vec<&SeatSpec> = owed.to_vec();
    let mut judgement = Judgement::default();
    for entry in list.waiting() {
        if free.is_empty() {
            break;
        }
        if skip.contains(&entry.entry_id) {
            continue;
        }
        if let Some(chosen) = entry.ask.choose(&free) {
            free.retain(|s| !chosen.iter().any(|c| c.seat_id == s.seat_id));
            let seats = chosen.into_iter().map(|s| s.seat_id.clone()).collect();
            judgement.offers.push((entry.entry_id, seats));
        }
    }
    judgement.passed = free.into_iter().map(|s| s.seat_id.clone()).collect();
    judgement
}

/// What the waiting list does with places of one pool it is owed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlacesJudgement {
    /// Each entry offered, with how many places, in the waiting list's order.
    pub offers: Vec<(EntryId, u32)>,
    /// Places no waiting entry wants: for sale again.
    pub passed: u32,
}

/// Walks the waiting entries asking for `pool_id` in the waiting list's order and offers
/// each its quantity while that many of the `owed` places are left (an
/// entry asking for more than are left waits; a later one asking for fewer
/// is offered them: the first entry they satisfy); what no entry wants is
/// passed on. Entries in `skip` are passed over, as in [`judge`].
pub fn judge_places(
    list: &Waitlist,
    pool_id: &PoolId,
    owed: u32,
    skip: &[EntryId],
) -> PlacesJudgement {
    let mut left = owed;
    let mut judgement = PlacesJudgement::default();
    for entry in list.waiting() {
        if left == 0 {
            break;
        }
        let wants = entry.ask.pool_id.as_ref() == Some(pool_id) && entry.ask.quantity <= left;
        if wants && !skip.contains(&entry.entry_id) {
            left -= entry.ask.quantity;
            judgement.offers.push((entry.entry_id, entry.ask.quantity));
        }
    }
    judgement.passed = left;
    judgement
}

/// A command with the instant it is decided at.
#[derive(Debug, Clone)]
pub struct TimedWaitlist {
    pub command: WaitlistCommand,
    pub now: DateTime<Utc>,
}

impl Decider for Waitlist {
    type Command = TimedWaitlist;
    type Event = WaitlistEvent;
    type Error = WaitlistRefusal;

    fn decide(&self, command: &TimedWaitlist) -> Result<Vec<WaitlistEvent>, WaitlistRefusal> {
        decide(self, &command.command, command.now)
    }

    fn evolve(&mut self, event: &WaitlistEvent) {
        self.apply_event(event);
    }
}

impl_aggregate!(Waitlist, "Waitlist");

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn t(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(1_800_000_000 + seconds)
    }
    fn entry(n: u128) -> EntryId {
        EntryId(Uuid::from_u128(n))
    }
    fn ask(quantity: u32) -> Ask {
        Ask {
            quantity,
            category: None,
            section: None,
            pool_id: None,
            adjacent: false,
        }
    }
    fn seat(id: &str, section: &str, row: &str, number: u32) -> SeatSpec {
        SeatSpec {
            seat_id: SeatId::parse(id).unwrap(),
            section: section.into(),
            row: row.into(),
            number,
            price_cents: 1_000,
            rank: None,
            category: None,
            position: None,
            accessible: false,
        }
    }

    /// given these buyers joined in this order (buyer `bN` as entry `N`)
    fn given(asks: &[Ask]) -> Waitlist {
        let mut list = Waitlist::default();
        for (n, a) in asks.iter().enumerate() {
            let join = WaitlistCommand::Join {
                entry_id: entry(n as u128 + 1),
                buyer: BuyerId::parse(&format!("b{}", n + 1)).unwrap(),
                ask: a.clone(),
                max_entries: MAX_WAITLIST_ENTRIES,
            };
            for event in decide(&list, &join, t(n as i64)).unwrap() {
                list.apply_event(&event);
            }
        }
        list
    }

    #[test]
    fn it_should_keep_one_entry_per_buyer_in_log_order() {
        let list = given(&[ask(2), ask(1)]);
        assert_eq!(list.entries[1].number, 2);
        assert_eq!(list.place(&entry(2)), Some(2));
        let again = WaitlistCommand::Join {
            entry_id: entry(9),
            buyer: BuyerId::parse("b1").unwrap(),
            ask: ask(2),
            max_entries: MAX_WAITLIST_ENTRIES,
        };
        assert_eq!(decide(&list, &again, t(5)), Ok(vec![]), "the same ask");
        let other = WaitlistCommand::Join {
            entry_id: entry(9),
            buyer: BuyerId::parse("b1").unwrap(),
            ask: ask(3),
            max_entries: MAX_WAITLIST_ENTRIES,
        };
        assert_eq!(
            decide(&list, &other, t(5)),
            Err(WaitlistRefusal::EntryExists(entry(1)))
        );
    }

    #[test]
    fn it_should_offer_freed_seats_to_the_first_entry_they_satisfy_and_pass_the_rest() {
        let mut pair = ask(2);
        pair.adjacent = true;
        let mut in_b = ask(1);
        in_b.section = Some("B".into());
        let list = given(&[pair, in_b, ask(1)]);
        let (a1, a3, b1, b2) = (
            seat("A-1", "A", "1", 1),
            seat("A-3", "A", "1", 3),
            seat("B-1", "B", "1", 1),
            seat("B-2", "B", "1", 2),
        );
        // are not side by side: entry 1 waits; B-1 and B-2 are.
        let judged = judge(&list, &[&a1, &a3, &b1, &b2], &[]);
        assert_eq!(
            judged.offers,
            vec![
                (entry(1), vec![b1.seat_id.clone(), b2.seat_id.clone()]),
                (entry(3), vec![a1.seat_id.clone()]),
            ]
        );
        assert_eq!(judged.passed, vec![a3.seat_id.clone()]);
        let skipped = judge(&list, &[&a1], &[entry(3)]);
        assert_eq!((skipped.offers, skipped.passed), (vec![], vec![a1.seat_id]));
    }

    #[test]
    fn it_should_offer_owed_places_in_waitlist_order_to_the_entries_they_satisfy() {
        let (floor, balcony) = (
            PoolId::parse("floor").unwrap(),
            PoolId::parse("balcony").unwrap(),
        );
        let of = |pool: &PoolId, quantity: u32| Ask {
            pool_id: Some(pool.clone()),
            ..ask(quantity)
        };
        let list = given(&[
            of(&floor, 4),
            of(&balcony, 1),
            ask(1),
            of(&floor, 2),
            of(&floor, 1),
        ]);
        // Three places: entry 1 wants four and waits; 4 and 5 are offered.
        assert_eq!(
            judge_places(&list, &floor, 3, &[]),
            PlacesJudgement {
                offers: vec![(entry(4), 2), (entry(5), 1)],
                passed: 0,
            }
        );
        assert_eq!(
            judge_places(&list, &floor, 7, &[entry(4)]),
            PlacesJudgement {
                offers: vec![(entry(1), 4), (entry(5), 1)],
                passed: 2,
            }
        );
        let nobody = PoolId::parse("terrace").unwrap();
        assert_eq!(judge_places(&list, &nobody, 2, &[]).passed, 2);
    }

    #[test]
    fn an_entry_is_offered_once_and_one_that_left_never() {
        let mut list = given(&[ask(1), ask(1)]);
        let offer = WaitlistCommand::Offer {
            entry_id: entry(1),
            expires_at: t(900),
            seats: vec![SeatId::parse("A-1").unwrap()],
            places: None,
        };
        for event in decide(&list, &offer, t(10)).unwrap() {
            list.apply_event(&event);
        }
        assert_eq!(
            decide(&list, &offer, t(11)),
            Err(WaitlistRefusal::NotWaiting)
        );
        let leave = WaitlistCommand::Leave { entry_id: entry(2) };
        for event in decide(&list, &leave, t(12)).unwrap() {
            list.apply_event(&event);
        }
        assert_eq!(list.waiting().count(), 0);
        let a1 = seat("A-1", "A", "1", 1);
        assert_eq!(judge(&list, &[&a1], &[]).passed, vec![a1.seat_id.clone()]);
        assert_eq!(
            list.entry(&entry(1)).map(|e| &e.status),
            Some(&EntryStatus::Offered {
                hold_id: entry(1).offer_hold(),
                expires_at: t(900),
                seats: vec![a1.seat_id],
                places: None,
            })
        );
    }

    #[test]
    fn a_batch_of_joins_is_decided_as_one_after_the_other() {
        let list = given(&[ask(1)]);
        let joining = |n: u128, who: &str, quantity: u32| Joining {
            entry_id: entry(n),
            buyer: BuyerId::parse(who).unwrap(),
            ask: ask(quantity),
        };
        let batch = [
            joining(10, "c", 1),
            joining(11, "b1", 1),
            joining(12, "c", 1),
            joining(13, "c", 2),
            joining(14, "d", 3),
        ];
        let (events, answers) = join_all(&list, &batch, MAX_WAITLIST_ENTRIES, t(9));
        assert_eq!(events.len(), 2, "c and d join");
        assert_eq!(
            answers,
            vec![
                Ok((entry(10), true)),
                Ok((entry(1), false)),
                Ok((entry(10), false)),
                Err(WaitlistRefusal::EntryExists(entry(10))),
                Ok((entry(14), true)),
            ]
        );
    }

    /// `who` leaves their entry `entry_id` of `list`.
    fn leave(list: &mut Waitlist, entry_id: EntryId) {
        let leave = WaitlistCommand::Leave { entry_id };
        for event in decide(list, &leave, t(20)).unwrap() {
            list.apply_event(&event);
        }
    }

    #[test]
    fn entries_that_left_count_for_nothing_and_a_buyer_may_join_again_at_the_end() {
        // Given a list of two places, full, whose first buyer left
        let mut list = given(&[ask(1), ask(1)]);
        leave(&mut list, entry(1));
        assert_eq!(list.on_list(), 1);
        // When b1 joins again: at the end of the waiting list, with a new number
        let rejoin = WaitlistCommand::Join {
            entry_id: entry(7),
            buyer: BuyerId::parse("b1").unwrap(),
            ask: ask(1),
            max_entries: 2,
        };
        for event in decide(&list, &rejoin, t(30)).unwrap() {
            list.apply_event(&event);
        }
        assert_eq!(list.place(&entry(7)), Some(2));
        assert_eq!(list.entry(&entry(7)).map(|e| e.number), Some(3));
        assert_eq!(list.entry(&entry(1)), None, "the entry left is dropped");
        assert_eq!(list.entries.len(), 2);
        // Then the list is full again, for anyone new
        let newcomer = WaitlistCommand::Join {
            entry_id: entry(8),
            buyer: BuyerId::parse("c").unwrap(),
            ask: ask(1),
            max_entries: 2,
        };
        assert_eq!(decide(&list, &newcomer, t(31)), Err(WaitlistRefusal::Full));
    }

    #[test]
    fn one_buyer_joining_and_leaving_never_fills_the_list() {
        let mut list = Waitlist::default();
        for n in 0..10 {
            let (events, answers) = join_all(
                &list,
                &[Joining {
                    entry_id: entry(100 + n),
                    buyer: BuyerId::parse("looper").unwrap(),
                    ask: ask(1),
                }],
                3,
                t(n as i64),
            );
            assert_eq!(answers, vec![Ok((entry(100 + n), true))]);
            events.iter().for_each(|e| list.apply_event(e));
            leave(&mut list, entry(100 + n));
        }
        assert_eq!((list.on_list(), list.entries.len()), (0, 1));
        let others = given(&[ask(1), ask(1), ask(1)]);
        assert_eq!(others.on_list(), 3);
    }

    #[test]
    fn it_should_refuse_asks_out_of_range() {
        assert_eq!(ask(0).check(), Err(AskError::Quantity));
        assert_eq!(
            ask(MAX_WAITLIST_QUANTITY + 1).check(),
            Err(AskError::Quantity)
        );
        let mut pool = ask(2);
        pool.pool_id = Some(PoolId::parse("floor").unwrap());
        pool.adjacent = true;
        assert_eq!(pool.check(), Err(AskError::PoolWith("adjacent")));
    }
}
