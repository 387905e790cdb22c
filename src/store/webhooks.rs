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

use async_trait::async_trait;
use serde::Serialize;
use uuid::Uuid;

use super::batch::CheckpointMove;
use super::log::LogCursor;
use super::sql::{Param, Pools, SqlPool, SqlTx};
use super::{handle, retry_read, StoreError, StoreResult};

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
    /// What it is not owed: each show's events up to its head when the
    /// endpoint was made.
    pub after: LogCursor,
    pub created_at_us: i64,
}

impl EndpointRow {
    /// Whether it is owed `event_type` from the event at `position` of `show`.
    pub fn wants(&self, event_type: WebhookEventType, show: &str, position: i64) -> bool {
        !self.after.has_read(show, position) && self.events.contains(&event_type)
    }
}

#[derive(sqlx::FromRow)]
struct EndpointColumns {
    endpoint_id: String,
    url: String,
    events: String,
    secret: String,
    after_shows: String,
    created_at_us: i64,
}

/// `after_position` is the one position an endpoint was made at before
/// positions were per show (migration 0025, which turned it into
/// `after_shows`); written 0, read by nothing.
const ENDPOINT_COLUMNS: &str =
    "endpoint_id, url, events, secret, after_shows, created_at_us, after_position";

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
            after: LogCursor::from_json(&c.after_shows)?,
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

const INSERT_DELIVERY: &str = "INSERT INTO webhook_deliveries \
     (delivery_id, endpoint_id, webhook_id, event_type, subject, position, body, status, \
      attempts, round_attempts, retry_from_us, next_attempt_at_us, claimed_until_us, \
      created_at_us, updated_at_us) \
     SELECT $1, $2, $3, $4, $5, $6, $7, 'pending', 0, 0, $8, $8, 0, $8, $8 \
     WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE endpoint_id = $2) \
     ON CONFLICT DO NOTHING";

/// Webhook endpoints and deliveries. One call is one statement or one
/// transaction. Every statement is shared but the claim, which only
/// PostgreSQL must make skip rows another instance is claiming
/// ([`WebhookDialect`]): implemented once, for every backend's [`Pools`].
#[async_trait]
pub trait WebhookOutboxPort: Send + Sync {
    async fn insert_endpoint(&self, row: &EndpointRow) -> StoreResult<()>;

    /// Every endpoint, oldest first.
    async fn endpoints(&self) -> StoreResult<Vec<EndpointRow>>;

    async fn endpoint(&self, id: EndpointId) -> StoreResult<Option<EndpointRow>>;

    /// How many endpoints there are.
    async fn count_endpoints(&self) -> StoreResult<i64>;

    /// Deletes an endpoint and its deliveries; false if there was none.
    async fn delete_endpoint(&self, id: EndpointId) -> StoreResult<bool>;

    /// See [`WebhookOutbox::record_webhook_deliveries`].
    async fn record_deliveries(
        &self,
        checkpoint: &CheckpointMove,
        deliveries: &[NewDelivery],
        now_us: i64,
    ) -> StoreResult<bool>;

    /// Endpoints with a delivery due at `now_us` that nobody holds.
    async fn endpoints_with_due_deliveries(&self, now_us: i64) -> StoreResult<Vec<EndpointId>>;

    /// Claims up to `limit` due deliveries of one endpoint until
    /// `lease_until_us` under `token`, oldest due first.
    async fn claim_deliveries(&self, claim: &Claim<'_>) -> StoreResult<Vec<ClaimedDelivery>>;

    /// Writes an attempt's outcome if `token` still holds the claim; true
    /// if it was written.
    async fn finish_attempt(
        &self,
        delivery: DeliveryId,
        token: &str,
        record: &AttemptRecord,
    ) -> StoreResult<bool>;

    /// An endpoint's deliveries, newest first, of one status or all.
    async fn deliveries(
        &self,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>>;

    /// See [`WebhookOutbox::retry_webhook_delivery`].
    async fn retry_delivery(
        &self,
        endpoint: EndpointId,
        delivery: DeliveryId,
        now_us: i64,
    ) -> StoreResult<RetryOutcome>;

    /// Deletes up to `limit` delivered or failed deliveries last changed
    /// before `before_us`; returns how many.
    async fn prune_deliveries(&self, before_us: i64, limit: i64) -> StoreResult<u64>;

    /// When the oldest pending delivery began waiting, if any is pending.
    async fn oldest_pending_us(&self) -> StoreResult<Option<i64>>;
}

/// The one statement of the outbox the dialects write apart: the claim of
/// up to `$5` due deliveries of endpoint `$3` at `$4`, until `$2` under
/// token `$1`, returning the claimed rows (`postgres/webhooks.rs`,
/// `sqlite/webhooks.rs`).
pub trait WebhookDialect {
    const CLAIM: &'static str;
}

#[async_trait]
impl<B: Pools + WebhookDialect> WebhookOutboxPort for B {
    async fn insert_endpoint(&self, row: &EndpointRow) -> StoreResult<()> {
        insert_endpoint(self.writes(), row).await
    }

    async fn endpoints(&self) -> StoreResult<Vec<EndpointRow>> {
        endpoints(self.reads()).await
    }

    async fn endpoint(&self, id: EndpointId) -> StoreResult<Option<EndpointRow>> {
        endpoint(self.reads(), id).await
    }

    async fn count_endpoints(&self) -> StoreResult<i64> {
        count_endpoints(self.reads()).await
    }

    async fn delete_endpoint(&self, id: EndpointId) -> StoreResult<bool> {
        delete_endpoint(self.writes(), id).await
    }

    async fn record_deliveries(
        &self,
        checkpoint: &CheckpointMove,
        deliveries: &[NewDelivery],
        now_us: i64,
    ) -> StoreResult<bool> {
        record_deliveries(self.writes(), checkpoint, deliveries, now_us).await
    }

    async fn endpoints_with_due_deliveries(&self, now_us: i64) -> StoreResult<Vec<EndpointId>> {
        endpoints_with_due_deliveries(self.reads(), now_us).await
    }

    async fn claim_deliveries(&self, claim: &Claim<'_>) -> StoreResult<Vec<ClaimedDelivery>> {
        claim_deliveries(self.writes(), Self::CLAIM, claim).await
    }

    async fn finish_attempt(
        &self,
        delivery: DeliveryId,
        token: &str,
        record: &AttemptRecord,
    ) -> StoreResult<bool> {
        finish_attempt(self.writes(), delivery, token, record).await
    }

    async fn deliveries(
        &self,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>> {
        deliveries(self.reads(), endpoint, status, limit).await
    }

    async fn retry_delivery(
        &self,
        endpoint: EndpointId,
        delivery: DeliveryId,
        now_us: i64,
    ) -> StoreResult<RetryOutcome> {
        retry_delivery(self.writes(), endpoint, delivery, now_us).await
    }

    async fn prune_deliveries(&self, before_us: i64, limit: i64) -> StoreResult<u64> {
        prune_deliveries(self.writes(), before_us, limit).await
    }

    async fn oldest_pending_us(&self) -> StoreResult<Option<i64>> {
        oldest_pending_us(self.reads()).await
    }
}

handle!(
    /// Webhook endpoints, deliveries and their claims: [`WebhookOutboxPort`].
    WebhookOutbox: WebhookOutboxPort
);

/// A claim on an endpoint's due deliveries: see
/// [`WebhookOutboxPort::claim_deliveries`].
#[derive(Debug, Clone, Copy)]
pub struct Claim<'a> {
    pub endpoint: EndpointId,
    pub now_us: i64,
    pub lease_until_us: i64,
    pub token: &'a str,
    pub limit: i64,
}

impl WebhookOutbox {
    pub async fn insert_webhook_endpoint(&self, row: &EndpointRow) -> StoreResult<()> {
        self.port.insert_endpoint(row).await
    }

    /// Every endpoint, oldest first.
    pub async fn webhook_endpoints(&self) -> StoreResult<Vec<EndpointRow>> {
        retry_read(move || self.port.endpoints()).await
    }

    pub async fn webhook_endpoint(&self, id: EndpointId) -> StoreResult<Option<EndpointRow>> {
        retry_read(move || self.port.endpoint(id)).await
    }

    /// How many endpoints there are.
    pub async fn count_webhook_endpoints(&self) -> StoreResult<i64> {
        self.port.count_endpoints().await
    }

    /// Deletes an endpoint and its deliveries; false if there was none.
    pub async fn delete_webhook_endpoint(&self, id: EndpointId) -> StoreResult<bool> {
        self.port.delete_endpoint(id).await
    }

    /// Moves the checkpoint as `checkpoint` says and records `deliveries`
    /// in one transaction. False (nothing written) if the checkpoint had
    /// moved: another instance recorded this stretch of the log. A
    /// delivery recorded before (same subject and endpoint) is left as it
    /// is, and one for an endpoint deleted meanwhile is not recorded.
    pub async fn record_webhook_deliveries(
        &self,
        checkpoint: &CheckpointMove,
        deliveries: &[NewDelivery],
        now_us: i64,
    ) -> StoreResult<bool> {
        self.port
            .record_deliveries(checkpoint, deliveries, now_us)
            .await
    }

    /// Endpoints with a delivery due at `now_us` that nobody holds: one
    /// probe of the due index per endpoint, however large a dead
    /// endpoint's backlog has grown.
    pub async fn endpoints_with_due_deliveries(&self, now_us: i64) -> StoreResult<Vec<EndpointId>> {
        self.port.endpoints_with_due_deliveries(now_us).await
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
        let claim = Claim {
            endpoint,
            now_us,
            lease_until_us,
            token,
            limit,
        };
        self.port.claim_deliveries(&claim).await
    }

    /// Writes an attempt's outcome if `token` still holds the claim (a
    /// manual retry or a deletion meanwhile wins); true if it was written.
    pub async fn finish_webhook_attempt(
        &self,
        delivery: DeliveryId,
        token: &str,
        record: &AttemptRecord,
    ) -> StoreResult<bool> {
        self.port.finish_attempt(delivery, token, record).await
    }

    /// An endpoint's deliveries, newest first, of one status or all.
    pub async fn webhook_deliveries(
        &self,
        endpoint: EndpointId,
        status: Option<DeliveryStatus>,
        limit: i64,
    ) -> StoreResult<Vec<DeliveryRow>> {
        retry_read(move || self.port.deliveries(endpoint, status, limit)).await
    }

    /// Makes a delivery pending again, due now, with a new retry window;
    /// any claim on it is void (its holder's outcome is not written).
    pub async fn retry_webhook_delivery(
        &self,
        endpoint: EndpointId,
        delivery: DeliveryId,
        now_us: i64,
    ) -> StoreResult<RetryOutcome> {
        self.port.retry_delivery(endpoint, delivery, now_us).await
    }

    /// Deletes up to `limit` delivered or failed deliveries last changed
    /// before `before_us`; returns how many.
    pub async fn prune_webhook_deliveries(&self, before_us: i64, limit: i64) -> StoreResult<u64> {
        self.port.prune_deliveries(before_us, limit).await
    }

    /// When the oldest pending delivery began waiting (recorded, or
    /// retried by hand), if any is pending.
    pub async fn oldest_pending_webhook_us(&self) -> StoreResult<Option<i64>> {
        self.port.oldest_pending_us().await
    }
}

async fn insert_endpoint(pool: &impl SqlPool, row: &EndpointRow) -> StoreResult<()> {
    let events: Vec<&str> = row.events.iter().map(|e| e.as_str()).collect();
    let events =
        serde_json::to_string(&events).map_err(|e| StoreError::Corrupt(format!("events: {e}")))?;
    let id = row.endpoint_id.to_string();
    pool.execute(
        &format!(
            "INSERT INTO webhook_endpoints ({ENDPOINT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, 0)"
        ),
        &[
            Param::Text(&id),
            Param::Text(&row.url),
            Param::Text(&events),
            Param::Text(&row.secret),
            Param::Text(&row.after.to_json()),
            Param::Int(row.created_at_us),
        ],
    )
    .await?;
    Ok(())
}

async fn endpoints(pool: &impl SqlPool) -> StoreResult<Vec<EndpointRow>> {
    let rows: Vec<EndpointColumns> = pool
        .fetch_all(
            &format!(
                "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints \
                 ORDER BY created_at_us, endpoint_id"
            ),
            &[],
        )
        .await?;
    rows.into_iter().map(EndpointRow::try_from).collect()
}

async fn endpoint(pool: &impl SqlPool, id: EndpointId) -> StoreResult<Option<EndpointRow>> {
    let id = id.to_string();
    let row: Option<EndpointColumns> = pool
        .fetch_optional(
            &format!("SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE endpoint_id = $1"),
            &[Param::Text(&id)],
        )
        .await?;
    row.map(EndpointRow::try_from).transpose()
}

async fn count_endpoints(pool: &impl SqlPool) -> StoreResult<i64> {
    let count: Option<(i64,)> = pool
        .fetch_optional("SELECT COUNT(*) FROM webhook_endpoints", &[])
        .await?;
    Ok(count.map_or(0, |(n,)| n))
}

async fn delete_endpoint(pool: &impl SqlPool, id: EndpointId) -> StoreResult<bool> {
    let id = id.to_string();
    let mut tx = pool.begin_tx().await?;
    tx.execute(
        "DELETE FROM webhook_deliveries WHERE endpoint_id = $1",
        &[Param::Text(&id)],
    )
    .await?;
    let deleted = tx
        .execute(
            "DELETE FROM webhook_endpoints WHERE endpoint_id = $1",
            &[Param::Text(&id)],
        )
        .await?;
    tx.commit().await?;
    Ok(deleted > 0)
}

async fn record_deliveries(
    pool: &impl SqlPool,
    checkpoint: &CheckpointMove,
    deliveries: &[NewDelivery],
    now_us: i64,
) -> StoreResult<bool> {
    let mut tx = pool.begin_tx().await?;
    let moved = tx
        .execute(
            "UPDATE projector_checkpoints SET position = $1, shows = $2, updated_at_us = $3 \
             WHERE name = $4 AND position = $5",
            &[
                Param::Int(checkpoint.to_moves),
                Param::Text(&checkpoint.shows),
                Param::Int(now_us),
                Param::Text(&checkpoint.name),
                Param::Int(checkpoint.from_moves),
            ],
        )
        .await?;
    if moved != 1 {
        tx.rollback().await?;
        return Ok(false);
    }
    for d in deliveries {
        let (delivery_id, endpoint_id) = (d.delivery_id.to_string(), d.endpoint_id.to_string());
        tx.execute(
            INSERT_DELIVERY,
            &[
                Param::Text(&delivery_id),
                Param::Text(&endpoint_id),
                Param::Text(&d.webhook_id),
                Param::Text(d.event_type.as_str()),
                Param::Text(&d.subject),
                Param::Int(d.position),
                Param::Text(&d.body),
                Param::Int(now_us),
            ],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(true)
}

async fn endpoints_with_due_deliveries(
    pool: &impl SqlPool,
    now_us: i64,
) -> StoreResult<Vec<EndpointId>> {
    let ids: Vec<(String,)> = pool
        .fetch_all(
            "SELECT e.endpoint_id FROM webhook_endpoints e WHERE EXISTS \
             (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.endpoint_id \
              AND d.status = 'pending' AND d.next_attempt_at_us <= $1 AND d.claimed_until_us <= $1)",
            &[Param::Int(now_us)],
        )
        .await?;
    ids.iter()
        .map(|(id,)| parse_uuid("webhook_deliveries.endpoint_id", id).map(EndpointId))
        .collect()
}

/// Claims deliveries with this dialect's statement (`sql`, see
/// [`WebhookOutboxPort::claim_deliveries`]).
async fn claim_deliveries(
    pool: &impl SqlPool,
    sql: &str,
    claim: &Claim<'_>,
) -> StoreResult<Vec<ClaimedDelivery>> {
    let endpoint = claim.endpoint.to_string();
    let rows: Vec<ClaimedColumns> = pool
        .fetch_all(
            sql,
            &[
                Param::Text(claim.token),
                Param::Int(claim.lease_until_us),
                Param::Text(&endpoint),
                Param::Int(claim.now_us),
                Param::Int(claim.limit),
            ],
        )
        .await?;
    rows.into_iter().map(ClaimedDelivery::try_from).collect()
}

async fn finish_attempt(
    pool: &impl SqlPool,
    delivery: DeliveryId,
    token: &str,
    record: &AttemptRecord,
) -> StoreResult<bool> {
    let (status, next_at) = match record.verdict {
        AttemptVerdict::Delivered => (DeliveryStatus::Delivered, record.at_us),
        AttemptVerdict::RetryAt(at) => (DeliveryStatus::Pending, at),
        AttemptVerdict::Failed => (DeliveryStatus::Failed, record.at_us),
    };
    let delivery = delivery.to_string();
    let written = pool
        .execute(
            "UPDATE webhook_deliveries SET status = $1, next_attempt_at_us = $2, \
                 attempts = attempts + 1, round_attempts = round_attempts + 1, \
                 last_status = $3, last_error = $4, claim_token = NULL, claimed_until_us = 0, \
                 updated_at_us = $5 \
             WHERE delivery_id = $6 AND claim_token = $7",
            &[
                Param::Text(status.as_str()),
                Param::Int(next_at),
                Param::MaybeInt4(record.last_status),
                Param::MaybeText(record.last_error.as_deref()),
                Param::Int(record.at_us),
                Param::Text(&delivery),
                Param::Text(token),
            ],
        )
        .await?;
    Ok(written == 1)
}

async fn deliveries(
    pool: &impl SqlPool,
    endpoint: EndpointId,
    status: Option<DeliveryStatus>,
    limit: i64,
) -> StoreResult<Vec<DeliveryRow>> {
    let endpoint = endpoint.to_string();
    let rows: Vec<DeliveryColumns> = pool
        .fetch_all(
            &format!(
                "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries \
                 WHERE endpoint_id = $1 AND (CAST($2 AS TEXT) IS NULL OR status = CAST($2 AS TEXT)) \
                 ORDER BY position DESC, webhook_id DESC LIMIT $3"
            ),
            &[
                Param::Text(&endpoint),
                Param::MaybeText(status.map(DeliveryStatus::as_str)),
                Param::Int(limit),
            ],
        )
        .await?;
    rows.into_iter().map(DeliveryRow::try_from).collect()
}

async fn retry_delivery(
    pool: &impl SqlPool,
    endpoint: EndpointId,
    delivery: DeliveryId,
    now_us: i64,
) -> StoreResult<RetryOutcome> {
    let (endpoint, delivery) = (endpoint.to_string(), delivery.to_string());
    let row: Option<DeliveryColumns> = pool
        .fetch_optional(
            &format!(
                "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at_us = $1, \
                     retry_from_us = $1, round_attempts = 0, claim_token = NULL, claimed_until_us = 0, \
                     updated_at_us = $1 \
                 WHERE endpoint_id = $2 AND delivery_id = $3 RETURNING {DELIVERY_COLUMNS}"
            ),
            &[
                Param::Int(now_us),
                Param::Text(&endpoint),
                Param::Text(&delivery),
            ],
        )
        .await?;
    match row {
        Some(row) => Ok(RetryOutcome::Reset(row.try_into()?)),
        None => Ok(RetryOutcome::NotFound),
    }
}

async fn prune_deliveries(pool: &impl SqlPool, before_us: i64, limit: i64) -> StoreResult<u64> {
    pool.execute(
        "DELETE FROM webhook_deliveries WHERE delivery_id IN \
         (SELECT delivery_id FROM webhook_deliveries \
          WHERE status <> 'pending' AND updated_at_us < $1 LIMIT $2)",
        &[Param::Int(before_us), Param::Int(limit)],
    )
    .await
}

async fn oldest_pending_us(pool: &impl SqlPool) -> StoreResult<Option<i64>> {
    let row: Option<(Option<i64>,)> = pool
        .fetch_optional(
            "SELECT MIN(retry_from_us) FROM webhook_deliveries WHERE status = 'pending'",
            &[],
        )
        .await?;
    Ok(row.and_then(|(at,)| at))
}
