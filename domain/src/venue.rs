//! A venue: a seating chart drawn once and used by many shows. Its stage,
//! sections and price categories, its seats at their positions in one plane
//! (y grows downward) and its general-admission pools. Like a show it never
//! changes once created; a show on it prices its categories
//! ([`crate::pricing`]).

use std::collections::HashSet;

use crate::definition::{check_counts, check_pools, check_text, index_seats, ShowError};
use crate::ids::{CategoryId, PoolId, SeatId, VenueId};
use crate::limits::{MAX_CATEGORIES, MAX_COORDINATE, MAX_SECTIONS};
use crate::places::{Area, PoolSpec, SeatSpec};

/// The stage, drawn so that a buyer sees which way the seats face.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    pub area: Area,
    pub label: String,
}

/// A price category: what the seat map colours a seat by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategorySpec {
    pub category: CategoryId,
    pub label: String,
    /// `#rrggbb`.
    pub color: String,
}

/// A section, with the label a buyer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionSpec {
    pub section: String,
    pub label: String,
}

/// What a chart adds to a list of seats: the stage, the categories and
/// the sections, each seat's and pool's own part being on its spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
    pub stage: Option<Stage>,
    pub categories: Vec<CategorySpec>,
    pub sections: Vec<SectionSpec>,
}

impl Chart {
    /// The categories and sections checked (each listed once, labels and
    /// colours well formed) and the stage's place.
    pub fn check(&self) -> Result<(), ShowError> {
        if let Some(stage) = &self.stage {
            check_area(&stage.area, "stage")?;
            check_text(&stage.label, || "stage.label".into())?;
        }
        if self.categories.len() > MAX_CATEGORIES {
            return Err(ShowError::TooMany {
                field: "categories".into(),
                max: MAX_CATEGORIES,
            });
        }
        let mut seen = HashSet::new();
        for (i, c) in self.categories.iter().enumerate() {
            check_text(&c.label, || format!("categories[{i}].label"))?;
            if !is_color(&c.color) {
                return Err(ShowError::Color {
                    field: format!("categories[{i}].color"),
                });
            }
            if !seen.insert(&c.category) {
                return Err(ShowError::Listed {
                    field: format!("categories[{i}].category"),
                });
            }
        }
        if self.sections.len() > MAX_SECTIONS {
            return Err(ShowError::TooMany {
                field: "sections".into(),
                max: MAX_SECTIONS,
            });
        }
        let mut seen = HashSet::new();
        for (i, s) in self.sections.iter().enumerate() {
            check_text(&s.section, || format!("sections[{i}].section"))?;
            check_text(&s.label, || format!("sections[{i}].label"))?;
            if !seen.insert(&s.section) {
                return Err(ShowError::Listed {
                    field: format!("sections[{i}].section"),
                });
            }
        }
        Ok(())
    }

    pub fn has_category(&self, category: &CategoryId) -> bool {
        self.categories.iter().any(|c| &c.category == category)
    }

    /// Every seat's and pool's category is listed, and on a chart that
    /// lists sections, every seat's section; seats' positions are in the
    /// plane.
    pub fn check_places(&self, seats: &[SeatSpec], pools: &[PoolSpec]) -> Result<(), ShowError> {
        let sections: HashSet<&str> = self.sections.iter().map(|s| s.section.as_str()).collect();
        for (i, seat) in seats.iter().enumerate() {
            if !sections.is_empty() && !sections.contains(seat.section.as_str()) {
                return Err(ShowError::Unlisted {
                    field: format!("seats[{i}].section"),
                });
            }
            self.check_category(seat.category.as_ref(), || format!("seats[{i}].category"))?;
            if let Some(position) = &seat.position {
                check_coordinate(position.x, || format!("seats[{i}].x"))?;
                check_coordinate(position.y, || format!("seats[{i}].y"))?;
            }
        }
        for (i, pool) in pools.iter().enumerate() {
            self.check_category(pool.category.as_ref(), || format!("pools[{i}].category"))?;
            if let Some(area) = &pool.area {
                check_area(area, &format!("pools[{i}].area"))?;
            }
            if let Some(label) = &pool.label {
                check_text(label, || format!("pools[{i}].label"))?;
            }
        }
        Ok(())
    }

    fn check_category(
        &self,
        category: Option<&CategoryId>,
        field: impl Fn() -> String,
    ) -> Result<(), ShowError> {
        match category {
            Some(c) if !self.has_category(c) => Err(ShowError::Unlisted { field: field() }),
            _ => Ok(()),
        }
    }
}

/// A venue: a chart and what it seats.
#[derive(Debug, Clone, PartialEq)]
pub struct Venue {
    pub venue_id: VenueId,
    pub name: String,
    pub chart: Chart,
    /// In the order best available ranks them when they carry no rank.
    /// Their `price_cents` is 0: a show prices them by category.
    pub seats: Vec<SeatSpec>,
    pub pools: Vec<PoolSpec>,
}

impl Venue {
    /// A venue checked whole: every seat at a position and in a listed
    /// category and section, every pool in a listed category, within the
    /// limits of a show (a show on the venue sells all of it).
    pub fn new(
        venue_id: VenueId,
        name: String,
        chart: Chart,
        seats: Vec<SeatSpec>,
        pools: Vec<PoolSpec>,
    ) -> Result<Self, ShowError> {
        check_text(&name, || "name".into())?;
        chart.check()?;
        check_counts(&seats, &pools)?;
        index_seats(&seats)?;
        check_pools(&pools)?;
        for (i, seat) in seats.iter().enumerate() {
            if seat.position.is_none() {
                return Err(ShowError::Missing {
                    field: format!("seats[{i}].x"),
                });
            }
            if seat.category.is_none() {
                return Err(ShowError::Missing {
                    field: format!("seats[{i}].category"),
                });
            }
        }
        for (i, pool) in pools.iter().enumerate() {
            if pool.category.is_none() {
                return Err(ShowError::Missing {
                    field: format!("pools[{i}].category"),
                });
            }
        }
        chart.check_places(&seats, &pools)?;
        Ok(Self {
            venue_id,
            name,
            chart,
            seats,
            pools,
        })
    }

    /// The categories some seat or pool of the venue is in.
    pub fn categories_in_use(&self) -> HashSet<CategoryId> {
        categories_in_use(&self.seats, &self.pools)
    }

    pub fn seat(&self, seat_id: &SeatId) -> Option<&SeatSpec> {
        self.seats.iter().find(|s| &s.seat_id == seat_id)
    }

    pub fn pool(&self, pool_id: &PoolId) -> Option<&PoolSpec> {
        self.pools.iter().find(|p| &p.pool_id == pool_id)
    }
}

/// The categories some of `seats` or `pools` are in.
pub fn categories_in_use(seats: &[SeatSpec], pools: &[PoolSpec]) -> HashSet<CategoryId> {
    seats
        .iter()
        .filter_map(|s| s.category.clone())
        .chain(pools.iter().filter_map(|p| p.category.clone()))
        .collect()
}

fn is_color(value: &str) -> bool {
    value.len() == 7 && value.starts_with('#') && value[1..].chars().all(|c| c.is_ascii_hexdigit())
}

fn check_coordinate(value: f64, field: impl Fn() -> String) -> Result<(), ShowError> {
    if !value.is_finite() || value.abs() > MAX_COORDINATE {
        return Err(ShowError::Coordinate { field: field() });
    }
    Ok(())
}

fn check_area(area: &Area, field: &str) -> Result<(), ShowError> {
    check_coordinate(area.x, || format!("{field}.x"))?;
    check_coordinate(area.y, || format!("{field}.y"))?;
    for (value, name) in [(area.width, "width"), (area.height, "height")] {
        check_coordinate(value, || format!("{field}.{name}"))?;
        if value <= 0.0 {
            return Err(ShowError::Coordinate {
                field: format!("{field}.{name}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::places::Position;

    pub(crate) fn category(id: &str) -> CategoryId {
        CategoryId::parse(id).unwrap()
    }

    pub(crate) fn chart() -> Chart {
        Chart {
            stage: Some(Stage {
                area: Area {
                    x: 400.0,
                    y: 20.0,
                    width: 200.0,
                    height: 40.0,
                },
                label: "Stage".into(),
            }),
            categories: ["premium", "standard"]
                .into_iter()
                .map(|c| CategorySpec {
                    category: category(c),
                    label: c.to_uppercase(),
                    color: "#2a9d8f".into(),
                })
                .collect(),
            sections: vec![SectionSpec {
                section: "A".into(),
                label: "Lower A".into(),
            }],
        }
    }

    pub(crate) fn seat(id: &str, category_id: &str) -> SeatSpec {
        SeatSpec {
            seat_id: SeatId::parse(id).unwrap(),
            section: "A".into(),
            row: "1".into(),
            number: 1,
            price_cents: 0,
            rank: None,
            category: Some(category(category_id)),
            position: Some(Position { x: 1.0, y: 2.0 }),
            accessible: false,
        }
    }

    fn venue(chart: Chart, seats: Vec<SeatSpec>) -> Result<Venue, ShowError> {
        Venue::new(
            VenueId::parse("arena").unwrap(),
            "Arena".into(),
            chart,
            seats,
            Vec::new(),
        )
    }

    #[test]
    fn it_should_take_a_chart_whose_seats_are_placed_in_listed_categories_and_sections() {
        let venue = venue(
            chart(),
            vec![seat("A-1", "premium"), seat("A-2", "standard")],
        )
        .unwrap();
        assert_eq!(venue.categories_in_use().len(), 2);
    }

    #[test]
    fn it_should_refuse_a_seat_in_an_unlisted_category_or_section_naming_the_field() {
        let err = venue(chart(), vec![seat("A-1", "premium"), seat("A-2", "vip")]).unwrap_err();
        assert_eq!(
            err,
            ShowError::Unlisted {
                field: "seats[1].category".into()
            }
        );
        let mut elsewhere = seat("B-1", "premium");
        elsewhere.section = "B".into();
        let err = venue(chart(), vec![elsewhere]).unwrap_err();
        assert_eq!(
            err,
            ShowError::Unlisted {
                field: "seats[0].section".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_seat_without_a_position_or_out_of_the_plane() {
        let mut unplaced = seat("A-1", "premium");
        unplaced.position = None;
        assert_eq!(
            venue(chart(), vec![unplaced]).unwrap_err(),
            ShowError::Missing {
                field: "seats[0].x".into()
            }
        );
        let mut far = seat("A-1", "premium");
        far.position = Some(Position {
            x: f64::INFINITY,
            y: 0.0,
        });
        assert_eq!(
            venue(chart(), vec![far]).unwrap_err(),
            ShowError::Coordinate {
                field: "seats[0].x".into()
            }
        );
    }

    #[test]
    fn it_should_refuse_a_bad_colour_a_category_twice_and_an_empty_stage() {
        let mut bad = chart();
        bad.categories[0].color = "teal".into();
        assert_eq!(
            venue(bad, vec![seat("A-1", "standard")]).unwrap_err(),
            ShowError::Color {
                field: "categories[0].color".into()
            }
        );
        let mut twice = chart();
        twice.categories[1].category = category("premium");
        assert_eq!(
            venue(twice, vec![seat("A-1", "premium")]).unwrap_err(),
            ShowError::Listed {
                field: "categories[1].category".into()
            }
        );
        let mut flat = chart();
        if let Some(stage) = flat.stage.as_mut() {
            stage.area.height = 0.0;
        }
        assert_eq!(
            venue(flat, vec![seat("A-1", "premium")]).unwrap_err(),
            ShowError::Coordinate {
                field: "stage.height".into()
            }
        );
    }
}
