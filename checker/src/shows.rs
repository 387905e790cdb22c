//! The shows a run sells, small so that many buyers want the same seat:
//! what the checker knows of each (its own copy, to fold the log against)
//! and the definition sent to `PUT /v1/shows/{id}`.
//!
//! - `seated`: two sections of seats, three ticket types (one free), a
//!   sales channel, a waiting list, a short TTL so that holds expire;
//! - `floor`: a pool of two shards, the same ticket types: an order of an
//!   adult hold and a child hold is the path of a pool line cancelled;
//! - `yen`: priced in JPY (price changes that yen cannot express must be
//!   refused), a TTL longer than its waiting list's `offer_seconds`, so an
//!   offer extended late would outlive its offer;
//! - `limited`: a per-buyer limit, no ticket types of its own;
//! - `starting`: a waiting list on a show that starts during the run.

use serde_json::{json, Value};

pub const TICKET_TYPES: [&str; 3] = ["adult", "child", "guest"];

/// A seat as the checker knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatSpec {
    pub seat_id: String,
    pub section: String,
    pub category: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub pool_id: String,
    pub capacity: u32,
    pub shards: u32,
    pub category: Option<String>,
}

/// One entry of a price table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub category: Option<String>,
    pub ticket_type: String,
    pub price_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShowSpec {
    pub show_id: String,
    pub currency: Option<String>,
    pub starts_at_us: i64,
    pub hold_ttl_seconds: u32,
    pub max_hold_seconds: u32,
    pub seats: Vec<SeatSpec>,
    pub pools: Vec<PoolSpec>,
    /// Empty: the service's default type only.
    pub ticket_types: Vec<String>,
    /// The table in force from creation (`seat_price` for seats without a
    /// category).
    pub prices: Vec<Price>,
    pub seat_price: Option<i64>,
    pub channels: Vec<String>,
    pub offer_seconds: Option<u32>,
    /// The waiting list's cap, when the service takes one.
    pub max_entries: Option<usize>,
    pub max_seats_per_buyer: Option<u32>,
}

impl ShowSpec {
    pub fn has_waitlist(&self) -> bool {
        self.offer_seconds.is_some()
    }

    pub fn seat(&self, seat_id: &str) -> Option<&SeatSpec> {
        self.seats.iter().find(|s| s.seat_id == seat_id)
    }

    pub fn pool(&self, pool_id: &str) -> Option<&PoolSpec> {
        self.pools.iter().find(|p| p.pool_id == pool_id)
    }

    /// The ticket types a hold may name.
    pub fn types(&self) -> Vec<String> {
        if self.ticket_types.is_empty() {
            vec!["standard".into()]
        } else {
            self.ticket_types.clone()
        }
    }

    /// What `PUT /v1/shows/{id}` is sent.
    pub fn definition(&self) -> Value {
        let mut body = json!({
            "name": format!("Checker {}", self.show_id),
            "starts_at": rfc3339(self.starts_at_us),
            "hold_ttl_seconds": self.hold_ttl_seconds,
            "max_hold_seconds": self.max_hold_seconds,
            "seats": self.seats.iter().enumerate().map(|(i, s)| seat_json(self, i, s)).collect::<Vec<_>>(),
            "pools": self.pools.iter().map(pool_json).collect::<Vec<_>>(),
            "buyer_cancellation_until": rfc3339(self.starts_at_us + 86_400_000_000),
        });
        let map = body.as_object_mut().expect("a JSON object literal");
        if let Some(currency) = &self.currency {
            map.insert("currency".into(), json!(currency));
        }
        if !self.ticket_types.is_empty() {
            map.insert("categories".into(), json!(self.categories_json()));
            map.insert(
                "ticket_types".into(),
                json!(self
                    .ticket_types
                    .iter()
                    .map(|t| json!({"ticket_type": t, "label": t}))
                    .collect::<Vec<_>>()),
            );
            map.insert("prices".into(), prices_json(&self.prices));
        }
        if !self.channels.is_empty() {
            map.insert(
                "channels".into(),
                json!(self
                    .channels
                    .iter()
                    .map(|c| json!({"channel_id": c, "label": c}))
                    .collect::<Vec<_>>()),
            );
        }
        if let Some(offer_seconds) = self.offer_seconds {
            let mut waitlist = json!({ "offer_seconds": offer_seconds });
            if let Some(max) = self.max_entries {
                waitlist["max_entries"] = json!(max);
            }
            map.insert("waitlist".into(), waitlist);
        }
        if let Some(limit) = self.max_seats_per_buyer {
            map.insert("max_seats_per_buyer".into(), json!(limit));
        }
        body
    }

    fn categories_json(&self) -> Vec<Value> {
        let mut names: Vec<&String> = self
            .seats
            .iter()
            .filter_map(|s| s.category.as_ref())
            .chain(self.pools.iter().filter_map(|p| p.category.as_ref()))
            .collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|c| json!({"category": c, "label": c, "color": "#2a9d8f"}))
            .collect()
    }
}

fn seat_json(show: &ShowSpec, index: usize, seat: &SeatSpec) -> Value {
    let (row, number) = ((index / 4) + 1, (index % 4) + 1);
    let mut value = json!({
        "seat_id": seat.seat_id, "section": seat.section,
        "row": row.to_string(), "number": number,
    });
    match (&seat.category, show.seat_price) {
        (Some(category), _) => value["category"] = json!(category),
        (None, Some(price)) => value["price_cents"] = json!(price),
        (None, None) => {}
    }
    value
}

fn pool_json(pool: &PoolSpec) -> Value {
    let mut value =
        json!({"pool_id": pool.pool_id, "capacity": pool.capacity, "shards": pool.shards});
    if let Some(category) = &pool.category {
        value["category"] = json!(category);
    }
    value
}

pub fn prices_json(prices: &[Price]) -> Value {
    json!(prices
        .iter()
        .map(|p| json!({"category": p.category, "ticket_type": p.ticket_type, "price_cents": p.price_cents}))
        .collect::<Vec<_>>())
}

pub fn rfc3339(us: i64) -> String {
    chrono::DateTime::from_timestamp_micros(us)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
