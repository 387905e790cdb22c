//! What a run ends with: a report of what was done and checked, or the
//! first violated property with the history lines that led to it.

use std::collections::BTreeMap;
use std::fmt;

use crate::history::Record;

/// A property that does not hold, and the ids (holds, orders, bookings,
/// seats) whose history lines show how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub property: &'static str,
    pub detail: String,
    pub ids: Vec<String>,
}

impl Violation {
    pub fn new(property: &'static str, detail: impl Into<String>, ids: Vec<String>) -> Self {
        Self {
            property,
            detail: detail.into(),
            ids,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub seed: u64,
    pub store: String,
    pub instances: usize,
    /// Operations by kind and outcome (`hold_seats 201`, `order unknown`).
    pub operations: BTreeMap<String, usize>,
    pub faults: Vec<String>,
    pub events: usize,
    /// Properties checked and found to hold.
    pub properties: Vec<&'static str>,
    pub history: Option<std::path::PathBuf>,
}

impl Report {
    pub fn count_operations(&mut self, records: &[Record]) {
        for record in records {
            let outcome = match record.outcome.status() {
                Some(status) => status.to_string(),
                None if record.outcome.is_unknown() => "unknown".into(),
                None => "not_sent".into(),
            };
            *self
                .operations
                .entry(format!("{} {outcome}", record.op))
                .or_default() += 1;
        }
    }

    pub fn total_operations(&self) -> usize {
        self.operations.values().sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} store {} instances {}: {} operations (",
            self.seed,
            self.store,
            self.instances,
            self.total_operations()
        )?;
        let ops: Vec<String> = (self.operations.iter())
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        write!(f, "{}", ops.join(", "))?;
        write!(
            f,
            "), {} events, faults [{}], {} properties held: {}",
            self.events,
            self.faults.join("; "),
            self.properties.len(),
            self.properties.join(", ")
        )
    }
}

/// A failed run: the seed, every violated property (the first in full)
/// and the history lines that mention the first one's ids.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub store: String,
    pub violations: Vec<Violation>,
    pub lines: Vec<Record>,
    pub history: Option<std::path::PathBuf>,
    pub report: Report,
}

/// How many history lines a failure prints.
const LINES_SHOWN: usize = 40;
/// How many violations of each property a failure prints.
const EXAMPLES_SHOWN: usize = 2;

impl Failure {
    pub fn new(report: Report, violations: Vec<Violation>, records: &[Record]) -> Self {
        let ids = violations
            .first()
            .map(|v| v.ids.clone())
            .unwrap_or_default();
        let lines = records
            .iter()
            .filter(|r| r.mentions(&ids))
            .take(LINES_SHOWN)
            .cloned()
            .collect();
        Self {
            seed: report.seed,
            store: report.store.clone(),
            violations,
            lines,
            history: report.history.clone(),
            report,
        }
    }

    /// Violations counted by property.
    pub fn by_property(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for v in &self.violations {
            *counts.entry(v.property).or_default() += 1;
        }
        counts
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "VIOLATION with seed {} on {}", self.seed, self.store)?;
        if let Some(first) = self.violations.first() {
            writeln!(f, "first: {}: {}", first.property, first.detail)?;
        }
        writeln!(f, "violated properties (count): {:?}", self.by_property())?;
        for property in self.by_property().keys() {
            let examples = self.violations.iter().filter(|v| v.property == *property);
            for v in examples.take(EXAMPLES_SHOWN) {
                writeln!(f, "  {}: {}", v.property, v.detail)?;
            }
        }
        if let Some(path) = &self.history {
            writeln!(f, "history kept at {}", path.display())?;
        }
        writeln!(f, "history lines of the first violation:")?;
        for line in &self.lines {
            let text = serde_json::to_string(line).unwrap_or_default();
            writeln!(f, "  {text}")?;
        }
        write!(f, "run: {}", self.report)
    }
}
