//! The JSON of venues and shows as they travel: the bodies of `PUT
//! /v1/venues/{id}` and `PUT /v1/shows/{id}`, and the canonical forms
//! stored (re-serialized from these types, so two bodies that mean the same
//! thing store the same text).

use chrono::{DateTime, Utc};
use domain::definition::ShowError;
use domain::ids::{CategoryId, ChannelId, PoolId, SeatId, ShowId, TicketType, VenueId};
use domain::money::Currency;
use domain::places::{Area, PoolSpec, Position, SeatSpec};
use domain::pool::default_shards;
use domain::pricing::{PriceTable, Pricing, TicketTypeSpec};
use domain::show::{ChannelSpec, Show};
use domain::venue::{CategorySpec, Chart, SectionSpec, Stage, Venue};
use domain::waiting_room::WaitingRoomSettings;
use domain::waitlist::WaitlistSettings;
use serde::{Deserialize, Serialize};

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
    /// The venue whose chart the show sells (instead of `seats` and
    /// `pools`; both: 422).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub venue_id: Option<VenueId>,
    /// The price categories of a show with seats of its own (a venue's
    /// show has its venue's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 100)]
    pub categories: Vec<CategoryDefinition>,
    /// The ticket types sold, the first the default. Absent: one,
    /// `standard`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 20)]
    pub ticket_types: Vec<TicketTypeDefinition>,
    /// The price of each category by ticket type; every category in use
    /// needs a price for the default type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prices: Vec<PriceDefinition>,
    /// Until when a buyer may cancel lines of their own orders (an admin
    /// always may). Absent: no end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buyer_cancellation_until: Option<DateTime<Utc>>,
    /// The sales channels inventory may be allocated to (the box office,
    /// partners), each once; at most MAX_CHANNELS_PER_SHOW.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 32)]
    pub channels: Vec<ChannelDefinition>,
    /// Keep a waiting list: seats that free (released, expired, cancelled,
    /// given back) are offered to its entries in turn before anyone else
    /// may hold them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waitlist: Option<WaitlistDefinition>,
    /// Until when tickets may change hands (absent: until checked in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transfer_until: Option<DateTime<Utc>>,
    /// The door: its gates and the re-entry rule (absent: one gate `main`,
    /// re-entry allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkin: Option<CheckinDefinition>,
}

/// A show's door.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckinDefinition {
    /// 1..=MAX_GATES_PER_SHOW gates, each once.
    #[schema(min_items = 1, max_items = 100)]
    pub gates: Vec<GateDefinition>,
    /// May a ticket that left come in again (absent: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reentry: Option<bool>,
}

/// One gate of a show's door.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GateDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub gate_id: domain::ids::GateId,
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
}

impl CheckinDefinition {
    fn settings(&self) -> domain::show::CheckinSettings {
        domain::show::CheckinSettings {
            gates: (self.gates.iter())
                .map(|g| domain::show::GateSpec {
                    gate_id: g.gate_id.clone(),
                    label: g.label.clone(),
                })
                .collect(),
            reentry: self.reentry.unwrap_or(true),
        }
    }
}

/// A show's waiting list.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitlistDefinition {
    /// How long an offer's hold lasts: MIN_OFFER_SECONDS..=MAX_OFFER_SECONDS.
    #[schema(minimum = 60, maximum = 86400)]
    pub offer_seconds: u32,
    /// How many entries may wait (or hold an offer) at once:
    /// 1..=MAX_WAITLIST_ENTRIES (absent: that many). A buyer who left
    /// counts no more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100000)]
    pub max_entries: Option<u32>,
}

impl WaitlistDefinition {
    fn settings(self) -> WaitlistSettings {
        WaitlistSettings {
            offer_seconds: self.offer_seconds,
            max_entries: self.max_entries,
        }
    }
}

/// A sales channel of a show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub channel_id: ChannelId,
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
}

/// A price category: what the seat map colours a seat by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CategoryDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub category: CategoryId,
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
    /// `#rrggbb`.
    #[schema(pattern = "^#[0-9A-Fa-f]{6}$")]
    pub color: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TicketTypeDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub ticket_type: TicketType,
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PriceDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub category: CategoryId,
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub ticket_type: TicketType,
    /// 0..=MAX_PRICE_CENTS.
    #[schema(minimum = 0, maximum = 10000000)]
    pub price_cents: i64,
}

/// A rectangle of the chart (y grows downward).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AreaDefinition {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StageDefinition {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    #[serde(default = "stage_label")]
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
}

fn stage_label() -> String {
    "Stage".into()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SectionDefinition {
    #[schema(min_length = 1, max_length = 200)]
    pub section: String,
    #[schema(min_length = 1, max_length = 200)]
    pub label: String,
}

/// A seating chart, the body of `PUT /v1/venues/{id}`: created once, used
/// by many shows, never changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VenueDefinition {
    #[schema(min_length = 1, max_length = 200)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<StageDefinition>,
    #[schema(max_items = 100)]
    pub categories: Vec<CategoryDefinition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(max_items = 1000)]
    pub sections: Vec<SectionDefinition>,
    /// Each at `x`, `y`, in a listed `category` (and section, when
    /// `sections` lists any); no `price_cents` (a show prices categories).
    #[serde(default)]
    #[schema(max_items = 100000)]
    pub seats: Vec<SeatDefinition>,
    #[serde(default)]
    #[schema(max_items = 100)]
    pub pools: Vec<PoolDefinition>,
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
    venue_id: Option<String>,
    stage: Option<StageDefinition>,
    categories: Vec<CategoryDefinition>,
    sections: Vec<SectionDefinition>,
    ticket_types: Vec<TicketTypeDefinition>,
    /// On a show with categories: the prices in force now.
    prices: Vec<PriceDefinition>,
    buyer_cancellation_until: Option<DateTime<Utc>>,
    channels: Vec<ChannelDefinition>,
    waitlist: Option<WaitlistDefinition>,
    transfer_until: Option<DateTime<Utc>>,
    checkin: Option<CheckinDefinition>,
}

/// A venue as `PUT` and `GET /v1/venues/{id}` answer it: the definition
/// with its id.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct VenueView {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    venue_id: String,
    name: String,
    stage: Option<StageDefinition>,
    categories: Vec<CategoryDefinition>,
    sections: Vec<SectionDefinition>,
    seats: Vec<SeatDefinition>,
    pools: Vec<PoolDefinition>,
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
    /// 0..=MAX_PRICE_CENTS: the seat's price for the default ticket type,
    /// on a show without categories (with them, `category` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 10000000)]
    pub price_cents: Option<i64>,
    /// 0..=MAX_SEAT_RANK; for best available, lower is better. Absent: the
    /// seat's position in `seats` (absent stays absent when read back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1000000000)]
    pub rank: Option<i64>,
    /// Its price category, one of the show's (or venue's) `categories`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub category: Option<CategoryId>,
    /// Where the seat map draws it (both or neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub y: Option<f64>,
    /// A wheelchair space.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accessible: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PoolDefinition {
    #[schema(value_type = String, pattern = "^[A-Za-z0-9_.:-]{1,32}$", min_length = 1, max_length = 32)]
    pub pool_id: PoolId,
    /// 1..=MAX_POOL_CAPACITY.
    #[schema(minimum = 1, maximum = 1000000)]
    pub capacity: u32,
    /// 0..=MAX_PRICE_CENTS a place, on a show without categories (with
    /// them, `category` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 10000000)]
    pub price_cents: Option<i64>,
    /// Shards to split the capacity into (1..=MAX_POOL_SHARDS, at most the
    /// capacity); a default from the capacity if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 32)]
    pub shards: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, pattern = "^[A-Za-z0-9_.:-]{1,32}$")]
    pub category: Option<CategoryId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 200)]
    pub label: Option<String>,
    /// Where the seat map draws its standing area.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<AreaDefinition>,
}

impl ShowDefinition {
    /// The show this definition describes, on `venue` when it names one
    /// (the catalog reads it; `None` for a venue it names: 422).
    /// What a new show is refused beyond what `to_show` checks: a price
    /// its currency cannot express (`jpy`: whole yen). Checked when a show
    /// is created, not when a stored one is read: a show stored before
    /// this rule still loads (its purchases refuse such a price).
    pub fn check_new(&self) -> Result<(), ShowError> {
        let currency = self.currency.unwrap_or(Currency::EUR);
        domain::pricing::check_currency(self.prices.iter().map(|p| p.price_cents), currency)?;
        Ok(())
    }

    /// The show's seats, pools and chart: its venue's, or its own.
    fn units(
        &self,
        venue: Option<&Venue>,
    ) -> Result<(Vec<SeatSpec>, Vec<PoolSpec>, Chart), ShowError> {
        Ok(match (&self.venue_id, venue) {
            (Some(_), _) if !self.seats.is_empty() || !self.pools.is_empty() => {
                return Err(ShowError::Either {
                    field: "venue_id".into(),
                    other: "seats and pools".into(),
                })
            }
            (Some(_), _) if !self.categories.is_empty() => {
                return Err(ShowError::Either {
                    field: "venue_id".into(),
                    other: "categories".into(),
                })
            }
            (Some(venue_id), None) => return Err(ShowError::UnknownVenue(venue_id.clone())),
            (Some(_), Some(venue)) => (
                venue.seats.clone(),
                venue.pools.clone(),
                venue.chart.clone(),
            ),
            (None, _) => (
                seat_specs(&self.seats, true)?,
                pool_specs(&self.pools, true)?,
                Chart {
                    categories: category_specs(&self.categories),
                    ..Chart::default()
                },
            ),
        })
    }

    pub fn to_show(&self, show_id: ShowId, venue: Option<&Venue>) -> Result<Show, ShowError> {
        let (seats, pools, chart) = self.units(venue)?;
        let categories = (chart.categories.iter()).map(|c| c.category.clone());
        let categories = categories.collect();
        let ticket_types = self.ticket_type_specs();
        let table = PriceTable::new(
            self.prices
                .iter()
                .map(|p| (p.category.clone(), p.ticket_type.clone(), p.price_cents)),
            &categories,
            &ticket_types,
        )?;
        let in_use = domain::venue::categories_in_use(&seats, &pools);
        let pricing = Pricing::new(ticket_types, categories, table, &in_use)?;
        let (seats, pools) = priced_by_default(seats, pools, &pricing);
        Show::new(
            show_id,
            self.name.clone(),
            self.starts_at,
            self.hold_ttl_seconds,
            seats,
            pools,
        )?
        .with_max_seats_per_buyer(self.max_seats_per_buyer)?
        .with_max_hold_seconds(self.max_hold_seconds)?
        .with_currency(self.currency.unwrap_or(Currency::EUR))?
        .with_waiting_room(self.waiting_room.map(|w| w.settings()))?
        .with_pricing(self.venue_id.clone(), chart, pricing)?
        .with_buyer_cancellation_until(self.buyer_cancellation_until)
        .with_channels(self.channel_specs())?
        .with_waitlist(self.waitlist.map(WaitlistDefinition::settings))?
        .with_transfer_until(self.transfer_until)
        .with_checkin(self.checkin.as_ref().map(CheckinDefinition::settings))
    }

    fn channel_specs(&self) -> Vec<ChannelSpec> {
        (self.channels.iter())
            .map(|c| ChannelSpec {
                channel_id: c.channel_id.clone(),
                label: c.label.clone(),
            })
            .collect()
    }

    fn ticket_type_specs(&self) -> Vec<TicketTypeSpec> {
        if self.ticket_types.is_empty() {
            return Pricing::default().ticket_types;
        }
        self.ticket_types
            .iter()
            .map(|t| TicketTypeSpec {
                ticket_type: t.ticket_type.clone(),
                label: t.label.clone(),
            })
            .collect()
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

impl VenueDefinition {
    pub fn to_venue(&self, venue_id: VenueId) -> Result<Venue, ShowError> {
        let chart = Chart {
            stage: self.stage.as_ref().map(|s| Stage {
                area: Area {
                    x: s.x,
                    y: s.y,
                    width: s.width,
                    height: s.height,
                },
                label: s.label.clone(),
            }),
            categories: category_specs(&self.categories),
            sections: self
                .sections
                .iter()
                .map(|s| SectionSpec {
                    section: s.section.clone(),
                    label: s.label.clone(),
                })
                .collect(),
        };
        Venue::new(
            venue_id,
            self.name.clone(),
            chart,
            seat_specs(&self.seats, false)?,
            pool_specs(&self.pools, false)?,
        )
    }
}

fn category_specs(categories: &[CategoryDefinition]) -> Vec<CategorySpec> {
    categories
        .iter()
        .map(|c| CategorySpec {
            category: c.category.clone(),
            label: c.label.clone(),
            color: c.color.clone(),
        })
        .collect()
}

/// The seats of a definition. A show's own seat names a `price_cents` or a
/// `category`, not both (`priced`); a venue's names no price.
fn seat_specs(seats: &[SeatDefinition], priced: bool) -> Result<Vec<SeatSpec>, ShowError> {
    seats
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let price_cents = own_price(s.price_cents, s.category.as_ref(), priced, || {
                format!("seats[{i}]")
            })?;
            let position = match (s.x, s.y) {
                (Some(x), Some(y)) => Some(Position { x, y }),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(ShowError::Missing {
                        field: format!("seats[{i}].y"),
                    })
                }
                (None, Some(_)) => {
                    return Err(ShowError::Missing {
                        field: format!("seats[{i}].x"),
                    })
                }
            };
            Ok(SeatSpec {
                seat_id: s.seat_id.clone(),
                section: s.section.clone(),
                row: s.row.clone(),
                number: s.number,
                price_cents,
                rank: s.rank,
                category: s.category.clone(),
                position,
                accessible: s.accessible,
            })
        })
        .collect()
}

fn pool_specs(pools: &[PoolDefinition], priced: bool) -> Result<Vec<PoolSpec>, ShowError> {
    pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let price_cents = own_price(p.price_cents, p.category.as_ref(), priced, || {
                format!("pools[{i}]")
            })?;
            Ok(PoolSpec {
                pool_id: p.pool_id.clone(),
                capacity: p.capacity,
                price_cents,
                shards: p.shards.unwrap_or_else(|| default_shards(p.capacity)),
                category: p.category.clone(),
                label: p.label.clone(),
                area: p.area.map(|a| Area {
                    x: a.x,
                    y: a.y,
                    width: a.width,
                    height: a.height,
                }),
            })
        })
        .collect()
}

/// A place's own price: on a show, exactly one of `price_cents` and a
/// category (the category's price is set later, `priced_by_default`); on a
/// venue, none.
fn own_price(
    price_cents: Option<i64>,
    category: Option<&CategoryId>,
    priced: bool,
    at: impl Fn() -> String,
) -> Result<i64, ShowError> {
    match (price_cents, category, priced) {
        (Some(_), _, false) => Err(ShowError::Either {
            field: format!("{}.price_cents", at()),
            other: "a venue (its shows price its categories)".into(),
        }),
        (Some(_), Some(_), true) => Err(ShowError::Either {
            field: format!("{}.price_cents", at()),
            other: "category".into(),
        }),
        (Some(price), None, true) => Ok(price),
        (None, None, true) => Err(ShowError::Missing {
            field: format!("{}.price_cents", at()),
        }),
        (None, _, _) => Ok(0),
    }
}

/// Each seat and pool in a category gets its category's price for the
/// default ticket type as its own price: what a reader of `price_cents`
/// (the grid, an old client) sees.
fn priced_by_default(
    mut seats: Vec<SeatSpec>,
    mut pools: Vec<PoolSpec>,
    pricing: &Pricing,
) -> (Vec<SeatSpec>, Vec<PoolSpec>) {
    let table = pricing.schedule.at(DateTime::<Utc>::MIN_UTC);
    let default = pricing.default_type();
    for seat in &mut seats {
        if let Some(price) = seat.category.as_ref().and_then(|c| table.get(c, default)) {
            seat.price_cents = price;
        }
    }
    for pool in &mut pools {
        if let Some(price) = pool.category.as_ref().and_then(|c| table.get(c, default)) {
            pool.price_cents = price;
        }
    }
    (seats, pools)
}
