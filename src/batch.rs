//! Building an append: a command's decided events, stream by stream, with
//! the read-model rows they produce. One batch is one transaction.

use cqrs_es::{Aggregate, DomainEvent};
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{SeatId, ShowId};
use domain::seat::{Seat, SeatEvent};
use projections::availability::SeatRow;
use projections::checkouts::CheckoutRow;
use projections::holds::hold_change;

use crate::store::{AppendBatch, CheckoutRowWrite, NewEvent, SeatRowWrite, StoreError};

/// A stream as of `version`: what the rows of its next events are computed
/// from. Commands take it from a locked, loaded stream; the projector from
/// the log.
pub struct StreamView<'a, A> {
    pub id: &'a str,
    pub version: usize,
    pub aggregate: &'a A,
}

pub fn push_events<A: Aggregate>(
    batch: &mut AppendBatch,
    stream: &StreamView<'_, A>,
    events: &[A::Event],
    metadata: &str,
    show_id: Option<&str>,
) -> Result<(), StoreError> {
    if batch.rows_only {
        return Ok(());
    }
    for (i, event) in events.iter().enumerate() {
        batch.events.push(NewEvent {
            aggregate_type: A::TYPE,
            aggregate_id: stream.id.to_owned(),
            sequence: (stream.version + i + 1) as i64,
            event_type: event.event_type(),
            event_version: event.event_version(),
            payload: serde_json::to_string(event)
                .map_err(|e| StoreError::Corrupt(format!("cannot serialize an event: {e}")))?,
            metadata: metadata.to_owned(),
            show_id: show_id.map(str::to_owned),
        });
    }
    Ok(())
}

/// Adds a seat's events, its availability row and its hold-record changes.
pub fn push_seat(
    batch: &mut AppendBatch,
    show_id: &ShowId,
    seat_id: &SeatId,
    stream: &StreamView<'_, Seat>,
    events: &[SeatEvent],
    metadata: &str,
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    push_events(batch, stream, events, metadata, Some(show_id.as_str()))?;
    let mut after = stream.aggregate.clone();
    for event in events {
        after.apply_event(event);
        batch
            .hold_changes
            .extend(hold_change(show_id, seat_id, event));
    }
    batch.seat_rows.push(SeatRowWrite {
        show_id: show_id.to_string(),
        seat_id: seat_id.to_string(),
        last_seq: (stream.version + events.len()) as i64,
        row: SeatRow::of(&after),
    });
    Ok(())
}

/// Adds a checkout's events and its row.
pub fn push_checkout(
    batch: &mut AppendBatch,
    stream: &StreamView<'_, Checkout>,
    events: &[CheckoutEvent],
    metadata: &str,
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut after = stream.aggregate.clone();
    for event in events {
        after.apply_event(event);
    }
    let show_id = after.show_id.as_ref().map(ShowId::as_str);
    push_events(batch, stream, events, metadata, show_id)?;
    if let Some(row) = CheckoutRow::of(&after) {
        batch.checkout_rows.push(CheckoutRowWrite {
            last_seq: (stream.version + events.len()) as i64,
            row,
        });
    }
    Ok(())
}
