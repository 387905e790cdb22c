//! Load from a second process, by cheap C clients on both sides: `wrk`
//! (Debian's package) sends the distinct-seat holds to the service over
//! HTTP, and `pgbench` sends the seed's raw SQL hold to the same PostgreSQL.
//! The in-process client of the other scenarios shares the service's two
//! cores and costs about as much per request as the service itself; with
//! `wrk` and `pgbench` the ratio compares the service with the database
//! limit, each driven as hard as a C client can.
//!
//! `wrk` runs a Lua script with the buyers' tokens signed beforehand (a
//! signature per request would measure the signing). Each of its threads
//! takes every `threads`-th seat, so no two requests ask for one seat.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use booking::auth::Role;
use serde::Deserialize;

use crate::report::Figures;
use crate::wal::WalMark;
use crate::Target;

/// `wrk` threads: one per core of the machine the benchmark was written on
/// (more threads than cores only adds context switches to the client).
const WRK_THREADS: usize = 2;

/// Buyers whose tokens the script rotates through (a hold per request, the
/// buyer changing every request: no per-buyer state is ever hot).
const WRK_BUYERS: usize = 256;

/// What the script's `done()` prints: one JSON line.
#[derive(Debug, Deserialize)]
struct WrkSummary {
    requests: u64,
    duration_us: u64,
    p50_us: f64,
    p99_us: f64,
    /// Socket errors (connect, read, write, timeout).
    errors: u64,
    /// Answers by HTTP status.
    statuses: BTreeMap<String, u64>,
}

/// What a wrk hold asks for: a seat by its id, or with a ticket type (every
/// other seat a child's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldBody {
    SeatId,
    WithTicketType,
}

impl HoldBody {
    fn lua(self) -> &'static str {
        match self {
            HoldBody::SeatId => r#"'{"seats":["S' .. seat .. '"]}'"#,
            HoldBody::WithTicketType => {
                r#"'{"seats":[{"seat_id":"S' .. seat .. '","ticket_type":"' .. (seat % 2 == 0 and 'adult' or 'child') .. '"}]}'"#
            }
        }
    }
}

fn lua_script(
    show: &str,
    tokens: &[String],
    first_seat: usize,
    seats: usize,
    body: HoldBody,
) -> String {
    let mut tokens_lua = String::new();
    for token in tokens {
        let _ = write!(tokens_lua, "\"{token}\",");
    }
    format!(
        r#"-- Distinct-seat holds on show {show}; written by bench/src/external.rs.
local tokens = {{{tokens_lua}}}
local threads = {{}}
local count = 0
function setup(thread)
  count = count + 1
  thread:set("id", count)
  table.insert(threads, thread)
end
function init(args)
  step = {WRK_THREADS}
  k = 0
  statuses = {{}}
end
function request()
  local seat = {first_seat} + (id - 1) + k * step
  k = k + 1
  if seat > {last_seat} then
    seat = {last_seat}
  end
  local token = tokens[(seat % #tokens) + 1]
  return wrk.format("POST", "/v1/shows/{show}/holds",
    {{["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json"}},
    {body})
end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
function done(summary, latency, requests)
  local all = {{}}
  for _, thread in ipairs(threads) do
    local s = thread:get("statuses")
    for code, n in pairs(s) do
      all[code] = (all[code] or 0) + n
    end
  end
  local parts = {{}}
  for code, n in pairs(all) do
    table.insert(parts, string.format('"%d":%d', code, n))
  end
  local errors = summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout
  io.write(string.format(
    'BENCH {{"requests":%d,"duration_us":%d,"p50_us":%f,"p99_us":%f,"errors":%d,"statuses":{{%s}}}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    errors, table.concat(parts, ",")))
end
"#,
        last_seat = first_seat + seats - 1,
        body = body.lua(),
    )
}

/// Distinct-seat holds on `show` (seats `S1..=S{seats}`) from `wrk`, for
/// `duration`, over `connections` connections. The script never asks for a
/// seat past the last: if the service outran the show, the surplus would
/// be 409s on the last seat, and show as refusals in the figures.
pub async fn wrk_holds(
    target: &Target,
    show: &str,
    seats: usize,
    connections: usize,
    duration: Duration,
    body: HoldBody,
) -> anyhow::Result<Figures> {
    let tokens: Vec<String> = (0..WRK_BUYERS)
        .map(|n| target.token(&format!("w{n}"), Role::Buyer))
        .collect();
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("holds.lua");
    std::fs::write(&script, lua_script(show, &tokens, 1, seats, body))?;
    let output = tokio::process::Command::new("wrk")
        .arg(format!("--threads={WRK_THREADS}"))
        .arg(format!("--connections={connections}"))
        .arg(format!("--duration={}s", duration.as_secs().max(1)))
        .arg("--timeout=30s")
        .arg(format!("--script={}", script.display()))
        .arg(&target.base)
        .stdin(Stdio::null())
        .output()
        .await
        .context("run wrk (Debian's package `wrk`: apt-get install -y wrk)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("BENCH "))
        .with_context(|| {
            format!(
                "wrk printed no summary (exit {:?}): {stdout} {}",
                output.status.code(),
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    let summary: WrkSummary = serde_json::from_str(line).context("wrk's summary")?;
    let count = |range: std::ops::Range<u16>| -> usize {
        summary
            .statuses
            .iter()
            .filter(|(code, _)| code.parse::<u16>().is_ok_and(|c| range.contains(&c)))
            .map(|(_, n)| *n as usize)
            .sum()
    };
    let ok = count(200..300);
    let refused = count(400..500);
    let answered: u64 = summary.statuses.values().sum();
    let requests = summary.requests.max(answered) as usize;
    let wall = Duration::from_micros(summary.duration_us);
    Ok(Figures {
        scenario: match body {
            HoldBody::SeatId => "holds (distinct seats), load from wrk".into(),
            HoldBody::WithTicketType => {
                "holds (distinct seats) on a venue, ticket types and categories, load from wrk"
                    .into()
            }
        },
        store: target.store.into(),
        requests,
        ok,
        refused,
        failed: requests - ok - refused,
        wall_ms: wall.as_secs_f64() * 1000.0,
        per_second: ok as f64 / wall.as_secs_f64().max(1e-9),
        p50_ms: summary.p50_us / 1000.0,
        p99_ms: summary.p99_us / 1000.0,
        note: format!(
            "wrk {WRK_THREADS} threads, {connections} connections, {WRK_BUYERS} buyers; socket errors: {}",
            summary.errors
        ),
    })
}

/// The seed's raw SQL hold (`baseline::HOLD`, with the seat drawn at random
/// from two billion: a collision, which would answer no row, is about one in
/// ten thousand holds) as a pgbench script.
const PGBENCH_HOLD: &str = "\\set seat random(1, 2000000000)\n\
INSERT INTO holds (seat_id, hold_id, expires_at) VALUES ('S' || :seat, gen_random_uuid(), now() + interval '8 minutes') \
ON CONFLICT (seat_id) DO UPDATE SET hold_id = excluded.hold_id, expires_at = excluded.expires_at \
WHERE holds.expires_at < now() RETURNING seat_id;\n";

/// The raw SQL hold from `pgbench` against the database `url` names (which
/// has the baseline's `holds` table), `clients` connections for `duration`.
/// Latencies come from pgbench's per-transaction log.
pub async fn pgbench_holds(
    url: &str,
    clients: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("hold.sql");
    std::fs::write(&script, PGBENCH_HOLD)?;
    let prefix = dir.path().join("tx");
    let wal = WalMark::now(url).await?;
    let output = tokio::process::Command::new("pgbench")
        .args(["--no-vacuum", "--protocol=prepared", "--log"])
        .arg(format!("--log-prefix={}", prefix.display()))
        .arg(format!("--client={clients}"))
        .arg(format!("--jobs={WRK_THREADS}"))
        .arg(format!("--time={}", duration.as_secs().max(1)))
        .arg(format!("--file={}", script.display()))
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .await
        .context("run pgbench (Debian's package postgresql-client)")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "pgbench failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let field = |name: &str| -> Option<f64> {
        stdout.lines().find_map(|l| {
            l.trim()
                .strip_prefix(name)?
                .trim_start_matches([' ', '=', ':'])
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    };
    let processed = field("number of transactions actually processed").unwrap_or(0.0) as usize;
    let failed = field("number of failed transactions").unwrap_or(0.0) as usize;
    let tps = field("tps").context("pgbench printed no tps")?;
    let mut latencies = transaction_latencies(dir.path())?;
    latencies.sort_unstable();
    let percentile = |p: f64| -> f64 {
        if latencies.is_empty() {
            return 0.0;
        }
        let rank = ((p / 100.0) * (latencies.len() - 1) as f64).round() as usize;
        latencies[rank.min(latencies.len() - 1)] as f64 / 1000.0
    };
    let mut figures = Figures {
        scenario: "raw SQL hold (distinct seats), load from pgbench".into(),
        store: "postgres".into(),
        requests: processed + failed,
        ok: processed,
        refused: 0,
        failed,
        wall_ms: processed as f64 / tps.max(1e-9) * 1000.0,
        per_second: tps,
        p50_ms: percentile(50.0),
        p99_ms: percentile(99.0),
        note: format!("pgbench {clients} clients, {WRK_THREADS} jobs, prepared"),
    };
    wal.annotate(url, &mut figures).await?;
    Ok(figures)
}

/// Each transaction's latency (µs) from pgbench's logs in `dir`: lines of
/// `client_id transaction_no time_us script_no time_epoch time_us`.
fn transaction_latencies(dir: &Path) -> anyhow::Result<Vec<u64>> {
    let mut latencies = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let is_log = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("tx"));
        if !is_log {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            if let Some(us) = line
                .split_whitespace()
                .nth(2)
                .and_then(|t| t.parse::<u64>().ok())
            {
                latencies.push(us);
            }
        }
    }
    Ok(latencies)
}
