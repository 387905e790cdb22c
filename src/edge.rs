//! The connection edge: our own accept loop over hyper-util's auto builder,
//! so that a hostile crowd cannot hold connections or descriptors forever.
//!
//! - A cap on open connections: a permit of a semaphore is taken *before*
//!   `accept`, so past the cap new connections wait in the kernel's backlog
//!   instead of costing a descriptor each. The cap is kept below the
//!   process's descriptor limit (raised to its hard limit at start).
//! - Per connection, a watchdog closes it when its first request head has
//!   not fully arrived `header_timeout` after accept, or a later head
//!   `header_timeout` after its first byte; or when it has been idle (no
//!   request in flight, no byte of a next head) for `idle_timeout`.
//! - After the shutdown signal: no more accepts; every open connection is
//!   asked to finish its request in flight and close (hyper's graceful
//!   shutdown); the caller bounds that with its grace period.
//!
//! hyper's own http1 header timer is left off: since hyper 1.4 it also runs
//! while a keep-alive connection waits for its next request, so it would
//! close every idle connection at the header timeout, not the idle one.
//! "In flight" lasts from the request head until the response body has been
//! written out (the guard rides in the body), so a slow reader of a large
//! answer is not cut off by the idle timer, and a long handler is not either
//! (the request timeout, `http/timeout.rs`, bounds it). A body that stalls
//! is the extractor's: `http::extract::BODY_READ_TIMEOUT`, 408, close.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// Default for `BOOKING_HEADER_TIMEOUT_SECONDS`: a real client sends its
/// request head in one packet; 10 s covers a slow mobile link.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for `BOOKING_IDLE_TIMEOUT_SECONDS`: above the usual 30-60 s of
/// client and load-balancer pools, so we are rarely the side that closes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default for `BOOKING_REQUEST_TIMEOUT_SECONDS`: the slowest honest request
/// is a purchase waiting on the payment provider (seconds); 30 s is where a
/// client has given up anyway.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Default for `BOOKING_MAX_CONNECTIONS`: an onsale's crowd on one instance;
/// clamped below the descriptor limit at start.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 10_000;

/// Descriptors kept for everything that is not a client connection: the
/// listener, stdio, the runtime's epoll and event fds, SQLite's database,
/// WAL and shm files, DNS and TLS reads. Database connections are added to
/// it (they are counted separately, from the pool size).
pub const DESCRIPTOR_RESERVE: u64 = 64;
/// PostgreSQL opens this many connections beyond the command pool (kept for
/// availability queries; see store::connect).
pub const EXTRA_DB_CONNECTIONS: u64 = 4;
/// After an accept error (a descriptor limit reached elsewhere in the
/// process, a connection reset before accept), retrying at once would spin
/// on the same error; a short pause lets descriptors come back.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The client connection a request came on, for a handler that tunes it
/// (a live stream bounds its send buffer). Valid while the request is
/// served: the connection outlives its requests.
#[derive(Debug, Clone, Copy)]
pub struct ClientSocket(std::os::fd::RawFd);

impl ClientSocket {
    /// Fixes the kernel's send buffer of this connection at `bytes` (Linux
    /// doubles it for bookkeeping), instead of letting it grow to
    /// `net.ipv4.tcp_wmem`'s maximum (4 MB by default): what a reader that
    /// stopped reading can make the kernel keep for it.
    pub fn bound_send_buffer(self, bytes: usize) -> std::io::Result<()> {
        let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        // SAFETY: the descriptor is the live connection's (see above); the
        // option value is a c_int of the size given.
        let done = unsafe {
            libc::setsockopt(
                self.0,
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                std::ptr::addr_of!(value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if done == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct EdgeSettings {
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_connections: u32,
    /// Live availability streams at once (`live::DEFAULT_MAX_SUBSCRIBERS`);
    /// each also holds one of the connections above.
    pub max_subscribers: usize,
}

impl Default for EdgeSettings {
    fn default() -> Self {
        Self {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_subscribers: crate::live::DEFAULT_MAX_SUBSCRIBERS,
        }
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard limit, logs both, and returns
/// the connection cap: `requested`, or less if the limit cannot hold it
/// beside the reserve and the database connections.
pub fn connection_cap(requested: u32, database_connections: u32) -> usize {
    let reserve = DESCRIPTOR_RESERVE + u64::from(database_connections) + EXTRA_DB_CONNECTIONS;
    let soft = match raise_descriptor_limit() {
        Ok((soft, hard)) => {
            tracing::info!(soft, hard, "file descriptor limit (soft raised to hard)");
            soft
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the file descriptor limit");
            return requested as usize;
        }
    };
    let room = soft.saturating_sub(reserve).max(1);
    if u64::from(requested) > room {
        tracing::warn!(
            requested,
            clamped = room,
            descriptor_limit = soft,
            reserve,
            "BOOKING_MAX_CONNECTIONS is above the descriptor limit minus the reserve; clamped"
        );
        usize::try_from(room).unwrap_or(requested as usize)
    } else {
        requested as usize
    }
}

/// (soft, hard) after raising soft to hard.
fn raise_descriptor_limit() -> io::Result<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; no other memory.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we own; no other memory.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        } else {
            tracing::warn!(error = %io::Error::last_os_error(), "cannot raise the soft descriptor limit");
        }
    }
    // rlim_t is u64 on Linux but not on every unix.
    #[allow(clippy::unnecessary_cast)]
    Ok((limit.rlim_cur as u64, limit.rlim_max as u64))
}

/// What the watchdog of one connection looks at.
struct Activity {
    state: Mutex<State>,
    changed: Notify,
}

struct State {
    in_flight: usize,
    /// Since when nothing has been in flight (accept, or the last response).
    quiet_since: Instant,
    /// First byte of a next request head, while nothing is in flight.
    head_started: Option<Instant>,
    /// No request yet: the header timer runs from accept.
    first: bool,
}

impl Activity {
    fn new() -> Self {
        Self {
            state: Mutex::new(State {
                in_flight: 0,
                quiet_since: Instant::now(),
                head_started: None,
                first: true,
            }),
            changed: Notify::new(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut state)
    }

    fn bytes_read(&self) {
        let started = self.with(|s| {
            let starts = s.in_flight == 0 && s.head_started.is_none() && !s.first;
            if starts {
                s.head_started = Some(Instant::now());
            }
            starts
        });
        if started {
            self.changed.notify_one();
        }
    }

    fn begin(self: &Arc<Self>) -> InFlight {
        self.with(|s| {
            s.in_flight += 1;
            s.head_started = None;
            s.first = false;
        });
        self.changed.notify_one();
        InFlight(self.clone())
    }

    /// When the connection must be closed if nothing changes; `None` while a
    /// request is in flight.
    fn deadline(&self, edge: &EdgeSettings) -> Option<Instant> {
        self.with(|s| {
            if s.in_flight > 0 {
                None
            } else if s.first {
                Some(s.quiet_since + edge.header_timeout)
            } else if let Some(started) = s.head_started {
                Some(started + edge.header_timeout)
            } else {
                Some(s.quiet_since + edge.idle_timeout)
            }
        })
    }
}

/// A request in flight, until its response body is written (or dropped).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.with(|s| {
            s.in_flight = s.in_flight.saturating_sub(1);
            s.quiet_since = Instant::now();
        });
        self.0.changed.notify_one();
    }
}

/// Completes when the connection has overstayed its header or idle timer.
async fn overstayed(activity: &Activity, edge: &EdgeSettings) {
    loop {
        // `notify_one` stores a permit if nobody waits: no change is missed
        // between reading the deadline and waiting.
        match activity.deadline(edge) {
            None => activity.changed.notified().await,
            Some(deadline) => {
                if Instant::now() >= deadline {
                    return;
                }
                tokio::select! {
                    () = activity.changed.notified() => {}
                    () = tokio::time::sleep_until(deadline.into()) => {}
                }
            }
        }
    }
}

/// The TCP stream, telling the watchdog when bytes arrive.
struct Watched {
    stream: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Accepts and serves connections until `shutdown` completes, then stops
/// accepting, asks every connection to finish and close, and returns once
/// all are closed (the caller bounds that wait with its grace period).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    edge: EdgeSettings,
    max_connections: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let permits = Arc::new(Semaphore::new(max_connections));
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder.http1().keep_alive(true).header_read_timeout(None);
    tokio::pin!(shutdown);
    while let Some(accepted) = next_connection(&listener, &permits, &mut shutdown).await {
        tokio::spawn(serve_connection(
            accepted,
            router.clone(),
            builder.clone(),
            edge,
            closing_rx.clone(),
        ));
    }
    drop(listener);
    let _ = closing_tx.send(true);
    // Every connection holds a permit until it is closed.
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
}

/// The next connection, accepted once a permit is free (so past the cap new
/// connections wait in the kernel's backlog); `None` once `shutdown` has
/// completed.
async fn next_connection(
    listener: &TcpListener,
    permits: &Arc<Semaphore>,
    shutdown: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> Option<Accepted> {
    loop {
        let permit = tokio::select! {
            () = &mut *shutdown => return None,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return None,
            },
        };
        let (stream, peer) = tokio::select! {
            () = &mut *shutdown => return None,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept error");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
        };
        return Some(Accepted::new(stream, peer, permit));
    }
}

/// A connection just accepted, with what its task needs. Its watchdog's
/// clock starts here, at accept, not when the task first runs.
struct Accepted {
    io: TokioIo<Watched>,
    socket: ClientSocket,
    peer: SocketAddr,
    activity: Arc<Activity>,
    /// Held until the connection is closed: the cap on open connections.
    permit: OwnedSemaphorePermit,
}

impl Accepted {
    fn new(stream: TcpStream, peer: SocketAddr, permit: OwnedSemaphorePermit) -> Self {
        let _ = stream.set_nodelay(true);
        let socket = ClientSocket(std::os::fd::AsRawFd::as_raw_fd(&stream));
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            stream,
            activity: activity.clone(),
        });
        Self {
            io,
            socket,
            peer,
            activity,
            permit,
        }
    }
}

/// Serves one connection until it ends or overstays its timers; once
/// `closing` turns true, asks it to finish its request in flight and close.
async fn serve_connection(
    accepted: Accepted,
    router: Router,
    builder: hyper_util::server::conn::auto::Builder<TokioExecutor>,
    edge: EdgeSettings,
    mut closing: tokio::sync::watch::Receiver<bool>,
) {
    let Accepted {
        io,
        socket,
        peer,
        activity,
        permit: _permit,
    } = accepted;
    let service_activity = activity.clone();
    let service =
        hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
            route(&router, socket, peer, &service_activity, request)
        });
    let connection = builder.serve_connection_with_upgrades(io, service);
    tokio::pin!(connection);
    tokio::select! {
        served = connection.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            return;
        }
        // Dropping the connection closes it: nothing is in flight.
        () = overstayed(&activity, &edge) => return,
        _ = closing.wait_for(|closing| *closing) => {
            connection.as_mut().graceful_shutdown();
        }
    }
    tokio::select! {
        served = connection.as_mut() => {
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error while closing");
            }
        }
        // A head that never completes does not hold the shutdown.
        () = overstayed(&activity, &edge) => {}
    }
}

/// Routes one request, with what handlers read from its connection; the
/// request counts as in flight until its response body is done.
fn route(
    router: &Router,
    socket: ClientSocket,
    peer: SocketAddr,
    activity: &Arc<Activity>,
    mut request: hyper::Request<hyper::body::Incoming>,
) -> impl std::future::Future<Output = Result<axum::response::Response, std::convert::Infallible>>
       + Send
       + 'static {
    request.extensions_mut().insert(socket);
    // The client's address, as axum's `ConnectInfo` (the
    // rate limit of requests without a token is per address).
    request.extensions_mut().insert(ConnectInfo(peer));
    let in_flight = activity.begin();
    let router = router.clone();
    async move {
        let response = router.oneshot(request.map(Body::new)).await?;
        // The guard lives as long as the body: dropped when
        // hyper has written it out, or given up on it.
        Ok::<_, std::convert::Infallible>(response.map(move |body| {
            Body::new(body.map_err(move |e| {
                let _ = &in_flight;
                e
            }))
        }))
    }
}
