//! The webhook outbox's one statement of its own on PostgreSQL: the claim.

use super::PgBackend;
use crate::store::webhooks::WebhookDialect;

impl WebhookDialect for PgBackend {
    /// The claim skips rows another instance is claiming (`FOR UPDATE SKIP
    /// LOCKED`): each due delivery goes to one claimant.
    const CLAIM: &str = "UPDATE webhook_deliveries SET claim_token = $1, claimed_until_us = $2 \
         WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries \
             WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at_us <= $4 \
               AND claimed_until_us <= $4 \
             ORDER BY next_attempt_at_us, position LIMIT $5 FOR UPDATE SKIP LOCKED) \
         RETURNING delivery_id, webhook_id, event_type, body, round_attempts, retry_from_us, created_at_us";
}
