//! `booking demo`: the service with something to see. It serves as `booking
//! serve` does, and once listening creates a sample venue (an arena of
//! 20,000 seats before a stage, three price categories, wheelchair spaces,
//! a standing area) and a show on it with adult and child tickets, through
//! its own HTTP API like any operator; then it prints the seat map's
//! address with a buyer token in it. It also sells a family's tickets at
//! the box office (two adults and two children in the lower tier's last
//! row, two standing places) and prints the door's page with a scanner's
//! token and each ticket's page, so a steward has codes to scan. Made again
//! on a database that has them, it answers the same (a venue and a show
//! never change; the family's seats are sold once).

use chrono::{Duration, Utc};
use serde_json::{json, Value};

/// The sample arena: two tiers of five sections before the stage, each
/// section 20 rows of 100 seats (20,000 seats).
pub const SECTIONS_PER_TIER: usize = 5;
pub const ROWS_PER_SECTION: usize = 20;
pub const SEATS_PER_ROW: usize = 100;

pub const VENUE_ID: &str = "demo-arena";
pub const SHOW_ID: &str = "demo";

/// Distance between seat centres in a row, and between rows, in the
/// chart's units.
const SEAT_PITCH: f64 = 10.0;
const ROW_PITCH: f64 = 12.0;
const SECTION_GAP: f64 = 40.0;
const TIER_GAP: f64 = 80.0;

/// A seat's category: the lower tier's centre sections' first rows are
/// premium, the rest of the lower tier standard, the upper tier economy.
fn category(tier: usize, section: usize, row: usize) -> &'static str {
    match (tier, section, row) {
        (0, 1..=3, 0..=4) => "premium",
        (0, _, _) => "standard",
        _ => "economy",
    }
}

fn section_name(tier: usize, section: usize) -> String {
    let letter = char::from(b'A' + (tier * SECTIONS_PER_TIER + section) as u8);
    letter.to_string()
}

/// The seats of one section, with their positions: rows run away from
/// the stage, numbers left to right; the last row's first four seats are
/// wheelchair spaces on the lower tier.
fn section_seats(tier: usize, section: usize) -> Vec<Value> {
    let name = section_name(tier, section);
    let section_width = SEATS_PER_ROW as f64 * SEAT_PITCH;
    let left = section as f64 * (section_width + SECTION_GAP);
    let tier_height = ROWS_PER_SECTION as f64 * ROW_PITCH;
    let top = 120.0 + tier as f64 * (tier_height + TIER_GAP);
    let mut seats = Vec::with_capacity(ROWS_PER_SECTION * SEATS_PER_ROW);
    for row in 0..ROWS_PER_SECTION {
        for number in 0..SEATS_PER_ROW {
            let mut seat = json!({
                "seat_id": format!("{name}-{}-{}", row + 1, number + 1),
                "section": name, "row": (row + 1).to_string(), "number": number + 1,
                "x": left + number as f64 * SEAT_PITCH,
                "y": top + row as f64 * ROW_PITCH,
                "category": category(tier, section, row),
            });
            if tier == 0 && row + 1 == ROWS_PER_SECTION && number < 4 {
                seat["accessible"] = json!(true);
            }
            seats.push(seat);
        }
    }
    seats
}

/// The sample venue's definition (the body of `PUT /v1/venues/{id}`).
pub fn venue() -> Value {
    let sections: Vec<(usize, usize)> = (0..2)
        .flat_map(|tier| (0..SECTIONS_PER_TIER).map(move |section| (tier, section)))
        .collect();
    let seats: Vec<Value> = sections
        .iter()
        .flat_map(|&(tier, section)| section_seats(tier, section))
        .collect();
    let labels: Vec<Value> = sections
        .iter()
        .map(|&(tier, section)| {
            let name = section_name(tier, section);
            let tier_name = if tier == 0 { "Lower" } else { "Upper" };
            json!({"section": name, "label": format!("{tier_name} {name}")})
        })
        .collect();
    let width = SECTIONS_PER_TIER as f64 * (SEATS_PER_ROW as f64 * SEAT_PITCH + SECTION_GAP);
    json!({
        "name": "Demo Arena",
        "stage": {"x": width / 2.0 - 300.0, "y": 0, "width": 600, "height": 60, "label": "Stage"},
        "categories": [
            {"category": "premium", "label": "Premium", "color": "#6a1b9a"},
            {"category": "standard", "label": "Standard", "color": "#00695c"},
            {"category": "economy", "label": "Economy", "color": "#1565c0"}
        ],
        "sections": labels,
        "seats": seats,
        "pools": [{"pool_id": "floor", "capacity": 500, "category": "standard", "label": "Standing",
                   "area": {"x": width / 2.0 - 300.0, "y": 70, "width": 600, "height": 40}}]
    })
}

/// The sample show on the venue (the body of `PUT /v1/shows/{id}`), a
/// month from now.
pub fn show() -> Value {
    let starts_at = (Utc::now() + Duration::days(30)).to_rfc3339();
    json!({
        "name": "Demo night", "starts_at": starts_at, "hold_ttl_seconds": 600,
        "venue_id": VENUE_ID, "max_seats_per_buyer": 10,
        "ticket_types": [{"ticket_type": "adult", "label": "Adult"},
                         {"ticket_type": "child", "label": "Child"}],
        "prices": [
            {"category": "premium", "ticket_type": "adult", "price_cents": 12000},
            {"category": "premium", "ticket_type": "child", "price_cents": 6000},
            {"category": "standard", "ticket_type": "adult", "price_cents": 7500},
            {"category": "standard", "ticket_type": "child", "price_cents": 4000},
            {"category": "economy", "ticket_type": "adult", "price_cents": 4500},
            {"category": "economy", "ticket_type": "child", "price_cents": 2500}
        ]
    })
}

/// Creates the venue and the show through the API at `base` with an admin
/// `token`. A show already there (a demo run before on this database)
/// keeps its first instant: 409 `show_exists` is taken as done.
pub async fn create(base: &str, token: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let put = |path: String, body: Value| {
        client
            .put(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let venue = put(format!("/v1/venues/{VENUE_ID}"), venue()).await?;
    if !venue.status().is_success() {
        anyhow::bail!("creating the demo venue: {}", venue.text().await?);
    }
    let show = put(format!("/v1/shows/{SHOW_ID}"), show()).await?;
    let status = show.status();
    if !status.is_success() && status != reqwest::StatusCode::CONFLICT {
        anyhow::bail!("creating the demo show: {}", show.text().await?);
    }
    Ok(())
}

/// The buyer the demo's tickets are sold to at the box office.
pub const FAMILY: &str = "demo-family";

/// The family's seats (adult, adult, child, child) and standing places.
const FAMILY_SEATS: [(&str, &str); 4] = [
    ("A-20-10", "adult"),
    ("A-20-11", "adult"),
    ("A-20-12", "child"),
    ("A-20-13", "child"),
];
const FAMILY_STANDING: u32 = 2;

/// Sells the family's tickets at the box office (paid in cash, so any
/// payment provider will do) with an admin `token`, unless a run before
/// sold them (409: taken as done); returns their ticket ids, read with the
/// family's `holder` token.
pub async fn sell_tickets(base: &str, token: &str, holder: &str) -> anyhow::Result<Vec<String>> {
    let client = reqwest::Client::new();
    let seats: Vec<Value> = FAMILY_SEATS
        .iter()
        .map(|(seat_id, ticket_type)| json!({"seat_id": seat_id, "ticket_type": ticket_type}))
        .collect();
    let sales = [
        json!({"seats": seats, "buyer": FAMILY, "payment": "cash", "note": "demo"}),
        json!({"pool_id": "floor", "quantity": FAMILY_STANDING, "buyer": FAMILY,
               "payment": "cash", "note": "demo"}),
    ];
    let mine = || async {
        let listed: Value = client
            .get(format!("{base}/v1/me/tickets"))
            .bearer_auth(holder)
            .send()
            .await?
            .json()
            .await?;
        let ids: Vec<String> = (listed["tickets"].as_array().into_iter().flatten())
            .filter_map(|t| t["ticket_id"].as_str().map(str::to_owned))
            .collect();
        anyhow::Ok(ids)
    };
    if mine().await?.is_empty() {
        for sale in sales {
            let sold = client
                .post(format!("{base}/v1/shows/{SHOW_ID}/bookings"))
                .bearer_auth(token)
                .json(&sale)
                .send()
                .await?;
            if !sold.status().is_success() {
                anyhow::bail!("selling the demo's tickets: {}", sold.text().await?);
            }
        }
    }
    mine().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::VenueDefinition;

    #[test]
    fn the_demo_venue_is_a_valid_chart_of_20000_seats() {
        let definition: VenueDefinition =
            serde_json::from_value(venue()).expect("the demo venue parses");
        let venue = definition
            .to_venue(domain::ids::VenueId::parse(VENUE_ID).expect("an id"))
            .expect("the demo venue is valid");
        assert_eq!(venue.seats.len(), 20_000);
        assert_eq!(venue.chart.categories.len(), 3);
        assert!(venue.seats.iter().any(|s| s.accessible));
    }
}
