//! The dispatcher: from the log to recorded deliveries.
//!
//! It reads the log after its checkpoint, show by show (a position per
//! show: each show's events in commit order, so it never passes one that
//! commits late), turns each event into the webhook events the endpoints asked for,
//! and records one delivery per event and endpoint **in the transaction
//! that moves the checkpoint**, by compare-and-set. Nothing is sent here:
//! a crash before the commit reads the same events again; after it, the
//! deliveries are recorded and the sender sends them. Another instance
//! moving the checkpoint first is not an error: this one reads again from
//! there, and a delivery recorded twice is one row (same subject and
//! endpoint).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};

use projections::time::to_micros;

use super::payload::{types_of, Occurrence, Payloads};
use crate::clock::Clock;
use crate::store::{
    CheckpointMove, DeliveryId, EndpointId, EndpointRow, EventLog, LogCursor, LogEvent,
    NewDelivery, StoreError, WebhookEventType, WebhookOutbox,
};

/// The dispatcher's checkpoint in `projector_checkpoints`.
pub const WEBHOOKS_CHECKPOINT: &str = "webhooks";

/// Events per dispatcher transaction.
pub const DISPATCH_BATCH: i64 = 500;

/// Payloads built at once in a dispatcher pass (each one or two reads):
/// enough to overlap their round trips, few enough to leave the pool to
/// the buyers (`DEFAULT_POOL_CONNECTIONS` is 16).
pub const PAYLOAD_READS_IN_FLIGHT: usize = 8;

/// The Standard Webhooks message id of `event_type` from the event at
/// `position` of `show` to `endpoint`: the same on every attempt and on
/// every instance, different for every other event, type or endpoint.
/// (Positions are per show, so the show is part of it; before migration
/// 0025 a position was the log's and the id named it alone, as deliveries
/// recorded then still do.)
pub fn message_id(
    show: &str,
    position: i64,
    endpoint: EndpointId,
    event_type: WebhookEventType,
) -> String {
    format!("msg_{show}_{position}_{}_{event_type}", endpoint.0.simple())
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DispatchReport {
    pub events: usize,
    pub deliveries: usize,
    /// The checkpoint after the pass.
    pub cursor: LogCursor,
}

#[derive(Clone)]
pub struct Dispatcher {
    log: EventLog,
    outbox: WebhookOutbox,
    payloads: Arc<Payloads>,
    clock: Arc<dyn Clock>,
}

/// The delivery of `occurrence` of `event` to `endpoint`.
fn delivery(
    (show, event): (&str, &LogEvent),
    endpoint: &EndpointRow,
    occurrence: &Occurrence,
) -> NewDelivery {
    let webhook_id = message_id(
        show,
        event.position,
        endpoint.endpoint_id,
        occurrence.event_type,
    );
    NewDelivery {
        delivery_id: DeliveryId::of_message(&webhook_id),
        endpoint_id: endpoint.endpoint_id,
        webhook_id,
        event_type: occurrence.event_type,
        subject: occurrence.subject.clone(),
        position: event.position,
        body: occurrence.body.clone(),
    }
}

impl Dispatcher {
    pub fn new(
        log: EventLog,
        outbox: WebhookOutbox,
        payloads: Arc<Payloads>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            log,
            outbox,
            payloads,
            clock,
        }
    }

    /// Records the deliveries of every event after the checkpoint, batch by
    /// batch, up to what is committed now.
    pub async fn run_once(&self) -> Result<DispatchReport, StoreError> {
        let mut report = DispatchReport::default();
        loop {
            let from = self.log.checkpoint(WEBHOOKS_CHECKPOINT).await?;
            report.cursor = from.cursor.clone();
            // The heads before the endpoints: with no endpoint, nothing up
            // to these heads can be owed to anyone, since an endpoint
            // registered after the endpoints' read starts at heads at or
            // above them.
            let heads = self.log.head_cursor().await?;
            let mut endpoints = self.outbox.webhook_endpoints().await?;
            if endpoints.is_empty() {
                let to = heads;
                if to != from.cursor {
                    let now_us = to_micros(self.clock.now());
                    let moved = CheckpointMove::next(WEBHOOKS_CHECKPOINT, &from, &to);
                    self.outbox
                        .record_webhook_deliveries(&moved, &[], now_us)
                        .await?;
                }
                return Ok(report);
            }
            let (events, to) = self.log.read_after(&from.cursor, DISPATCH_BATCH).await?;
            if to == from.cursor {
                return Ok(report);
            }
            // Read again after the events: an endpoint registered meanwhile
            // is either in this list or starts above every event read.
            endpoints = self.outbox.webhook_endpoints().await?;
            let deliveries = self.deliveries_of(&events, &endpoints).await?;
            let now_us = to_micros(self.clock.now());
            let moved = CheckpointMove::next(WEBHOOKS_CHECKPOINT, &from, &to);
            if self
                .outbox
                .record_webhook_deliveries(&moved, &deliveries, now_us)
                .await?
            {
                report.events += events.len();
                report.deliveries += deliveries.len();
                report.cursor = to;
            }
        }
    }

    /// The deliveries `events` owe `endpoints`, in log order.
    async fn deliveries_of(
        &self,
        events: &[LogEvent],
        endpoints: &[EndpointRow],
    ) -> Result<Vec<NewDelivery>, StoreError> {
        // The payloads' reads (a booking's hold, its checkout row) run
        // PAYLOAD_READS_IN_FLIGHT at a time, their results in log order:
        // one after another, under a crowd each waited its turn for a
        // pooled connection, and a batch of bookings took seconds.
        let owed: Vec<&LogEvent> = events
            .iter()
            .filter(|event| !types_of(event).is_empty())
            .collect();
        // Made first, polled `buffered`: a stream mapped by a closure over
        // borrowed events would not be `Send` (rust-lang/rust#64552).
        let reads: Vec<_> = owed
            .into_iter()
            .map(|event| self.occurrences_of(event, endpoints))
            .collect();
        let occurrences: Vec<(&LogEvent, Vec<Occurrence>)> = futures::stream::iter(reads)
            .buffered(PAYLOAD_READS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut deliveries = Vec::new();
        for (event, found) in occurrences {
            let show = event.show_id.as_deref().unwrap_or_default();
            for occurrence in found {
                for endpoint in endpoints
                    .iter()
                    .filter(|e| e.wants(occurrence.event_type, show, event.position))
                {
                    deliveries.push(delivery((show, event), endpoint, &occurrence));
                }
            }
        }
        Ok(deliveries)
    }

    /// The webhook events `event` owes `endpoints`, with their bodies.
    async fn occurrences_of<'e>(
        &self,
        event: &'e LogEvent,
        endpoints: &[EndpointRow],
    ) -> Result<(&'e LogEvent, Vec<Occurrence>), StoreError> {
        let show = event.show_id.as_deref().unwrap_or_default();
        let wanted =
            |t: WebhookEventType| endpoints.iter().any(|e| e.wants(t, show, event.position));
        Ok((event, self.payloads.occurrences(event, wanted).await?))
    }

    /// How many events of the log the checkpoint is behind.
    pub async fn lag(&self) -> Result<i64, StoreError> {
        let checkpoint = self.log.checkpoint(WEBHOOKS_CHECKPOINT).await?;
        self.log.count_behind(&checkpoint.cursor).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_id_names_the_show_the_position_the_endpoint_and_the_type() {
        let endpoint = EndpointId(uuid::Uuid::from_u128(0xabc));
        let confirmed = WebhookEventType::BookingConfirmed;
        let id = message_id("gig", 42, endpoint, confirmed);
        assert_eq!(
            id,
            "msg_gig_42_00000000000000000000000000000abc_booking.confirmed"
        );
        assert_eq!(id, message_id("gig", 42, endpoint, confirmed));
        assert_ne!(id, message_id("gig", 43, endpoint, confirmed));
        // Two shows' positions are numbered apart.
        assert_ne!(id, message_id("other", 42, endpoint, confirmed));
        assert_ne!(
            id,
            message_id("gig", 42, endpoint, WebhookEventType::RefundIssued)
        );
        let other = EndpointId(uuid::Uuid::from_u128(0xabd));
        assert_ne!(id, message_id("gig", 42, other, confirmed));
    }
}
