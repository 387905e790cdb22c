//! The stream cache's freshness rule against a real store: only streams an
//! append wrote to were checked by it (src/command/streams.rs).

use std::task::Poll;

use booking::command::streams::{refresh_all, StreamCache};
use booking::store::{AppendBatch, AppendOutcome, NewEvent};
use chrono::{Duration, Utc};
use cqrs_es::Aggregate;
use domain::ids::{BuyerId, HoldId};
use domain::seat::{self, Seat, SeatCommand, SeatEvent};
use serde_json::value::RawValue;

use crate::support::TestEnv;
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![a_stream_an_append_wrote_nothing_to_is_not_marked_fresh]
}

fn event(stream: &str, sequence: i64, event: &SeatEvent) -> NewEvent {
    NewEvent {
        aggregate_type: Seat::TYPE,
        aggregate_id: stream.to_owned(),
        sequence,
        event_type: event.name().into(),
        event_version: "1.0".into(),
        payload: RawValue::from_string(serde_json::to_string(event).unwrap()).unwrap(),
        metadata: RawValue::from_string("{}".into()).unwrap(),
        show_id: domain::ids::ShowId::parse("stale").unwrap(),
    }
}

fn batch(events: Vec<NewEvent>) -> AppendBatch {
    AppendBatch {
        events,
        ..AppendBatch::new(Utc::now())
    }
}

/// A release that covers seats A and B, where only B had anything to
/// release, must not mark A fresh: a request that arrived meanwhile and
/// releases another hold on A would decide on a state nobody checked,
/// find nothing to release (a 204) and leave that hold held.
async fn a_stream_an_append_wrote_nothing_to_is_not_marked_fresh(env: TestEnv) {
    let app = env.spawn().await;
    let (a, b) = ("stale/A".to_owned(), "stale/B".to_owned());
    let now = Utc::now();
    let placed = |hold_id| SeatEvent::HoldPlaced {
        hold_id,
        buyer: BuyerId::parse("alice").unwrap(),
        expires_at: now + Duration::hours(1),
        price: None,
        returns_to_waitlist: false,
        offer: false,
    };
    let (first, second) = (HoldId(uuid::Uuid::new_v4()), HoldId(uuid::Uuid::new_v4()));
    // The first hold holds B only; A is free.
    let held = batch(vec![event(&b, 1, &placed(first))]);
    assert_eq!(
        app.store.log().append(&held).await.unwrap(),
        AppendOutcome::Appended
    );

    let cache = StreamCache::<Seat>::default();
    // Request 1 releases the first hold over A and B, and loads both.
    let mut one = cache.lock(&[a.clone(), b.clone()]).await;
    refresh_all(&app.store.log(), &mut one).await.unwrap();
    // Request 2 (releasing the second hold on A) arrives: it takes its
    // ticket and waits for A's lock.
    let mut two = Box::pin(cache.lock(std::slice::from_ref(&a)));
    assert!(matches!(futures::poll!(&mut two), Poll::Pending));
    // Another instance places the second hold on A meanwhile.
    let other = batch(vec![event(&a, 1, &placed(second))]);
    assert_eq!(
        app.store.log().append(&other).await.unwrap(),
        AppendOutcome::Appended
    );

    // Request 1 decides on its (now stale) A: nothing to release there.
    let release = |seat: &Seat, hold_id| {
        seat::decide(seat, &SeatCommand::ReleaseHold { hold_id }, now).unwrap()
    };
    let decided: Vec<Vec<SeatEvent>> = one.iter().map(|s| release(s.aggregate(), first)).collect();
    assert!(
        decided[0].is_empty() && decided[1].len() == 1,
        "{decided:?}"
    );
    let batch_one = batch(vec![event(&b, 2, &decided[1][0])]);
    one.iter_mut().for_each(|s| s.before_append());
    let outcome = app.store.log().append(&batch_one).await;
    assert_eq!(outcome.unwrap(), AppendOutcome::Appended);
    for (stream, events) in one.iter_mut().zip(decided) {
        stream.appended(events);
    }
    drop(one);

    // Request 2 must see the second hold on A, whatever request 1 did.
    let mut two = two.await;
    refresh_all(&app.store.log(), &mut two).await.unwrap();
    assert_eq!(two[0].version(), 1, "request 2 decided on an unchecked A");
    assert_eq!(
        release(two[0].aggregate(), second),
        vec![SeatEvent::HoldReleased { hold_id: second }],
        "the release would answer 204 and leave the second hold held"
    );
    app.stop().await;
}
