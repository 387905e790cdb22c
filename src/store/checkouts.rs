//! Checkout rows: bookings, and the purchases recovery must finish.

use super::{on_store, Store, StoreError, StoreResult};

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct CheckoutRecord {
    pub hold_id: String,
    pub show_id: String,
    pub buyer: String,
    pub phase: String,
    pub booking_id: Option<String>,
    pub charge_id: Option<String>,
    pub refund_id: Option<String>,
    pub amount_cents: Option<i64>,
}

const COLUMNS: &str =
    "hold_id, show_id, buyer, phase, booking_id, charge_id, refund_id, amount_cents";

/// Oldest first, so a backlog drains in order.
const SELECT_PENDING: &str = "SELECT hold_id FROM checkouts \
     WHERE phase IN ('requested', 'captured', 'refund_requested', 'cancel_requested') \
     ORDER BY updated_at_us LIMIT $1";

impl Store {
    pub async fn checkout_by_booking(
        &self,
        booking_id: &str,
    ) -> StoreResult<Option<CheckoutRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM checkouts WHERE booking_id = $1");
        on_store!(self, read pool => {
            sqlx::query_as(&sql)
                .bind(booking_id)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Hold ids of checkouts waiting on the payment provider, oldest first.
    pub async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<String>> {
        on_store!(self, read pool => {
            sqlx::query_scalar(SELECT_PENDING)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }
}
