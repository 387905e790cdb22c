//! Best available: the service chooses `quantity` free seats side by side.
//!
//! A block is `quantity` free seats in one section and row whose `number`s
//! are consecutive (`n, n+1, ...`). Seats are physically adjacent only if
//! they share section and row and their numbers differ by exactly one: a
//! missing number breaks adjacency, like an aisle.
//!
//! # Stranding
//!
//! A *row run* is a maximal sequence of seats of one section and row with
//! consecutive numbers. Within a run, a seat's neighbours are the seats
//! numbered one below and one above; a missing number or the end of the
//! row counts as a wall, and a wall is never free.
//!
//! After taking a block `[a, a+q)`, a seat is *stranded* when it is free,
//! both its neighbours are non-free (taken, chosen, or a wall), and it was
//! not already in that situation before the choice: a single free seat
//! left isolated by the choice, which nobody buying two or more can use.
//!
//! Only the seats just before and just after the block can become stranded:
//! taking the block changes the freedom of the block's seats only, so only a
//! seat with a neighbour in the block can see its neighbourhood change, and
//! within one run those are the seats numbered `a-1` and `a+q`. Seat `a-1`
//! is stranded exactly when it is free and `a-2` is not (taken or a wall);
//! seat `a+q` likewise with `a+q+1`. Before the choice each had a free
//! neighbour (the block's end seat), so neither was isolated already.
//!
//! # Choice
//!
//! Among all blocks, the one with the smallest key
//! `(stranded seats, sum of ranks, rank of its first seat, id of its first seat)`
//! is chosen, where the first seat is the one with the lowest number. So a
//! block that strands nothing is always preferred; only when every block
//! strands a seat is one of those taken. (A block that strands two seats
//! lies in a stretch of exactly `q+2` free seats between non-free ones,
//! and the blocks at either end of that stretch strand nothing, so a block
//! stranding two is never chosen.) A
//! seat id is unique, and a seat starts at most one block, so the key is a
//! total order: the answer is deterministic and independent of the order
//! of `seats`.

use crate::ids::SeatId;
use crate::limits::{MAX_BEST_AVAILABLE_QUANTITY, MIN_BEST_AVAILABLE_QUANTITY};

/// One seat as the choice sees it. The caller computes `free` from the seat
/// states at `now` and `rank` from the show: the seat's `rank` if the show
/// sets one, else its position in the show's `seats` list. Lower is better.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatPlace {
    pub seat_id: SeatId,
    pub section: String,
    pub row: String,
    pub number: u32,
    pub rank: i64,
    pub free: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BestAvailableError {
    #[error(
        "quantity must be {MIN_BEST_AVAILABLE_QUANTITY}..={MAX_BEST_AVAILABLE_QUANTITY}, not {quantity}"
    )]
    QuantityOutOfRange { quantity: usize },
    #[error("no block of free seats side by side of that size")]
    NoBlock,
}

/// How a block compares: smaller is better (see the module documentation).
type Key<'a> = (u8, i128, i64, &'a SeatId);

/// Which of the best blocks a choice takes ([`SeatOrder::choose_spread`]):
/// the `pick`-th (modulo how many there are) of the `among` best. The
/// first choice of a request takes the best ([`Spread::BEST`]); a choice
/// made again after losing its block to a buyer on another instance, who
/// read the same statuses and chooses in the same order, spreads over more
/// of the next best blocks with a random `pick`, or the losers of both
/// instances would keep choosing the same block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub among: usize,
    pub pick: usize,
}

impl Spread {
    /// The best block.
    pub const BEST: Spread = Spread { among: 1, pick: 0 };
}

fn adjacent(a: &SeatPlace, b: &SeatPlace) -> bool {
    a.section == b.section && a.row == b.row && a.number.checked_add(1) == Some(b.number)
}

/// A show's seats in the order a choice scans them, worked out once per
/// show (its seats never change): by section, row and number, cut into row
/// runs. Choosing is then one scan of the runs with the seats' freedom, no
/// sort and no copy of a seat per choice (a choice on 5,000 seats did
/// both, a few hundred microseconds of one core each, serialized behind
/// the per-show claims in a storm).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeatOrder {
    /// Ordinals (indexes into the seats given to `new`), in scan order.
    order: Vec<usize>,
    /// Row runs: each a range of `order`, with its section's index.
    runs: Vec<(std::ops::Range<usize>, usize)>,
    sections: Vec<String>,
    /// By ordinal.
    ranks: Vec<i64>,
    ids: Vec<SeatId>,
}

impl SeatOrder {
    /// The order of `seats` (their `free` is not read).
    pub fn new(seats: &[SeatPlace]) -> Self {
        let mut order: Vec<usize> = (0..seats.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            let (a, b) = (&seats[a], &seats[b]);
            (&a.section, &a.row, a.number, &a.seat_id)
                .cmp(&(&b.section, &b.row, b.number, &b.seat_id))
        });
        let mut runs = Vec::new();
        let mut sections: Vec<String> = Vec::new();
        let mut start = 0;
        for end in 1..=order.len() {
            let cut = end == order.len() || !adjacent(&seats[order[end - 1]], &seats[order[end]]);
            if cut {
                let section = &seats[order[start]].section;
                if sections.last() != Some(section) {
                    sections.push(section.clone());
                }
                runs.push((start..end, sections.len() - 1));
                start = end;
            }
        }
        Self {
            order,
            runs,
            sections,
            ranks: seats.iter().map(|s| s.rank).collect(),
            ids: seats.iter().map(|s| s.seat_id.clone()).collect(),
        }
    }

    /// Chooses `quantity` seats side by side whose `free[ordinal]` is true,
    /// in `section` if given: their ordinals in number order. The same
    /// choice as [`choose`] on the same seats.
    pub fn choose(
        &self,
        free: &[bool],
        quantity: usize,
        section: Option<&str>,
    ) -> Result<Vec<usize>, BestAvailableError> {
        self.choose_spread(free, quantity, section, Spread::BEST)
    }

    /// Like [`SeatOrder::choose`], but takes the `spread.pick`-th (modulo
    /// how many there are) of the `spread.among` best blocks that strand
    /// no more seats than the best one does. After a lost race, choosers on
    /// several instances that read the same statuses would otherwise all
    /// choose the same next block again (see [`Spread`]).
    pub fn choose_spread(
        &self,
        free: &[bool],
        quantity: usize,
        section: Option<&str>,
        spread: Spread,
    ) -> Result<Vec<usize>, BestAvailableError> {
        if !(MIN_BEST_AVAILABLE_QUANTITY..=MAX_BEST_AVAILABLE_QUANTITY).contains(&quantity) {
            return Err(BestAvailableError::QuantityOutOfRange { quantity });
        }
        let among = spread.among.max(1);
        // The best `among` blocks, best first.
        let mut best: Vec<(Key<'_>, &[usize])> = Vec::with_capacity(among);
        for (range, section_index) in &self.runs {
            if section.is_some_and(|wanted| self.sections[*section_index] != wanted) {
                continue;
            }
            let run = &self.order[range.clone()];
            let free = |k: usize| run.get(k).is_some_and(|&o| free.get(o) == Some(&true));
            let mut streak = 0usize;
            let mut rank_sum = 0i128;
            for end in 0..run.len() {
                streak = if free(end) { streak + 1 } else { 0 };
                rank_sum += i128::from(self.ranks[run[end]]);
                if end >= quantity {
                    rank_sum -= i128::from(self.ranks[run[end - quantity]]);
                }
                if streak < quantity {
                    continue;
                }
                let start = end + 1 - quantity;
                let left = start > 0 && free(start - 1) && !(start > 1 && free(start - 2));
                let right = free(end + 1) && !free(end + 2);
                let first = run[start];
                let key = (
                    u8::from(left) + u8::from(right),
                    rank_sum,
                    self.ranks[first],
                    &self.ids[first],
                );
                if best.len() == among && best.last().is_some_and(|(worst, _)| key >= *worst) {
                    continue;
                }
                let at = best.partition_point(|(kept, _)| *kept < key);
                best.insert(at, (key, &run[start..=end]));
                best.truncate(among);
            }
        }
        // Never a block stranding more than the best one does.
        let strands = best.first().map(|((stranded, ..), _)| *stranded);
        best.retain(|((stranded, ..), _)| Some(*stranded) == strands);
        let count = best.len().max(1);
        best.get(spread.pick % count)
            .map(|(_, block)| block.to_vec())
            .ok_or(BestAvailableError::NoBlock)
    }
}

/// Chooses `quantity` free seats side by side, in `section` if given; the
/// seat ids are returned in number order.
///
/// Complexity: sorting the seats by section, row and number is
/// `O(n log n)`; then each row run is scanned once with a sliding window
/// (free streak and rank sum updated in `O(1)` per seat), `O(n)`. For a
/// 100,000-seat show that is a few million comparisons, a few milliseconds.
/// A caller choosing often on the same seats keeps their [`SeatOrder`] and
/// pays only the scan.
pub fn choose(
    seats: &[SeatPlace],
    quantity: usize,
    section: Option<&str>,
) -> Result<Vec<SeatId>, BestAvailableError> {
    let free: Vec<bool> = seats.iter().map(|s| s.free).collect();
    let chosen = SeatOrder::new(seats).choose(&free, quantity, section)?;
    Ok(chosen
        .into_iter()
        .map(|o| seats[o].seat_id.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::MAX_SEATS_PER_SHOW;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A row drawn as text, numbered from 1: `.` a free seat, `x` a taken
    /// one, `_` a missing number. Ranks are 0; see [`by_position`].
    fn row(section: &str, row: &str, drawing: &str) -> Vec<SeatPlace> {
        drawing
            .chars()
            .zip(1u32..)
            .filter(|(c, _)| *c != '_')
            .map(|(c, number)| SeatPlace {
                seat_id: SeatId::parse(&format!("{section}-{row}-{number}")).unwrap(),
                section: section.into(),
                row: row.into(),
                number,
                rank: 0,
                free: c == '.',
            })
            .collect()
    }

    /// The default ranks: each seat's position in the show's list.
    fn by_position(mut seats: Vec<SeatPlace>) -> Vec<SeatPlace> {
        for (i, s) in seats.iter_mut().enumerate() {
            s.rank = i as i64;
        }
        seats
    }

    fn ids(names: &[&str]) -> Vec<SeatId> {
        names.iter().map(|n| SeatId::parse(n).unwrap()).collect()
    }

    #[test]
    fn it_should_fill_a_gap_of_exactly_the_quantity_before_a_larger_run() {
        // Run 1-3 ranks best, but any pair in it strands the third seat.
        let seats = by_position(row("A", "1", "...x..x..."));
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-1-5", "A-1-6"])));
    }

    #[test]
    fn it_should_take_the_block_at_a_row_end_rather_than_one_seat_in() {
        let mut seats = row("A", "1", ".....");
        for (s, rank) in seats.iter_mut().zip([50, 1, 2, 40, 60]) {
            s.rank = rank;
        }
        // 2-3 ranks best but strands 1; 3-4 strands 5; 1-2 strands nothing.
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-1-1", "A-1-2"])));
    }

    #[test]
    fn it_should_spread_over_the_best_blocks_that_strand_nothing() {
        let seats = by_position(row("A", "1", "......"));
        let order = SeatOrder::new(&seats);
        let free = vec![true; seats.len()];
        let pick = |pick| {
            let spread = Spread { among: 3, pick };
            let chosen = order.choose_spread(&free, 2, None, spread).unwrap();
            chosen
                .into_iter()
                .map(|o| seats[o].seat_id.clone())
                .collect::<Vec<_>>()
        };
        // 2-3 strands 1 and 4-5 strands 6, so the three that strand
        // nothing are 1-2, 3-4 and 5-6, best first; the pick wraps round.
        assert_eq!(pick(0), ids(&["A-1-1", "A-1-2"]));
        assert_eq!(pick(1), ids(&["A-1-3", "A-1-4"]));
        assert_eq!(pick(2), ids(&["A-1-5", "A-1-6"]));
        assert_eq!(pick(3), ids(&["A-1-1", "A-1-2"]));
    }

    #[test]
    fn it_should_strand_a_seat_when_every_block_would() {
        let seats = by_position(row("A", "1", "x...x"));
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-1-2", "A-1-3"])));
    }

    #[test]
    fn it_should_let_explicit_ranks_override_the_list_order() {
        let mut seats = by_position([row("A", "1", ".."), row("A", "2", "..")].concat());
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-1-1", "A-1-2"])));
        for (s, rank) in seats.iter_mut().zip([10, 11, 1, 2]) {
            s.rank = rank;
        }
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-2-1", "A-2-2"])));
    }

    #[test]
    fn it_should_break_rank_ties_by_first_seat_rank_then_seat_id() {
        let mut seats = [row("A", "1", ".."), row("A", "2", "..")].concat();
        for (s, rank) in seats.iter_mut().zip([2, 2, 1, 3]) {
            s.rank = rank;
        }
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-2-1", "A-2-2"])));
        let flat = [row("B", "1", ".."), row("A", "1", "..")].concat();
        assert_eq!(choose(&flat, 2, None), Ok(ids(&["A-1-1", "A-1-2"])));
    }

    #[test]
    fn it_should_choose_only_in_the_requested_section() {
        let seats = by_position([row("A", "1", ".."), row("B", "1", "..")].concat());
        assert_eq!(choose(&seats, 2, Some("B")), Ok(ids(&["B-1-1", "B-1-2"])));
        assert_eq!(
            choose(&seats, 2, Some("C")),
            Err(BestAvailableError::NoBlock)
        );
    }

    #[test]
    fn it_should_not_treat_non_consecutive_numbers_as_adjacent() {
        let seats = by_position(row("A", "1", ".._.."));
        assert_eq!(choose(&seats, 3, None), Err(BestAvailableError::NoBlock));
        // A missing number is a wall: 1-2 or 2-3 strands a seat, 5-6 does not.
        let seats = by_position(row("A", "1", "..._.."));
        assert_eq!(choose(&seats, 2, None), Ok(ids(&["A-1-5", "A-1-6"])));
    }

    #[test]
    fn it_should_not_join_rows_or_sections_with_consecutive_numbers() {
        // Seat 1 of row 1 and seat 2 of row 2 (or of section B) are not side by side.
        let rows = [row("A", "1", "."), row("A", "2", "_.")].concat();
        assert_eq!(choose(&rows, 2, None), Err(BestAvailableError::NoBlock));
        let sections = [row("A", "1", "."), row("B", "1", "_.")].concat();
        assert_eq!(choose(&sections, 2, None), Err(BestAvailableError::NoBlock));
    }

    #[test]
    fn it_should_answer_no_block_when_nothing_is_free() {
        let seats = row("A", "1", "xxxx");
        assert_eq!(choose(&seats, 1, None), Err(BestAvailableError::NoBlock));
        assert_eq!(choose(&[], 1, None), Err(BestAvailableError::NoBlock));
    }

    #[test]
    fn it_should_refuse_a_quantity_outside_one_to_ten() {
        let seats = row("A", "1", &".".repeat(12));
        for quantity in [0, MAX_BEST_AVAILABLE_QUANTITY + 1] {
            assert_eq!(
                choose(&seats, quantity, None),
                Err(BestAvailableError::QuantityOutOfRange { quantity })
            );
        }
        assert_eq!(
            choose(&seats, MAX_BEST_AVAILABLE_QUANTITY, None).map(|b| b.len()),
            Ok(MAX_BEST_AVAILABLE_QUANTITY)
        );
    }

    #[test]
    fn it_should_choose_a_single_seat_without_stranding_a_neighbour() {
        // Seat 2 ranks best but would strand 3 (4 is taken); 1 strands nothing.
        let mut seats = row("A", "1", "...x");
        for (s, rank) in seats.iter_mut().zip([5, 0, 5, 5]) {
            s.rank = rank;
        }
        assert_eq!(choose(&seats, 1, None), Ok(ids(&["A-1-1"])));
    }

    #[test]
    fn it_should_choose_in_a_stadium_of_100_000_seats() {
        let mut seats = Vec::with_capacity(MAX_SEATS_PER_SHOW);
        for r in 0..1_000 {
            // Every other seat taken: no two free side by side, but in the last row.
            let drawing: String = (0..100)
                .map(|n| if r == 999 || n % 2 == 0 { '.' } else { 'x' })
                .collect();
            seats.extend(row("S", &r.to_string(), &drawing));
        }
        let seats = by_position(seats);
        assert_eq!(seats.len(), MAX_SEATS_PER_SHOW);
        assert_eq!(
            choose(&seats, 4, None),
            Ok(ids(&["S-999-1", "S-999-2", "S-999-3", "S-999-4"]))
        );
    }

    type Spot<'a> = (&'a str, &'a str, u32);

    /// The rules written the obvious way, over every block and every seat:
    /// a block is `quantity` seats numbered `n..n+quantity` all present and
    /// free; a stranded seat is any free seat isolated after the choice that
    /// was not isolated before. The best block has the smallest key.
    fn oracle(
        seats: &[SeatPlace],
        quantity: usize,
        section: Option<&str>,
    ) -> Option<(usize, Vec<SeatId>)> {
        let at: HashMap<Spot<'_>, &SeatPlace> = seats
            .iter()
            .map(|s| ((s.section.as_str(), s.row.as_str(), s.number), s))
            .collect();
        let mut best: Option<(Key<'_>, Vec<SeatId>)> = None;
        for first in seats {
            if section.is_some_and(|wanted| first.section != wanted) {
                continue;
            }
            let spot = |n: u32| at.get(&(first.section.as_str(), first.row.as_str(), n));
            let block: Option<Vec<&SeatPlace>> = (0..quantity as u32)
                .map(|k| spot(first.number + k).copied().filter(|s| s.free))
                .collect();
            let Some(block) = block else { continue };
            let taken = |s: &SeatPlace| block.iter().any(|b| b.seat_id == s.seat_id);
            let free_before = |s: Option<&&SeatPlace>| s.is_some_and(|s| s.free);
            let free_after = |s: Option<&&SeatPlace>| s.is_some_and(|s| s.free && !taken(s));
            let stranded = seats
                .iter()
                .filter(|s| {
                    let near = |n: u32| at.get(&(s.section.as_str(), s.row.as_str(), n));
                    let (below, above) =
                        (s.number.checked_sub(1).and_then(near), near(s.number + 1));
                    let isolated_after =
                        free_after(Some(s)) && !free_after(below) && !free_after(above);
                    let isolated_before = s.free && !free_before(below) && !free_before(above);
                    isolated_after && !isolated_before
                })
                .count();
            let key = (
                stranded as u8,
                block.iter().map(|s| i128::from(s.rank)).sum(),
                first.rank,
                &first.seat_id,
            );
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, block.iter().map(|s| s.seat_id.clone()).collect()));
            }
        }
        best.map(|(key, block)| (usize::from(key.0), block))
    }

    /// Up to four rows in sections A and B, numbers rising by one (mostly)
    /// or two (a missing number), seats free or taken, small ranks so that
    /// ties happen.
    fn show() -> impl Strategy<Value = Vec<SeatPlace>> {
        let seat = (
            prop_oneof![4 => Just(1u32), 1 => Just(2u32)],
            any::<bool>(),
            0i64..4,
        );
        let row = (0..2usize, proptest::collection::vec(seat, 1..14));
        proptest::collection::vec(row, 1..5).prop_map(|rows| {
            let mut seats = Vec::new();
            for (r, (section, row)) in rows.into_iter().enumerate() {
                let section = ["A", "B"][section];
                let mut number = 0;
                for (step, free, rank) in row {
                    number += step;
                    seats.push(SeatPlace {
                        seat_id: SeatId::parse(&format!("{section}-{r}-{number}")).unwrap(),
                        section: section.into(),
                        row: r.to_string(),
                        number,
                        rank,
                        free,
                    });
                }
            }
            seats
        })
    }

    proptest! {
        #[test]
        fn the_choice_is_a_free_block_that_strands_nothing_when_it_can(
            seats in show(),
            quantity in 1usize..=5,
            section in prop_oneof![Just(None), Just(Some("A")), Just(Some("B")), Just(Some("C"))],
        ) {
            let chosen = choose(&seats, quantity, section);
            let reversed: Vec<SeatPlace> = seats.iter().rev().cloned().collect();
            prop_assert_eq!(&choose(&reversed, quantity, section), &chosen, "order of the list");
            let expected = oracle(&seats, quantity, section);
            match chosen {
                Err(e) => {
                    prop_assert_eq!(e, BestAvailableError::NoBlock);
                    prop_assert_eq!(expected, None, "a free block exists");
                }
                Ok(block) => {
                    let by_id: HashMap<&SeatId, &SeatPlace> =
                        seats.iter().map(|s| (&s.seat_id, s)).collect();
                    let places: Vec<&SeatPlace> = block.iter().map(|id| by_id[id]).collect();
                    prop_assert_eq!(places.len(), quantity);
                    for pair in places.windows(2) {
                        prop_assert!(adjacent(pair[0], pair[1]), "{:?}", pair);
                    }
                    for p in &places {
                        prop_assert!(p.free);
                        prop_assert!(section.is_none_or(|wanted| p.section == wanted));
                    }
                    let (stranded, best) = expected.unwrap_or_default();
                    prop_assert!(stranded <= 1, "a block stranding two is never the best");
                    prop_assert_eq!(block, best);
                }
            }
        }

        #[test]
        fn a_spread_choice_is_a_free_block_stranding_no_more_than_the_best(
            seats in show(),
            quantity in 1usize..=5,
            among in 1usize..=8,
            pick in 0usize..16,
        ) {
            let order = SeatOrder::new(&seats);
            let free: Vec<bool> = seats.iter().map(|s| s.free).collect();
            let spread = Spread { among, pick };
            let chosen = order.choose_spread(&free, quantity, None, spread);
            let expected = oracle(&seats, quantity, None);
            match (chosen, expected) {
                (Err(e), None) => prop_assert_eq!(e, BestAvailableError::NoBlock),
                (Ok(block), Some((stranded, _))) => {
                    let places: Vec<&SeatPlace> = block.iter().map(|&o| &seats[o]).collect();
                    prop_assert_eq!(places.len(), quantity);
                    for pair in places.windows(2) {
                        prop_assert!(adjacent(pair[0], pair[1]), "{:?}", pair);
                    }
                    prop_assert!(places.iter().all(|p| p.free));
                    // What it strands (see the module documentation).
                    let (first, last) = (places[0], places[quantity - 1]);
                    let free_at = |n: u32| seats.iter().any(|s| {
                        s.free && s.section == first.section && s.row == first.row && s.number == n
                    });
                    let below = first.number.checked_sub(1).is_some_and(free_at)
                        && !first.number.checked_sub(2).is_some_and(free_at);
                    let above = free_at(last.number + 1) && !free_at(last.number + 2);
                    let own = usize::from(below) + usize::from(above);
                    prop_assert_eq!(own, stranded, "strands no more than the best");
                }
                (chosen, expected) => prop_assert!(false, "{:?} against {:?}", chosen, expected),
            }
        }

        #[test]
        fn an_order_kept_for_a_show_chooses_as_the_oracle_whatever_is_free(
            seats in show(),
            frees in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 60), 1..4),
            quantity in 1usize..=5,
            section in prop_oneof![Just(None), Just(Some("A")), Just(Some("B"))],
        ) {
            // Worked out once, from seats whose freedom it never reads.
            let kept = SeatOrder::new(&seats);
            for free in frees {
                let now: Vec<SeatPlace> = seats
                    .iter()
                    .zip(free.iter().cycle())
                    .map(|(s, &f)| SeatPlace { free: f, ..s.clone() })
                    .collect();
                let flags: Vec<bool> = now.iter().map(|s| s.free).collect();
                let chosen = kept
                    .choose(&flags, quantity, section)
                    .map(|ordinals| ordinals.into_iter().map(|o| now[o].seat_id.clone()).collect::<Vec<_>>());
                let expected = oracle(&now, quantity, section).map(|(_, block)| block);
                prop_assert_eq!(chosen.ok(), expected);
            }
        }
    }
}
