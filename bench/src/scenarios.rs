//! The scenarios, each measured over real HTTP.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use booking::auth::Role;
use serde_json::{json, Value};

use crate::report::{percentile, Figures};
use crate::Target;

/// Seats in the show the fixed-time hold scenarios draw from.
pub const BIG_SHOW_SEATS: usize = 100_000;

pub(crate) async fn put_show(target: &Target, show: &str, body: Value) -> anyhow::Result<()> {
    put_admin(target, &format!("/v1/shows/{show}"), &body).await
}

/// `PUT path` as an admin, which must succeed.
pub(crate) async fn put_admin(target: &Target, path: &str, body: &Value) -> anyhow::Result<()> {
    let response = target
        .client
        .put(format!("{}{path}", target.base))
        .bearer_auth(target.token("bench-admin", Role::Admin))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await?;
    anyhow::ensure!(
        response.status().is_success(),
        "PUT {path}: {}",
        response.status()
    );
    Ok(())
}

/// A show of 100,000 seats for scenarios outside this module.
/// The show `holds` places its holds on (created there if missing).
pub fn holds_show(seats_per_hold: usize) -> String {
    format!("holds{seats_per_hold}")
}

pub async fn seat_show_pub(target: &Target, show: &str) -> anyhow::Result<()> {
    seat_show(target, show, BIG_SHOW_SEATS).await
}

pub(crate) async fn seat_show(target: &Target, show: &str, seats: usize) -> anyhow::Result<()> {
    seat_show_limited(target, show, seats, None).await
}

/// A show of `seats` seats, with `max_seats_per_buyer` set when `limit` is.
async fn seat_show_limited(
    target: &Target,
    show: &str,
    seats: usize,
    limit: Option<u32>,
) -> anyhow::Result<()> {
    let mut body = seat_show_body(show, seats);
    if let Some(limit) = limit {
        body["max_seats_per_buyer"] = json!(limit);
    }
    put_show(target, show, body).await
}

/// A venue of `seats` seats `S1..=S{seats}` as `seat_show_body` lays them
/// out (sections of 1,000, one row), each at a position, in three price
/// categories by section, the body of `PUT /v1/venues/{id}`.
pub(crate) fn venue_body(seats: usize) -> Value {
    let categories = ["premium", "standard", "economy"];
    let seats: Vec<Value> = (1..=seats)
        .map(|n| {
            let section = n / 1000;
            json!({"seat_id": format!("S{n}"), "section": format!("{section}"), "row": "1",
                   "number": n, "x": (n % 1000) as f64 * 10.0, "y": section as f64 * 20.0,
                   "category": categories[section % 3]})
        })
        .collect();
    json!({"name": "bench arena", "stage": {"x": 0, "y": -100, "width": 1000, "height": 50},
           "categories": [{"category": "premium", "label": "Premium", "color": "#6a1b9a"},
                          {"category": "standard", "label": "Standard", "color": "#00695c"},
                          {"category": "economy", "label": "Economy", "color": "#1565c0"}],
           "seats": seats})
}

/// A show on venue `venue`, adult and child tickets priced in every
/// category.
pub(crate) fn venue_show_body(show: &str, venue: &str) -> Value {
    let prices: Vec<Value> = ["premium", "standard", "economy"]
        .iter()
        .zip([12000, 7500, 4500])
        .flat_map(|(category, adult)| {
            [
                json!({"category": category, "ticket_type": "adult", "price_cents": adult}),
                json!({"category": category, "ticket_type": "child", "price_cents": adult / 2}),
            ]
        })
        .collect();
    json!({"name": show, "starts_at": "2027-01-01T20:00:00Z", "hold_ttl_seconds": 7200,
           "venue_id": venue,
           "ticket_types": [{"ticket_type": "adult", "label": "Adult"}, {"ticket_type": "child", "label": "Child"}],
           "prices": prices})
}

/// `PUT /v1/venues/{venue}` with `body`.
pub(crate) async fn put_venue(target: &Target, venue: &str, body: &Value) -> anyhow::Result<()> {
    put_admin(target, &format!("/v1/venues/{venue}"), body).await
}

/// A show of 100,000 seats on a venue of its own, priced by category and
/// ticket type.
pub async fn venue_show(target: &Target, show: &str) -> anyhow::Result<()> {
    let venue = format!("{show}-venue");
    put_venue(target, &venue, &venue_body(BIG_SHOW_SEATS)).await?;
    put_show(target, show, venue_show_body(show, &venue)).await
}

/// Shows created each way by `--only create`: each creation is seconds
/// long, and three give a median without taking minutes.
pub const CREATE_RUNS: usize = 3;

/// Creating shows of 100,000 seats: inline (the baseline), a venue of
/// 100,000 seats, and shows on that venue; each timed alone, `runs` times.
pub async fn create_shows(target: &Target, runs: usize) -> anyhow::Result<Vec<Figures>> {
    let mut inline = Vec::with_capacity(runs);
    let mut venues = Vec::with_capacity(runs);
    let mut on_venue = Vec::with_capacity(runs);
    for run in 0..runs {
        let show = format!("create-inline-{run}");
        let body = seat_show_body(&show, BIG_SHOW_SEATS);
        let started = Instant::now();
        put_show(target, &show, body).await?;
        inline.push(started.elapsed());
        let venue = format!("create-venue-{run}");
        let body = venue_body(BIG_SHOW_SEATS);
        let started = Instant::now();
        put_venue(target, &venue, &body).await?;
        venues.push(started.elapsed());
        let show = format!("create-on-venue-{run}");
        let body = venue_show_body(&show, &venue);
        let started = Instant::now();
        put_show(target, &show, body).await?;
        on_venue.push(started.elapsed());
    }
    Ok([
        (
            "create a 100,000-seat show, inline seats (baseline)",
            inline,
        ),
        ("create a 100,000-seat venue", venues),
        ("create a show on a 100,000-seat venue", on_venue),
    ]
    .into_iter()
    .map(|(scenario, mut times)| {
        times.sort();
        let wall: Duration = times.iter().sum();
        Figures {
            scenario: scenario.into(),
            store: target.store.into(),
            requests: times.len(),
            ok: times.len(),
            refused: 0,
            failed: 0,
            wall_ms: wall.as_secs_f64() * 1000.0,
            per_second: times.len() as f64 / wall.as_secs_f64().max(1e-9),
            p50_ms: percentile(&times, 50.0),
            p99_ms: percentile(&times, 99.0),
            note: "one request at a time".into(),
        }
    })
    .collect())
}

/// The definition of a show of `seats` seats `S1..=S{seats}`, for
/// scenarios that add to it (a waiting room) before `put_show`.
pub(crate) fn seat_show_body(show: &str, seats: usize) -> Value {
    let seats: Vec<Value> = (1..=seats)
        .map(|n| json!({"seat_id": format!("S{n}"), "section": format!("{}", n / 1000), "row": "1", "number": n, "price_cents": 5000}))
        .collect();
    json!({"name": show, "starts_at": "2027-01-01T20:00:00Z", "hold_ttl_seconds": 7200, "seats": seats})
}

/// Sends a JSON POST; returns the status and the time it took.
pub(crate) async fn post(
    target: &Target,
    path: &str,
    token: &str,
    body: &Value,
) -> (u16, Duration, Value) {
    let started = Instant::now();
    let response = target
        .client
        .post(format!("{}{path}", target.base))
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    match response {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.json::<Value>().await.unwrap_or(Value::Null);
            (status, started.elapsed(), body)
        }
        Err(_) => (0, started.elapsed(), Value::Null),
    }
}

/// `count` requests released at once; wall time from release to the last answer.
async fn burst(
    target: &Arc<Target>,
    count: usize,
    request: impl Fn(usize) -> (String, String, Value),
) -> (Duration, Vec<(u16, Duration)>) {
    burst_over(std::slice::from_ref(target), count, request).await
}

/// [`burst`], request `i` sent to instance `i % targets.len()`.
async fn burst_over(
    targets: &[Arc<Target>],
    count: usize,
    request: impl Fn(usize) -> (String, String, Value),
) -> (Duration, Vec<(u16, Duration)>) {
    let gate = Arc::new(tokio::sync::Barrier::new(count + 1));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..count {
        let (path, token, body) = request(i);
        let (gate, target) = (gate.clone(), targets[i % targets.len()].clone());
        tasks.spawn(async move {
            gate.wait().await;
            let (status, latency, _) = post(&target, &path, &token, &body).await;
            (status, latency)
        });
    }
    gate.wait().await;
    let released = Instant::now();
    let mut answers = Vec::with_capacity(count);
    while let Some(answer) = tasks.join_next().await {
        answers.push(answer.unwrap_or((0, Duration::ZERO)));
    }
    (released.elapsed(), answers)
}

pub async fn storm(target: &Target) -> anyhow::Result<Figures> {
    const BUYERS: usize = 3_400;
    seat_show(target, "storm", 10).await?;
    let tokens: Vec<String> = (0..BUYERS)
        .map(|i| target.token(&format!("s{i}"), Role::Buyer))
        .collect();
    let target = Arc::new(target.clone());
    let (wall, answers) = burst(&target, BUYERS, |i| {
        (
            "/v1/shows/storm/holds".into(),
            tokens[i].clone(),
            json!({"seats": ["S1"]}),
        )
    })
    .await;
    let winners = answers.iter().filter(|(s, _)| *s == 201).count();
    let mut figures = Figures::from_latencies(
        "storm (3,400 buyers, one seat)",
        target.store,
        &answers,
        wall,
    );
    figures.note = format!("winners: {winners}");
    Ok(figures)
}

/// Holds of `seats_per_hold` adjacent seats at `concurrency` connections for `duration`.
pub async fn holds(
    target: &Target,
    concurrency: usize,
    duration: Duration,
    seats_per_hold: usize,
) -> anyhow::Result<Figures> {
    let show = holds_show(seats_per_hold);
    seat_show(target, &show, BIG_SHOW_SEATS).await?;
    let target = Arc::new(target.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let (wall, answers) = hold_seats(
        &target,
        &show,
        "h",
        next,
        concurrency,
        duration,
        seats_per_hold,
    )
    .await;
    let name = if seats_per_hold == 1 {
        "holds (distinct seats)".to_owned()
    } else {
        format!("multi-seat holds ({seats_per_hold} adjacent)")
    };
    Ok(Figures::from_latencies(&name, target.store, &answers, wall))
}

/// The load of `holds`: holds of `seats_per_hold` adjacent seats of `show`
/// (a show of `BIG_SHOW_SEATS` seats), taken in order from `next`, at
/// `concurrency` connections for `duration`, worker `w` holding as buyer
/// `{buyers}{w}`. Shared with scenarios that set two shows side by side
/// (`queue::admission_holds`), each show with its own `next`.
pub(crate) async fn hold_seats(
    target: &Arc<Target>,
    show: &str,
    buyers: &str,
    next: Arc<AtomicUsize>,
    concurrency: usize,
    duration: Duration,
    seats_per_hold: usize,
) -> (Duration, Vec<(u16, Duration)>) {
    for_duration(concurrency, duration, {
        let (target, show, buyers) = (target.clone(), show.to_owned(), buyers.to_owned());
        move |worker| {
            let (target, show, next) = (target.clone(), show.clone(), next.clone());
            let token = target.token(&format!("{buyers}{worker}"), Role::Buyer);
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if (n + 1) * seats_per_hold > BIG_SHOW_SEATS {
                    return None;
                }
                let seats: Vec<String> = (0..seats_per_hold)
                    .map(|k| format!("S{}", n * seats_per_hold + k + 1))
                    .collect();
                let (status, latency, _) = post(
                    &target,
                    &format!("/v1/shows/{show}/holds"),
                    &token,
                    &json!({"seats": seats}),
                )
                .await;
                Some((status, latency))
            }
        }
    })
    .await
}

/// Holds a buyer places on the per-buyer limit scenario's shows, one after
/// another, before its worker moves on to a new buyer.
const HOLDS_PER_BUYER: usize = 4;

/// The limited show's `max_seats_per_buyer`: far above [`HOLDS_PER_BUYER`],
/// so it never refuses and the scenario measures the allowance stream's
/// cost, not refusals.
const LIMIT_SEATS_PER_BUYER: u32 = 1_000;

/// One side of the per-buyer limit scenario: its show and how far it got.
struct LimitArm {
    show: String,
    /// The next seat (index) of the show.
    next: Arc<AtomicUsize>,
    /// Holds asked for by each worker on this show; its buyer is the
    /// `asked / HOLDS_PER_BUYER`-th of that worker.
    asked: Arc<Vec<AtomicUsize>>,
    wall: Duration,
    answers: Vec<(u16, Duration)>,
}

impl LimitArm {
    fn new(show: &str, concurrency: usize) -> Self {
        Self {
            show: show.to_owned(),
            next: Arc::new(AtomicUsize::new(0)),
            asked: Arc::new((0..concurrency).map(|_| AtomicUsize::new(0)).collect()),
            wall: Duration::ZERO,
            answers: Vec::new(),
        }
    }

    /// Distinct buyers that asked for a hold on this show.
    fn buyers(&self) -> usize {
        self.asked
            .iter()
            .map(|a| a.load(Ordering::Relaxed).div_ceil(HOLDS_PER_BUYER))
            .sum()
    }

    /// One-seat holds on distinct seats at `concurrency` connections for
    /// `duration`; each worker's buyer changes every `HOLDS_PER_BUYER` holds,
    /// so a buyer's holds come one after another, as from one browser.
    async fn run(&mut self, target: &Arc<Target>, concurrency: usize, duration: Duration) {
        let (wall, answers) = for_duration(concurrency, duration, {
            let (target, show) = (target.clone(), self.show.clone());
            let (next, asked) = (self.next.clone(), self.asked.clone());
            move |worker| {
                let (target, show) = (target.clone(), show.clone());
                let (next, asked) = (next.clone(), asked.clone());
                async move {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= BIG_SHOW_SEATS {
                        return None;
                    }
                    let k = asked[worker].fetch_add(1, Ordering::Relaxed);
                    let buyer = format!("{show}-{worker}-{}", k / HOLDS_PER_BUYER);
                    let token = target.token(&buyer, Role::Buyer);
                    let (status, latency, _) = post(
                        &target,
                        &format!("/v1/shows/{show}/holds"),
                        &token,
                        &json!({"seats": [format!("S{}", n + 1)]}),
                    )
                    .await;
                    Some((status, latency))
                }
            }
        })
        .await;
        self.wall += wall;
        self.answers.extend(answers);
    }
}

/// Waits (at most a minute) until the projector has caught up with the log,
/// so that one half of a comparison does not pay for the other's backlog.
pub(crate) async fn drain_projector(store: &booking::store::Store) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let checkpoint = store
            .log()
            .checkpoint(booking::rebuild::projector::PROJECTIONS_CHECKPOINT)
            .await?;
        if store.log().count_behind(&checkpoint.cursor).await? == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Holds per second on two shows identical but for `max_seats_per_buyer`
/// (absent, and [`LIMIT_SEATS_PER_BUYER`]), in the same run: the distinct-seat
/// holds scenario with many buyers, each placing [`HOLDS_PER_BUYER`] holds.
/// Each side runs `duration` in all, as two halves in the order none, limit,
/// limit, none (a drift over the run weighs on both alike), with the
/// projector drained between halves.
pub async fn limit_holds(
    target: &Target,
    store: &booking::store::Store,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Figures, Figures)> {
    let mut none = LimitArm::new("limitnone", concurrency);
    let mut limited = LimitArm::new("limit1000", concurrency);
    seat_show_limited(target, &none.show, BIG_SHOW_SEATS, None).await?;
    seat_show_limited(
        target,
        &limited.show,
        BIG_SHOW_SEATS,
        Some(LIMIT_SEATS_PER_BUYER),
    )
    .await?;
    drain_projector(store).await?;
    let target = Arc::new(target.clone());
    let half = duration / 2;
    for limit in [false, true, true, false] {
        let arm = if limit { &mut limited } else { &mut none };
        arm.run(&target, concurrency, half).await;
        drain_projector(store).await?;
    }
    let figures = |arm: &LimitArm, name: &str| {
        let mut figures = Figures::from_latencies(name, target.store, &arm.answers, arm.wall);
        figures.note = format!(
            "{} buyers, {HOLDS_PER_BUYER} holds each in turn; halves run none, limit, limit, none",
            arm.buyers()
        );
        figures
    };
    let without = figures(&none, "holds (distinct seats, no per-buyer limit)");
    let mut with = figures(
        &limited,
        "holds (distinct seats, max_seats_per_buyer 1,000)",
    );
    let ratio = with.per_second / without.per_second.max(f64::MIN_POSITIVE);
    with.note = format!(
        "{}; {ratio:.2}× the holds/s without the limit (its cost: {:.0}%)",
        with.note,
        100.0 * (1.0 - ratio)
    );
    Ok((without, with))
}

/// Hold a seat, then buy it with the simulator at its default latency.
pub async fn checkout(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let methods = Arc::new(vec!["pm_sim_ok".to_owned()]);
    let label = "checkout (hold + purchase, 50 ms simulator)";
    let payments = Payments {
        provider: "simulator",
        methods,
    };
    checkout_with(target, concurrency, duration, "checkout", payments, label).await
}

/// How a checkout scenario pays: through which provider, worker `w` with
/// `methods[w % len]`.
pub struct Payments {
    pub provider: &'static str,
    pub methods: Arc<Vec<String>>,
}

/// The sum of the service's metric lines that start with `series` and
/// contain `label`. The recorder is the process's: instances started in one
/// bench process count together.
pub(crate) async fn metric_sum(target: &Target, series: &str, label: &str) -> anyhow::Result<f64> {
    let text = target
        .client
        .get(format!("{}/metrics", target.base))
        .send()
        .await?
        .text()
        .await?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with(series) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// Seconds the service spent in calls to `provider`, from its metrics.
async fn provider_seconds(target: &Target, provider: &str) -> anyhow::Result<f64> {
    let label = format!("provider=\"{provider}\"");
    metric_sum(target, "payment_latency_seconds_sum{", &label).await
}

/// Appends refused because a stream had moved since the decision (the
/// command decided again), every command's.
async fn append_conflicts(target: &Target) -> anyhow::Result<f64> {
    metric_sum(target, "append_conflicts_total", "").await
}

/// Hold a seat, then buy it. The note gives the purchase's mean latency,
/// the part of it spent in calls to the provider, and the rest: the
/// service's own time a purchase.
pub async fn checkout_with(
    target: &Target,
    concurrency: usize,
    duration: Duration,
    show: &'static str,
    payments: Payments,
    label: &str,
) -> anyhow::Result<Figures> {
    seat_show(target, show, BIG_SHOW_SEATS).await?;
    let (provider, methods) = (payments.provider, payments.methods);
    let provider_before = provider_seconds(target, provider).await?;
    let next = Arc::new(AtomicUsize::new(0));
    let purchase_us = Arc::new(AtomicUsize::new(0));
    let purchases = Arc::new(AtomicUsize::new(0));
    let target = Arc::new(target.clone());
    let (wall, answers) = for_duration(concurrency, duration, {
        let target = target.clone();
        let (purchase_us, purchases) = (purchase_us.clone(), purchases.clone());
        move |worker| {
            let (target, next, methods) = (target.clone(), next.clone(), methods.clone());
            let (purchase_us, purchases) = (purchase_us.clone(), purchases.clone());
            let token = target.token(&format!("c{worker}"), Role::Buyer);
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= BIG_SHOW_SEATS {
                    return None;
                }
                let started = Instant::now();
                let (status, _, hold) = post(
                    &target,
                    &format!("/v1/shows/{show}/holds"),
                    &token,
                    &json!({"seats": [format!("S{}", n + 1)]}),
                )
                .await;
                if status != 201 {
                    return Some((status, started.elapsed()));
                }
                let hold_id = hold["hold_id"].as_str().unwrap_or_default();
                let method = &methods[worker % methods.len()];
                let (status, took, _) = post(
                    &target,
                    &format!("/v1/holds/{hold_id}/purchase"),
                    &token,
                    &json!({"payment_method": method}),
                )
                .await;
                if status == 201 {
                    purchase_us.fetch_add(took.as_micros() as usize, Ordering::Relaxed);
                    purchases.fetch_add(1, Ordering::Relaxed);
                }
                Some((status, started.elapsed()))
            }
        }
    })
    .await;
    let bought = purchases.load(Ordering::Relaxed).max(1) as f64;
    let mean_purchase_ms = purchase_us.load(Ordering::Relaxed) as f64 / bought / 1000.0;
    let at_provider_ms =
        (provider_seconds(&target, provider).await? - provider_before) * 1000.0 / bought;
    let mut figures = Figures::from_latencies(label, target.store, &answers, wall);
    figures.note = format!(
        "purchase alone: mean {mean_purchase_ms:.1} ms, of which {at_provider_ms:.1} ms in calls to \
         the provider ({provider}): the service's own time {:.1} ms a purchase",
        mean_purchase_ms - at_provider_ms
    );
    Ok(figures)
}

pub async fn ga_storm(target: &Target, shards: Option<u32>) -> anyhow::Result<Figures> {
    const BUYERS: usize = 5_000;
    const CAPACITY: u32 = 500;
    let show = format!("ga{}", shards.map_or("default".into(), |s| s.to_string()));
    let mut pool = json!({"pool_id": "floor", "capacity": CAPACITY, "price_cents": 3000});
    if let Some(shards) = shards {
        pool["shards"] = json!(shards);
    }
    put_show(
        target,
        &show,
        json!({"name": show, "starts_at": "2027-01-01T20:00:00Z", "hold_ttl_seconds": 7200, "pools": [pool]}),
    )
    .await?;
    let tokens: Vec<String> = (0..BUYERS)
        .map(|i| target.token(&format!("g{i}"), Role::Buyer))
        .collect();
    let target = Arc::new(target.clone());
    let path = format!("/v1/shows/{show}/holds");
    let (wall, answers) = burst(&target, BUYERS, |i| {
        (
            path.clone(),
            tokens[i].clone(),
            json!({"pool_id": "floor", "quantity": 1}),
        )
    })
    .await;
    let winners = answers.iter().filter(|(s, _)| *s == 201).count();
    let name = match shards {
        None => format!(
            "GA storm (5,000 buyers, 500 places, {} shards)",
            domain::pool::default_shards(CAPACITY)
        ),
        Some(n) => format!("GA storm (5,000 buyers, 500 places, {n} shard)"),
    };
    let mut figures = Figures::from_latencies(&name, target.store, &answers, wall);
    figures.per_second = winners as f64 / wall.as_secs_f64();
    figures.note = format!("winners: {winners}; per second = holds placed per second");
    Ok(figures)
}

/// The HTTP floor: `GET /healthz` (no database, no token) at the same
/// concurrency. No scenario can answer faster than this on this machine
/// with this load generator; it bounds every ratio to the raw-SQL baseline.
pub async fn http_floor(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let target = Arc::new(target.clone());
    let (wall, answers) = for_duration(
        concurrency,
        duration,
        get_worker(target.clone(), "/healthz"),
    )
    .await;
    Ok(Figures::from_latencies(
        "HTTP floor (GET /healthz)",
        target.store,
        &answers,
        wall,
    ))
}

/// One request's answer, as a boxed future a worker returns.
pub(crate) type Attempt =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<(u16, Duration)>> + Send>>;

/// A worker that GETs `path` and reads the whole body.
fn get_worker(
    target: Arc<Target>,
    path: &'static str,
) -> impl Fn(usize) -> Attempt + Clone + Send + Sync + 'static {
    move |_| {
        let target = target.clone();
        Box::pin(async move {
            let started = Instant::now();
            let status = match target
                .client
                .get(format!("{}{path}", target.base))
                .send()
                .await
            {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let _ = r.bytes().await;
                    status
                }
                Err(_) => 0,
            };
            Some((status, started.elapsed()))
        })
    }
}

/// Availability of a 20,000-seat show, read alone, then while holds run in
/// the background.
/// `concurrency` writers holding seats `S1..=S{seats}` of `show` one at a
/// time, each seat once, for `duration` (the load the availability
/// scenarios read under).
pub(crate) async fn writers(
    target: Arc<Target>,
    show: String,
    seats: usize,
    concurrency: usize,
    duration: Duration,
) -> (Duration, Vec<(u16, Duration)>) {
    let next = Arc::new(AtomicUsize::new(0));
    let path = format!("/v1/shows/{show}/holds");
    for_duration(concurrency, duration, move |worker| {
        let (target, next, path) = (target.clone(), next.clone(), path.clone());
        let token = target.token(&format!("aw{worker}"), Role::Buyer);
        async move {
            let n = next.fetch_add(1, Ordering::Relaxed);
            if n >= seats {
                return None;
            }
            let (status, latency, _) = post(
                &target,
                &path,
                &token,
                &json!({"seats": [format!("S{}", n + 1)]}),
            )
            .await;
            Some((status, latency))
        }
    })
    .await
}

pub async fn availability(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Figures, Figures)> {
    const SEATS: usize = 20_000;
    const READERS: usize = 4;
    seat_show(target, "avail", SEATS).await?;
    let target = Arc::new(target.clone());
    let read = get_worker(target.clone(), "/v1/shows/avail/availability");
    let (idle_wall, idle_reads) = for_duration(READERS, duration / 2, read.clone()).await;
    let mut idle = Figures::from_latencies(
        "availability of 20,000 seats, no other load",
        target.store,
        &idle_reads,
        idle_wall,
    );
    idle.note = format!("{READERS} readers");
    let background = tokio::spawn(writers(
        target.clone(),
        "avail".into(),
        SEATS,
        concurrency,
        duration,
    ));
    let (wall, reads) = for_duration(READERS, duration, read).await;
    let (_, holds) = background.await?;
    let mut loaded = Figures::from_latencies(
        "availability of 20,000 seats under hold load",
        target.store,
        &reads,
        wall,
    );
    let held = holds.iter().filter(|(s, _)| *s == 201).count();
    let other = holds.len() - held;
    loaded.note = format!(
        "{READERS} readers; {held} holds placed meanwhile by {concurrency} writers ({other} other answers)"
    );
    Ok((idle, loaded))
}

/// Availability of a 100,000-seat show read with `Accept-Encoding: gzip`:
/// alone, then while `concurrency` writers place holds on it. The note gives
/// the bytes on the wire (the client does not decode: it has no gzip).
pub async fn availability_large(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(Figures, Figures)> {
    const READERS: usize = 4;
    let show = "avail100k";
    seat_show(target, show, BIG_SHOW_SEATS).await?;
    let target = Arc::new(target.clone());
    let wire = Arc::new(std::sync::Mutex::new(Vec::<usize>::new()));
    let read = {
        let (target, wire) = (target.clone(), wire.clone());
        move |_| {
            let (target, wire) = (target.clone(), wire.clone());
            async move {
                let started = Instant::now();
                let status = match target
                    .client
                    .get(format!("{}/v1/shows/{show}/availability", target.base))
                    .header("accept-encoding", "gzip")
                    .send()
                    .await
                {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let bytes = r.bytes().await.map_or(0, |b| b.len());
                        wire.lock().unwrap_or_else(|p| p.into_inner()).push(bytes);
                        status
                    }
                    Err(_) => 0,
                };
                Some((status, started.elapsed()))
            }
        }
    };
    let bytes_note = |wire: &std::sync::Mutex<Vec<usize>>| {
        let mut sizes = std::mem::take(&mut *wire.lock().unwrap_or_else(|p| p.into_inner()));
        sizes.sort_unstable();
        let median = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
        let max = sizes.last().copied().unwrap_or(0);
        format!("{READERS} readers, gzip; {median} bytes on the wire (median), {max} max")
    };
    let (idle_wall, idle_reads) = for_duration(READERS, duration / 2, read.clone()).await;
    let mut idle = Figures::from_latencies(
        "availability of 100,000 seats (gzip), no other load",
        target.store,
        &idle_reads,
        idle_wall,
    );
    idle.note = bytes_note(&wire);
    let background = tokio::spawn(writers(
        target.clone(),
        show.to_string(),
        BIG_SHOW_SEATS,
        concurrency,
        duration,
    ));
    let (wall, reads) = for_duration(READERS, duration, read).await;
    let (_, holds) = background.await?;
    let mut loaded = Figures::from_latencies(
        "availability of 100,000 seats (gzip) under hold load",
        target.store,
        &reads,
        wall,
    );
    let held = holds.iter().filter(|(s, _)| *s == 201).count();
    loaded.note = format!(
        "{}; {held} holds placed meanwhile by {concurrency} writers",
        bytes_note(&wire)
    );
    Ok((idle, loaded))
}

/// Runs `concurrency` workers, each calling its request again and again
/// until `duration` has passed (or it returns `None`).
pub(crate) async fn for_duration<F, Fut>(
    concurrency: usize,
    duration: Duration,
    make: F,
) -> (Duration, Vec<(u16, Duration)>)
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<(u16, Duration)>> + Send + 'static,
{
    let make = Arc::new(make);
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let make = make.clone();
        tasks.spawn(async move {
            let mut answers = Vec::new();
            while Instant::now() < deadline {
                match make(worker).await {
                    Some(answer) => answers.push(answer),
                    None => break,
                }
            }
            answers
        });
    }
    let mut all = Vec::new();
    while let Some(answers) = tasks.join_next().await {
        all.extend(answers.unwrap_or_default());
    }
    (started.elapsed(), all)
}

/// Seats of the show the replay log is written for; every seat gets
/// `events / REPLAY_SEATS` events (hold, release, hold, ...).
const REPLAY_SEATS: usize = 100_000;

/// Rebuilds every projection from a log of `events` events (written
/// directly by SQL, as a long onsale would have left it) and measures events
/// per second.
pub async fn replay(
    target: &Target,
    store: &booking::store::Store,
    events: usize,
) -> anyhow::Result<Figures> {
    seat_show(target, "replay", REPLAY_SEATS).await?;
    let per_seat = (events / REPLAY_SEATS).max(1) as i64;
    let hold_id = |seat: &str, k: &str| -> String {
        match store.kind() {
            booking::store::StoreKind::Postgres => {
                format!("(lpad(to_hex({seat}), 8, '0') || '-0000-4000-8000-' || lpad(to_hex({k}), 12, '0'))")
            }
            booking::store::StoreKind::Sqlite => {
                format!("printf('%08x-0000-4000-8000-%012x', {seat}, {k})")
            }
        }
    };
    let sql = match store.kind() {
        booking::store::StoreKind::Postgres => format!(
            "INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id) \
             SELECT 'Seat', 'replay/S' || s, k, CASE WHEN k % 2 = 1 THEN 'HoldPlaced' ELSE 'HoldReleased' END, '1.0', \
               CASE WHEN k % 2 = 1 \
                 THEN jsonb_build_object('HoldPlaced', jsonb_build_object('hold_id', {placed}, 'buyer', 'b', 'expires_at', '2030-01-01T00:00:00Z')) \
                 ELSE jsonb_build_object('HoldReleased', jsonb_build_object('hold_id', {released})) END, \
               '{{}}'::jsonb, 0, 'replay' \
             FROM generate_series(1, {per_seat}) k, generate_series(1, {REPLAY_SEATS}) s ORDER BY k, s",
            placed = hold_id("s", "k"),
            released = hold_id("s", "k - 1"),
        ),
        booking::store::StoreKind::Sqlite => format!(
            "WITH RECURSIVE seat(s) AS (SELECT 1 UNION ALL SELECT s + 1 FROM seat WHERE s < {REPLAY_SEATS}), \
                           step(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM step WHERE k < {per_seat}) \
             INSERT INTO events (aggregate_type, aggregate_id, sequence, event_type, event_version, payload, metadata, recorded_at_us, show_id) \
             SELECT 'Seat', 'replay/S' || s, k, CASE WHEN k % 2 = 1 THEN 'HoldPlaced' ELSE 'HoldReleased' END, '1.0', \
               CASE WHEN k % 2 = 1 \
                 THEN json_object('HoldPlaced', json_object('hold_id', {placed}, 'buyer', 'b', 'expires_at', '2030-01-01T00:00:00Z')) \
                 ELSE json_object('HoldReleased', json_object('hold_id', {released})) END, \
               '{{}}', 0, 'replay' \
             FROM step, seat ORDER BY k, s",
            placed = hold_id("s", "k"),
            released = hold_id("s", "k - 1"),
        ),
    };
    store.database().execute_raw(&sql).await?;
    // The log is written behind the service's back, as no command writes:
    // its events have no rows, and the projector's checkpoint stays at 0.
    // Left so, the service's projector would fold the same events beside
    // the replay (and write their rows), and the figure would be of the
    // two; commands' appends leave it at the head, so it goes there.
    store
        .database()
        .execute_raw(&format!(
            "UPDATE projector_checkpoints SET position = (SELECT MAX(position) FROM events) \
             WHERE name = '{}'",
            booking::rebuild::projector::PROJECTIONS_CHECKPOINT
        ))
        .await?;
    let total = store.log().count_events().await? as usize;
    let started = Instant::now();
    let catalog = booking::catalog::ShowCatalog::new(domain::money::Currency::EUR, store.shows());
    let report = booking::rebuild::replay::replay(
        &store.log(),
        &store.projections(),
        &catalog,
        &booking::store::Projection::ALL,
    )
    .await?;
    let wall = started.elapsed();
    let mut figures = Figures::from_latencies("replay (all projections)", target.store, &[], wall);
    figures.requests = report.events;
    figures.ok = report.events;
    figures.per_second = report.events as f64 / wall.as_secs_f64();
    figures.note = format!(
        "{total} events in the log, {} write statements; fold while commands go on {} ms, \
         write phase {} ms; per second = events replayed per second",
        report.batches, report.online_ms, report.quiesced_ms
    );
    Ok(figures)
}

/// Samples how far the projector's checkpoint is behind the head of the log
/// every 50 ms for `duration`: (max, mean), in events.
pub async fn sample_lag(
    store: Arc<booking::store::Store>,
    duration: Duration,
) -> anyhow::Result<(i64, f64)> {
    let deadline = Instant::now() + duration;
    let mut samples = Vec::new();
    while Instant::now() < deadline {
        let checkpoint = store
            .log()
            .checkpoint(booking::rebuild::projector::PROJECTIONS_CHECKPOINT)
            .await?;
        samples.push(store.log().count_behind(&checkpoint.cursor).await?);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let max = samples.iter().copied().max().unwrap_or(0);
    let mean = samples.iter().sum::<i64>() as f64 / samples.len().max(1) as f64;
    Ok((max, mean))
}

/// Best available under a storm: 2,000 buyers ask for 2 seats each at once
/// on a 5,000-seat show (5 sections of 40 rows of 25). Reports the holds
/// placed and the single seats left stranded: free seats whose neighbours
/// in their row (numbers one below and above) are both non-free or walls,
/// counted from the final availability (and that checked against the
/// availability computed from the log, and against the holds answered).
/// 2,000 pairs fit without stranding any seat (11 pairs a row leave a block
/// of 3), so any stranded seat is one the choices under contention left.
/// The buyers are spread over `targets` (instances of the service on one
/// database) in turn, on a show named `show` of its own; the note counts
/// the appends that met a moved stream and were decided again.
pub async fn best_storm(targets: &[&Target], show: &str) -> anyhow::Result<Figures> {
    const BUYERS: usize = 2_000;
    const SECTIONS: [&str; 5] = ["A", "B", "C", "D", "E"];
    const ROWS: u32 = 40;
    const PER_ROW: u32 = 25;
    let Some(&target) = targets.first() else {
        anyhow::bail!("a storm needs an instance");
    };
    let seats: Vec<Value> = SECTIONS
        .iter()
        .flat_map(|section| {
            (1..=ROWS).flat_map(move |row| {
                (1..=PER_ROW).map(move |n| {
                    json!({"seat_id": format!("{section}-{row}-{n}"), "section": section,
                           "row": row.to_string(), "number": n, "price_cents": 5000})
                })
            })
        })
        .collect();
    put_show(
        target,
        show,
        json!({"name": show, "starts_at": "2027-01-01T20:00:00Z", "hold_ttl_seconds": 7200, "seats": seats}),
    )
    .await?;
    let tokens: Vec<String> = (0..BUYERS)
        .map(|i| target.token(&format!("b{i}"), Role::Buyer))
        .collect();
    let instances: Vec<Arc<Target>> = targets.iter().map(|t| Arc::new((*t).clone())).collect();
    let conflicts_before = append_conflicts(target).await?;
    let (wall, answers) = burst_over(&instances, BUYERS, |i| {
        (
            format!("/v1/shows/{show}/holds"),
            tokens[i].clone(),
            json!({"best_available": {"quantity": 2}}),
        )
    })
    .await;
    let target = instances[0].clone();
    let conflicts = append_conflicts(&target).await? - conflicts_before;
    let placed = answers.iter().filter(|(s, _)| *s == 201).count();
    // The instance's availability (read your writes: every answered hold is
    // in it), and the same computed from the log, which must agree.
    let live = seat_statuses(&target, show, None).await?;
    let as_of = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let logged = seat_statuses(&target, show, Some(&as_of)).await?;
    let expected = SECTIONS.len() * (ROWS * PER_ROW) as usize;
    anyhow::ensure!(
        live.len() == expected && logged.len() == expected,
        "availability of {show}: {} seats live, {} from the log, {expected} in the show",
        live.len(),
        logged.len()
    );
    // Disagreements are reported with the figures, not fatal: they are findings.
    let mut odd = Vec::new();
    let differing = live
        .iter()
        .filter(|(id, s)| logged.get(*id) != Some(*s))
        .count();
    if differing > 0 {
        odd.push(format!(
            "the instance and the log disagree on {differing} seats"
        ));
    }
    let count = |status: &str| live.values().filter(|s| *s == status).count();
    let (free, held) = (count("available"), count("held"));
    if held != 2 * placed || free + held != expected {
        odd.push(format!(
            "{held} seats held and {free} free after {placed} holds of 2"
        ));
    }
    let is_free = |section: &str, row: u32, n: u32| {
        (1..=PER_ROW).contains(&n)
            && live
                .get(&format!("{section}-{row}-{n}"))
                .map(String::as_str)
                == Some("available")
    };
    let mut stranded = 0;
    for section in SECTIONS {
        for row in 1..=ROWS {
            stranded += (1..=PER_ROW)
                .filter(|&n| {
                    is_free(section, row, n)
                        && !is_free(section, row, n - 1)
                        && !is_free(section, row, n + 1)
                })
                .count();
        }
    }
    let scenario = match targets.len() {
        1 => "best available storm (2,000 buyers x 2, 5,000 seats)".to_owned(),
        n => format!("best available storm over {n} instances (2,000 buyers x 2, 5,000 seats)"),
    };
    let mut figures = Figures::from_latencies(&scenario, target.store, &answers, wall);
    figures.note = format!(
        "holds placed: {placed}; free seats left: {free}; stranded single seats: {stranded} \
         (counted from the final availability); {conflicts} appends refused at a moved stream \
         and decided again"
    );
    if odd.is_empty() {
        figures.note.push_str("; the log's availability agrees");
    } else {
        figures.note = format!("{}; ODD: {}", figures.note, odd.join("; "));
    }
    Ok(figures)
}

/// Webhook delivery under a checkout load: one fast endpoint (a receiver on
/// 127.0.0.1 that answers 204 at once) hears `booking.confirmed` while
/// `concurrency` buyers check out for `duration`. Latency figures are the
/// delivery lag, from the purchase's 201 to the receiver having it;
/// `per_second` is deliveries per second, from the first to the last.
pub async fn webhooks(
    target: &Target,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    use std::collections::HashMap;
    use std::sync::Mutex;

    type Heard = Arc<Mutex<HashMap<String, Instant>>>;
    async fn receive(
        axum::extract::State(heard): axum::extract::State<Heard>,
        body: axum::body::Bytes,
    ) -> axum::http::StatusCode {
        let at = Instant::now();
        let booking = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|event| event["data"]["booking_id"].as_str().map(str::to_owned));
        if let Some(booking) = booking {
            heard
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(booking)
                .or_insert(at);
        }
        axum::http::StatusCode::NO_CONTENT
    }
    let heard: Heard = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let receiver_url = format!("http://{}/hooks", listener.local_addr()?);
    let app = axum::Router::new()
        .route("/hooks", axum::routing::post(receive))
        .with_state(heard.clone());
    let receiver = tokio::spawn(async move { axum::serve(listener, app).await });

    let (status, _, endpoint) = post(
        target,
        "/v1/webhooks",
        &target.token("bench-admin", Role::Admin),
        &json!({"url": receiver_url, "events": ["booking.confirmed"]}),
    )
    .await;
    anyhow::ensure!(status == 201, "register the endpoint: {status}");
    let webhook_id = endpoint["webhook_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();

    seat_show(target, "hooked", BIG_SHOW_SEATS).await?;
    let confirmed: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let target = Arc::new(target.clone());
    let (load_wall, _) = for_duration(concurrency, duration, {
        let (target, confirmed) = (target.clone(), confirmed.clone());
        move |worker| {
            let (target, next, confirmed) = (target.clone(), next.clone(), confirmed.clone());
            let token = target.token(&format!("h{worker}"), Role::Buyer);
            async move {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= BIG_SHOW_SEATS {
                    return None;
                }
                let (status, latency, hold) = post(
                    &target,
                    "/v1/shows/hooked/holds",
                    &token,
                    &json!({"seats": [format!("S{}", n + 1)]}),
                )
                .await;
                if status != 201 {
                    return Some((status, latency));
                }
                let hold_id = hold["hold_id"].as_str().unwrap_or_default();
                let (status, latency, booking) = post(
                    &target,
                    &format!("/v1/holds/{hold_id}/purchase"),
                    &token,
                    &json!({"payment_method": "pm_sim_ok"}),
                )
                .await;
                if status == 201 {
                    let at = Instant::now();
                    if let Some(id) = booking["booking_id"].as_str() {
                        confirmed
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((id.to_owned(), at));
                    }
                }
                Some((status, latency))
            }
        }
    })
    .await;

    // Every confirmed booking heard, within a minute of the load's end.
    let confirmed = confirmed.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let missing = {
            let heard = heard.lock().unwrap_or_else(|p| p.into_inner());
            confirmed
                .iter()
                .filter(|(id, _)| !heard.contains_key(id))
                .count()
        };
        if missing == 0 {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{missing} of {} bookings not delivered a minute after the load",
            confirmed.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let heard = heard.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let lags: Vec<(u16, Duration)> = confirmed
        .iter()
        .filter_map(|(id, answered)| {
            heard
                .get(id)
                .map(|at| (200, at.saturating_duration_since(*answered)))
        })
        .collect();
    let first = heard.values().min().copied();
    let last = heard.values().max().copied();
    let span = match (first, last) {
        (Some(first), Some(last)) => last.saturating_duration_since(first),
        _ => Duration::ZERO,
    };
    let mut figures = Figures::from_latencies(
        "webhooks (delivery lag while buyers check out)",
        target.store,
        &lags,
        span.max(Duration::from_millis(1)),
    );
    figures.note = format!(
        "{} bookings in {:.1} s of load, each delivered; per_second is deliveries/s to one endpoint",
        confirmed.len(),
        load_wall.as_secs_f64()
    );
    // The endpoint goes, so later scenarios send nothing.
    let _ = target
        .client
        .delete(format!("{}/v1/webhooks/{webhook_id}", target.base))
        .bearer_auth(target.token("bench-admin", Role::Admin))
        .send()
        .await;
    receiver.abort();
    Ok(figures)
}

/// Seat id to status, from `GET /v1/shows/{show}/availability` (at `as_of`,
/// computed from the log, when given; that needs an admin token).
async fn seat_statuses(
    target: &Target,
    show: &str,
    as_of: Option<&str>,
) -> anyhow::Result<std::collections::HashMap<String, String>> {
    let url = format!("{}/v1/shows/{show}/availability", target.base);
    let request = match as_of {
        // An RFC 3339 time in UTC ("Z", no "+"): nothing to escape.
        Some(as_of) => target
            .client
            .get(format!("{url}?as_of={as_of}"))
            .bearer_auth(target.token("bench-admin", Role::Admin)),
        None => target.client.get(url),
    };
    let response = request.send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "availability of {show} (as_of {as_of:?}): {}",
        response.status()
    );
    let availability: Value = response.json().await?;
    let seats = availability["seats"]
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("availability of {show}: no seats array"))?;
    seats
        .iter()
        .map(
            |seat| match (seat["seat_id"].as_str(), seat["status"].as_str()) {
                (Some(id), Some(status)) => Ok((id.to_owned(), status.to_owned())),
                _ => Err(anyhow::anyhow!(
                    "availability of {show}: a seat without id or status"
                )),
            },
        )
        .collect()
}
