//! Hold records and idempotency keys.

use projections::holds::HoldState;

use super::{on_store, Store, StoreError, StoreResult};

#[derive(Debug, Clone)]
pub struct HoldRecord {
    pub hold_id: String,
    pub show_id: String,
    pub buyer: String,
    pub expires_at_us: i64,
    pub state: HoldState,
    pub booking_id: Option<String>,
    /// Unordered (see `CatalogEntry::sort_seats`); empty for a pool hold.
    pub seats: Vec<String>,
    /// The pool of a pool hold, with `(shard, quantity)` of each part.
    pub pool: Option<(String, Vec<(i32, i32)>)>,
}

impl HoldRecord {
    pub fn quantity(&self) -> Option<u32> {
        self.pool
            .as_ref()
            .map(|(_, parts)| parts.iter().map(|(_, q)| (*q).max(0) as u32).sum())
    }
}

#[derive(Debug, Clone)]
pub struct IdempotencyEntry {
    pub request_hash: String,
    pub hold_id: String,
}

const SELECT_HOLD: &str = "SELECT show_id, buyer, expires_at_us, state, booking_id, pool_id \
     FROM holds WHERE hold_id = $1";
const SELECT_POOL_PARTS: &str =
    "SELECT shard, quantity FROM pool_holds WHERE hold_id = $1 ORDER BY shard";
/// A primary-key lookup. Ordering by the show's seat order happens in the
/// service, from the cached show: a join on `seat_availability` ordered by
/// ordinal tempts both planners into walking every seat of the show.
const SELECT_HOLD_SEATS: &str = "SELECT seat_id FROM hold_seats WHERE hold_id = $1";
const SELECT_IDEMPOTENCY: &str =
    "SELECT request_hash, hold_id FROM idempotency_keys WHERE buyer = $1 AND key = $2";

impl Store {
    pub async fn hold(&self, hold_id: &str) -> StoreResult<Option<HoldRecord>> {
        on_store!(self, read pool => {
            type Row = (String, String, i64, String, Option<String>, Option<String>);
            let row: Option<Row> = sqlx::query_as(SELECT_HOLD)
                .bind(hold_id)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)?;
            let Some((show_id, buyer, expires_at_us, state, booking_id, pool_id)) = row else {
                return Ok(None);
            };
            let state = HoldState::parse(&state)
                .ok_or_else(|| StoreError::Corrupt(format!("hold state {state:?}")))?;
            let (seats, parts) = match pool_id {
                None => {
                    let seats: Vec<String> = sqlx::query_scalar(SELECT_HOLD_SEATS)
                        .bind(hold_id)
                        .fetch_all(pool)
                        .await
                        .map_err(StoreError::classify)?;
                    (seats, None)
                }
                Some(pool_id) => {
                    let parts: Vec<(i32, i32)> = sqlx::query_as(SELECT_POOL_PARTS)
                        .bind(hold_id)
                        .fetch_all(pool)
                        .await
                        .map_err(StoreError::classify)?;
                    (Vec::new(), Some((pool_id, parts)))
                }
            };
            Ok(Some(HoldRecord {
                hold_id: hold_id.to_owned(),
                show_id,
                buyer,
                expires_at_us,
                state,
                booking_id,
                seats,
                pool: parts,
            }))
        })
    }

    pub async fn idempotency_entry(
        &self,
        buyer: &str,
        key: &str,
    ) -> StoreResult<Option<IdempotencyEntry>> {
        on_store!(self, read pool => {
            let row: Option<(String, String)> = sqlx::query_as(SELECT_IDEMPOTENCY)
                .bind(buyer)
                .bind(key)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)?;
            Ok(row.map(|(request_hash, hold_id)| IdempotencyEntry { request_hash, hold_id }))
        })
    }
}

impl Store {
    /// Ids of holds past their expiry that no event has closed, oldest first.
    pub async fn expired_holds(&self, now_us: i64, limit: i64) -> StoreResult<Vec<String>> {
        on_store!(self, read pool => {
            sqlx::query_scalar(
                "SELECT hold_id FROM holds WHERE state = 'held' AND expires_at_us <= $1 \
                 ORDER BY expires_at_us LIMIT $2",
            )
            .bind(now_us)
            .bind(limit)
            .fetch_all(pool)
            .await
            .map_err(StoreError::classify)
        })
    }
}
