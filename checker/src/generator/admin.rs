//! The box-office clerk (an admin): allocations to the partner channel and
//! their release, sales and comps at the counter (one to a buyer whose id
//! is a spreadsheet formula), cancellations of anyone's orders and
//! bookings, and price changes (on the yen show, now and then one that yen
//! cannot express).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::seq::SliceRandom;
use rand::Rng;
use reqwest::Method;
use serde_json::{json, Value};

use super::knowledge::KnownOrder;
use super::Client;
use crate::api::Request;
use crate::catalog::{FLOOR, PARTNER, SEATED, STARTING, YEN};
use crate::shows::{prices_json, rfc3339, Price};

/// A buyer id a spreadsheet would run as a formula: the export must not
/// hand it to one as such.
pub const FORMULA_BUYER: &str = "=HYPERLINK(\"http://example.com\",\"x\")";

/// A price yen cannot express (not a multiple of 100 `price_cents`).
pub const NOT_YEN: i64 = 12_345;

pub async fn run(mut clerk: Client, stop: Arc<AtomicBool>) -> Client {
    while !stop.load(Ordering::Relaxed) {
        clerk.clerk_step().await;
        let ms = clerk.rng.gen_range(80..250);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
    clerk
}

impl Client {
    async fn clerk_step(&mut self) {
        match self.rng.gen_range(0..100) {
            0..=14 => self.allocate_seats().await,
            15..=22 => self.allocate_places().await,
            23..=34 => self.release_allocation().await,
            35..=52 => self.box_office().await,
            53..=74 => self.clerk_cancels_lines().await,
            75..=84 => self.clerk_cancels_booking().await,
            _ => self.change_prices().await,
        }
    }

    async fn some_seats(&mut self, show_id: &str, most: usize) -> Vec<String> {
        let seats = self.candidate_seats(show_id).await;
        let count = self.rng.gen_range(1..=most);
        seats
            .choose_multiple(&mut self.rng, count)
            .cloned()
            .collect()
    }

    async fn allocate_seats(&mut self) {
        let seats = self.some_seats(SEATED, 2).await;
        if seats.is_empty() {
            return;
        }
        let body = json!({"channel_id": PARTNER, "seats": seats});
        self.send(
            Request::new(
                "allocate",
                Method::POST,
                format!("/v1/shows/{SEATED}/allocations"),
            )
            .body(body),
        )
        .await;
    }

    async fn allocate_places(&mut self) {
        let body =
            json!({"channel_id": PARTNER, "pool_id": "ga", "quantity": self.rng.gen_range(1..=2)});
        self.send(
            Request::new(
                "allocate",
                Method::POST,
                format!("/v1/shows/{FLOOR}/allocations"),
            )
            .body(body),
        )
        .await;
    }

    async fn release_allocation(&mut self) {
        let (show, body) = match self.rng.gen_range(0..3) {
            0 => {
                let all: Vec<String> = self
                    .show(SEATED)
                    .map(|s| s.seats.iter().map(|s| s.seat_id.clone()).collect())
                    .unwrap_or_default();
                let seats: Vec<String> = all.choose_multiple(&mut self.rng, 2).cloned().collect();
                (SEATED, json!({"channel_id": PARTNER, "seats": seats}))
            }
            1 => (SEATED, json!({"channel_id": PARTNER, "unsold": true})),
            _ => (FLOOR, json!({"channel_id": PARTNER, "unsold": true})),
        };
        self.send(
            Request::new(
                "deallocate",
                Method::POST,
                format!("/v1/shows/{show}/allocations/release"),
            )
            .body(body),
        )
        .await;
    }

    async fn box_office(&mut self) {
        let show = *[SEATED, FLOOR, YEN, STARTING]
            .choose(&mut self.rng)
            .unwrap_or(&SEATED);
        let mut body = if show == FLOOR {
            json!({"pool_id": "ga", "quantity": self.rng.gen_range(1..=2)})
        } else {
            let seats = self.some_seats(show, 2).await;
            if seats.is_empty() {
                return;
            }
            json!({ "seats": seats })
        };
        let buyer = if self.rng.gen_bool(0.15) {
            FORMULA_BUYER.to_owned()
        } else {
            format!("walk-in-{}", self.rng.gen_range(1..=50))
        };
        body["buyer"] = json!(buyer);
        body["payment"] = json!(*["cash", "card_present", "invoice", "comp"]
            .choose(&mut self.rng)
            .unwrap_or(&"cash"));
        let key = Some(self.new_key());
        let request = Request::new(
            "box_office",
            Method::POST,
            format!("/v1/shows/{show}/bookings"),
        )
        .body(body)
        .key(key);
        let outcome = self.send(request).await;
        if outcome.succeeded() {
            if let (Some(order), Ok(mut shared)) = (
                KnownOrder::from_answer(outcome.body()),
                self.shared.orders.lock(),
            ) {
                shared.push(order);
            }
        }
    }

    async fn clerk_cancels_lines(&mut self) {
        let order = self.shared.orders.lock().ok().and_then(|o| {
            let i = self.rng.gen_range(0..o.len().max(1));
            o.get(i).cloned()
        });
        let Some(order) = order else { return };
        let body = self.lines_to_cancel(&order);
        let path = format!("/v1/orders/{}/cancel", order.order_id);
        self.send(Request::new("cancel_lines", Method::POST, path).body(body))
            .await;
    }

    async fn clerk_cancels_booking(&mut self) {
        let booking = self.shared.bookings.lock().ok().and_then(|b| {
            let i = self.rng.gen_range(0..b.len().max(1));
            b.get(i).cloned()
        });
        let Some((booking, _)) = booking else { return };
        self.send(Request::new(
            "cancel_booking",
            Method::POST,
            format!("/v1/bookings/{booking}/cancel"),
        ))
        .await;
    }

    async fn change_prices(&mut self) {
        let show_id = *[SEATED, FLOOR, YEN]
            .choose(&mut self.rng)
            .unwrap_or(&SEATED);
        let Some(show) = self.show(show_id).cloned() else {
            return;
        };
        let adult = *[4000, 5000, 6000].choose(&mut self.rng).unwrap_or(&5000);
        let bad = show_id == YEN && self.rng.gen_bool(0.3);
        let prices: Vec<Price> = show
            .prices
            .iter()
            .map(|p| {
                let scaled = p.price_cents * adult / 5000 / 100 * 100;
                let price_cents = if bad && p.ticket_type == "child" {
                    NOT_YEN
                } else {
                    scaled
                };
                Price {
                    price_cents,
                    ..p.clone()
                }
            })
            .collect();
        let lead_ms = self.rng.gen_range(6_000..10_000);
        let effective_at = rfc3339(chrono::Utc::now().timestamp_micros() + lead_ms * 1_000);
        let body: Value = json!({"prices": prices_json(&prices), "effective_at": effective_at});
        self.send(
            Request::new(
                "change_prices",
                Method::PUT,
                format!("/v1/shows/{show_id}/prices"),
            )
            .body(body),
        )
        .await;
    }
}
