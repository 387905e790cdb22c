//! Placing a hold: a decision for seats and one for a pool, each run by the
//! round (`command::round`) and appended with the hold's idempotency record
//! and, on a show with a limit, the buyer's allowance; a retry with the same
//! idempotency key answers the hold the first request made.

use chrono::{DateTime, Utc};
use domain::allowance::{AllowanceCommand, AllowanceError};
use domain::ids::{HoldId, PoolId, SeatId, ShowId};
use domain::pool::{self, split, PoolCommand, PoolError, PoolShard};
use domain::seat::{self, Seat, SeatCommand, SeatError};
use projections::holds::HoldState;
use projections::time::to_micros;
use rand::Rng;

use super::{HoldError, HoldRequest, HoldService, HoldView, Placed};
use crate::catalog::CatalogEntry;
use crate::command::context::RequestContext;
use crate::command::queue::Admission;
use crate::command::round::{BuyerLimit, Decided, Decision, Round, Settled, View};
use crate::command::units::{SeatKey, ShardKey, Unit};
use crate::store::{HoldRecord, IdempotencyKeyRow, StoreError};

/// A hold being placed: its id, who for, on which show, and the
/// idempotency record to write.
struct Placement<'a> {
    ctx: &'a RequestContext,
    entry: &'a CatalogEntry,
    hold_id: HoldId,
    request_hash: String,
    /// On a show with a waiting room, what admits the buyer.
    admission: Option<&'a Admission>,
}

/// Who places a hold on which show, and what admits them (a waiting room).
pub(super) struct Placing<'a> {
    pub(super) ctx: &'a RequestContext,
    pub(super) entry: &'a CatalogEntry,
    pub(super) admission: Option<&'a Admission>,
}

/// What a placement holds once appended: until when, and on a pool which
/// shards hold how many places.
struct Held {
    expires_at: DateTime<Utc>,
    parts: Vec<(u32, u32)>,
}

impl Placement<'_> {
    fn round(&self) -> Round<'static> {
        Round::new("hold", self.ctx).counting(BuyerLimit::of(&self.entry.show, &self.ctx.actor.id))
    }

    /// On a show with a waiting room, a hold is placed only by a buyer
    /// admitted at the decision's `now`.
    fn admitted(&self, now: DateTime<Utc>) -> Result<(), HoldError> {
        match self.admission {
            Some(admission) if !admission.admits(now) => Err(HoldError::AdmissionRequired(
                self.entry.show.show_id.clone(),
            )),
            _ => Ok(()),
        }
    }

    fn pool_command(&self, quantity: u32, expires_at: DateTime<Utc>) -> PoolCommand {
        PoolCommand::PlaceHold {
            hold_id: self.hold_id,
            buyer: self.ctx.actor.id.clone(),
            quantity,
            expires_at,
        }
    }

    /// The events of a placement of `count` seats or places decided on the
    /// units, with the buyer's allowance taken at the same `now` (refused
    /// whole: `BuyerLimitReached`) and the idempotency record.
    fn decided<U: Unit>(
        &self,
        view: &View<'_, U>,
        units: Vec<Vec<U::Event>>,
        count: u32,
        held: Held,
    ) -> Result<Decision<U, Held>, HoldError> {
        if units.iter().all(Vec::is_empty) {
            // Every unit holds this hold already: a concurrent request with
            // the same idempotency key placed it.
            return Ok(Decision::Answer(held));
        }
        let allowance = match view.limit() {
            Some(limit) => view
                .allowance(&AllowanceCommand::Take {
                    hold_id: self.hold_id,
                    units: count,
                    expires_at: held.expires_at,
                    limit,
                })
                .map_err(|e| match e {
                    AllowanceError::LimitReached { limit, current } => {
                        HoldError::BuyerLimitReached { limit, current }
                    }
                    other => HoldError::Bug(format!("taking the allowance: {other}")),
                })?,
            None => Vec::new(),
        };
        let idempotency = self
            .ctx
            .idempotency_key
            .as_ref()
            .map(|key| IdempotencyKeyRow {
                buyer: self.ctx.actor.id.clone(),
                key: key.clone(),
                request_hash: self.request_hash.clone(),
                hold_id: self.hold_id,
                created_at_us: to_micros(view.now),
            });
        let decided = Decided {
            units,
            allowance,
            checkout: Vec::new(),
            idempotency,
        };
        Ok(Decision::Append(decided, held))
    }

    /// The placed hold as the API shows it.
    fn view(&self, request: &HoldRequest, held: Held, now: DateTime<Utc>) -> HoldView {
        let (seats, pool) = match request {
            HoldRequest::Seats(seats) => (seats.clone(), None),
            HoldRequest::Pool { pool_id, .. } => (Vec::new(), Some((pool_id.clone(), held.parts))),
            HoldRequest::BestAvailable { .. } => (Vec::new(), None),
        };
        let record = HoldRecord {
            hold_id: self.hold_id,
            show_id: self.entry.show.show_id.clone(),
            buyer: self.ctx.actor.id.clone(),
            expires_at: held.expires_at,
            state: HoldState::Held,
            booking_id: None,
            seats,
            pool,
        };
        HoldView::of(record, self.entry, now)
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
        let admission = self.queue.admission(&entry, &ctx.actor.id).await?;
        let placing = Placing {
            ctx,
            entry: &entry,
            admission: admission.as_ref(),
        };
        if let HoldRequest::BestAvailable { quantity, section } = &request {
            return self
                .place_best(&placing, *quantity, section.as_deref(), request_hash)
                .await;
        }
        self.place_validated(&placing, request, request_hash).await
    }

    /// Places seats or pool places already checked against the show,
    /// remembered under `request_hash` (a best-available hold passes the
    /// hash of what was asked, not of the seats chosen).
    pub(super) async fn place_validated(
        &self,
        placing: &Placing<'_>,
        request: HoldRequest,
        request_hash: String,
    ) -> Result<Placed, HoldError> {
        let ctx = placing.ctx;
        if let Some(existing) = self.replay_idempotent(ctx, &request_hash).await? {
            return Ok(Placed::Existing(existing));
        }
        let placement = Placement {
            ctx,
            entry: placing.entry,
            admission: placing.admission,
            hold_id: match &ctx.idempotency_key {
                // The day of first use is part of the id, so a key used again
                // after it was pruned (sweeper, retention) gets a new hold,
                // never one whose streams the old hold already wrote.
                Some(key) => HoldId::for_idempotency_key(&ctx.actor.id, key, self.clock.now()),
                None => HoldId::random(),
            },
            request_hash,
        };
        let placed = match &request {
            HoldRequest::Seats(seats) => self.place_seats(&placement, seats).await,
            HoldRequest::Pool { pool_id, quantity } => {
                self.place_in_pool(&placement, pool_id, *quantity).await
            }
            HoldRequest::BestAvailable { .. } => Err(HoldError::Bug(
                "best available reached placement unchosen".into(),
            )),
        };
        match placed {
            Ok(Settled::Appended(held)) => Ok(Placed::New(placement.view(
                &request,
                held,
                self.clock.now(),
            ))),
            // Another request with this key got there first: its answer is
            // ours, if it asked for the same thing.
            Ok(Settled::Answered(_) | Settled::KeyTaken) => self
                .replay_idempotent(ctx, &placement.request_hash)
                .await?
                .map(Placed::Existing)
                .ok_or(HoldError::Busy),
            // The units went to another hold: if a concurrent request with
            // this key placed it under another id (the two straddled a
            // period of `HoldId::for_idempotency_key`), that is ours.
            Err(
                taken @ (HoldError::SeatsTaken(_)
                | HoldError::SoldOut { .. }
                | HoldError::BuyerLimitReached { .. }),
            ) => match self.replay_idempotent(ctx, &placement.request_hash).await? {
                Some(existing) => Ok(Placed::Existing(existing)),
                None => Err(taken),
            },
            Err(other) => Err(other),
        }
    }

    /// Holds every listed seat, all or nothing.
    async fn place_seats(
        &self,
        placement: &Placement<'_>,
        seats: &[SeatId],
    ) -> Result<Settled<Held>, HoldError> {
        let show = &placement.entry.show;
        let units = seats
            .iter()
            .map(|seat_id| SeatKey::unit(&show.show_id, seat_id))
            .collect();
        let ttl = show.hold_ttl();
        let round = placement.round().assuming_new();
        self.rounds
            .run(round, units, |view: &View<'_, Seat>| {
                placement.admitted(view.now)?;
                let expires_at = view.now + ttl;
                let command = SeatCommand::PlaceHold {
                    hold_id: placement.hold_id,
                    buyer: placement.ctx.actor.id.clone(),
                    expires_at,
                };
                let mut taken = Vec::new();
                let mut decided = Vec::with_capacity(view.units.len());
                for (seat, key) in &view.units {
                    match seat::decide(seat, &command, view.now) {
                        Ok(events) => decided.push(events),
                        Err(SeatError::HeldByAnother | SeatError::Booked) => {
                            taken.push(key.seat_id.clone())
                        }
                        Err(other) => {
                            return Err(HoldError::Bug(format!(
                                "placing a hold on {}: {other}",
                                key.seat_id
                            )))
                        }
                    }
                }
                if !taken.is_empty() {
                    // A refusal names every seat the buyer cannot have:
                    // read the seats only assumed new, and decide again.
                    if view.assumed_new {
                        return Ok(Decision::ReadAll);
                    }
                    placement.entry.sort_seats(&mut taken);
                    return Err(HoldError::SeatsTaken(taken));
                }
                let held = Held {
                    expires_at,
                    parts: Vec::new(),
                };
                placement.decided(view, decided, seats.len() as u32, held)
            })
            .await
    }

    /// Holds `quantity` places of a pool: in one shard with room if one
    /// has it, else across shards, so that `sold_out` is only answered when
    /// the whole pool cannot serve the quantity.
    async fn place_in_pool(
        &self,
        placement: &Placement<'_>,
        pool_id: &PoolId,
        quantity: u32,
    ) -> Result<Settled<Held>, HoldError> {
        let show = &placement.entry.show;
        let spec = show
            .pool(pool_id)
            .ok_or_else(|| HoldError::UnknownPool(pool_id.clone()))?;
        let shards: Vec<(String, ShardKey)> = (0..spec.shards)
            .map(|index| ShardKey::unit(&show.show_id, spec, index))
            .collect();
        // Shards are tried from a random one: buyers spread over the shards
        // and rarely wait on each other.
        let start = rand::thread_rng().gen_range(0..shards.len());
        let ring: Vec<usize> = (0..shards.len())
            .map(|i| (start + i) % shards.len())
            .collect();
        if let Some(settled) = self
            .place_in_one_shard(placement, &shards, &ring, quantity)
            .await?
        {
            return Ok(settled);
        }
        self.place_across_shards(placement, shards, &ring, quantity)
            .await
    }

    /// Tries the shards one at a time, in `ring` order, skipping those this
    /// instance last saw full (a guess: if none of the others has room, the
    /// whole-pool look decides); `None` if no single shard had room.
    async fn place_in_one_shard(
        &self,
        placement: &Placement<'_>,
        shards: &[(String, ShardKey)],
        ring: &[usize],
        quantity: u32,
    ) -> Result<Option<Settled<Held>>, HoldError> {
        let ttl = placement.entry.show.hold_ttl();
        let now = self.clock.now();
        let candidates = ring.iter().filter(|&&i| {
            let (id, key) = &shards[i];
            let free = self
                .rounds
                .peek_shard(id, |shard| shard.placeable_at(key.capacity, now).0);
            free.is_none_or(|free| free >= quantity)
        });
        for &i in candidates {
            let settled = self
                .rounds
                .run(placement.round(), vec![shards[i].clone()], |view| {
                    placement.admitted(view.now)?;
                    let (shard, key): (&PoolShard, &ShardKey) = view.units[0];
                    let expires_at = view.now + ttl;
                    let command = placement.pool_command(quantity, expires_at);
                    match pool::decide(shard, key.capacity, &command, view.now) {
                        Ok(events) => {
                            let held = Held {
                                expires_at,
                                parts: vec![(key.index, quantity)],
                            };
                            Ok(placement
                                .decided(view, vec![events], quantity, held)?
                                .map(Some))
                        }
                        // No room here (any longer): the next shard.
                        Err(PoolError::NotEnough { .. }) => Ok(Decision::Answer(None)),
                        Err(other) => Err(HoldError::Bug(format!(
                            "placing a hold on shard {}: {other}",
                            key.index
                        ))),
                    }
                })
                .await?;
            return Ok(Some(match settled {
                Settled::Answered(None) => continue,
                Settled::Answered(Some(held)) => Settled::Answered(held),
                Settled::Appended(Some(held)) => Settled::Appended(held),
                Settled::KeyTaken => Settled::KeyTaken,
                Settled::Appended(None) => {
                    return Err(HoldError::Bug("a full shard appended".into()))
                }
            }));
        }
        Ok(None)
    }

    /// Every shard locked together, the quantity split over those with room.
    async fn place_across_shards(
        &self,
        placement: &Placement<'_>,
        shards: Vec<(String, ShardKey)>,
        ring: &[usize],
        quantity: u32,
    ) -> Result<Settled<Held>, HoldError> {
        let ttl = placement.entry.show.hold_ttl();
        self.rounds
            .run(placement.round(), shards, |view| {
                placement.admitted(view.now)?;
                // In lock order, which is index order: `view.units[i]` is shard i.
                let free: Vec<(u32, u32)> = ring
                    .iter()
                    .map(|&i| {
                        let (shard, key): (&PoolShard, &ShardKey) = view.units[i];
                        (key.index, shard.placeable_at(key.capacity, view.now).0)
                    })
                    .collect();
                let Some(parts) = split(&free, quantity) else {
                    let available = free.iter().map(|(_, n)| n).sum();
                    return Err(HoldError::SoldOut { available });
                };
                let expires_at = view.now + ttl;
                let mut decided = vec![Vec::new(); view.units.len()];
                for &(index, part) in &parts {
                    let (shard, key) = view.units[index as usize];
                    let command = placement.pool_command(part, expires_at);
                    decided[index as usize] = pool::decide(shard, key.capacity, &command, view.now)
                        .map_err(|e| HoldError::Bug(format!("placing part of a hold: {e}")))?;
                }
                let held = Held { expires_at, parts };
                placement.decided(view, decided, quantity, held)
            })
            .await
    }

    /// The hold the request's idempotency key already produced: `Ok(Some)`
    /// if the same request made it, `Err(IdempotencyKeyReused)` if another
    /// one did; `Ok(None)` without a key or a hold.
    pub(super) async fn replay_idempotent(
        &self,
        ctx: &RequestContext,
        request_hash: &str,
    ) -> Result<Option<HoldView>, HoldError> {
        let Some(key) = &ctx.idempotency_key else {
            return Ok(None);
        };
        let Some(entry) = self.keys.entry(&ctx.actor.id, key).await? else {
            return Ok(None);
        };
        if entry.request_hash != request_hash {
            return Err(HoldError::IdempotencyKeyReused);
        }
        let record = self.records.hold(&entry.hold_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("hold {} of a key is missing", entry.hold_id))
        })?;
        Ok(Some(self.view(record).await?))
    }
}
