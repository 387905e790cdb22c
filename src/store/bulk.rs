//! Rebuilt tables written into the tables a write phase has just reset
//! (`booking replay`): every hold, hold-seat, pool-hold and checkout row is
//! new there, and every seat and shard row replaces a reset one, so the
//! rows go in set-based instead of as append documents. PostgreSQL: `COPY
//! ... FROM STDIN` straight into the reset tables, and for the seat and
//! shard rows (updates of rows that stay) a COPY into a temporary table and
//! one `UPDATE ... FROM` it, with the guard the append has. SQLite:
//! prepared multi-row statements of bound parameters (`INSERT ... VALUES`,
//! `WITH u AS (VALUES ...) UPDATE ... FROM u`), as many rows each as its
//! parameter limit allows, instead of JSON documents read with `json_each`.

use serde::Serialize;
use sqlx::{PgConnection, SqliteConnection};

use super::flat::{CopyText, SqlValue, SqlValues};
use super::tables::{Table, Tables, POOL_SHARD_COLUMNS, SEAT_AVAILABILITY_COLUMNS};
use super::{StoreError, StoreResult};

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
pub(super) async fn write_postgres(
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

/// Parameters one SQLite statement takes at most
/// (`SQLITE_MAX_VARIABLE_NUMBER`, 32,766 since SQLite 3.32): a bulk
/// statement carries as many rows as fit.
const SQLITE_PARAMETERS: usize = 32_766;

/// A statement of `rows` rows of `columns` into `table`: an insert, or with
/// a `key`, an update of the rows that stay, guarded by `last_seq` as the
/// append is.
fn sqlite_statement(table: &str, columns: &[&str], key: Option<&[&str]>, rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns.len()].join(", "));
    let values = vec![row.as_str(); rows].join(", ");
    let names = columns.join(", ");
    match key {
        None => format!("INSERT INTO {table} ({names}) VALUES {values}"),
        Some(key) => {
            let (set, matched) = guarded_update(columns, key);
            format!(
                "WITH u ({names}) AS (VALUES {values}) \
                 UPDATE {table} AS t SET {set} FROM u WHERE {matched} AND t.last_seq < u.last_seq"
            )
        }
    }
}

/// Writes `rows` into `table` on SQLite (see [`sqlite_statement`]).
async fn sqlite_rows<'r, T: Serialize + 'r>(
    conn: &mut SqliteConnection,
    table: &str,
    key: Option<&[&str]>,
    rows: impl IntoIterator<Item = &'r T>,
) -> StoreResult<usize> {
    let mut rows = rows.into_iter();
    let mut values = SqlValues::default();
    let mut statements = 0;
    loop {
        let mut per_statement = usize::MAX;
        for row in rows.by_ref() {
            values.push(row)?;
            per_statement = SQLITE_PARAMETERS / values.columns().len().max(1);
            if values.rows() >= per_statement.max(1) {
                break;
            }
        }
        if values.rows() == 0 {
            return Ok(statements);
        }
        let full = values.rows() >= per_statement.max(1);
        let sql = sqlite_statement(table, values.columns(), key, values.rows());
        // Only the full statement comes back (once a table); a last,
        // shorter one is not kept in the connection's statement cache.
        let mut query = sqlx::query(&sql).persistent(full);
        for value in values.take() {
            query = match value {
                SqlValue::Null => query.bind(None::<String>),
                SqlValue::Integer(v) => query.bind(v),
                SqlValue::Real(v) => query.bind(v),
                SqlValue::Text(v) => query.bind(v),
            };
        }
        query
            .execute(&mut *conn)
            .await
            .map_err(StoreError::classify)?;
        statements += 1;
        if !full {
            return Ok(statements);
        }
    }
}

/// Writes the rows of the `reset` tables on SQLite; returns the statements
/// that carried rows.
pub(super) async fn write_sqlite(
    conn: &mut SqliteConnection,
    tables: &Tables,
    reset: &[Table],
) -> StoreResult<usize> {
    let mut statements = 0;
    for table in reset {
        statements += match table {
            Table::SeatAvailability => {
                sqlite_rows(
                    conn,
                    "seat_availability",
                    Some(&["show_id", "seat_id"]),
                    tables.seat_availability.values(),
                )
                .await?
            }
            Table::PoolShards => {
                sqlite_rows(
                    conn,
                    "pool_shards",
                    Some(&["show_id", "pool_id", "shard"]),
                    tables.pool_shards.values(),
                )
                .await?
            }
            Table::Holds => sqlite_rows(conn, "holds", None, tables.holds.values()).await?,
            Table::PoolHolds => {
                sqlite_rows(conn, "pool_holds", None, tables.pool_holds.values()).await?
            }
            Table::Checkouts => {
                sqlite_rows(conn, "checkouts", None, tables.checkouts.values()).await?
            }
        };
    }
    Ok(statements)
}

/// The `SET` list (every column but the key's, from `u`) and the join
/// condition (`t` and `u` on the key) of a guarded update of `columns`.
fn guarded_update(columns: &[&str], key: &[&str]) -> (String, String) {
    let set = columns
        .iter()
        .filter(|c| !key.contains(c))
        .map(|c| format!("{c} = u.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let matched = key
        .iter()
        .map(|c| format!("t.{c} = u.{c}"))
        .collect::<Vec<_>>()
        .join(" AND ");
    (set, matched)
}
