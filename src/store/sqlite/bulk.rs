//! Rebuilt tables written set-based on SQLite (see `store/bulk.rs`):
//! prepared multi-row statements of bound parameters.

use serde::Serialize;
use sqlx::SqliteConnection;

use crate::store::bulk::guarded_update;
use crate::store::flat::{SqlValue, SqlValues};
use crate::store::tables::{Table, Tables};
use crate::store::{StoreError, StoreResult};

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
pub(super) async fn write_reset(
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
