//! Building an append: a command's decided events, stream by stream, with
//! the read-model rows they produce. One batch is one transaction.

use cqrs_es::{Aggregate, DomainEvent};
use domain::checkout::{Checkout, CheckoutEvent};
use domain::ids::{SeatId, ShowId};
use domain::seat::{Seat, SeatEvent};
use projections::availability::SeatAvailabilityRow;
use projections::checkouts::CheckoutRow;
use projections::holds::hold_change;
use projections::time::to_micros;
use serde_json::value::RawValue;

use crate::store::{AppendBatch, NewEvent, StoreError};

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
    show_id: Option<&ShowId>,
) -> Result<(), StoreError> {
    if batch.rows_only {
        return Ok(());
    }
    let unserializable =
        |e: serde_json::Error| StoreError::Corrupt(format!("an event's JSON: {e}"));
    for (i, event) in events.iter().enumerate() {
        batch.events.push(NewEvent {
            aggregate_type: A::TYPE,
            aggregate_id: stream.id.to_owned(),
            sequence: (stream.version + i + 1) as i64,
            event_type: event.event_type(),
            event_version: event.event_version(),
            payload: serde_json::value::to_raw_value(event).map_err(unserializable)?,
            metadata: RawValue::from_string(metadata.to_owned()).map_err(unserializable)?,
            show_id: show_id.cloned(),
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
    push_events(batch, stream, events, metadata, Some(show_id))?;
    let mut after = stream.aggregate.clone();
    for event in events {
        after.apply_event(event);
        batch
            .hold_changes
            .extend(hold_change(show_id, seat_id, event));
    }
    let last_seq = (stream.version + events.len()) as i64;
    batch
        .seat_rows
        .push(SeatAvailabilityRow::of(show_id, seat_id, last_seq, &after));
    Ok(())
}

/// Adds a checkout's events and its row, written now (`batch.recorded_at`,
/// the time of the events).
pub fn push_checkout(
    batch: &mut AppendBatch,
    stream: &StreamView<'_, Checkout>,
    events: &[CheckoutEvent],
    metadata: &str,
) -> Result<(), StoreError> {
    let updated_at_us = to_micros(batch.recorded_at);
    push_checkout_at(batch, stream, events, metadata, updated_at_us)
}

/// [`push_checkout`] for events recorded at `updated_at_us` (the time of the
/// last of them): what a rebuild from the log writes, so a rebuilt row is
/// the row the command wrote.
pub fn push_checkout_at(
    batch: &mut AppendBatch,
    stream: &StreamView<'_, Checkout>,
    events: &[CheckoutEvent],
    metadata: &str,
    updated_at_us: i64,
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut after = stream.aggregate.clone();
    for event in events {
        after.apply_event(event);
    }
    push_events(batch, stream, events, metadata, after.show_id.as_ref())?;
    let last_seq = (stream.version + events.len()) as i64;
    if let Some(row) = CheckoutRow::of(&after, last_seq, updated_at_us) {
        batch.checkout_rows.push(row);
    }
    Ok(())
}
