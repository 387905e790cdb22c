//! A show's prices as this instance knows them: the table its definition
//! sets, and every change recorded on its `ShowPrices` stream, read again
//! in the background when older than [`PRICES_FRESHNESS`], and never used
//! older than [`PRICES_MAX_AGE`].
//!
//! A change takes effect [`domain::pricing::PRICE_CHANGE_LEAD_MS`] after it
//! is decided at the earliest, longer than the maximum age and the store's
//! acquire timeout together: a hold's decision, which makes sure of its
//! show's prices under its locks (`Decides::prepare`), always knows every
//! change in force at its `now`.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cqrs_es::persist::SerializedEvent;
use domain::ids::{CategoryId, ShowId};
use domain::pricing::{prices_stream_id, PriceEntry, PriceTable, PricesEvent, Pricing, ShowPrices};

use crate::store::{EventLog, StoreError};

/// How old the prices a hold is priced by may be before they are read
/// again in the background: one indexed query per show at most this often,
/// which no hold waits for.
pub const PRICES_FRESHNESS: Duration = Duration::from_millis(250);

/// How old they may be at the most: a hold finding them older waits for
/// them to be read (under its locks). A change commits at the latest this
/// long before it takes effect (its append's `commit_by`, checked by the
/// store: `command/prices.rs`), so every hold decided from then on has read
/// it.
pub const PRICES_MAX_AGE: Duration = Duration::from_millis(750);

/// The prices as read: the show's pricing with every change applied, and
/// the stream's version.
pub struct PriceView {
    pub pricing: Pricing,
    pub version: usize,
    /// When the read that gave it began (`None`: the stream was never read).
    read_at: Option<Instant>,
}

/// A show's prices, shared by every request of this instance.
pub struct PriceCell {
    show_id: ShowId,
    /// The categories some seat or pool of the show is in: a change must
    /// price each for the default ticket type.
    in_use: Vec<CategoryId>,
    current: RwLock<Arc<PriceView>>,
    /// One read of the stream at a time.
    reading: Arc<tokio::sync::Mutex<()>>,
    /// Where changes are read (`None`: a show built in a test, whose prices
    /// never change).
    log: Option<EventLog>,
}

impl PriceCell {
    pub fn new(show_id: ShowId, pricing: Pricing, in_use: Vec<CategoryId>) -> Self {
        Self {
            show_id,
            in_use,
            current: RwLock::new(Arc::new(PriceView {
                pricing,
                version: 0,
                read_at: None,
            })),
            reading: Arc::new(tokio::sync::Mutex::new(())),
            log: None,
        }
    }

    /// Changes are read from `log` from now on.
    pub fn read_from(&mut self, log: EventLog) {
        self.log = Some(log);
    }

    /// The prices as last read.
    pub fn current(&self) -> Arc<PriceView> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The prices no older than [`PRICES_MAX_AGE`]: as they are when
    /// younger than [`PRICES_FRESHNESS`]; as they are, read again in the
    /// background, when younger than the maximum; read again first when
    /// older (or never read).
    pub async fn fresh(self: &Arc<Self>) -> Result<Arc<PriceView>, StoreError> {
        let current = self.current();
        let age = current.read_at.map(|at| at.elapsed());
        if self.log.is_none() || age.is_some_and(|age| age < PRICES_FRESHNESS) {
            return Ok(current);
        }
        if age.is_some_and(|age| age < PRICES_MAX_AGE) {
            if let Ok(turn) = self.reading.clone().try_lock_owned() {
                let cell = self.clone();
                tokio::spawn(async move {
                    if let Err(error) = cell.read_holding(turn, None).await {
                        tracing::warn!(%error, show_id = %cell.show_id, "reading a show's prices");
                    }
                });
            }
            return Ok(current);
        }
        self.read(Some(Instant::now())).await
    }

    /// Reads the changes past the version known (those recorded before
    /// `since`, if given, may have been read by a read begun meanwhile).
    pub async fn read(&self, since: Option<Instant>) -> Result<Arc<PriceView>, StoreError> {
        let turn = self.reading.clone().lock_owned().await;
        self.read_holding(turn, since).await
    }

    /// [`Self::read`], with the turn to read taken.
    async fn read_holding(
        &self,
        _turn: tokio::sync::OwnedMutexGuard<()>,
        since: Option<Instant>,
    ) -> Result<Arc<PriceView>, StoreError> {
        let Some(log) = &self.log else {
            return Ok(self.current());
        };
        let known = self.current();
        if let (Some(since), Some(read_at)) = (since, known.read_at) {
            if read_at >= since {
                return Ok(known);
            }
        }
        let started = Instant::now();
        let stream = prices_stream_id(&self.show_id);
        let events = log
            .stream_events::<ShowPrices>(&stream, known.version)
            .await?;
        let mut pricing = known.pricing.clone();
        for event in &events {
            self.apply(&mut pricing, event)?;
        }
        let view = Arc::new(PriceView {
            pricing,
            version: known.version + events.len(),
            read_at: Some(started),
        });
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = view.clone();
        Ok(view)
    }

    fn apply(&self, pricing: &mut Pricing, event: &SerializedEvent) -> Result<(), StoreError> {
        let corrupt =
            |why: String| StoreError::Corrupt(format!("prices of show {}: {why}", self.show_id));
        let PricesEvent::PricesChanged {
            effective_at,
            prices,
        } = serde_json::from_value(event.payload.clone()).map_err(|e| corrupt(e.to_string()))?;
        let table = table_of(&prices, pricing).map_err(|e| corrupt(e.to_string()))?;
        pricing
            .change(effective_at, table, &self.in_use)
            .map_err(|e| corrupt(e.to_string()))
    }

    /// A change's table, checked against the show as it would be recorded.
    pub fn check(&self, prices: &[PriceEntry]) -> Result<(), domain::pricing::PriceError> {
        let mut pricing = self.current().pricing.clone();
        let table = table_of(prices, &pricing)?;
        pricing.change(
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
            table,
            &self.in_use,
        )
    }
}

/// The table of `prices`, on the categories and ticket types of `pricing`.
fn table_of(
    prices: &[PriceEntry],
    pricing: &Pricing,
) -> Result<PriceTable, domain::pricing::PriceError> {
    PriceTable::new(
        prices
            .iter()
            .map(|p| (p.category.clone(), p.ticket_type.clone(), p.price_cents)),
        &pricing.categories,
        &pricing.ticket_types,
    )
}
