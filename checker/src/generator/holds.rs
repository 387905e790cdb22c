//! Holds: seats (some with a ticket type, some from the partner channel),
//! the best available, a pool's places; releases, extensions, and a hold
//! request sent again with its key.

use rand::seq::SliceRandom;
use rand::Rng;
use reqwest::Method;
use serde_json::{json, Value};

use super::knowledge::KnownHold;
use super::Client;
use crate::api::Request;
use crate::catalog::{FLOOR, PARTNER};
use crate::history::Outcome;

impl Client {
    fn ticket_type(&mut self, show_id: &str) -> Option<String> {
        let types = self.show(show_id)?.types();
        // Adults most often; the free type now and then.
        let weights = [5, 3, 2];
        let i = (0..types.len())
            .collect::<Vec<_>>()
            .choose_weighted(&mut self.rng, |i| weights.get(*i).copied().unwrap_or(1))
            .ok()
            .copied()?;
        types.get(i).cloned()
    }

    fn channel(&mut self, show_id: &str, body: &mut Value) {
        let lists = self
            .show(show_id)
            .is_some_and(|s| s.channels.iter().any(|c| c == PARTNER));
        if self.partner && lists && self.rng.gen_bool(0.5) {
            body["channel"] = json!(PARTNER);
        }
    }

    /// Seats of `show_id` that availability reads `available` now (most
    /// buyers look before they pick), or any of its seats.
    pub async fn candidate_seats(&mut self, show_id: &str) -> Vec<String> {
        let all: Vec<String> = self
            .show(show_id)
            .map(|s| s.seats.iter().map(|s| s.seat_id.clone()).collect())
            .unwrap_or_default();
        if self.rng.gen_bool(0.1) {
            return all;
        }
        let outcome = self
            .send(Request::new(
                "availability",
                Method::GET,
                format!("/v1/shows/{show_id}/availability"),
            ))
            .await;
        let free: Vec<String> = (outcome.body()["seats"].as_array().into_iter().flatten())
            .filter(|s| s["status"] == "available")
            .filter_map(|s| s["seat_id"].as_str().map(str::to_owned))
            .collect();
        // Nothing free: a buyer mostly goes away rather than ask anyway.
        match (free.is_empty(), self.rng.gen_bool(0.95)) {
            (false, _) => free,
            (true, true) => Vec::new(),
            (true, false) => all,
        }
    }

    pub async fn hold_seats(&mut self, show_id: &str) {
        let Some(show) = self.show(show_id).cloned() else {
            return;
        };
        let count = self.rng.gen_range(1..=3);
        let candidates = self.candidate_seats(show_id).await;
        if candidates.is_empty() {
            return;
        }
        let seats: Vec<String> = candidates
            .choose_multiple(&mut self.rng, count)
            .cloned()
            .collect();
        let mut entries = Vec::new();
        for seat in seats {
            if show.ticket_types.is_empty() || self.rng.gen_bool(0.3) {
                entries.push(json!(seat));
            } else {
                entries.push(json!({"seat_id": seat, "ticket_type": self.ticket_type(show_id)}));
            }
        }
        let mut body = json!({ "seats": entries });
        self.channel(show_id, &mut body);
        self.place(show_id, body).await;
    }

    pub async fn hold_best(&mut self, show_id: &str) {
        if self.candidate_seats(show_id).await.len() < 2 {
            return;
        }
        let mut ask = json!({ "quantity": self.rng.gen_range(1..=3) });
        if self.rng.gen_bool(0.5) {
            ask["section"] = json!(if self.rng.gen_bool(0.5) { "A" } else { "B" });
        }
        if self.rng.gen_bool(0.5) {
            ask["ticket_type"] = json!(self.ticket_type(show_id));
        }
        let mut body = json!({ "best_available": ask });
        self.channel(show_id, &mut body);
        self.place(show_id, body).await;
    }

    /// Whether the pool reads some places available (asked now and then).
    async fn pool_has_room(&mut self) -> bool {
        if self.rng.gen_bool(0.05) {
            return true;
        }
        let outcome = self
            .send(Request::new(
                "availability",
                Method::GET,
                format!("/v1/shows/{FLOOR}/availability"),
            ))
            .await;
        let available = (outcome.body()["pools"].as_array().into_iter().flatten())
            .filter_map(|p| p["available"].as_u64())
            .sum::<u64>();
        available > 0 || self.rng.gen_bool(0.1)
    }

    pub async fn hold_pool(&mut self) {
        if !self.pool_has_room().await {
            return;
        }
        let pool_id = self
            .show(FLOOR)
            .and_then(|s| s.pools.first())
            .map(|p| p.pool_id.clone())
            .unwrap_or_default();
        let mut body = json!({
            "pool_id": pool_id,
            "quantity": self.rng.gen_range(1..=3),
            "ticket_type": self.ticket_type(FLOOR),
        });
        self.channel(FLOOR, &mut body);
        self.place(FLOOR, body).await;
    }

    /// Places a hold; its id when it was placed.
    async fn place(&mut self, show_id: &str, body: Value) -> Option<String> {
        let key = self.new_key();
        let request = Request::new("hold", Method::POST, format!("/v1/shows/{show_id}/holds"))
            .body(body)
            .key(Some(key));
        self.known.last_hold = Some(request.clone());
        let outcome = self.send(request.clone()).await;
        self.learn_hold(&request, &outcome);
        outcome
            .succeeded()
            .then(|| outcome.body()["hold_id"].as_str().map(str::to_owned))
            .flatten()
    }

    /// The path of a pool line cancelled and of a pool hold lost while its
    /// order pays: an adult hold and a child hold of the pool, ordered
    /// together (a slow payment raced by a release of one, now and then).
    pub async fn pool_order(&mut self) {
        if !self.pool_has_room().await {
            return;
        }
        let adult =
            json!({"pool_id": "ga", "quantity": self.rng.gen_range(1..=2), "ticket_type": "adult"});
        let child = json!({"pool_id": "ga", "quantity": 1, "ticket_type": "child"});
        let (Some(first), Some(second)) = (
            self.place(FLOOR, adult).await,
            self.place(FLOOR, child).await,
        ) else {
            return;
        };
        let holds: Vec<usize> = (self.known.holds.iter().enumerate())
            .filter(|(_, h)| h.hold_id == first || h.hold_id == second)
            .map(|(i, _)| i)
            .collect();
        let race = self.rng.gen_bool(0.4);
        self.order(&holds, race).await;
    }

    fn learn_hold(&mut self, request: &Request, outcome: &Outcome) {
        match outcome {
            Outcome::Answered {
                status: 200 | 201,
                body,
            } => {
                if let Some(hold) = KnownHold::from_answer(body) {
                    self.known.forget_hold(&hold.hold_id);
                    self.known.holds.push(hold);
                }
            }
            Outcome::Unknown { .. } => self.known.unknown_holds.push(request.clone()),
            _ => {}
        }
    }

    /// The last hold request again, same key and body: the same hold.
    pub async fn retry_hold(&mut self) {
        let Some(request) = self.known.last_hold.clone() else {
            return;
        };
        let outcome = self.send(request.clone()).await;
        self.learn_hold(&request, &outcome);
    }

    pub async fn release(&mut self, i: usize) {
        let Some(hold) = self.known.holds.get(i).cloned() else {
            return;
        };
        let outcome = self
            .send(Request::new(
                "release",
                Method::DELETE,
                format!("/v1/holds/{}", hold.hold_id),
            ))
            .await;
        if outcome
            .status()
            .is_some_and(|s| s == 204 || s == 409 || s == 404)
        {
            self.known.forget_hold(&hold.hold_id);
        }
    }

    /// Extends a hold; an offer is extended once it is older than its
    /// show's TTL less than `offer_seconds` allows (when an extension
    /// would outlive the offer if it were measured from the TTL).
    pub async fn extend(&mut self, i: usize) {
        let Some(hold) = self.known.holds.get(i).cloned() else {
            return;
        };
        let path = format!("/v1/holds/{}/extend", hold.hold_id);
        let outcome = self
            .send(Request::new("extend", Method::POST, path).body(json!({})))
            .await;
        match &outcome {
            Outcome::Answered { status: 200, body } => {
                if let Some(extended) = KnownHold::from_answer(body) {
                    if let Some(known) = self
                        .known
                        .holds
                        .iter_mut()
                        .find(|h| h.hold_id == hold.hold_id)
                    {
                        known.expires_us = extended.expires_us;
                    }
                }
            }
            Outcome::Answered { status: 409, .. }
                if outcome.code() != Some("hold_extension_limit") =>
            {
                self.known.forget_hold(&hold.hold_id)
            }
            _ => {}
        }
    }
}
