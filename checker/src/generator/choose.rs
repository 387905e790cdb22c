//! A client's next operation: weighted by what it knows, drawn with its
//! own generator. The weights lean towards the paths where the service's
//! rules meet (an order of a pool's adult and child holds, a release
//! racing a slow order, a free line cancelled alone, offers extended late).

use rand::Rng;

use super::Client;
use crate::catalog::{FLOOR, LIMITED, SEATED, STARTING, YEN};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    HoldSeats(String),
    HoldBest,
    HoldPool,
    /// A pool's adult and child holds, ordered together.
    PoolOrder,
    Release(usize),
    Extend(usize),
    Purchase(usize),
    /// An order of these holds; `race`: release one of them while it pays.
    Order {
        holds: Vec<usize>,
        race: bool,
    },
    CancelLines(usize),
    CancelBooking(usize),
    Join(String),
    Leave(usize),
    Poll(usize),
    /// The last hold request again, with its key.
    Retry,
    /// A purchase or order sent again (3-D Secure, unknown outcome).
    Again(usize),
}

/// Shows a hold is placed on, and how often (of 100).
const SHOW_WEIGHTS: [(&str, u32); 5] = [
    (SEATED, 35),
    (FLOOR, 30),
    (YEN, 10),
    (LIMITED, 10),
    (STARTING, 15),
];

pub fn choose(client: &mut Client) -> Op {
    let mut options: Vec<(u32, Op)> = vec![(30, place(client)), (3, Op::Retry), (8, Op::PoolOrder)];
    let free: Vec<usize> = (0..client.known.holds.len())
        .filter(|&i| !client.kept_for_late_extension(i))
        .collect();
    if !free.is_empty() {
        let i = free[client.rng.gen_range(0..free.len())];
        let j = free[client.rng.gen_range(0..free.len())];
        let l = free[client.rng.gen_range(0..free.len())];
        options.extend([
            (8, Op::Release(i)),
            (6, Op::Extend(j)),
            (14, Op::Purchase(l)),
        ]);
        if let Some(order) = order_of(client) {
            options.push((16, order));
        }
    }
    let k = &client.known;
    let (orders, bookings, entries, again) = (
        k.orders.len(),
        k.bookings.len(),
        k.entries.len(),
        k.again.len(),
    );
    if orders > 0 {
        options.push((20, Op::CancelLines(client.rng.gen_range(0..orders))));
    }
    if bookings > 0 {
        options.push((10, Op::CancelBooking(client.rng.gen_range(0..bookings))));
    }
    if entries > 0 {
        options.push((2, Op::Leave(client.rng.gen_range(0..entries))));
        options.push((4, Op::Poll(client.rng.gen_range(0..entries))));
    }
    if again > 0 {
        options.push((10, Op::Again(client.rng.gen_range(0..again))));
    }
    let join = pick_show(client);
    if !client.known.entries.iter().any(|(_, show)| *show == join) {
        options.push((5, Op::Join(join)));
    }
    pick(client, options)
}

fn pick(client: &mut Client, options: Vec<(u32, Op)>) -> Op {
    let total: u32 = options.iter().map(|(w, _)| w).sum();
    let mut draw = client.rng.gen_range(0..total);
    for (weight, op) in options {
        if draw < weight {
            return op;
        }
        draw -= weight;
    }
    Op::Retry
}

fn pick_show(client: &mut Client) -> String {
    let mut draw = client.rng.gen_range(0..100);
    for (show, weight) in SHOW_WEIGHTS {
        if draw < weight {
            return show.to_owned();
        }
        draw -= weight;
    }
    SEATED.to_owned()
}

fn place(client: &mut Client) -> Op {
    let show = pick_show(client);
    match show.as_str() {
        FLOOR => Op::HoldPool,
        SEATED if client.rng.gen_bool(0.25) => Op::HoldBest,
        _ => Op::HoldSeats(show),
    }
}

/// An order of 2..=4 of the client's holds of one show, pool holds
/// preferred; slow and raced by a release of one of them now and then.
fn order_of(client: &mut Client) -> Option<Op> {
    let first = client.rng.gen_range(0..client.known.holds.len());
    let show = client.known.holds[first].show_id.clone();
    let mut holds = client.known.holds_of_show(&show);
    holds.retain(|&i| !client.kept_for_late_extension(i));
    if holds.is_empty() {
        return None;
    }
    holds.retain(|&i| !client.kept_for_late_extension(i));
    if holds.is_empty() {
        return None;
    }
    if holds.len() < 2 && client.rng.gen_bool(0.7) {
        return None;
    }
    let wanted = client.rng.gen_range(2..=4).min(holds.len());
    while holds.len() > wanted {
        let drop = client.rng.gen_range(0..holds.len());
        holds.remove(drop);
    }
    let race = holds.len() >= 2 && client.rng.gen_bool(0.3);
    Some(Op::Order { holds, race })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::api::{Addresses, Api, Caller};
    use crate::generator::knowledge::KnownHold;
    use crate::generator::{client_rng, Shared};
    use crate::history::History;

    fn client(dir: &tempfile::TempDir) -> Client {
        let history = Arc::new(History::create(&dir.path().join("h.jsonl")).expect("history"));
        let api = Api::new(Addresses::new(1), history).expect("api");
        let caller = Caller {
            client: "b1".into(),
            sub: "b1".into(),
            token: String::new(),
        };
        let shows = Arc::new(crate::catalog::plan(0, None));
        Client::new(
            caller,
            false,
            client_rng(1, 1),
            api,
            shows,
            Arc::new(Shared::default()),
        )
    }

    #[test]
    fn an_offer_kept_for_its_late_extension_is_neither_bought_nor_released() {
        let dir = tempfile::tempdir().expect("dir");
        let mut client = client(&dir);
        let now = chrono::Utc::now().timestamp_micros();
        client.known.holds.push(KnownHold {
            hold_id: "offer".into(),
            show_id: YEN.into(),
            pool: false,
            expires_us: now + 60_000_000,
            offered_us: Some(now),
        });
        assert!(client.kept_for_late_extension(0));
        for _ in 0..500 {
            let op = choose(&mut client);
            assert!(
                !matches!(op, Op::Release(0) | Op::Purchase(0) | Op::Extend(0)),
                "{op:?}"
            );
            assert!(
                !matches!(&op, Op::Order { holds, .. } if holds.contains(&0)),
                "{op:?}"
            );
        }
    }
}
