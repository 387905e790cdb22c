//! The shows created at the start of a run, by an admin, each confirmed as
//! the service reads it back.

use reqwest::Method;

use crate::api::{Api, Caller, Request};
use crate::report::Violation;
use crate::shows::ShowSpec;

/// The waiting lists' cap the checker asks for when the service takes
/// one: small, so that it is reached within a run.
pub const CHECKER_MAX_ENTRIES: usize = 6;

/// Whether the service takes `waitlist.max_entries`: a show that asks for
/// it is created (a throwaway show), or refused naming the field.
pub async fn takes_max_entries(
    api: &Api,
    admin: &Caller,
    probe: &ShowSpec,
) -> anyhow::Result<bool> {
    let mut probe = probe.clone();
    probe.show_id = "probe-max-entries".into();
    probe.max_entries = Some(CHECKER_MAX_ENTRIES);
    let request = Request::new(
        "setup_probe",
        Method::PUT,
        format!("/v1/shows/{}", probe.show_id),
    )
    .body(probe.definition());
    let outcome = api.send(admin, 0, request).await;
    match outcome.status() {
        Some(200 | 201) => Ok(true),
        Some(422) => Ok(false),
        other => anyhow::bail!("probing waitlist.max_entries: {other:?} {}", outcome.body()),
    }
}

/// Creates `shows`; what the service answers that the contract does not
/// allow is returned as violations.
pub async fn create_shows(
    api: &Api,
    admin: &Caller,
    shows: &[ShowSpec],
) -> anyhow::Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for show in shows {
        let path = format!("/v1/shows/{}", show.show_id);
        let put = api
            .send(
                admin,
                0,
                Request::new("setup_show", Method::PUT, path.clone()).body(show.definition()),
            )
            .await;
        if put.status() != Some(201) {
            anyhow::bail!(
                "creating {}: {:?} {}",
                show.show_id,
                put.status(),
                put.body()
            );
        }
        let read = api
            .send(admin, 0, Request::new("setup_read_show", Method::GET, path))
            .await;
        // The fifth wave: `ticket_types` is always listed, the default
        // type when the definition names none.
        let listed = read.body()["ticket_types"]
            .as_array()
            .is_some_and(|t| !t.is_empty());
        if !listed {
            violations.push(Violation::new(
                "show_lists_ticket_types",
                format!("GET /v1/shows/{} lists no ticket_types", show.show_id),
                vec![show.show_id.clone()],
            ));
        }
    }
    Ok(violations)
}
