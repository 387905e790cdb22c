//! Prices by category and ticket type, and how they change over time.
//!
//! A show sells its seats and pool places by **category** (`premium`,
//! `standard`: a venue's, or the show's own) and **ticket type** (`adult`,
//! `child`; the first listed is the default). A [`PriceTable`] prices each
//! pair of category and ticket type; a [`PriceSchedule`] is the table in
//! force from the show's creation, then each change from its effective
//! instant. A hold is priced once, when it is decided, by the table in
//! force at the decision's `now` ([`Pricing::price`]), and the price goes
//! into its events ([`ItemPrice`]): a later change never reprices it.
//!
//! A seat of a show without categories keeps its own `price_cents`, its
//! price for the default ticket type (the shows before categories).

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use chrono::Duration;

use crate::aggregate::Timed;
use crate::aggregate::{event_names, impl_aggregate, Decider};
use crate::ids::{CategoryId, ShowId, TicketType};
use crate::limits::{MAX_CATEGORIES, MAX_PRICE_CENTS, MAX_PRICE_CHANGES, MAX_TICKET_TYPES};
use crate::money::{Currency, MoneyError};

/// A ticket type a show sells, with the label a buyer sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketTypeSpec {
    pub ticket_type: TicketType,
    pub label: String,
}

/// What one seat or pool place of a hold costs, fixed at the hold's
/// decision and recorded in its event. `category` is `None` on a show
/// without categories (the seat's own price).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemPrice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<CategoryId>,
    pub ticket_type: TicketType,
    pub price_cents: i64,
}

/// Why a price table, or a price asked for, is refused. Messages name the
/// field: they go back to the client as `detail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    #[error("{field} must be 0..={MAX_PRICE_CENTS} cents")]
    Price { field: String },
    #[error("{field}: category {category} is not one of the show's categories")]
    UnknownCategory { field: String, category: CategoryId },
    #[error("{field}: ticket type {ticket_type} is not one of the show's ticket types")]
    UnknownTicketType {
        field: String,
        ticket_type: TicketType,
    },
    #[error("{field}: category {category} and ticket type {ticket_type} are priced twice")]
    Duplicate {
        field: String,
        category: CategoryId,
        ticket_type: TicketType,
    },
    #[error(
        "category {category} is in use and has no price for the default ticket type {ticket_type}"
    )]
    DefaultMissing {
        category: CategoryId,
        ticket_type: TicketType,
    },
    #[error("{field}: {error}")]
    Currency { field: String, error: MoneyError },
    #[error("ticket_types: 1..={MAX_TICKET_TYPES}, each listed once")]
    TicketTypes,
    #[error("categories: at most {MAX_CATEGORIES}, each listed once")]
    Categories,
    #[error("a show's prices change at most {MAX_PRICE_CHANGES} times")]
    TooManyChanges,
    /// Asked for a pair nobody priced: 422 `ticket_type_unavailable`.
    #[error("ticket type {ticket_type} has no price for {what}")]
    Unavailable {
        what: String,
        ticket_type: TicketType,
    },
}

/// Every price of a table as asked (`prices[i].price_cents`, in order) is
/// one `currency` can be paid in (`jpy`: whole yen, a multiple of 100
/// cents): a show or a change is refused a price it could never charge.
pub fn check_currency(
    prices_cents: impl IntoIterator<Item = i64>,
    currency: Currency,
) -> Result<(), PriceError> {
    for (i, price_cents) in prices_cents.into_iter().enumerate() {
        currency
            .minor_units(price_cents)
            .map_err(|error| PriceError::Currency {
                field: format!("prices[{i}].price_cents"),
                error,
            })?;
    }
    Ok(())
}

/// One table: the price of each pair of category and ticket type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PriceTable(BTreeMap<(CategoryId, TicketType), i64>);

impl PriceTable {
    /// A table from its entries `(category, ticket_type, price_cents)`,
    /// each checked against the show's categories and ticket types;
    /// `prices[i]` in the errors.
    pub fn new(
        entries: impl IntoIterator<Item = (CategoryId, TicketType, i64)>,
        categories: &HashSet<CategoryId>,
        ticket_types: &[TicketTypeSpec],
    ) -> Result<Self, PriceError> {
        let mut table = BTreeMap::new();
        for (i, (category, ticket_type, price_cents)) in entries.into_iter().enumerate() {
            let field = || format!("prices[{i}]");
            if !(0..=MAX_PRICE_CENTS).contains(&price_cents) {
                return Err(PriceError::Price {
                    field: format!("prices[{i}].price_cents"),
                });
            }
            if !categories.contains(&category) {
                return Err(PriceError::UnknownCategory {
                    field: field(),
                    category,
                });
            }
            if !ticket_types.iter().any(|t| t.ticket_type == ticket_type) {
                return Err(PriceError::UnknownTicketType {
                    field: field(),
                    ticket_type,
                });
            }
            if table
                .insert((category.clone(), ticket_type.clone()), price_cents)
                .is_some()
            {
                return Err(PriceError::Duplicate {
                    field: field(),
                    category,
                    ticket_type,
                });
            }
        }
        Ok(Self(table))
    }

    pub fn get(&self, category: &CategoryId, ticket_type: &TicketType) -> Option<i64> {
        self.0
            .get(&(category.clone(), ticket_type.clone()))
            .copied()
    }

    /// Every entry, in the order of category then ticket type.
    pub fn entries(&self) -> impl Iterator<Item = (&CategoryId, &TicketType, i64)> {
        self.0.iter().map(|((c, t), p)| (c, t, *p))
    }

    /// Every category `in_use` has a price for `default`.
    fn covers<'a>(
        &self,
        in_use: impl IntoIterator<Item = &'a CategoryId>,
        default: &TicketType,
    ) -> Result<(), PriceError> {
        for category in in_use {
            if self.get(category, default).is_none() {
                return Err(PriceError::DefaultMissing {
                    category: category.clone(),
                    ticket_type: default.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The tables of a show over time: the first in force from the show's
/// creation, each next one from its effective instant (in order).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PriceSchedule {
    changes: Vec<(DateTime<Utc>, PriceTable)>,
    first: PriceTable,
}

impl PriceSchedule {
    pub fn new(first: PriceTable) -> Self {
        Self {
            changes: Vec::new(),
            first,
        }
    }

    /// The table in force at `at`.
    pub fn at(&self, at: DateTime<Utc>) -> &PriceTable {
        self.changes
            .iter()
            .rev()
            .find(|(from, _)| *from <= at)
            .map_or(&self.first, |(_, table)| table)
    }

    /// Every table with the instant it took effect from (`None`: the
    /// show's creation).
    pub fn tables(&self) -> impl Iterator<Item = (Option<DateTime<Utc>>, &PriceTable)> {
        std::iter::once((None, &self.first)).chain(
            self.changes
                .iter()
                .map(|(from, table)| (Some(*from), table)),
        )
    }

    /// A change in force from `effective_at`. Changes are kept in order of
    /// their instants; one at the instant of another replaces it from then.
    pub fn change(
        &mut self,
        effective_at: DateTime<Utc>,
        table: PriceTable,
    ) -> Result<(), PriceError> {
        if self.changes.len() >= MAX_PRICE_CHANGES {
            return Err(PriceError::TooManyChanges);
        }
        let at = self
            .changes
            .partition_point(|(from, _)| *from <= effective_at);
        self.changes.insert(at, (effective_at, table));
        Ok(())
    }
}

/// A show's ticket types and prices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pricing {
    /// At least one; the first is the default.
    pub ticket_types: Vec<TicketTypeSpec>,
    /// The categories a table may price (the chart's).
    pub categories: HashSet<CategoryId>,
    pub schedule: PriceSchedule,
}

impl Default for Pricing {
    /// A show without categories: one ticket type, `standard`, and the
    /// seats' and pools' own prices.
    fn default() -> Self {
        Self {
            ticket_types: vec![TicketTypeSpec {
                ticket_type: TicketType::standard(),
                label: "Standard".into(),
            }],
            categories: HashSet::new(),
            schedule: PriceSchedule::default(),
        }
    }
}

impl Pricing {
    /// Ticket types (the first the default), the categories tables may
    /// price, and the first table, which must price every category
    /// `in_use` for the default type.
    pub fn new<'a>(
        ticket_types: Vec<TicketTypeSpec>,
        categories: HashSet<CategoryId>,
        first: PriceTable,
        in_use: impl IntoIterator<Item = &'a CategoryId>,
    ) -> Result<Self, PriceError> {
        check_ticket_types(&ticket_types)?;
        first.covers(in_use, &ticket_types[0].ticket_type)?;
        Ok(Self {
            ticket_types,
            categories,
            schedule: PriceSchedule::new(first),
        })
    }

    pub fn default_type(&self) -> &TicketType {
        &self.ticket_types[0].ticket_type
    }

    pub fn has_type(&self, ticket_type: &TicketType) -> bool {
        self.ticket_types
            .iter()
            .any(|t| &t.ticket_type == ticket_type)
    }

    /// A change of the prices from `effective_at`: the new table must price
    /// every category `in_use` for the default type, as the first did.
    pub fn change<'a>(
        &mut self,
        effective_at: DateTime<Utc>,
        table: PriceTable,
        in_use: impl IntoIterator<Item = &'a CategoryId>,
    ) -> Result<(), PriceError> {
        table.covers(in_use, self.default_type())?;
        self.schedule.change(effective_at, table)
    }

    /// What one seat or place costs at `now` as `ticket_type` (`None`: the
    /// default): by its category's price in the table in force, or, without
    /// a category, its `own` price for the default type only. `what` names
    /// the seat or pool in the refusal.
    pub fn price(
        &self,
        what: impl Fn() -> String,
        category: Option<&CategoryId>,
        own: i64,
        ticket_type: Option<&TicketType>,
        now: DateTime<Utc>,
    ) -> Result<ItemPrice, PriceError> {
        let ticket_type = ticket_type.unwrap_or(self.default_type());
        let unavailable = || PriceError::Unavailable {
            what: what(),
            ticket_type: ticket_type.clone(),
        };
        let price_cents = match category {
            Some(category) => self
                .schedule
                .at(now)
                .get(category, ticket_type)
                .ok_or_else(unavailable)?,
            None if ticket_type == self.default_type() => own,
            None => return Err(unavailable()),
        };
        Ok(ItemPrice {
            category: category.cloned(),
            ticket_type: ticket_type.clone(),
            price_cents,
        })
    }
}

fn check_ticket_types(ticket_types: &[TicketTypeSpec]) -> Result<(), PriceError> {
    if ticket_types.is_empty() || ticket_types.len() > MAX_TICKET_TYPES {
        return Err(PriceError::TicketTypes);
    }
    let mut seen = HashSet::new();
    if !ticket_types.iter().all(|t| seen.insert(&t.ticket_type)) {
        return Err(PriceError::TicketTypes);
    }
    Ok(())
}

/// How long after it is decided a price change takes effect at the
/// earliest. A hold is priced by the tables its instance has read, never
/// read longer than `PRICES_MAX_AGE` (the service's, 750 ms) before the
/// hold's decision, and a change's append commits within the store's
/// acquire timeout of its decision (4 s): with 5 s, every instance has read
/// a change before any hold it would price (and all of them price a hold
/// decided at one instant alike).
pub const PRICE_CHANGE_LEAD_MS: i64 = 5_000;

pub fn price_change_lead() -> Duration {
    Duration::milliseconds(PRICE_CHANGE_LEAD_MS)
}

/// One entry of a price table as it travels in an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceEntry {
    pub category: CategoryId,
    pub ticket_type: TicketType,
    pub price_cents: i64,
}

/// A show's price changes: one stream per show (type `ShowPrices`, the
/// show's id as its id). The table in force from the show's creation is the
/// show's definition; each change is an event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShowPrices {
    pub changes: Vec<(DateTime<Utc>, Vec<PriceEntry>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PricesCommand {
    /// From `effective_at` (the decision's `now` if absent, never earlier),
    /// at the earliest [`PRICE_CHANGE_LEAD_MS`] after the decision, the
    /// table `prices` (checked against the show by the service).
    Change {
        prices: Vec<PriceEntry>,
        effective_at: Option<DateTime<Utc>>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PricesEvent {
    PricesChanged {
        effective_at: DateTime<Utc>,
        prices: Vec<PriceEntry>,
    },
}

event_names!(PricesEvent {
    PricesChanged => "PricesChanged",
});

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricesCommandError {
    #[error("effective_at must not be in the past")]
    InPast,
    #[error("a show's prices change at most {MAX_PRICE_CHANGES} times")]
    TooMany,
}

/// The instant a change asked for at `now` takes effect: as asked (not in
/// the past), but never before the lead.
pub fn effective_instant(
    asked: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, PricesCommandError> {
    match asked {
        Some(at) if at < now => Err(PricesCommandError::InPast),
        asked => Ok(asked.unwrap_or(now).max(now + price_change_lead())),
    }
}

impl Decider for ShowPrices {
    type Command = Timed<PricesCommand>;
    type Event = PricesEvent;
    type Error = PricesCommandError;

    fn decide(&self, command: &Self::Command) -> Result<Vec<PricesEvent>, PricesCommandError> {
        let PricesCommand::Change {
            prices,
            effective_at,
        } = &command.command;
        if self.changes.len() >= MAX_PRICE_CHANGES {
            return Err(PricesCommandError::TooMany);
        }
        Ok(vec![PricesEvent::PricesChanged {
            effective_at: effective_instant(*effective_at, command.now)?,
            prices: prices.clone(),
        }])
    }

    fn evolve(&mut self, event: &PricesEvent) {
        let PricesEvent::PricesChanged {
            effective_at,
            prices,
        } = event;
        self.changes.push((*effective_at, prices.clone()));
    }
}

impl_aggregate!(ShowPrices, "ShowPrices");

/// The id of a show's price stream: the show's id.
pub fn prices_stream_id(show: &ShowId) -> String {
    show.as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn category(id: &str) -> CategoryId {
        CategoryId::parse(id).unwrap()
    }

    fn ticket(id: &str) -> TicketType {
        TicketType::parse(id).unwrap()
    }

    fn types() -> Vec<TicketTypeSpec> {
        ["adult", "child"]
            .into_iter()
            .map(|t| TicketTypeSpec {
                ticket_type: ticket(t),
                label: t.to_uppercase(),
            })
            .collect()
    }

    fn categories() -> HashSet<CategoryId> {
        [category("premium"), category("standard")].into()
    }

    fn table(entries: &[(&str, &str, i64)]) -> Result<PriceTable, PriceError> {
        PriceTable::new(
            entries.iter().map(|(c, t, p)| (category(c), ticket(t), *p)),
            &categories(),
            &types(),
        )
    }

    fn pricing() -> Pricing {
        let first = table(&[
            ("premium", "adult", 12000),
            ("premium", "child", 6000),
            ("standard", "adult", 5000),
        ])
        .unwrap();
        Pricing::new(types(), categories(), first, &categories()).unwrap()
    }

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000 + seconds, 0).unwrap()
    }

    #[test]
    fn it_should_price_a_seat_by_its_category_and_ticket_type() {
        let price = pricing()
            .price(
                || "A-1".into(),
                Some(&category("premium")),
                0,
                Some(&ticket("child")),
                at(0),
            )
            .unwrap();
        assert_eq!(price.price_cents, 6000);
        assert_eq!(price.ticket_type, ticket("child"));
        assert_eq!(price.category, Some(category("premium")));
    }

    #[test]
    fn it_should_take_the_first_ticket_type_when_none_is_asked() {
        let price = pricing()
            .price(|| "A-1".into(), Some(&category("standard")), 0, None, at(0))
            .unwrap();
        assert_eq!(
            (price.ticket_type, price.price_cents),
            (ticket("adult"), 5000)
        );
    }

    #[test]
    fn it_should_refuse_a_pair_nobody_priced() {
        let err = pricing()
            .price(
                || "A-1".into(),
                Some(&category("standard")),
                0,
                Some(&ticket("child")),
                at(0),
            )
            .unwrap_err();
        assert!(matches!(err, PriceError::Unavailable { .. }), "{err:?}");
    }

    #[test]
    fn it_should_price_a_seat_without_category_by_its_own_price_for_the_default_type_only() {
        let plain = Pricing::default();
        let price = plain
            .price(|| "A-1".into(), None, 4200, None, at(0))
            .unwrap();
        assert_eq!((price.category, price.price_cents), (None, 4200));
        let err = pricing()
            .price(|| "A-1".into(), None, 4200, Some(&ticket("child")), at(0))
            .unwrap_err();
        assert!(matches!(err, PriceError::Unavailable { .. }), "{err:?}");
    }

    #[test]
    fn it_should_price_by_the_table_in_force_at_the_decision() {
        let mut pricing = pricing();
        let raised = table(&[("premium", "adult", 15000), ("standard", "adult", 5500)]).unwrap();
        pricing.change(at(100), raised, &categories()).unwrap();
        let premium = |now| {
            pricing
                .price(|| "A-1".into(), Some(&category("premium")), 0, None, now)
                .unwrap()
                .price_cents
        };
        assert_eq!(premium(at(99)), 12000);
        assert_eq!(premium(at(100)), 15000);
        // The new table has no child price: a child ticket is unavailable from then.
        let child = pricing.price(
            || "A-1".into(),
            Some(&category("premium")),
            0,
            Some(&ticket("child")),
            at(100),
        );
        assert!(child.is_err());
    }

    #[test]
    fn it_should_keep_changes_in_the_order_of_their_instants() {
        let mut pricing = pricing();
        let t = |p| table(&[("premium", "adult", p), ("standard", "adult", p)]).unwrap();
        pricing.change(at(200), t(2), &categories()).unwrap();
        pricing.change(at(100), t(1), &categories()).unwrap();
        let price = |now| {
            pricing
                .schedule
                .at(now)
                .get(&category("premium"), &ticket("adult"))
        };
        assert_eq!(price(at(150)), Some(1));
        assert_eq!(price(at(250)), Some(2));
        assert_eq!(pricing.schedule.tables().count(), 3);
    }

    #[test]
    fn it_should_refuse_a_table_that_leaves_a_category_in_use_without_a_default_price() {
        let partial = table(&[("premium", "adult", 1)]).unwrap();
        let err = Pricing::new(types(), categories(), partial, &categories()).unwrap_err();
        assert!(matches!(err, PriceError::DefaultMissing { .. }), "{err:?}");
    }

    #[test]
    fn it_should_refuse_bad_entries_naming_the_field() {
        assert_eq!(
            table(&[("premium", "adult", -1)]).unwrap_err(),
            PriceError::Price {
                field: "prices[0].price_cents".into()
            }
        );
        assert!(matches!(
            table(&[("premium", "adult", 1), ("vip", "adult", 1)]).unwrap_err(),
            PriceError::UnknownCategory { field, .. } if field == "prices[1]"
        ));
        assert!(matches!(
            table(&[("premium", "senior", 1)]).unwrap_err(),
            PriceError::UnknownTicketType { .. }
        ));
        assert!(matches!(
            table(&[("premium", "adult", 1), ("premium", "adult", 2)]).unwrap_err(),
            PriceError::Duplicate { .. }
        ));
    }

    #[test]
    fn the_default_ticket_type_is_a_valid_id() {
        let standard = TicketType::standard();
        assert_eq!(TicketType::parse(standard.as_str()), Ok(standard));
    }

    #[test]
    fn it_should_refuse_no_ticket_type_or_one_twice() {
        let first = PriceTable::default();
        assert_eq!(
            Pricing::new(Vec::new(), categories(), first.clone(), []).unwrap_err(),
            PriceError::TicketTypes
        );
        let twice = [types(), types()].concat();
        assert_eq!(
            Pricing::new(twice, categories(), first, []).unwrap_err(),
            PriceError::TicketTypes
        );
    }

    fn entries() -> Vec<PriceEntry> {
        vec![PriceEntry {
            category: category("premium"),
            ticket_type: ticket("adult"),
            price_cents: 1,
        }]
    }

    fn change(effective_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Timed<PricesCommand> {
        Timed {
            command: PricesCommand::Change {
                prices: entries(),
                effective_at,
            },
            now,
        }
    }

    #[test]
    fn it_should_record_a_change_from_the_instant_asked_at_the_earliest_after_the_lead() {
        let prices = ShowPrices::default();
        let later = prices.decide(&change(Some(at(3600)), at(0))).unwrap();
        assert_eq!(
            later,
            vec![PricesEvent::PricesChanged {
                effective_at: at(3600),
                prices: entries()
            }]
        );
        let [PricesEvent::PricesChanged { effective_at, .. }] =
            prices.decide(&change(None, at(0))).unwrap()[..]
        else {
            panic!("one change");
        };
        assert_eq!(effective_at, at(0) + price_change_lead());
        let [PricesEvent::PricesChanged { effective_at, .. }] =
            prices.decide(&change(Some(at(1)), at(0))).unwrap()[..]
        else {
            panic!("one change");
        };
        assert_eq!(effective_at, at(0) + price_change_lead());
    }

    #[test]
    fn it_should_refuse_a_change_in_the_past_and_one_past_the_limit() {
        let mut prices = ShowPrices::default();
        assert_eq!(
            prices.decide(&change(Some(at(-1)), at(0))).unwrap_err(),
            PricesCommandError::InPast
        );
        for _ in 0..MAX_PRICE_CHANGES {
            for event in prices.decide(&change(None, at(0))).unwrap() {
                prices.evolve(&event);
            }
        }
        assert_eq!(
            prices.decide(&change(None, at(0))).unwrap_err(),
            PricesCommandError::TooMany
        );
    }
}
