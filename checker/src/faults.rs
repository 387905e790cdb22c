//! Faults, scheduled from the seed: an instance killed with SIGKILL at a
//! random moment and started again on the same database a little later;
//! on PostgreSQL (a cluster of the run's own), the server stopped (`fast`
//! or `immediate`, a crash) and started again. The same seed, the same
//! offsets.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::sync::Mutex;

use crate::cluster::StopMode;
use crate::database::RunDatabase;
use crate::instances::Instances;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultKind {
    Kill { instance: usize },
    RestartDatabase { mode: StopMode },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub at: Duration,
    pub down: Duration,
    pub kind: FaultKind,
}

/// A fault as it happened: from its start to the end of its recovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    pub start_us: i64,
    pub end_us: i64,
    pub what: String,
}

/// The faults of a run of `length` with `instances` instances; database
/// restarts only when the run has a cluster of its own.
pub fn plan(seed: u64, length: Duration, instances: usize, own_cluster: bool) -> Vec<Fault> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xfa17_5eed);
    let length_ms = length.as_millis() as u64;
    let moment = |rng: &mut ChaCha8Rng, from: u64, to: u64| {
        Duration::from_millis(rng.gen_range(length_ms * from / 100..=length_ms * to / 100))
    };
    let mut faults = Vec::new();
    for _ in 0..rng.gen_range(1..=2) {
        faults.push(Fault {
            at: moment(&mut rng, 15, 75),
            down: Duration::from_millis(rng.gen_range(300..=2_500)),
            kind: FaultKind::Kill {
                instance: rng.gen_range(0..instances.max(1)),
            },
        });
    }
    if own_cluster {
        let mode = if rng.gen_bool(0.5) {
            StopMode::Fast
        } else {
            StopMode::Immediate
        };
        faults.push(Fault {
            at: moment(&mut rng, 30, 80),
            down: Duration::from_millis(rng.gen_range(300..=2_000)),
            kind: FaultKind::RestartDatabase { mode },
        });
    }
    faults.sort_by_key(|f| f.at);
    faults
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// Runs `faults` from `start` until they are done or `stop` is set.
pub async fn run(
    faults: Vec<Fault>,
    start: Instant,
    stop: Arc<AtomicBool>,
    instances: Arc<Mutex<Instances>>,
    database: Arc<RunDatabase>,
) -> Vec<FaultWindow> {
    let mut windows = Vec::new();
    for fault in faults {
        while start.elapsed() < fault.at {
            if stop.load(Ordering::Relaxed) {
                return windows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let start_us = now_us();
        let what = match execute(&fault, &instances, &database).await {
            Ok(()) => format!("{:?} at {:?} for {:?}", fault.kind, fault.at, fault.down),
            Err(e) => format!("{:?} at {:?} failed: {e}", fault.kind, fault.at),
        };
        tracing::info!(%what, "fault done");
        windows.push(FaultWindow {
            start_us,
            end_us: now_us(),
            what,
        });
    }
    windows
}

async fn execute(
    fault: &Fault,
    instances: &Mutex<Instances>,
    database: &Arc<RunDatabase>,
) -> anyhow::Result<()> {
    match fault.kind {
        FaultKind::Kill { instance } => {
            instances.lock().await.kill(instance).await?;
            tokio::time::sleep(fault.down).await;
            instances.lock().await.start(instance).await
        }
        FaultKind::RestartDatabase { mode } => {
            let db = database.clone();
            tokio::task::spawn_blocking(move || db.cluster().map_or(Ok(()), |c| c.stop(mode)))
                .await??;
            tokio::time::sleep(fault.down).await;
            let db = database.clone();
            tokio::task::spawn_blocking(move || db.cluster().map_or(Ok(()), |c| c.start_again()))
                .await?
        }
    }
}
