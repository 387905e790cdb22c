//! The JWT secret with the real binary: a short one stops it, and a random
//! one made up per start is printed on stderr, never in the log.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::support::TestEnv;
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![
        a_jwt_secret_shorter_than_32_bytes_stops_the_binary,
        a_random_jwt_secret_is_printed_on_stderr_and_never_logged,
    ]
}

fn serve(database_url: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_booking"));
    command
        .arg("serve")
        .env("DATABASE_URL", database_url)
        .env("BOOKING_ADDR", "127.0.0.1:0")
        .env("BOOKING_LOG_FORMAT", "json")
        .env("RUST_LOG", "info")
        .env_remove("BOOKING_JWT_SECRET")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

async fn a_jwt_secret_shorter_than_32_bytes_stops_the_binary(env: TestEnv) {
    let (database_url, _dir) = env.database_url().await;
    for secret in ["", "dev-secret-change-me", &"s".repeat(31)] {
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            serve(&database_url)
                .env("BOOKING_JWT_SECRET", secret)
                .output(),
        )
        .await
        .expect("the binary stops by itself")
        .unwrap();
        assert!(!output.status.success(), "{secret:?} must not start");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("BOOKING_JWT_SECRET") && stderr.contains("32 bytes"),
            "{secret:?}: {stderr}"
        );
    }
}

async fn a_random_jwt_secret_is_printed_on_stderr_and_never_logged(env: TestEnv) {
    let (database_url, _dir) = env.database_url().await;
    let mut child = serve(&database_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the booking binary starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stdout).lines();
    let mut log = String::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            log.push_str(&line);
            log.push('\n');
            let listening = serde_json::from_str::<Value>(&line)
                .is_ok_and(|entry| entry["fields"]["message"] == "booking is listening");
            if listening {
                return;
            }
        }
        panic!("the log ended before the service listened:\n{log}");
    })
    .await
    .expect("the service listens within a minute");
    child.kill().await.expect("kill");
    while let Ok(Some(line)) = lines.next_line().await {
        log.push_str(&line);
        log.push('\n');
    }
    let mut printed = String::new();
    stderr.read_to_string(&mut printed).await.expect("stderr");
    const SAID: &str = "this run's random secret is ";
    let secret: String = printed
        .split(SAID)
        .nth(1)
        .unwrap_or_else(|| panic!("stderr names the secret:\n{printed}"))
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    assert!(secret.len() >= 32, "{secret:?} in {printed}");
    assert!(!log.contains(&secret), "the log holds the secret:\n{log}");
    assert!(
        log.contains("BOOKING_JWT_SECRET is not set"),
        "the log still warns:\n{log}"
    );
}
