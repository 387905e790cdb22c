//! Write-ahead log marks: how many bytes of WAL a scenario made the
//! cluster write, per success.

use sqlx::Connection;

use crate::report::Figures;

/// A point in PostgreSQL's write-ahead log. The difference between two is
/// how many bytes of WAL the cluster wrote in between: every commit waits for
/// its WAL to be flushed, so bytes per hold is the write amplification that
/// bounds a write-heavy scenario. Exact and immediate, unlike `pg_stat_wal`,
/// which backends report only every second or so.
#[derive(Clone)]
pub struct WalMark(f64, String);

impl WalMark {
    pub async fn now(url: &str) -> anyhow::Result<Self> {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let (lsn, text): (f64, String) = sqlx::query_as(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8, \
             pg_current_wal_insert_lsn()::text",
        )
        .fetch_one(&mut conn)
        .await?;
        conn.close().await?;
        Ok(Self(lsn, text))
    }

    /// With `BENCH_WALDUMP=<the server's pg_wal directory>` (and read access
    /// to it), what the WAL since this mark consists of, by record type
    /// (`pg_waldump --stats=record`), into `target/waldump-<scenario>.txt`.
    async fn dump(&self, url: &str, scenario: &str) -> anyhow::Result<()> {
        let Ok(dir) = std::env::var("BENCH_WALDUMP") else {
            return Ok(());
        };
        let end = Self::now(url).await?;
        let output = tokio::process::Command::new("/usr/lib/postgresql/15/bin/pg_waldump")
            .args(["--stats=record", "-p", &dir, "-s", &self.1, "-e", &end.1])
            .output()
            .await?;
        let name: String = scenario
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::fs::write(format!("target/waldump-{name}.txt"), &output.stdout)?;
        Ok(())
    }

    /// "WAL per success" since this mark, over the `ok` answers of `figures`,
    /// appended to its note. Cluster-wide: it includes the service's
    /// background work (projector checkpoint) during the scenario.
    pub async fn annotate(self, url: &str, figures: &mut Figures) -> anyhow::Result<()> {
        self.dump(url, &format!("{}-{}", figures.scenario, figures.store))
            .await?;
        let bytes = Self::now(url).await?.0 - self.0;
        let per = bytes / figures.ok.max(1) as f64;
        let wal = format!("WAL per success: {per:.0} bytes");
        figures.note = if figures.note.is_empty() {
            wal
        } else {
            format!("{}; {wal}", figures.note)
        };
        Ok(())
    }
}
