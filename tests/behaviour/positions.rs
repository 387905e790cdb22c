//! Positions across the life of a database: a dump restored into a new
//! cluster (whose transaction ids start low) keeps each show's increasing
//! (its head moves with the data).

use reqwest::{Method, StatusCode};
use serde_json::Value;
use sqlx::Connection;

use crate::cluster::{unavailable, OwnCluster};
use crate::support::TestEnv;
use crate::tests;

pub fn postgres_tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![a_database_moved_to_a_new_cluster_keeps_positions_increasing]
}

/// The source database's transaction ids are made at least this high before
/// its events are written, so that a fresh cluster's ids are surely below
/// them (the situation a move creates), whatever the shared server ran
/// before.
const SOURCE_XIDS: i64 = 50_000;

/// Commits empty transactions in `url`'s cluster until its transaction ids
/// reach `at_least` (through psql: a DO block that commits needs the simple
/// query protocol).
async fn burn_xids_to(url: &str, at_least: i64) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let current: i64 = sqlx::query_scalar("SELECT pg_current_xact_id()::text::bigint")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let _ = conn.close().await;
    if current < at_least {
        let burn = format!(
            "DO $$ BEGIN FOR i IN 1..{} LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$",
            at_least - current
        );
        crate::cluster::psql(url, &["SET synchronous_commit = off", &burn]).unwrap();
    }
}

async fn a_database_moved_to_a_new_cluster_keeps_positions_increasing(env: TestEnv) {
    let cluster = match OwnCluster::start() {
        Ok(cluster) => cluster,
        Err(reason) => return unavailable(&reason),
    };
    let (source_url, _) = env.database_url().await;
    burn_xids_to(&source_url, SOURCE_XIDS).await;
    let app = env.spawn_at(source_url.clone()).await;
    assert_eq!(
        app.create_show("moved", 6, 480).await.status,
        StatusCode::CREATED
    );
    let alice = app.buyer("alice");
    for seat in ["S1", "S2"] {
        let held = app.hold(&alice, "moved", &[seat], None).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    }
    app.projector.run_once().await.unwrap();
    let head_before = app.head_of("moved").await;
    app.stop().await;

    cluster.restore_from(&source_url, "moved").unwrap();
    let moved = env.spawn_at(cluster.url("moved")).await;
    let alice = moved.buyer("alice");
    for seat in ["S3", "S4"] {
        let held = moved.hold(&alice, "moved", &[seat], None).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
    }
    let page = moved
        .call(
            Method::GET,
            &format!("/v1/shows/moved/history?after={head_before}"),
            Some(&moved.admin()),
            None,
            &[],
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let events = page.body["events"].as_array().cloned().unwrap_or_default();
    let placed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "HoldPlaced")
        .collect();
    assert_eq!(
        placed.len(),
        2,
        "the holds made after the move follow the last position before it: {events:?}"
    );
    let pass = moved.projector.run_once().await.unwrap();
    assert!(
        pass.events >= 2 && pass.cursor.of("moved") > head_before,
        "the projector advances past the old head: {pass:?}, head before {head_before}"
    );
    moved.stop().await;
}
