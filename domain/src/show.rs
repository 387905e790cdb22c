//! A show: what can be sold (seats and general-admission pools), at what
//! price, and how long a hold on it lasts. A show is immutable once created,
//! which is what lets every instance cache it without invalidation.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use crate::definition::{check_counts, check_pools, check_text, index_seats, ShowError};
use crate::ids::{CategoryId, ChannelId, GateId, PoolId, SeatId, ShowId, VenueId};
use crate::limits::{
    DEFAULT_MAX_HOLD_TTLS, MAX_CHANNELS_PER_SHOW, MAX_GATES_PER_SHOW, MAX_HOLD_SECONDS_CAP,
    MAX_HOLD_TTL_SECONDS, MAX_SEATS_PER_BUYER, MIN_HOLD_TTL_SECONDS, MIN_MAX_HOLD_SECONDS,
    MIN_SEATS_PER_BUYER,
};
use crate::money::Currency;
use crate::places::{PoolSpec, SeatSpec};
use crate::pricing::Pricing;
use crate::venue::{categories_in_use, Chart};
use crate::waiting_room::WaitingRoomSettings;
use crate::waitlist::WaitlistSettings;

/// A sales channel of a show: inventory allocated to it is sold only
/// through it (a partner's buyers, the box office).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    pub channel_id: ChannelId,
    pub label: String,
}

#[derive(Debug, Clone)]
pub struct Show {
    pub show_id: ShowId,
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub hold_ttl_seconds: u32,
    /// How long a hold may last in all, extensions included, from its
    /// placement; `None`: the default ([`Show::max_hold_seconds`]).
    pub max_hold_seconds: Option<u32>,
    pub seats: Vec<SeatSpec>,
    pub pools: Vec<PoolSpec>,
    /// Seats and pool places one buyer may have held or booked on the show
    /// (`None`: no limit). Set with [`Show::with_max_seats_per_buyer`].
    pub max_seats_per_buyer: Option<u32>,
    /// What its prices are in. Set with [`Show::with_currency`].
    pub currency: Currency,
    /// The sale opens through a waiting room (`None`: anyone may hold at
    /// any time). Set with [`Show::with_waiting_room`].
    pub waiting_room: Option<WaitingRoomSettings>,
    /// The venue whose chart it uses (`None`: seats of its own).
    pub venue_id: Option<VenueId>,
    /// Stage, categories and sections. Set with [`Show::with_pricing`].
    pub chart: Chart,
    /// Ticket types and prices by category. Set with [`Show::with_pricing`].
    pub pricing: Pricing,
    /// Until when a buyer may cancel lines of their own orders (an admin
    /// always may); `None`: no end.
    pub buyer_cancellation_until: Option<DateTime<Utc>>,
    /// The sales channels inventory may be allocated to. Set with
    /// [`Show::with_channels`].
    pub channels: Vec<ChannelSpec>,
    /// The waiting list freed inventory is offered to first. Set with
    /// [`Show::with_waitlist`]; like everything else of a show, fixed once
    /// created (every hold of the show is placed knowing it).
    pub waitlist: Option<WaitlistSettings>,
    /// Until when a ticket may change hands (`None`: until it is checked
    /// in).
    pub transfer_until: Option<DateTime<Utc>>,
    /// The door: its gates and whether a ticket that left may come back.
    /// Set with [`Show::with_checkin`].
    pub checkin: CheckinSettings,
    seat_index: HashMap<SeatId, usize>,
}

/// A gate of the show's door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    pub gate_id: GateId,
    pub label: String,
}

/// How a show checks tickets in: its gates (each once, at least one) and
/// whether a ticket that left may enter again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckinSettings {
    pub gates: Vec<GateSpec>,
    pub reentry: bool,
}

impl Default for CheckinSettings {
    /// One gate, `main`, and re-entry allowed.
    fn default() -> Self {
        Self {
            gates: vec![GateSpec {
                gate_id: GateId::main(),
                label: "Main gate".into(),
            }],
            reentry: true,
        }
    }
}

impl CheckinSettings {
    pub fn gate(&self, gate: &str) -> Option<&GateSpec> {
        self.gates.iter().find(|g| g.gate_id.as_str() == gate)
    }
}

impl Show {
    /// Validates a definition against every rule of a show.
    pub fn new(
        show_id: ShowId,
        name: String,
        starts_at: DateTime<Utc>,
        hold_ttl_seconds: u32,
        seats: Vec<SeatSpec>,
        pools: Vec<PoolSpec>,
    ) -> Result<Self, ShowError> {
        check_text(&name, || "name".into())?;
        if !(MIN_HOLD_TTL_SECONDS..=MAX_HOLD_TTL_SECONDS).contains(&hold_ttl_seconds) {
            return Err(ShowError::HoldTtl);
        }
        check_counts(&seats, &pools)?;
        let seat_index = index_seats(&seats)?;
        check_pools(&pools)?;
        Ok(Self {
            show_id,
            name,
            starts_at,
            hold_ttl_seconds,
            max_hold_seconds: None,
            seats,
            pools,
            max_seats_per_buyer: None,
            currency: Currency::EUR,
            waiting_room: None,
            venue_id: None,
            chart: Chart::default(),
            pricing: Pricing::default(),
            buyer_cancellation_until: None,
            channels: Vec::new(),
            waitlist: None,
            transfer_until: None,
            checkin: CheckinSettings::default(),
            seat_index,
        })
    }

    /// The show's chart (from its venue, or its own categories) and its
    /// prices: every seat's and pool's category listed, every category in
    /// use priced for the default ticket type.
    pub fn with_pricing(
        mut self,
        venue_id: Option<VenueId>,
        chart: Chart,
        pricing: Pricing,
    ) -> Result<Self, ShowError> {
        chart.check()?;
        chart.check_places(&self.seats, &self.pools)?;
        self.venue_id = venue_id;
        self.chart = chart;
        self.pricing = pricing;
        Ok(self)
    }

    /// The sales channels, each listed once with a label, at most
    /// `MAX_CHANNELS_PER_SHOW`.
    pub fn with_channels(mut self, channels: Vec<ChannelSpec>) -> Result<Self, ShowError> {
        if channels.len() > MAX_CHANNELS_PER_SHOW {
            return Err(ShowError::TooMany {
                field: "channels".into(),
                max: MAX_CHANNELS_PER_SHOW,
            });
        }
        let mut seen = HashSet::new();
        for (i, channel) in channels.iter().enumerate() {
            check_text(&channel.label, || format!("channels[{i}].label"))?;
            if !seen.insert(&channel.channel_id) {
                return Err(ShowError::Listed {
                    field: format!("channels[{i}].channel_id"),
                });
            }
        }
        self.channels = channels;
        Ok(self)
    }

    /// The channel of the show named `channel_id`, if it lists it.
    pub fn channel(&self, channel_id: &ChannelId) -> Option<&ChannelSpec> {
        self.channels.iter().find(|c| &c.channel_id == channel_id)
    }

    /// The categories some seat or pool of the show is in.
    pub fn categories_in_use(&self) -> std::collections::HashSet<CategoryId> {
        categories_in_use(&self.seats, &self.pools)
    }

    /// The waiting list freed inventory goes to first, its settings in range.
    pub fn with_waitlist(mut self, waitlist: Option<WaitlistSettings>) -> Result<Self, ShowError> {
        if let Some(waitlist) = &waitlist {
            waitlist.check()?;
        }
        self.waitlist = waitlist;
        Ok(self)
    }

    /// How a hold from `channel` (`None`: public sale) meets the show's
    /// waiting list: a channel's freed seats stay the channel's.
    pub fn waitlist_role(
        &self,
        channel: Option<&crate::ids::ChannelId>,
    ) -> crate::seat::WaitlistRole {
        if self.waitlist.is_some() && channel.is_none() {
            crate::seat::WaitlistRole::Buyer
        } else {
            crate::seat::WaitlistRole::None
        }
    }

    /// The waiting room the sale opens through, its settings in range.
    pub fn with_waiting_room(
        mut self,
        room: Option<WaitingRoomSettings>,
    ) -> Result<Self, ShowError> {
        if let Some(room) = &room {
            room.check()?;
        }
        self.waiting_room = room;
        Ok(self)
    }

    /// The currency of the show's prices; every price must be expressible
    /// in it (no cents in a currency without them).
    pub fn with_currency(mut self, currency: Currency) -> Result<Self, ShowError> {
        let prices = self
            .seats
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("seats[{i}].price_cents"), s.price_cents))
            .chain(
                self.pools
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (format!("pools[{i}].price_cents"), p.price_cents)),
            );
        for (field, price) in prices {
            currency
                .minor_units(price)
                .map_err(|error| ShowError::Money { field, error })?;
        }
        self.currency = currency;
        Ok(self)
    }

    /// The per-buyer limit, MIN_SEATS_PER_BUYER..=MAX_SEATS_PER_BUYER, or
    /// `None` for no limit.
    pub fn with_max_seats_per_buyer(mut self, limit: Option<u32>) -> Result<Self, ShowError> {
        if let Some(limit) = limit {
            if !(MIN_SEATS_PER_BUYER..=MAX_SEATS_PER_BUYER).contains(&limit) {
                return Err(ShowError::MaxSeatsPerBuyer);
            }
        }
        self.max_seats_per_buyer = limit;
        Ok(self)
    }

    /// Sets how long a hold may last in all (`None`: the default), refused
    /// outside MIN_MAX_HOLD_SECONDS..=MAX_HOLD_SECONDS_CAP or below the TTL.
    /// Until when its tickets may change hands (`None`: no end but the
    /// door).
    pub fn with_transfer_until(mut self, until: Option<DateTime<Utc>>) -> Self {
        self.transfer_until = until;
        self
    }

    /// The door's gates (1..=MAX_GATES_PER_SHOW, each once, labelled) and
    /// its re-entry rule; `None`: one gate, `main`, re-entry allowed.
    pub fn with_checkin(mut self, checkin: Option<CheckinSettings>) -> Result<Self, ShowError> {
        let Some(checkin) = checkin else {
            return Ok(self);
        };
        if checkin.gates.is_empty() || checkin.gates.len() > MAX_GATES_PER_SHOW {
            return Err(ShowError::TooMany {
                field: "checkin.gates (at least one)".into(),
                max: MAX_GATES_PER_SHOW,
            });
        }
        let mut seen = HashSet::new();
        for (i, gate) in checkin.gates.iter().enumerate() {
            check_text(&gate.label, || format!("checkin.gates[{i}].label"))?;
            if !seen.insert(&gate.gate_id) {
                return Err(ShowError::DuplicateGate(gate.gate_id.clone()));
            }
        }
        self.checkin = checkin;
        Ok(self)
    }

    pub fn with_buyer_cancellation_until(mut self, until: Option<DateTime<Utc>>) -> Self {
        self.buyer_cancellation_until = until;
        self
    }

    pub fn with_max_hold_seconds(
        mut self,
        max_hold_seconds: Option<u32>,
    ) -> Result<Self, ShowError> {
        if let Some(seconds) = max_hold_seconds {
            if !(MIN_MAX_HOLD_SECONDS..=MAX_HOLD_SECONDS_CAP).contains(&seconds)
                || seconds < self.hold_ttl_seconds
            {
                return Err(ShowError::MaxHold);
            }
        }
        self.max_hold_seconds = max_hold_seconds;
        Ok(self)
    }

    /// The effective limit: the show's, or DEFAULT_MAX_HOLD_TTLS × the TTL
    /// capped at MAX_HOLD_SECONDS_CAP (never below the TTL).
    pub fn max_hold_seconds(&self) -> u32 {
        self.max_hold_seconds.unwrap_or_else(|| {
            (DEFAULT_MAX_HOLD_TTLS * self.hold_ttl_seconds)
                .min(MAX_HOLD_SECONDS_CAP)
                .max(self.hold_ttl_seconds)
        })
    }

    pub fn max_hold(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::from(self.max_hold_seconds()))
    }

    pub fn pool(&self, pool_id: &PoolId) -> Option<&PoolSpec> {
        self.pools.iter().find(|p| &p.pool_id == pool_id)
    }

    /// The seat and its position in the show's order (the order of the
    /// definition, which is also the order every lock set is taken in).
    pub fn seat(&self, seat_id: &SeatId) -> Option<(usize, &SeatSpec)> {
        let ordinal = *self.seat_index.get(seat_id)?;
        Some((ordinal, &self.seats[ordinal]))
    }

    /// The rank of the seat at `ordinal` for best available: its own, else
    /// its position in the list.
    pub fn seat_rank(&self, ordinal: usize) -> i64 {
        self.seats
            .get(ordinal)
            .and_then(|seat| seat.rank)
            .unwrap_or(ordinal as i64)
    }

    pub fn hold_ttl(&self) -> chrono::Duration {
        chrono::Duration::seconds(i64::from(self.hold_ttl_seconds))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{MAX_PRICE_CENTS, MAX_SEAT_RANK};

    fn seat(id: &str) -> SeatSpec {
        SeatSpec {
            seat_id: SeatId::parse(id).unwrap(),
            section: "A".into(),
            row: "1".into(),
            number: 1,
            price_cents: 5000,
            rank: None,
            category: None,
            position: None,
            accessible: false,
        }
    }

    fn show(seats: Vec<SeatSpec>, pools: Vec<PoolSpec>, ttl: u32) -> Result<Show, ShowError> {
        Show::new(
            ShowId::parse("s").unwrap(),
            "Show".into(),
            DateTime::<Utc>::UNIX_EPOCH,
            ttl,
            seats,
            pools,
        )
    }

    #[test]
    fn it_should_index_seats_in_definition_order() {
        let show = show(vec![seat("B"), seat("A")], vec![], 60).unwrap();
        assert_eq!(show.seat(&SeatId::parse("A").unwrap()).unwrap().0, 1);
        assert!(show.seat(&SeatId::parse("C").unwrap()).is_none());
    }

    #[test]
    fn it_should_take_a_per_buyer_limit_within_its_bounds_or_none() {
        let base = || show(vec![seat("A")], vec![], 60).unwrap();
        assert_eq!(base().max_seats_per_buyer, None);
        for ok in [None, Some(MIN_SEATS_PER_BUYER), Some(MAX_SEATS_PER_BUYER)] {
            let limited = base().with_max_seats_per_buyer(ok).unwrap();
            assert_eq!(limited.max_seats_per_buyer, ok);
        }
        for bad in [0, MAX_SEATS_PER_BUYER + 1] {
            let err = base().with_max_seats_per_buyer(Some(bad)).unwrap_err();
            assert_eq!(err, ShowError::MaxSeatsPerBuyer);
        }
    }

    #[test]
    fn it_should_refuse_a_duplicate_seat() {
        let err = show(vec![seat("A"), seat("A")], vec![], 60).unwrap_err();
        assert_eq!(err, ShowError::DuplicateSeat(SeatId::parse("A").unwrap()));
    }

    #[test]
    fn it_should_refuse_a_show_with_nothing_to_sell() {
        assert_eq!(show(vec![], vec![], 60).unwrap_err(), ShowError::Empty);
    }

    #[test]
    fn it_should_refuse_a_ttl_outside_one_second_to_two_hours() {
        assert_eq!(
            show(vec![seat("A")], vec![], 0).unwrap_err(),
            ShowError::HoldTtl
        );
        assert_eq!(
            show(vec![seat("A")], vec![], 7201).unwrap_err(),
            ShowError::HoldTtl
        );
        assert!(show(vec![seat("A")], vec![], 7200).is_ok());
    }

    #[test]
    fn it_should_default_max_hold_to_three_ttls_capped_at_two_hours() {
        assert_eq!(
            show(vec![seat("A")], vec![], 60)
                .unwrap()
                .max_hold_seconds(),
            180
        );
        assert_eq!(
            show(vec![seat("A")], vec![], 3000)
                .unwrap()
                .max_hold_seconds(),
            MAX_HOLD_SECONDS_CAP
        );
        assert_eq!(
            show(vec![seat("A")], vec![], 7200)
                .unwrap()
                .max_hold_seconds(),
            7200
        );
    }

    #[test]
    fn it_should_validate_max_hold_against_its_limits_and_the_ttl() {
        let ttl60 = || show(vec![seat("A")], vec![], 60).unwrap();
        assert_eq!(
            ttl60().with_max_hold_seconds(Some(59)).unwrap_err(),
            ShowError::MaxHold
        );
        assert_eq!(
            ttl60()
                .with_max_hold_seconds(Some(MAX_HOLD_SECONDS_CAP + 1))
                .unwrap_err(),
            ShowError::MaxHold
        );
        assert_eq!(
            show(vec![seat("A")], vec![], 1)
                .unwrap()
                .with_max_hold_seconds(Some(0))
                .unwrap_err(),
            ShowError::MaxHold
        );
        let set = ttl60().with_max_hold_seconds(Some(60)).unwrap();
        assert_eq!(set.max_hold_seconds(), 60);
        let set = ttl60().with_max_hold_seconds(Some(7200)).unwrap();
        assert_eq!(set.max_hold_seconds(), 7200);
        assert_eq!(
            ttl60()
                .with_max_hold_seconds(None)
                .unwrap()
                .max_hold_seconds(),
            180
        );
    }

    #[test]
    fn it_should_refuse_a_price_above_the_limit_naming_the_field() {
        let mut expensive = seat("A");
        expensive.price_cents = MAX_PRICE_CENTS + 1;
        assert_eq!(
            show(vec![expensive], vec![], 60).unwrap_err(),
            ShowError::Price {
                field: "seats[0].price_cents".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_an_empty_section() {
        let mut s = seat("A");
        s.section = String::new();
        assert_eq!(
            show(vec![s], vec![], 60).unwrap_err(),
            ShowError::TextLength {
                field: "seats[0].section".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_pool_without_capacity_and_a_duplicate_pool() {
        let pool = |id: &str, capacity| PoolSpec {
            pool_id: PoolId::parse(id).unwrap(),
            capacity,
            price_cents: 100,
            shards: 1,
            category: None,
            label: None,
            area: None,
        };
        assert_eq!(
            show(vec![], vec![pool("floor", 0)], 60).unwrap_err(),
            ShowError::Capacity {
                field: "pools[0].capacity".into()
            }
        );
        assert_eq!(
            show(vec![], vec![pool("floor", 5), pool("floor", 5)], 60).unwrap_err(),
            ShowError::DuplicatePool(PoolId::parse("floor").unwrap())
        );
    }

    #[test]
    fn it_should_report_the_first_broken_rule_seats_before_pools() {
        let bad_pool = PoolSpec {
            pool_id: PoolId::parse("ga").unwrap(),
            capacity: 0,
            price_cents: 0,
            shards: 1,
            category: None,
            label: None,
            area: None,
        };
        let mut priced_twice = seat("a1");
        priced_twice.price_cents = -1;
        assert_eq!(
            show(vec![seat("a1"), seat("a1")], vec![bad_pool.clone()], 60).err(),
            Some(ShowError::DuplicateSeat(SeatId::parse("a1").unwrap()))
        );
        assert_eq!(
            show(vec![seat("a1"), priced_twice], vec![bad_pool], 60).err(),
            Some(ShowError::Price {
                field: "seats[1].price_cents".into()
            }),
            "a seat's own rules before the duplicate check"
        );
    }

    #[test]
    fn it_should_refuse_a_nul_in_a_section_naming_the_field() {
        let mut s = seat("A");
        s.section = "A\0".into();
        assert_eq!(
            show(vec![s], vec![], 60).unwrap_err(),
            ShowError::ControlCharacter {
                field: "seats[0].section".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_control_character_in_a_row_naming_the_field() {
        let mut s = seat("A");
        s.row = "1\n".into();
        assert_eq!(
            show(vec![s], vec![], 60).unwrap_err(),
            ShowError::ControlCharacter {
                field: "seats[0].row".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_control_character_in_the_name() {
        let refused = Show::new(
            ShowId::parse("s").unwrap(),
            "Rock\u{7}".into(),
            DateTime::<Utc>::UNIX_EPOCH,
            60,
            vec![seat("A")],
            vec![],
        )
        .unwrap_err();
        assert_eq!(
            refused,
            ShowError::ControlCharacter {
                field: "name".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_rank_outside_its_range_naming_the_field() {
        for bad in [-1, MAX_SEAT_RANK + 1] {
            let mut s = seat("A");
            s.rank = Some(bad);
            assert_eq!(
                show(vec![seat("B"), s], vec![], 60).unwrap_err(),
                ShowError::Rank {
                    field: "seats[1].rank".into()
                }
            );
        }
    }

    #[test]
    fn a_seat_ranks_by_its_own_rank_else_by_its_position() {
        let mut ranked = seat("B");
        ranked.rank = Some(MAX_SEAT_RANK);
        let show = show(vec![seat("A"), ranked, seat("C")], vec![], 60).unwrap();
        assert_eq!(
            [show.seat_rank(0), show.seat_rank(1), show.seat_rank(2)],
            [0, MAX_SEAT_RANK, 2]
        );
    }

    #[test]
    fn it_should_accept_printable_unicode_text() {
        let mut s = seat("A");
        s.section = "Parterre gauche – Ω".into();
        assert!(show(vec![s], vec![], 60).is_ok());
    }
}
