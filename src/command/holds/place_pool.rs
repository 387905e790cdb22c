//! The decision that places a pool hold: in one shard with room, tried
//! one at a time, or, when no single shard has room, split across every
//! shard locked together; `sold_out` only when the whole pool cannot
//! serve the quantity. Each shard tried, and the whole pool, is a plan of
//! the same round (`Decision::Replan`), not a loop of the handler.

use domain::limits::MAX_POOL_SHARDS;
use domain::pool::{self, split, PoolError, PoolShard};

use projections::holds::{HoldItem, HoldItems};

use super::placement::{Held, Placement};
use super::HoldError;
use crate::command::round::{Decides, Decision, View};
use crate::command::units::ShardKey;

/// Placing `quantity` places of a pool (`HoldRequest::Pool`).
pub(super) struct PlaceInPool<'a> {
    pub(super) placement: &'a Placement<'a>,
    pub(super) quantity: u32,
    /// Every shard of the pool with its stream id, in index order (which
    /// is lock order).
    pub(super) shards: Vec<(String, ShardKey)>,
    /// The order the shards are tried in and parts taken in: from a random
    /// one, so buyers spread over the shards and rarely wait on each other.
    pub(super) ring: Vec<usize>,
    /// The shards of `ring` tried alone, in order: those this instance did
    /// not last see too full (a guess; if none has room, the whole-pool
    /// plan decides).
    pub(super) candidates: Vec<usize>,
    /// The plan being decided: `Some(n)`, `candidates[n]` alone; `None`,
    /// every shard together.
    pub(super) trying: Option<usize>,
}

impl PlaceInPool<'_> {
    /// The streams of the first plan: the first candidate, else the pool.
    pub(super) fn first_plan(&mut self) -> Vec<(String, ShardKey)> {
        self.plan(0)
    }

    fn plan(&mut self, next: usize) -> Vec<(String, ShardKey)> {
        match self.candidates.get(next).and_then(|&i| self.shards.get(i)) {
            Some(shard) => {
                self.trying = Some(next);
                vec![shard.clone()]
            }
            None => {
                self.trying = None;
                self.shards.clone()
            }
        }
    }

    fn in_one_shard(
        &mut self,
        view: &View<'_, PoolShard>,
        tried: usize,
    ) -> Result<Decision<PoolShard, Held>, HoldError> {
        let (placement, quantity) = (self.placement, self.quantity);
        let Some(&(shard, key)) = view.units.first() else {
            return Err(HoldError::Bug("placing in a shard without one".into()));
        };
        let expires_at = placement.expires_at(view.now);
        let price = placement.pool_price(&key.pool_id, view.now)?;
        let mut items = HoldItems::default();
        items.insert(HoldItem::places(&key.pool_id, key.index, quantity, &price));
        let command = placement.pool_command(quantity, expires_at, price);
        match pool::decide(shard, key.capacity, &command, view.now) {
            Ok(events) => {
                let held = Held {
                    expires_at,
                    seats: Vec::new(),
                    parts: vec![(key.index, quantity)],
                    items,
                };
                placement.decided(view, vec![events], quantity, held)
            }
            // No room here (any longer): the next shard, or the pool.
            Err(PoolError::NotEnough { .. }) => Ok(Decision::Replan(self.plan(tried + 1))),
            Err(other) => Err(HoldError::Bug(format!(
                "placing a hold on shard {}: {other}",
                key.index
            ))),
        }
    }

    /// Every shard locked, in index order: `view.units[i]` is shard `i`.
    fn across_shards(
        &self,
        view: &View<'_, PoolShard>,
    ) -> Result<Decision<PoolShard, Held>, HoldError> {
        let (placement, quantity) = (self.placement, self.quantity);
        let shard = |i: usize| -> Result<(&PoolShard, &ShardKey), HoldError> {
            view.units
                .get(i)
                .copied()
                .ok_or_else(|| HoldError::Bug(format!("shard {i} was not locked")))
        };
        let mut free = Vec::with_capacity(self.ring.len());
        for &i in &self.ring {
            let (shard, key) = shard(i)?;
            let channel = placement.sale.channel.as_ref();
            free.push((
                key.index,
                shard
                    .placeable_at(channel, placement.role(), key.capacity, view.now)
                    .0,
            ));
        }
        let Some(parts) = split(&free, quantity) else {
            let available = free.iter().map(|(_, n)| n).sum();
            return Err(HoldError::SoldOut { available });
        };
        let expires_at = placement.expires_at(view.now);
        let mut decided = vec![Vec::new(); view.units.len()];
        let mut items = HoldItems::default();
        // Every shard is of the one pool: a place has one price.
        let (_, first) = self
            .shards
            .first()
            .ok_or_else(|| HoldError::Bug("a pool hold without shards".into()))?;
        let price = placement.pool_price(&first.pool_id, view.now)?;
        for &(index, part) in &parts {
            let (shard, key) = shard(index as usize)?;
            items.insert(HoldItem::places(&key.pool_id, key.index, part, &price));
            let command = placement.pool_command(part, expires_at, price.clone());
            decided[index as usize] = pool::decide(shard, key.capacity, &command, view.now)
                .map_err(|e| HoldError::Bug(format!("placing part of a hold: {e}")))?;
        }
        let held = Held {
            expires_at,
            seats: Vec::new(),
            parts,
            items,
        };
        placement.decided(view, decided, quantity, held)
    }
}

impl Decides<PoolShard> for PlaceInPool<'_> {
    type Output = Held;
    type Error = HoldError;

    async fn prepare(&mut self) -> Result<(), HoldError> {
        self.placement.read_prices().await
    }
    /// Each shard alone at most once, then the whole pool.
    const MAX_PLANS: usize = MAX_POOL_SHARDS as usize + 1;

    fn decide(
        &mut self,
        view: &View<'_, PoolShard>,
    ) -> Result<Decision<PoolShard, Held>, HoldError> {
        self.placement.admitted(view.now)?;
        match self.trying {
            Some(tried) => self.in_one_shard(view, tried),
            None => self.across_shards(view),
        }
    }
}

#[cfg(test)]
mod tests {
    use domain::ids::PoolId;

    use super::*;
    use crate::command::holds::placement::fixtures::{buyer, now, placement, show};

    /// `n` shards of `capacity` places of the test show's pool.
    fn shards(
        entry: &crate::catalog::CatalogEntry,
        n: u32,
        capacity: u32,
    ) -> Vec<(String, ShardKey)> {
        let floor = PoolId::parse("floor").expect("a pool id");
        let spec = entry.show.pool(&floor).expect("the show has a floor");
        (0..n)
            .map(|index| {
                let (id, key) = ShardKey::unit(&entry.show.show_id, spec, index);
                (
                    format!("{id}{index}"),
                    ShardKey {
                        index,
                        capacity,
                        ..key
                    },
                )
            })
            .collect()
    }

    /// A shard with `held` of its places held by another buyer.
    fn shard_with(key: &ShardKey, held: u32) -> PoolShard {
        let mut shard = PoolShard::default();
        if held > 0 {
            let (ctx, entry) = (buyer(), show());
            let other = placement(&ctx, &entry);
            let price = other
                .pool_price(&key.pool_id, now())
                .expect("a priced pool");
            let command = other.pool_command(held, now() + chrono::Duration::hours(1), price);
            for event in pool::decide(&shard, key.capacity, &command, now()).expect("room") {
                cqrs_es::Aggregate::apply(&mut shard, event);
            }
        }
        shard
    }

    fn decision<'a>(
        placement: &'a Placement<'a>,
        shards: Vec<(String, ShardKey)>,
        quantity: u32,
    ) -> PlaceInPool<'a> {
        let all: Vec<usize> = (0..shards.len()).collect();
        PlaceInPool {
            placement,
            quantity,
            shards,
            ring: all.clone(),
            candidates: all,
            trying: None,
        }
    }

    #[test]
    fn it_should_hold_the_quantity_in_the_first_shard_with_room() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let mut decision = decision(&placement, shards(&entry, 2, 3), 2);
        let plan = decision.first_plan();
        assert_eq!(plan.len(), 1);
        let shard = shard_with(&plan[0].1, 0);
        let view = View::given(now(), vec![(&shard, &plan[0].1)]);
        let Ok(Decision::Append(decided, held)) = decision.decide(&view) else {
            panic!("a shard with room holds the places");
        };
        assert_eq!(decided.units.len(), 1);
        assert_eq!(held.parts, vec![(0, 2)]);
    }

    #[test]
    fn it_should_try_the_next_shard_then_the_whole_pool_when_a_shard_is_full() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let all = shards(&entry, 2, 3);
        let mut decision = decision(&placement, all.clone(), 2);
        let first = decision.first_plan();
        let full = shard_with(&first[0].1, 3);
        let view = View::given(now(), vec![(&full, &first[0].1)]);
        let Ok(Decision::Replan(next)) = decision.decide(&view) else {
            panic!("a full shard sends the decision to the next");
        };
        assert_eq!(next[0].1.index, 1);
        let view = View::given(now(), vec![(&full, &next[0].1)]);
        let Ok(Decision::Replan(pool)) = decision.decide(&view) else {
            panic!("no shard alone with room: the whole pool");
        };
        assert_eq!(pool.len(), all.len());
    }

    #[test]
    fn it_should_split_across_shards_and_refuse_only_what_the_pool_cannot_serve() {
        let (ctx, entry) = (buyer(), show());
        let placement = placement(&ctx, &entry);
        let all = shards(&entry, 3, 3);
        // Every shard but one place held: no single shard has two.
        let states: Vec<PoolShard> = all.iter().map(|(_, k)| shard_with(k, 2)).collect();
        let units: Vec<_> = states.iter().zip(all.iter().map(|(_, k)| k)).collect();
        let mut decision = decision(&placement, all.clone(), 2);
        let Ok(Decision::Append(_, held)) = decision.decide(&View::given(now(), units.clone()))
        else {
            panic!("two shards of one free place each serve two");
        };
        assert_eq!(held.parts.iter().map(|(_, n)| n).sum::<u32>(), 2);
        decision.quantity = 4;
        let refused = decision.decide(&View::given(now(), units));
        assert!(matches!(refused, Err(HoldError::SoldOut { available: 3 })));
    }
}
