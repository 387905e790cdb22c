//! A purchase waiting on its buyer (3-D Secure): the hold is extended while
//! the buyer authenticates, never past the show's `max_hold_seconds`.

use chrono::{DateTime, Utc};

use super::{CheckoutError, CheckoutService, Subject};
use crate::command::context::RequestContext;
use crate::command::holds::extend::extend_hold;
use crate::command::holds::HoldError;
use crate::store::{HoldRecord, StoreError};

impl CheckoutService {
    /// Extends the hold, or every hold of an order, and returns the
    /// earliest expiry: what the buyer has to finish by.
    pub(super) async fn extend_while_waiting(
        &self,
        ctx: &RequestContext,
        subject: &Subject,
    ) -> Result<DateTime<Utc>, CheckoutError> {
        match subject {
            Subject::Hold(record) => self.extend_hold_while_waiting(ctx, record).await,
            Subject::Order(order) => {
                let mut earliest: Option<DateTime<Utc>> = None;
                for hold_id in &order.holds {
                    let hold = self.stored_hold(hold_id).await?;
                    let expires_at = self.extend_hold_while_waiting(ctx, &hold).await?;
                    earliest = Some(earliest.map_or(expires_at, |e| e.min(expires_at)));
                }
                earliest.ok_or_else(|| CheckoutError::Bug("an order without holds".into()))
            }
        }
    }

    /// Extends the hold (a refusal at the cap leaves it as it is: the buyer
    /// has until then) and returns its expiry.
    async fn extend_hold_while_waiting(
        &self,
        ctx: &RequestContext,
        hold: &HoldRecord,
    ) -> Result<DateTime<Utc>, CheckoutError> {
        let entry = self.catalog.get(&hold.show_id).await?.ok_or_else(|| {
            StoreError::Corrupt(format!("show of hold {} is missing", hold.hold_id))
        })?;
        match extend_hold(&self.rounds, ctx, hold, &entry.show).await {
            // Extended, or refused (at the cap, or lost meanwhile: the next
            // look at the checkout voids it): the record says until when.
            Ok(_) => {}
            Err(HoldError::Store(e)) => return Err(e.into()),
            Err(HoldError::Busy) => return Err(CheckoutError::Busy),
            Err(other) => return Err(CheckoutError::Bug(format!("extending a hold: {other}"))),
        }
        Ok(self.stored_hold(&hold.hold_id).await?.expires_at)
    }
}
