//! The sweeper: records `HoldExpired` for holds past `expires_at` that no
//! event has closed yet, and prunes idempotency keys past their retention.
//!
//! Storage hygiene and an audit record, never a correctness dependency:
//! every command and query compares `expires_at` with its own `now`, so with
//! the sweeper off everything still answers right. What it buys: pool shard
//! states stay small, and the log says when each abandoned hold ended.
//!
//! A pruned key is a new key again: sent again, it places a new hold. That
//! hold never reuses the old hold's id (`HoldId::for_idempotency_key` puts
//! the day of first use into the id, and the retention is at least a day),
//! so any key past its retention may go, whatever became of its hold.

use std::sync::Arc;
use std::time::Duration;

use domain::ids::BuyerId;
use projections::time::to_micros;

use crate::auth::Actor;
use crate::clock::Clock;
use crate::command::context::{OutcomeMark, RequestContext};
use crate::command::holds::{HoldError, HoldService};
use crate::store::{Holds, IdempotencyKeys, StoreError};

/// Holds expired per pass at most; a backlog drains over several passes.
pub const HOLDS_PER_SWEEP: i64 = 500;

/// Idempotency keys deleted per statement, and statements per pass at most:
/// one bounded delete holds the write lock (SQLite) or a batch of row locks
/// (PostgreSQL) only briefly, so holds keep being placed meanwhile; a day's
/// backlog beyond that drains over the following passes.
pub const KEYS_PER_PRUNE: i64 = 1_000;
pub const PRUNES_PER_SWEEP: usize = 10;

/// The default `BOOKING_IDEMPOTENCY_RETENTION_HOURS`: the contract's minimum
/// (docs/api.md: "kept at least 24 hours").
pub const DEFAULT_KEY_RETENTION: Duration =
    Duration::from_secs(3_600 * domain::limits::MIN_IDEMPOTENCY_RETENTION_HOURS);

/// The default time between passes (`BOOKING_SWEEPER_INTERVAL_SECONDS`).
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// The actor recorded on the events the sweeper appends.
pub const SWEEPER_ACTOR: &str = "system:sweeper";

/// A retention as chrono counts it; one too long for that keeps every key.
fn retention_of(retention: Duration) -> chrono::Duration {
    chrono::Duration::from_std(retention).unwrap_or(chrono::Duration::MAX)
}

#[derive(Clone)]
pub struct Sweeper {
    hold_records: Holds,
    keys: IdempotencyKeys,
    holds: Arc<HoldService>,
    clock: Arc<dyn Clock>,
    key_retention: chrono::Duration,
}

impl Sweeper {
    pub fn new(
        hold_records: Holds,
        keys: IdempotencyKeys,
        holds: Arc<HoldService>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            hold_records,
            keys,
            holds,
            clock,
            key_retention: retention_of(DEFAULT_KEY_RETENTION),
        }
    }

    /// Keys are pruned once older than `retention`, never before the
    /// contract's minimum whatever is asked.
    pub fn with_key_retention(mut self, retention: Duration) -> Self {
        self.key_retention = retention_of(retention.max(DEFAULT_KEY_RETENTION));
        self
    }

    /// One pass: returns how many holds it recorded as expired. Keys past
    /// their retention are pruned after that.
    pub async fn run_once(&self) -> Result<usize, HoldError> {
        let swept = self.expire_holds().await?;
        let pruned = self.prune_keys().await?;
        if pruned > 0 {
            tracing::info!(pruned, "idempotency keys past their retention pruned");
        }
        Ok(swept)
    }

    /// Deletes idempotency keys created before now minus the retention, in
    /// bounded batches; returns how many.
    pub async fn prune_keys(&self) -> Result<u64, HoldError> {
        let Some(cutoff) = self.clock.now().checked_sub_signed(self.key_retention) else {
            return Ok(0);
        };
        let cutoff_us = to_micros(cutoff);
        let mut pruned = 0;
        for _ in 0..PRUNES_PER_SWEEP {
            let deleted = self.keys.prune(cutoff_us, KEYS_PER_PRUNE).await?;
            pruned += deleted;
            if deleted < KEYS_PER_PRUNE as u64 {
                break;
            }
        }
        Ok(pruned)
    }

    async fn expire_holds(&self) -> Result<usize, HoldError> {
        let now_us = to_micros(self.clock.now());
        let expired = self
            .hold_records
            .expired_holds(now_us, HOLDS_PER_SWEEP)
            .await?;
        let actor = BuyerId::parse(SWEEPER_ACTOR)
            .map_err(|e| HoldError::Store(StoreError::Corrupt(e.to_string())))?;
        let ctx = RequestContext {
            actor: Actor::admin(actor),
            sold_by: None,
            request_id: None,
            idempotency_key: None,
            outcome: OutcomeMark::default(),
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
