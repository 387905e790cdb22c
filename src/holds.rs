//! Holds: place, read and release, all or nothing across the seats of a hold.
//!
//! Every command follows the same loop: lock the streams in-process (in one
//! global order), bring them up to date, capture `now` once, decide each
//! stream with the pure domain function, and append everything in one
//! transaction at the versions decided on. A conflict (another instance got
//! there first) means: reload and decide again, a bounded number of times.
//! The answer is always a decision, never the conflict itself.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::{seat_stream_id, BookingId, HoldId, IdempotencyKey, SeatId, ShowId};
use domain::limits::MAX_SEATS_PER_HOLD;
use domain::seat::{decide, Seat, SeatCommand, SeatError, SeatEvent};
use projections::holds::{HoldState, HoldStatus};
use projections::time::from_micros;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::auth::Actor;
use crate::batch::push_seat;
use crate::clock::Clock;
use crate::shows::{CatalogEntry, ShowCatalog};
use crate::store::{AppendBatch, AppendOutcome, HoldRecord, IdempotencyRecord, Store, StoreError};
use crate::streams::{append_locked, refresh_all, LockedStream, StreamCache};

/// Decisions per command before giving up with 503 `busy`. Each retry follows
/// a conflict with another instance that did commit, so five in a row means
/// extreme contention across instances; the client may retry.
pub const MAX_DECIDE_ATTEMPTS: usize = 5;

/// Who asked, and under which request: stamped on every event as metadata.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub actor: Actor,
    pub request_id: String,
    pub idempotency_key: Option<IdempotencyKey>,
}

impl RequestContext {
    pub fn metadata(&self) -> String {
        let mut meta = serde_json::Map::new();
        meta.insert("actor".into(), self.actor.id.as_str().into());
        meta.insert("role".into(), self.actor.role.as_str().into());
        meta.insert("request_id".into(), self.request_id.clone().into());
        if let Some(key) = &self.idempotency_key {
            meta.insert("idempotency_key".into(), key.as_str().into());
        }
        serde_json::Value::Object(meta).to_string()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    #[error("show not found")]
    ShowNotFound,
    #[error("{0}")]
    Invalid(String),
    #[error("unknown seats")]
    UnknownSeats(Vec<SeatId>),
    #[error("seats taken")]
    SeatsTaken(Vec<SeatId>),
    #[error("idempotency key reused with another request")]
    IdempotencyKeyReused,
    #[error("hold not found")]
    HoldNotFound,
    #[error("not your hold")]
    Forbidden,
    #[error("the hold has been converted into a booking")]
    HoldConverted,
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A hold as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct HoldView {
    pub hold_id: HoldId,
    pub show_id: String,
    pub seats: Vec<String>,
    pub pool_id: Option<String>,
    pub quantity: Option<u32>,
    pub expires_at: DateTime<Utc>,
    pub status: HoldStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub booking_id: Option<BookingId>,
}

#[derive(Debug)]
pub enum Placed {
    /// A new hold (201).
    New(HoldView),
    /// The hold an earlier request with the same idempotency key made (200).
    Existing(HoldView),
}

pub struct HoldService {
    store: Arc<Store>,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    seats: Arc<StreamCache<Seat>>,
}

/// The seats of one command, sorted by stream id: the global lock order.
struct SeatStreams {
    show_id: ShowId,
    /// (stream id, seat id), sorted by stream id.
    streams: Vec<(String, SeatId)>,
}

impl SeatStreams {
    fn new(show_id: &ShowId, seats: impl IntoIterator<Item = SeatId>) -> Self {
        let mut streams: Vec<(String, SeatId)> = seats
            .into_iter()
            .map(|seat| (seat_stream_id(show_id, &seat), seat))
            .collect();
        streams.sort();
        streams.dedup();
        Self {
            show_id: show_id.clone(),
            streams,
        }
    }

    fn ids(&self) -> Vec<String> {
        self.streams.iter().map(|(id, _)| id.clone()).collect()
    }
}

/// The events decided for each locked stream, in the same order.
type Decided = Vec<Vec<SeatEvent>>;

impl HoldService {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        seats: Arc<StreamCache<Seat>>,
    ) -> Self {
        Self {
            store,
            catalog,
            clock,
            seats,
        }
    }

    async fn show(&self, show_id: &ShowId) -> Result<Arc<CatalogEntry>, HoldError> {
        self.catalog
            .get(&self.store, show_id)
            .await?
            .ok_or(HoldError::ShowNotFound)
    }

    /// `POST /v1/shows/{id}/holds` with seats.
    pub async fn place(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        seats: Vec<SeatId>,
    ) -> Result<Placed, HoldError> {
        let entry = self.show(show_id).await?;
        let show = &entry.show;
        if seats.is_empty() || seats.len() > MAX_SEATS_PER_HOLD {
            return Err(HoldError::Invalid(format!(
                "a hold has 1..={MAX_SEATS_PER_HOLD} seats (MAX_SEATS_PER_HOLD), got {}",
                seats.len()
            )));
        }
        let mut seen = std::collections::HashSet::with_capacity(seats.len());
        if let Some(dup) = seats.iter().find(|s| !seen.insert(*s)) {
            return Err(HoldError::Invalid(format!("seat {dup} is listed twice")));
        }
        let unknown: Vec<SeatId> = seats
            .iter()
            .filter(|s| show.seat(s).is_none())
            .cloned()
            .collect();
        if !unknown.is_empty() {
            return Err(HoldError::UnknownSeats(unknown));
        }

        let request_hash = request_hash(show_id, &seats);
        if let Some(key) = &ctx.idempotency_key {
            if let Some(existing) = self.replay_idempotent(ctx, key, &request_hash).await? {
                return Ok(Placed::Existing(existing));
            }
        }
        let hold_id = match &ctx.idempotency_key {
            Some(key) => HoldId::for_idempotency_key(&ctx.actor.id, key),
            None => HoldId::random(),
        };
        let streams = SeatStreams::new(show_id, seats);

        for _ in 0..MAX_DECIDE_ATTEMPTS {
            let mut locked = self.seats.lock(&streams.ids()).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let expires_at = now + show.hold_ttl();
            let command = SeatCommand::PlaceHold {
                hold_id,
                buyer: ctx.actor.id.clone(),
                expires_at,
            };
            let mut taken = Vec::new();
            let mut decided: Decided = Vec::with_capacity(locked.len());
            for (stream, (_, seat_id)) in locked.iter().zip(&streams.streams) {
                match decide(stream.aggregate(), &command, now) {
                    Ok(events) => decided.push(events),
                    Err(SeatError::HeldByAnother | SeatError::Booked) => {
                        taken.push(seat_id.clone())
                    }
                    Err(other) => return Err(HoldError::Invalid(other.to_string())),
                }
            }
            if !taken.is_empty() {
                sort_in_show_order(&entry, &mut taken);
                return Err(HoldError::SeatsTaken(taken));
            }
            if decided.iter().all(Vec::is_empty) {
                // Every seat is already held by this very hold: a concurrent
                // request with the same idempotency key won. Its answer is ours,
                // if it asked for the same thing.
                drop(locked);
                return match &ctx.idempotency_key {
                    Some(key) => self
                        .replay_idempotent(ctx, key, &request_hash)
                        .await?
                        .map(Placed::Existing)
                        .ok_or(HoldError::Busy),
                    None => Err(HoldError::Busy),
                };
            }
            let idempotency = ctx.idempotency_key.as_ref().map(|key| IdempotencyRecord {
                buyer: ctx.actor.id.as_str().to_owned(),
                key: key.as_str().to_owned(),
                request_hash: request_hash.clone(),
                hold_id: hold_id.to_string(),
            });
            match self
                .append(ctx, &streams, &mut locked, decided, now, idempotency)
                .await?
            {
                AppendOutcome::Appended => {
                    let mut seats: Vec<SeatId> = streams
                        .streams
                        .iter()
                        .map(|(_, seat)| seat.clone())
                        .collect();
                    sort_in_show_order(&entry, &mut seats);
                    return Ok(Placed::New(HoldView {
                        hold_id,
                        show_id: show_id.to_string(),
                        seats: seats.iter().map(SeatId::to_string).collect(),
                        pool_id: None,
                        quantity: None,
                        expires_at,
                        status: HoldStatus::Held,
                        booking_id: None,
                    }));
                }
                AppendOutcome::Conflict => continue,
                AppendOutcome::IdempotencyKeyTaken => {
                    drop(locked);
                    let Some(key) = &ctx.idempotency_key else {
                        return Err(HoldError::Busy);
                    };
                    return self
                        .replay_idempotent(ctx, key, &request_hash)
                        .await?
                        .map(Placed::Existing)
                        .ok_or(HoldError::Busy);
                }
            }
        }
        Err(HoldError::Busy)
    }

    /// The hold an idempotency key already produced: `Ok(Some)` if the same
    /// request made it, `Err(IdempotencyKeyReused)` if another one did.
    async fn replay_idempotent(
        &self,
        ctx: &RequestContext,
        key: &IdempotencyKey,
        request_hash: &str,
    ) -> Result<Option<HoldView>, HoldError> {
        let Some(entry) = self
            .store
            .idempotency_entry(ctx.actor.id.as_str(), key.as_str())
            .await?
        else {
            return Ok(None);
        };
        if entry.request_hash != request_hash {
            return Err(HoldError::IdempotencyKeyReused);
        }
        let record = self.store.hold(&entry.hold_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("hold {} of a key is missing", entry.hold_id))
        })?;
        Ok(Some(self.view(record)?))
    }

    /// Builds and appends the batch for the decided events. On anything but
    /// success the cached streams are marked stale.
    async fn append(
        &self,
        ctx: &RequestContext,
        streams: &SeatStreams,
        locked: &mut [LockedStream<Seat>],
        decided: Decided,
        now: DateTime<Utc>,
        idempotency: Option<IdempotencyRecord>,
    ) -> Result<AppendOutcome, HoldError> {
        let metadata = ctx.metadata();
        let mut batch = AppendBatch::new(now);
        batch.idempotency = idempotency;
        for ((stream, (_, seat_id)), events) in locked.iter().zip(&streams.streams).zip(&decided) {
            push_seat(
                &mut batch,
                &streams.show_id,
                seat_id,
                stream,
                events,
                &metadata,
            )?;
        }
        let outcome = append_locked(&self.store, &batch, locked).await?;
        if outcome == AppendOutcome::Appended {
            for (stream, events) in locked.iter_mut().zip(decided) {
                stream.appended(events);
            }
        }
        Ok(outcome)
    }

    fn view(&self, record: HoldRecord) -> Result<HoldView, HoldError> {
        let expires_at = from_micros(record.expires_at_us)
            .ok_or_else(|| StoreError::Corrupt(format!("hold {} expiry", record.hold_id)))?;
        let hold_id = record
            .hold_id
            .parse()
            .map(HoldId)
            .map_err(|e| StoreError::Corrupt(format!("hold id {}: {e}", record.hold_id)))?;
        let booking_id = match &record.booking_id {
            Some(id) => Some(BookingId(id.parse().map_err(|e| {
                StoreError::Corrupt(format!("booking id of hold {}: {e}", record.hold_id))
            })?)),
            None => None,
        };
        Ok(HoldView {
            hold_id,
            show_id: record.show_id,
            seats: record.seats,
            pool_id: None,
            quantity: None,
            expires_at,
            status: HoldStatus::at(record.state, expires_at, self.clock.now()),
            booking_id,
        })
    }

    async fn owned_record(&self, actor: &Actor, hold_id: &HoldId) -> Result<HoldRecord, HoldError> {
        let record = self
            .store
            .hold(&hold_id.to_string())
            .await?
            .ok_or(HoldError::HoldNotFound)?;
        if !actor.may_act_for(&record.buyer) {
            return Err(HoldError::Forbidden);
        }
        Ok(record)
    }

    /// `GET /v1/holds/{id}`.
    pub async fn get(&self, actor: &Actor, hold_id: &HoldId) -> Result<HoldView, HoldError> {
        let record = self.owned_record(actor, hold_id).await?;
        self.view(record)
    }

    /// `DELETE /v1/holds/{id}`: gives every seat of the hold back. Releasing
    /// a released or expired hold succeeds and changes nothing more.
    pub async fn release(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let record = self.owned_record(&ctx.actor, hold_id).await?;
        match record.state {
            HoldState::Held => {}
            HoldState::Converted => return Err(HoldError::HoldConverted),
            HoldState::Released | HoldState::Expired => return Ok(()),
        }
        let show_id = ShowId::parse(&record.show_id)
            .map_err(|e| StoreError::Corrupt(format!("hold {}: {e}", record.hold_id)))?;
        let seats = record
            .seats
            .iter()
            .map(|s| SeatId::parse(s))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| StoreError::Corrupt(format!("hold {}: {e}", record.hold_id)))?;
        let streams = SeatStreams::new(&show_id, seats);
        let command = SeatCommand::ReleaseHold { hold_id: *hold_id };
        for _ in 0..MAX_DECIDE_ATTEMPTS {
            let mut locked = self.seats.lock(&streams.ids()).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let decided = locked
                .iter()
                .map(|stream| decide(stream.aggregate(), &command, now))
                .collect::<Result<Decided, SeatError>>()
                .map_err(|e| match e {
                    SeatError::HoldConverted => HoldError::HoldConverted,
                    other => HoldError::Invalid(other.to_string()),
                })?;
            if decided.iter().all(Vec::is_empty) {
                return Ok(());
            }
            match self
                .append(ctx, &streams, &mut locked, decided, now, None)
                .await?
            {
                AppendOutcome::Appended => return Ok(()),
                AppendOutcome::Conflict | AppendOutcome::IdempotencyKeyTaken => continue,
            }
        }
        Err(HoldError::Busy)
    }
}

/// The identity of a hold request for idempotency: the show and the set of
/// seats (order does not matter; the same seats are the same request).
fn request_hash(show_id: &ShowId, seats: &[SeatId]) -> String {
    let mut sorted: Vec<&str> = seats.iter().map(SeatId::as_str).collect();
    sorted.sort_unstable();
    let mut hasher = Sha256::new();
    hasher.update(b"seats\n");
    hasher.update(show_id.as_str().as_bytes());
    for seat in sorted {
        hasher.update(b"\n");
        hasher.update(seat.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn sort_in_show_order(entry: &CatalogEntry, seats: &mut [SeatId]) {
    seats.sort_by_key(|s| entry.show.seat(s).map(|(ordinal, _)| ordinal));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(ids: &[&str]) -> Vec<SeatId> {
        ids.iter().map(|s| SeatId::parse(s).unwrap()).collect()
    }

    #[test]
    fn the_same_seats_in_another_order_are_the_same_request() {
        let show = ShowId::parse("s").unwrap();
        assert_eq!(
            request_hash(&show, &seats(&["A", "B"])),
            request_hash(&show, &seats(&["B", "A"]))
        );
    }

    #[test]
    fn other_seats_or_another_show_are_another_request() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let ab = request_hash(&show, &seats(&["A", "B"]));
        assert_ne!(ab, request_hash(&show, &seats(&["A", "C"])));
        assert_ne!(ab, request_hash(&other, &seats(&["A", "B"])));
    }
}
