//! The row of one pool shard: how many of its places are sold. Held places
//! are not stored here; they are counted from `pool_holds` at query time,
//! against `expires_at_us`, so an expiry needs no write.

use domain::ids::{PoolId, ShowId};
use domain::pool::PoolShard;
use serde::{Deserialize, Serialize};

/// A row of `pool_shards` (its `capacity` is written once, with the show).
/// Field names are the column names (see `availability::SeatAvailabilityRow`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolShardRow {
    pub show_id: ShowId,
    pub pool_id: PoolId,
    pub shard: u32,
    pub sold: u32,
    /// The stream sequence this row is the fold of.
    pub last_seq: i64,
}

impl PoolShardRow {
    pub fn of(
        show_id: &ShowId,
        pool_id: &PoolId,
        shard: u32,
        last_seq: i64,
        state: &PoolShard,
    ) -> Self {
        Self {
            show_id: show_id.clone(),
            pool_id: pool_id.clone(),
            shard,
            sold: state.sold,
            last_seq,
        }
    }
}
