//! Buyers' idempotency keys: which hold a key made, and pruning past
//! their retention. A key is written in its hold's own append (`batch`).

use async_trait::async_trait;
use domain::ids::{BuyerId, HoldId, IdempotencyKey};

use super::holds::parse_hold_id;
use super::sql::{Param, Pools, SqlPool};
use super::{handle, retry_read, StoreResult};

#[derive(Debug, Clone)]
pub struct IdempotencyEntry {
    pub request_hash: String,
    pub hold_id: HoldId,
}

/// Buyers' keys. One call is one statement. Both dialects share the
/// statements: implemented once, for every backend's [`Pools`].
#[async_trait]
pub trait IdempotencyPort: Send + Sync {
    /// What the buyer's key made, if the key was used.
    async fn entry(
        &self,
        buyer: &BuyerId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyEntry>>;

    /// Deletes at most `limit` keys created before `cutoff_us`, oldest
    /// first; returns how many.
    async fn prune(&self, cutoff_us: i64, limit: i64) -> StoreResult<u64>;
}

#[async_trait]
impl<B: Pools> IdempotencyPort for B {
    async fn entry(
        &self,
        buyer: &BuyerId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyEntry>> {
        read_entry(self.reads(), buyer, key).await
    }

    async fn prune(&self, cutoff_us: i64, limit: i64) -> StoreResult<u64> {
        prune(self.writes(), cutoff_us, limit).await
    }
}

handle!(
    /// Buyers' idempotency keys: [`IdempotencyPort`].
    IdempotencyKeys: IdempotencyPort
);

impl IdempotencyKeys {
    pub async fn entry(
        &self,
        buyer: &BuyerId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyEntry>> {
        retry_read(move || self.port.entry(buyer, key)).await
    }

    /// Deletes at most `limit` idempotency keys created before `cutoff_us`,
    /// oldest first; returns how many.
    pub async fn prune(&self, cutoff_us: i64, limit: i64) -> StoreResult<u64> {
        self.port.prune(cutoff_us, limit).await
    }
}

/// What the buyer's key made, read on `pool`.
async fn read_entry(
    pool: &impl SqlPool,
    buyer: &BuyerId,
    key: &IdempotencyKey,
) -> StoreResult<Option<IdempotencyEntry>> {
    let row: Option<(String, String)> = pool
        .fetch_optional(
            "SELECT request_hash, hold_id FROM idempotency_keys WHERE buyer = $1 AND key = $2",
            &[Param::Text(buyer.as_str()), Param::Text(key.as_str())],
        )
        .await?;
    row.map(|(request_hash, hold_id)| {
        Ok(IdempotencyEntry {
            request_hash,
            hold_id: parse_hold_id("idempotency_keys.hold_id", &hold_id)?,
        })
    })
    .transpose()
}

/// Deletes the oldest keys created before a cutoff, a bounded batch of them
/// (row values in `IN`: both PostgreSQL and SQLite 3.15+), on `pool`.
async fn prune(pool: &impl SqlPool, cutoff_us: i64, limit: i64) -> StoreResult<u64> {
    pool.execute(
        "DELETE FROM idempotency_keys WHERE (buyer, key) IN \
         (SELECT buyer, key FROM idempotency_keys WHERE created_at_us < $1 \
          ORDER BY created_at_us LIMIT $2)",
        &[Param::Int(cutoff_us), Param::Int(limit)],
    )
    .await
}
