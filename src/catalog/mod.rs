//! Shows and venues: created once by an admin, immutable after, cached by
//! every instance. `definition` holds their JSON as it travels, `venue` the
//! venues; a show on a venue is resolved through it when it is loaded.

mod definition;
mod kept;
mod prices;
mod venue;

use domain::best_available::{SeatOrder, SeatPlace};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use domain::definition::ShowError;
use domain::ids::{PoolId, SeatId, ShowId};
use domain::money::Currency;
use domain::pool::shard_capacity;
use domain::pricing::{PriceTable, TicketTypeSpec};
use domain::show::Show;
use projections::time::to_micros;

use crate::store::{EventLog, ShowInsert, Shows, StoreError};
use kept::Kept;

pub use definition::{
    AreaDefinition, CategoryDefinition, PoolDefinition, PriceDefinition, SeatDefinition,
    SectionDefinition, ShowDefinition, ShowView, StageDefinition, TicketTypeDefinition,
    VenueDefinition, VenueView, WaitingRoomDefinition,
};
pub use prices::{PriceCell, PriceView, PRICES_FRESHNESS, PRICES_MAX_AGE};
pub use venue::{VenueCatalog, VenueEntry};

/// Shows kept parsed in memory. A 100,000-seat show takes some tens of
/// megabytes parsed; an onsale has a handful of hot shows.
pub const SHOW_CACHE_CAPACITY: usize = 64;

/// A show as the service holds it: validated, plus its canonical JSON.
pub struct CatalogEntry {
    pub show: Show,
    pub definition_json: String,
    /// The show as `GET` answers it: the definition, and on a venue the
    /// venue's chart (stage, categories, sections, seats, pools) in place
    /// of the venue's id alone.
    view_json: String,
    /// Each seat's availability entry up to its status, serialized once:
    /// `{"seat_id":"A-1","section":"A","status":"` (an answer for 100,000
    /// seats is then a concatenation).
    pub seat_json_prefix: Vec<Box<str>>,
    /// The seats in the order best available scans them (by ordinal).
    pub seat_order: SeatOrder,
    /// Its prices over time, as this instance has read them.
    pub prices: Arc<PriceCell>,
    /// Each seat's section and category as one number, for reports.
    pub seat_groups: SeatGroups,
}

/// The seats' sections and categories, numbered once per show: a report
/// counts 20,000 seats by a number each rather than by their strings.
#[derive(Debug, Clone, Default)]
pub struct SeatGroups {
    /// By seat ordinal.
    pub of_seat: Vec<u32>,
    /// By group: the section and category.
    pub names: Vec<(String, Option<domain::ids::CategoryId>)>,
}

impl SeatGroups {
    fn of(show: &Show) -> Self {
        let mut numbers: HashMap<(&str, Option<&domain::ids::CategoryId>), u32> = HashMap::new();
        let mut names = Vec::new();
        let of_seat = (show.seats.iter())
            .map(|seat| {
                let key = (seat.section.as_str(), seat.category.as_ref());
                *numbers.entry(key).or_insert_with(|| {
                    names.push((seat.section.clone(), seat.category.clone()));
                    (names.len() - 1) as u32
                })
            })
            .collect();
        Self { of_seat, names }
    }
}

impl CatalogEntry {
    pub fn new(show: Show, definition_json: String) -> Self {
        let places: Vec<SeatPlace> = show
            .seats
            .iter()
            .enumerate()
            .map(|(ordinal, seat)| SeatPlace {
                seat_id: seat.seat_id.clone(),
                section: seat.section.clone(),
                row: seat.row.clone(),
                number: seat.number,
                rank: show.seat_rank(ordinal),
                free: false,
            })
            .collect();
        let seat_order = SeatOrder::new(&places);
        let seat_json_prefix = show
            .seats
            .iter()
            .map(|seat| {
                let id = serde_json::Value::String(seat.seat_id.to_string());
                let section = serde_json::Value::String(seat.section.clone());
                format!("{{\"seat_id\":{id},\"section\":{section},\"status\":\"").into_boxed_str()
            })
            .collect();
        let in_use = show.categories_in_use().into_iter().collect();
        let prices = PriceCell::new(show.show_id.clone(), show.pricing.clone(), in_use);
        let prices = Arc::new(prices);
        let view_json = match show.pricing.categories.is_empty() {
            true => definition_json.clone(),
            // Its prices change over time: each answer says those in force.
            false => merged(&definition_json, None).unwrap_or_else(|_| definition_json.clone()),
        };
        let view_json = with_ticket_types(view_json, &show.pricing.ticket_types);
        let seat_groups = SeatGroups::of(&show);
        Self {
            prices,
            show,
            view_json,
            definition_json,
            seat_json_prefix,
            seat_order,
            seat_groups,
        }
    }

    /// Puts seat ids in the show's order (unknown ids last).
    pub fn sort_seats(&self, seats: &mut [SeatId]) {
        seats.sort_by_cached_key(|seat| {
            self.show
                .seat(seat)
                .map_or(usize::MAX, |(ordinal, _)| ordinal)
        });
    }

    /// The show on `venue`: its answer carries the venue's chart.
    pub fn on_venue(mut self, venue: &VenueEntry) -> Result<Self, StoreError> {
        let view_json = merged(&self.definition_json, Some(&venue.definition_json))
            .map_err(|e| StoreError::Corrupt(format!("show view: {e}")))?;
        self.view_json = with_ticket_types(view_json, &self.show.pricing.ticket_types);
        Ok(self)
    }

    /// The show as `GET /v1/shows/{id}` answers it: the definition with its
    /// id (and its venue's chart); on a show priced by category, the prices
    /// of `table`, the one in force at the instant asked about.
    pub fn to_json(&self, table: &PriceTable) -> String {
        let mut json = self.json_with_id();
        if !self.show.pricing.categories.is_empty() {
            let prices: Vec<serde_json::Value> = table
                .entries()
                .map(|(category, ticket_type, price_cents)| {
                    serde_json::json!({"category": category, "ticket_type": ticket_type,
                                       "price_cents": price_cents})
                })
                .collect();
            let prices = serde_json::Value::Array(prices);
            if json.ends_with('}') {
                json.pop();
                json.push_str(&format!(",\"prices\":{prices}}}"));
            }
        }
        json
    }

    fn json_with_id(&self) -> String {
        // The canonical definition is a JSON object (serialized from
        // `ShowDefinition`), so it starts with '{'; the id goes first.
        let rest = self.view_json.strip_prefix('{').unwrap_or("}");
        let id = serde_json::Value::String(self.show.show_id.to_string());
        format!("{{\"show_id\":{id},{rest}")
    }
}

/// The answer always lists the ticket types: a definition that names none
/// sells the default one (`standard`), and says so. The canonical JSON is
/// serde's, without spaces, so a key is the text `"ticket_types":` and a
/// string value holding those characters has its quotes escaped.
fn with_ticket_types(mut json: String, ticket_types: &[TicketTypeSpec]) -> String {
    if json.contains("\"ticket_types\":") || !json.ends_with('}') {
        return json;
    }
    let listed: Vec<serde_json::Value> = ticket_types
        .iter()
        .map(|t| serde_json::json!({"ticket_type": t.ticket_type, "label": t.label}))
        .collect();
    json.pop();
    let separator = if json.ends_with('{') { "" } else { "," };
    json.push_str(&format!(
        "{separator}\"ticket_types\":{}}}",
        serde_json::Value::Array(listed)
    ));
    json
}

/// A show's answer: its definition without its first price table (the
/// answer says the table in force), and on a venue the venue's chart
/// (stage, categories, sections, seats, pools) in place of its id alone.
fn merged(definition: &str, venue: Option<&str>) -> Result<String, serde_json::Error> {
    let mut view: serde_json::Map<String, serde_json::Value> = serde_json::from_str(definition)?;
    view.remove("prices");
    if let Some(venue) = venue {
        let chart: serde_json::Map<String, serde_json::Value> = serde_json::from_str(venue)?;
        for (key, value) in chart {
            if key != "name" {
                view.insert(key, value);
            }
        }
    }
    serde_json::to_string(&view)
}

#[derive(Debug, thiserror::Error)]
pub enum CreateShowError {
    #[error(transparent)]
    Invalid(#[from] ShowError),
    #[error("a different show with this id exists")]
    Exists,
    #[error("a different venue with this id exists")]
    VenueExists,
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    New,
    /// The same definition was already stored (a retried PUT).
    Same,
}

pub struct ShowCatalog {
    /// Where definitions are stored (and each show's seat and shard rows
    /// created with it).
    shows: Shows,
    /// The currency of a show whose definition names none.
    default_currency: Currency,
    /// The charts shows on a venue are resolved through.
    venues: VenueCatalog,
    /// Where shows' price changes are read (`None`: prices as defined, for
    /// tools that never price a hold).
    log: Option<EventLog>,
    cache: Kept<ShowId, CatalogEntry>,
    /// One load at a time per show not cached yet. A 100,000-seat definition
    /// takes a CPU-bound parse of a few hundred milliseconds; an instance
    /// (re)started in an onsale gets its first requests for the show all at
    /// once, and each parsing it on its own kept both cores busy for seconds
    /// (measured: 10 holds/s for the first 6 s, against 4,300 once cached).
    loading: Mutex<HashMap<ShowId, Arc<tokio::sync::Mutex<()>>>>,
}

impl ShowCatalog {
    /// The catalog of the shows in `shows`; a show whose definition names
    /// no currency is in `default_currency`.
    pub fn new(default_currency: Currency, shows: Shows) -> Self {
        Self {
            venues: VenueCatalog::new(shows.clone()),
            log: None,
            shows,
            default_currency,
            cache: Kept::new(SHOW_CACHE_CAPACITY),
            loading: Mutex::default(),
        }
    }

    /// The currency of a show whose definition names none.
    pub fn default_currency(&self) -> Currency {
        self.default_currency
    }

    pub fn venues(&self) -> &VenueCatalog {
        &self.venues
    }

    /// Shows' price changes are read from `log`.
    pub fn reading_prices_from(mut self, log: EventLog) -> Self {
        self.log = Some(log);
        self
    }

    /// The show a definition describes, resolved through its venue.
    async fn resolve(
        &self,
        show_id: &ShowId,
        definition: &ShowDefinition,
        json: String,
    ) -> Result<CatalogEntry, CreateShowError> {
        let venue = match &definition.venue_id {
            Some(venue_id) => self.venues.get(venue_id).await?,
            None => None,
        };
        let show = definition.to_show(show_id.clone(), venue.as_ref().map(|v| &v.venue))?;
        let mut entry = CatalogEntry::new(show, json);
        if let Some(log) = &self.log {
            // The entry was just made: its prices are its own.
            if let Some(prices) = Arc::get_mut(&mut entry.prices) {
                prices.read_from(log.clone());
            }
        }
        Ok(match &venue {
            Some(venue) => entry.on_venue(venue)?,
            None => entry,
        })
    }

    /// A stored definition parsed; one stored before currencies is in the
    /// service's default currency.
    async fn parse_entry(
        &self,
        show_id: &ShowId,
        json: String,
    ) -> Result<CatalogEntry, StoreError> {
        let corrupt =
            |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("show {show_id}: {e}"));
        let definition: ShowDefinition = serde_json::from_str(&json).map_err(|e| corrupt(&e))?;
        let definition = definition.with_default_currency(self.default_currency);
        match self.resolve(show_id, &definition, json).await {
            Ok(entry) => Ok(entry),
            Err(CreateShowError::Store(e)) => Err(e),
            Err(other) => Err(corrupt(&other)),
        }
    }

    fn cached(&self, show_id: &ShowId) -> Option<Arc<CatalogEntry>> {
        self.cache.get(show_id)
    }

    fn remember(&self, entry: CatalogEntry) -> Arc<CatalogEntry> {
        self.cache.keep(entry.show.show_id.clone(), entry)
    }

    /// Whether the show keeps a waiting list (`None`: no such show), from
    /// the catalog if it holds the show, else from its definition read
    /// once and not kept: a worker looking at every show must not load
    /// every show into every instance's catalog.
    pub async fn keeps_waitlist(&self, show_id: &ShowId) -> Result<Option<bool>, StoreError> {
        if let Some(entry) = self.cached(show_id) {
            return Ok(Some(entry.show.waitlist.is_some()));
        }
        /// The one field looked at; the rest of the definition is skipped.
        #[derive(serde::Deserialize)]
        struct Probe {
            #[serde(default)]
            waitlist: Option<serde::de::IgnoredAny>,
        }
        let Some(json) = self.shows.show_definition(show_id).await? else {
            return Ok(None);
        };
        let probe: Probe = serde_json::from_str(&json)
            .map_err(|e| StoreError::Corrupt(format!("show {show_id}'s definition: {e}")))?;
        Ok(Some(probe.waitlist.is_some()))
    }

    pub async fn get(&self, show_id: &ShowId) -> Result<Option<Arc<CatalogEntry>>, StoreError> {
        if let Some(entry) = self.cached(show_id) {
            return Ok(Some(entry));
        }
        let gate = {
            let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
            loading.entry(show_id.clone()).or_default().clone()
        };
        let turn = gate.lock().await;
        // The load before ours may have cached it.
        let loaded = match self.cached(show_id) {
            Some(entry) => Ok(Some(entry)),
            None => match self.shows.show_definition(show_id).await {
                Ok(Some(json)) => self
                    .parse_entry(show_id, json)
                    .await
                    .map(|e| Some(self.remember(e))),
                Ok(None) => Ok(None),
                Err(error) => Err(error),
            },
        };
        drop(turn);
        let mut loading = self.loading.lock().unwrap_or_else(|p| p.into_inner());
        // Ours and the map's: no one else waits on this gate (a waiter
        // clones it under the map's lock, which is held here).
        if Arc::strong_count(&gate) <= 2 {
            loading.remove(show_id);
        }
        loaded
    }

    pub async fn create(
        &self,
        show_id: ShowId,
        definition: &ShowDefinition,
        now: DateTime<Utc>,
    ) -> Result<(Created, Arc<CatalogEntry>), CreateShowError> {
        let definition = &definition.with_default_currency(self.default_currency);
        definition.check_new()?;
        let json = serde_json::to_string(definition)
            .map_err(|e| StoreError::Corrupt(format!("cannot serialize show: {e}")))?;
        let entry = self.resolve(&show_id, definition, json.clone()).await?;
        let show = &entry.show;
        let seats: Vec<(&SeatId, i32, &str)> = show
            .seats
            .iter()
            .enumerate()
            .map(|(ordinal, seat)| {
                // Ordinals fit: a show has at most MAX_SEATS_PER_SHOW seats.
                let ordinal = i32::try_from(ordinal).unwrap_or(i32::MAX);
                (&seat.seat_id, ordinal, seat.section.as_str())
            })
            .collect();
        let shards: Vec<(&PoolId, i32, i32)> = show
            .pools
            .iter()
            .flat_map(|pool| {
                (0..pool.shards).map(move |index| {
                    let capacity = shard_capacity(pool.capacity, pool.shards, index);
                    // Both fit: shards <= MAX_POOL_SHARDS, capacity <= MAX_POOL_CAPACITY.
                    (&pool.pool_id, index as i32, capacity as i32)
                })
            })
            .collect();
        match self
            .shows
            .insert_show(&show_id, &json, &seats, &shards, to_micros(now))
            .await?
        {
            ShowInsert::Created => Ok((Created::New, self.remember(entry))),
            ShowInsert::Exists(stored) => {
                let same = serde_json::from_str::<serde_json::Value>(&stored).ok()
                    == serde_json::from_str::<serde_json::Value>(&json).ok();
                if !same {
                    return Err(CreateShowError::Exists);
                }
                let entry = match self.cached(&show_id) {
                    Some(entry) => entry,
                    None => self.remember(self.parse_entry(&show_id, stored).await?),
                };
                Ok((Created::Same, entry))
            }
        }
    }
}
