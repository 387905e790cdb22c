//! What one client knows from the answers it got: its holds, bookings,
//! orders and waiting-list entries. Its next choice is a function of this
//! and of its own random generator only.

use serde_json::Value;

use crate::api::Request;
use crate::rows::parse_time_us;

#[derive(Debug, Clone, PartialEq)]
pub struct KnownHold {
    pub hold_id: String,
    pub show_id: String,
    pub pool: bool,
    pub expires_us: i64,
    /// Set for a waiting list's offer: when it was made.
    pub offered_us: Option<i64>,
}

impl KnownHold {
    /// From a hold's answer (201/200).
    pub fn from_answer(body: &Value) -> Option<Self> {
        Some(Self {
            hold_id: body.get("hold_id")?.as_str()?.to_owned(),
            show_id: body.get("show_id")?.as_str()?.to_owned(),
            pool: body.get("pool_id").is_some_and(|p| !p.is_null()),
            expires_us: parse_time_us(body.get("expires_at")?.as_str()?)?,
            offered_us: None,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct KnownOrder {
    pub order_id: String,
    pub show_id: String,
    /// (line id, price) of each line.
    pub lines: Vec<(u64, i64)>,
}

impl KnownOrder {
    pub fn from_answer(body: &Value) -> Option<Self> {
        let lines = body.get("lines")?.as_array()?;
        Some(Self {
            order_id: body.get("order_id")?.as_str()?.to_owned(),
            show_id: body.get("show_id")?.as_str()?.to_owned(),
            lines: lines
                .iter()
                .filter_map(|l| {
                    Some((l.get("line_id")?.as_u64()?, l.get("price_cents")?.as_i64()?))
                })
                .collect(),
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Knowledge {
    pub holds: Vec<KnownHold>,
    /// (booking id, show id) of purchases.
    pub bookings: Vec<(String, String)>,
    pub orders: Vec<KnownOrder>,
    /// (entry id, show id).
    pub entries: Vec<(String, String)>,
    /// Purchases and orders to send again: a 3-D Secure step, an unknown
    /// outcome, `payment_unavailable`.
    pub again: Vec<Request>,
    /// Hold requests whose outcome is unknown (re-sent with their key at
    /// the end, to find and release what they made).
    pub unknown_holds: Vec<Request>,
    /// The last hold request, to send again with its key.
    pub last_hold: Option<Request>,
    /// Offers extended late already (once each).
    pub late_extended: Vec<String>,
}

impl Knowledge {
    pub fn forget_hold(&mut self, hold_id: &str) {
        self.holds.retain(|h| h.hold_id != hold_id);
    }

    /// Forgets holds past their expiry (a second's grace for clocks).
    pub fn forget_expired(&mut self, now_us: i64) {
        self.holds.retain(|h| h.expires_us + 1_000_000 > now_us);
    }

    /// The indices of the holds of one show.
    pub fn holds_of_show(&self, show_id: &str) -> Vec<usize> {
        (0..self.holds.len())
            .filter(|&i| self.holds[i].show_id == show_id)
            .collect()
    }
}
