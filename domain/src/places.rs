//! What a show sells and a venue charts, as data: a seat, a
//! general-admission pool, and where the seat map draws them. Below the
//! show, the venue and the waiting list, which all read them; checked by the
//! definition's rules.

use crate::ids::{CategoryId, PoolId, SeatId};

/// A point of the chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub x: f64,
    pub y: f64,
}

/// A rectangle of the chart: the stage, a pool's standing area.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// A seat as a show (or its venue) defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct SeatSpec {
    pub seat_id: SeatId,
    pub section: String,
    pub row: String,
    pub number: u32,
    pub price_cents: i64,
    /// For best available, lower is better; `None`: the seat's position in
    /// the show's list (`Show::seat_rank`).
    pub rank: Option<i64>,
    /// Its price category (`None`: priced by `price_cents` alone).
    pub category: Option<CategoryId>,
    /// Where the seat map draws it (`None`: the grid).
    pub position: Option<Position>,
    /// A wheelchair space.
    pub accessible: bool,
}

/// A general-admission pool as a show (or its venue) defines it.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSpec {
    pub pool_id: PoolId,
    pub capacity: u32,
    pub price_cents: i64,
    /// Streams the capacity is split into (see `pool::default_shards`).
    pub shards: u32,
    /// Its price category (`None`: priced by `price_cents` alone).
    pub category: Option<CategoryId>,
    pub label: Option<String>,
    /// Where the seat map draws it.
    pub area: Option<Area>,
}
