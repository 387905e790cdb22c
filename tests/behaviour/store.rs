//! The store's promises, checked directly on both databases.

use booking::store::{
    AppendBatch, AppendOutcome, CheckpointMove, IdempotencyKeyRow, LogFilter, NewEvent, StoreError,
    MAX_EVENTS_PER_BATCH,
};
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
        appends_sent_at_once_each_get_their_own_outcome,
        a_group_refuses_each_append_as_if_written_alone_in_turn,
        a_holds_seats_reached_in_two_batches_are_all_in_its_record,
        a_batch_whose_checkpoint_moved_is_refused_and_writes_nothing,
        a_batch_reaching_the_store_after_its_deadline_is_refused_and_writes_nothing,
    ]
}

/// PostgreSQL only: the group function itself, on a group it is certain to get.
pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_group_refuses_a_document_alone_and_undoes_only_what_it_inserted,
        every_unique_key_of_a_distributed_table_names_its_distribution_column,
        a_log_of_events_without_a_show_takes_each_streams_show_as_it_migrates,
        a_log_from_before_positions_per_show_keeps_each_readers_place_as_it_migrates,
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
        show_id: domain::ids::ShowId::parse("atomic").unwrap(),
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
            .log()
            .append(&batch(vec![event(taken, round + 1)]))
            .await
            .unwrap();
        assert_eq!(outcome, AppendOutcome::Appended);
        let before = app.event_count().await;
        // Every stream at the next sequence: free on two, taken on one.
        let all: Vec<NewEvent> = streams.iter().map(|s| event(s, round + 1)).collect();
        let outcome = app.store.log().append(&batch(all)).await.unwrap();
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
            app.store.log().append(&batch(others)).await.unwrap(),
            AppendOutcome::Appended
        );
    }
    for stream in streams {
        let events = app
            .store
            .log()
            .stream_events::<Seat>(stream, 0)
            .await
            .unwrap();
        let sequences: Vec<usize> = events.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, vec![1, 2, 3], "{stream}");
    }
    app.stop().await;
}

/// A projector's batch whose checkpoint another projector moved meanwhile
/// (another instance's, say): refused as such, with nothing written. It carries no idempotency key,
/// which the refusal's undo must not trip on (PostgreSQL raised "cannot
/// call populate_composite on a scalar" there, and a start failed).
async fn a_batch_whose_checkpoint_moved_is_refused_and_writes_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let before = app.event_count().await;
    let moved = AppendBatch {
        events: vec![event("moved/A", 1)],
        checkpoint: Some(CheckpointMove {
            name: "projector".into(),
            from_moves: -1,
            to_moves: 1,
            shows: "{}".into(),
        }),
        ..AppendBatch::new(Utc::now())
    };
    assert_eq!(
        app.store.log().append(&moved).await.unwrap(),
        AppendOutcome::CheckpointMoved
    );
    assert_eq!(app.event_count().await, before, "nothing written");
    app.stop().await;
}

/// A price change's append carries the latest instant it may commit at
/// (`AppendBatch::commit_by`): past it, on the store's clock, it is refused
/// before anything is written, alone or among others.
async fn a_batch_reaching_the_store_after_its_deadline_is_refused_and_writes_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let log = app.store.log();
    let before = app.event_count().await;
    let due = |stream: &str, by: chrono::DateTime<Utc>| AppendBatch {
        commit_by: Some(by),
        ..batch(vec![event(stream, 1)])
    };
    let late = due("late/A", Utc::now() - chrono::Duration::seconds(1));
    assert_eq!(log.append(&late).await.unwrap(), AppendOutcome::Late);
    assert_eq!(app.event_count().await, before, "nothing written");
    let together = log
        .append_together(&[late, batch(vec![event("late/B", 1)])])
        .await
        .unwrap();
    assert!(
        matches!(
            together.as_slice(),
            [Ok(AppendOutcome::Late), Ok(AppendOutcome::Appended)]
        ),
        "{together:?}"
    );
    let in_time = due("late/C", Utc::now() + chrono::Duration::minutes(1));
    assert_eq!(log.append(&in_time).await.unwrap(), AppendOutcome::Appended);
    assert_eq!(app.event_count().await, before + 2);
    app.stop().await;
}

async fn events_get_increasing_positions_and_a_recorded_time(env: TestEnv) {
    let app = env.spawn().await;
    for n in 1..=3 {
        let events = vec![event("order/A", n), event("order/B", n)];
        assert_eq!(
            app.store.log().append(&batch(events)).await.unwrap(),
            AppendOutcome::Appended
        );
    }
    let positions = app.store.log().positions().await.unwrap();
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

/// One append holds at most 65,535 events: a batch of one event more is
/// refused before anything is sent, and writes nothing.
async fn a_batch_over_max_events_is_too_large_and_writes_nothing(env: TestEnv) {
    let app = env.spawn().await;
    let events: Vec<NewEvent> = (1..=MAX_EVENTS_PER_BATCH + 1)
        .map(|n| event(&format!("large/{n}"), 1))
        .collect();
    assert_eq!(events.len(), 65_536);
    let refused = app.store.log().append(&batch(events)).await;
    assert!(
        matches!(refused, Err(StoreError::TooLarge(_))),
        "{refused:?}"
    );
    assert_eq!(app.event_count().await, 0);
    app.stop().await;
}

fn keyed(events: Vec<NewEvent>, key: &str) -> AppendBatch {
    AppendBatch {
        idempotency: Some(IdempotencyKeyRow {
            buyer: domain::ids::BuyerId::parse("grouped").unwrap(),
            key: domain::ids::IdempotencyKey::parse(key).unwrap(),
            request_hash: "h".into(),
            hold_id: domain::ids::HoldId::random(),
            created_at_us: 0,
        }),
        ..batch(events)
    }
}

/// Appends that arrive together (on PostgreSQL: written as groups, in one
/// transaction each; on SQLite: one savepoint each in a group) are each
/// answered by their own outcome: a stale version or a taken key refuses
/// that append alone, writes nothing of it, and never its neighbours.
async fn appends_sent_at_once_each_get_their_own_outcome(env: TestEnv) {
    const N: usize = 16;
    let app = env.spawn().await;
    for i in 0..N {
        let taken = batch(vec![event(&format!("group/T{i}"), 1)]);
        assert_eq!(
            app.store.log().append(&taken).await.unwrap(),
            AppendOutcome::Appended
        );
    }
    let mut batches = Vec::new();
    let mut expected = Vec::new();
    for i in 0..N {
        // Stale: T{i} is at 1 already.
        batches.push(batch(vec![event(&format!("group/T{i}"), 1)]));
        expected.push(Some(AppendOutcome::Conflict));
        // Free.
        batches.push(batch(vec![event(&format!("group/F{i}"), 1)]));
        expected.push(Some(AppendOutcome::Appended));
        // Free on G{i}, stale on T{i}: refused whole, G{i} left empty...
        batches.push(batch(vec![
            event(&format!("group/G{i}"), 1),
            event(&format!("group/T{i}"), 1),
        ]));
        expected.push(Some(AppendOutcome::Conflict));
        // ... so that this one, at the same sequence of G{i}, is appended.
        batches.push(batch(vec![event(&format!("group/G{i}"), 1)]));
        expected.push(Some(AppendOutcome::Appended));
    }
    // One key, two appends: exactly one is written (either may be first).
    batches.push(keyed(vec![event("group/H1", 1)], "k1"));
    expected.push(None);
    batches.push(keyed(vec![event("group/H2", 1)], "k1"));
    expected.push(None);
    let before = app.event_count().await;
    let log = app.store.log();
    let outcomes = futures::future::join_all(batches.iter().map(|b| log.append(b))).await;
    let outcomes: Vec<AppendOutcome> = outcomes.into_iter().map(|o| o.unwrap()).collect();
    for (i, (outcome, expected)) in outcomes.iter().zip(&expected).enumerate() {
        if let Some(expected) = expected {
            assert_eq!(outcome, expected, "append {i}");
        }
    }
    let keyed_outcomes = &outcomes[4 * N..];
    assert_eq!(
        keyed_outcomes
            .iter()
            .filter(|o| **o == AppendOutcome::Appended)
            .count(),
        1,
        "{keyed_outcomes:?}"
    );
    assert!(keyed_outcomes.contains(&AppendOutcome::IdempotencyKeyTaken));
    assert_eq!(app.event_count().await, before + (2 * N + 1) as i64);
    for i in 0..N {
        for (stream, sequences) in [("T", vec![1]), ("F", vec![1]), ("G", vec![1])] {
            let id = format!("group/{stream}{i}");
            let events = app.store.log().stream_events::<Seat>(&id, 0).await.unwrap();
            let got: Vec<usize> = events.iter().map(|e| e.sequence).collect();
            assert_eq!(got, sequences, "{id}");
        }
    }
    let mut written = 0;
    for (stream, outcome) in ["group/H1", "group/H2"].iter().zip(keyed_outcomes) {
        let events = app
            .store
            .log()
            .stream_events::<Seat>(stream, 0)
            .await
            .unwrap();
        let expected = usize::from(*outcome == AppendOutcome::Appended);
        assert_eq!(events.len(), expected, "{stream}: {outcome:?}");
        written += events.len();
    }
    assert_eq!(written, 1);
    app.stop().await;
}

/// A hold's placement rows, as a command's batch carries them: the hold's
/// record (and a seat row, which no show here has).
fn placing(mut batch: AppendBatch, hold_id: domain::ids::HoldId) -> AppendBatch {
    use domain::ids::{BuyerId, SeatId, ShowId};
    let placed = domain::seat::SeatEvent::HoldPlaced {
        hold_id,
        buyer: BuyerId::parse("grouped").unwrap(),
        expires_at: Utc::now() + chrono::Duration::hours(1),
        price: None,
        returns_to_waitlist: false,
        offer: false,
    };
    batch.rows.seat(
        &ShowId::parse("atomic").unwrap(),
        &SeatId::parse("A-1").unwrap(),
        &Seat::default(),
        0,
        &[placed],
    );
    batch
}

/// One group, written as the store's writer writes one (`append_together`:
/// on PostgreSQL the set-based `booking_append_group`, on SQLite one
/// statement per table): each append is refused as if written alone after
/// the ones before it — at an event or a key the log already holds, at an
/// event or a key an earlier append of the group takes — and a refused one
/// writes nothing (no event, no key, no hold record), so that a later
/// append may take what it named. The written appends' events take
/// increasing positions in the order they were sent.
async fn a_group_refuses_each_append_as_if_written_alone_in_turn(env: TestEnv) {
    use domain::ids::HoldId;
    let app = env.spawn().await;
    let log = app.store.log();
    let id = |name: &str| format!("together/{name}");
    for before in [
        batch(vec![event(&id("L"), 1)]),
        keyed(vec![event(&id("K"), 1)], "logged"),
    ] {
        assert_eq!(log.append(&before).await.unwrap(), AppendOutcome::Appended);
    }
    use AppendOutcome::{Appended, Conflict, IdempotencyKeyTaken};
    let cases = [
        (batch(vec![event(&id("A"), 1)]), Appended),
        // The log has L at 1.
        (batch(vec![event(&id("L"), 1)]), Conflict),
        // A is taken by the first; so B stays free...
        (
            batch(vec![event(&id("B"), 1), event(&id("A"), 1)]),
            Conflict,
        ),
        // ... for this one.
        (batch(vec![event(&id("B"), 1)]), Appended),
        // The log has the key.
        (
            keyed(vec![event(&id("C"), 1)], "logged"),
            IdempotencyKeyTaken,
        ),
        (keyed(vec![event(&id("D"), 1)], "new"), Appended),
        // The one before takes "new".
        (keyed(vec![event(&id("E"), 1)], "new"), IdempotencyKeyTaken),
        // Refused at L, leaving F and the key "freed"...
        (
            keyed(vec![event(&id("F"), 1), event(&id("L"), 1)], "freed"),
            Conflict,
        ),
        // ... to this one.
        (keyed(vec![event(&id("F"), 1)], "freed"), Appended),
    ];
    let holds: Vec<HoldId> = cases.iter().map(|_| HoldId::random()).collect();
    let expected: Vec<AppendOutcome> = cases.iter().map(|(_, outcome)| *outcome).collect();
    let batches: Vec<AppendBatch> = cases
        .into_iter()
        .zip(&holds)
        .map(|((batch, _), hold)| placing(batch, *hold))
        .collect();
    let answers = log.append_together(&batches).await.unwrap();
    let answers: Vec<AppendOutcome> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(answers, expected);

    let in_log: Vec<String> = log
        .read_log(LogFilter::Show("atomic"), 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.aggregate_id)
        .filter(|stream| ![id("L"), id("K")].contains(stream))
        .collect();
    assert_eq!(in_log, ["A", "B", "D", "F"].map(id), "in position order");
    for (n, (hold, outcome)) in holds.iter().zip(&expected).enumerate() {
        let record = app.store.holds().hold(hold).await.unwrap();
        assert_eq!(record.is_some(), *outcome == Appended, "append {n}");
    }
    // The written appends' keys are taken; the refused ones' are not.
    for (key, outcome) in [
        ("new", IdempotencyKeyTaken),
        ("freed", IdempotencyKeyTaken),
        ("unused", Appended),
    ] {
        let again = keyed(vec![event(&id(&format!("again-{key}")), 1)], key);
        assert_eq!(log.append(&again).await.unwrap(), outcome, "{key}");
    }
    app.stop().await;
}

/// `booking_append_group` itself, on one group of nine documents: a
/// document whose event the log holds, or whose key the keys hold, is
/// refused alone and leaves nothing; one that takes what an earlier one
/// takes (the caller's `after`) is refused if that one is written, and
/// written if it was refused; the rest are written, their events at
/// increasing positions in document order. A document outside the
/// function's terms (no events) is an error that writes nothing.
async fn a_group_refuses_a_document_alone_and_undoes_only_what_it_inserted(env: TestEnv) {
    use sqlx::Connection;
    let app = env.spawn().await;
    let ev = |stream: &str, mark: &str| {
        serde_json::json!({
            "aggregate_type": "Seat", "aggregate_id": stream, "sequence": 1,
            "event_type": "HoldReleased", "event_version": "1.0",
            "payload": {"HoldReleased": {"hold_id": "00000000-0000-0000-0000-000000000001"}},
            "metadata": {"mark": mark}, "show_id": "atomic"})
    };
    let key = |key: &str, hold: &str| serde_json::json!({"buyer": "b", "key": key, "request_hash": "h", "hold_id": hold, "created_at_us": 0});
    let doc = |events: Vec<serde_json::Value>| serde_json::json!({"show_id": "atomic", "recorded_at_us": 1, "events": events});
    let mut conn = sqlx::PgConnection::connect(&app.database_url)
        .await
        .unwrap();
    let mut logged = doc(vec![ev("g/L", "logged")]);
    logged["idempotency_key"] = key("k1", "00000000-0000-4000-8000-000000000001");
    sqlx::query("SELECT booking_append('atomic', $1::jsonb)")
        .bind(logged.to_string())
        .execute(&mut conn)
        .await
        .unwrap();

    let mut keyed_d = doc(vec![ev("g/S3", "d")]);
    keyed_d["idempotency_key"] = key("k1", "00000000-0000-4000-8000-00000000000d");
    let mut keyed_e = doc(vec![ev("g/S4", "e")]);
    keyed_e["idempotency_key"] = key("k2", "00000000-0000-4000-8000-00000000000e");
    let mut keyed_h = doc(vec![ev("g/S9", "h")]);
    keyed_h["idempotency_key"] = key("k2", "00000000-0000-4000-8000-00000000000f");
    let group = serde_json::json!([
        doc(vec![ev("g/S1", "a")]),
        doc(vec![ev("g/S2", "b"), ev("g/L", "b")]),
        doc(vec![ev("g/S5", "c")]),
        keyed_d,
        keyed_e,
        doc(vec![ev("g/S6", "f"), ev("g/S7", "f")]),
        doc(vec![ev("g/S1", "g")]),
        keyed_h,
        doc(vec![ev("g/S2", "i")]),
    ]);
    // g takes S1 after a, h the key k2 after e, i S2 after b.
    let after: Vec<i32> = vec![7, 1, 409, 8, 5, 422, 9, 2, 409];
    let outcomes: Vec<Option<String>> =
        sqlx::query_scalar("SELECT booking_append_group('atomic', $1::jsonb, $2::int[])")
            .bind(group.to_string())
            .bind(&after)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let refused = |code: &str| Some(code.to_owned());
    assert_eq!(
        outcomes,
        [
            None,
            refused("BK409"),
            None,
            refused("BK422"),
            None,
            None,
            refused("BK409"),
            refused("BK422"),
            None
        ]
    );
    const WRITTEN: &str = "SELECT aggregate_id, metadata ->> 'mark', position FROM events \
         WHERE aggregate_id LIKE 'g/%' ORDER BY position";
    let rows: Vec<(String, String, i64)> =
        sqlx::query_as(WRITTEN).fetch_all(&mut conn).await.unwrap();
    let marks: Vec<(&str, &str)> = rows
        .iter()
        .map(|(id, mark, _)| (id.as_str(), mark.as_str()))
        .collect();
    assert_eq!(
        marks,
        [
            ("g/L", "logged"),
            ("g/S1", "a"),
            ("g/S5", "c"),
            ("g/S4", "e"),
            ("g/S6", "f"),
            ("g/S7", "f"),
            ("g/S2", "i")
        ]
    );
    let keys: Vec<(String, String)> =
        sqlx::query_as("SELECT key, hold_id FROM idempotency_keys WHERE buyer = 'b' ORDER BY key")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        keys,
        [
            ("k1".into(), "00000000-0000-4000-8000-000000000001".into()),
            ("k2".into(), "00000000-0000-4000-8000-00000000000e".into())
        ]
    );

    // Outside the function's terms: a document without events, one of
    // another show than the call's, or the call's show not the document's.
    let mut elsewhere = doc(vec![ev("g/S8", "g")]);
    elsewhere["show_id"] = "elsewhere".into();
    for (show, misfit) in [
        (
            "atomic",
            serde_json::json!([doc(vec![ev("g/S8", "g")]), doc(vec![])]),
        ),
        (
            "atomic",
            serde_json::json!([doc(vec![ev("g/S8", "g")]), elsewhere]),
        ),
        (
            "elsewhere",
            serde_json::json!([doc(vec![ev("g/S8", "g")]), doc(vec![ev("g/S9", "g")])]),
        ),
    ] {
        let misfit_outcome = sqlx::query_scalar::<_, Vec<Option<String>>>(
            "SELECT booking_append_group($1, $2::jsonb, '{}')",
        )
        .bind(show)
        .bind(misfit.to_string())
        .fetch_one(&mut conn)
        .await;
        assert!(misfit_outcome.is_err(), "{misfit_outcome:?}");
    }
    let alone = sqlx::query("SELECT booking_append('elsewhere', $1::jsonb)")
        .bind(doc(vec![ev("g/S8", "g")]).to_string())
        .execute(&mut conn)
        .await;
    assert!(
        alone.is_err(),
        "a document of another show alone: {alone:?}"
    );
    let unchanged: Vec<(String, String, i64)> =
        sqlx::query_as(WRITTEN).fetch_all(&mut conn).await.unwrap();
    assert_eq!(unchanged, rows, "nothing of the group");
    conn.close().await.unwrap();
    app.stop().await;
}

/// A hold's seats live in its own row. A projector batch may end inside a
/// hold's placement: the next batch names the hold again with the rest of
/// its seats, and the row takes the union (applying a batch again changes
/// nothing). Both sizes of part: a command-sized one, written row by row on
/// PostgreSQL, and one past `row_by_row_max`, written set-based.
async fn a_holds_seats_reached_in_two_batches_are_all_in_its_record(env: TestEnv) {
    use domain::ids::{BuyerId, HoldId, SeatId, ShowId};
    use domain::seat::SeatEvent;
    let app = env.spawn().await;
    let show = ShowId::parse("split").unwrap();
    let seat = |id: &str| SeatId::parse(id).unwrap();
    let expires_at = Utc::now() + chrono::Duration::hours(1);
    for others in [0, 70] {
        let hold_id = HoldId::random();
        let other_holds: Vec<HoldId> = (0..others).map(|_| HoldId::random()).collect();
        let batch_of = |seat_id: &str| {
            let mut batch = AppendBatch::projection(Utc::now());
            let placements = other_holds
                .iter()
                .enumerate()
                .map(|(n, other)| (*other, seat(&format!("O-{n}"))))
                .chain([(hold_id, seat(seat_id))]);
            for (hold_id, seat_id) in placements {
                let placed = SeatEvent::HoldPlaced {
                    hold_id,
                    buyer: BuyerId::parse("b").unwrap(),
                    expires_at,
                    price: None,
                    returns_to_waitlist: false,
                    offer: false,
                };
                batch
                    .rows
                    .seat(&show, &seat_id, &Seat::default(), 0, &[placed]);
            }
            batch
        };
        let (first, second) = (batch_of("A-2"), batch_of("A-1"));
        for batch in [&first, &second, &first] {
            assert_eq!(
                app.store.log().append(batch).await.unwrap(),
                AppendOutcome::Appended
            );
        }
        let record = app.store.holds().hold(&hold_id).await.unwrap().unwrap();
        let mut seats: Vec<&str> = record.seats.iter().map(|s| s.as_str()).collect();
        seats.sort();
        assert_eq!(seats, ["A-1", "A-2"], "{others} other holds in the batch");
        for (n, other) in other_holds.iter().enumerate() {
            let record = app.store.holds().hold(other).await.unwrap().unwrap();
            let seats: Vec<String> = record.seats.iter().map(|s| s.to_string()).collect();
            assert_eq!(seats, [format!("O-{n}")]);
        }
    }
}

/// PostgreSQL only: the migrated schema, read from the catalog. A database
/// sharded by show (Citus) refuses a unique key (or primary key) of a
/// distributed table without its distribution column: every table the
/// service distributes by show (`booking::store::tables_by_show`) has one
/// at least, and each names the show; the idempotency keys, distributed by
/// buyer, name the buyer.
async fn every_unique_key_of_a_distributed_table_names_its_distribution_column(env: TestEnv) {
    use sqlx::Connection;
    let app = env.spawn().await;
    let mut conn = sqlx::PgConnection::connect(&app.database_url)
        .await
        .unwrap();
    let (by_buyer, buyer) = booking::store::table_by_buyer();
    let mut tables: Vec<(&str, &str)> = booking::store::tables_by_show()
        .map(|table| (table, "show_id"))
        .collect();
    tables.push((by_buyer, buyer));
    for (table, column) in tables {
        let keys: Vec<(String, bool)> = sqlx::query_as(
            "SELECT i.relname::text,
                    EXISTS (SELECT 1 FROM pg_attribute a
                            WHERE a.attrelid = t.oid AND a.attname = $2
                              AND a.attnum = ANY (x.indkey))
             FROM pg_index x
             JOIN pg_class i ON i.oid = x.indexrelid
             JOIN pg_class t ON t.oid = x.indrelid
             WHERE x.indisunique AND t.relname = $1
             ORDER BY 1",
        )
        .bind(table)
        .bind(column)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert!(!keys.is_empty(), "{table} has a unique key");
        let without: Vec<&str> = (keys.iter())
            .filter(|(_, names_it)| !names_it)
            .map(|(index, _)| index.as_str())
            .collect();
        assert!(
            without.is_empty(),
            "{table}: keys without {column}: {without:?}"
        );
    }
    let nullable: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.columns
         WHERE column_name = 'show_id' AND is_nullable = 'YES' AND table_name = ANY ($1)",
    )
    .bind(booking::store::tables_by_show().collect::<Vec<_>>())
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(
        nullable.is_empty(),
        "a NULL show has no shard: {nullable:?}"
    );
}

/// PostgreSQL only: a log written before every event named its show
/// (migrations up to 0023), migrated in place by 0024. An event without a
/// show takes its stream's (from the stream's other events, or a
/// checkout's row); one that has none stops the migration, naming it, and
/// leaves the log as it was.
async fn a_log_of_events_without_a_show_takes_each_streams_show_as_it_migrates(env: TestEnv) {
    const BEFORE_SHOWS_IN_LOG_KEYS: i64 = 23;
    let (migrator, conn, _url, _dir) = migrated_to(&env, BEFORE_SHOWS_IN_LOG_KEYS).await;
    let hold = uuid::Uuid::new_v4().to_string();
    let insert = "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, \
                  event_version, payload, metadata, show_id) VALUES ($1, $2, $3, 'E', '1', '{}', '{}', $4)";
    for (kind, id, sequence, show) in [
        ("Seat", "old/S1", 1, Some("old")),
        ("Seat", "old/S1", 2, None),
        ("Checkout", hold.as_str(), 1, None),
    ] {
        sqlx::query(insert)
            .bind(kind)
            .bind(id)
            .bind(sequence)
            .bind(show)
            .execute(&conn)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO checkouts (hold_id, show_id, buyer, phase, amount_cents, last_seq, updated_at_us) \
         VALUES ($1, 'old', 'b', 'awaiting_payment', 0, 1, 0)",
    )
    .bind(&hold)
    .execute(&conn)
    .await
    .unwrap();
    // A stream of no show anywhere: the migration stops and names it.
    sqlx::query(insert)
        .bind("Seat")
        .bind("nowhere/S1")
        .bind(1)
        .bind(None::<&str>)
        .execute(&conn)
        .await
        .unwrap();
    let stopped = migrator.run(&conn).await.unwrap_err().to_string();
    assert!(
        stopped.contains("events of no show: Seat nowhere/S1"),
        "{stopped}"
    );
    let unnamed: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE show_id IS NULL")
        .fetch_one(&conn)
        .await
        .unwrap();
    assert_eq!(unnamed, 3, "a stopped migration changes nothing");
    // Named by hand, as the migration's hint says: it then goes through.
    sqlx::query("UPDATE events SET show_id = 'nowhere' WHERE aggregate_id = 'nowhere/S1'")
        .execute(&conn)
        .await
        .unwrap();
    migrator.run(&conn).await.unwrap();
    let shows: Vec<(String, i64, String)> = sqlx::query_as(
        "SELECT aggregate_id, sequence, show_id FROM events ORDER BY aggregate_type, aggregate_id, sequence",
    )
    .fetch_all(&conn)
    .await
    .unwrap();
    assert_eq!(
        shows,
        [
            (hold.clone(), 1, "old".to_owned()),
            ("nowhere/S1".to_owned(), 1, "nowhere".to_owned()),
            ("old/S1".to_owned(), 1, "old".to_owned()),
            ("old/S1".to_owned(), 2, "old".to_owned()),
        ]
    );
}

/// PostgreSQL only: a log whose positions were the whole log's (from
/// transaction ids, migrations up to 0024), migrated in place by 0025. Each
/// show goes on from its last position; a reader's one position becomes
/// each show's last event at or below it, and so does a webhook endpoint's;
/// the service then reads on from there and appends above each show's
/// head.
async fn a_log_from_before_positions_per_show_keeps_each_readers_place_as_it_migrates(
    env: TestEnv,
) {
    const BEFORE_POSITIONS_PER_SHOW: i64 = 24;
    let (migrator, conn, url, _dir) = migrated_to(&env, BEFORE_POSITIONS_PER_SHOW).await;
    // Two shows' events, interleaved in the log's one order.
    for (show, seat, position) in [("a", 1, 100), ("b", 1, 200), ("a", 2, 300), ("b", 2, 400)] {
        sqlx::query(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, \
             payload, metadata, show_id, position) \
             VALUES ('Seat', $1, 1, 'HoldReleased', '1.0', \
                     '{\"HoldReleased\":{\"hold_id\":\"00000000-0000-0000-0000-000000000001\"}}', \
                     '{}', $2, $3)",
        )
        .bind(format!("{show}/S{seat}"))
        .bind(show)
        .bind(position)
        .execute(&conn)
        .await
        .unwrap();
    }
    // The projector had read to 250; the dispatcher to 400; an endpoint
    // was made at 300.
    for (name, position) in [("projections", 250), ("webhooks", 400)] {
        sqlx::query("UPDATE projector_checkpoints SET position = $2 WHERE name = $1")
            .bind(name)
            .bind(position)
            .execute(&conn)
            .await
            .unwrap();
    }
    sqlx::query(
        "INSERT INTO webhook_endpoints (endpoint_id, url, events, secret, after_position, created_at_us) \
         VALUES ($1, 'https://example.test/hook', '[\"booking.confirmed\"]', 'whsec_x', 300, 0)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .execute(&conn)
    .await
    .unwrap();

    migrator.run(&conn).await.unwrap();
    let heads: Vec<(String, i64)> =
        sqlx::query_as("SELECT show_id, position FROM log_heads ORDER BY show_id")
            .fetch_all(&conn)
            .await
            .unwrap();
    assert_eq!(heads, [("a".to_owned(), 300), ("b".to_owned(), 400)]);
    let endpoint: String = sqlx::query_scalar("SELECT after_shows FROM webhook_endpoints")
        .fetch_one(&conn)
        .await
        .unwrap();
    let endpoint = booking::store::LogCursor::from_json(&endpoint).unwrap();
    assert_eq!((endpoint.of("a"), endpoint.of("b")), (300, 200));
    let readers: Vec<(String, i64, String)> =
        sqlx::query_as("SELECT name, position, shows FROM projector_checkpoints ORDER BY name")
            .fetch_all(&conn)
            .await
            .unwrap();
    let cursor = |n: usize| booking::store::LogCursor::from_json(&readers[n].2).unwrap();
    let (projections, webhooks) = (cursor(0), cursor(1));
    assert_eq!((projections.of("a"), projections.of("b")), (100, 200));
    assert_eq!((webhooks.of("a"), webhooks.of("b")), (300, 400));
    assert_eq!(readers[0].1, 250, "the count of moves goes on from there");
    conn.close().await;

    let app = env.spawn_at(url).await;
    let log = app.store.log();
    let (events, read_to) = log.read_after(&projections, 100).await.unwrap();
    let read: Vec<(Option<String>, i64)> = events
        .iter()
        .map(|e| (e.show_id.clone(), e.position))
        .collect();
    assert_eq!(
        read,
        [(Some("a".to_owned()), 300), (Some("b".to_owned()), 400)],
        "the projector reads on from where it was, each show's events after it"
    );
    assert_eq!(read_to, log.head_cursor().await.unwrap());
    let mut next = event("a/S3", 1);
    next.show_id = domain::ids::ShowId::parse("a").unwrap();
    assert_eq!(
        log.append(&batch(vec![next])).await.unwrap(),
        AppendOutcome::Appended
    );
    let (events, _) = log.read_after(&read_to, 100).await.unwrap();
    let positions: Vec<i64> = events.iter().map(|e| e.position).collect();
    // (Above 301 if the projector, applying the events written here
    // without their rows, took a position of show a for its rows first.)
    assert!(
        matches!(positions.as_slice(), [p] if *p > 300),
        "show a goes on from its last position: {positions:?}"
    );
    app.stop().await;
}

/// A test's database migrated up to `version` (PostgreSQL), on a pool of
/// one connection: a migration that fails keeps its advisory lock on the
/// connection it ran on (sqlx), which the next run must be. With the
/// migrator of every migration, for the test to run the rest.
async fn migrated_to(
    env: &TestEnv,
    version: i64,
) -> (
    sqlx::migrate::Migrator,
    sqlx::PgPool,
    String,
    Option<tempfile::TempDir>,
) {
    let migrator = sqlx::migrate!("./migrations/postgres");
    let mut earlier = sqlx::migrate!("./migrations/postgres");
    earlier.migrations = std::borrow::Cow::Owned(
        (migrator.migrations.iter())
            .filter(|m| m.version <= version)
            .cloned()
            .collect(),
    );
    let (url, dir) = env.database_url().await;
    let conn = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    earlier.run(&conn).await.unwrap();
    (migrator, conn, url, dir)
}
