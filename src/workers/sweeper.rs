//! The sweeper: records `HoldExpired` for holds past `expires_at` that no
//! event has closed yet.
//!
//! Storage hygiene and an audit record, never a correctness dependency:
//! every command and query compares `expires_at` with its own `now`, so with
//! the sweeper off everything still answers right. What it buys: pool shard
//! states stay small, and the log says when each abandoned hold ended.

use std::sync::Arc;
use std::time::Duration;

use domain::ids::BuyerId;
use projections::time::to_micros;

use crate::auth::{Actor, Role};
use crate::clock::Clock;
use crate::command::context::RequestContext;
use crate::command::holds::{HoldError, HoldService};
use crate::store::{Store, StoreError};

/// Holds expired per pass at most; a backlog drains over several passes.
pub const HOLDS_PER_SWEEP: i64 = 500;

/// The default time between passes (`BOOKING_SWEEPER_INTERVAL_SECONDS`).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// The actor recorded on the events the sweeper appends.
pub const SWEEPER_ACTOR: &str = "system:sweeper";

#[derive(Clone)]
pub struct Sweeper {
    store: Arc<Store>,
    holds: Arc<HoldService>,
    clock: Arc<dyn Clock>,
}

impl Sweeper {
    pub fn new(store: Arc<Store>, holds: Arc<HoldService>, clock: Arc<dyn Clock>) -> Self {
        Self {
            store,
            holds,
            clock,
        }
    }

    /// One pass: returns how many holds it recorded as expired.
    pub async fn run_once(&self) -> Result<usize, HoldError> {
        let now_us = to_micros(self.clock.now());
        let expired = self.store.expired_holds(now_us, HOLDS_PER_SWEEP).await?;
        let actor = BuyerId::parse(SWEEPER_ACTOR)
            .map_err(|e| HoldError::Store(StoreError::Corrupt(e.to_string())))?;
        let ctx = RequestContext {
            actor: Actor {
                id: actor,
                role: Role::Admin,
            },
            request_id: uuid::Uuid::new_v4().to_string(),
            idempotency_key: None,
        };
        let mut swept = 0;
        for hold_id in expired {
            match self.holds.expire(&ctx, &hold_id).await {
                Ok(()) => swept += 1,
                Err(error) => {
                    tracing::warn!(%hold_id, %error, "the sweeper could not expire a hold")
                }
            }
        }
        Ok(swept)
    }
}
