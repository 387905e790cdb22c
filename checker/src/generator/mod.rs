//! The crowd: dozens of buyers and one box-office clerk, each a task with
//! its own random generator derived from the run's seed and its index.
//! Each loop a client picks an operation from what it knows (its holds,
//! orders, bookings, entries) and its generator, sends it to an instance
//! its generator picks, and learns from the answer. Given the same
//! answers, a seed makes the same choices.

pub mod admin;
pub mod buyer;
pub mod choose;
pub mod holds;
pub mod knowledge;
pub mod pay;
pub mod waitlist;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::api::{Api, Caller, Request};
use crate::history::Outcome;
use crate::shows::ShowSpec;
use knowledge::{Knowledge, KnownOrder};

/// What clients share: the orders and bookings any of them made, for the
/// clerk's cancellations (an admin cancels buyers' orders too).
#[derive(Default)]
pub struct Shared {
    pub orders: Mutex<Vec<KnownOrder>>,
    pub bookings: Mutex<Vec<(String, String)>>,
}

/// One client of the crowd.
pub struct Client {
    pub caller: Caller,
    /// Its token names the `partner` channel.
    pub partner: bool,
    pub rng: ChaCha8Rng,
    pub api: Api,
    pub shows: Arc<Vec<ShowSpec>>,
    pub known: Knowledge,
    pub shared: Arc<Shared>,
    next_key: u64,
}

/// The pause after a request the service never saw (its instance down).
const NOT_SENT_PAUSE_MS: u64 = 250;

/// The generator of client `index` of the run seeded `seed`.
pub fn client_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    rng
}

impl Client {
    pub fn new(
        caller: Caller,
        partner: bool,
        rng: ChaCha8Rng,
        api: Api,
        shows: Arc<Vec<ShowSpec>>,
        shared: Arc<Shared>,
    ) -> Self {
        Self {
            caller,
            partner,
            rng,
            api,
            shows,
            known: Knowledge::default(),
            shared,
            next_key: 0,
        }
    }

    /// A key never used before by this client.
    pub fn new_key(&mut self) -> String {
        self.next_key += 1;
        format!("{}-k{}", self.caller.client, self.next_key)
    }

    pub fn instance(&mut self) -> usize {
        let count = self.api.addresses.count().max(1);
        self.rng.gen_range(0..count)
    }

    pub async fn send(&mut self, request: Request) -> Outcome {
        let instance = self.instance();
        let outcome = self.api.send(&self.caller, instance, request).await;
        if let Outcome::NotSent { .. } = outcome {
            // The instance is down (killed): a client does not spin on it.
            tokio::time::sleep(std::time::Duration::from_millis(NOT_SENT_PAUSE_MS)).await;
        }
        outcome
    }

    pub fn show(&self, show_id: &str) -> Option<&ShowSpec> {
        self.shows.iter().find(|s| s.show_id == show_id)
    }

    /// A pause between operations, from the client's generator: a crowd,
    /// not a storm of one client.
    pub async fn think(&mut self) {
        let ms = self.rng.gen_range(20..120);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
