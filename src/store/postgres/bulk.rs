//! Rebuilt tables written set-based on PostgreSQL (see `store/bulk.rs`):
//! `COPY ... FROM STDIN` straight into the reset tables, and for the seat
//! and shard rows a COPY into a temporary table and one `UPDATE ... FROM`.

use serde::Serialize;
use sqlx::PgConnection;

use crate::store::bulk::guarded_update;
use crate::store::flat::CopyText;
use crate::store::tables::{Table, Tables, POOL_SHARD_COLUMNS, SEAT_AVAILABILITY_COLUMNS};
use crate::store::{StoreError, StoreResult};

/// COPY text built before it is sent: bounds the memory of a write of
/// millions of rows, in pieces large enough that the round trips do not
/// count.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Sends `rows` to `COPY {target} ({their columns}) FROM STDIN`; returns
/// the rows the server took.
async fn copy_in<'r, T: Serialize + 'r>(
    conn: &mut PgConnection,
    target: &str,
    rows: impl IntoIterator<Item = &'r T>,
) -> StoreResult<u64> {
    let mut rows = rows.into_iter();
    let Some(first) = rows.next() else {
        return Ok(0);
    };
    let mut text = CopyText::default();
    text.push(first)?;
    let statement = format!("COPY {target} ({}) FROM STDIN", text.columns());
    let mut copy = conn
        .copy_in_raw(&statement)
        .await
        .map_err(StoreError::classify)?;
    for row in rows {
        text.push(row)?;
        if text.len() >= COPY_CHUNK_BYTES {
            copy.send(text.take().into_bytes())
                .await
                .map_err(StoreError::classify)?;
        }
    }
    if !text.is_empty() {
        copy.send(text.take().into_bytes())
            .await
            .map_err(StoreError::classify)?;
    }
    copy.finish().await.map_err(StoreError::classify)
}

/// Rows that update rows of `table` that stay (seat and shard rows): a COPY
/// into a temporary table of the same columns, dropped at commit, then one
/// `UPDATE ... FROM` it, guarded by `last_seq` as the append is.
async fn update_from<'r, T: Serialize + 'r>(
    conn: &mut PgConnection,
    table: &str,
    columns: &[&str],
    key: &[&str],
    rows: impl IntoIterator<Item = &'r T>,
) -> StoreResult<()> {
    let scratch = format!("rebuilt_{table}");
    let create = format!(
        "CREATE TEMPORARY TABLE {scratch} ON COMMIT DROP AS SELECT {} FROM {table} WITH NO DATA",
        columns.join(", ")
    );
    sqlx::query(&create)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::classify)?;
    if copy_in(conn, &scratch, rows).await? == 0 {
        return Ok(());
    }
    let (set, matched) = guarded_update(columns, key);
    let update = format!(
        "UPDATE {table} AS t SET {set} FROM {scratch} AS u WHERE {matched} AND t.last_seq < u.last_seq"
    );
    sqlx::query(&update)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::classify)?;
    Ok(())
}

/// Writes the rows of the `reset` tables on PostgreSQL; returns the
/// statements that carried rows.
pub(super) async fn write_reset(
    conn: &mut PgConnection,
    tables: &Tables,
    reset: &[Table],
) -> StoreResult<usize> {
    let mut statements = 0;
    for table in reset {
        let rows = match table {
            Table::SeatAvailability => {
                update_from(
                    conn,
                    "seat_availability",
                    SEAT_AVAILABILITY_COLUMNS,
                    &["show_id", "seat_id"],
                    tables.seat_availability.values(),
                )
                .await?;
                tables.seat_availability.len()
            }
            Table::PoolShards => {
                update_from(
                    conn,
                    "pool_shards",
                    POOL_SHARD_COLUMNS,
                    &["show_id", "pool_id", "shard"],
                    tables.pool_shards.values(),
                )
                .await?;
                tables.pool_shards.len()
            }
            Table::Holds => copy_in(conn, "holds", tables.holds.values()).await? as usize,
            Table::PoolHolds => {
                copy_in(conn, "pool_holds", tables.pool_holds.values()).await? as usize
            }
            Table::Checkouts => {
                copy_in(conn, "checkouts", tables.checkouts.values()).await? as usize
            }
        };
        statements += usize::from(rows > 0);
    }
    Ok(statements)
}
