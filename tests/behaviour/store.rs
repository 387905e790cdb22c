//! The store's promises, checked directly on both databases.

use booking::store::{AppendBatch, AppendOutcome, NewEvent, StoreError, MAX_EVENTS_PER_BATCH};
use chrono::Utc;
use cqrs_es::Aggregate;
use domain::seat::Seat;

use crate::support::TestEnv;
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_conflict_on_any_one_stream_writes_nothing_on_the_others,
        events_get_increasing_positions_and_a_recorded_time,
        a_batch_over_max_events_is_too_large_and_writes_nothing,
    ]
}

fn event(stream: &str, sequence: i64) -> NewEvent {
    NewEvent {
        aggregate_type: Seat::TYPE,
        aggregate_id: stream.to_owned(),
        sequence,
        event_type: "HoldReleased".into(),
        event_version: "1.0".into(),
        payload: serde_json::value::RawValue::from_string(
            r#"{"HoldReleased":{"hold_id":"00000000-0000-0000-0000-000000000001"}}"#.into(),
        )
        .unwrap(),
        metadata: serde_json::value::RawValue::from_string("{}".into()).unwrap(),
        show_id: Some(domain::ids::ShowId::parse("atomic").unwrap()),
    }
}

fn batch(events: Vec<NewEvent>) -> AppendBatch {
    AppendBatch {
        events,
        ..AppendBatch::new(Utc::now())
    }
}

async fn a_conflict_on_any_one_stream_writes_nothing_on_the_others(env: TestEnv) {
    let app = env.spawn().await;
    let streams = ["atomic/A", "atomic/B", "atomic/C"];
    // The conflict sits on the first, the middle and the last stream in turn.
    for (round, taken) in streams.iter().enumerate() {
        let round = round as i64;
        let outcome = app
            .store
            .append(&batch(vec![event(taken, round + 1)]))
            .await
            .unwrap();
        assert_eq!(outcome, AppendOutcome::Appended);
        let before = app.event_count().await;
        // Every stream at the next sequence: free on two, taken on one.
        let all: Vec<NewEvent> = streams.iter().map(|s| event(s, round + 1)).collect();
        let outcome = app.store.append(&batch(all)).await.unwrap();
        assert_eq!(outcome, AppendOutcome::Conflict, "round {round}");
        assert_eq!(
            app.event_count().await,
            before,
            "nothing written in round {round}"
        );
        // Now make the others catch up so the next round starts level.
        let others: Vec<NewEvent> = streams
            .iter()
            .filter(|s| *s != taken)
            .map(|s| event(s, round + 1))
            .collect();
        assert_eq!(
            app.store.append(&batch(others)).await.unwrap(),
            AppendOutcome::Appended
        );
    }
    for stream in streams {
        let events = app.store.stream_events::<Seat>(stream, 0).await.unwrap();
        let sequences: Vec<usize> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, vec![1, 2, 3], "{stream}");
    }
    app.stop().await;
}

async fn events_get_increasing_positions_and_a_recorded_time(env: TestEnv) {
    let app = env.spawn().await;
    for n in 1..=3 {
        let events = vec![event("order/A", n), event("order/B", n)];
        assert_eq!(
            app.store.append(&batch(events)).await.unwrap(),
            AppendOutcome::Appended
        );
    }
    let positions = app.store.positions().await.unwrap();
    assert_eq!(positions.len(), 6);
    assert!(
        positions.windows(2).all(|w| w[0].0 < w[1].0),
        "{positions:?}"
    );
    let now_us = Utc::now().timestamp_micros();
    assert!(positions
        .iter()
        .all(|(_, at)| *at > now_us - 60_000_000 && *at <= now_us));
    app.stop().await;
}

/// One transaction owns 65,535 positions: a batch of one event more is
/// refused before anything is sent, and writes nothing.
async fn a_batch_over_max_events_is_too_large_and_writes_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let events: Vec<NewEvent> = (1..=MAX_EVENTS_PER_BATCH + 1)
        .map(|n| event(&format!("large/{n}"), 1))
        .collect();
    assert_eq!(events.len(), 65_536);
    let refused = app.store.append(&batch(events)).await;
    assert!(
        matches!(refused, Err(StoreError::TooLarge(_))),
        "{refused:?}"
    );
    assert_eq!(app.event_count().await, 0);
    app.stop().await;
}
