//! Shows: created once by an admin, immutable after, cached by every instance.

use domain::best_available::{SeatOrder, SeatPlace};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use chrono::{DateTime, Utc};
use domain::ids::{PoolId, SeatId, ShowId};
use domain::money::Currency;
use domain::pool::{default_shards, shard_capacity};
use domain::show::{PoolSpec, SeatSpec, Show, ShowError};
use domain::waiting_room::WaitingRoomSettings;
use projections::time::to_micros;
use serde::{Deserialize, Serialize};

use crate::store::{ShowInsert, Shows, StoreError};

/// Shows kept parsed in memory. A 100,000-seat show takes some tens of
/// megabytes parsed; an onsale has a handful of hot shows.
pub const SHOW_CACHE_CAPACITY: usize = 64;

/// A show definition as it travels: the body of `PUT /v1/shows/{id}`, and
/// the canonical form stored (re-serialized from this type, so two bodies
/// that mean the same show store the same text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowDefinition {
    /// 1..=200 characters (MAX_TEXT_CHARS).
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    pub starts_at: DateTime<Utc>,
    /// MIN_HOLD_TTL_SECONDS..=MAX_HOLD_TTL_SECONDS.
    #[schema(minimum = 1, maximum = 7200)]
    pub hold_ttl_seconds: u32,
    /// How long a hold may last in all, extensions included, from its
    /// placement: MIN_MAX_HOLD_SECONDS..=MAX_HOLD_SECONDS_CAP and at least
    /// `hold_ttl_seconds`. Absent: 3 × `hold_ttl_seconds`, at most 7200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 7200)]
    pub max_hold_seconds: Option<u32>,
    /// At most MAX_SEATS_PER_SHOW; a show has seats, pools or both.
    #[serde(default)]
    #[schema(max_items = 100000)]
    pub seats: Vec<SeatDefinition>,
    /// At most MAX_POOLS_PER_SHOW.
    #[serde(default)]
    #[schema(max_items = 100)]
    pub pools: Vec<PoolDefinition>,
    /// Seats and pool places one buyer may have held (not expired) or
    /// booked on the show, MIN_SEATS_PER_BUYER..=MAX_SEATS_PER_BUYER;
    /// absent: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 1000)]
    pub max_seats_per_buyer: Option<u32>,
    /// The ISO 4217 code of its prices (`"eur"`; either case). Absent: the
    /// service's `BOOKING_CURRENCY`, filled in when the show is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z]{3}$")]
    pub currency: Option<Currency>,
    /// Open the sale through a waiting room: buyers join a queue and may
    /// hold seats once admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<WaitingRoomDefinition>,
}

/// A show's waiting room: from `sale_starts_at`, `admit_per_minute` buyers
/// a minute are admitted, each for `admission_ttl_seconds`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitingRoomDefinition {
    /// Who joins before this instant is placed in a random order at it.
    pub sale_starts_at: DateTime<Utc>,
    /// MIN_ADMIT_PER_MINUTE..=MAX_ADMIT_PER_MINUTE.
    #[schema(minimum = 1, maximum = 1000000)]
    pub admit_per_minute: u32,
    /// MIN_ADMISSION_TTL_SECONDS..=MAX_ADMISSION_TTL_SECONDS.
    #[schema(minimum = 60, maximum = 3600)]
    pub admission_ttl_seconds: u32,
}

impl WaitingRoomDefinition {
    pub fn settings(&self) -> WaitingRoomSettings {
        WaitingRoomSettings {
            sale_starts_at: self.sale_starts_at,
            admit_per_minute: self.admit_per_minute,
            admission_ttl_seconds: self.admission_ttl_seconds,
        }
    }
}

/// A show as `PUT` and `GET /v1/shows/{id}` answer it: the definition with its id.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ShowView {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    show_id: String,
    name: String,
    starts_at: DateTime<Utc>,
    hold_ttl_seconds: u32,
    #[schema(minimum = 1, maximum = 7200)]
    max_hold_seconds: Option<u32>,
    seats: Vec<SeatDefinition>,
    pools: Vec<PoolDefinition>,
    #[schema(minimum = 1, maximum = 1000)]
    max_seats_per_buyer: Option<u32>,
    #[schema(pattern = "^[a-z]{3}$")]
    currency: Option<String>,
    waiting_room: Option<WaitingRoomDefinition>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SeatDefinition {
    /// `[A-Za-z0-9_.:-]{1,32}`, unique in the show.
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$", min_length = 1, max_length = 32)]
    pub seat_id: SeatId,
    /// 1..=200 characters (MAX_TEXT_CHARS).
    #[schema(min_length = 1, max_length = 200)]
    pub section: String,
    #[schema(min_length = 1, max_length = 200)]
    pub row: String,
    /// 1..MAX_SEAT_NUMBER.
    #[schema(minimum = 1, maximum = 999999)]
    pub number: u32,
    /// 0..=MAX_PRICE_CENTS.
    #[schema(minimum = 0, maximum = 10000000)]
    pub price_cents: i64,
    /// 0..=MAX_SEAT_RANK; for best available, lower is better. Absent: the
    /// seat's position in `seats` (absent stays absent when read back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000000)]
    pub rank: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$", min_length = 1, max_length = 32)]
    pub pool_id: PoolId,
    /// 1..=MAX_POOL_CAPACITY.
    #[schema(minimum = 1, maximum = 1000000)]
    pub capacity: u32,
    /// 0..=MAX_PRICE_CENTS.
    #[schema(minimum = 0, maximum = 10000000)]
    pub price_cents: i64,
    /// Shards to split the capacity into (1..=MAX_POOL_SHARDS, at most the
    /// capacity); a default from the capacity if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 32)]
    pub shards: Option<u32>,
}

impl ShowDefinition {
    pub fn to_show(&self, show_id: ShowId) -> Result<Show, ShowError> {
        Show::new(
            show_id,
            self.name.clone(),
            self.starts_at,
            self.hold_ttl_seconds,
            self.seats
                .iter()
                .map(|s| SeatSpec {
                    seat_id: s.seat_id.clone(),
                    section: s.section.clone(),
                    row: s.row.clone(),
                    number: s.number,
                    price_cents: s.price_cents,
                    rank: s.rank,
                })
                .collect(),
            self.pools
                .iter()
                .map(|p| PoolSpec {
                    pool_id: p.pool_id.clone(),
                    capacity: p.capacity,
                    price_cents: p.price_cents,
                    shards: p.shards.unwrap_or_else(|| default_shards(p.capacity)),
                })
                .collect(),
        )?
        .with_max_seats_per_buyer(self.max_seats_per_buyer)?
        .with_max_hold_seconds(self.max_hold_seconds)?
        .with_currency(self.currency.unwrap_or(Currency::EUR))?
        .with_waiting_room(self.waiting_room.map(|w| w.settings()))
    }

    /// The definition as the service stores it: the default currency filled
    /// in when the body names none, so that the show keeps the currency it
    /// was created with whatever `BOOKING_CURRENCY` says later.
    pub fn with_default_currency(&self, default: Currency) -> ShowDefinition {
        ShowDefinition {
            currency: Some(self.currency.unwrap_or(default)),
            ..self.clone()
        }
    }
}

/// A show as the service holds it: validated, plus its canonical JSON.
pub struct CatalogEntry {
    pub show: Show,
    pub definition_json: String,
    /// Each seat's availability entry up to its status, serialized once:
    /// `{"seat_id":"A-1","section":"A","status":"` (an answer for 100,000
    /// seats is then a concatenation).
    pub seat_json_prefix: Vec<Box<str>>,
    /// The seats in the order best available scans them (by ordinal).
    pub seat_order: SeatOrder,
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
        Self {
            show,
            definition_json,
            seat_json_prefix,
            seat_order,
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

    /// The show as `GET /v1/shows/{id}` answers it: the definition with its id.
    pub fn to_json(&self) -> String {
        // The canonical definition is a JSON object (serialized from
        // `ShowDefinition`), so it starts with '{'; the id goes first.
        let rest = self.definition_json.strip_prefix('{').unwrap_or("}");
        let id = serde_json::Value::String(self.show.show_id.to_string());
        format!("{{\"show_id\":{id},{rest}")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CreateShowError {
    #[error(transparent)]
    Invalid(#[from] ShowError),
    #[error("a different show with this id exists")]
    Exists,
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
    cache: RwLock<HashMap<ShowId, Arc<CatalogEntry>>>,
    /// One load at a time per show not cached yet. A 100,000-seat definition
    /// takes a CPU-bound parse of a few hundred milliseconds; an instance
    /// (re)started in an onsale gets its first requests for the show all at
    /// once, and each parsing it on its own kept both cores busy for seconds
    /// (measured: 10 holds/s for the first 6 s, against 4,300 once cached).
    loading: Mutex<HashMap<ShowId, Arc<tokio::sync::Mutex<()>>>>,
}

/// A stored definition parsed; one stored before currencies is in the
/// service's default currency.
fn parse_entry(
    show_id: &ShowId,
    json: String,
    default_currency: Currency,
) -> Result<CatalogEntry, StoreError> {
    let definition: ShowDefinition = serde_json::from_str(&json)
        .map_err(|e| StoreError::Corrupt(format!("show {show_id}: {e}")))?;
    let show = definition
        .with_default_currency(default_currency)
        .to_show(show_id.clone())
        .map_err(|e| StoreError::Corrupt(format!("show {show_id}: {e}")))?;
    Ok(CatalogEntry::new(show, json))
}

impl ShowCatalog {
    /// The catalog of the shows in `shows`; a show whose definition names
    /// no currency is in `default_currency`.
    pub fn new(default_currency: Currency, shows: Shows) -> Self {
        Self {
            shows,
            default_currency,
            cache: RwLock::default(),
            loading: Mutex::default(),
        }
    }

    /// The currency of a show whose definition names none.
    pub fn default_currency(&self) -> Currency {
        self.default_currency
    }

    fn cached(&self, show_id: &ShowId) -> Option<Arc<CatalogEntry>> {
        let cache = self.cache.read().unwrap_or_else(|p| p.into_inner());
        cache.get(show_id).cloned()
    }

    fn remember(&self, entry: CatalogEntry) -> Arc<CatalogEntry> {
        let entry = Arc::new(entry);
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= SHOW_CACHE_CAPACITY {
            // Shows are immutable and cheap to reload: dropping any one is safe.
            if let Some(victim) = cache.keys().next().cloned() {
                cache.remove(&victim);
            }
        }
        cache.insert(entry.show.show_id.clone(), entry.clone());
        entry
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
                Ok(Some(json)) => parse_entry(show_id, json, self.default_currency)
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
        let show = definition.to_show(show_id.clone())?;
        let json = serde_json::to_string(definition)
            .map_err(|e| StoreError::Corrupt(format!("cannot serialize show: {e}")))?;
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
            ShowInsert::Created => {
                let entry = self.remember(CatalogEntry::new(show, json));
                Ok((Created::New, entry))
            }
            ShowInsert::Exists(stored) => {
                let same = serde_json::from_str::<serde_json::Value>(&stored).ok()
                    == serde_json::from_str::<serde_json::Value>(&json).ok();
                if !same {
                    return Err(CreateShowError::Exists);
                }
                let entry = match self.cached(&show_id) {
                    Some(entry) => entry,
                    None => self.remember(parse_entry(&show_id, stored, self.default_currency)?),
                };
                Ok((Created::Same, entry))
            }
        }
    }
}
