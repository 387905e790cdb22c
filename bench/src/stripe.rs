//! Checkout through Stripe's API, against localstripe (the fake Stripe
//! server the tests use), beside the simulator in the same run: 64 buyers
//! each holding a seat and buying it with a card (prepare, authorize,
//! convert, capture). Besides throughput and latency, the service's own
//! time per purchase: the purchase's mean latency minus the time its calls
//! to the provider took (`payment_latency_seconds{provider="stripe"}`).
//!
//! localstripe is one Python process: its throughput bounds this scenario,
//! which measures the service's overhead around a provider, not Stripe.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use booking::payment::stripe::{SecretKey, StripeSettings};
use booking::payment::ProviderSettings;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::report::Figures;
use crate::scenarios::{checkout_with, Payments};
use crate::Target;

/// A localstripe process, killed when dropped.
pub struct LocalStripe {
    pub base: String,
    _child: tokio::process::Child,
}

impl LocalStripe {
    pub async fn start() -> anyhow::Result<Self> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let python = std::env::var_os("LOCALSTRIPE_PYTHON")
            .map(Into::into)
            .unwrap_or_else(|| root.join("target/localstripe-venv/bin/python"));
        let mut child = tokio::process::Command::new(&python)
            .arg(root.join("tests/behaviour/tools/localstripe_server.py"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start localstripe with {}", python.display()))?;
        let stdout = child.stdout.take().context("localstripe's stdout")?;
        let port = tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(stdout).lines().next_line(),
        )
        .await
        .context("localstripe did not start")??
        .context("localstripe printed no port")?;
        let stripe = Self {
            base: format!("http://127.0.0.1:{}", port.trim()),
            _child: child,
        };
        let client = reqwest::Client::new();
        for _ in 0..600 {
            let up = client
                .get(format!("{}/v1/payment_intents?limit=1", stripe.base))
                .bearer_auth(SECRET_KEY)
                .send()
                .await;
            if up.is_ok() {
                return Ok(stripe);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("localstripe never answered")
    }

    /// A PaymentMethod of Stripe's test card that pays.
    pub async fn card(&self) -> anyhow::Result<String> {
        let pm: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/v1/payment_methods", self.base))
            .bearer_auth(SECRET_KEY)
            .form(&[
                ("type", "card"),
                ("card[number]", "4242424242424242"),
                ("card[exp_month]", "12"),
                ("card[exp_year]", "2034"),
                ("card[cvc]", "123"),
            ])
            .send()
            .await?
            .json()
            .await?;
        pm["id"]
            .as_str()
            .map(str::to_owned)
            .context("no PaymentMethod id")
    }
}

const SECRET_KEY: &str = "sk_test_bench";

/// The settings of a service paying through `stripe`.
pub fn provider(stripe: &LocalStripe) -> ProviderSettings {
    ProviderSettings::Stripe(StripeSettings {
        secret_key: SecretKey::new(SECRET_KEY.into()),
        api_base: stripe.base.clone(),
        webhook_secret: SecretKey::new("whsec_bench".into()),
        publishable_key: None,
        js_url: booking::config::DEFAULT_STRIPE_JS_URL.into(),
    })
}

/// The checkout through `target`, a service paying through `stripe`.
pub async fn checkout(
    target: &Target,
    stripe: &LocalStripe,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<Figures> {
    let mut methods = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        methods.push(stripe.card().await?);
    }
    let payments = Payments {
        provider: "stripe",
        methods: Arc::new(methods),
    };
    let label = "checkout (hold + purchase, Stripe API via localstripe)";
    checkout_with(target, concurrency, duration, "stripe", payments, label).await
}
