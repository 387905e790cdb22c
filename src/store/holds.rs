//! Hold records: the `holds` and `pool_holds` tables.

use std::fmt;

use chrono::{DateTime, Utc};
use domain::ids::{BookingId, BuyerId, HoldId, PoolId, SeatId, ShowId};
use projections::holds::{HoldItems, HoldState, SeatIds};
use projections::time::from_micros;
use uuid::Uuid;

use async_trait::async_trait;

use super::sql::{Param, Pools, SqlPool};
use super::{handle, retry_read, StoreError, StoreResult};

#[derive(Debug, Clone)]
pub struct HoldRecord {
    pub hold_id: HoldId,
    pub show_id: ShowId,
    pub buyer: BuyerId,
    pub expires_at: DateTime<Utc>,
    pub state: HoldState,
    pub booking_id: Option<BookingId>,
    /// Unordered (see `CatalogEntry::sort_seats`); empty for a pool hold.
    pub seats: Vec<SeatId>,
    /// The pool of a pool hold, with `(shard, quantity)` of each part.
    pub pool: Option<(PoolId, Vec<(u32, u32)>)>,
    /// What each unit costs, as the hold's events priced it (empty for a
    /// hold placed before prices were in the events).
    pub items: HoldItems,
}

impl HoldRecord {
    pub fn quantity(&self) -> Option<u32> {
        self.pool
            .as_ref()
            .map(|(_, parts)| parts.iter().map(|(_, q)| q).sum())
    }
}

/// A stored value as its type, or `Corrupt` naming the column and the value.
/// Every id leaves the store parsed, through this.
pub(super) fn parse_column<V: fmt::Debug + Copy, T, E: fmt::Display>(
    column: &str,
    value: V,
    parse: impl FnOnce(V) -> Result<T, E>,
) -> StoreResult<T> {
    parse(value).map_err(|e| StoreError::Corrupt(format!("{column} {value:?}: {e}")))
}

pub(super) fn parse_hold_id(column: &str, value: &str) -> StoreResult<HoldId> {
    parse_column(column, value, Uuid::parse_str).map(HoldId)
}

const SELECT_HOLD: &str =
    "SELECT show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items \
     FROM holds WHERE hold_id = $1";
const SELECT_POOL_PARTS: &str =
    "SELECT shard, quantity FROM pool_holds WHERE hold_id = $1 ORDER BY shard";

/// A row of `holds` as read: `(show_id, buyer, expires_at_us, state,
/// booking_id, pool_id, seat_ids, items)`.
type HoldColumns = (
    String,
    String,
    i64,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

/// The parts of a hold record its own row holds, parsed.
struct HoldHead {
    show_id: ShowId,
    buyer: BuyerId,
    expires_at: DateTime<Utc>,
    state: HoldState,
    booking_id: Option<BookingId>,
    pool_id: Option<PoolId>,
    seats: Vec<SeatId>,
    items: HoldItems,
}

impl HoldHead {
    fn parse(row: HoldColumns) -> StoreResult<Self> {
        let (show_id, buyer, expires_at_us, state, booking_id, pool_id, seat_ids, items) = row;
        Ok(Self {
            show_id: parse_column("holds.show_id", show_id.as_str(), ShowId::parse)?,
            buyer: parse_column("holds.buyer", buyer.as_str(), BuyerId::parse)?,
            expires_at: parse_column("holds.expires_at_us", expires_at_us, |us| {
                from_micros(us).ok_or("out of range")
            })?,
            state: parse_column("holds.state", state.as_str(), |s| {
                HoldState::parse(s).ok_or("not a hold state")
            })?,
            booking_id: booking_id
                .as_deref()
                .map(|id| parse_column("holds.booking_id", id, Uuid::parse_str).map(BookingId))
                .transpose()?,
            pool_id: pool_id
                .as_deref()
                .map(|id| parse_column("holds.pool_id", id, PoolId::parse))
                .transpose()?,
            seats: parse_column("holds.seat_ids", seat_ids.as_str(), SeatIds::from_json)?
                .into_vec(),
            items: parse_column("holds.items", items.as_str(), HoldItems::from_json)?,
        })
    }

    /// Is this a pool hold, whose parts are rows of `pool_holds`?
    fn has_parts(&self) -> bool {
        self.pool_id.is_some()
    }

    /// The record, with the rows of `pool_holds` (`(shard, quantity)`, read
    /// only for a pool hold).
    fn record(self, hold_id: HoldId, parts: Vec<(i32, i32)>) -> StoreResult<HoldRecord> {
        let pool = match self.pool_id {
            None => None,
            Some(pool_id) => Some((
                pool_id,
                parts
                    .into_iter()
                    .map(parse_part)
                    .collect::<StoreResult<Vec<_>>>()?,
            )),
        };
        Ok(HoldRecord {
            hold_id,
            show_id: self.show_id,
            buyer: self.buyer,
            expires_at: self.expires_at,
            state: self.state,
            booking_id: self.booking_id,
            seats: self.seats,
            pool,
            items: self.items,
        })
    }
}

fn parse_part((shard, quantity): (i32, i32)) -> StoreResult<(u32, u32)> {
    Ok((
        parse_column("pool_holds.shard", shard, u32::try_from)?,
        parse_column("pool_holds.quantity", quantity, u32::try_from)?,
    ))
}

/// Hold records. One call is one read: the handle reads again after a lost
/// connection. Both dialects share the statements: implemented once, for
/// every backend's [`Pools`].
#[async_trait]
pub trait HoldsPort: Send + Sync {
    /// The hold's record, if it was ever placed.
    async fn hold(&self, hold_id: &HoldId) -> StoreResult<Option<HoldRecord>>;

    /// Ids of holds past their expiry (`expires_at_us <= now_us`) that no
    /// event has closed, oldest first, at most `limit`.
    async fn expired_holds(&self, now_us: i64, limit: i64) -> StoreResult<Vec<HoldId>>;
}

#[async_trait]
impl<B: Pools> HoldsPort for B {
    async fn hold(&self, hold_id: &HoldId) -> StoreResult<Option<HoldRecord>> {
        read_hold(self.reads(), hold_id).await
    }

    async fn expired_holds(&self, now_us: i64, limit: i64) -> StoreResult<Vec<HoldId>> {
        read_expired(self.reads(), now_us, limit).await
    }
}

handle!(
    /// Hold records (the `holds` and `pool_holds` tables): [`HoldsPort`].
    Holds: HoldsPort
);

impl Holds {
    pub async fn hold(&self, hold_id: &HoldId) -> StoreResult<Option<HoldRecord>> {
        retry_read(move || self.port.hold(hold_id)).await
    }

    /// Ids of holds past their expiry that no event has closed, oldest first.
    pub async fn expired_holds(&self, now_us: i64, limit: i64) -> StoreResult<Vec<HoldId>> {
        self.port.expired_holds(now_us, limit).await
    }
}

/// A hold's record, read on `pool`.
async fn read_hold(pool: &impl SqlPool, hold_id: &HoldId) -> StoreResult<Option<HoldRecord>> {
    let id = hold_id.to_string();
    let row: Option<HoldColumns> = pool
        .fetch_optional(SELECT_HOLD, &[Param::Text(&id)])
        .await?;
    let Some(head) = row.map(HoldHead::parse).transpose()? else {
        return Ok(None);
    };
    let parts = if head.has_parts() {
        pool.fetch_all(SELECT_POOL_PARTS, &[Param::Text(&id)])
            .await?
    } else {
        Vec::new()
    };
    head.record(*hold_id, parts).map(Some)
}

/// Ids of holds past their expiry that no event has closed, oldest first,
/// read on `pool`: the sweeper's query.
async fn read_expired(pool: &impl SqlPool, now_us: i64, limit: i64) -> StoreResult<Vec<HoldId>> {
    let ids: Vec<(String,)> = pool
        .fetch_all(
            "SELECT hold_id FROM holds WHERE state = 'held' AND expires_at_us <= $1 \
             ORDER BY expires_at_us LIMIT $2",
            &[Param::Int(now_us), Param::Int(limit)],
        )
        .await?;
    parse_hold_ids("holds.hold_id", &ids)
}

/// Hold ids as read (one column).
pub(super) fn parse_hold_ids(column: &str, ids: &[(String,)]) -> StoreResult<Vec<HoldId>> {
    ids.iter().map(|(id,)| parse_hold_id(column, id)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::store::READ_RETRIES_ON_CONNECTION_LOSS;

    /// A port whose calls lose their connection `losses` times, then find
    /// nothing: a fake the handle runs over as it does over a backend.
    struct LosesItsConnection {
        losses: usize,
        calls: AtomicUsize,
    }

    impl LosesItsConnection {
        fn handle(losses: usize) -> (Holds, Arc<Self>) {
            let port = Arc::new(Self {
                losses,
                calls: AtomicUsize::new(0),
            });
            (Holds::new(port.clone()), port)
        }

        fn call(&self) -> StoreResult<()> {
            if self.calls.fetch_add(1, Ordering::SeqCst) < self.losses {
                return Err(StoreError::ConnectionLost("connection reset".into()));
            }
            Ok(())
        }
    }

    #[async_trait]
    impl HoldsPort for LosesItsConnection {
        async fn hold(&self, _: &HoldId) -> StoreResult<Option<HoldRecord>> {
            self.call().map(|()| None)
        }

        async fn expired_holds(&self, _: i64, _: i64) -> StoreResult<Vec<HoldId>> {
            self.call().map(|()| Vec::new())
        }
    }

    #[tokio::test]
    async fn a_hold_read_that_loses_its_connection_is_read_again_up_to_the_limit() {
        let id = HoldId(Uuid::new_v4());
        let (holds, port) = LosesItsConnection::handle(READ_RETRIES_ON_CONNECTION_LOSS);
        assert!(holds.hold(&id).await.expect("read again").is_none());
        assert_eq!(
            port.calls.load(Ordering::SeqCst),
            READ_RETRIES_ON_CONNECTION_LOSS + 1
        );

        let (holds, port) = LosesItsConnection::handle(READ_RETRIES_ON_CONNECTION_LOSS + 1);
        let lost = holds.hold(&id).await;
        assert!(
            matches!(lost, Err(StoreError::ConnectionLost(_))),
            "{lost:?}"
        );
        assert_eq!(
            port.calls.load(Ordering::SeqCst),
            READ_RETRIES_ON_CONNECTION_LOSS + 1
        );
    }

    /// The sweeper's scan is not read again here: the sweeper's next round
    /// is its retry.
    #[tokio::test]
    async fn the_sweepers_scan_is_not_read_again_after_a_lost_connection() {
        let (holds, port) = LosesItsConnection::handle(1);
        let lost = holds.expired_holds(0, 10).await;
        assert!(
            matches!(lost, Err(StoreError::ConnectionLost(_))),
            "{lost:?}"
        );
        assert_eq!(port.calls.load(Ordering::SeqCst), 1);
    }
}
