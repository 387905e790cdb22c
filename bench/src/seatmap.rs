//! The seat map in headless Chromium (`--only seatmap`): how long a
//! 20,000-seat page takes to draw, and how soon a hold shows on an open
//! page. Two shows of 20,000 seats side by side in one run: one on a venue
//! (40 sections of 25 rows of 20 seats, with coordinates: drawn as the
//! chart) and one without coordinates (drawn as the grid, the baseline).
//!
//! Chromium is driven over WebDriver (Debian's `chromedriver`) with plain
//! HTTP requests. Every time is read in the page, on its own clock
//! (`performance.now()`, which counts from the navigation's start):
//!
//! - draw: navigation start to `data-drawn-at`, which the page sets after
//!   the frame that drew every seat (style, layout and paint done), with
//!   the browser's cache off (the show's JSON is fetched each time); also
//!   when the show's JSON had arrived, and when the first availability
//!   snapshot was applied (`data-live-at`);
//! - live repaint: the page itself sends a hold (another buyer's, with
//!   `fetch`) for a seat a `MutationObserver` watches; the time from the
//!   201's arrival to the seat's `data-status` changing, and to the next
//!   animation frame after it. Negative when the stream's change reached
//!   the page before the 201 did.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use booking::auth::Role;
use serde_json::{json, Value};

use crate::report::Figures;
use crate::scenarios::put_admin;
use crate::Target;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// 40 sections x 25 rows x 20 seats.
const SECTIONS: usize = 40;
const ROWS: usize = 25;
const PER_ROW: usize = 20;
pub const SEATS: usize = SECTIONS * ROWS * PER_ROW;
/// Holds sent from each page load, after it is drawn.
const HOLDS_PER_LOAD: usize = 3;
/// A bound for a broken page, not a figure.
const PATIENCE: Duration = Duration::from_secs(60);

const VENUE_SHOW: &str = "seatmapvenue";
const GRID_SHOW: &str = "seatmapgrid";

/// The seat ids of the venue, in the order they are written.
fn venue_seat(n: usize) -> String {
    let (section, rest) = (n / (ROWS * PER_ROW), n % (ROWS * PER_ROW));
    format!(
        "S{:02}-{}-{}",
        section + 1,
        rest / PER_ROW + 1,
        rest % PER_ROW + 1
    )
}

/// The name of the `n`th seat of a show.
type SeatName = fn(usize) -> String;

fn grid_seat(n: usize) -> String {
    format!("G{n}")
}

/// An arena: a stage above 5 bands of 8 sections, three price categories
/// by band, the two end seats of each section's first row wheelchair
/// spaces.
fn venue_body() -> Value {
    let mut seats = Vec::with_capacity(SEATS);
    let mut sections = Vec::with_capacity(SECTIONS);
    for section in 0..SECTIONS {
        let (column, band) = (section % 8, section / 8);
        sections.push(json!({"section": format!("S{:02}", section + 1), "label": format!("Block {}", section + 1)}));
        let category = ["premium", "standard", "value"][band.min(2)];
        for row in 0..ROWS {
            for seat in 0..PER_ROW {
                let n = (section * ROWS + row) * PER_ROW + seat;
                let mut spec = json!({
                    "seat_id": venue_seat(n), "section": format!("S{:02}", section + 1),
                    "row": (row + 1).to_string(), "number": seat + 1,
                    "x": column * 460 + seat * 20 + if row % 2 == 1 { 10 } else { 0 },
                    "y": 200 + band * 560 + row * 20, "category": category,
                });
                if row == 0 && (seat == 0 || seat == PER_ROW - 1) {
                    spec["accessible"] = json!(true);
                }
                seats.push(spec);
            }
        }
    }
    json!({
        "name": "Bench Arena",
        "stage": {"x": 1200, "y": 20, "width": 1200, "height": 120, "label": "Stage"},
        "categories": [
            {"category": "premium", "label": "Premium", "color": "#7b2cbf"},
            {"category": "standard", "label": "Standard", "color": "#2a9d8f"},
            {"category": "value", "label": "Value", "color": "#e9c46a"}
        ],
        "sections": sections,
        "seats": seats,
    })
}

fn venue_show_body() -> Value {
    json!({
        "name": "Seat map bench (venue)", "starts_at": "2030-01-01T20:00:00Z",
        "hold_ttl_seconds": 7200, "venue_id": "seatmapbench",
        "ticket_types": [{"ticket_type": "adult", "label": "Adult"},
                         {"ticket_type": "child", "label": "Child"}],
        "prices": [
            {"category": "premium", "ticket_type": "adult", "price_cents": 12000},
            {"category": "premium", "ticket_type": "child", "price_cents": 6000},
            {"category": "standard", "ticket_type": "adult", "price_cents": 5000},
            {"category": "standard", "ticket_type": "child", "price_cents": 2500},
            {"category": "value", "ticket_type": "adult", "price_cents": 3000}
        ]
    })
}

/// The same number of seats without coordinates: the grid.
fn grid_show_body() -> Value {
    let seats: Vec<Value> = (0..SEATS)
        .map(|n| {
            json!({"seat_id": grid_seat(n), "section": format!("S{:02}", n / (ROWS * PER_ROW) + 1),
                   "row": (n / PER_ROW % ROWS + 1).to_string(), "number": n % PER_ROW + 1,
                   "price_cents": 5000})
        })
        .collect();
    json!({"name": "Seat map bench (grid)", "starts_at": "2030-01-01T20:00:00Z",
           "hold_ttl_seconds": 7200, "seats": seats})
}

/// chromedriver on a free port, and one browser session; both end when
/// dropped (the session is deleted by `close`).
struct Browser {
    _driver: tokio::process::Child,
    http: reqwest::Client,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> anyhow::Result<Self> {
        for path in [CHROMIUM, CHROMEDRIVER] {
            anyhow::ensure!(
                std::path::Path::new(path).exists(),
                "{path} is missing: the seat map bench needs Debian's chromium and chromium-driver"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let driver = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .context("chromedriver starts")?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()?;
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Ok(response) = http.get(format!("{base}/status")).send().await {
                let status: Value = response.json().await.unwrap_or_default();
                if status["value"]["ready"] == json!(true) {
                    break;
                }
            }
            anyhow::ensure!(Instant::now() < deadline, "chromedriver never became ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir()?;
        let created: Value = http
            .post(format!("{base}/session"))
            .json(&json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1100,900", "--no-first-run", "--no-default-browser-check",
                         format!("--user-data-dir={}", profile.path().display())],
            }}}}))
            .send()
            .await?
            .json()
            .await?;
        let session = created["value"]["sessionId"]
            .as_str()
            .with_context(|| format!("no session: {created}"))?;
        let browser = Browser {
            _driver: driver,
            http,
            session: format!("{base}/session/{session}"),
            _profile: profile,
        };
        browser
            .command("timeouts", json!({"script": 60_000, "pageLoad": 60_000}))
            .await?;
        // Every load fetches the show again, as a first visit does.
        browser
            .command(
                "goog/cdp/execute",
                json!({"cmd": "Network.setCacheDisabled", "params": {"cacheDisabled": true}}),
            )
            .await?;
        Ok(browser)
    }

    async fn command(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let answer: Value = self
            .http
            .post(format!("{}/{path}", self.session))
            .json(&body)
            .send()
            .await?
            .json()
            .await?;
        if let Some(error) = answer["value"]["error"].as_str() {
            anyhow::bail!("{path}: {error}: {}", answer["value"]["message"]);
        }
        Ok(answer["value"].clone())
    }

    async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.command("url", json!({ "url": url })).await.map(|_| ())
    }

    async fn script(&self, script: &str, args: Value) -> anyhow::Result<Value> {
        self.command("execute/sync", json!({"script": script, "args": args}))
            .await
    }

    async fn async_script(&self, script: &str, args: Value) -> anyhow::Result<Value> {
        self.command("execute/async", json!({"script": script, "args": args}))
            .await
    }

    /// Waits until `expression` is truthy in the page; returns its value.
    async fn wait_for(&self, expression: &str) -> anyhow::Result<Value> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self
                .script(&format!("return {expression};"), json!([]))
                .await?;
            if !value.is_null() && value != json!(false) && value != json!("") {
                return Ok(value);
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the page never got to {expression}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn close(self) {
        let _ = self.http.delete(&self.session).send().await;
    }
}

/// Sent inside the page: holds one seat as another buyer, and answers when
/// the 201 arrived, when the seat's `data-status` changed, and the next
/// frame after that (all `performance.now()`).
const HOLD_AND_WATCH: &str = r#"
const [seatId, token, show, done] = arguments;
const seat = document.querySelector(`[data-seat-id="${seatId}"]`);
if (!seat) { done({ error: `no seat ${seatId}` }); return; }
const times = { sent: 0, answered: null, changed: null, framed: null };
const finish = () => {
  if (times.answered !== null && times.framed !== null) done(times);
};
new MutationObserver((records, observer) => {
  if (seat.getAttribute("data-status") === "available") return;
  times.changed = performance.now();
  observer.disconnect();
  requestAnimationFrame(() => { times.framed = performance.now(); finish(); });
}).observe(seat, { attributes: true, attributeFilter: ["data-status"] });
times.sent = performance.now();
fetch(`/v1/shows/${encodeURIComponent(show)}/holds`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
  body: JSON.stringify({ seats: [seatId] }),
}).then((response) => {
  times.answered = performance.now();
  if (response.status !== 201) done({ error: `hold answered ${response.status}` });
  else finish();
}, (error) => done({ error: String(error) }));
"#;

fn number(value: &Value, field: &str) -> anyhow::Result<f64> {
    match &value[field] {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
    .with_context(|| format!("{field} in {value}"))
}

fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// One drawing's figures over `runs` loads (after one load not counted).
struct Measured {
    draw: Vec<f64>,
    fetched: Vec<f64>,
    live: Vec<f64>,
    repaint: Vec<f64>,
    frame: Vec<f64>,
    round_trip: Vec<f64>,
}

async fn measure(
    browser: &Browser,
    target: &Target,
    show: &str,
    seat: SeatName,
    runs: usize,
) -> anyhow::Result<Measured> {
    let mut measured = Measured {
        draw: Vec::new(),
        fetched: Vec::new(),
        live: Vec::new(),
        repaint: Vec::new(),
        frame: Vec::new(),
        round_trip: Vec::new(),
    };
    let viewer = target.token("seatmap-viewer", Role::Buyer);
    let mut next_seat = 0;
    for load in 0..=runs {
        browser.goto("about:blank").await?;
        browser
            .goto(&format!("{}/shows/{show}#token={viewer}", target.base))
            .await?;
        let drawn = browser
            .wait_for("document.documentElement.dataset.drawnAt")
            .await?;
        let live = browser
            .wait_for("document.documentElement.dataset.liveAt")
            .await?;
        browser
            .wait_for("document.querySelector('#connection').dataset.connection === 'live'")
            .await?;
        let seats = browser
            .script(
                "return Number(document.documentElement.dataset.seatsDrawn)",
                json!([]),
            )
            .await?;
        anyhow::ensure!(seats == json!(SEATS), "{show}: {seats} seats drawn");
        let fetched = browser
            .script(
                "const e = performance.getEntriesByType('resource').find(r => r.name.includes('/v1/shows/') && !r.name.includes('/availability')); return e ? e.responseEnd : null",
                json!([]),
            )
            .await?;
        let draw: f64 = drawn.as_str().unwrap_or_default().parse()?;
        let live: f64 = live.as_str().unwrap_or_default().parse()?;
        let mut repaints = Vec::new();
        for _ in 0..HOLDS_PER_LOAD {
            // Seats far apart, never the same twice.
            let seat_id = seat(next_seat * 997 % SEATS);
            next_seat += 1;
            let buyer = target.token(&format!("seatmap-holder-{next_seat}"), Role::Buyer);
            let times = browser
                .async_script(HOLD_AND_WATCH, json!([seat_id, buyer, show]))
                .await?;
            if let Some(error) = times["error"].as_str() {
                anyhow::bail!("{show}: {error}");
            }
            let (sent, answered) = (number(&times, "sent")?, number(&times, "answered")?);
            let (changed, framed) = (number(&times, "changed")?, number(&times, "framed")?);
            repaints.push((changed - answered, framed - answered, changed - sent));
        }
        eprintln!(
            "   {show} load {load}{}: drawn at {draw:.0} ms, show fetched at {}, live at {live:.0} ms; repaint after the 201 {:?} ms",
            if load == 0 { " (warm-up, not counted)" } else { "" },
            fetched.as_f64().map_or("?".into(), |f| format!("{f:.0} ms")),
            repaints.iter().map(|r| (r.0 * 10.0).round() / 10.0).collect::<Vec<_>>()
        );
        if load == 0 {
            continue;
        }
        measured.draw.push(draw);
        measured.live.push(live);
        if let Some(fetched) = fetched.as_f64() {
            measured.fetched.push(fetched);
        }
        for (repaint, frame, round_trip) in repaints {
            measured.repaint.push(repaint);
            measured.frame.push(frame);
            measured.round_trip.push(round_trip);
        }
    }
    Ok(measured)
}

fn figures(scenario: &str, store: &str, samples: &mut [f64], note: String) -> Figures {
    let worst = max(samples);
    let p50 = median(samples);
    Figures {
        scenario: scenario.to_owned(),
        store: store.to_owned(),
        requests: samples.len(),
        ok: samples.len(),
        refused: 0,
        failed: 0,
        wall_ms: samples.iter().sum(),
        per_second: 0.0,
        p50_ms: p50,
        // The worst of the runs (a handful: no percentile to speak of).
        p99_ms: worst,
        note,
    }
}

/// The two pages, `runs` loads each (plus one warm-up), in one browser.
pub async fn run(target: &Target, runs: usize) -> anyhow::Result<Vec<Figures>> {
    eprintln!("   creating a {SEATS}-seat venue, a show on it and a {SEATS}-seat show without coordinates");
    put_admin(target, "/v1/venues/seatmapbench", &venue_body()).await?;
    put_admin(
        target,
        &format!("/v1/shows/{VENUE_SHOW}"),
        &venue_show_body(),
    )
    .await?;
    put_admin(target, &format!("/v1/shows/{GRID_SHOW}"), &grid_show_body()).await?;
    let browser = Browser::start().await?;
    let mut results = Vec::new();
    let pages: [(&str, &str, SeatName); 2] = [
        ("grid, no coordinates: the baseline", GRID_SHOW, grid_seat),
        ("venue chart", VENUE_SHOW, venue_seat),
    ];
    for (name, show, seat) in pages {
        let outcome = measure(&browser, target, show, seat, runs).await;
        let mut m = match outcome {
            Ok(m) => m,
            Err(error) => {
                browser.close().await;
                return Err(error);
            }
        };
        let draw_note = format!(
            "navigation start to every seat drawn, median (p50) and worst (p99 column) of {runs} loads, cache off; show JSON in at {:.0} ms, first snapshot applied at {:.0} ms (medians)",
            median(&mut m.fetched),
            median(&mut m.live)
        );
        results.push(figures(
            &format!("seat map draw, {SEATS} seats ({name})"),
            target.store,
            &mut m.draw,
            draw_note,
        ));
        let repaint_note = format!(
            "hold 201 to data-status changed, median (p50) and worst (p99 column) of {} holds (negative: the change came before the 201); to the next frame {:.1} ms; hold sent to changed {:.1} ms (medians)",
            m.repaint.len(),
            median(&mut m.frame),
            median(&mut m.round_trip)
        );
        results.push(figures(
            &format!("seat map live repaint, {SEATS} seats ({name})"),
            target.store,
            &mut m.repaint,
            repaint_note,
        ));
    }
    browser.close().await;
    Ok(results)
}
