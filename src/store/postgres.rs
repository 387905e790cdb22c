//! The PostgreSQL append: one call of `booking_append(jsonb)` per batch.
//!
//! The function's body lives in one file, `sql/postgres/booking_append.sql`,
//! applied with `CREATE OR REPLACE` after the migrations at every start
//! ([`install_functions`]): changing what the function writes is an edit of
//! that file, never a new migration that restates it, and shipped
//! migrations stay byte for byte as they were applied.

use super::batch::AppendOutcome;
use super::StoreError;

/// The current definitions of our functions, one statement each.
const FUNCTIONS: [&str; 2] = [
    include_str!("../../sql/postgres/booking_append.sql"),
    include_str!("../../sql/postgres/booking_raise_epoch.sql"),
];

/// Serializes instances that start at once against one database: two
/// concurrent `CREATE OR REPLACE` of one function fail with "tuple
/// concurrently updated".
const INSTALL_LOCK_KEY: i64 = 0x626f_6f6b_696e_6701;

/// Applies the functions' current bodies (after the migrations), then
/// raises the log's epoch if the database has moved to a new cluster (see
/// `booking_raise_epoch.sql`). All of it before the service serves, under
/// one lock, so that instances starting together do it one after another.
pub async fn install_functions(pool: &sqlx::PgPool) -> Result<(), StoreError> {
    let mut tx = pool.begin().await.map_err(StoreError::classify)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(INSTALL_LOCK_KEY)
        .execute(&mut *tx)
        .await
        .map_err(StoreError::classify)?;
    for function in FUNCTIONS {
        sqlx::query(function)
            .execute(&mut *tx)
            .await
            .map_err(StoreError::classify)?;
    }
    let offset: i64 = sqlx::query_scalar("SELECT booking_raise_epoch()")
        .fetch_one(&mut *tx)
        .await
        .map_err(StoreError::classify)?;
    tx.commit().await.map_err(StoreError::classify)?;
    if offset != 0 {
        tracing::info!(
            xid_offset = offset,
            "log positions continue above the log's head (epoch)"
        );
    }
    Ok(())
}

/// The SQLSTATEs `booking_append` raises for refusals (not errors).
pub(super) fn refusal(err: &sqlx::Error) -> Option<AppendOutcome> {
    let code = err.as_database_error()?.code()?;
    match code.as_ref() {
        "BK409" => Some(AppendOutcome::Conflict),
        "BK422" => Some(AppendOutcome::IdempotencyKeyTaken),
        "BK412" => Some(AppendOutcome::CheckpointMoved),
        _ => None,
    }
}

pub(super) const APPEND: &str = "SELECT booking_append($1::jsonb)";
/// Projection-only batches (the projector, replay) need not wait for their
/// commit to reach the disk: they are derived from the log, and a batch lost
/// in a crash is lost with its checkpoint move, so it is simply redone.
const APPEND_ROWS_ONLY: &str =
    "SELECT set_config('synchronous_commit', 'off', true), booking_append($1::jsonb)";

pub async fn append(
    pool: &sqlx::PgPool,
    document: &str,
    rows_only: bool,
) -> Result<AppendOutcome, StoreError> {
    let sql = if rows_only { APPEND_ROWS_ONLY } else { APPEND };
    match sqlx::query(sql).bind(document).execute(pool).await {
        Ok(_) => Ok(AppendOutcome::Appended),
        Err(err) => match refusal(&err) {
            Some(outcome) => Ok(outcome),
            None => Err(StoreError::classify(err)),
        },
    }
}
