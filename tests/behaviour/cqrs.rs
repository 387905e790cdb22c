//! cqrs-es, checkably: the streams the service writes load through a stock
//! `PersistedEventStore` over the stock postgres-es / sqlite-es repository,
//! and `Aggregate::handle` on what they load decides as the service does.

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::persist::{EventStoreAggregateContext, PersistedEventStore};
use cqrs_es::{Aggregate, EventEnvelope, EventStore};
use domain::aggregate::Timed;
use domain::checkout::{Checkout, CheckoutCommand, CheckoutError, CheckoutEvent, Phase};
use domain::ids::{seat_stream_id, BookingId, BuyerId, HoldId, PoolId, SeatId, ShowId, TicketType};
use domain::pool::{shard_capacity, shard_stream_id, PoolCommand, PoolError, PoolEvent, PoolShard};
use domain::pricing::ItemPrice;
use domain::seat::{Seat, SeatCommand, SeatError, SeatHold, SeatState};
use postgres_es::PostgresEventRepository;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use sqlite_es::SqliteEventRepository;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::SqlitePoolOptions;
use sqlx::{PgPool, SqlitePool};

use crate::support::{show_body, Answer, Backend, TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![cqrs_es_loads_the_services_streams_and_decides_as_the_service_does]
}

/// The test's own database, opened beside the service's pools.
pub(crate) enum Db {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

impl Db {
    pub(crate) async fn open(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Postgres => Db::Postgres(
                PgPoolOptions::new()
                    .max_connections(2)
                    .connect(url)
                    .await
                    .expect("open a PgPool to the test's database"),
            ),
            Backend::Sqlite => Db::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(2)
                    .connect(url)
                    .await
                    .expect("open a SqlitePool to the test's database"),
            ),
        }
    }

    /// The aggregate and its version, as a stock event store loads them.
    pub(crate) async fn load<A: Aggregate + Send + Sync>(
        &self,
        id: &str,
    ) -> EventStoreAggregateContext<A> {
        let loaded = match self {
            Db::Postgres(pool) => {
                PersistedEventStore::<_, A>::new_event_store(PostgresEventRepository::new(
                    pool.clone(),
                ))
                .load_aggregate(id)
                .await
            }
            Db::Sqlite(pool) => {
                PersistedEventStore::<_, A>::new_event_store(SqliteEventRepository::new(
                    pool.clone(),
                ))
                .load_aggregate(id)
                .await
            }
        };
        loaded.unwrap_or_else(|e| panic!("load {} {id}: {e}", A::TYPE))
    }

    /// The stream's envelopes, as a stock event store loads them.
    async fn envelopes<A: Aggregate + Send + Sync>(&self, id: &str) -> Vec<EventEnvelope<A>> {
        let loaded = match self {
            Db::Postgres(pool) => {
                PersistedEventStore::<_, A>::new_event_store(PostgresEventRepository::new(
                    pool.clone(),
                ))
                .load_events(id)
                .await
            }
            Db::Sqlite(pool) => {
                PersistedEventStore::<_, A>::new_event_store(SqliteEventRepository::new(
                    pool.clone(),
                ))
                .load_events(id)
                .await
            }
        };
        loaded.unwrap_or_else(|e| panic!("load events of {} {id}: {e}", A::TYPE))
    }

    /// `(rows, highest sequence)` of one stream in the events table, by SQL.
    async fn stream_rows<A: Aggregate>(&self, id: &str) -> (i64, i64) {
        const SQL: &str = "SELECT COUNT(*), COALESCE(MAX(sequence), 0) FROM events \
                           WHERE aggregate_type = $1 AND aggregate_id = $2";
        let rows: Result<(i64, i64), sqlx::Error> = match self {
            Db::Postgres(pool) => {
                sqlx::query_as(SQL)
                    .bind(A::TYPE)
                    .bind(id)
                    .fetch_one(pool)
                    .await
            }
            Db::Sqlite(pool) => {
                sqlx::query_as(SQL)
                    .bind(A::TYPE)
                    .bind(id)
                    .fetch_one(pool)
                    .await
            }
        };
        rows.expect("count a stream's events")
    }

    pub(crate) async fn close(self) {
        match self {
            Db::Postgres(pool) => pool.close().await,
            Db::Sqlite(pool) => pool.close().await,
        }
    }
}

/// What `Aggregate::handle` decides on a copy of the loaded aggregate: the
/// events it wrote to the sink (nothing is committed).
pub(crate) async fn handle<A: Aggregate<Services = ()> + Clone>(
    aggregate: &A,
    command: A::Command,
) -> Result<Vec<A::Event>, A::Error> {
    let mut copy = aggregate.clone();
    let sink = EventSink::<A>::default();
    copy.handle(command, &(), &sink).await?;
    Ok(sink.collect().await)
}

const SHOW: &str = "cqrs";
const POOL: &str = "floor";
const POOL_CAPACITY: u32 = 5;
const POOL_SHARDS: u32 = 1;
const POOL_HELD: u32 = 2;
const POOL_PRICE_CENTS: i64 = 3000;

fn hold_id(answer: &Answer) -> HoldId {
    HoldId(uuid::Uuid::parse_str(&answer.str("hold_id")).expect("hold id"))
}

fn booking_id(answer: &Answer) -> BookingId {
    BookingId(uuid::Uuid::parse_str(&answer.str("booking_id")).expect("booking id"))
}

fn instant(answer: &Answer, field: &str) -> DateTime<Utc> {
    serde_json::from_value(answer.body[field].clone()).expect("an instant")
}

async fn pool_hold(app: &TestApp, token: &str, quantity: u32) -> Answer {
    app.call(
        Method::POST,
        &format!("/v1/shows/{SHOW}/holds"),
        Some(token),
        Some(&json!({"pool_id": POOL, "quantity": quantity})),
        &[],
    )
    .await
}

async fn cqrs_es_loads_the_services_streams_and_decides_as_the_service_does(env: TestEnv) {
    let app = env.spawn().await;
    let mut body = show_body(4, 480);
    body["pools"] = json!([{
        "pool_id": POOL, "capacity": POOL_CAPACITY, "price_cents": POOL_PRICE_CENTS, "shards": POOL_SHARDS
    }]);
    app.create_show_from(SHOW, &body).await;

    // 1. Through the HTTP API: two seats held and bought, one seat held, two pool places held.
    let alice = app.buyer("alice");
    let bob = app.buyer("bob");
    let alice_id = BuyerId::parse("alice").unwrap();
    let bob_id = BuyerId::parse("bob").unwrap();
    let bought_hold = app.hold(&alice, SHOW, &["S1", "S2"], None).await;
    assert_eq!(
        bought_hold.status,
        StatusCode::CREATED,
        "{}",
        bought_hold.body
    );
    let pool_held = pool_hold(&app, &alice, POOL_HELD).await;
    assert_eq!(pool_held.status, StatusCode::CREATED, "{}", pool_held.body);
    let bought = app
        .purchase(&alice, &bought_hold.str("hold_id"), "pm_sim_ok")
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
    let held = app.hold(&alice, SHOW, &["S3"], None).await;
    assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);

    let (bought_hold_id, held_id, pool_hold_id) =
        (hold_id(&bought_hold), hold_id(&held), hold_id(&pool_held));
    let booking = booking_id(&bought);
    let show = ShowId::parse(SHOW).unwrap();
    let booked_stream = seat_stream_id(&show, &SeatId::parse("S1").unwrap());
    let held_stream = seat_stream_id(&show, &SeatId::parse("S3").unwrap());
    let checkout_stream = bought_hold_id.to_string();
    let statuses = app.seat_statuses(SHOW).await;
    assert_eq!(
        (statuses["S1"].as_str(), statuses["S3"].as_str()),
        ("booked", "held")
    );

    // 2. Load the streams through a stock PersistedEventStore over the stock repository.
    let db = Db::open(env.backend, &app.database_url).await;

    let booked_seat = db.load::<Seat>(&booked_stream).await;
    assert_eq!(
        booked_seat.aggregate.state,
        SeatState::Booked {
            hold_id: bought_hold_id,
            booking_id: booking,
            buyer: alice_id.clone(),
            returns_to_waitlist: false,
        }
    );
    let held_seat = db.load::<Seat>(&held_stream).await;
    assert_eq!(
        held_seat.aggregate.state,
        SeatState::Held(SeatHold {
            hold_id: held_id,
            buyer: alice_id.clone(),
            expires_at: instant(&held, "expires_at"),
            placed_expires_at: instant(&held, "expires_at"),
            returns_to_waitlist: false,
            offer: false,
        })
    );

    let pool_id = PoolId::parse(POOL).unwrap();
    let mut shard = None;
    for index in 0..POOL_SHARDS {
        let id = shard_stream_id(&show, &pool_id, index);
        let loaded = db.load::<PoolShard>(&id).await;
        if loaded.aggregate.holds.contains_key(&pool_hold_id) {
            shard = Some((
                id,
                shard_capacity(POOL_CAPACITY, POOL_SHARDS, index),
                loaded,
            ));
        }
    }
    let (shard_stream, capacity, shard) = shard.expect("a shard holds the pool hold");
    let pool_part = &shard.aggregate.holds[&pool_hold_id];
    assert_eq!(
        (pool_part.quantity, &pool_part.buyer, pool_part.expires_at),
        (POOL_HELD, &alice_id, instant(&pool_held, "expires_at"))
    );
    let floor = app.availability(SHOW).await.body["pools"][0].clone();
    let now = app.clock_now();
    assert_eq!(
        (
            floor["held"].clone(),
            floor["available"].clone(),
            floor["sold"].clone()
        ),
        (
            json!(shard.aggregate.held_at(now)),
            json!(shard.aggregate.available_at(None, capacity, now)),
            json!(shard.aggregate.sold)
        ),
        "the service's pool figures are the loaded shard's"
    );

    let checkout = db.load::<Checkout>(&checkout_stream).await;
    assert_eq!(
        checkout.aggregate.phase,
        Phase::Completed {
            booking_id: booking,
            charge_id: bought.str("charge_id"),
            amount_cents: bought.body["amount_cents"].as_i64().expect("amount"),
        }
    );
    assert_eq!(
        (
            checkout.aggregate.hold_id,
            checkout.aggregate.buyer.as_ref(),
            checkout.aggregate.attempts
        ),
        (Some(bought_hold_id), Some(&alice_id), 1)
    );

    // Each loaded version is the stream's last sequence in the events table,
    // and the envelopes are the rows in order.
    let streams_before = (
        db.stream_rows::<Seat>(&booked_stream).await,
        db.stream_rows::<Seat>(&held_stream).await,
        db.stream_rows::<PoolShard>(&shard_stream).await,
        db.stream_rows::<Checkout>(&checkout_stream).await,
    );
    for ((rows, last), version, what) in [
        (
            streams_before.0,
            booked_seat.current_sequence,
            "booked seat",
        ),
        (streams_before.1, held_seat.current_sequence, "held seat"),
        (streams_before.2, shard.current_sequence, "shard"),
        (streams_before.3, checkout.current_sequence, "checkout"),
    ] {
        assert!(rows > 0, "{what}: the stream has events");
        assert_eq!(
            (version as i64, version as i64),
            (rows, last),
            "{what}: loaded version"
        );
    }
    let envelopes = db.envelopes::<Checkout>(&checkout_stream).await;
    let sequences: Vec<usize> = envelopes.iter().map(|e| e.sequence).collect();
    assert_eq!(
        sequences,
        (1..=checkout.current_sequence).collect::<Vec<_>>()
    );
    assert!(envelopes.iter().all(|e| e.aggregate_id == checkout_stream));
    assert!(matches!(
        envelopes.last().map(|e| &e.payload),
        Some(CheckoutEvent::CheckoutCompleted { booking_id, .. }) if *booking_id == booking
    ));
    let events_before = app.event_count().await;

    // 3. `handle` on what was loaded. Seat: bob asks for the booked and the held seat.
    let now = app.clock_now();
    let expires_at = now + chrono::Duration::seconds(480);
    let bob_place = |hold_id| Timed {
        command: SeatCommand::PlaceHold {
            hold_id,
            buyer: bob_id.clone(),
            expires_at,
            price: None,
            channel: None,
            role: domain::seat::WaitlistRole::None,
        },
        now,
    };
    let bob_hold = HoldId::random();
    assert_eq!(
        handle(&booked_seat.aggregate, bob_place(bob_hold)).await,
        Err(SeatError::Booked)
    );
    assert_eq!(
        handle(&held_seat.aggregate, bob_place(bob_hold)).await,
        Err(SeatError::HeldByAnother)
    );
    // The holder asking again, and the conversion retried: nothing to do.
    let again = Timed {
        command: SeatCommand::PlaceHold {
            hold_id: held_id,
            buyer: alice_id.clone(),
            expires_at: instant(&held, "expires_at"),
            price: None,
            channel: None,
            role: domain::seat::WaitlistRole::None,
        },
        now,
    };
    assert_eq!(handle(&held_seat.aggregate, again).await, Ok(vec![]));
    let convert_again = Timed {
        command: SeatCommand::ConvertHold {
            hold_id: bought_hold_id,
            booking_id: booking,
        },
        now,
    };
    assert_eq!(
        handle(&booked_seat.aggregate, convert_again).await,
        Ok(vec![])
    );

    // PoolShard: more than its free places is refused, as many is placed.
    let free = shard.aggregate.available_at(None, capacity, now);
    assert!(free > 0, "the shard has free places left");
    // A place of the pool, as the service prices it: the pool's own price
    // for the show's one ticket type.
    let place_price = ItemPrice {
        category: None,
        ticket_type: TicketType::parse("standard").expect("a ticket type"),
        price_cents: POOL_PRICE_CENTS,
    };
    let bob_pool = |quantity| {
        (
            PoolCommand::PlaceHold {
                hold_id: bob_hold,
                buyer: bob_id.clone(),
                quantity,
                expires_at,
                price: Some(place_price.clone()),
                channel: None,
                role: domain::seat::WaitlistRole::None,
            },
            capacity,
            now,
        )
    };
    assert_eq!(
        handle(&shard.aggregate, bob_pool(free + 1)).await,
        Err(PoolError::NotEnough { available: free })
    );
    assert_eq!(
        handle(&shard.aggregate, bob_pool(free)).await,
        Ok(vec![PoolEvent::PoolHoldPlaced {
            hold_id: bob_hold,
            buyer: bob_id.clone(),
            quantity: free,
            expires_at,
            price: Some(place_price.clone()),
            channel: None,
            returns_to_waitlist: false,
            offer: false,
        }])
    );

    // Checkout: the purchase asked again records nothing; completing twice is refused.
    let purchase_again = CheckoutCommand::RequestPurchase {
        hold_id: bought_hold_id,
        show_id: show.clone(),
        buyer: alice_id.clone(),
        payment_method: "pm_sim_ok".into(),
        amount_cents: bought.body["amount_cents"].as_i64().expect("amount"),
        currency: domain::money::Currency::EUR,
    };
    assert_eq!(
        handle(&checkout.aggregate, purchase_again).await,
        Ok(vec![])
    );
    assert_eq!(
        handle(&checkout.aggregate, CheckoutCommand::Complete).await,
        Err(CheckoutError::WrongPhase {
            command: "Complete",
            phase: "completed",
        })
    );

    // `handle` only returned events: nothing was appended anywhere.
    assert_eq!(app.event_count().await, events_before);
    let streams_after = (
        db.stream_rows::<Seat>(&booked_stream).await,
        db.stream_rows::<Seat>(&held_stream).await,
        db.stream_rows::<PoolShard>(&shard_stream).await,
        db.stream_rows::<Checkout>(&checkout_stream).await,
    );
    assert_eq!(streams_after, streams_before);

    // The service, asked the same over HTTP, agrees.
    let taken = app.hold(&bob, SHOW, &["S1"], None).await;
    taken.expect_problem(409, "seat_taken");
    assert_eq!(taken.body["seats"], json!(["S1"]));
    let taken = app.hold(&bob, SHOW, &["S3"], None).await;
    taken.expect_problem(409, "seat_taken");
    assert_eq!(taken.body["seats"], json!(["S3"]));
    let retried = app.purchase(&alice, &checkout_stream, "pm_sim_ok").await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.body);
    assert_eq!(
        retried.body, bought.body,
        "the same booking, no new purchase"
    );
    let refused = pool_hold(&app, &bob, free + 1).await;
    refused.expect_problem(409, "sold_out");
    assert_eq!(refused.body["available"], json!(free));
    assert_eq!(
        app.event_count().await,
        events_before,
        "refusals and a repeated purchase append nothing"
    );
    assert_eq!(
        (
            db.stream_rows::<Seat>(&booked_stream).await,
            db.stream_rows::<Seat>(&held_stream).await,
            db.stream_rows::<Checkout>(&checkout_stream).await,
        ),
        (streams_before.0, streams_before.1, streams_before.3)
    );

    let placed = pool_hold(&app, &bob, free).await;
    assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.body);
    let envelopes = db.envelopes::<PoolShard>(&shard_stream).await;
    let appended: Vec<&PoolEvent> = envelopes
        .iter()
        .filter(|e| e.sequence > shard.current_sequence)
        .map(|e| &e.payload)
        .collect();
    assert_eq!(
        appended,
        vec![&PoolEvent::PoolHoldPlaced {
            hold_id: hold_id(&placed),
            buyer: bob_id.clone(),
            quantity: free,
            expires_at: instant(&placed, "expires_at"),
            price: Some(place_price),
            channel: None,
            returns_to_waitlist: false,
            offer: false,
        }],
        "the service appended what handle decided (with its own hold id and instant)"
    );
    let floor: Value = app.availability(SHOW).await.body["pools"][0].clone();
    assert_eq!(floor["available"], json!(0));

    db.close().await;
    app.stop().await;
}
