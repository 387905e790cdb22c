//! A show's prices as this instance knows them: the table its definition
//! sets, and every change recorded on its `ShowPrices` stream, read again
//! when older than [`PRICES_FRESHNESS`].
//!
//! A change takes effect [`domain::pricing::PRICE_CHANGE_LEAD_MS`] after it
//! is decided at the earliest, longer than this freshness and the store's
//! acquire timeout together: a hold's decision, which reads its show's
//! prices under its locks when they are older than this
//! (`Decides::prepare`), always knows every change in force at its `now`.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use cqrs_es::persist::SerializedEvent;
use domain::ids::{CategoryId, ShowId};
use domain::pricing::{prices_stream_id, PriceEntry, PriceTable, PricesEvent, Pricing, ShowPrices};

use crate::store::{EventLog, StoreError};

/// How old the prices a hold is priced by may be. Reading them costs one
/// indexed query per show at most this often, made under one hold's locks.
pub const PRICES_FRESHNESS: Duration = Duration::from_millis(250);

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
    reading: tokio::sync::Mutex<()>,
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
            reading: tokio::sync::Mutex::new(()),
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

    /// The prices, read again first if older than [`PRICES_FRESHNESS`].
    pub async fn fresh(&self) -> Result<Arc<PriceView>, StoreError> {
        let current = self.current();
        let fresh = current
            .read_at
            .is_some_and(|at| at.elapsed() < PRICES_FRESHNESS);
        if self.log.is_none() || fresh {
            return Ok(current);
        }
        self.read(Some(Instant::now())).await
    }

    /// Reads the changes past the version known (those recorded before
    /// `since`, if given, may have been read by a read begun meanwhile).
    pub async fn read(&self, since: Option<Instant>) -> Result<Arc<PriceView>, StoreError> {
        let Some(log) = &self.log else {
            return Ok(self.current());
        };
        let _turn = self.reading.lock().await;
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
