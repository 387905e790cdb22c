//! Changing a show's prices (admin): a `PricesChanged` event on the show's
//! `ShowPrices` stream, decided by the round like every command. The table
//! is checked against the show (its categories and ticket types, every
//! category in use priced for the default type) before anything is
//! locked; the stream decides when it takes effect
//! (`domain::pricing::effective_instant`: as asked, never in the past, at
//! the earliest `PRICE_CHANGE_LEAD_MS` after the decision). Holds placed
//! before keep their price: it is in their events.
//!
//! The lead is checked, not assumed: the change's append must commit
//! `PRICES_MAX_AGE` before it takes effect (`commit_by`, refused by the
//! store past it, on the store's clock), so that every instance, reading
//! prices no older than that, knows it before any hold it prices. A change
//! that reaches the store late (a failover, a stalled connection) is
//! decided again at a later instant: asked for `effective_at` too close to
//! that, it takes effect the lead after it instead (the answer says when).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::aggregate::Timed;
use domain::ids::ShowId;
use domain::pricing::{
    prices_stream_id, PriceEntry, PricesCommand, PricesCommandError, PricesEvent, ShowPrices,
};

use crate::catalog::{ShowCatalog, PRICES_MAX_AGE};
use crate::command::context::RequestContext;
use crate::command::round::{Decided, Decides, Decision, Round, RoundError, Rounds, Settled, View};
use crate::command::streams::{show_stream, ShowKey};
use crate::store::StoreError;

/// A show's price stream, as a round locks it.
pub type PricesKey = ShowKey;

// Prices have no read model: the catalog reads the stream.
show_stream!(ShowPrices, PricesEvent, prices);

#[derive(Debug, thiserror::Error)]
pub enum PriceChangeError {
    #[error("show not found")]
    ShowNotFound,
    /// 422 `validation_failed`; the text names the field.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Bug(String),
    #[error("contention did not settle")]
    Busy,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RoundError for PriceChangeError {
    fn contended() -> Self {
        PriceChangeError::Busy
    }

    fn bug(what: String) -> Self {
        PriceChangeError::Bug(what)
    }
}

/// A change as recorded: from when, which table.
#[derive(Debug, Clone)]
pub struct PriceChange {
    pub effective_at: DateTime<Utc>,
    pub prices: Vec<PriceEntry>,
}

/// The decision: the change on the stream as locked, at the round's `now`.
struct ChangingPrices<'a> {
    prices: &'a [PriceEntry],
    effective_at: Option<DateTime<Utc>>,
}

impl Decides<ShowPrices> for ChangingPrices<'_> {
    type Output = DateTime<Utc>;
    type Error = PriceChangeError;

    fn decide(
        &mut self,
        view: &View<'_, ShowPrices>,
    ) -> Result<Decision<ShowPrices, DateTime<Utc>>, PriceChangeError> {
        let Some(&(prices, _)) = view.units.first() else {
            return Err(PriceChangeError::Bug(
                "a price change without its stream".into(),
            ));
        };
        let command = Timed {
            command: PricesCommand::Change {
                prices: self.prices.to_vec(),
                effective_at: self.effective_at,
            },
            now: view.now,
        };
        match domain::aggregate::Decider::decide(prices, &command) {
            Ok(events) => {
                let at = events
                    .iter()
                    .map(|PricesEvent::PricesChanged { effective_at, .. }| *effective_at)
                    .next_back()
                    .unwrap_or(view.now);
                let decided = Decided {
                    commit_by: Some(commit_deadline(at)),
                    ..Decided::units(vec![events])
                };
                Ok(Decision::Append(decided, at))
            }
            Err(e @ PricesCommandError::InPast) => {
                Err(PriceChangeError::Invalid(format!("effective_at: {e}")))
            }
            Err(e @ PricesCommandError::TooMany) => Err(PriceChangeError::Invalid(e.to_string())),
        }
    }
}

/// The latest a change in force from `effective_at` may commit: every hold
/// decided from `effective_at` on read prices after it.
fn commit_deadline(effective_at: DateTime<Utc>) -> DateTime<Utc> {
    let max_age = chrono::Duration::from_std(PRICES_MAX_AGE).unwrap_or(chrono::Duration::zero());
    effective_at - max_age
}

pub struct PriceService {
    catalog: Arc<ShowCatalog>,
    rounds: Arc<Rounds>,
}

impl PriceService {
    pub fn new(catalog: Arc<ShowCatalog>, rounds: Arc<Rounds>) -> Self {
        Self { catalog, rounds }
    }

    /// `PUT /v1/shows/{id}/prices`: the change recorded, and this
    /// instance's prices read again at once.
    pub async fn change(
        &self,
        ctx: &RequestContext,
        show_id: &ShowId,
        prices: Vec<PriceEntry>,
        effective_at: Option<DateTime<Utc>>,
    ) -> Result<PriceChange, PriceChangeError> {
        let entry = self
            .catalog
            .get(show_id)
            .await?
            .ok_or(PriceChangeError::ShowNotFound)?;
        if entry.show.pricing.categories.is_empty() {
            return Err(PriceChangeError::Invalid(
                "prices: the show has no categories to price (its seats have their own prices)"
                    .into(),
            ));
        }
        domain::pricing::check_currency(prices.iter().map(|p| p.price_cents), entry.show.currency)
            .and_then(|()| entry.prices.check(&prices))
            .map_err(|e| PriceChangeError::Invalid(e.to_string()))?;
        let key = PricesKey {
            show_id: show_id.clone(),
        };
        let units = vec![(prices_stream_id(show_id), key)];
        let mut changing = ChangingPrices {
            prices: &prices,
            effective_at,
        };
        let rounds: &Rounds = &self.rounds;
        let settled = rounds
            .run(Round::new("prices", ctx), units, &mut changing)
            .await?;
        let (Settled::Appended(effective_at) | Settled::Answered(effective_at)) = settled else {
            return Err(PriceChangeError::Bug(
                "a price change took an idempotency key".into(),
            ));
        };
        entry.prices.read(None).await?;
        Ok(PriceChange {
            effective_at,
            prices,
        })
    }
}

#[cfg(test)]
mod tests {
    use domain::ids::{CategoryId, TicketType};

    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid instant")
    }

    fn table() -> Vec<PriceEntry> {
        vec![PriceEntry {
            category: CategoryId::parse("premium").expect("a category"),
            ticket_type: TicketType::parse("adult").expect("a ticket type"),
            price_cents: 9000,
        }]
    }

    fn key() -> PricesKey {
        PricesKey {
            show_id: ShowId::parse("show").expect("a show id"),
        }
    }

    #[test]
    fn it_should_record_a_change_and_answer_when_it_takes_effect() {
        let prices = ShowPrices::default();
        let key = key();
        let table = table();
        let later = now() + chrono::Duration::hours(1);
        let decided = ChangingPrices {
            prices: &table,
            effective_at: Some(later),
        }
        .decide(&View::given(now(), vec![(&prices, &key)]))
        .expect("a change in the future is recorded");
        let Decision::Append(decided, at) = decided else {
            panic!("the change is appended");
        };
        assert_eq!(at, later);
        assert_eq!(
            decided.units,
            vec![vec![PricesEvent::PricesChanged {
                effective_at: later,
                prices: table
            }]]
        );
    }

    #[test]
    fn it_should_refuse_a_change_in_the_past_naming_the_field() {
        let prices = ShowPrices::default();
        let key = key();
        let table = table();
        let refused = ChangingPrices {
            prices: &table,
            effective_at: Some(now() - chrono::Duration::seconds(1)),
        }
        .decide(&View::given(now(), vec![(&prices, &key)]));
        assert!(matches!(
            &refused,
            Err(PriceChangeError::Invalid(why)) if why.starts_with("effective_at")
        ));
    }
}
