//! One run: a fresh database, the instances, the shows, the crowd and the
//! faults for the run's length, quiescence, the evidence, the properties.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Mutex;

use crate::api::{Api, Caller};
use crate::config::{Config, Store};
use crate::database::{Reader, RunDatabase};
use crate::evidence::{read_models, Evidence};
use crate::faults::FaultWindow;
use crate::generator::{admin, buyer, client_rng, Client, Shared};
use crate::history::History;
use crate::instances::{verify, Instances};
use crate::report::{Failure, Report, Violation};
use crate::shows::ShowSpec;
use crate::tokens::Minter;

struct Run {
    config: Config,
    database: Arc<RunDatabase>,
    instances: Arc<Mutex<Instances>>,
    api: Api,
    minter: Minter,
    admin: Caller,
    shows: Arc<Vec<ShowSpec>>,
    max_entries: usize,
    setup: Vec<Violation>,
}

/// Runs the checker: `Ok` with what was done when every property holds,
/// else the first violated property (and the others) with the history
/// lines that led to it. The seed is in both.
pub async fn run(config: Config) -> Result<Report, Failure> {
    let mut report = Report {
        seed: config.seed,
        store: config.store.name().into(),
        instances: config.instances,
        ..Report::default()
    };
    let history = match history_file(&config) {
        Ok(history) => Arc::new(history),
        Err(e) => {
            return Err(Failure::new(
                report,
                vec![Violation::new("setup", e.to_string(), vec![])],
                &[],
            ))
        }
    };
    report.history = Some(history.path().to_owned());
    let outcome = execute(config.clone(), history.clone(), &mut report).await;
    history.flush();
    let records = history.records();
    report.count_operations(&records);
    match outcome {
        Ok(()) => {
            if !config.keep_history {
                let _ = std::fs::remove_file(history.path());
                report.history = None;
            }
            Ok(report)
        }
        Err(violations) => Err(Failure::new(report, violations, &records)),
    }
}

fn history_file(config: &Config) -> anyhow::Result<History> {
    let path = config.history.clone().unwrap_or_else(|| {
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
        std::env::temp_dir().join(format!(
            "checker-{}-seed{}-{stamp}.jsonl",
            config.store.name(),
            config.seed
        ))
    });
    History::create(&path)
}

async fn execute(
    config: Config,
    history: Arc<History>,
    report: &mut Report,
) -> Result<(), Vec<Violation>> {
    let setup_failed = |e: anyhow::Error| vec![Violation::new("setup", format!("{e:#}"), vec![])];
    let mut run = Run::prepare(config, history).await.map_err(setup_failed)?;
    let outcome = run.drive(report).await;
    run.instances.lock().await.stop_all().await;
    run.database.remove().await;
    outcome
}

impl Run {
    async fn prepare(config: Config, history: Arc<History>) -> anyhow::Result<Self> {
        let name = format!(
            "checker_{}_{}_{}",
            config.seed,
            std::process::id(),
            chrono::Utc::now().timestamp_millis()
        );
        let database = match config.store {
            Store::Sqlite => RunDatabase::sqlite()?,
            Store::Postgres if config.faults && config.database_faults => {
                RunDatabase::own_postgres(&name)?
            }
            Store::Postgres => {
                RunDatabase::shared_postgres(&config.postgres_admin_url, &name).await?
            }
        };
        let secret = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        let mut instances = Instances::new(
            &config.booking_bin,
            database.url(),
            &secret,
            config.instances.clamp(1, 3),
        );
        instances.start_all().await?;
        let api = Api::new(instances.addresses.clone(), history)?;
        let minter = Minter::new(&secret);
        let admin = Caller {
            client: "admin".into(),
            sub: "clerk".into(),
            token: minter.token("clerk", "admin", (&[], &[]))?,
        };
        Ok(Self {
            config,
            database: Arc::new(database),
            instances: Arc::new(Mutex::new(instances)),
            api,
            minter,
            admin,
            shows: Arc::new(Vec::new()),
            max_entries: domain::limits::MAX_WAITLIST_ENTRIES,
            setup: Vec::new(),
        })
    }

    async fn drive(&mut self, report: &mut Report) -> Result<(), Vec<Violation>> {
        self.create_shows()
            .await
            .map_err(|e| vec![Violation::new("setup", format!("{e:#}"), vec![])])?;
        let (clients, windows) = self
            .crowd()
            .await
            .map_err(|e| vec![Violation::new("setup", format!("{e:#}"), vec![])])?;
        report.faults = windows.iter().map(|w| w.what.clone()).collect();
        let (crashed, quiet) = self.quiesce(clients).await;
        let evidence = self
            .evidence(windows, crashed, quiet.is_empty())
            .await
            .map_err(|e| vec![Violation::new("evidence", format!("{e:#}"), vec![])])?;
        report.events = evidence.log.len();
        let (held, mut violations) = crate::properties::check_all(&evidence);
        report.properties = held;
        violations.splice(0..0, quiet);
        if !violations.is_empty() || self.config.keep_history {
            keep_log(report, &evidence);
        }
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }

    async fn create_shows(&mut self) -> anyhow::Result<()> {
        let now_us = chrono::Utc::now().timestamp_micros();
        let probe = crate::catalog::plan(now_us, None).remove(0);
        let cap = crate::setup::takes_max_entries(&self.api, &self.admin, &probe).await?;
        if cap {
            self.max_entries = crate::setup::CHECKER_MAX_ENTRIES;
        }
        let shows = crate::catalog::plan(now_us, cap.then_some(crate::setup::CHECKER_MAX_ENTRIES));
        self.setup = crate::setup::create_shows(&self.api, &self.admin, &shows).await?;
        self.shows = Arc::new(shows);
        Ok(())
    }

    /// A buyer client: `b3` is named as a spreadsheet formula; every
    /// fourth buyer may sell through the partner channel.
    fn buyer(&self, index: usize, shared: &Arc<Shared>) -> anyhow::Result<Client> {
        let sub = if index == 3 {
            "=b3+1".to_owned()
        } else {
            format!("b{index}")
        };
        let partner = index % 4 == 1;
        let (channels, shows) = if partner {
            let shows = [crate::catalog::SEATED, crate::catalog::FLOOR];
            (
                vec![crate::catalog::PARTNER.to_owned()],
                shows.map(str::to_owned).to_vec(),
            )
        } else {
            (vec![], vec![])
        };
        let caller = Caller {
            client: format!("b{index}"),
            token: self.minter.token(&sub, "buyer", (&channels, &shows))?,
            sub,
        };
        Ok(Client::new(
            caller,
            partner,
            client_rng(self.config.seed, index as u64),
            self.api.clone(),
            self.shows.clone(),
            shared.clone(),
        ))
    }

    async fn crowd(&mut self) -> anyhow::Result<(Vec<Client>, Vec<FaultWindow>)> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared::default());
        let mut tasks = Vec::new();
        for index in 0..self.config.clients {
            tasks.push(tokio::spawn(buyer::run(
                self.buyer(index, &shared)?,
                stop.clone(),
            )));
        }
        let clerk = Client::new(
            self.admin.clone(),
            false,
            client_rng(self.config.seed, self.config.clients as u64),
            self.api.clone(),
            self.shows.clone(),
            shared.clone(),
        );
        tasks.push(tokio::spawn(admin::run(clerk, stop.clone())));
        let own_cluster = self.database.cluster().is_some();
        let plan = if self.config.faults {
            crate::faults::plan(
                self.config.seed,
                self.config.duration,
                self.config.instances,
                own_cluster,
            )
        } else {
            vec![]
        };
        let faults = tokio::spawn(crate::faults::run(
            plan,
            Instant::now(),
            stop.clone(),
            self.instances.clone(),
            self.database.clone(),
        ));
        // The run's length is the schedule itself, not a wait for a condition.
        tokio::time::sleep(self.config.duration).await;
        stop.store(true, Ordering::Relaxed);
        let mut clients = Vec::new();
        for task in tasks {
            clients.push(task.await?);
        }
        Ok((clients, faults.await?))
    }

    /// Every instance up (one that exited by itself is reported), the
    /// buyers' tidying, then the wait for quiet.
    async fn quiesce(&mut self, clients: Vec<Client>) -> (Vec<String>, Vec<Violation>) {
        let mut crashed = Vec::new();
        {
            let mut instances = self.instances.lock().await;
            for i in 0..instances.count() {
                if !instances.is_running(i) {
                    crashed.push(format!("instance {i} exited by itself during the run"));
                }
            }
            if let Err(e) = instances.start_all().await {
                return (
                    crashed,
                    vec![Violation::new(
                        "quiescence",
                        format!("an instance did not start again: {e:#}"),
                        vec![],
                    )],
                );
            }
        }
        let tidied = clients.into_iter().map(|mut c| async move {
            c.caller.client = format!("tidy-{}", c.caller.client);
            c.tidy().await;
        });
        futures_join_all(tidied).await;
        let quiet = match Reader::connect(self.database.url()).await {
            Ok(reader) => {
                let quiet =
                    crate::quiesce::await_quiet(&reader, &self.shows, self.config.quiet_deadline)
                        .await;
                reader.close().await;
                quiet
            }
            Err(e) => vec![Violation::new(
                "quiescence",
                format!("the database could not be read: {e:#}"),
                vec![],
            )],
        };
        (crashed, quiet)
    }

    async fn evidence(
        &self,
        faults: Vec<FaultWindow>,
        crashed: Vec<String>,
        quiet: bool,
    ) -> anyhow::Result<Evidence> {
        let reads = read_models(&self.api, &self.admin, &self.shows).await;
        let read_at_us = chrono::Utc::now().timestamp_micros();
        let verify = verify(&self.config.booking_bin, self.database.url()).await?;
        let reader = Reader::connect(self.database.url()).await?;
        let (log, ledger, phases) = (
            reader.events().await?,
            reader.ledger().await?,
            reader.phases().await?,
        );
        reader.close().await;
        Ok(Evidence {
            shows: self.shows.to_vec(),
            history: self.api.history().records(),
            log,
            ledger,
            phases,
            reads,
            read_at_us,
            faults,
            verify: verify.err(),
            max_entries: self.max_entries,
            crashed,
            quiet,
            setup: self.setup.clone(),
        })
    }
}

/// A failed run's event log (or any run's, with `--keep-history`), beside
/// its history (`.log.jsonl`): the database goes with the run.
fn keep_log(report: &Report, evidence: &Evidence) {
    let Some(history) = &report.history else {
        return;
    };
    let path = history.with_extension("log.jsonl");
    let lines: Vec<String> = (evidence.log.iter())
        .filter_map(|e| serde_json::to_string(e).ok())
        .collect();
    if let Err(e) = std::fs::write(&path, lines.join("\n")) {
        tracing::warn!(error = %e, "the event log was not kept");
    }
}

/// Awaits every future (the buyers' tidying runs concurrently).
async fn futures_join_all<F: std::future::Future<Output = ()> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    for handle in handles {
        if let Err(e) = handle.await {
            tracing::warn!(error = %e, "a tidying task failed");
        }
    }
}
