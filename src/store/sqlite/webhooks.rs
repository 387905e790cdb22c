//! The webhook outbox's one statement of its own on SQLite: the claim.

use super::SqliteBackend;
use crate::store::webhooks::WebhookDialect;

impl WebhookDialect for SqliteBackend {
    /// SQLite has one writer: the statement is the claim.
    const CLAIM: &str = "UPDATE webhook_deliveries SET claim_token = $1, claimed_until_us = $2 \
         WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries \
             WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at_us <= $4 \
               AND claimed_until_us <= $4 \
             ORDER BY next_attempt_at_us, position LIMIT $5) \
         RETURNING delivery_id, webhook_id, event_type, body, round_attempts, retry_from_us, created_at_us";
}
