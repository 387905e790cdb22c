//! Holds: place, read and release, all or nothing across the units of a hold
//! (seats, or places in the shards of a pool).
//!
//! Every command follows the same loop: lock the streams in-process (in one
//! global order), bring them up to date, capture `now` once, decide each
//! stream with the pure domain function, and append everything in one
//! transaction at the versions decided on. A conflict (another instance got
//! there first) means: reload and decide again, a bounded number of times.
//! The answer is always a decision, never the conflict itself.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::ids::{seat_stream_id, BookingId, HoldId, IdempotencyKey, PoolId, SeatId, ShowId};
use domain::limits::{MAX_POOL_HOLD_QUANTITY, MAX_SEATS_PER_HOLD};
use domain::pool::{self, shard_capacity, shard_stream_id, split, PoolCommand, PoolError};
use domain::seat::{self, SeatCommand, SeatError};
use domain::show::PoolSpec;
use projections::holds::{HoldState, HoldStatus};
use projections::time::from_micros;
use rand::Rng;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::auth::Actor;
use crate::clock::Clock;
use crate::inventory::{units_of, HoldUnits, Inventory, Refusal, SeatKey, ShardKey, Unit};
use crate::shows::{CatalogEntry, ShowCatalog};
use crate::store::{AppendBatch, AppendOutcome, HoldRecord, IdempotencyRecord, Store, StoreError};
use crate::streams::{
    append_decided, refresh_all, refresh_or_assume_new, LockedStream, StreamCache,
};

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
    #[error("unknown pool")]
    UnknownPool(PoolId),
    #[error("seats taken")]
    SeatsTaken(Vec<SeatId>),
    #[error("sold out")]
    SoldOut { available: u32 },
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
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct HoldView {
    #[schema(value_type = uuid::Uuid)]
    pub hold_id: HoldId,
    pub show_id: String,
    pub seats: Vec<String>,
    pub pool_id: Option<String>,
    pub quantity: Option<u32>,
    pub expires_at: DateTime<Utc>,
    /// `held`, `expired`, `released` or `converted`.
    #[schema(value_type = String)]
    pub status: HoldStatus,
    /// Set once the hold was converted into a booking.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<uuid::Uuid>)]
    pub booking_id: Option<BookingId>,
}

#[derive(Debug)]
pub enum Placed {
    /// A new hold (201).
    New(HoldView),
    /// The hold an earlier request with the same idempotency key made (200).
    Existing(HoldView),
}

/// What a hold request asks for.
#[derive(Debug, Clone)]
pub enum HoldRequest {
    Seats(Vec<SeatId>),
    Pool { pool_id: PoolId, quantity: u32 },
}

impl HoldRequest {
    /// The identity of the request for idempotency: the show and what it
    /// asks for (the same seats in another order are the same request).
    fn hash(&self, show_id: &ShowId) -> String {
        let mut hasher = Sha256::new();
        match self {
            HoldRequest::Seats(seats) => {
                let mut sorted: Vec<&str> = seats.iter().map(SeatId::as_str).collect();
                sorted.sort_unstable();
                hasher.update(b"seats\n");
                hasher.update(show_id.as_str().as_bytes());
                for seat in sorted {
                    hasher.update(b"\n");
                    hasher.update(seat.as_bytes());
                }
            }
            HoldRequest::Pool { pool_id, quantity } => {
                hasher.update(b"pool\n");
                hasher.update(show_id.as_str().as_bytes());
                hasher.update(b"\n");
                hasher.update(pool_id.as_str().as_bytes());
                hasher.update(format!("\n{quantity}").as_bytes());
            }
        }
        hex::encode(hasher.finalize())
    }
}

pub struct HoldService {
    store: Arc<Store>,
    catalog: Arc<ShowCatalog>,
    clock: Arc<dyn Clock>,
    inventory: Arc<Inventory>,
}

/// A hold being placed: its id, who for, and the idempotency record to write.
struct Placement<'a> {
    ctx: &'a RequestContext,
    hold_id: HoldId,
    request_hash: String,
}

impl Placement<'_> {
    fn idempotency(&self) -> Option<IdempotencyRecord> {
        self.ctx
            .idempotency_key
            .as_ref()
            .map(|key| IdempotencyRecord {
                buyer: self.ctx.actor.id.as_str().to_owned(),
                key: key.as_str().to_owned(),
                request_hash: self.request_hash.clone(),
                hold_id: self.hold_id.to_string(),
            })
    }
}

/// What one attempt at placing a hold came to.
enum Attempt<T> {
    Done(T),
    /// Nothing new to write: every unit already holds this hold (a
    /// concurrent request with the same idempotency key won).
    AlreadyHeld,
    /// Appending refused: this instance's view was stale; decide again.
    Retry,
    /// The idempotency key was taken meanwhile by another request.
    KeyTaken,
}

impl HoldService {
    pub fn new(
        store: Arc<Store>,
        catalog: Arc<ShowCatalog>,
        clock: Arc<dyn Clock>,
        inventory: Arc<Inventory>,
    ) -> Self {
        Self {
            store,
            catalog,
            clock,
            inventory,
        }
    }

    async fn show(&self, show_id: &ShowId) -> Result<Arc<CatalogEntry>, HoldError> {
        self.catalog
            .get(&self.store, show_id)
            .await?
            .ok_or(HoldError::ShowNotFound)
    }

    /// `POST /v1/shows/{id}/holds`.
    pub async fn place(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        request: HoldRequest,
    ) -> Result<Placed, HoldError> {
        let entry = self.show(show_id).await?;
        validate(&entry, &request)?;
        let request_hash = request.hash(show_id);
        if let Some(key) = &ctx.idempotency_key {
            if let Some(existing) = self.replay_idempotent(ctx, key, &request_hash).await? {
                return Ok(Placed::Existing(existing));
            }
        }
        let placement = Placement {
            ctx,
            hold_id: match &ctx.idempotency_key {
                Some(key) => HoldId::for_idempotency_key(&ctx.actor.id, key),
                None => HoldId::random(),
            },
            request_hash,
        };
        for _ in 0..MAX_DECIDE_ATTEMPTS {
            let attempt = match &request {
                HoldRequest::Seats(seats) => self.try_seats(&placement, &entry, seats).await?,
                HoldRequest::Pool { pool_id, quantity } => {
                    let spec = entry
                        .show
                        .pool(pool_id)
                        .ok_or_else(|| HoldError::UnknownPool(pool_id.clone()))?;
                    self.try_pool(&placement, &entry, spec, *quantity).await?
                }
            };
            match attempt {
                Attempt::Done(view) => return Ok(Placed::New(view)),
                Attempt::Retry => {
                    metrics::counter!("append_conflicts_total", "command" => "hold").increment(1);
                    continue;
                }
                Attempt::AlreadyHeld | Attempt::KeyTaken => {
                    // Another request with this key got there first: its
                    // answer is ours, if it asked for the same thing.
                    let Some(key) = &ctx.idempotency_key else {
                        return Err(HoldError::Busy);
                    };
                    return self
                        .replay_idempotent(ctx, key, &placement.request_hash)
                        .await?
                        .map(Placed::Existing)
                        .ok_or(HoldError::Busy);
                }
            }
        }
        Err(HoldError::Busy)
    }

    /// One attempt at holding every listed seat, all or nothing.
    async fn try_seats(
        &self,
        placement: &Placement<'_>,
        entry: &CatalogEntry,
        seats: &[SeatId],
    ) -> Result<Attempt<HoldView>, HoldError> {
        let show_id = &entry.show.show_id;
        let mut units: Vec<(String, SeatKey)> = seats
            .iter()
            .map(|seat_id| {
                let key = SeatKey {
                    show_id: show_id.clone(),
                    seat_id: seat_id.clone(),
                };
                (seat_stream_id(show_id, seat_id), key)
            })
            .collect();
        units.sort_by(|a, b| a.0.cmp(&b.0));
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        let mut locked = self.inventory.seats.lock(&ids).await;
        refresh_or_assume_new(&self.store, &mut locked).await?;
        let now = self.clock.now();
        let expires_at = now + entry.show.hold_ttl();
        let command = SeatCommand::PlaceHold {
            hold_id: placement.hold_id,
            buyer: placement.ctx.actor.id.clone(),
            expires_at,
        };
        let decide_all = |locked: &[LockedStream<domain::seat::Seat>]| {
            let mut taken = Vec::new();
            let mut decided = Vec::with_capacity(locked.len());
            for (stream, (_, key)) in locked.iter().zip(&units) {
                match seat::decide(stream.aggregate(), &command, now) {
                    Ok(events) => decided.push(events),
                    Err(SeatError::HeldByAnother | SeatError::Booked) => {
                        taken.push(key.seat_id.clone())
                    }
                    Err(other) => return Err(HoldError::Invalid(other.to_string())),
                }
            }
            Ok((taken, decided))
        };
        let (mut taken, mut decided) = decide_all(&locked)?;
        if !taken.is_empty() && locked.iter().any(|s| !s.is_loaded()) {
            // A refusal names every seat the buyer cannot have: read the
            // seats that were only assumed new, and decide again.
            refresh_all(&self.store, &mut locked).await?;
            (taken, decided) = decide_all(&locked)?;
        }
        if !taken.is_empty() {
            sort_in_show_order(entry, &mut taken);
            return Err(HoldError::SeatsTaken(taken));
        }
        let outcome = self
            .append_units(placement, &mut locked, &units, decided, now)
            .await?;
        Ok(outcome.map(|()| {
            let mut seats = seats.to_vec();
            sort_in_show_order(entry, &mut seats);
            HoldView {
                hold_id: placement.hold_id,
                show_id: show_id.to_string(),
                seats: seats.iter().map(SeatId::to_string).collect(),
                pool_id: None,
                quantity: None,
                expires_at,
                status: HoldStatus::Held,
                booking_id: None,
            }
        }))
    }

    /// One attempt at holding `quantity` places of a pool. First one shard
    /// with room, trying shards one at a time from a random one (buyers
    /// spread over the shards and rarely wait on each other); if no single
    /// shard has room, every shard, locked together, so that `sold_out` is
    /// only answered when the whole pool cannot serve the quantity.
    async fn try_pool(
        &self,
        placement: &Placement<'_>,
        entry: &CatalogEntry,
        spec: &PoolSpec,
        quantity: u32,
    ) -> Result<Attempt<HoldView>, HoldError> {
        let show_id = &entry.show.show_id;
        let units: Vec<(String, ShardKey)> = (0..spec.shards)
            .map(|index| {
                let key = ShardKey {
                    show_id: show_id.clone(),
                    pool_id: spec.pool_id.clone(),
                    index,
                    capacity: shard_capacity(spec.capacity, spec.shards, index),
                };
                (shard_stream_id(show_id, &spec.pool_id, index), key)
            })
            .collect();
        let start = rand::thread_rng().gen_range(0..spec.shards) as usize;
        let ring = (0..units.len()).map(|i| (start + i) % units.len());
        let expires = |now: DateTime<Utc>| now + entry.show.hold_ttl();
        let view = |expires_at| HoldView {
            hold_id: placement.hold_id,
            show_id: show_id.to_string(),
            seats: Vec::new(),
            pool_id: Some(spec.pool_id.to_string()),
            quantity: Some(quantity),
            expires_at,
            status: HoldStatus::Held,
            booking_id: None,
        };

        // Shards this instance last saw full are skipped here (a guess; the
        // whole-pool look below decides if none of the others has room).
        let now = self.clock.now();
        let candidates = ring.clone().filter(|&i| {
            let (id, key) = &units[i];
            let free = self
                .inventory
                .shards
                .peek(id, |shard| shard.available_at(key.capacity, now));
            free.is_none_or(|free| free >= quantity)
        });
        for index in candidates {
            let unit = std::slice::from_ref(&units[index]);
            let mut locked = self.inventory.shards.lock(&[unit[0].0.clone()]).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let expires_at = expires(now);
            let command = pool_place(placement, quantity, expires_at);
            match pool::decide(locked[0].aggregate(), unit[0].1.capacity, &command, now) {
                Ok(events) => {
                    let outcome = self
                        .append_units(placement, &mut locked, unit, vec![events], now)
                        .await?;
                    return Ok(outcome.map(|()| view(expires_at)));
                }
                Err(PoolError::NotEnough { .. }) => continue,
                Err(other) => return Err(HoldError::Invalid(other.to_string())),
            }
        }

        // No single shard has room: look at the whole pool at once.
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        let mut locked = self.inventory.shards.lock(&ids).await;
        refresh_all(&self.store, &mut locked).await?;
        let now = self.clock.now();
        let free: Vec<(u32, u32)> = ring
            .map(|i| {
                (
                    i as u32,
                    locked[i].aggregate().available_at(units[i].1.capacity, now),
                )
            })
            .collect();
        let Some(parts) = split(&free, quantity) else {
            let available = free.iter().map(|(_, n)| n).sum();
            return Err(HoldError::SoldOut { available });
        };
        let expires_at = expires(now);
        let mut decided: Vec<Vec<pool::PoolEvent>> = vec![Vec::new(); units.len()];
        for (shard, part) in parts {
            let i = shard as usize;
            let command = pool_place(placement, part, expires_at);
            decided[i] = pool::decide(locked[i].aggregate(), units[i].1.capacity, &command, now)
                .map_err(|e| HoldError::Invalid(e.to_string()))?;
        }
        let outcome = self
            .append_units(placement, &mut locked, &units, decided, now)
            .await?;
        Ok(outcome.map(|()| view(expires_at)))
    }

    /// Appends the decided events of a placement with its idempotency record.
    async fn append_units<U: Unit>(
        &self,
        placement: &Placement<'_>,
        locked: &mut [LockedStream<U>],
        units: &[(String, U::Key)],
        decided: Vec<Vec<U::Event>>,
        now: DateTime<Utc>,
    ) -> Result<Attempt<()>, HoldError> {
        if decided.iter().all(Vec::is_empty) {
            return Ok(Attempt::AlreadyHeld);
        }
        let metadata = placement.ctx.metadata();
        let mut batch = AppendBatch::new(now);
        batch.idempotency = placement.idempotency();
        for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
            U::push(&mut batch, key, &stream.view(), events, &metadata)?;
        }
        Ok(
            match append_decided(&self.store, &batch, locked, decided).await? {
                AppendOutcome::Appended => Attempt::Done(()),
                AppendOutcome::Conflict | AppendOutcome::CheckpointMoved => Attempt::Retry,
                AppendOutcome::IdempotencyKeyTaken => Attempt::KeyTaken,
            },
        )
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
        Ok(Some(self.view(record).await?))
    }

    async fn view(&self, mut record: HoldRecord) -> Result<HoldView, HoldError> {
        if record.seats.len() > 1 {
            let show_id = ShowId::parse(&record.show_id)
                .map_err(|e| StoreError::Corrupt(format!("hold {}: {e}", record.hold_id)))?;
            self.show(&show_id).await?.sort_seats(&mut record.seats);
        }
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
        let quantity = record.quantity();
        Ok(HoldView {
            hold_id,
            show_id: record.show_id,
            seats: record.seats,
            pool_id: record.pool.map(|(pool_id, _)| pool_id),
            quantity,
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
        self.view(record).await
    }

    /// `DELETE /v1/holds/{id}`: gives every unit of the hold back. Releasing
    /// a released or expired hold succeeds and changes nothing more.
    pub async fn release(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let record = self.owned_record(&ctx.actor, hold_id).await?;
        match record.state {
            HoldState::Held => {}
            HoldState::Converted => return Err(HoldError::HoldConverted),
            HoldState::Released | HoldState::Expired => return Ok(()),
        }
        self.end(ctx, record, End::Release).await
    }

    /// Records `HoldExpired` on every unit of a hold past its expiry (the
    /// sweeper). Storage hygiene and an audit record: nothing depends on it.
    pub async fn expire(&self, ctx: &RequestContext, hold_id: &HoldId) -> Result<(), HoldError> {
        let Some(record) = self.store.hold(&hold_id.to_string()).await? else {
            return Ok(());
        };
        if record.state != HoldState::Held {
            return Ok(());
        }
        self.end(ctx, record, End::Expire).await
    }

    async fn end(
        &self,
        ctx: &RequestContext,
        record: HoldRecord,
        end: End,
    ) -> Result<(), HoldError> {
        let hold_id = HoldId(
            record
                .hold_id
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("hold id {}: {e}", record.hold_id)))?,
        );
        let show_id = ShowId::parse(&record.show_id)
            .map_err(|e| StoreError::Corrupt(format!("hold {}: {e}", record.hold_id)))?;
        let entry = self.show(&show_id).await?;
        match units_of(&record, &entry.show)? {
            HoldUnits::Seats(units) => {
                self.end_units(ctx, hold_id, &self.inventory.seats, &units, end)
                    .await
            }
            HoldUnits::Pool(units) => {
                self.end_units(ctx, hold_id, &self.inventory.shards, &units, end)
                    .await
            }
        }
    }

    async fn end_units<U: Unit>(
        &self,
        ctx: &RequestContext,
        hold_id: HoldId,
        cache: &StreamCache<U>,
        units: &[(String, U::Key)],
        end: End,
    ) -> Result<(), HoldError> {
        let ids: Vec<String> = units.iter().map(|(id, _)| id.clone()).collect();
        for _ in 0..MAX_DECIDE_ATTEMPTS {
            let mut locked = cache.lock(&ids).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let decided = locked
                .iter()
                .zip(units)
                .map(|(stream, (_, key))| match end {
                    End::Release => stream.aggregate().release(key, hold_id, now),
                    End::Expire => Ok(stream.aggregate().expire(key, hold_id, now)),
                })
                .collect::<Result<Vec<_>, Refusal>>()
                .map_err(|refusal| match refusal {
                    Refusal::Converted => HoldError::HoldConverted,
                    other => HoldError::Invalid(format!("cannot release: {other:?}")),
                })?;
            if decided.iter().all(Vec::is_empty) {
                return Ok(());
            }
            let metadata = ctx.metadata();
            let mut batch = AppendBatch::new(now);
            for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
                U::push(&mut batch, key, &stream.view(), events, &metadata)?;
            }
            if append_decided(&self.store, &batch, &mut locked, decided).await?
                == AppendOutcome::Appended
            {
                return Ok(());
            }
        }
        Err(HoldError::Busy)
    }
}

/// How a hold ends before it is bought.
#[derive(Debug, Clone, Copy)]
enum End {
    Release,
    Expire,
}

impl<T> Attempt<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> Attempt<U> {
        match self {
            Attempt::Done(value) => Attempt::Done(f(value)),
            Attempt::AlreadyHeld => Attempt::AlreadyHeld,
            Attempt::Retry => Attempt::Retry,
            Attempt::KeyTaken => Attempt::KeyTaken,
        }
    }
}

fn pool_place(placement: &Placement<'_>, quantity: u32, expires_at: DateTime<Utc>) -> PoolCommand {
    PoolCommand::PlaceHold {
        hold_id: placement.hold_id,
        buyer: placement.ctx.actor.id.clone(),
        quantity,
        expires_at,
    }
}

/// Checks a request against the show before anything is locked.
fn validate(entry: &CatalogEntry, request: &HoldRequest) -> Result<(), HoldError> {
    match request {
        HoldRequest::Seats(seats) => {
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
                .filter(|s| entry.show.seat(s).is_none())
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(HoldError::UnknownSeats(unknown));
            }
        }
        HoldRequest::Pool { pool_id, quantity } => {
            if !(1..=MAX_POOL_HOLD_QUANTITY).contains(quantity) {
                return Err(HoldError::Invalid(format!(
                    "quantity must be 1..={MAX_POOL_HOLD_QUANTITY} (MAX_POOL_HOLD_QUANTITY), got {quantity}"
                )));
            }
            if entry.show.pool(pool_id).is_none() {
                return Err(HoldError::UnknownPool(pool_id.clone()));
            }
        }
    }
    Ok(())
}

fn sort_in_show_order(entry: &CatalogEntry, seats: &mut [SeatId]) {
    seats.sort_by_key(|s| entry.show.seat(s).map(|(ordinal, _)| ordinal));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seats(ids: &[&str]) -> HoldRequest {
        HoldRequest::Seats(ids.iter().map(|s| SeatId::parse(s).unwrap()).collect())
    }

    #[test]
    fn the_same_seats_in_another_order_are_the_same_request() {
        let show = ShowId::parse("s").unwrap();
        assert_eq!(
            seats(&["A", "B"]).hash(&show),
            seats(&["B", "A"]).hash(&show)
        );
    }

    #[test]
    fn other_seats_another_show_or_a_pool_are_another_request() {
        let show = ShowId::parse("s").unwrap();
        let other = ShowId::parse("t").unwrap();
        let ab = seats(&["A", "B"]).hash(&show);
        assert_ne!(ab, seats(&["A", "C"]).hash(&show));
        assert_ne!(ab, seats(&["A", "B"]).hash(&other));
        let pool = |q| HoldRequest::Pool {
            pool_id: PoolId::parse("floor").unwrap(),
            quantity: q,
        };
        assert_ne!(pool(2).hash(&show), pool(3).hash(&show));
    }
}
