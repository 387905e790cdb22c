//! Waiting lists (`--only waitlist`, issue #36): joining a sold-out show's
//! list against plain holds in the same run, and the time from a seat
//! freeing to its offer, with 10,000 entries waiting, after a release
//! (while 64 buyers release and the offered buy) and after an expiry
//! (from the hold's `expires_at`). The service judges every
//! `DEFAULT_WAITLIST_INTERVAL` as shipped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use booking::auth::Role;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::report::Figures;
use crate::scenarios::{for_duration, hold_seats, post, put_show, seat_show, seat_show_body};
use crate::Target;

/// Entries waiting: the 10,000.
const ENTRIES: usize = 10_000;
/// Seats of the show whose holds are released.
const SEATS: usize = 2_000;
/// Seats of the show whose holds expire (each offered after its expiry).
const EXPIRING: usize = 500;
/// How long the expiring show's holds last: long enough to join 10,000
/// entries first on this machine (the join rate measured above).
const EXPIRING_TTL_SECONDS: i64 = 60;
/// How long an offer lasts (none lapses during the run).
const OFFER_SECONDS: i64 = 600;
/// Buyers buying the offers, in the waiting list's order.
const PAYERS: usize = 8;
/// How long a setup load (selling out, joining) may run: a bound for a
/// broken build, never reached on this machine (seconds in practice).
const SETUP_BOUND: Duration = Duration::from_secs(600);
/// How long after the last release (or expiry) the offers are read: the
/// judge's pass (250 ms) and a judgement, with room to spare; an offer
/// made later still counts, with its true latency.
const JUDGED_WITHIN: Duration = Duration::from_secs(2);
/// How often a payer looks whether its entry has been offered.
const POLL_EVERY: Duration = Duration::from_millis(50);

pub async fn run(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Vec<Figures>> {
    let target = Arc::new(target.clone());
    let mut out = Vec::new();
    // Plain holds, the joins' baseline.
    let show = "wl-plain";
    seat_show(&target, show, crate::scenarios::BIG_SHOW_SEATS).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let (wall, holds) = hold_seats(&target, show, "p", next, concurrency, duration, 1).await;
    let plain = Figures::from_latencies(
        "holds (distinct seats), the joins' baseline",
        target.store,
        &holds,
        wall,
    );
    // The released show: sold out, 10,000 join.
    let show = "wl-release";
    let held = sold_out(&target, show, SEATS, 7_200, concurrency).await?;
    let (joins, entries) = join(&target, show, &json!({"quantity": 1}), concurrency).await?;
    let mut joined = joins;
    joined.note = format!(
        "{} entries joined a sold-out show's list; {:.2}x the plain holds' rate",
        entries.len(),
        joined.per_second / plain.per_second.max(1.0)
    );
    out.push(plain);
    out.push(joined);
    out.push(after_releases(&target, show, held, &entries, concurrency, duration).await?);
    out.push(after_expiry(&target, concurrency).await?);
    out.push(after_pool_expiry(&target, concurrency).await?);
    Ok(out)
}

/// A show of `seats` seats keeping a waiting list, every seat held (one
/// hold a seat): each seat's hold id and `expires_at`.
async fn sold_out(
    target: &Arc<Target>,
    show: &str,
    seats: usize,
    ttl: i64,
    concurrency: usize,
) -> anyhow::Result<Vec<(String, String, DateTime<Utc>)>> {
    let mut body = seat_show_body(show, seats);
    body["hold_ttl_seconds"] = json!(ttl);
    body["waitlist"] = json!({"offer_seconds": OFFER_SECONDS});
    put_show(target, show, body).await?;
    let held = Arc::new(Mutex::new(Vec::with_capacity(seats)));
    let next = Arc::new(AtomicUsize::new(0));
    for_duration(concurrency, SETUP_BOUND, {
        let (target, show, held) = (target.clone(), show.to_owned(), held.clone());
        move |_| {
            let (target, show, held, next) =
                (target.clone(), show.clone(), held.clone(), next.clone());
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed) + 1;
                if n > seats {
                    return None;
                }
                let token = target.token(&format!("holder{n}"), Role::Buyer);
                let path = format!("/v1/shows/{show}/holds");
                let (status, took, answer) =
                    post(&target, &path, &token, &json!({"seats": [format!("S{n}")]})).await;
                let until = answer["expires_at"].as_str().and_then(|s| s.parse().ok());
                if let (Some(id), Some(until)) = (answer["hold_id"].as_str(), until) {
                    if let Ok(mut held) = held.lock() {
                        held.push((format!("S{n}"), id.to_owned(), until));
                    }
                }
                Some((status, took))
            }
        }
    })
    .await;
    let held = held
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    anyhow::ensure!(
        held.len() == seats,
        "only {} of {seats} seats held",
        held.len()
    );
    Ok(held)
}

/// 10,000 buyers join the list at `concurrency` connections: the figures,
/// and each entry's id and buyer in the waiting list's order.
async fn join(
    target: &Arc<Target>,
    show: &str,
    ask: &Value,
    concurrency: usize,
) -> anyhow::Result<(Figures, Vec<(String, String)>)> {
    let entries = Arc::new(Mutex::new(Vec::with_capacity(ENTRIES)));
    let next = Arc::new(AtomicUsize::new(0));
    let (wall, answers) = for_duration(concurrency, SETUP_BOUND, {
        let (target, show, entries) = (target.clone(), show.to_owned(), entries.clone());
        let ask = ask.clone();
        move |_| {
            let (target, show, entries, next, ask) = (
                target.clone(),
                show.clone(),
                entries.clone(),
                next.clone(),
                ask.clone(),
            );
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed) + 1;
                if n > ENTRIES {
                    return None;
                }
                let buyer = format!("wl{n}");
                let token = target.token(&buyer, Role::Buyer);
                let path = format!("/v1/shows/{show}/waitlist");
                let (status, took, answer) = post(&target, &path, &token, &ask).await;
                if let (Some(id), Some(number)) =
                    (answer["entry_id"].as_str(), answer["number"].as_u64())
                {
                    if let Ok(mut entries) = entries.lock() {
                        entries.push((number, id.to_owned(), buyer));
                    }
                }
                Some((status, took))
            }
        }
    })
    .await;
    let mut entries = entries
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    anyhow::ensure!(
        entries.len() == ENTRIES,
        "{} of {ENTRIES} joined",
        entries.len()
    );
    entries.sort();
    let figures = Figures::from_latencies(
        "waiting-list joins (sold-out show)",
        target.store,
        &answers,
        wall,
    );
    Ok((
        figures,
        entries
            .into_iter()
            .map(|(_, id, buyer)| (id, buyer))
            .collect(),
    ))
}

/// The offer instant of each offered seat, from the waiting list as the admin
/// reads it (an offer's hold lasts `OFFER_SECONDS` from it).
async fn offers(target: &Target, show: &str) -> anyhow::Result<Vec<(String, DateTime<Utc>)>> {
    let admin = target.token("bench-admin", Role::Admin);
    let list = admin_waitlist(target, show).await?;
    let mut offered = Vec::new();
    for entry in list["entries"].as_array().into_iter().flatten() {
        let (Some(seat), Some(hold_id)) = (entry["seats"][0].as_str(), entry["hold_id"].as_str())
        else {
            continue;
        };
        // The hold as placed (a purchase keeps its expiry).
        let hold: Value = target
            .client
            .get(format!("{}/v1/holds/{hold_id}", target.base))
            .bearer_auth(&admin)
            .send()
            .await?
            .json()
            .await?;
        if let Some(until) = hold["expires_at"]
            .as_str()
            .and_then(|s| s.parse::<DateTime<Utc>>().ok())
        {
            offered.push((
                seat.to_owned(),
                until - chrono::Duration::seconds(OFFER_SECONDS),
            ));
        }
    }
    Ok(offered)
}

/// The show's waiting list as an admin reads it.
async fn admin_waitlist(target: &Target, show: &str) -> anyhow::Result<Value> {
    let admin = target.token("bench-admin", Role::Admin);
    Ok(target
        .client
        .get(format!("{}/v1/shows/{show}/waitlist", target.base))
        .bearer_auth(&admin)
        .send()
        .await?
        .json()
        .await?)
}

/// Sleeps until `JUDGED_WITHIN` after the last of `expiries`.
async fn past_the_last(expiries: impl Iterator<Item = DateTime<Utc>>) {
    let last = expiries.max().unwrap_or_else(Utc::now);
    let wait = (last - Utc::now()).to_std().unwrap_or_default() + JUDGED_WITHIN;
    tokio::time::sleep(wait).await;
}

/// Latencies from each seat's freeing to its offer.
fn latencies(
    freed: &[(String, DateTime<Utc>)],
    offered: &[(String, DateTime<Utc>)],
) -> Vec<(u16, Duration)> {
    offered
        .iter()
        .filter_map(|(seat, at)| {
            let (_, from) = freed.iter().find(|(s, _)| s == seat)?;
            Some((200, (*at - *from).to_std().unwrap_or_default()))
        })
        .collect()
}

/// `concurrency` buyers release the holds for `duration` while `PAYERS`
/// buy the offers in the waiting list's order; then each release's offer latency.
async fn after_releases(
    target: &Arc<Target>,
    show: &str,
    held: Vec<(String, String, DateTime<Utc>)>,
    entries: &[(String, String)],
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let held = Arc::new(held);
    let freed = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + duration;
    let entries = Arc::new(entries.to_vec());
    let mut payers = tokio::task::JoinSet::new();
    for payer in 0..PAYERS {
        let (target, entries) = (target.clone(), entries.clone());
        payers.spawn(async move { pay_offers(&target, &entries, payer, deadline).await });
    }
    let (wall, _) = for_duration(concurrency, duration, {
        let (target, held, freed) = (target.clone(), held.clone(), freed.clone());
        move |_| {
            let (target, held, freed, next) =
                (target.clone(), held.clone(), freed.clone(), next.clone());
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let (seat, hold_id, _) = held.get(n)?;
                let n1 = seat.trim_start_matches('S');
                let token = target.token(&format!("holder{n1}"), Role::Buyer);
                let started = Instant::now();
                let at = Utc::now();
                let status = target
                    .client
                    .delete(format!("{}/v1/holds/{hold_id}", target.base))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                if let Ok(mut freed) = freed.lock() {
                    freed.push((seat.clone(), at));
                }
                Some((status, started.elapsed()))
            }
        }
    })
    .await;
    let mut bought = 0;
    while let Some(paid) = payers.join_next().await {
        bought += paid.unwrap_or(0);
    }
    // The last releases' offers: one judgement later at most.
    tokio::time::sleep(JUDGED_WITHIN).await;
    let freed = freed
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .clone();
    let offered = offers(target, show).await?;
    let answers = latencies(&freed, &offered);
    let mut figures = Figures::from_latencies(
        "offer latency after a release (10,000 waiting)",
        target.store,
        &answers,
        wall,
    );
    figures.note = format!(
        "{} releases by {concurrency} buyers in {:.1} s, {} offered, {bought} offers bought meanwhile",
        freed.len(),
        wall.as_secs_f64(),
        answers.len()
    );
    Ok(figures)
}

/// One payer: the entries `payer`, `payer + PAYERS`, ... in the waiting list's order,
/// each bought once offered, until `deadline`. How many it bought.
async fn pay_offers(
    target: &Target,
    entries: &[(String, String)],
    payer: usize,
    deadline: Instant,
) -> usize {
    let mut bought = 0;
    for (entry_id, buyer) in entries.iter().skip(payer).step_by(PAYERS) {
        let token = target.token(buyer, Role::Buyer);
        let hold_id = loop {
            if Instant::now() >= deadline {
                return bought;
            }
            let entry: Value = match target
                .client
                .get(format!("{}/v1/waitlist/{entry_id}", target.base))
                .bearer_auth(&token)
                .send()
                .await
            {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(_) => Value::Null,
            };
            match entry["hold_id"].as_str() {
                Some(id) => break id.to_owned(),
                None => tokio::time::sleep(POLL_EVERY).await,
            }
        };
        let path = format!("/v1/holds/{hold_id}/purchase");
        let (status, _, _) = post(
            target,
            &path,
            &token,
            &json!({"payment_method": "pm_sim_ok"}),
        )
        .await;
        if status == 201 {
            bought += 1;
        }
    }
    bought
}

/// A sold-out show whose holds expire with 10,000 waiting: each seat's
/// offer after its hold's `expires_at`.
async fn after_expiry(target: &Arc<Target>, concurrency: usize) -> anyhow::Result<Figures> {
    let show = "wl-expiry";
    let held = sold_out(target, show, EXPIRING, EXPIRING_TTL_SECONDS, concurrency).await?;
    let (joins, _) = join(target, show, &json!({"quantity": 1}), concurrency).await?;
    past_the_last(held.iter().map(|(_, _, until)| *until)).await;
    let freed: Vec<(String, DateTime<Utc>)> = held
        .iter()
        .map(|(seat, _, until)| (seat.clone(), *until))
        .collect();
    let offered = offers(target, show).await?;
    let answers = latencies(&freed, &offered);
    let mut figures = Figures::from_latencies(
        "offer latency after an expiry (10,000 waiting)",
        target.store,
        &answers,
        Duration::from_secs(EXPIRING_TTL_SECONDS as u64),
    );
    figures.note = format!(
        "{} holds expiring; {} offered; joined at {:.0}/s before the expiry",
        held.len(),
        answers.len(),
        joins.per_second
    );
    Ok(figures)
}

/// A pool of `EXPIRING` places sold out (a place a hold) whose holds
/// expire with 10,000 waiting for one place each: places are alike, so the
/// n-th place freed is paired with the n-th offer made.
async fn after_pool_expiry(target: &Arc<Target>, concurrency: usize) -> anyhow::Result<Figures> {
    let show = "wl-pool-expiry";
    let body = json!({
        "name": show, "starts_at": "2027-06-01T20:00:00Z",
        "hold_ttl_seconds": EXPIRING_TTL_SECONDS,
        "pools": [{"pool_id": "floor", "capacity": EXPIRING, "price_cents": 3000}],
        "waitlist": {"offer_seconds": OFFER_SECONDS}
    });
    put_show(target, show, body).await?;
    let mut freed = Vec::with_capacity(EXPIRING);
    for n in 1..=EXPIRING {
        let token = target.token(&format!("pool-holder{n}"), Role::Buyer);
        let path = format!("/v1/shows/{show}/holds");
        let (_, _, answer) = post(
            target,
            &path,
            &token,
            &json!({"pool_id": "floor", "quantity": 1}),
        )
        .await;
        let until = answer["expires_at"].as_str().and_then(|s| s.parse().ok());
        freed.push(until.ok_or_else(|| anyhow::anyhow!("pool hold {n}: {answer}"))?);
    }
    let ask = json!({"pool_id": "floor", "quantity": 1});
    let (joins, _) = join(target, show, &ask, concurrency).await?;
    past_the_last(freed.iter().copied()).await;
    let list = admin_waitlist(target, show).await?;
    // An offer's placement: its expiry minus `offer_seconds`.
    let mut offered: Vec<DateTime<Utc>> = (list["entries"].as_array().into_iter().flatten())
        .filter_map(|e| e["expires_at"].as_str()?.parse::<DateTime<Utc>>().ok())
        .map(|until| until - chrono::Duration::seconds(OFFER_SECONDS))
        .collect();
    offered.sort();
    freed.sort();
    let answers: Vec<(u16, Duration)> = (freed.iter().zip(&offered))
        .map(|(from, at)| (200, (*at - *from).to_std().unwrap_or_default()))
        .collect();
    let mut figures = Figures::from_latencies(
        "offer latency after a pool's holds expire (10,000 waiting)",
        target.store,
        &answers,
        Duration::from_secs(EXPIRING_TTL_SECONDS as u64),
    );
    figures.note = format!(
        "{} pool holds of a place expiring; {} offered (one round an entry); joined at {:.0}/s",
        freed.len(),
        answers.len(),
        joins.per_second
    );
    Ok(figures)
}
