//! The run's shows (see `shows.rs` for why each exists), as planned at the
//! run's start.

use crate::shows::{PoolSpec, Price, SeatSpec, ShowSpec};

pub const SEATED: &str = "seated";
pub const FLOOR: &str = "floor";
pub const YEN: &str = "yen";
pub const LIMITED: &str = "limited";
pub const STARTING: &str = "starting";
/// The sales channel every channel show lists.
pub const PARTNER: &str = "partner";

/// When the `starting` show starts, after the run's start: within the
/// run, so that holds expire and seats free after the show's start.
const STARTING_AFTER_SECONDS: i64 = 20;

fn seats(prefix: &str, count: usize, category: Option<&str>) -> Vec<SeatSpec> {
    (1..=count)
        .map(|n| SeatSpec {
            seat_id: format!("{prefix}-{n}"),
            section: prefix.to_owned(),
            category: category.map(str::to_owned),
        })
        .collect()
}

/// Adult, child and a free guest type for `category`.
fn table(category: &str, adult: i64) -> Vec<Price> {
    [("adult", adult), ("child", adult / 2), ("guest", 0)]
        .into_iter()
        .map(|(ticket_type, price_cents)| Price {
            category: Some(category.to_owned()),
            ticket_type: ticket_type.to_owned(),
            price_cents,
        })
        .collect()
}

fn base(show_id: &str, now_us: i64, ttl: u32, max_hold: u32) -> ShowSpec {
    ShowSpec {
        show_id: show_id.to_owned(),
        currency: None,
        starts_at_us: now_us + 86_400_000_000,
        hold_ttl_seconds: ttl,
        max_hold_seconds: max_hold,
        seats: Vec::new(),
        pools: Vec::new(),
        ticket_types: crate::shows::TICKET_TYPES.map(str::to_owned).to_vec(),
        prices: Vec::new(),
        seat_price: None,
        channels: Vec::new(),
        offer_seconds: None,
        max_entries: None,
        max_seats_per_buyer: None,
    }
}

/// The shows of a run starting at `now_us`; `max_entries` is the waiting
/// lists' cap when the service takes one.
pub fn plan(now_us: i64, max_entries: Option<usize>) -> Vec<ShowSpec> {
    let mut seated = base(SEATED, now_us, 3, 12);
    seated.seats = [seats("A", 10, Some("front")), seats("B", 10, Some("back"))].concat();
    seated.prices = [table("front", 5000), table("back", 3000)].concat();
    seated.channels = vec![PARTNER.into()];
    seated.offer_seconds = Some(60);
    seated.max_entries = max_entries;

    let mut floor = base(FLOOR, now_us, 4, 12);
    floor.pools = vec![PoolSpec {
        pool_id: "ga".into(),
        capacity: 20,
        shards: 2,
        category: Some("standing".into()),
    }];
    floor.prices = table("standing", 5000);
    floor.channels = vec![PARTNER.into()];
    floor.offer_seconds = Some(60);
    floor.max_entries = max_entries;

    let mut yen = base(YEN, now_us, 30, 40);
    yen.currency = Some("jpy".into());
    yen.seats = seats("Y", 8, Some("hall"));
    yen.prices = table("hall", 5000);
    yen.offer_seconds = Some(60);
    yen.max_entries = max_entries;

    let mut limited = base(LIMITED, now_us, 3, 9);
    limited.seats = seats("L", 10, None);
    limited.ticket_types = Vec::new();
    limited.seat_price = Some(4000);
    limited.max_seats_per_buyer = Some(2);

    let mut starting = base(STARTING, now_us, 3, 9);
    starting.starts_at_us = now_us + STARTING_AFTER_SECONDS * 1_000_000;
    starting.seats = seats("S", 8, Some("stalls"));
    starting.prices = table("stalls", 4000);
    starting.offer_seconds = Some(60);
    starting.max_entries = max_entries;

    vec![seated, floor, yen, limited, starting]
}
