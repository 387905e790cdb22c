//! The waiting lists: joining with the simplest asks (one seat of any
//! kind, or one place of a pool, so that the checker can tell what an
//! entry wants), leaving, and looking for an offer to buy or extend.

use reqwest::Method;
use serde_json::json;

use super::knowledge::KnownHold;
use super::Client;
use crate::api::Request;
use crate::history::Outcome;
use crate::rows::parse_time_us;

impl Client {
    pub async fn join(&mut self, show_id: &str) {
        let Some(show) = self.show(show_id).cloned() else {
            return;
        };
        if !show.has_waitlist() {
            return;
        }
        let body = match show.pools.first() {
            Some(pool) => json!({"pool_id": pool.pool_id, "quantity": 1}),
            None => json!({"quantity": 1}),
        };
        let path = format!("/v1/shows/{show_id}/waitlist");
        let outcome = self
            .send(Request::new("join", Method::POST, path).body(body))
            .await;
        let entry = match (&outcome, outcome.code()) {
            (
                Outcome::Answered {
                    status: 200 | 201,
                    body,
                },
                _,
            ) => body["entry_id"].as_str(),
            (_, Some("waitlist_entry_exists")) => outcome.body()["entry_id"].as_str(),
            _ => None,
        };
        if let Some(entry) = entry {
            if !self.known.entries.iter().any(|(e, _)| e == entry) {
                self.known
                    .entries
                    .push((entry.to_owned(), show_id.to_owned()));
            }
        }
    }

    pub async fn leave(&mut self, i: usize) {
        let Some((entry, _)) = self.known.entries.get(i).cloned() else {
            return;
        };
        let outcome = self
            .send(Request::new(
                "leave",
                Method::DELETE,
                format!("/v1/waitlist/{entry}"),
            ))
            .await;
        if outcome.status().is_some_and(|s| s == 204 || s == 404) {
            self.known.entries.retain(|(e, _)| *e != entry);
        }
    }

    /// Reads an entry; an offer becomes one of the client's holds.
    pub async fn poll(&mut self, i: usize) {
        let Some((entry, show_id)) = self.known.entries.get(i).cloned() else {
            return;
        };
        let outcome = self
            .send(Request::new(
                "poll_entry",
                Method::GET,
                format!("/v1/waitlist/{entry}"),
            ))
            .await;
        let body = outcome.body();
        if body["status"] != "offered" {
            return;
        }
        let (Some(hold_id), Some(expires_us)) = (
            body["hold_id"].as_str(),
            body["expires_at"].as_str().and_then(parse_time_us),
        ) else {
            return;
        };
        if self.known.holds.iter().any(|h| h.hold_id == hold_id) {
            return;
        }
        let offer_us = self
            .show(&show_id)
            .and_then(|s| s.offer_seconds)
            .map_or(0, |s| i64::from(s) * 1_000_000);
        self.known.holds.push(KnownHold {
            hold_id: hold_id.to_owned(),
            show_id,
            pool: body["pool_id"].is_string(),
            expires_us,
            offered_us: Some(expires_us - offer_us),
        });
    }

    /// An offer on a show whose TTL is at least half its `offer_seconds`
    /// is kept (not bought, released or ordered) until it is extended
    /// late: that extension is the one that could outlive the offer.
    pub fn kept_for_late_extension(&self, i: usize) -> bool {
        let Some(hold) = self.known.holds.get(i) else {
            return false;
        };
        let Some(show) = self.show(&hold.show_id) else {
            return false;
        };
        let long_ttl = show
            .offer_seconds
            .is_some_and(|o| show.hold_ttl_seconds * 2 >= o);
        hold.offered_us.is_some() && long_ttl && !self.known.late_extended.contains(&hold.hold_id)
    }

    /// An offer old enough that an extension measured from the show's TTL
    /// would outlive the offer: extended, once (the rule is that it must
    /// not be).
    pub fn late_offer(&self) -> Option<usize> {
        let now = chrono::Utc::now().timestamp_micros();
        self.known.holds.iter().position(|h| {
            let Some(offered) = h.offered_us else {
                return false;
            };
            if self.known.late_extended.contains(&h.hold_id) {
                return false;
            }
            let Some(show) = self.show(&h.show_id) else {
                return false;
            };
            let offer_us = show.offer_seconds.map_or(0, |s| i64::from(s) * 1_000_000);
            let ttl_us = i64::from(show.hold_ttl_seconds) * 1_000_000;
            ttl_us > 0
                && now > offered + offer_us - ttl_us + 1_000_000
                && h.expires_us <= offered + offer_us
        })
    }
}
