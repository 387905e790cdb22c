//! Checkout rows: bookings, and the purchases recovery must finish.

use async_trait::async_trait;
use domain::checkout::Phase;
use domain::ids::{BookingId, HoldId};
use projections::checkouts::CheckoutRow;

use super::holds::{parse_hold_id, parse_hold_ids};
use super::sql::{Param, Pools, SqlPool};
use super::tables::{decode_row, CHECKOUT_COLUMNS};
use super::{handle, retry_read, StoreResult};

/// The checkouts recovery finishes (`Phase::PENDING`), oldest first, so a
/// backlog drains in order. The list is the predicate of the partial index
/// `checkouts_pending` (migrations: `*_orders.sql`), written the
/// same way so the planner uses it; a test holds the two equal.
fn select_pending() -> String {
    let phases: Vec<String> = Phase::PENDING.iter().map(|p| format!("'{p}'")).collect();
    format!(
        "SELECT hold_id FROM checkouts WHERE phase IN ({}) ORDER BY updated_at_us LIMIT $1",
        phases.join(", ")
    )
}

/// A checkout waiting on its buyer, with when it last moved: the cursor of
/// recovery's pages over them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingCheckout {
    pub hold_id: HoldId,
    pub updated_at_us: i64,
}

/// Checkouts waiting on their buyer after a cursor, in the order of the
/// index `checkouts_waiting`.
const SELECT_WAITING: &str = "SELECT hold_id, updated_at_us FROM checkouts \
     WHERE phase = 'action_required' AND (updated_at_us > $1 OR (updated_at_us = $1 AND hold_id > $2)) \
     ORDER BY updated_at_us, hold_id LIMIT $3";

/// Checkout records. One call is one read: the handle reads again after a
/// lost connection where a read is worth repeating. Both dialects share
/// the statements (the row's JSON is each pool's own,
/// [`SqlPool::row_object`]): implemented once, for every backend's
/// [`Pools`].
#[async_trait]
pub trait CheckoutsPort: Send + Sync {
    /// The checkout that made a booking.
    async fn checkout_by_booking(&self, booking_id: &BookingId)
        -> StoreResult<Option<CheckoutRow>>;

    /// The checkout of a hold, if a purchase of it was ever asked for.
    async fn checkout_by_hold(&self, hold_id: &HoldId) -> StoreResult<Option<CheckoutRow>>;

    /// Hold ids of checkouts waiting on the payment provider, oldest first.
    async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<HoldId>>;

    /// Checkouts waiting on their buyer (3-D Secure), after `after`.
    async fn waiting_checkouts(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> StoreResult<Vec<WaitingCheckout>>;
}

#[async_trait]
impl<B: Pools> CheckoutsPort for B {
    async fn checkout_by_booking(
        &self,
        booking_id: &BookingId,
    ) -> StoreResult<Option<CheckoutRow>> {
        let id = booking_id.to_string();
        read_checkout(self.reads(), CheckoutKey::Booking, &id).await
    }

    async fn checkout_by_hold(&self, hold_id: &HoldId) -> StoreResult<Option<CheckoutRow>> {
        let id = hold_id.to_string();
        read_checkout(self.reads(), CheckoutKey::Hold, &id).await
    }

    async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<HoldId>> {
        read_pending(self.reads(), limit).await
    }

    async fn waiting_checkouts(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> StoreResult<Vec<WaitingCheckout>> {
        read_waiting(self.reads(), after, limit).await
    }
}

handle!(
    /// Checkout records: [`CheckoutsPort`].
    Checkouts: CheckoutsPort
);

impl Checkouts {
    /// The checkout that made a booking.
    pub async fn checkout_by_booking(
        &self,
        booking_id: &BookingId,
    ) -> StoreResult<Option<CheckoutRow>> {
        retry_read(move || self.port.checkout_by_booking(booking_id)).await
    }

    /// The checkout of a hold, if a purchase of it was ever asked for.
    pub async fn checkout_by_hold(&self, hold_id: &HoldId) -> StoreResult<Option<CheckoutRow>> {
        retry_read(move || self.port.checkout_by_hold(hold_id)).await
    }

    /// Hold ids of checkouts waiting on the payment provider, oldest first.
    pub async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<HoldId>> {
        self.port.pending_checkouts(limit).await
    }

    /// Checkouts waiting on their buyer (3-D Secure), after `after`.
    pub async fn waiting_checkouts(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> StoreResult<Vec<WaitingCheckout>> {
        self.port.waiting_checkouts(after, limit).await
    }
}

/// The checkout whose `column` (`booking_id` or `hold_id`) is `id`, read on
/// `pool`.
async fn read_checkout(
    pool: &impl SqlPool,
    column: CheckoutKey,
    id: &str,
) -> StoreResult<Option<CheckoutRow>> {
    let sql = format!(
        "SELECT {} FROM checkouts WHERE {} = $1",
        pool.row_object(CHECKOUT_COLUMNS),
        column.name()
    );
    let text: Option<(String,)> = pool.fetch_optional(&sql, &[Param::Text(id)]).await?;
    text.map(|(text,)| decode_row("checkouts", &text))
        .transpose()
}

/// A column a checkout is found by.
#[derive(Debug, Clone, Copy)]
enum CheckoutKey {
    Booking,
    Hold,
}

impl CheckoutKey {
    fn name(self) -> &'static str {
        match self {
            CheckoutKey::Booking => "booking_id",
            CheckoutKey::Hold => "hold_id",
        }
    }
}

/// Hold ids of checkouts waiting on the payment provider, read on `pool`.
async fn read_pending(pool: &impl SqlPool, limit: i64) -> StoreResult<Vec<HoldId>> {
    let ids: Vec<(String,)> = pool
        .fetch_all(&select_pending(), &[Param::Int(limit)])
        .await?;
    parse_hold_ids("checkouts.hold_id", &ids)
}

/// Checkouts waiting on their buyer after a cursor, read on `pool`.
async fn read_waiting(
    pool: &impl SqlPool,
    after: Option<&WaitingCheckout>,
    limit: i64,
) -> StoreResult<Vec<WaitingCheckout>> {
    let (at_us, hold_id) = after.map_or((i64::MIN, String::new()), |a| {
        (a.updated_at_us, a.hold_id.to_string())
    });
    let rows: Vec<(String, i64)> = pool
        .fetch_all(
            SELECT_WAITING,
            &[Param::Int(at_us), Param::Text(&hold_id), Param::Int(limit)],
        )
        .await?;
    rows.into_iter()
        .map(|(id, updated_at_us)| {
            Ok(WaitingCheckout {
                hold_id: parse_hold_id("checkouts.hold_id", &id)?,
                updated_at_us,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recovery query's list is the partial index's, on both stores.
    #[test]
    fn the_pending_query_matches_the_pending_index() {
        for migration in [
            include_str!("../../migrations/postgres/0019_orders.sql"),
            include_str!("../../migrations/sqlite/0017_orders.sql"),
        ] {
            let predicate: String = migration
                .split("WHERE phase IN (")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .expect("the index predicate")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let query = select_pending();
            assert!(
                query.contains(&format!("IN ({predicate})")),
                "{query} / {predicate}"
            );
        }
    }
}
