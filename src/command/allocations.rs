//! Sales channels' allocations (issue #35): free seats and pool places move
//! to a channel, all or nothing, and come back the same way. Each move is a
//! round on the units' own streams, as a hold is: the seat's stream decides
//! whether the seat is free (`domain::seat`: `Allocate`, `Deallocate`), and
//! a shard's whether it has the places (`domain::pool`), so a seat is never
//! both allocated and held or booked by the public, whoever gets there
//! first.

use std::collections::BTreeMap;
use std::sync::Arc;

use domain::ids::{ChannelId, PoolId, SeatId};
use domain::limits::MAX_SEATS_PER_ALLOCATION;
use domain::pool::{self, split, PoolCommand, PoolShard};
use domain::seat::{self, Seat, SeatCommand, SeatError, WaitlistRole};
use serde::Serialize;

use crate::catalog::CatalogEntry;
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::holds::HoldError;
use crate::command::round::{Decided, Decides, Decision, Round, Rounds, View};
use crate::command::units::{SeatKey, ShardKey};
use crate::query::availability::AvailabilityCache;
use crate::store::{Shows, StoreError};

/// What moves to a channel, or back from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inventory {
    Seats(Vec<SeatId>),
    Pool {
        pool_id: PoolId,
        quantity: u32,
    },
    /// (Back from a channel only) every seat and place of the channel not
    /// held or sold through it.
    Unsold,
}

/// A channel's allocation as the API shows it: the seats allocated to it
/// (free, or held or sold through it) and each pool's places allocated and
/// not sold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ChannelAllocation {
    pub channel_id: String,
    pub seats: Vec<String>,
    pub pools: Vec<PoolAllocation>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PoolAllocation {
    pub pool_id: String,
    pub quantity: u32,
}

/// Moves inventory to and from sales channels.
pub struct AllocationService {
    rounds: Arc<Rounds>,
    availability: Arc<AvailabilityCache>,
    shows: Shows,
    clock: Arc<dyn Clock>,
}

/// Which way inventory moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// From public sale to the channel, all or nothing.
    Allocate,
    /// From the channel back to public sale, all or nothing.
    Release,
    /// Back from the channel, what of it is free (the rest stays).
    ReleaseUnsold,
}

impl AllocationService {
    pub fn new(
        rounds: Arc<Rounds>,
        availability: Arc<AvailabilityCache>,
        shows: Shows,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            rounds,
            availability,
            shows,
            clock,
        }
    }

    /// `POST /v1/shows/{id}/allocations`: `what` (seats, or places of a
    /// pool) moves from public sale to `channel`, all or nothing.
    pub async fn allocate(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        channel: &ChannelId,
        what: &Inventory,
    ) -> Result<ChannelAllocation, HoldError> {
        if *what == Inventory::Unsold {
            return Err(HoldError::Invalid(
                "unsold: only a release gives back what is unsold".into(),
            ));
        }
        self.move_inventory(ctx, entry, channel, what, Way::Allocate)
            .await
    }

    /// `POST /v1/shows/{id}/allocations/release`: `what` goes back from
    /// `channel` to public sale: listed seats or places all or nothing
    /// (held or sold through the channel: 409), or whatever is unsold.
    pub async fn release(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        channel: &ChannelId,
        what: &Inventory,
    ) -> Result<ChannelAllocation, HoldError> {
        self.move_inventory(ctx, entry, channel, what, Way::Release)
            .await
    }

    /// `what` moves `way` (a release of what is unsold: every seat of the
    /// channel and every pool); then the channel's allocation.
    async fn move_inventory(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        channel: &ChannelId,
        what: &Inventory,
        way: Way,
    ) -> Result<ChannelAllocation, HoldError> {
        check(entry, channel, what)?;
        match what {
            Inventory::Seats(seats) => self.seats(ctx, entry, channel, seats, way).await?,
            Inventory::Pool { pool_id, quantity } => {
                let pool = (pool_id, Some(*quantity));
                self.places(ctx, entry, channel, pool, way).await?
            }
            Inventory::Unsold => {
                let seats = self.channel_seats(entry, channel).await?;
                if !seats.is_empty() {
                    self.seats(ctx, entry, channel, &seats, Way::ReleaseUnsold)
                        .await?;
                }
                for pool in &entry.show.pools {
                    let pool = (&pool.pool_id, None);
                    self.places(ctx, entry, channel, pool, Way::ReleaseUnsold)
                        .await?;
                }
            }
        }
        Ok(self.allocation(entry, channel).await?)
    }

    /// What is allocated to `channel` now: its seats (from the availability
    /// read model) and each pool's places allocated and not sold.
    pub async fn allocation(
        &self,
        entry: &CatalogEntry,
        channel: &ChannelId,
    ) -> Result<ChannelAllocation, StoreError> {
        let seats = self.channel_seats(entry, channel).await?;
        let seats = seats.iter().map(ToString::to_string).collect();
        let pools = if entry.show.pools.is_empty() {
            BTreeMap::new()
        } else {
            let now_us = projections::time::to_micros(self.clock.now());
            self.shows.pool_figures(&entry.show, now_us).await?
        };
        let pools = (entry.show.pools.iter())
            .filter_map(|spec| {
                let quantity = pools.get(&spec.pool_id)?.allocated.get(channel).copied()?;
                (quantity > 0).then(|| PoolAllocation {
                    pool_id: spec.pool_id.to_string(),
                    quantity,
                })
            })
            .collect();
        Ok(ChannelAllocation {
            channel_id: channel.to_string(),
            seats,
            pools,
        })
    }

    /// The seats allocated to `channel` (any state), from the availability
    /// read model.
    async fn channel_seats(
        &self,
        entry: &CatalogEntry,
        channel: &ChannelId,
    ) -> Result<Vec<SeatId>, StoreError> {
        self.availability
            .with_rows(&self.shows, entry, |rows| {
                (entry.show.seats.iter().zip(rows))
                    .filter(|(_, row)| row.channel(entry) == Some(channel))
                    .map(|(spec, _)| spec.seat_id.clone())
                    .collect()
            })
            .await
    }

    async fn seats(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        channel: &ChannelId,
        seats: &[SeatId],
        way: Way,
    ) -> Result<(), HoldError> {
        let show_id = &entry.show.show_id;
        let units: Vec<(String, SeatKey)> = (seats.iter())
            .map(|seat_id| SeatKey::unit(show_id, seat_id))
            .collect();
        let returns_to_waitlist = entry.show.waitlist.is_some();
        let mut decision = MoveSeats {
            channel,
            way,
            returns_to_waitlist,
        };
        let round = Round::new(way.command(), ctx).assuming_new();
        self.rounds.run(round, units, &mut decision).await?;
        Ok(())
    }

    async fn places(
        &self,
        ctx: &RequestContext,
        entry: &CatalogEntry,
        channel: &ChannelId,
        (pool_id, quantity): (&PoolId, Option<u32>),
        way: Way,
    ) -> Result<(), HoldError> {
        let show = &entry.show;
        let spec = show
            .pool(pool_id)
            .ok_or_else(|| HoldError::UnknownPool(pool_id.clone()))?;
        let units: Vec<(String, ShardKey)> = (0..spec.shards)
            .map(|index| ShardKey::unit(&show.show_id, spec, index))
            .collect();
        let mut decision = MovePlaces {
            channel,
            quantity,
            way,
            returns_to_waitlist: show.waitlist.is_some(),
        };
        let round = Round::new(way.command(), ctx);
        self.rounds.run(round, units, &mut decision).await?;
        Ok(())
    }
}

impl Way {
    fn command(self) -> &'static str {
        match self {
            Way::Allocate => "allocate",
            Way::Release | Way::ReleaseUnsold => "release_allocation",
        }
    }
}

/// The request against the show: a channel it lists, seats it has (each
/// once, at most `MAX_SEATS_PER_ALLOCATION`), a pool it has.
fn check(entry: &CatalogEntry, channel: &ChannelId, what: &Inventory) -> Result<(), HoldError> {
    if entry.show.channel(channel).is_none() {
        return Err(HoldError::UnknownChannel(channel.clone()));
    }
    match what {
        Inventory::Seats(seats) => {
            if seats.is_empty() || seats.len() > MAX_SEATS_PER_ALLOCATION {
                return Err(HoldError::Invalid(format!(
                    "seats: 1..={MAX_SEATS_PER_ALLOCATION} seats (MAX_SEATS_PER_ALLOCATION)"
                )));
            }
            let mut seen = std::collections::HashSet::with_capacity(seats.len());
            if let Some(twice) = seats.iter().find(|s| !seen.insert(*s)) {
                return Err(HoldError::Invalid(format!(
                    "seats: {twice} is listed more than once"
                )));
            }
            let unknown: Vec<SeatId> = (seats.iter())
                .filter(|s| entry.show.seat(s).is_none())
                .cloned()
                .collect();
            if !unknown.is_empty() {
                return Err(HoldError::UnknownSeats(unknown));
            }
        }
        Inventory::Pool { pool_id, quantity } => {
            let Some(spec) = entry.show.pool(pool_id) else {
                return Err(HoldError::UnknownPool(pool_id.clone()));
            };
            if *quantity == 0 || *quantity > spec.capacity {
                return Err(HoldError::Invalid(format!(
                    "quantity: 1..={} (the pool's capacity)",
                    spec.capacity
                )));
            }
        }
        Inventory::Unsold => {}
    }
    Ok(())
}

/// Seats to or from a channel, all or nothing (unsold: the free ones).
struct MoveSeats<'a> {
    channel: &'a ChannelId,
    way: Way,
    /// The show keeps a waiting list: seats given back go to it first.
    returns_to_waitlist: bool,
}

impl Decides<Seat> for MoveSeats<'_> {
    type Output = ();
    type Error = HoldError;

    fn decide(&mut self, view: &View<'_, Seat>) -> Result<Decision<Seat, ()>, HoldError> {
        let channel = self.channel.clone();
        let command = match self.way {
            Way::Allocate => SeatCommand::Allocate { channel },
            Way::Release | Way::ReleaseUnsold => SeatCommand::Deallocate {
                channel,
                returns_to_waitlist: self.returns_to_waitlist,
            },
        };
        let mut decided = Vec::with_capacity(view.units.len());
        let mut taken = Vec::new();
        for (seat, key) in &view.units {
            match seat::decide(seat, &command, view.now) {
                Ok(events) => decided.push(events),
                // Held or sold through the channel: it stays the channel's.
                Err(_) if self.way == Way::ReleaseUnsold => decided.push(Vec::new()),
                Err(SeatError::HeldByAnother | SeatError::Booked | SeatError::NotForSale) => {
                    taken.push(key.seat_id.clone())
                }
                Err(other) => {
                    return Err(HoldError::Bug(format!(
                        "allocating {}: {other}",
                        key.seat_id
                    )))
                }
            }
        }
        if taken.is_empty() {
            Ok(Decision::Append(Decided::units(decided), ()))
        } else if view.assumed_new {
            Ok(Decision::ReadAll)
        } else {
            Err(HoldError::SeatsTaken(taken))
        }
    }
}

/// Places of a pool to or from a channel, split across its shards (every
/// shard locked, in index order): `quantity` all or nothing, or (`None`)
/// whatever of the channel's is free on each shard.
struct MovePlaces<'a> {
    channel: &'a ChannelId,
    quantity: Option<u32>,
    way: Way,
    /// The show keeps a waiting list: places given back go to it first.
    returns_to_waitlist: bool,
}

impl Decides<PoolShard> for MovePlaces<'_> {
    type Output = ();
    type Error = HoldError;

    fn decide(&mut self, view: &View<'_, PoolShard>) -> Result<Decision<PoolShard, ()>, HoldError> {
        let from = match self.way {
            Way::Allocate => None,
            Way::Release | Way::ReleaseUnsold => Some(self.channel),
        };
        let free: Vec<(u32, u32)> = (view.units.iter())
            .map(|(shard, key)| {
                (
                    key.index,
                    shard
                        .placeable_at(from, WaitlistRole::None, key.capacity, view.now)
                        .0,
                )
            })
            .collect();
        let parts = match self.quantity {
            Some(quantity) => split(&free, quantity).ok_or_else(|| HoldError::SoldOut {
                available: free.iter().map(|(_, n)| n).sum(),
            })?,
            None => free.into_iter().filter(|(_, n)| *n > 0).collect(),
        };
        let mut decided = vec![Vec::new(); view.units.len()];
        for (index, quantity) in parts {
            let (i, (shard, key)) = (view.units.iter().enumerate())
                .find(|(_, (_, key))| key.index == index)
                .ok_or_else(|| HoldError::Bug(format!("shard {index} was not locked")))?;
            let channel = self.channel.clone();
            let command = match self.way {
                Way::Allocate => PoolCommand::Allocate { channel, quantity },
                Way::Release | Way::ReleaseUnsold => PoolCommand::Deallocate {
                    channel,
                    quantity,
                    returns_to_waitlist: self.returns_to_waitlist,
                },
            };
            decided[i] = pool::decide(shard, key.capacity, &command, view.now)
                .map_err(|e| HoldError::Bug(format!("allocating places of shard {index}: {e}")))?;
        }
        Ok(Decision::Append(Decided::units(decided), ()))
    }
}
