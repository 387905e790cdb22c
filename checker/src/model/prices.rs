//! The price tables a show has had: its definition's, then each change on
//! its `ShowPrices` stream from its `effective_at`. A hold is priced by the
//! table in force at its decision's instant; the checker knows that instant
//! only within a window (from the request's start, or a bound before the
//! event's record, to the event's record), so it accepts any table in force
//! during the window.

use crate::rows::LogEvent;
use crate::shows::{Price, ShowSpec};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceHistory {
    /// (effective from, table), the definition's first at `i64::MIN`.
    pub tables: Vec<(i64, Vec<Price>)>,
    /// The price of a seat without a category (a show priced per seat).
    pub seat_price: Option<i64>,
}

impl PriceHistory {
    pub fn of(show: &ShowSpec, log: &[LogEvent]) -> Self {
        let mut tables = vec![(i64::MIN, show.prices.clone())];
        let changes = log
            .iter()
            .filter(|e| e.aggregate_type == "ShowPrices" && e.aggregate_id == show.show_id);
        for change in changes {
            let at = change
                .time_us("effective_at")
                .unwrap_or(change.recorded_at_us);
            tables.push((at, table(change)));
        }
        tables.sort_by_key(|(at, _)| *at);
        Self {
            tables,
            seat_price: show.seat_price,
        }
    }

    /// The prices of (`category`, `ticket_type`) in force at some instant
    /// of `[from_us, to_us]`.
    pub fn allowed(
        &self,
        category: Option<&str>,
        ticket_type: &str,
        from_us: i64,
        to_us: i64,
    ) -> Vec<i64> {
        let in_force_from = (self.tables.iter())
            .rposition(|(at, _)| *at <= from_us)
            .unwrap_or(0);
        let mut allowed = Vec::new();
        for (at, table) in &self.tables[in_force_from..] {
            if *at > to_us {
                break;
            }
            let found = table
                .iter()
                .find(|p| p.category.as_deref() == category && p.ticket_type == ticket_type);
            match (found, category) {
                (Some(price), _) => allowed.push(price.price_cents),
                (None, None) => allowed.extend(self.seat_price),
                (None, Some(_)) => {}
            }
        }
        allowed
    }
}

fn table(change: &LogEvent) -> Vec<Price> {
    let entries = change.data().get("prices").and_then(|p| p.as_array());
    entries
        .map(|entries| {
            entries
                .iter()
                .filter_map(|p| {
                    Some(Price {
                        category: p
                            .get("category")
                            .and_then(|c| c.as_str())
                            .map(str::to_owned),
                        ticket_type: p.get("ticket_type")?.as_str()?.to_owned(),
                        price_cents: p.get("price_cents")?.as_i64()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}
