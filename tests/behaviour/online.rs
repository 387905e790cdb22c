//! Operator tools while the service runs: `booking replay` during an onsale
//! loses no acknowledged hold or booking.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use reqwest::{Method, StatusCode};

use crate::audit::verify_exit_code;
use crate::support::{TestApp, TestEnv};
use crate::tests;

pub fn tests() -> Vec<(&'static str, crate::TestFn)> {
    tests![replay_during_holds_and_purchases_loses_no_acknowledged_work]
}

/// Seats of the show: more than the buyers can take while replay runs.
const SEATS: usize = 2_000;
/// Buyers holding and buying at once.
const BUYERS: usize = 8;
/// Replays run one after another while the buyers go on.
const REPLAYS: usize = 3;

/// What a buyer was told: 201 for this hold (and, if bought, this booking).
struct Acknowledged {
    token: String,
    hold_id: String,
    seat: String,
    booking_id: Option<String>,
}

async fn buyer_loop(
    app: Arc<TestApp>,
    buyer: usize,
    next_seat: Arc<AtomicUsize>,
    done: Arc<AtomicBool>,
) -> Vec<Acknowledged> {
    let token = app.buyer(&format!("online{buyer}"));
    let mut told = Vec::new();
    while !done.load(Ordering::SeqCst) {
        let n = next_seat.fetch_add(1, Ordering::SeqCst) + 1;
        if n > SEATS {
            break;
        }
        let seat = format!("S{n}");
        let held = app.hold(&token, "online", &[seat.as_str()], None).await;
        assert_eq!(held.status, StatusCode::CREATED, "{}", held.body);
        let hold_id = held.str("hold_id");
        // Every other hold is bought.
        let booking_id = if n % 2 == 0 {
            let bought = app.purchase(&token, &hold_id, "pm_sim_ok").await;
            assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.body);
            Some(bought.str("booking_id"))
        } else {
            None
        };
        told.push(Acknowledged {
            token: token.clone(),
            hold_id,
            seat,
            booking_id,
        });
    }
    told
}

async fn replay_during_holds_and_purchases_loses_no_acknowledged_work(env: TestEnv) {
    let app = Arc::new(env.spawn().await);
    assert_eq!(
        app.create_show("online", SEATS, 480).await.status,
        StatusCode::CREATED
    );
    let next_seat = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let buyers: Vec<_> = (0..BUYERS)
        .map(|b| tokio::spawn(buyer_loop(app.clone(), b, next_seat.clone(), done.clone())))
        .collect();
    let url = app.database_url.clone();
    let replays = tokio::task::spawn_blocking(move || {
        (0..REPLAYS)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_booking"))
                    .arg("replay")
                    .env("DATABASE_URL", &url)
                    .env("RUST_LOG", "error")
                    .output()
                    .expect("booking replay runs")
            })
            .collect::<Vec<_>>()
    });
    let outputs = replays.await.expect("replays");
    let during = next_seat.load(Ordering::SeqCst);
    done.store(true, Ordering::SeqCst);
    for output in &outputs {
        assert!(
            output.status.success(),
            "replay: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let mut told = Vec::new();
    for buyer in buyers {
        told.extend(buyer.await.expect("buyer"));
    }
    assert!(
        during >= BUYERS,
        "buyers were holding while replay ran ({during} seats taken)"
    );

    let statuses = app.seat_statuses("online").await;
    for ack in &told {
        let hold = app
            .call(
                Method::GET,
                &format!("/v1/holds/{}", ack.hold_id),
                Some(&ack.token),
                None,
                &[],
            )
            .await;
        assert_eq!(
            hold.status,
            StatusCode::OK,
            "hold {}: {}",
            ack.hold_id,
            hold.body
        );
        match &ack.booking_id {
            Some(booking_id) => {
                assert_eq!(hold.str("status"), "converted", "{}", hold.body);
                let booking = app
                    .call(
                        Method::GET,
                        &format!("/v1/bookings/{booking_id}"),
                        Some(&ack.token),
                        None,
                        &[],
                    )
                    .await;
                assert_eq!(booking.status, StatusCode::OK, "{}", booking.body);
                assert_eq!(booking.str("status"), "confirmed", "{}", booking.body);
                assert_eq!(statuses[&ack.seat], "booked", "seat {}", ack.seat);
            }
            None => {
                assert_eq!(hold.str("status"), "held", "{}", hold.body);
                assert_eq!(statuses[&ack.seat], "held", "seat {}", ack.seat);
            }
        }
    }
    let (code, report) = verify_exit_code(&app);
    assert_eq!(code, 0, "verify after replays under load: {report}");
}
