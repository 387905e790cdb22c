//! Webhook endpoints and deliveries on PostgreSQL: the shared statements
//! (`store/webhooks.rs`) on the command pool, and this dialect's claim.

use async_trait::async_trait;

use super::PgBackend;
use crate::store::webhooks::{
    self, AttemptRecord, Claim, ClaimedDelivery, DeliveryId, DeliveryRow, DeliveryStatus,
    EndpointId, EndpointRow, NewDelivery, RetryOutcome, WebhookOutboxPort,
};
use crate::store::StoreResult;

/// The claim skips rows another instance is claiming (`FOR UPDATE SKIP
/// LOCKED`): each due delivery goes to one claimant.
const CLAIM: &str = "UPDATE webhook_deliveries SET claim_token = $1, claimed_until_us = $2 \
     WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries \
         WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at_us <= $4 \
           AND claimed_until_us <= $4 \
         ORDER BY next_attempt_at_us, position LIMIT $5 FOR UPDATE SKIP LOCKED) \
     RETURNING delivery_id, webhook_id, event_type, body, round_attempts, retry_from_us, created_at_us";

#[async_trait]
impl WebhookOutboxPort for PgBackend {
    async fn insert_endpoint(&self, row: &EndpointRow) -> StoreResult<()> {
        webhooks::insert_endpoint(&self.pool, row).await
    }

    async fn endpoints(&self) -> StoreResult<Vec<EndpointRow>> {
        webhooks::endpoints(&self.pool).await
    }

    async fn endpoint(&self, id: EndpointId) -> StoreResult<Option<EndpointRow>> {
        webhooks::endpoint(&self.pool, id).await
    }

    async fn count_endpoints(&self) -> StoreResult<i64> {
        webhooks::count_endpoints(&self.pool).await
    }

    async fn delete_endpoint(&self, id: EndpointId) -> StoreResult<bool> {
        webhooks::delete_endpoint(&self.pool, id).await
    }

    async fn record_deliveries(
        &self,
        name: &str,
        from: i64,
        to: i64,
        deliveries: &[NewDelivery],
        now_us: i64,
    ) -> StoreResult<bool> {
        webhooks::record_deliveries(&self.pool, (name, from, to), deliveries, now_us).await
    }

    async fn endpoints_with_due_deliveries(&self, now_us: i64) -> StoreResult<Vec<EndpointId>> {
        webhooks::endpoints_with_due_deliveries(&self.pool, now_us).await
    }

    async fn claim_deliveries(&self, claim: &Claim<'_>) -> StoreResult<Vec<ClaimedDelivery>> {
        webhooks::claim_deliveries(&self.pool, CLAIM, claim).await
    }

    async fn finish_attempt(
        &self,
        delivery: DeliveryId,
        token: &str,
        record: &AttemptRecord,
    ) -> StoreResult<bool> {
        webhooks::finish_attempt(&self.pool, delivery, token, record).await
    }

    async fn deliveries(
        &self,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>> {
        webhooks::deliveries(&self.pool, endpoint, status, limit).await
    }

    async fn retry_delivery(
        &self,
        endpoint: EndpointId,
        delivery: DeliveryId,
        now_us: i64,
    ) -> StoreResult<RetryOutcome> {
        webhooks::retry_delivery(&self.pool, endpoint, delivery, now_us).await
    }

    async fn prune_deliveries(&self, before_us: i64, limit: i64) -> StoreResult<u64> {
        webhooks::prune_deliveries(&self.pool, before_us, limit).await
    }

    async fn oldest_pending_us(&self) -> StoreResult<Option<i64>> {
        webhooks::oldest_pending_us(&self.pool).await
    }
}
