//! Paying and cancelling: a hold's purchase with every simulator method,
//! orders of several holds (some raced by a release of one of their holds
//! while a slow payment runs), line and booking cancellations.

use std::time::Duration;

use rand::seq::SliceRandom;
use rand::Rng;
use reqwest::Method;
use serde_json::json;

use super::knowledge::KnownOrder;
use super::Client;
use crate::api::Request;
use crate::history::Outcome;

/// When the racing release is sent after its order (the order pays with
/// `pm_sim_delay_2500`, so it is still paying then).
const RACE_AFTER: Duration = Duration::from_millis(400);

impl Client {
    /// A simulator method: most succeed, some decline or fail, some are
    /// slow, some need the buyer (3-D Secure, completed by the simulator).
    pub fn payment_method(&mut self) -> String {
        match self.rng.gen_range(0..100) {
            0..=29 => "pm_sim_ok".into(),
            30..=39 => "pm_sim_declined".into(),
            40..=44 => "pm_sim_unavailable".into(),
            45..=84 => format!("pm_sim_delay_{}", self.rng.gen_range(100..=3000)),
            _ => format!("pm_sim_3ds_{}", self.rng.gen_range(200..=2500)),
        }
    }

    pub async fn purchase(&mut self, i: usize) {
        let Some(hold) = self.known.holds.get(i).cloned() else {
            return;
        };
        let body = json!({ "payment_method": self.payment_method() });
        let request = Request::new(
            "purchase",
            Method::POST,
            format!("/v1/holds/{}/purchase", hold.hold_id),
        )
        .body(body);
        let outcome = self.send(request.clone()).await;
        self.learn_payment(&request, &outcome, &[hold.hold_id]);
    }

    /// What a purchase's or an order's answer teaches.
    pub fn learn_payment(&mut self, request: &Request, outcome: &Outcome, holds: &[String]) {
        let body = outcome.body();
        match outcome.status() {
            Some(200 | 201) => {
                for hold in holds {
                    self.known.forget_hold(hold);
                }
                if let Some(order) = KnownOrder::from_answer(body) {
                    self.known.orders.push(order.clone());
                    if let Ok(mut shared) = self.shared.orders.lock() {
                        shared.push(order);
                    }
                } else if let (Some(booking), Some(show)) =
                    (body["booking_id"].as_str(), body["show_id"].as_str())
                {
                    let booking = (booking.to_owned(), show.to_owned());
                    self.known.bookings.push(booking.clone());
                    if let Ok(mut shared) = self.shared.bookings.lock() {
                        shared.push(booking);
                    }
                }
            }
            Some(202) => self.known.again.push(request.clone()),
            Some(409) => {
                let lost = crate::rows::strings(body.get("holds"));
                let lost = if lost.is_empty() {
                    holds.to_vec()
                } else {
                    lost
                };
                for hold in lost {
                    self.known.forget_hold(&hold);
                }
            }
            None if outcome.is_unknown() => self.known.again.push(request.clone()),
            _ => {}
        }
    }

    pub async fn order(&mut self, holds: &[usize], race: bool) {
        let ids: Vec<String> = holds
            .iter()
            .filter_map(|&i| self.known.holds.get(i))
            .map(|h| h.hold_id.clone())
            .collect();
        if ids.is_empty() {
            return;
        }
        let method = if race {
            "pm_sim_delay_2500".to_owned()
        } else {
            self.payment_method()
        };
        let request = Request::new("order", Method::POST, "/v1/orders".into())
            .body(json!({"holds": ids, "payment_method": method}));
        let (outcome, raced) = if race {
            self.raced_order(request.clone(), &ids).await
        } else {
            (self.send(request.clone()).await, None)
        };
        self.learn_payment(&request, &outcome, &ids);
        if outcome.status() == Some(409) {
            // The hold the client released itself is not one to check.
            let kept: Vec<String> = ids
                .into_iter()
                .filter(|h| Some(h) != raced.as_ref())
                .collect();
            self.check_holds_kept(&kept, &outcome).await;
        }
    }

    /// The order, and a release of one of its holds while it pays (the
    /// released hold's id comes back with the order's outcome).
    async fn raced_order(&mut self, request: Request, ids: &[String]) -> (Outcome, Option<String>) {
        let victim = ids.choose(&mut self.rng).cloned().unwrap_or_default();
        let (first, second) = (self.instance(), self.instance());
        let release = Request::new(
            "release_during_order",
            Method::DELETE,
            format!("/v1/holds/{victim}"),
        );
        let (api, caller) = (&self.api, &self.caller);
        let (outcome, released) = tokio::join!(api.send(caller, first, request), async {
            tokio::time::sleep(RACE_AFTER).await;
            api.send(caller, second, release).await
        });
        if released.status() == Some(204) {
            self.known.forget_hold(&victim);
        }
        (outcome, Some(victim))
    }

    /// After a refused order, reads each of its other holds (the checker
    /// compares them with what they were).
    async fn check_holds_kept(&mut self, ids: &[String], outcome: &Outcome) {
        let lost = crate::rows::strings(outcome.body().get("holds"));
        for hold in ids.iter().filter(|h| !lost.contains(h)) {
            self.send(Request::new(
                "check_hold",
                Method::GET,
                format!("/v1/holds/{hold}"),
            ))
            .await;
        }
    }

    pub async fn cancel_lines(&mut self, i: usize) {
        let Some(order) = self.known.orders.get(i).cloned() else {
            return;
        };
        let body = self.lines_to_cancel(&order);
        let path = format!("/v1/orders/{}/cancel", order.order_id);
        let outcome = self
            .send(Request::new("cancel_lines", Method::POST, path).body(body))
            .await;
        if outcome.status() == Some(200) {
            self.known.orders.retain(|o| o.order_id != order.order_id);
        }
    }

    /// Every line (`{}`), or one line, a free one when there is.
    pub fn lines_to_cancel(&mut self, order: &KnownOrder) -> serde_json::Value {
        if order.lines.is_empty() || self.rng.gen_bool(0.25) {
            return json!({});
        }
        let free: Vec<u64> = order
            .lines
            .iter()
            .filter(|(_, p)| *p == 0)
            .map(|(l, _)| *l)
            .collect();
        let line = match free.choose(&mut self.rng) {
            Some(line) if self.rng.gen_bool(0.5) => *line,
            _ => order.lines.choose(&mut self.rng).map_or(1, |(l, _)| *l),
        };
        json!({ "lines": [line] })
    }

    pub async fn cancel_booking(&mut self, i: usize) {
        let Some((booking, _)) = self.known.bookings.get(i).cloned() else {
            return;
        };
        let path = format!("/v1/bookings/{booking}/cancel");
        let outcome = self
            .send(Request::new("cancel_booking", Method::POST, path))
            .await;
        if outcome.status() == Some(200) {
            self.known.bookings.retain(|(b, _)| *b != booking);
        }
    }

    /// A purchase or order sent again: a 3-D Secure step the simulator
    /// completes by itself, or an answer that was lost.
    pub async fn again(&mut self, i: usize) {
        if i >= self.known.again.len() {
            return;
        }
        let request = self.known.again.remove(i);
        let holds = match &request.body {
            Some(body) if body.get("holds").is_some() => crate::rows::strings(body.get("holds")),
            _ => request
                .path
                .split('/')
                .nth(3)
                .map(str::to_owned)
                .into_iter()
                .collect(),
        };
        let outcome = self.send(request.clone()).await;
        self.learn_payment(&request, &outcome, &holds);
    }
}
