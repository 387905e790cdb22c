//! A buyer's loop: one operation a step, chosen by `choose`, until the run
//! stops the crowd.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::choose::{choose, Op};
use super::Client;
use crate::catalog::SEATED;

/// Runs `client` until `stop`; returns it with what it knows (the run
/// tidies up after it).
pub async fn run(mut client: Client, stop: Arc<AtomicBool>) -> Client {
    while !stop.load(Ordering::Relaxed) {
        client.step().await;
        client.think().await;
    }
    client
}

impl Client {
    async fn step(&mut self) {
        self.known
            .forget_expired(chrono::Utc::now().timestamp_micros());
        if let Some(i) = self.late_offer() {
            let hold_id = self.known.holds[i].hold_id.clone();
            self.known.late_extended.push(hold_id);
            return self.extend(i).await;
        }
        match choose(self) {
            Op::HoldSeats(show) => self.hold_seats(&show).await,
            Op::HoldBest => self.hold_best(SEATED).await,
            Op::HoldPool => self.hold_pool().await,
            Op::PoolOrder => self.pool_order().await,
            Op::Release(i) => self.release(i).await,
            Op::Extend(i) => self.extend(i).await,
            Op::Purchase(i) => self.purchase(i).await,
            Op::Order { holds, race } => self.order(&holds, race).await,
            Op::CancelLines(i) => self.cancel_lines(i).await,
            Op::CancelBooking(i) => self.cancel_booking(i).await,
            Op::Join(show) => self.join(&show).await,
            Op::Leave(i) => self.leave(i).await,
            Op::Poll(i) => self.poll(i).await,
            Op::Retry => self.retry_hold().await,
            Op::Again(i) => self.again(i).await,
        }
    }
}
