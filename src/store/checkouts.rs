//! Checkout rows: bookings, and the purchases recovery must finish.

use domain::ids::{BookingId, HoldId};
use projections::checkouts::CheckoutRow;

use super::holds::parse_hold_id;
use super::tables::{decode_row, CHECKOUT_COLUMNS};
use super::{on_store, retry_read, Store, StoreError, StoreResult};

/// Oldest first, so a backlog drains in order.
const SELECT_PENDING: &str = "SELECT hold_id FROM checkouts \
     WHERE phase IN ('requested', 'captured', 'refund_requested', 'cancel_requested') \
     ORDER BY updated_at_us LIMIT $1";

impl Store {
    /// The checkout that made a booking.
    pub async fn checkout_by_booking(
        &self,
        booking_id: &BookingId,
    ) -> StoreResult<Option<CheckoutRow>> {
        let sql = format!(
            "SELECT {} FROM checkouts WHERE booking_id = $1",
            self.row_object(CHECKOUT_COLUMNS)
        );
        let sql = &sql;
        let text: Option<String> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_scalar(sql)
                    .bind(booking_id.to_string())
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        text.map(|text| decode_row("checkouts", &text)).transpose()
    }

    /// The checkout of a hold, if a purchase of it was ever asked for.
    pub async fn checkout_by_hold(&self, hold_id: &HoldId) -> StoreResult<Option<CheckoutRow>> {
        let sql = format!(
            "SELECT {} FROM checkouts WHERE hold_id = $1",
            self.row_object(CHECKOUT_COLUMNS)
        );
        let sql = &sql;
        let text: Option<String> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_scalar(sql)
                    .bind(hold_id.to_string())
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        text.map(|text| decode_row("checkouts", &text)).transpose()
    }

    /// Hold ids of checkouts waiting on the payment provider, oldest first.
    pub async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<HoldId>> {
        let ids: Vec<String> = on_store!(self, read pool => {
            sqlx::query_scalar(SELECT_PENDING)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)?
        });
        ids.iter()
            .map(|id| parse_hold_id("checkouts.hold_id", id))
            .collect()
    }
}
