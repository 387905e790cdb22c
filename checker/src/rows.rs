//! What the checker reads from the database, as plain rows: the event log,
//! the payment simulator's ledger and the checkouts' phases. The
//! properties are pure functions of these (and of the history), so a test
//! builds them by hand.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One row of `events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogEvent {
    pub aggregate_type: String,
    pub aggregate_id: String,
    pub sequence: i64,
    pub event_type: String,
    /// As stored: the event enum serialized (`{"HoldPlaced": {...}}`).
    pub payload: Value,
    /// Who asked and under which request (`actor`, `request_id`,
    /// `idempotency_key`, `sold_by`), as the service stamps every event.
    pub metadata: Value,
    pub recorded_at_us: i64,
    pub position: i64,
}

impl LogEvent {
    /// The event's fields, whether the payload wraps them in the variant's
    /// name or not.
    pub fn data(&self) -> &Value {
        match self.payload.get(&self.event_type) {
            Some(inner) => inner,
            None => &self.payload,
        }
    }

    /// The `X-Request-Id` of the request whose command appended the event.
    pub fn request_id(&self) -> Option<&str> {
        self.metadata.get("request_id").and_then(Value::as_str)
    }

    pub fn meta(&self, field: &str) -> Option<&str> {
        self.metadata.get(field).and_then(Value::as_str)
    }

    pub fn str(&self, field: &str) -> Option<&str> {
        self.data().get(field).and_then(Value::as_str)
    }

    pub fn u64(&self, field: &str) -> Option<u64> {
        self.data().get(field).and_then(Value::as_u64)
    }

    pub fn i64(&self, field: &str) -> Option<i64> {
        self.data().get(field).and_then(Value::as_i64)
    }

    pub fn flag(&self, field: &str) -> bool {
        self.data()
            .get(field)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// An RFC 3339 field as microseconds since the epoch.
    pub fn time_us(&self, field: &str) -> Option<i64> {
        parse_time_us(self.str(field)?)
    }

    /// A list of strings (`seats`, `holds`).
    pub fn strings(&self, field: &str) -> Vec<String> {
        strings(self.data().get(field))
    }
}

pub fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// RFC 3339 as microseconds since the epoch.
pub fn parse_time_us(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// One row of `sim_payments`: a payment as the simulator holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimPayment {
    pub payment_id: String,
    pub idempotency_key: String,
    /// The checkout it pays: a hold's id, or an order's.
    pub hold_id: String,
    pub amount_minor: i64,
    pub currency: String,
    pub payment_method: String,
    /// unconfirmed, requires_action, authorized, declined, captured, canceled
    pub status: String,
}

impl SimPayment {
    /// `minor` of this payment's currency in the API's cents.
    pub fn cents(&self, minor: i64) -> i64 {
        minor * cents_per_minor_unit(&self.currency)
    }
}

/// The ledger keeps a currency's own minor unit (a yen has none: 1 yen
/// is 100 of the API's `price_cents`), as a provider does.
pub fn cents_per_minor_unit(currency: &str) -> i64 {
    const ZERO_DECIMAL: [&str; 16] = [
        "bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv",
        "xaf", "xof", "xpf",
    ];
    if ZERO_DECIMAL.contains(&currency.to_ascii_lowercase().as_str()) {
        100
    } else {
        1
    }
}

/// One row of `sim_payment_refunds`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimRefund {
    pub refund_id: String,
    pub idempotency_key: String,
    pub payment_id: String,
    pub amount_minor: i64,
}

/// The simulator's ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub payments: Vec<SimPayment>,
    pub refunds: Vec<SimRefund>,
}

/// One row of `checkouts`: a checkout's stream id and its phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckoutPhase {
    pub id: String,
    pub phase: String,
}

/// Phases in which a checkout still has work to do (the service's
/// recovery finishes them) or waits on its buyer's 3-D Secure, which the
/// simulator completes by itself.
pub const UNFINISHED_PHASES: [&str; 10] = [
    "requested",
    "action_required",
    "authorized",
    "converted",
    "void_requested",
    "reversal_requested",
    "captured",
    "refund_requested",
    "cancel_requested",
    "lines_cancel_requested",
];
