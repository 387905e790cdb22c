//! Orders against purchases (`--only orders`): a buyer with three holds of
//! one seat each pays them as three purchases, or as one order of three
//! holds, in the same run, with the simulator answering in 50 ms. Each
//! worker holds three seats, then pays; the pay step is timed end to end
//! (the three purchases one after another, as a client buying them one by
//! one does; or the one order), and the provider's round trips are counted
//! from the service's own metrics.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use booking::auth::Role;
use serde_json::json;

use crate::report::Figures;
use crate::scenarios::{for_duration, metric_sum, post, seat_show, BIG_SHOW_SEATS};
use crate::Target;

/// Holds a buyer pays for at once: the family of three.
const HOLDS: usize = 3;

/// How the three holds are paid.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pay {
    Purchases,
    Order,
}

/// Provider calls the service made so far (every operation: prepare,
/// authorize, capture...).
async fn provider_calls(target: &Target) -> anyhow::Result<f64> {
    metric_sum(
        target,
        "payment_latency_seconds_count{",
        "provider=\"simulator\"",
    )
    .await
}

/// Both ways, one after the other, on shows of their own.
pub async fn orders(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Vec<Figures>> {
    let purchases = pay_run(target, concurrency, duration, Pay::Purchases).await?;
    let order = pay_run(target, concurrency, duration, Pay::Order).await?;
    Ok(vec![purchases, order])
}

async fn pay_run(
    target: &Target,
    concurrency: usize,
    duration: Duration,
    pay: Pay,
) -> anyhow::Result<Figures> {
    let (show, label) = match pay {
        Pay::Purchases => (
            "orders-purchases",
            "3 holds paid as 3 purchases (50 ms simulator)",
        ),
        Pay::Order => ("orders-order", "3 holds paid as 1 order (50 ms simulator)"),
    };
    seat_show(target, show, BIG_SHOW_SEATS).await?;
    let calls_before = provider_calls(target).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let paid = Arc::new(AtomicUsize::new(0));
    let target = Arc::new(target.clone());
    let (wall, answers) = for_duration(concurrency, duration, {
        let (target, paid) = (target.clone(), paid.clone());
        move |worker| {
            let (target, next, paid) = (target.clone(), next.clone(), paid.clone());
            let token = target.token(&format!("o{worker}"), Role::Buyer);
            async move {
                let first = next.fetch_add(HOLDS, Ordering::Relaxed);
                if first + HOLDS > BIG_SHOW_SEATS {
                    return None;
                }
                let mut holds = Vec::with_capacity(HOLDS);
                for n in first..first + HOLDS {
                    let path = format!("/v1/shows/{show}/holds");
                    let body = json!({"seats": [format!("S{}", n + 1)]});
                    let (status, took, hold) = post(&target, &path, &token, &body).await;
                    if status != 201 {
                        return Some((status, took));
                    }
                    holds.push(hold["hold_id"].as_str().unwrap_or_default().to_owned());
                }
                let answer = pay_for(&target, &token, &holds, pay).await;
                if answer.0 == 201 {
                    paid.fetch_add(1, Ordering::Relaxed);
                }
                Some(answer)
            }
        }
    })
    .await;
    let done = paid.load(Ordering::Relaxed).max(1) as f64;
    let calls = (provider_calls(&target).await? - calls_before) / done;
    let mut figures = Figures::from_latencies(label, target.store, &answers, wall);
    figures.note = format!(
        "latency: the pay step (the holds placed before it are not in it); {calls:.1} provider \
         calls per 3 holds paid"
    );
    Ok(figures)
}

/// Pays for `holds`: the status (201 when all are paid) and the time taken.
async fn pay_for(target: &Target, token: &str, holds: &[String], pay: Pay) -> (u16, Duration) {
    let started = Instant::now();
    let method = json!({"payment_method": "pm_sim_ok"});
    match pay {
        Pay::Purchases => {
            for hold_id in holds {
                let path = format!("/v1/holds/{hold_id}/purchase");
                let (status, _, _) = post(target, &path, token, &method).await;
                if status != 201 {
                    return (status, started.elapsed());
                }
            }
            (201, started.elapsed())
        }
        Pay::Order => {
            let body = json!({"holds": holds, "payment_method": "pm_sim_ok"});
            let (status, _, _) = post(target, "/v1/orders", token, &body).await;
            (status, started.elapsed())
        }
    }
}
