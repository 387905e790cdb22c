//! `booking verify`: rebuilds every projection from the log into scratch
//! tables, and compares them with the live ones.
//!
//! The scratch tables live in memory: the rows come from the same fold and
//! row builders as replay, and are applied with the semantics the SQL
//! writers have (a seat, shard or checkout row is replaced only by a later
//! stream sequence; a hold record is inserted once and moves from `held`
//! once). That is a second, independent implementation of applying rows,
//! so a writer bug shows up as a difference too, and verifying never writes
//! to the database or holds a lock.

use std::collections::BTreeMap;
use std::fmt::Debug;

use crate::catalog::ShowCatalog;
use crate::rebuild::fold::Rebuild;

use crate::store::{EventLog, ProjectionTables, StoreError, Tables};

/// Every difference between two maps, described one per line.
fn differences<K: Ord + Debug, V: PartialEq + Debug>(
    table: &str,
    live: &BTreeMap<K, V>,
    rebuilt: &BTreeMap<K, V>,
    out: &mut Vec<String>,
) {
    for (key, value) in live {
        match rebuilt.get(key) {
            None => out.push(format!(
                "{table} {key:?}: live has {value:?}, the log has no such row"
            )),
            Some(expected) if expected != value => {
                out.push(format!(
                    "{table} {key:?}: live {value:?}, from the log {expected:?}"
                ));
            }
            Some(_) => {}
        }
    }
    for (key, value) in rebuilt {
        if !live.contains_key(key) {
            out.push(format!(
                "{table} {key:?}: missing live, from the log {value:?}"
            ));
        }
    }
}

/// Rebuilds every projection from the log and returns the differences with
/// the live tables (empty: they agree). Correct while the service runs: most
/// of the log is folded while commands go on (each show in commit order);
/// then, in a phase in which no append commits (`Store::quiesce`; appends
/// wait meanwhile), the live tables are read and the rest of the log folded,
/// so both sides stand at the same instant of the log. Nothing is written.
pub async fn verify(
    log: &EventLog,
    tables: &ProjectionTables,
    catalog: &ShowCatalog,
) -> Result<Vec<String>, StoreError> {
    let mut rebuild = Rebuild::default();
    rebuild.advance(log, catalog).await?;
    let quiesced = tables.quiesce().await?;
    let live = tables.dump_projections().await?;
    rebuild.advance(log, catalog).await?;
    drop(quiesced);
    Ok(compare(&live, &rebuild.tables))
}

/// Every difference between the live tables and the rebuilt ones.
fn compare(live: &Tables, rebuilt: &Tables) -> Vec<String> {
    let mut out = Vec::new();
    differences(
        "seat_availability",
        &live.seat_availability,
        &rebuilt.seat_availability,
        &mut out,
    );
    differences(
        "pool_shards",
        &live.pool_shards,
        &rebuilt.pool_shards,
        &mut out,
    );
    differences("holds", &live.holds, &rebuilt.holds, &mut out);
    differences(
        "pool_holds",
        &live.pool_holds,
        &rebuilt.pool_holds,
        &mut out,
    );
    differences("checkouts", &live.checkouts, &rebuilt.checkouts, &mut out);
    out
}
