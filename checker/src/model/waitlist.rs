//! The checker's fold of a show's Waitlist stream: entries in the order the
//! stream records them, each waiting, offered or left; and what it
//! refuses as it goes: inventory passed on to sale while an entry it
//! satisfies waits, and an offer that expires later than `offer_seconds`
//! after it was made.
//!
//! "Satisfies" is computed for the asks the checker's buyers make: one
//! seat of any kind (`{"quantity": 1}`), or one place of a named pool.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::report::Violation;
use crate::rows::LogEvent;
use crate::shows::ShowSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryStatus {
    Waiting,
    Offered { hold_id: String },
    Left,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub entry_id: String,
    pub buyer: String,
    pub ask: Value,
    pub status: EntryStatus,
    pub joined_us: i64,
}

impl Entry {
    /// Whether one seat (`pool` None) or one place of `pool` satisfies
    /// the entry; `None` when the ask is not one the checker computes.
    fn satisfied_by(&self, pool: Option<&str>) -> Option<bool> {
        let quantity = self.ask.get("quantity").and_then(Value::as_u64);
        let asked_pool = self.ask.get("pool_id").and_then(Value::as_str);
        let narrowed = ["category", "section"]
            .iter()
            .any(|f| self.ask.get(*f).is_some_and(|v| !v.is_null()))
            || self.ask.get("adjacent").and_then(Value::as_bool) == Some(true);
        if quantity != Some(1) || narrowed {
            return None;
        }
        Some(asked_pool == pool)
    }
}

/// A show's waiting list as folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WaitlistFold {
    pub show_id: String,
    pub entries: Vec<Entry>,
    /// Live entries (waiting or offered) after each event: (recorded_at, count).
    pub live_counts: Vec<(i64, usize)>,
    /// Each leave: its event's `recorded_at` and the request that made it.
    pub leaves: Vec<(i64, Option<String>)>,
    /// Offer hold id → (offered at, expires_at).
    pub offers: BTreeMap<String, (i64, i64)>,
}

impl WaitlistFold {
    pub fn live(&self) -> usize {
        (self.entries.iter())
            .filter(|e| e.status != EntryStatus::Left)
            .count()
    }

    /// The most live entries the service may have seen at any instant in
    /// `[from_us, to_us]`: a leave counts from when it was acknowledged
    /// (`acked`, by request id; its event may commit after its decision),
    /// so every left entry still live up to then is counted.
    pub fn most_live_between(
        &self,
        from_us: i64,
        to_us: i64,
        acked: &std::collections::HashMap<&str, i64>,
    ) -> usize {
        let before = (self.live_counts.iter())
            .take_while(|(at, _)| *at < from_us)
            .last()
            .map_or(0, |(_, n)| *n);
        let most = (self.live_counts.iter())
            .filter(|(at, _)| (from_us..=to_us).contains(at))
            .map(|(_, n)| *n)
            .fold(before, usize::max);
        // Leaves decided before the window whose acknowledgement came after
        // its start: the service may not have seen them yet.
        let unseen = (self.leaves.iter())
            .filter(|(at, request)| {
                *at < from_us
                    && request
                        .as_deref()
                        .and_then(|r| acked.get(r))
                        .is_some_and(|end| *end >= from_us)
            })
            .count();
        most.max(before + unseen)
    }
}

pub fn fold(
    log: &[LogEvent],
    shows: &[ShowSpec],
    out: &mut Vec<Violation>,
) -> BTreeMap<String, WaitlistFold> {
    let mut waitlists: BTreeMap<String, WaitlistFold> = BTreeMap::new();
    for event in log.iter().filter(|e| e.aggregate_type == "Waitlist") {
        let list = waitlists
            .entry(event.aggregate_id.clone())
            .or_insert_with(|| WaitlistFold {
                show_id: event.aggregate_id.clone(),
                ..WaitlistFold::default()
            });
        let show = shows.iter().find(|s| s.show_id == event.aggregate_id);
        if event.event_type == "EntryLeft" {
            let request = event.request_id().map(str::to_owned);
            list.leaves.push((event.recorded_at_us, request));
        }
        apply(list, event, show, out);
        let live = list.live();
        list.live_counts.push((event.recorded_at_us, live));
    }
    waitlists
}

fn apply(list: &mut WaitlistFold, e: &LogEvent, show: Option<&ShowSpec>, out: &mut Vec<Violation>) {
    let entry_id = e.str("entry_id").unwrap_or_default().to_owned();
    match e.event_type.as_str() {
        "EntryJoined" => list.entries.push(Entry {
            entry_id: entry_id.clone(),
            buyer: e.str("buyer").unwrap_or_default().to_owned(),
            ask: e.data().get("ask").cloned().unwrap_or_default(),
            status: EntryStatus::Waiting,
            joined_us: e.recorded_at_us,
        }),
        "EntryLeft" => set_status(list, &entry_id, EntryStatus::Left),
        "EntryOffered" => offered(list, e, show, out),
        "Passed" => passed(list, e, out),
        _ => {}
    }
}

fn set_status(list: &mut WaitlistFold, entry_id: &str, status: EntryStatus) {
    if let Some(entry) = list.entries.iter_mut().find(|x| x.entry_id == entry_id) {
        entry.status = status;
    }
}

fn offered(
    list: &mut WaitlistFold,
    e: &LogEvent,
    show: Option<&ShowSpec>,
    out: &mut Vec<Violation>,
) {
    let entry_id = e.str("entry_id").unwrap_or_default().to_owned();
    let hold_id = e.str("hold_id").unwrap_or_default().to_owned();
    let expires_us = e.time_us("expires_at").unwrap_or(e.recorded_at_us);
    let offer_us = show
        .and_then(|s| s.offer_seconds)
        .map_or(i64::MAX, |s| i64::from(s) * 1_000_000);
    if expires_us > e.recorded_at_us.saturating_add(offer_us) {
        out.push(Violation::new(
            "offer_within_offer_seconds",
            format!(
                "{}: offer {hold_id} expires {} µs after it was made, past offer_seconds",
                list.show_id,
                expires_us - e.recorded_at_us
            ),
            vec![hold_id.clone(), entry_id.clone()],
        ));
    }
    list.offers
        .insert(hold_id.clone(), (e.recorded_at_us, expires_us));
    set_status(list, &entry_id, EntryStatus::Offered { hold_id });
}

/// Inventory passed on to sale: no waiting entry may want it.
fn passed(list: &mut WaitlistFold, e: &LogEvent, out: &mut Vec<Violation>) {
    let seats = e.strings("seats");
    let pool = (e.data().get("places").and_then(Value::as_array))
        .and_then(|p| p.first())
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut kinds: Vec<Option<&str>> = Vec::new();
    if !seats.is_empty() {
        kinds.push(None);
    }
    if let Some(pool) = &pool {
        kinds.push(Some(pool.as_str()));
    }
    for kind in kinds {
        let wanting = (list.entries.iter())
            .find(|x| x.status == EntryStatus::Waiting && x.satisfied_by(kind) == Some(true));
        if let Some(entry) = wanting {
            out.push(Violation::new(
                "waitlist_first",
                format!("{}: {} passed on to sale while entry {} (joined earlier in the waiting list) waited for it", list.show_id, kind.unwrap_or("seats"), entry.entry_id),
                [vec![entry.entry_id.clone(), entry.buyer.clone()], seats.clone()].concat(),
            ));
        }
    }
}
