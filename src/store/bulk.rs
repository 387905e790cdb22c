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

/// The `SET` list (every column but the key's, from `u`) and the join
/// condition (`t` and `u` on the key) of a guarded update of `columns`.
pub(super) fn guarded_update(columns: &[&str], key: &[&str]) -> (String, String) {
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
