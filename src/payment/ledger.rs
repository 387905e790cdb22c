//! The payment simulator's ledger: payments (prepared, authorized,
//! captured, cancelled) and refunds, one per idempotency key; and the
//! charges and refunds of the simulator before authorize-then-capture,
//! which a checkout recorded then may still name.

use crate::store::{on_store, port, Store, StoreError, StoreResult};

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
const SELECT_REFUND: &str = "SELECT refund_id FROM sim_refunds WHERE idempotency_key = $1";
const INSERT_REFUND: &str = "INSERT INTO sim_refunds \
     (refund_id, idempotency_key, charge_id, amount_cents, created_at_us) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING";
/// Both ledgers, oldest first: a payment's status is its outcome.
const SELECT_LEDGER: &str = "SELECT charge_id, amount_cents, outcome, refund_id FROM ( \
     SELECT c.charge_id, c.amount_cents, c.outcome, r.refund_id, c.created_at_us \
     FROM sim_charges c LEFT JOIN sim_refunds r ON r.charge_id = c.charge_id \
     UNION ALL \
     SELECT p.payment_id, p.amount_minor, p.status, r.refund_id, p.created_at_us \
     FROM sim_payments p LEFT JOIN sim_payment_refunds r ON r.payment_id = p.payment_id \
     ) ledger ORDER BY created_at_us, charge_id";

/// A row of `sim_payments`. Field names are the column names.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SimPayment {
    pub payment_id: String,
    pub idempotency_key: String,
    pub hold_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub payment_method: String,
    /// `unconfirmed`, `requires_action`, `authorized`, `declined`,
    /// `captured` or `canceled`.
    pub status: String,
    pub decline_code: Option<String>,
    /// When a simulated 3-D Secure step completes (µs).
    pub action_until_us: Option<i64>,
    pub created_at_us: i64,
    pub updated_at_us: i64,
}

const PAYMENT_COLUMNS: &str = "payment_id, idempotency_key, hold_id, amount_minor, currency, \
     payment_method, status, decline_code, action_until_us, created_at_us, updated_at_us";

port!(
    /// The simulator's ledger: its own tables, in the service's database,
    /// so the simulator is durable like the rest (a product feature for
    /// demos and load tests, not a test double).
    Ledger
);

impl Ledger {
    /// The ledger in `store`'s database.
    pub fn of(store: &Store) -> Self {
        Self::on(store.shared())
    }

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

    /// The simulator's payment under an idempotency key.
    pub async fn sim_payment_by_key(&self, key: &str) -> StoreResult<Option<SimPayment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM sim_payments WHERE idempotency_key = $1");
        on_store!(self, read pool => {
            sqlx::query_as(&sql)
                .bind(key)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// The simulator's payment with this id.
    pub async fn sim_payment(&self, payment_id: &str) -> StoreResult<Option<SimPayment>> {
        let sql = format!("SELECT {PAYMENT_COLUMNS} FROM sim_payments WHERE payment_id = $1");
        on_store!(self, read pool => {
            sqlx::query_as(&sql)
                .bind(payment_id)
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Records a prepared payment unless one exists under its key, and
    /// returns the one that stands (the first writer's, when two race).
    pub async fn record_sim_payment(&self, payment: &SimPayment) -> StoreResult<SimPayment> {
        let sql = format!(
            "INSERT INTO sim_payments ({PAYMENT_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (idempotency_key) DO NOTHING"
        );
        on_store!(self, write pool => {
            sqlx::query(&sql)
                .bind(&payment.payment_id)
                .bind(&payment.idempotency_key)
                .bind(&payment.hold_id)
                .bind(payment.amount_minor)
                .bind(&payment.currency)
                .bind(&payment.payment_method)
                .bind(&payment.status)
                .bind(&payment.decline_code)
                .bind(payment.action_until_us)
                .bind(payment.created_at_us)
                .bind(payment.updated_at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
        });
        self.sim_payment_by_key(&payment.idempotency_key)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!("payment {} vanished", payment.idempotency_key))
            })
    }

    /// Moves a payment from status `from` to the status, decline code and
    /// action deadline of `to` (compare-and-set: a payment another call
    /// moved first stays as that call left it); returns the payment as it
    /// stands.
    pub async fn move_sim_payment(&self, from: &str, to: &SimPayment) -> StoreResult<SimPayment> {
        const MOVE: &str = "UPDATE sim_payments \
             SET status = $1, decline_code = $2, action_until_us = $3, updated_at_us = $4 \
             WHERE payment_id = $5 AND status = $6";
        on_store!(self, write pool => {
            sqlx::query(MOVE)
                .bind(&to.status)
                .bind(&to.decline_code)
                .bind(to.action_until_us)
                .bind(to.updated_at_us)
                .bind(&to.payment_id)
                .bind(from)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
        });
        self.sim_payment(&to.payment_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("payment {} vanished", to.payment_id)))
    }

    /// Records the refund of a payment unless one exists under its key;
    /// returns the refund id that stands.
    pub async fn record_sim_payment_refund(
        &self,
        refund_id: &str,
        idempotency_key: &str,
        payment: &SimPayment,
        amount_minor: i64,
        at_us: i64,
    ) -> StoreResult<String> {
        const INSERT: &str = "INSERT INTO sim_payment_refunds \
             (refund_id, idempotency_key, payment_id, amount_minor, created_at_us) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING";
        const SELECT: &str = "SELECT refund_id FROM sim_payment_refunds WHERE idempotency_key = $1";
        on_store!(self, write pool => {
            sqlx::query(INSERT)
                .bind(refund_id)
                .bind(idempotency_key)
                .bind(&payment.payment_id)
                .bind(amount_minor)
                .bind(at_us)
                .execute(pool)
                .await
                .map_err(StoreError::classify)?;
            sqlx::query_scalar(SELECT)
                .bind(idempotency_key)
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// The refunds of a simulator payment, `(refund_id, amount_minor)`,
    /// oldest first: an order's partial refunds.
    pub async fn sim_refunds_of(&self, payment_id: &str) -> StoreResult<Vec<(String, i64)>> {
        const SELECT: &str = "SELECT refund_id, amount_minor FROM sim_payment_refunds \
             WHERE payment_id = $1 ORDER BY created_at_us, refund_id";
        on_store!(self, read pool => {
            sqlx::query_as(SELECT)
                .bind(payment_id)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Every simulator charge and payment with its refund, oldest first.
    pub async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>> {
        on_store!(self, read pool => {
            sqlx::query_as(SELECT_LEDGER)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)
        })
    }
}
