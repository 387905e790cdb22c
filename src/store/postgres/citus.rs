//! A database sharded by show (Citus): at start, after the migrations and
//! the functions, the tables that are not yet distributed are, and the
//! append functions are delegated by their show. On a PostgreSQL without
//! the `citus` extension this does nothing.
//!
//! Every table of a show's sales is distributed by `show_id`, co-located
//! with `events` (a show's rows on one worker: a hold's transaction never
//! spans workers); definitions, checkpoints, webhooks, ticket keys and the
//! payment simulator's ledger are reference tables (a copy on every node).
//! `booking_append(show, …)` and `booking_append_group(show, …)` are
//! delegated to the worker that owns `show`'s shards, where each of their
//! statements names the show and stays on its shard.
//!
//! Distributing is idempotent and takes each table's data with it (Citus
//! copies the rows to the shards), so an existing database moves by being
//! restored into a coordinator (`pg_dump` / `pg_restore`) and starting the
//! service on it (README, "Sharding by show (Citus)").

use sqlx::{PgConnection, PgPool};

use crate::store::StoreError;

/// The log: the first table distributed by show, which the others are
/// co-located with.
const LOG: &str = "events";

/// The other tables whose rows belong to one show each, distributed by
/// `show_id` and co-located with [`LOG`]. Every unique key among them
/// names the show (migrations 0023, 0024; a test reads them from the
/// catalog).
const WITH_LOG: [&str; 6] = [
    "log_heads",
    "seat_availability",
    "pool_shards",
    "holds",
    "pool_holds",
    "checkouts",
];

/// Tables of no show, or of every show: a copy on every node, read where a
/// statement runs, each write a transaction on every node (two-phase).
const REFERENCE: [&str; 9] = [
    "shows",
    "venues",
    "projector_checkpoints",
    "webhook_endpoints",
    "webhook_deliveries",
    "ticket_keys",
    "sim_payments",
    "sim_payment_refunds",
    "sim_charges",
];

/// Distributed by buyer, on its own: a buyer's idempotency keys span shows
/// (a key is unique across them, API.md). A hold with a key writes to the
/// show's worker and the buyer's: a two-phase commit when they differ.
const BY_BUYER: (&str, &str) = ("idempotency_keys", "buyer");

/// The append functions, delegated by their first argument (the show).
const DELEGATED: [&str; 2] = [
    "booking_append(text, jsonb)",
    "booking_append_group(text, jsonb, int[])",
];

/// Serializes instances that start at once against one coordinator (a
/// table distributed twice at once fails).
const DISTRIBUTE_LOCK_KEY: i64 = 0x626f_6f6b_696e_6702;

/// The tables distributed by show: the log, then the rest.
pub fn tables_by_show() -> impl Iterator<Item = &'static str> {
    std::iter::once(LOG).chain(WITH_LOG)
}

/// The table distributed by buyer, and its column.
pub fn table_by_buyer() -> (&'static str, &'static str) {
    BY_BUYER
}

/// Whether the database has the `citus` extension.
pub async fn is_citus(pool: &PgPool) -> Result<bool, StoreError> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')")
        .fetch_one(pool)
        .await
        .map_err(StoreError::classify)
}

/// Distributes what is not yet distributed, and delegates the append
/// functions (again at every start: their definitions were just
/// replaced). One instance at a time, on one connection holding a lock.
pub async fn distribute(pool: &PgPool) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await.map_err(StoreError::classify)?;
    run(
        &mut conn,
        "SELECT pg_advisory_lock($1)",
        &[],
        Some(DISTRIBUTE_LOCK_KEY),
    )
    .await?;
    let distributed = distribute_on(&mut conn).await;
    let unlocked = run(
        &mut conn,
        "SELECT pg_advisory_unlock($1)",
        &[],
        Some(DISTRIBUTE_LOCK_KEY),
    )
    .await;
    distributed.and(unlocked)
}

async fn distribute_on(conn: &mut PgConnection) -> Result<(), StoreError> {
    let distributed: Vec<String> =
        sqlx::query_scalar("SELECT logicalrelid::regclass::text FROM pg_dist_partition")
            .fetch_all(&mut *conn)
            .await
            .map_err(StoreError::classify)?;
    let pending = |table: &str| !distributed.iter().any(|name| name == table);
    for table in REFERENCE.into_iter().filter(|t| pending(t)) {
        run(conn, "SELECT create_reference_table($1)", &[table], None).await?;
        tracing::info!(table, "reference table (Citus)");
    }
    if pending(LOG) {
        run(
            conn,
            "SELECT create_distributed_table($1, 'show_id')",
            &[LOG],
            None,
        )
        .await?;
        tracing::info!(table = LOG, "distributed by show (Citus)");
    }
    for table in WITH_LOG.into_iter().filter(|t| pending(t)) {
        let sql = "SELECT create_distributed_table($1, 'show_id', colocate_with => $2)";
        run(conn, sql, &[table, LOG], None).await?;
        tracing::info!(table, "distributed by show (Citus)");
    }
    if pending(BY_BUYER.0) {
        let sql = "SELECT create_distributed_table($1, $2, colocate_with => 'none')";
        run(conn, sql, &[BY_BUYER.0, BY_BUYER.1], None).await?;
        tracing::info!(table = BY_BUYER.0, "distributed by buyer (Citus)");
    }
    for function in DELEGATED {
        let sql = "SELECT create_distributed_function($1::regprocedure, '$1', colocate_with => $2)";
        run(conn, sql, &[function, LOG], None).await?;
    }
    tracing::info!(
        "sharded by show (Citus): each show's sales, log and positions on its worker; a hold \
         with an idempotency key also writes the buyer's worker (two-phase when it is another)"
    );
    Ok(())
}

async fn run(
    conn: &mut PgConnection,
    sql: &str,
    texts: &[&str],
    key: Option<i64>,
) -> Result<(), StoreError> {
    let mut query = sqlx::query(sql);
    for text in texts {
        query = query.bind(*text);
    }
    if let Some(key) = key {
        query = query.bind(key);
    }
    query
        .execute(conn)
        .await
        .map(drop)
        .map_err(StoreError::classify)
}
