//! How SQLite implements the ports whose SQL both dialects share: reads on
//! the read pool, writes on the one writer, each through the concern's own
//! body. A port whose SQL is SQLite's own writes it here (or in a file of
//! this folder).

use async_trait::async_trait;
use domain::ids::{BookingId, BuyerId, HoldId, IdempotencyKey};
use projections::checkouts::CheckoutRow;

use super::SqliteBackend;
use crate::store::checkouts::{self, CheckoutKey, CheckoutsPort, WaitingCheckout};
use crate::store::database::{self, DatabasePort, StoreKind};
use crate::store::holds::{self, HoldRecord, HoldsPort};
use crate::store::idempotency::{self, IdempotencyEntry, IdempotencyPort};
use crate::store::ledger::{
    self, LedgerCharge, LedgerPort, PaymentKey, SimCharge, SimPayment, SimRefund,
};
use crate::store::sql::SqlPool;
use crate::store::ticket_keys::{self, TicketKeyRow, TicketKeysPort};
use crate::store::StoreResult;

#[async_trait]
impl HoldsPort for SqliteBackend {
    async fn hold(&self, hold_id: &HoldId) -> StoreResult<Option<HoldRecord>> {
        holds::read_hold(&self.read, hold_id).await
    }

    async fn expired_holds(&self, now_us: i64, limit: i64) -> StoreResult<Vec<HoldId>> {
        holds::read_expired(&self.read, now_us, limit).await
    }
}

#[async_trait]
impl IdempotencyPort for SqliteBackend {
    async fn entry(
        &self,
        buyer: &BuyerId,
        key: &IdempotencyKey,
    ) -> StoreResult<Option<IdempotencyEntry>> {
        idempotency::read_entry(&self.read, buyer, key).await
    }

    async fn prune(&self, cutoff_us: i64, limit: i64) -> StoreResult<u64> {
        idempotency::prune(&self.write, cutoff_us, limit).await
    }
}

#[async_trait]
impl TicketKeysPort for SqliteBackend {
    async fn all(&self) -> StoreResult<Vec<TicketKeyRow>> {
        ticket_keys::read_all(&self.read).await
    }

    async fn insert(&self, key: &TicketKeyRow) -> StoreResult<()> {
        ticket_keys::insert(&self.write, key).await
    }
}

#[async_trait]
impl CheckoutsPort for SqliteBackend {
    async fn checkout_by_booking(
        &self,
        booking_id: &BookingId,
    ) -> StoreResult<Option<CheckoutRow>> {
        let id = booking_id.to_string();
        checkouts::read_checkout(&self.read, CheckoutKey::Booking, &id).await
    }

    async fn checkout_by_hold(&self, hold_id: &HoldId) -> StoreResult<Option<CheckoutRow>> {
        let id = hold_id.to_string();
        checkouts::read_checkout(&self.read, CheckoutKey::Hold, &id).await
    }

    async fn pending_checkouts(&self, limit: i64) -> StoreResult<Vec<HoldId>> {
        checkouts::read_pending(&self.read, limit).await
    }

    async fn waiting_checkouts(
        &self,
        after: Option<&WaitingCheckout>,
        limit: i64,
    ) -> StoreResult<Vec<WaitingCheckout>> {
        checkouts::read_waiting(&self.read, after, limit).await
    }
}

#[async_trait]
impl DatabasePort for SqliteBackend {
    fn kind(&self) -> StoreKind {
        StoreKind::Sqlite
    }

    fn database_host(&self) -> Option<String> {
        Some("sqlite".to_owned())
    }

    fn database_hosts(&self) -> Vec<String> {
        Vec::new()
    }

    async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.write)
            .await?;
        Ok(())
    }

    async fn pending_migrations(&self) -> StoreResult<usize> {
        database::pending(&sqlx::migrate!("./migrations/sqlite"), &self.read).await
    }

    async fn ping(&self) -> StoreResult<()> {
        database::ping(&self.read).await
    }

    async fn execute_raw(&self, sql: &str) -> StoreResult<u64> {
        self.write.execute(sql, &[]).await
    }
}

#[async_trait]
impl LedgerPort for SqliteBackend {
    async fn sim_charge(&self, idempotency_key: &str) -> StoreResult<Option<SimCharge>> {
        ledger::sim_charge(&self.read, idempotency_key).await
    }

    async fn sim_charge_by_id(&self, charge_id: &str) -> StoreResult<Option<SimCharge>> {
        ledger::sim_charge_by_id(&self.read, charge_id).await
    }

    async fn record_sim_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String> {
        ledger::record_sim_refund(&self.write, refund).await
    }

    async fn sim_payment_by_key(&self, key: &str) -> StoreResult<Option<SimPayment>> {
        ledger::sim_payment_where(&self.read, PaymentKey::IdempotencyKey, key).await
    }

    async fn sim_payment(&self, payment_id: &str) -> StoreResult<Option<SimPayment>> {
        ledger::sim_payment_where(&self.read, PaymentKey::PaymentId, payment_id).await
    }

    async fn insert_sim_payment(&self, payment: &SimPayment) -> StoreResult<()> {
        ledger::insert_sim_payment(&self.write, payment).await
    }

    async fn update_sim_payment(&self, from: &str, to: &SimPayment) -> StoreResult<()> {
        ledger::update_sim_payment(&self.write, from, to).await
    }

    async fn record_sim_payment_refund(&self, refund: &SimRefund<'_>) -> StoreResult<String> {
        ledger::record_sim_payment_refund(&self.write, refund).await
    }

    async fn sim_refunds_of(&self, payment_id: &str) -> StoreResult<Vec<(String, i64)>> {
        ledger::sim_refunds_of(&self.read, payment_id).await
    }

    async fn sim_ledger(&self) -> StoreResult<Vec<LedgerCharge>> {
        ledger::sim_ledger(&self.read).await
    }
}
