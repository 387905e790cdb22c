//! The payment simulator's ledger: charges and refunds, one per idempotency key.

use super::{on_store, Store, StoreError, StoreResult};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SimCharge {
    pub charge_id: String,
    pub idempotency_key: String,
    pub amount_cents: i64,
    pub payment_method: String,
    /// `captured` or `declined`.
    pub outcome: String,
}

/// A charge with its refund, if any (for audits and tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LedgerCharge {
    pub charge_id: String,
    pub amount_cents: i64,
    pub outcome: String,
    pub refund_id: Option<String>,
}

const SELECT_CHARGE: &str =
    "SELECT charge_id, idempotency_key, amount_cents, payment_method, outcome \
     FROM sim_charges WHERE idempotency_key = $1";
const SELECT_CHARGE_BY_ID: &str =
    "SELECT charge_id, idempotency_key, amount_cents, payment_method, outcome \
     FROM sim_charges WHERE charge_id = $1";
const INSERT_CHARGE: &str = "INSERT INTO sim_charges \
     (charge_id, idempotency_key, amount_cents, payment_method, outcome, created_at_us) \
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (idempotency_key) DO NOTHING";
const SELECT_REFUND: &str = "SELECT refund_id FROM sim_refunds WHERE idempotency_key = $1";
const INSERT_REFUND: &str = "INSERT INTO sim_refunds \
     (refund_id, idempotency_key, charge_id, amount_cents, created_at_us) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING";
const SELECT_LEDGER: &str = "SELECT c.charge_id, c.amount_cents, c.outcome, r.refund_id \
     FROM sim_charges c LEFT JOIN sim_refunds r ON r.charge_id = c.charge_id \
     ORDER BY c.created_at_us, c.charge_id";

impl Store {
    pub async fn sim_charge(&self, idempotency_key: &str) -> StoreResult<Option<SimCharge>> {
        on_store!(self, read pool => {
            sqlx::query_as(SELECT_CHARGE)
                .bind(idempotency_key)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    pub async fn sim_charge_by_id(&self, charge_id: &str) -> StoreResult<Option<SimCharge>> {
        on_store!(self, read pool => {
            sqlx::query_as(SELECT_CHARGE_BY_ID)
                .bind(charge_id)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Records the charge unless one exists under its key, and returns the
    /// one that stands (the first writer's, when two race on one key).
    pub async fn record_sim_charge(
        &self,
        charge: &SimCharge,
        at_us: i64,
    ) -> StoreResult<SimCharge> {
        on_store!(self, write pool => {
            sqlx::query(INSERT_CHARGE)
                .bind(&charge.charge_id)
                .bind(&charge.idempotency_key)
                .bind(charge.amount_cents)
                .bind(&charge.payment_method)
                .bind(&charge.outcome)
                .bind(at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
        });
        self.sim_charge(&charge.idempotency_key)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!("charge {} vanished", charge.idempotency_key))
            })
    }

    /// Records a refund unless one exists under its key; returns the refund id that stands.
    pub async fn record_sim_refund(
        &self,
        refund_id: &str,
        idempotency_key: &str,
        charge_id: &str,
        amount_cents: i64,
        at_us: i64,
    ) -> StoreResult<String> {
        on_store!(self, write pool => {
            sqlx::query(INSERT_REFUND)
                .bind(refund_id)
                .bind(idempotency_key)
                .bind(charge_id)
                .bind(amount_cents)
                .bind(at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
            sqlx::query_scalar(SELECT_REFUND)
                .bind(idempotency_key)
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Every simulator charge with its refund, oldest first.
    pub async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>> {
        on_store!(self, read pool => {
            sqlx::query_as(SELECT_LEDGER)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }
}
