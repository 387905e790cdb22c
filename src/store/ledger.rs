//! The payment simulator's ledger: payments (prepared, authorized,
//! captured, cancelled) and refunds, one per idempotency key; and the
//! charges and refunds of the simulator before authorize-then-capture,
//! which a checkout recorded then may still name. Its own tables, in the
//! service's database (the simulator, `payment/simulator.rs`, holds the
//! handle).

use async_trait::async_trait;

use super::sql::{Param, Pools, SqlPool};
use super::{handle, Store, StoreError, StoreResult};

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

/// The simulator's ledger. One call is one statement, or a write and the
/// read of what stands. Both dialects share the statements: implemented
/// once, for every backend's [`Pools`].
#[async_trait]
pub trait LedgerPort: Send + Sync {
    async fn sim_charge(&self, idempotency_key: &str) -> StoreResult<Option<SimCharge>>;

    async fn sim_charge_by_id(&self, charge_id: &str) -> StoreResult<Option<SimCharge>>;

    /// Records a refund unless one exists under its key; the refund id
    /// that stands.
    async fn record_sim_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String>;

    /// The payment under an idempotency key.
    async fn sim_payment_by_key(&self, key: &str) -> StoreResult<Option<SimPayment>>;

    /// The payment with this id.
    async fn sim_payment(&self, payment_id: &str) -> StoreResult<Option<SimPayment>>;

    /// Records a prepared payment unless one exists under its key.
    async fn insert_sim_payment(&self, payment: &SimPayment) -> StoreResult<()>;

    /// Moves a payment from status `from` to `to`'s (compare-and-set).
    async fn update_sim_payment(&self, from: &str, to: &SimPayment) -> StoreResult<()>;

    /// Records the refund of a payment (`refund.charge_id` names it) unless
    /// one exists under its key; the refund id that stands.
    async fn record_sim_payment_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String>;

    /// The refunds of a payment, `(refund_id, amount_minor)`, oldest first.
    async fn sim_refunds_of(&self, payment_id: &str) -> StoreResult<Vec<(String, i64)>>;

    /// Every charge and payment with its refund, oldest first.
    async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>>;
}

#[async_trait]
impl<B: Pools> LedgerPort for B {
    async fn sim_charge(&self, idempotency_key: &str) -> StoreResult<Option<SimCharge>> {
        sim_charge(self.reads(), idempotency_key).await
    }

    async fn sim_charge_by_id(&self, charge_id: &str) -> StoreResult<Option<SimCharge>> {
        sim_charge_by_id(self.reads(), charge_id).await
    }

    async fn record_sim_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String> {
        record_sim_refund(self.writes(), refund).await
    }

    async fn sim_payment_by_key(&self, key: &str) -> StoreResult<Option<SimPayment>> {
        sim_payment_where(self.reads(), PaymentKey::IdempotencyKey, key).await
    }

    async fn sim_payment(&self, payment_id: &str) -> StoreResult<Option<SimPayment>> {
        sim_payment_where(self.reads(), PaymentKey::PaymentId, payment_id).await
    }

    async fn insert_sim_payment(&self, payment: &SimPayment) -> StoreResult<()> {
        insert_sim_payment(self.writes(), payment).await
    }

    async fn update_sim_payment(&self, from: &str, to: &SimPayment) -> StoreResult<()> {
        update_sim_payment(self.writes(), from, to).await
    }

    async fn record_sim_payment_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String> {
        record_sim_payment_refund(self.writes(), refund).await
    }

    async fn sim_refunds_of(&self, payment_id: &str) -> StoreResult<Vec<(String, i64)>> {
        sim_refunds_of(self.reads(), payment_id).await
    }

    async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>> {
        sim_ledger(self.reads()).await
    }
}

handle!(
    /// The simulator's ledger: its own tables, in the service's database,
    /// so the simulator is durable like the rest (a product feature for
    /// demos and load tests, not a test double). See [`LedgerPort`].
    Ledger: LedgerPort
);

/// A refund to record: of a charge, or of a payment (`charge_id` is then
/// the payment's id).
#[derive(Debug, Clone, Copy)]
pub struct SimRefund<'a> {
    pub refund_id: &'a str,
    pub idempotency_key: &'a str,
    pub charge_id: &'a str,
    pub amount: i64,
    pub at_us: i64,
}

impl SimRefund<'_> {
    fn params(&self) -> [Param<'_>; 5] {
        [
            Param::Text(self.refund_id),
            Param::Text(self.idempotency_key),
            Param::Text(self.charge_id),
            Param::Int(self.amount),
            Param::Int(self.at_us),
        ]
    }
}

impl Ledger {
    /// The ledger in `store`'s database.
    pub fn of(store: &Store) -> Self {
        store.ledger()
    }

    pub async fn sim_charge(&self, idempotency_key: &str) -> StoreResult<Option<SimCharge>> {
        self.port.sim_charge(idempotency_key).await
    }

    pub async fn sim_charge_by_id(&self, charge_id: &str) -> StoreResult<Option<SimCharge>> {
        self.port.sim_charge_by_id(charge_id).await
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
        self.port
            .record_sim_refund(&SimRefund {
                refund_id,
                idempotency_key,
                charge_id,
                amount: amount_cents,
                at_us,
            })
            .await
    }

    /// The simulator's payment under an idempotency key.
    pub async fn sim_payment_by_key(&self, key: &str) -> StoreResult<Option<SimPayment>> {
        self.port.sim_payment_by_key(key).await
    }

    /// The simulator's payment with this id.
    pub async fn sim_payment(&self, payment_id: &str) -> StoreResult<Option<SimPayment>> {
        self.port.sim_payment(payment_id).await
    }

    /// Records a prepared payment unless one exists under its key, and
    /// returns the one that stands (the first writer's, when two race).
    pub async fn record_sim_payment(&self, payment: &SimPayment) -> StoreResult<SimPayment> {
        self.port.insert_sim_payment(payment).await?;
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
        self.port.update_sim_payment(from, to).await?;
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
        self.port
            .record_sim_payment_refund(&SimRefund {
                refund_id,
                idempotency_key,
                charge_id: &payment.payment_id,
                amount: amount_minor,
                at_us,
            })
            .await
    }

    /// The refunds of a simulator payment, `(refund_id, amount_minor)`,
    /// oldest first: an order's partial refunds.
    pub async fn sim_refunds_of(&self, payment_id: &str) -> StoreResult<Vec<(String, i64)>> {
        self.port.sim_refunds_of(payment_id).await
    }

    /// Every simulator charge and payment with its refund, oldest first.
    pub async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>> {
        self.port.sim_ledger().await
    }
}

/// A charge of the simulator by its idempotency key, read on `pool`.
async fn sim_charge(pool: &impl SqlPool, idempotency_key: &str) -> StoreResult<Option<SimCharge>> {
    pool.fetch_optional(SELECT_CHARGE, &[Param::Text(idempotency_key)])
        .await
}

/// A charge of the simulator by its id, read on `pool`.
async fn sim_charge_by_id(pool: &impl SqlPool, charge_id: &str) -> StoreResult<Option<SimCharge>> {
    pool.fetch_optional(SELECT_CHARGE_BY_ID, &[Param::Text(charge_id)])
        .await
}

/// Inserts a refund (`insert`, kept if none has its key) on `pool`, then
/// reads the refund id under its key (`select`).
async fn record_refund(
    pool: &impl SqlPool,
    (insert, select): (&str, &str),
    refund: &SimRefund<'_>,
) -> StoreResult<String> {
    pool.execute(insert, &refund.params()).await?;
    let row: Option<(String,)> = pool
        .fetch_optional(select, &[Param::Text(refund.idempotency_key)])
        .await?;
    row.map(|(id,)| id)
        .ok_or_else(|| StoreError::Corrupt(format!("refund {} vanished", refund.idempotency_key)))
}

/// Records a charge's refund on `pool`.
async fn record_sim_refund(pool: &impl SqlPool, refund: &SimRefund<'_>) -> StoreResult<String> {
    record_refund(pool, (INSERT_REFUND, SELECT_REFUND), refund).await
}

/// Records a payment's refund on `pool`.
async fn record_sim_payment_refund(
    pool: &impl SqlPool,
    refund: &SimRefund<'_>,
) -> StoreResult<String> {
    const INSERT: &str = "INSERT INTO sim_payment_refunds \
         (refund_id, idempotency_key, payment_id, amount_minor, created_at_us) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING";
    const SELECT: &str = "SELECT refund_id FROM sim_payment_refunds WHERE idempotency_key = $1";
    record_refund(pool, (INSERT, SELECT), refund).await
}

/// The payment whose `column` (`idempotency_key` or `payment_id`) is
/// `value`, read on `pool`.
async fn sim_payment_where(
    pool: &impl SqlPool,
    column: PaymentKey,
    value: &str,
) -> StoreResult<Option<SimPayment>> {
    let column = match column {
        PaymentKey::IdempotencyKey => "idempotency_key",
        PaymentKey::PaymentId => "payment_id",
    };
    pool.fetch_optional(
        &format!("SELECT {PAYMENT_COLUMNS} FROM sim_payments WHERE {column} = $1"),
        &[Param::Text(value)],
    )
    .await
}

/// A column a payment is found by.
#[derive(Debug, Clone, Copy)]
enum PaymentKey {
    IdempotencyKey,
    PaymentId,
}

/// Inserts a prepared payment on `pool` unless one has its key.
async fn insert_sim_payment(pool: &impl SqlPool, p: &SimPayment) -> StoreResult<()> {
    pool.execute(
        &format!(
            "INSERT INTO sim_payments ({PAYMENT_COLUMNS}) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
             ON CONFLICT (idempotency_key) DO NOTHING"
        ),
        &[
            Param::Text(&p.payment_id),
            Param::Text(&p.idempotency_key),
            Param::Text(&p.hold_id),
            Param::Int(p.amount_minor),
            Param::Text(&p.currency),
            Param::Text(&p.payment_method),
            Param::Text(&p.status),
            Param::MaybeText(p.decline_code.as_deref()),
            Param::MaybeInt(p.action_until_us),
            Param::Int(p.created_at_us),
            Param::Int(p.updated_at_us),
        ],
    )
    .await?;
    Ok(())
}

/// Moves a payment from `from` to `to`'s status on `pool` (compare-and-set).
async fn update_sim_payment(pool: &impl SqlPool, from: &str, to: &SimPayment) -> StoreResult<()> {
    pool.execute(
        "UPDATE sim_payments \
         SET status = $1, decline_code = $2, action_until_us = $3, updated_at_us = $4 \
         WHERE payment_id = $5 AND status = $6",
        &[
            Param::Text(&to.status),
            Param::MaybeText(to.decline_code.as_deref()),
            Param::MaybeInt(to.action_until_us),
            Param::Int(to.updated_at_us),
            Param::Text(&to.payment_id),
            Param::Text(from),
        ],
    )
    .await?;
    Ok(())
}

/// A payment's refunds, oldest first, read on `pool`.
async fn sim_refunds_of(pool: &impl SqlPool, payment_id: &str) -> StoreResult<Vec<(String, i64)>> {
    pool.fetch_all(
        "SELECT refund_id, amount_minor FROM sim_payment_refunds \
         WHERE payment_id = $1 ORDER BY created_at_us, refund_id",
        &[Param::Text(payment_id)],
    )
    .await
}

/// Both ledgers, read on `pool`.
async fn sim_ledger(pool: &impl SqlPool) -> StoreResult<Vec<LedgerCharge>> {
    pool.fetch_all(SELECT_LEDGER, &[]).await
}
