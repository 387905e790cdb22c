//! Buyers' idempotency keys: which hold a key made, and pruning past
//! their retention. A key is written in its hold's own append (`batch`).

use domain::ids::{BuyerId, HoldId, IdempotencyKey};

use super::holds::parse_hold_id;
use super::{on_store, retry_read, IdempotencyKeys, StoreError, StoreResult};

#[derive(Debug, Clone)]
pub struct IdempotencyEntry {
    pub request_hash: String,
    pub hold_id: HoldId,
}

const SELECT_IDEMPOTENCY: &str =
    "SELECT request_hash, hold_id FROM idempotency_keys WHERE buyer = $1 AND key = $2";

/// The oldest keys created before a cutoff, a bounded batch of them
/// (row values in `IN`: both PostgreSQL and SQLite 3.15+).
const PRUNE_IDEMPOTENCY: &str = "DELETE FROM idempotency_keys WHERE (buyer, key) IN \
     (SELECT buyer, key FROM idempotency_keys WHERE created_at_us < $1 \
      ORDER BY created_at_us LIMIT $2)";

impl IdempotencyKeys {
    pub async fn entry(
        &self,
        buyer: &BuyerId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyEntry>> {
        let row: Option<(String, String)> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as(SELECT_IDEMPOTENCY)
                    .bind(buyer.as_str())
                    .bind(key.as_str())
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        row.map(|(request_hash, hold_id)| {
            Ok(IdempotencyEntry {
                request_hash,
                hold_id: parse_hold_id("idempotency_keys.hold_id", &hold_id)?,
            })
        })
        .transpose()
    }

    /// Deletes at most `limit` idempotency keys created before `cutoff_us`,
    /// oldest first; returns how many.
    pub async fn prune(&self, cutoff_us: i64, limit: i64) -> StoreResult<u64> {
        on_store!(self, write pool => {
            Ok(sqlx::query(PRUNE_IDEMPOTENCY)
                .bind(cutoff_us)
                .bind(limit)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?
                .rows_affected())
        })
    }
}
