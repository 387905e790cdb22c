//! Once quiet, the read models equal the checker's fold of the log:
//! availability seat by seat and pool by pool, the report's booked counts
//! and revenue by ticket type (this is where a pool line cancelled as the
//! wrong ticket type shows), the export's bookings; the CSV export hands
//! no spreadsheet a formula; `booking verify` exits 0.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::evidence::Evidence;
use crate::model::{Model, SoldUnit};
use crate::report::Violation;

pub fn availability_agrees(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    if !evidence.quiet {
        return Vec::new();
    }
    let mut out = Vec::new();
    for show in &evidence.shows {
        let Some(reads) = evidence.reads.get(&show.show_id) else {
            continue;
        };
        let seats = reads.availability["seats"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for seat in &show.seats {
            let stream = format!("{}/{}", show.show_id, seat.seat_id);
            let expected = model
                .seats
                .get(&stream)
                .map_or("available", |s| s.status_at(evidence.read_at_us));
            let read = seats
                .iter()
                .find(|s| s["seat_id"] == seat.seat_id.as_str())
                .and_then(|s| s["status"].as_str())
                .unwrap_or("(absent)");
            if read != expected {
                out.push(Violation::new(
                    "availability_agrees",
                    format!("{stream} reads {read}, the log folds to {expected}"),
                    vec![stream.clone()],
                ));
            }
        }
        out.extend(pools_agree(show, &reads.availability, model));
    }
    out
}

fn pools_agree(
    show: &crate::shows::ShowSpec,
    availability: &Value,
    model: &Model,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for pool in &show.pools {
        let prefix = format!("{}/{}#", show.show_id, pool.pool_id);
        let sold: u32 = model
            .shards
            .values()
            .filter(|s| s.stream.starts_with(&prefix))
            .map(|s| s.sold_total())
            .sum();
        let read = (availability["pools"].as_array().into_iter().flatten())
            .find(|p| p["pool_id"] == pool.pool_id.as_str());
        let figure = |f: &str| read.and_then(|p| p[f].as_u64()).unwrap_or(0) as u32;
        let free = figure("available") + figure("allocated");
        if figure("sold") != sold || figure("held") != 0 || free + sold != pool.capacity {
            out.push(Violation::new(
                "availability_agrees",
                format!(
                    "pool {prefix}: reads {:?}, the log folds to {sold} sold, none held",
                    read
                ),
                vec![prefix],
            ));
        }
    }
    out
}

/// Booked units by (ticket type): (count, revenue).
fn by_type<'a>(units: impl Iterator<Item = &'a SoldUnit>) -> BTreeMap<String, (u64, i64)> {
    let mut by: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for u in units {
        let entry = by.entry(u.ticket_type.clone()).or_default();
        entry.0 += 1;
        entry.1 += u.price_cents;
    }
    by
}

pub fn report_agrees(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    if !evidence.quiet {
        return Vec::new();
    }
    let sold = model.sold_units();
    let mut out = Vec::new();
    for show in &evidence.shows {
        let Some(reads) = evidence.reads.get(&show.show_id) else {
            continue;
        };
        let expected = by_type(sold.iter().filter(|u| u.show_id == show.show_id));
        let mut read: BTreeMap<String, (u64, i64)> = BTreeMap::new();
        for row in reads.report["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["status"] == "booked")
        {
            let entry = read
                .entry(row["ticket_type"].as_str().unwrap_or_default().to_owned())
                .or_default();
            entry.0 += row["count"].as_u64().unwrap_or(0);
            entry.1 += row["revenue_cents"].as_i64().unwrap_or(0);
        }
        if read != expected {
            out.push(Violation::new("report_agrees", format!("{}: the report books (count, revenue) by ticket type {read:?}; the confirmed lines and purchases are {expected:?}", show.show_id), vec![show.show_id.clone()]));
        }
    }
    out
}

/// One booked unit as the export lists it: (booking, unit, ticket type, price).
type ExportLine = (String, String, String, i64);

fn export_lines(export: &Value) -> Vec<ExportLine> {
    let mut lines: Vec<ExportLine> = (export["bookings"].as_array().into_iter().flatten())
        .map(|b| {
            let text = |f: &str| b[f].as_str().unwrap_or_default().to_owned();
            let unit = b["seat_id"]
                .as_str()
                .or(b["pool_id"].as_str())
                .unwrap_or_default()
                .to_owned();
            (
                text("booking_id"),
                unit,
                text("ticket_type"),
                b["price_cents"].as_i64().unwrap_or(0),
            )
        })
        .collect();
    lines.sort();
    lines
}

pub fn export_agrees(evidence: &Evidence, model: &Model) -> Vec<Violation> {
    if !evidence.quiet {
        return Vec::new();
    }
    let sold = model.sold_units();
    let mut out = Vec::new();
    for show in &evidence.shows {
        let Some(reads) = evidence.reads.get(&show.show_id) else {
            continue;
        };
        let mut expected: Vec<ExportLine> = (sold.iter().filter(|u| u.show_id == show.show_id))
            .map(|u| {
                (
                    u.booking_id.clone(),
                    u.unit.clone(),
                    u.ticket_type.clone(),
                    u.price_cents,
                )
            })
            .collect();
        expected.sort();
        let read = export_lines(&reads.export);
        if read != expected {
            let (missing, extra) = (minus(&expected, &read), minus(&read, &expected));
            let ids = missing
                .iter()
                .chain(extra.iter())
                .map(|e| e.0.clone())
                .collect();
            out.push(Violation::new(
                "export_agrees",
                format!(
                    "{}: the export lacks {missing:?} and has {extra:?}",
                    show.show_id
                ),
                ids,
            ));
        }
    }
    out
}

/// The lines of `a` not matched one for one in `b` (at most five).
fn minus<'a>(a: &'a [ExportLine], b: &[ExportLine]) -> Vec<&'a ExportLine> {
    let mut rest: Vec<&ExportLine> = b.iter().collect();
    let mut left = Vec::new();
    for line in a {
        match rest.iter().position(|r| *r == line) {
            Some(i) => {
                rest.remove(i);
            }
            None => left.push(line),
        }
    }
    left.truncate(5);
    left
}

/// A cell a spreadsheet would evaluate (OWASP's CSV injection).
fn formula(cell: &str) -> bool {
    cell.starts_with(['=', '+', '-', '@', '\t', '\r'])
}

pub fn export_csv_safe(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    let mut out = Vec::new();
    for (show, reads) in &evidence.reads {
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(reads.export_csv.as_bytes());
        for record in csv.records().flatten() {
            if let Some(cell) = record.iter().find(|c| formula(c)) {
                out.push(Violation::new(
                    "export_csv_safe",
                    format!(
                        "{show}: the CSV export has the cell {cell:?}, a formula to a spreadsheet"
                    ),
                    vec![cell.to_owned()],
                ));
            }
        }
    }
    out
}

pub fn verify_clean(evidence: &Evidence, _: &Model) -> Vec<Violation> {
    (evidence.verify.iter())
        .map(|why| Violation::new("verify_clean", why.clone(), vec![]))
        .collect()
}
