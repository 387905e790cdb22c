//! Placing a hold: the handler. What is asked (seats, a pool, best
//! available) is decided by a named decision run by the round
//! (`command::round`): `PlaceSeats` (`place_seats`), `PlaceInPool`
//! (`place_pool`), `BestSeats` (`best`); each appends
//! the hold with its idempotency record and, on a show with a limit, the
//! buyer's allowance. A retry with the same idempotency key answers the
//! hold the first request made.

use std::sync::Arc;

use domain::ids::{HoldId, PoolId, SeatId, ShowId};
use rand::Rng;

use super::best::BestHandler;
use super::place_pool::PlaceInPool;
use super::place_seats::PlaceSeats;
use super::placement::{Held, Placement, Placing};
use super::read::HoldReader;
use super::request::Wanted;
use super::{HoldError, HoldRequest, HoldView, Placed, Sale};
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::round::{Round, Rounds, Settled};
use crate::command::units::{SeatKey, ShardKey};
use crate::command::waiting_room::WaitingRoomService;
use crate::store::{IdempotencyKeys, StoreError};

/// The handler placing holds: checks the request against the show and the
/// waiting room, answers a retry from its idempotency key, and runs the
/// decision the request names.
pub(super) struct PlaceHandler {
    /// Which hold a buyer's idempotency key made.
    pub(super) keys: IdempotencyKeys,
    pub(super) reader: HoldReader,
    pub(super) rounds: Arc<Rounds>,
    pub(super) clock: Arc<dyn Clock>,
    /// Who is admitted on a show with a waiting room.
    pub(super) waiting_rooms: Arc<WaitingRoomService>,
    pub(super) best: BestHandler,
}

impl PlaceHandler {
    /// `POST /v1/shows/{id}/holds`.
    pub(super) async fn place(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        request: HoldRequest,
        sale: Sale,
    ) -> Result<Placed, HoldError> {
        let entry = self.reader.show(show_id).await?;
        request.validate(&entry)?;
        sale.check(ctx, &entry)?;
        let request_hash = request.hash(show_id, &sale);
        // The box office sells at the door, not through the online queue.
        let admission = match ctx.sold_by {
            Some(_) => None,
            None => self.waiting_rooms.admission(&entry, &ctx.actor.id).await?,
        };
        let tickets = request.tickets();
        let placing = Placing {
            ctx,
            entry: &entry,
            admission: admission.as_ref(),
            tickets: &tickets,
            sale: &sale,
        };
        self.place_validated(&placing, request, request_hash).await
    }

    /// Places what a request checked against the show asks for, remembered
    /// under `request_hash` (for best available, the hash of what was
    /// asked, not of the seats chosen: a retry answers the first choice).
    async fn place_validated(
        &self,
        placing: &Placing<'_>,
        request: HoldRequest,
        request_hash: String,
    ) -> Result<Placed, HoldError> {
        let ctx = placing.ctx;
        if let Some(existing) = self.replay_idempotent(ctx, &request_hash).await? {
            return Ok(Placed::Existing(existing));
        }
        let placement = placing.placement(self.new_hold_id(ctx), request_hash);
        let placed = match &request {
            HoldRequest::Seats(_) => self.place_seats(&placement, &request.seat_ids()).await,
            HoldRequest::Pool {
                pool_id, quantity, ..
            } => (self.place_in_pool(placement.round(), &placement, pool_id, *quantity)).await,
            HoldRequest::BestAvailable { quantity, .. } => {
                let wanted = request.wanted().unwrap_or_default();
                self.place_best(&placement, *quantity, wanted).await
            }
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
                | HoldError::NoAdjacentSeats
                | HoldError::BuyerLimitReached { .. }),
            ) => match self.replay_idempotent(ctx, &placement.request_hash).await? {
                Some(existing) => Ok(Placed::Existing(existing)),
                None => Err(taken),
            },
            Err(other) => Err(other),
        }
    }

    /// The id of the hold a request places. The day of first use of its
    /// idempotency key is part of it, so a key used again after it was
    /// pruned (sweeper, retention) gets a new hold, never one whose streams
    /// the old hold already wrote.
    fn new_hold_id(&self, ctx: &RequestContext) -> HoldId {
        match &ctx.idempotency_key {
            Some(key) => HoldId::for_idempotency_key(&ctx.actor.id, key, self.clock.now()),
            None => HoldId::random(),
        }
    }

    /// Holds the best block of `quantity` seats side by side (`best`).
    async fn place_best(
        &self,
        placement: &Placement<'_>,
        quantity: u32,
        wanted: Wanted<'_>,
    ) -> Result<Settled<Held>, HoldError> {
        let best: &BestHandler = &self.best;
        best.place(placement, quantity, wanted).await
    }

    /// Holds every listed seat, all or nothing.
    async fn place_seats(
        &self,
        placement: &Placement<'_>,
        seats: &[SeatId],
    ) -> Result<Settled<Held>, HoldError> {
        let show_id = &placement.entry.show.show_id;
        let units = seats
            .iter()
            .map(|seat_id| SeatKey::unit(show_id, seat_id))
            .collect();
        let round = placement.round().assuming_new();
        let mut decision = PlaceSeats { placement, seats };
        let rounds: &Rounds = &self.rounds;
        rounds.run(round, units, &mut decision).await
    }

    /// Holds `quantity` places of a pool: in one shard with room if one
    /// has it, else across shards (`PlaceInPool`), in `round` (the hold's,
    /// or an offer's with the show's line).
    pub(super) async fn place_in_pool(
        &self,
        round: Round<'_>,
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
        let start = rand::thread_rng().gen_range(0..shards.len());
        let ring: Vec<usize> = (0..shards.len())
            .map(|i| (start + i) % shards.len())
            .collect();
        // Skipped when this instance last saw them too full: a guess, never
        // an answer (the whole-pool plan decides).
        let (now, role) = (self.clock.now(), placement.role());
        let candidates = ring
            .iter()
            .copied()
            .filter(|&i| {
                let (id, key) = &shards[i];
                let free = self.rounds.peek_shard(id, |shard| {
                    shard
                        .placeable_at(placement.sale.channel.as_ref(), role, key.capacity, now)
                        .0
                });
                free.is_none_or(|free| free >= quantity)
            })
            .collect();
        let mut decision = PlaceInPool {
            placement,
            quantity,
            shards,
            ring,
            candidates,
            trying: None,
        };
        let first = decision.first_plan();
        let rounds: &Rounds = &self.rounds;
        rounds.run(round, first, &mut decision).await
    }

    /// The hold the request's idempotency key already produced: `Ok(Some)`
    /// if the same request made it, `Err(IdempotencyKeyReused)` if another
    /// one did; `Ok(None)` without a key or a hold.
    async fn replay_idempotent(
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
        let record = self.reader.record(&entry.hold_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("hold {} of a key is missing", entry.hold_id))
        })?;
        Ok(Some(self.reader.view(record).await?))
    }
}
