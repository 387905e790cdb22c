//! Placing a hold: each round locks the units, decides them all at one
//! `now` and appends the hold with its idempotency record; a retry with the
//! same idempotency key answers the hold the first request made.

use chrono::{DateTime, Utc};
use domain::allowance::{AllowanceCommand, AllowanceError};
use domain::ids::{seat_stream_id, HoldId, IdempotencyKey, SeatId, ShowId};
use domain::pool::{self, shard_capacity, shard_stream_id, split, PoolCommand, PoolError};
use domain::seat::{self, SeatCommand, SeatError};
use domain::show::PoolSpec;
use projections::holds::HoldStatus;
use projections::time::to_micros;
use rand::Rng;

use super::{HoldError, HoldRequest, HoldService, HoldView, Placed, MAX_DECIDE_ROUNDS};
use crate::catalog::CatalogEntry;
use crate::command::allowance::{
    append_with_allowance, decide_and_push, BuyerAllowance, DecideError,
};
use crate::command::context::RequestContext;
use crate::command::streams::{refresh_all, refresh_or_assume_new, LockedStream};
use crate::command::units::{SeatKey, ShardKey, Unit};
use crate::store::{AppendBatch, AppendOutcome, IdempotencyKeyRow, StoreError};

/// A hold being placed: its id, who for, and the idempotency record to write.
struct Placement<'a> {
    ctx: &'a RequestContext,
    hold_id: HoldId,
    request_hash: String,
}

/// What a placement counts against the buyer's allowance, if the show has a
/// limit: the allowance locked for this round (before the units), and the
/// seats or places the hold takes.
struct Counted<'a> {
    allowance: Option<&'a mut BuyerAllowance>,
    units: u32,
}

impl Placement<'_> {
    fn idempotency(&self, at: DateTime<Utc>) -> Option<IdempotencyKeyRow> {
        self.ctx
            .idempotency_key
            .as_ref()
            .map(|key| IdempotencyKeyRow {
                buyer: self.ctx.actor.id.clone(),
                key: key.clone(),
                request_hash: self.request_hash.clone(),
                hold_id: self.hold_id,
                created_at_us: to_micros(at),
            })
    }

    fn pool_command(&self, quantity: u32, expires_at: DateTime<Utc>) -> PoolCommand {
        PoolCommand::PlaceHold {
            hold_id: self.hold_id,
            buyer: self.ctx.actor.id.clone(),
            quantity,
            expires_at,
        }
    }
}

/// What one round of deciding and appending a placement came to.
enum RoundOutcome<T> {
    Done(T),
    /// Nothing new to write: every unit already holds this hold (a
    /// concurrent request with the same idempotency key won).
    AlreadyHeld,
    /// Appending refused: this instance's view was stale; decide again.
    Retry,
    /// The idempotency key was taken meanwhile by another request.
    KeyTaken,
}

impl<T> RoundOutcome<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> RoundOutcome<U> {
        match self {
            RoundOutcome::Done(value) => RoundOutcome::Done(f(value)),
            RoundOutcome::AlreadyHeld => RoundOutcome::AlreadyHeld,
            RoundOutcome::Retry => RoundOutcome::Retry,
            RoundOutcome::KeyTaken => RoundOutcome::KeyTaken,
        }
    }
}

impl HoldService {
    /// `POST /v1/shows/{id}/holds`.
    pub async fn place(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        request: HoldRequest,
    ) -> Result<Placed, HoldError> {
        let entry = self.show(show_id).await?;
        request.validate(&entry)?;
        let request_hash = request.hash(show_id);
        self.place_validated(ctx, &entry, request, request_hash)
            .await
    }

    /// Places a request already checked against the show, remembered under
    /// `request_hash` (a best-available hold passes the hash of what was
    /// asked, not of the seats chosen).
    pub(super) async fn place_validated(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        request: HoldRequest,
        request_hash: String,
    ) -> Result<Placed, HoldError> {
        if let Some(key) = &ctx.idempotency_key {
            if let Some(existing) = self.replay_idempotent(ctx, key, &request_hash).await? {
                return Ok(Placed::Existing(existing));
            }
        }
        let placement = Placement {
            ctx,
            hold_id: match &ctx.idempotency_key {
                // The day of first use is part of the id, so a key used again
                // after it was pruned (sweeper, retention) gets a new hold,
                // never one whose streams the old hold already wrote.
                Some(key) => HoldId::for_idempotency_key(&ctx.actor.id, key, self.clock.now()),
                None => HoldId::random(),
            },
            request_hash,
        };
        for _ in 0..MAX_DECIDE_ROUNDS {
            // Lock order: the buyer's allowance before the units (see
            // command::allowance); `None` when the show has no limit.
            let mut allowance = BuyerAllowance::lock(
                &self.store,
                &self.inventory.allowances,
                &entry.show,
                &ctx.actor.id,
            )
            .await?;
            let round = match &request {
                HoldRequest::Seats(seats) => {
                    let counted = Counted {
                        allowance: allowance.as_mut(),
                        units: seats.len() as u32,
                    };
                    self.place_seats(&placement, entry, seats, counted).await
                }
                HoldRequest::Pool { pool_id, quantity } => {
                    let spec = entry
                        .show
                        .pool(pool_id)
                        .ok_or_else(|| HoldError::UnknownPool(pool_id.clone()))?;
                    let counted = Counted {
                        allowance: allowance.as_mut(),
                        units: *quantity,
                    };
                    self.place_in_pool(&placement, entry, spec, *quantity, counted)
                        .await
                }
            };
            drop(allowance);
            let outcome = match (round, &ctx.idempotency_key) {
                // The units went to another hold: if a concurrent request
                // with this key placed it under another id (the two straddled
                // a period of `HoldId::for_idempotency_key`), that is ours.
                (
                    Err(
                        taken @ (HoldError::SeatsTaken(_)
                        | HoldError::SoldOut { .. }
                        | HoldError::BuyerLimitReached { .. }),
                    ),
                    Some(key),
                ) => {
                    return match self
                        .replay_idempotent(ctx, key, &placement.request_hash)
                        .await?
                    {
                        Some(existing) => Ok(Placed::Existing(existing)),
                        None => Err(taken),
                    };
                }
                (round, _) => round?,
            };
            match outcome {
                RoundOutcome::Done(view) => return Ok(Placed::New(view)),
                RoundOutcome::Retry => {
                    metrics::counter!("append_conflicts_total", "command" => "hold").increment(1);
                    continue;
                }
                RoundOutcome::AlreadyHeld | RoundOutcome::KeyTaken => {
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

    /// One round of holding every listed seat, all or nothing.
    async fn place_seats(
        &self,
        placement: &Placement<'_>,
        entry: &CatalogEntry,
        seats: &[SeatId],
        counted: Counted<'_>,
    ) -> Result<RoundOutcome<HoldView>, HoldError> {
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
            .append_placement(
                placement,
                &mut locked,
                &units,
                decided,
                now,
                expires_at,
                counted,
            )
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

    /// One round of holding `quantity` places of a pool. First one shard
    /// with room, trying shards one at a time from a random one (buyers
    /// spread over the shards and rarely wait on each other); if no single
    /// shard has room, every shard, locked together, so that `sold_out` is
    /// only answered when the whole pool cannot serve the quantity.
    async fn place_in_pool(
        &self,
        placement: &Placement<'_>,
        entry: &CatalogEntry,
        spec: &PoolSpec,
        quantity: u32,
        counted: Counted<'_>,
    ) -> Result<RoundOutcome<HoldView>, HoldError> {
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
                .peek(id, |shard| shard.placeable_at(key.capacity, now).0);
            free.is_none_or(|free| free >= quantity)
        });
        for index in candidates {
            let unit = std::slice::from_ref(&units[index]);
            let mut locked = self.inventory.shards.lock(&[unit[0].0.clone()]).await;
            refresh_all(&self.store, &mut locked).await?;
            let now = self.clock.now();
            let expires_at = expires(now);
            let command = placement.pool_command(quantity, expires_at);
            match pool::decide(locked[0].aggregate(), unit[0].1.capacity, &command, now) {
                Ok(events) => {
                    let outcome = self
                        .append_placement(
                            placement,
                            &mut locked,
                            unit,
                            vec![events],
                            now,
                            expires_at,
                            counted,
                        )
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
                    locked[i]
                        .aggregate()
                        .placeable_at(units[i].1.capacity, now)
                        .0,
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
            let command = placement.pool_command(part, expires_at);
            decided[i] = pool::decide(locked[i].aggregate(), units[i].1.capacity, &command, now)
                .map_err(|e| HoldError::Invalid(e.to_string()))?;
        }
        let outcome = self
            .append_placement(
                placement,
                &mut locked,
                &units,
                decided,
                now,
                expires_at,
                counted,
            )
            .await?;
        Ok(outcome.map(|()| view(expires_at)))
    }

    /// Appends the decided events of a placement with its idempotency record
    /// and, on a show with a limit, the buyer's allowance taken at the same
    /// `now` (refused whole: `BuyerLimitReached`).
    #[allow(clippy::too_many_arguments)]
    async fn append_placement<U: Unit>(
        &self,
        placement: &Placement<'_>,
        locked: &mut [LockedStream<U>],
        units: &[(String, U::Key)],
        decided: Vec<Vec<U::Event>>,
        now: DateTime<Utc>,
        expires_at: DateTime<Utc>,
        counted: Counted<'_>,
    ) -> Result<RoundOutcome<()>, HoldError> {
        if decided.iter().all(Vec::is_empty) {
            return Ok(RoundOutcome::AlreadyHeld);
        }
        let metadata = placement.ctx.metadata();
        let mut batch = AppendBatch::new(now);
        batch.idempotency = placement.idempotency(now);
        let take = counted
            .allowance
            .as_deref()
            .map(|allowance| AllowanceCommand::Take {
                hold_id: placement.hold_id,
                units: counted.units,
                expires_at,
                limit: allowance.limit,
            });
        let allowance_events = match &take {
            Some(take) => decide_and_push(
                counted.allowance.as_deref(),
                take,
                now,
                &mut batch,
                &metadata,
            )
            .map_err(|e| match e {
                DecideError::Refused(AllowanceError::LimitReached { limit, current }) => {
                    HoldError::BuyerLimitReached { limit, current }
                }
                DecideError::Refused(other) => HoldError::Invalid(other.to_string()),
                DecideError::Store(e) => HoldError::Store(e),
            })?,
            None => Vec::new(),
        };
        for ((stream, (_, key)), events) in locked.iter().zip(units).zip(&decided) {
            U::push(&mut batch, key, &stream.view(), events, &metadata)?;
        }
        let outcome = append_with_allowance(
            &self.store,
            &batch,
            locked,
            decided,
            counted.allowance,
            allowance_events,
        )
        .await?;
        Ok(match outcome {
            AppendOutcome::Appended => RoundOutcome::Done(()),
            AppendOutcome::Conflict | AppendOutcome::CheckpointMoved => RoundOutcome::Retry,
            AppendOutcome::IdempotencyKeyTaken => RoundOutcome::KeyTaken,
        })
    }

    /// The hold an idempotency key already produced: `Ok(Some)` if the same
    /// request made it, `Err(IdempotencyKeyReused)` if another one did.
    pub(super) async fn replay_idempotent(
        &self,
        ctx: &RequestContext,
        key: &IdempotencyKey,
        request_hash: &str,
    ) -> Result<Option<HoldView>, HoldError> {
        let Some(entry) = self.store.idempotency_entry(&ctx.actor.id, key).await? else {
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
}

fn sort_in_show_order(entry: &CatalogEntry, seats: &mut [SeatId]) {
    seats.sort_by_key(|s| entry.show.seat(s).map(|(ordinal, _)| ordinal));
}
