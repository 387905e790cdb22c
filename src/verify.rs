//! `booking verify`: rebuilds every projection from the log into scratch
//! tables, and compares them with the live ones.
//!
//! The scratch tables live in memory: the rows come from the same fold and
//! row builders as replay, and are applied with the semantics the SQL
//! writers have (a seat, shard or checkout row is replaced only by a later
//! stream sequence; a hold record is inserted once and moves from `held`
//! once). That is a second, independent implementation of applying rows,
//! so a writer bug shows up as a difference too, and verifying never writes
//! to the database or holds a lock.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use projections::holds::HoldChange;
use projections::time::to_micros;

use crate::projector::Folded;
use crate::shows::ShowCatalog;
use crate::store::{AppendBatch, LogFilter, Store, StoreError};

/// Events read per batch while rebuilding.
const VERIFY_BATCH: i64 = 10_000;

/// Rows of every projection, keyed as the tables are.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Tables {
    pub seats: BTreeMap<(String, String), SeatRow>,
    pub shards: BTreeMap<(String, String, i32), (i32, i64)>,
    pub holds: BTreeMap<String, HoldRow>,
    pub hold_seats: BTreeSet<(String, String)>,
    pub pool_holds: BTreeMap<(String, i32), PoolHoldRow>,
    pub checkouts: BTreeMap<String, CheckoutRow>,
}

/// status, hold_id, buyer, expires_at_us, booking_id, last_seq
pub type SeatRow = (
    String,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<String>,
    i64,
);
/// show_id, buyer, expires_at_us, state, booking_id, pool_id
pub type HoldRow = (String, String, i64, String, Option<String>, Option<String>);
/// show_id, pool_id, quantity, expires_at_us, state
pub type PoolHoldRow = (String, String, i32, i64, String);
/// show_id, buyer, phase, booking_id, charge_id, refund_id, refund_reason, amount_cents, last_seq
pub type CheckoutRow = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    i64,
);

impl Tables {
    /// Applies a batch of rows as the SQL writers do.
    fn apply(&mut self, batch: &AppendBatch) {
        for w in &batch.seat_rows {
            let row = &w.row;
            let key = (w.show_id.clone(), w.seat_id.clone());
            if self.seats.get(&key).is_none_or(|r| r.5 < w.last_seq) {
                self.seats.insert(
                    key,
                    (
                        row.recorded.as_str().to_owned(),
                        row.hold_id.map(|h| h.to_string()),
                        row.buyer.as_ref().map(|b| b.to_string()),
                        row.expires_at.map(to_micros),
                        row.booking_id.map(|b| b.to_string()),
                        w.last_seq,
                    ),
                );
            }
        }
        for w in &batch.shard_rows {
            let key = (w.show_id.clone(), w.pool_id.clone(), w.shard);
            if self.shards.get(&key).is_none_or(|r| r.1 < w.last_seq) {
                self.shards.insert(key, (w.sold as i32, w.last_seq));
            }
        }
        for change in &batch.hold_changes {
            match change {
                HoldChange::SeatHeld {
                    hold_id,
                    show_id,
                    seat_id,
                    buyer,
                    expires_at,
                } => {
                    let held = (
                        show_id.to_string(),
                        buyer.to_string(),
                        to_micros(*expires_at),
                        "held".into(),
                        None,
                        None,
                    );
                    self.holds.entry(hold_id.to_string()).or_insert(held);
                    self.hold_seats
                        .insert((hold_id.to_string(), seat_id.to_string()));
                }
                HoldChange::PoolPartHeld {
                    hold_id,
                    show_id,
                    pool_id,
                    shard,
                    buyer,
                    quantity,
                    expires_at,
                } => {
                    let held = (
                        show_id.to_string(),
                        buyer.to_string(),
                        to_micros(*expires_at),
                        "held".into(),
                        None,
                        Some(pool_id.to_string()),
                    );
                    self.holds.entry(hold_id.to_string()).or_insert(held);
                    let part = (
                        show_id.to_string(),
                        pool_id.to_string(),
                        *quantity as i32,
                        to_micros(*expires_at),
                        "held".into(),
                    );
                    self.pool_holds
                        .entry((hold_id.to_string(), *shard as i32))
                        .or_insert(part);
                }
                HoldChange::Ended { hold_id, state } => {
                    self.end(&hold_id.to_string(), state.as_str(), None)
                }
                HoldChange::Converted {
                    hold_id,
                    booking_id,
                } => {
                    self.end(
                        &hold_id.to_string(),
                        "converted",
                        Some(booking_id.to_string()),
                    );
                }
            }
        }
        for w in &batch.checkout_rows {
            let row = &w.row;
            if self
                .checkouts
                .get(&row.hold_id)
                .is_none_or(|r| r.8 < w.last_seq)
            {
                self.checkouts.insert(
                    row.hold_id.clone(),
                    (
                        row.show_id.clone(),
                        row.buyer.clone(),
                        row.phase.to_owned(),
                        row.booking_id.clone(),
                        row.charge_id.clone(),
                        row.refund_id.clone(),
                        row.refund_reason.map(str::to_owned),
                        row.amount_cents,
                        w.last_seq,
                    ),
                );
            }
        }
    }

    fn end(&mut self, hold_id: &str, state: &str, booking_id: Option<String>) {
        if let Some(hold) = self.holds.get_mut(hold_id) {
            if hold.3 == "held" {
                hold.3 = state.to_owned();
                if booking_id.is_some() {
                    hold.4 = booking_id;
                }
            }
        }
        for ((id, _), part) in self
            .pool_holds
            .range_mut((hold_id.to_owned(), i32::MIN)..=(hold_id.to_owned(), i32::MAX))
        {
            if id == hold_id && part.4 == "held" {
                part.4 = state.to_owned();
            }
        }
    }
}

/// Every difference between two maps, described one per line.
fn differences<K: Ord + Debug, V: PartialEq + Debug>(
    table: &str,
    live: &BTreeMap<K, V>,
    rebuilt: &BTreeMap<K, V>,
    out: &mut Vec<String>,
) {
    for (key, value) in live {
        match rebuilt.get(key) {
            None => out.push(format!(
                "{table} {key:?}: live has {value:?}, the log has no such row"
            )),
            Some(expected) if expected != value => {
                out.push(format!(
                    "{table} {key:?}: live {value:?}, from the log {expected:?}"
                ));
            }
            Some(_) => {}
        }
    }
    for (key, value) in rebuilt {
        if !live.contains_key(key) {
            out.push(format!(
                "{table} {key:?}: missing live, from the log {value:?}"
            ));
        }
    }
}

/// Folds the whole log into scratch tables; returns them with the number of
/// events read.
pub async fn rebuild(store: &Store, catalog: &ShowCatalog) -> Result<(Tables, usize), StoreError> {
    let mut rebuilt = Tables::default();
    let mut folded = Folded::default();
    let mut after = 0;
    let mut events_read = 0;
    loop {
        let events = store
            .read_log_committed(LogFilter::All, after, VERIFY_BATCH)
            .await?;
        let Some(last) = events.last() else { break };
        after = last.position;
        events_read += events.len();
        let mut batch = AppendBatch::projection(chrono::Utc::now());
        folded.project(store, catalog, &events, &mut batch).await?;
        rebuilt.apply(&batch);
    }
    Ok((rebuilt, events_read))
}

/// Rebuilds every projection from the log and returns the differences with
/// the live tables (empty: they agree).
pub async fn verify(store: &Store, catalog: &ShowCatalog) -> Result<Vec<String>, StoreError> {
    // The live side first: any event committed after this is also in the
    // rebuilt side, and is reported as a difference only if the live rows
    // were read before its commit (run verify on a quiet system).
    let live = store.dump_projections().await?;
    let (rebuilt, _) = rebuild(store, catalog).await?;
    let mut out = Vec::new();
    differences("seat_availability", &live.seats, &rebuilt.seats, &mut out);
    differences("pool_shards", &live.shards, &rebuilt.shards, &mut out);
    differences("holds", &live.holds, &rebuilt.holds, &mut out);
    let as_map = |set: &BTreeSet<(String, String)>| {
        set.iter()
            .map(|k| (k.clone(), ()))
            .collect::<BTreeMap<_, _>>()
    };
    differences(
        "hold_seats",
        &as_map(&live.hold_seats),
        &as_map(&rebuilt.hold_seats),
        &mut out,
    );
    differences(
        "pool_holds",
        &live.pool_holds,
        &rebuilt.pool_holds,
        &mut out,
    );
    differences("checkouts", &live.checkouts, &rebuilt.checkouts, &mut out);
    Ok(out)
}
