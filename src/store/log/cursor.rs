//! Where a reader of every show has read the log to: a position per show.
//!
//! An event's place in the log is its show and a position that only grows
//! within that show, in commit order (migration 0025 on PostgreSQL: each
//! show's head is locked from the moment an append takes its positions to
//! its commit; SQLite has one writer). So a reader that keeps the last
//! position it read of each show never passes an event that commits late,
//! and never waits for a transaction of another show; positions of two
//! shows say nothing of which came first.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::read::LogEvent;
use crate::store::{StoreError, StoreResult};

/// The last position read of each show; a show it does not name: none yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LogCursor(BTreeMap<String, i64>);

impl LogCursor {
    /// The last position read of `show` (0: none).
    pub fn of(&self, show: &str) -> i64 {
        self.0.get(show).copied().unwrap_or(0)
    }

    /// Whether the event at `position` of `show` was read already.
    pub fn has_read(&self, show: &str, position: i64) -> bool {
        position <= self.of(show)
    }

    /// Moves past `event` (an event of no show, which only an old SQLite
    /// log holds, is nobody's to follow).
    pub fn pass(&mut self, event: &LogEvent) {
        if let Some(show) = &event.show_id {
            self.move_to(show, event.position);
        }
    }

    /// Moves `show`'s position to `position`, never back.
    pub fn move_to(&mut self, show: &str, position: i64) {
        let at = self.0.entry(show.to_owned()).or_insert(0);
        *at = (*at).max(position);
    }

    /// The shows whose head is past this cursor, each with where it was
    /// read to and its head, in the order `heads` gives them.
    pub fn behind<'h>(&self, heads: &'h [(String, i64)]) -> Vec<(&'h str, i64, i64)> {
        heads
            .iter()
            .filter(|(show, head)| *head > self.of(show))
            .map(|(show, head)| (show.as_str(), self.of(show), *head))
            .collect()
    }

    /// As stored: a JSON object of show to position.
    pub fn to_json(&self) -> String {
        serde_json::Value::from(
            self.0
                .iter()
                .map(|(show, at)| (show.clone(), serde_json::Value::from(*at)))
                .collect::<serde_json::Map<_, _>>(),
        )
        .to_string()
    }

    /// From its stored form.
    pub fn from_json(stored: &str) -> StoreResult<Self> {
        serde_json::from_str(stored)
            .map_err(|e| StoreError::Corrupt(format!("a reader's positions: {e}: {stored}")))
    }
}

/// A reader's stored checkpoint: its positions, and the count of its
/// moves, which a move names to be sure no other reader moved it meanwhile
/// (compare-and-set: `CheckpointMove`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub moves: i64,
    pub cursor: LogCursor,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(show: Option<&str>, position: i64) -> LogEvent {
        LogEvent {
            position,
            aggregate_type: "Seat".into(),
            aggregate_id: "s/A-1".into(),
            sequence: 1,
            event_type: "HoldPlaced".into(),
            payload: "{}".into(),
            metadata: "{}".into(),
            recorded_at_us: 0,
            show_id: show.map(str::to_owned),
            rows_written: true,
        }
    }

    #[test]
    fn a_cursor_moves_each_show_forward_only_and_keeps_it_through_json() {
        let mut cursor = LogCursor::default();
        cursor.pass(&event(Some("a"), 7));
        cursor.pass(&event(Some("b"), 3));
        cursor.pass(&event(Some("a"), 5));
        cursor.pass(&event(None, 99));
        assert_eq!((cursor.of("a"), cursor.of("b"), cursor.of("c")), (7, 3, 0));
        assert!(cursor.has_read("a", 7) && !cursor.has_read("a", 8));
        let stored = cursor.to_json();
        assert_eq!(stored, r#"{"a":7,"b":3}"#);
        assert_eq!(LogCursor::from_json(&stored).unwrap(), cursor);
        assert!(LogCursor::from_json("[1]").is_err());
    }

    #[test]
    fn the_shows_behind_are_those_whose_head_passed_the_cursor() {
        let mut cursor = LogCursor::default();
        cursor.move_to("a", 4);
        cursor.move_to("b", 9);
        let heads = vec![
            ("a".to_owned(), 6),
            ("b".to_owned(), 9),
            ("c".to_owned(), 1),
        ];
        assert_eq!(cursor.behind(&heads), vec![("a", 4, 6), ("c", 0, 1)]);
    }
}
