//! Webhook endpoints and deliveries: the two tables behind `webhooks/`.
//!
//! A delivery row is recorded by the dispatcher in the same transaction
//! that moves its checkpoint (compare-and-set, as the projector's), and is
//! then claimed for an attempt with a lease (`claim_token`,
//! `claimed_until_us`): on PostgreSQL the claim skips rows another instance
//! is claiming (`FOR UPDATE SKIP LOCKED`), and a claim is honoured until its
//! lease ends, so each delivery is attempted by one instance at a time. The
//! outcome of an attempt is written only by the holder of the claim.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;
use uuid::Uuid;

use super::{on_store, retry_read, Backend, StoreError, StoreResult, WebhookOutbox};

/// An endpoint's id (`webhook_id` in the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct EndpointId(pub Uuid);

impl fmt::Display for EndpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A delivery's id: derived from its message id (uuid v5), so recording the
/// same delivery twice names the same row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct DeliveryId(pub Uuid);

impl DeliveryId {
    pub fn of_message(webhook_id: &str) -> Self {
        DeliveryId(Uuid::new_v5(&Uuid::NAMESPACE_OID, webhook_id.as_bytes()))
    }
}

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The event types an endpoint can ask for (docs/api.md, "Webhooks").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WebhookEventType {
    BookingConfirmed,
    BookingCancelled,
    RefundIssued,
    HoldExpired,
    OrderConfirmed,
    OrderCancelled,
    WaitlistOffered,
    TicketTransferred,
    TicketRevoked,
    TicketCheckedIn,
}

impl WebhookEventType {
    pub const ALL: [WebhookEventType; 10] = [
        WebhookEventType::BookingConfirmed,
        WebhookEventType::BookingCancelled,
        WebhookEventType::RefundIssued,
        WebhookEventType::HoldExpired,
        WebhookEventType::OrderConfirmed,
        WebhookEventType::OrderCancelled,
        WebhookEventType::WaitlistOffered,
        WebhookEventType::TicketTransferred,
        WebhookEventType::TicketRevoked,
        WebhookEventType::TicketCheckedIn,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEventType::BookingConfirmed => "booking.confirmed",
            WebhookEventType::BookingCancelled => "booking.cancelled",
            WebhookEventType::RefundIssued => "refund.issued",
            WebhookEventType::HoldExpired => "hold.expired",
            WebhookEventType::OrderConfirmed => "order.confirmed",
            WebhookEventType::OrderCancelled => "order.cancelled",
            WebhookEventType::WaitlistOffered => "waitlist.offered",
            WebhookEventType::TicketTransferred => "ticket.transferred",
            WebhookEventType::TicketRevoked => "ticket.revoked",
            WebhookEventType::TicketCheckedIn => "ticket.checked_in",
        }
    }
}

impl FromStr for WebhookEventType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| format!("unknown event type {s:?}"))
    }
}

impl fmt::Display for WebhookEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    Pending,
    Delivered,
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

impl FromStr for DeliveryStatus {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(DeliveryStatus::Pending),
            "delivered" => Ok(DeliveryStatus::Delivered),
            "failed" => Ok(DeliveryStatus::Failed),
            other => Err(format!("unknown delivery status {other:?}")),
        }
    }
}

/// A row of `webhook_endpoints`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointRow {
    pub endpoint_id: EndpointId,
    pub url: String,
    pub events: Vec<WebhookEventType>,
    /// `whsec_<base64>`, stored as given: signing needs the key itself.
    pub secret: String,
    /// Events at or below this position are not delivered to it.
    pub after_position: i64,
    pub created_at_us: i64,
}

impl EndpointRow {
    pub fn wants(&self, event_type: WebhookEventType, position: i64) -> bool {
        position > self.after_position && self.events.contains(&event_type)
    }
}

#[derive(sqlx::FromRow)]
struct EndpointColumns {
    endpoint_id: String,
    url: String,
    events: String,
    secret: String,
    after_position: i64,
    created_at_us: i64,
}

const ENDPOINT_COLUMNS: &str = "endpoint_id, url, events, secret, after_position, created_at_us";

impl TryFrom<EndpointColumns> for EndpointRow {
    type Error = StoreError;

    fn try_from(c: EndpointColumns) -> StoreResult<Self> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("webhook_endpoints.{what}"));
        let names: Vec<String> = serde_json::from_str(&c.events).map_err(|_| corrupt("events"))?;
        let events = names
            .iter()
            .map(|n| n.parse())
            .collect::<Result<_, _>>()
            .map_err(|_| corrupt("events"))?;
        Ok(EndpointRow {
            endpoint_id: EndpointId(
                Uuid::parse_str(&c.endpoint_id).map_err(|_| corrupt("endpoint_id"))?,
            ),
            url: c.url,
            events,
            secret: c.secret,
            after_position: c.after_position,
            created_at_us: c.created_at_us,
        })
    }
}

/// A delivery the dispatcher records (status pending, due at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDelivery {
    pub delivery_id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub webhook_id: String,
    pub event_type: WebhookEventType,
    pub subject: String,
    pub position: i64,
    pub body: String,
}

/// A row of `webhook_deliveries` as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub delivery_id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub webhook_id: String,
    pub event_type: WebhookEventType,
    pub position: i64,
    pub status: DeliveryStatus,
    pub attempts: i32,
    pub next_attempt_at_us: i64,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub created_at_us: i64,
    pub updated_at_us: i64,
}

#[derive(sqlx::FromRow)]
struct DeliveryColumns {
    delivery_id: String,
    endpoint_id: String,
    webhook_id: String,
    event_type: String,
    position: i64,
    status: String,
    attempts: i32,
    next_attempt_at_us: i64,
    last_status: Option<i32>,
    last_error: Option<String>,
    created_at_us: i64,
    updated_at_us: i64,
}

const DELIVERY_COLUMNS: &str = "delivery_id, endpoint_id, webhook_id, event_type, position, \
     status, attempts, next_attempt_at_us, last_status, last_error, created_at_us, updated_at_us";

fn parse_uuid(column: &str, value: &str) -> StoreResult<Uuid> {
    Uuid::parse_str(value).map_err(|_| StoreError::Corrupt(format!("{column}: {value:?}")))
}

impl TryFrom<DeliveryColumns> for DeliveryRow {
    type Error = StoreError;

    fn try_from(c: DeliveryColumns) -> StoreResult<Self> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("webhook_deliveries.{what}"));
        Ok(DeliveryRow {
            delivery_id: DeliveryId(parse_uuid(
                "webhook_deliveries.delivery_id",
                &c.delivery_id,
            )?),
            endpoint_id: EndpointId(parse_uuid(
                "webhook_deliveries.endpoint_id",
                &c.endpoint_id,
            )?),
            webhook_id: c.webhook_id,
            event_type: c.event_type.parse().map_err(|_| corrupt("event_type"))?,
            position: c.position,
            status: c.status.parse().map_err(|_| corrupt("status"))?,
            attempts: c.attempts,
            next_attempt_at_us: c.next_attempt_at_us,
            last_status: c.last_status,
            last_error: c.last_error,
            created_at_us: c.created_at_us,
            updated_at_us: c.updated_at_us,
        })
    }
}

/// A delivery claimed for one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    pub delivery_id: DeliveryId,
    pub webhook_id: String,
    pub event_type: WebhookEventType,
    pub body: String,
    /// Attempts since the retry window began, before this one.
    pub round_attempts: i32,
    pub retry_from_us: i64,
    pub created_at_us: i64,
}

#[derive(sqlx::FromRow)]
struct ClaimedColumns {
    delivery_id: String,
    webhook_id: String,
    event_type: String,
    body: String,
    round_attempts: i32,
    retry_from_us: i64,
    created_at_us: i64,
}

impl TryFrom<ClaimedColumns> for ClaimedDelivery {
    type Error = StoreError;

    fn try_from(c: ClaimedColumns) -> StoreResult<Self> {
        Ok(ClaimedDelivery {
            delivery_id: DeliveryId(parse_uuid(
                "webhook_deliveries.delivery_id",
                &c.delivery_id,
            )?),
            webhook_id: c.webhook_id,
            event_type: c
                .event_type
                .parse()
                .map_err(|_| StoreError::Corrupt("webhook_deliveries.event_type".into()))?,
            body: c.body,
            round_attempts: c.round_attempts,
            retry_from_us: c.retry_from_us,
            created_at_us: c.created_at_us,
        })
    }
}

/// What an attempt decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptVerdict {
    Delivered,
    /// Not delivered; try again at this instant.
    RetryAt(i64),
    /// Not delivered, and the retry window is over.
    Failed,
}

/// The outcome of one attempt, as the holder of its claim writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub verdict: AttemptVerdict,
    /// The receiver's HTTP status, if it answered.
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub at_us: i64,
}

/// What `retry_webhook_delivery` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryOutcome {
    /// Pending again, due now.
    Reset(DeliveryRow),
    NotFound,
}

const CLAIM_PG: &str = "UPDATE webhook_deliveries SET claim_token = $1, claimed_until_us = $2 \
     WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries \
         WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at_us <= $4 \
           AND claimed_until_us <= $4 \
         ORDER BY next_attempt_at_us, position LIMIT $5 FOR UPDATE SKIP LOCKED) \
     RETURNING delivery_id, webhook_id, event_type, body, round_attempts, retry_from_us, created_at_us";
/// SQLite has one writer: the statement is the claim.
const CLAIM_SQLITE: &str = "UPDATE webhook_deliveries SET claim_token = $1, claimed_until_us = $2 \
     WHERE delivery_id IN (SELECT delivery_id FROM webhook_deliveries \
         WHERE endpoint_id = $3 AND status = 'pending' AND next_attempt_at_us <= $4 \
           AND claimed_until_us <= $4 \
         ORDER BY next_attempt_at_us, position LIMIT $5) \
     RETURNING delivery_id, webhook_id, event_type, body, round_attempts, retry_from_us, created_at_us";

const INSERT_DELIVERY: &str = "INSERT INTO webhook_deliveries \
     (delivery_id, endpoint_id, webhook_id, event_type, subject, position, body, status, \
      attempts, round_attempts, retry_from_us, next_attempt_at_us, claimed_until_us, \
      created_at_us, updated_at_us) \
     SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', 0, 0, $8, $8, 0, $8, $8 \
     WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE endpoint_id = $2) \
     ON CONFLICT DO NOTHING";

impl WebhookOutbox {
    pub async fn insert_webhook_endpoint(&self, row: &EndpointRow) -> StoreResult<()> {
        let events: Vec<&str> = row.events.iter().map(|e| e.as_str()).collect();
        let events = serde_json::to_string(&events)
            .map_err(|e| StoreError::Corrupt(format!("events: {e}")))?;
        on_store!(self, write pool => {
            sqlx::query(&format!(
                "INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"
            ))
            .bind(row.endpoint_id.to_string())
            .bind(&row.url)
            .bind(events)
            .bind(&row.secret)
            .bind(row.after_position)
            .bind(row.created_at_us)
            .execute(pool)
            .await
            .map_err(StoreError::classify)?;
        });
        Ok(())
    }

    /// Every endpoint, oldest first.
    pub async fn webhook_endpoints(&self) -> StoreResult<Vec<EndpointRow>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY created_at_us, endpoint_id"
        );
        let sql = &sql;
        let rows: Vec<EndpointColumns> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as::<_, EndpointColumns>(sql)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        rows.into_iter().map(EndpointRow::try_from).collect()
    }

    pub async fn webhook_endpoint(&self, id: EndpointId) -> StoreResult<Option<EndpointRow>> {
        let sql =
            format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE endpoint_id = $1");
        let (sql, id) = (&sql, id.to_string());
        let id = &id;
        let row: Option<EndpointColumns> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as::<_, EndpointColumns>(sql)
                    .bind(id)
                    .fetch_optional(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        row.map(EndpointRow::try_from).transpose()
    }

    /// How many endpoints there are.
    pub async fn count_webhook_endpoints(&self) -> StoreResult<i64> {
        on_store!(self, read pool => {
            sqlx::query_scalar("SELECT COUNT(*) FROM webhook_endpoints")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)
        })
    }

    /// Deletes an endpoint and its deliveries; false if there was none.
    pub async fn delete_webhook_endpoint(&self, id: EndpointId) -> StoreResult<bool> {
        let id = id.to_string();
        on_store!(self, write pool => {
            let mut tx = pool.begin().await.map_err(StoreError::classify)?;
            sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::classify)?;
            let deleted = sqlx::query("DELETE FROM webhook_endpoints WHERE endpoint_id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(StoreError::classify)?
                .rows_affected();
            tx.commit().await.map_err(StoreError::classify)?;
            Ok(deleted > 0)
        })
    }

    /// Moves checkpoint `name` from `from` to `to` and records `deliveries`
    /// in one transaction. False (nothing written) if the checkpoint was not
    /// at `from`: another instance recorded this stretch of the log. A
    /// delivery recorded before (same subject and endpoint) is left as it
    /// is, and one for an endpoint deleted meanwhile is not recorded.
    pub async fn record_webhook_deliveries(
        &self,
        name: &str,
        from: i64,
        to: i64,
        deliveries: &[NewDelivery],
        now_us: i64,
    ) -> StoreResult<bool> {
        on_store!(self, write pool => {
            let mut tx = pool.begin().await.map_err(StoreError::classify)?;
            let moved = sqlx::query(
                "UPDATE projector_checkpoints SET position = $1, updated_at_us = $2 \
                 WHERE name = $3 AND position = $4",
            )
            .bind(to)
            .bind(now_us)
            .bind(name)
            .bind(from)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::classify)?
            .rows_affected();
            if moved != 1 {
                tx.rollback().await.map_err(StoreError::classify)?;
                return Ok(false);
            }
            for d in deliveries {
                sqlx::query(INSERT_DELIVERY)
                    .bind(d.delivery_id.to_string())
                    .bind(d.endpoint_id.to_string())
                    .bind(&d.webhook_id)
                    .bind(d.event_type.as_str())
                    .bind(&d.subject)
                    .bind(d.position)
                    .bind(&d.body)
                    .bind(now_us)
                    .execute(&mut *tx)
                    .await
                    .map_err(StoreError::classify)?;
            }
            tx.commit().await.map_err(StoreError::classify)?;
            Ok(true)
        })
    }

    /// Endpoints with a delivery due at `now_us` that nobody holds: one
    /// probe of the due index per endpoint, however large a dead
    /// endpoint's backlog has grown.
    pub async fn endpoints_with_due_deliveries(&self, now_us: i64) -> StoreResult<Vec<EndpointId>> {
        let ids: Vec<String> = on_store!(self, read pool => {
            sqlx::query_scalar(
                "SELECT e.endpoint_id FROM webhook_endpoints e WHERE EXISTS \
                 (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.endpoint_id \
                  AND d.status = 'pending' AND d.next_attempt_at_us <= $1 AND d.claimed_until_us <= $1)",
            )
            .bind(now_us)
            .fetch_all(pool)
            .await
            .map_err(StoreError::classify)?
        });
        ids.iter()
            .map(|id| parse_uuid("webhook_deliveries.endpoint_id", id).map(EndpointId))
            .collect()
    }

    /// Claims up to `limit` due deliveries of one endpoint until
    /// `lease_until_us` under `token`, oldest due first.
    pub async fn claim_webhook_deliveries(
        &self,
        endpoint: EndpointId,
        now_us: i64,
        lease_until_us: i64,
        token: &str,
        limit: i64,
    ) -> StoreResult<Vec<ClaimedDelivery>> {
        let sql = match self.backend() {
            Backend::Postgres(_) => CLAIM_PG,
            Backend::Sqlite(_) => CLAIM_SQLITE,
        };
        let rows: Vec<ClaimedColumns> = on_store!(self, write pool => {
            sqlx::query_as::<_, ClaimedColumns>(sql)
                .bind(token)
                .bind(lease_until_us)
                .bind(endpoint.to_string())
                .bind(now_us)
                .bind(limit)
                .fetch_all(pool)
                .await
                .map_err(StoreError::classify)?
        });
        rows.into_iter().map(ClaimedDelivery::try_from).collect()
    }

    /// Writes an attempt's outcome if `token` still holds the claim (a
    /// manual retry or a deletion meanwhile wins); true if it was written.
    pub async fn finish_webhook_attempt(
        &self,
        delivery: DeliveryId,
        token: &str,
        record: &AttemptRecord,
    ) -> StoreResult<bool> {
        let (status, next_at) = match record.verdict {
            AttemptVerdict::Delivered => (DeliveryStatus::Delivered, record.at_us),
            AttemptVerdict::RetryAt(at) => (DeliveryStatus::Pending, at),
            AttemptVerdict::Failed => (DeliveryStatus::Failed, record.at_us),
        };
        let written = on_store!(self, write pool => {
            sqlx::query(
                "UPDATE webhook_deliveries SET status = $1, next_attempt_at_us = $2, \
                     attempts = attempts + 1, round_attempts = round_attempts + 1, \
                     last_status = $3, last_error = $4, claim_token = NULL, claimed_until_us = 0, \
                     updated_at_us = $5 \
                 WHERE delivery_id = $6 AND claim_token = $7",
            )
            .bind(status.as_str())
            .bind(next_at)
            .bind(record.last_status)
            .bind(record.last_error.as_deref())
            .bind(record.at_us)
            .bind(delivery.to_string())
            .bind(token)
            .execute(pool)
            .await
            .map_err(StoreError::classify)?
            .rows_affected()
        });
        Ok(written == 1)
    }

    /// An endpoint's deliveries, newest first, of one status or all.
    pub async fn webhook_deliveries(
        &self,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
             WHERE endpoint_id = $1 AND (CAST($2 AS TEXT) IS NULL OR status = CAST($2 AS TEXT)) \
             ORDER BY position DESC, webhook_id DESC LIMIT $3"
        );
        let (sql, endpoint) = (&sql, endpoint.to_string());
        let endpoint = &endpoint;
        let status = status.map(DeliveryStatus::as_str);
        let rows: Vec<DeliveryColumns> = retry_read(move || async move {
            on_store!(self, read pool => {
                sqlx::query_as::<_, DeliveryColumns>(sql)
                    .bind(endpoint)
                    .bind(status)
                    .bind(limit)
                    .fetch_all(pool)
                    .await
                    .map_err(StoreError::classify)
            })
        })
        .await?;
        rows.into_iter().map(DeliveryRow::try_from).collect()
    }

    /// Makes a delivery pending again, due now, with a new retry window;
    /// any claim on it is void (its holder's outcome is not written).
    pub async fn retry_webhook_delivery(
        &self,
        endpoint: EndpointId,
        delivery: DeliveryId,
        now_us: i64,
    ) -> StoreResult<RetryOutcome> {
        let sql = format!(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at_us = $1, \
                 retry_from_us = $1, round_attempts = 0, claim_token = NULL, claimed_until_us = 0, \
                 updated_at_us = $1 \
             WHERE endpoint_id = $2 AND delivery_id = $3 RETURNING {DELIVERY_COLUMNS}"
        );
        let row: Option<DeliveryColumns> = on_store!(self, write pool => {
            sqlx::query_as::<_, DeliveryColumns>(&sql)
                .bind(now_us)
                .bind(endpoint.to_string())
                .bind(delivery.to_string())
                .fetch_optional(pool)
                .await
                .map_err(StoreError::classify)?
        });
        match row {
            Some(row) => Ok(RetryOutcome::Reset(row.try_into()?)),
            None => Ok(RetryOutcome::NotFound),
        }
    }

    /// Deletes up to `limit` delivered or failed deliveries last changed
    /// before `before_us`; returns how many.
    pub async fn prune_webhook_deliveries(&self, before_us: i64, limit: i64) -> StoreResult<u64> {
        on_store!(self, write pool => {
            sqlx::query(
                "DELETE FROM webhook_deliveries WHERE delivery_id IN \
                 (SELECT delivery_id FROM webhook_deliveries \
                  WHERE status <> 'pending' AND updated_at_us < $1 LIMIT $2)",
            )
            .bind(before_us)
            .bind(limit)
            .execute(pool)
            .await
            .map_err(StoreError::classify)
            .map(|done| done.rows_affected())
        })
    }

    /// When the oldest pending delivery began waiting (recorded, or
    /// retried by hand), if any is pending.
    pub async fn oldest_pending_webhook_us(&self) -> StoreResult<Option<i64>> {
        on_store!(self, read pool => {
            sqlx::query_scalar("SELECT MIN(retry_from_us) FROM webhook_deliveries WHERE status = 'pending'")
                .fetch_one(pool)
                .await
                .map_err(StoreError::classify)
        })
    }
}
