//! The connection layer under the HTTP router: our own accept loop over hyper's HTTP/1.1
//! server (axum's `serve` exposes none of these settings), so a shared server cannot be held
//! down by sockets that send nothing, send slowly or never leave.
//!
//! Guarantees (each tested in `tests/it/hostile/net.rs`):
//! - **Header-read timeout**: a request head (request line + headers) must arrive complete
//!   within [`Limits::header_timeout`] of the connection opening or of the previous response
//!   (hyper's `header_read_timeout` with a tokio timer); a slow-loris is closed.
//! - **Idle keep-alive timeout**: a connection with no request in flight for
//!   [`Limits::idle_timeout`] is closed.
//! - **Connection cap**: at most [`Limits::max_connections`] are open at once. When a new one
//!   arrives at the cap, the connection idle the longest is closed to make room (never one with
//!   a request in flight); when every connection is busy, new ones wait in the kernel's
//!   backlog. Running out of file descriptors below the cap (a low `ulimit -n`) makes room
//!   the same way. So idle sockets, however many, never stop `/health`.
//! - **Request deadline**: a request, body read included, is answered within
//!   [`Limits::request_timeout`] (408 past it) so a slow body cannot hold a slot forever.
//! - Shutdown stops accepting, lets requests in flight finish, and closes idle connections.

use axum::body::Body;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;

/// Connection limits of the HTTP server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time allowed for a complete request head.
    pub header_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Time allowed for a whole request (body read and answer).
    pub request_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(5),
            max_connections: 256,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// One open connection, as the accept loop sees it.
struct Slot {
    /// Requests in flight.
    busy: AtomicUsize,
    /// Milliseconds since the server started at which the last request ended (or the
    /// connection opened).
    last: AtomicU64,
    /// Asked to close (cap reached and this one idle the longest).
    evict: Notify,
}

struct Conns {
    started: Instant,
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Slot>>>,
}

impl Conns {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn open(&self) -> (u64, Arc<Slot>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot {
            busy: AtomicUsize::new(0),
            last: AtomicU64::new(self.now_ms()),
            evict: Notify::new(),
        });
        lock(&self.open).insert(id, slot.clone());
        (id, slot)
    }

    /// Ask the connection idle the longest to close; false when every one is busy.
    fn evict_idlest(&self) -> bool {
        let open = lock(&self.open);
        let idlest = open
            .values()
            .filter(|s| s.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|s| s.last.load(Ordering::Acquire));
        match idlest {
            Some(s) => {
                s.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// `accept` failed for want of file descriptors (process or system limit).
fn out_of_descriptors(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    {
        matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Marks a request in flight on its connection for as long as it lives.
struct InFlight(Arc<Slot>, Arc<Conns>);

impl InFlight {
    fn new(slot: &Arc<Slot>, conns: &Arc<Conns>) -> InFlight {
        slot.busy.fetch_add(1, Ordering::AcqRel);
        InFlight(slot.clone(), conns.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.last.store(self.1.now_ms(), Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

fn request_timeout_response() -> axum::response::Response {
    let body = r#"{"error":{"code":"REQUEST_TIMEOUT","message":"the request was not received and answered in time","status":408}}"#;
    let mut r = axum::response::Response::new(Body::from(body));
    *r.status_mut() = axum::http::StatusCode::REQUEST_TIMEOUT;
    let h = r.headers_mut();
    h.insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    h.insert(
        axum::http::header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    r
}

/// Serve `app` on `listener` with `limits` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let max = limits.max_connections.max(1);
    let permits = Arc::new(Semaphore::new(max));
    let conns = Arc::new(Conns {
        started: Instant::now(),
        next: AtomicU64::new(0),
        open: Mutex::new(BTreeMap::new()),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    let mut last_warning = None;
    loop {
        let (stream, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of descriptors (the process limit is below the cap): make room as
                    // at the cap. Anything else (a reset before accept): wait, go on.
                    let room = out_of_descriptors(&e) && conns.evict_idlest();
                    if last_warning.is_none_or(|t: Instant| t.elapsed() > Duration::from_secs(1)) {
                        crate::cli::output::warn(&format!("kdd serve: accept failed: {e}"));
                        last_warning = Some(Instant::now());
                    }
                    let pause = if room { 5 } else { 50 };
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                    continue;
                }
            },
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                conns.evict_idlest();
                match permits.clone().acquire_owned().await {
                    Ok(p) => p,
                    Err(_) => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, slot) = conns.open();
        let svc = {
            let (slot, conns, app) = (slot.clone(), conns.clone(), app.clone());
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let guard = InFlight::new(&slot, &conns);
                let app = app.clone();
                async move {
                    use tower::ServiceExt;
                    let answer = app.oneshot(req.map(Body::new));
                    let r = match tokio::time::timeout(limits.request_timeout, answer).await {
                        Ok(Ok(r)) => r,
                        Ok(Err(never)) => match never {},
                        Err(_) => request_timeout_response(),
                    };
                    drop(guard);
                    Ok::<_, std::convert::Infallible>(r)
                }
            })
        };
        let conn = builder.serve_connection(TokioIo::new(stream), svc);
        let (conns, mut stop_rx) = (conns.clone(), stop_rx.clone());
        tokio::spawn(async move {
            let _permit = permit;
            tokio::pin!(conn);
            let mut closing = false;
            loop {
                // While a request is in flight, look again one idle period later.
                let idle_at = if slot.busy.load(Ordering::Acquire) > 0 {
                    Instant::now() + limits.idle_timeout
                } else {
                    conns.started
                        + Duration::from_millis(slot.last.load(Ordering::Acquire))
                        + limits.idle_timeout
                };
                tokio::select! {
                    _ = conn.as_mut() => break,
                    _ = slot.evict.notified() => {
                        if slot.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                    _ = tokio::time::sleep_until(idle_at) => {
                        let idle = conns.now_ms().saturating_sub(slot.last.load(Ordering::Acquire));
                        if slot.busy.load(Ordering::Acquire) == 0
                            && idle >= limits.idle_timeout.as_millis() as u64
                        {
                            break;
                        }
                    }
                    _ = stop_rx.changed(), if !closing => {
                        if slot.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        conn.as_mut().graceful_shutdown();
                        closing = true;
                    }
                }
            }
            lock(&conns.open).remove(&id);
        });
    }
    // Stop: idle connections close now, busy ones after their answer (bounded wait).
    let _ = stop_tx.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.request_timeout, permits.acquire_many(all)).await;
    Ok(())
}
