//! Checkout rows: bookings, and the purchases recovery must finish.

use domain::checkout::Phase;
use domain::ids::{BookingId, HoldId};
use projections::checkouts::CheckoutRow;

use super::holds::parse_hold_id;
use super::tables::{decode_row, CHECKOUT_COLUMNS};
use super::{on_store, retry_read, Checkouts, StoreError, StoreResult};

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

impl Checkouts {
    /// The checkout that made a booking.
    pub async fn checkout_by_booking(
        &self,
        booking_id: &BookingId,
    ) -> StoreResult<Option<CheckoutRow>> {
        let sql = format!(
            "SELECT {} FROM checkouts WHERE booking_id = $1",
            self.backend().row_object(CHECKOUT_COLUMNS)
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
            self.backend().row_object(CHECKOUT_COLUMNS)
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
        let sql = select_pending();
        let ids: Vec<String> = on_store!(self, read pool => {
            sqlx::query_scalar(&sql)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)?
        });
        ids.iter()
            .map(|id| parse_hold_id("checkouts.hold_id", id))
            .collect()
    }

    /// Checkouts waiting on their buyer (3-D Secure), after `after`.
    pub async fn waiting_checkouts(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> StoreResult<Vec<WaitingCheckout>> {
        let (at_us, hold_id) = after.map_or((i64::MIN, String::new()), |a| {
            (a.updated_at_us, a.hold_id.to_string())
        });
        let rows: Vec<(String, i64)> = on_store!(self, read pool => {
            sqlx::query_as(SELECT_WAITING)
                .bind(at_us)
                .bind(&hold_id)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)?
        });
        rows.into_iter()
            .map(|(id, updated_at_us)| {
                Ok(WaitingCheckout {
                    hold_id: parse_hold_id("checkouts.hold_id", &id)?,
                    updated_at_us,
                })
            })
            .collect()
    }
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
