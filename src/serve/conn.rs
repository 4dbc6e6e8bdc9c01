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
//!   arrives at the cap, the connection idle the longest is closed to make room; when none is
//!   idle, the one that has been receiving a request body the longest is cut (a body still
//!   arriving holds no work, and slow bodies must not hold the server for a request deadline);
//!   a request being answered is never cut: when every connection is answering one, the new one
//!   waits, looking again every 50 ms, and the rest wait in the kernel's backlog. Running out
//!   of file descriptors below the cap (a low `ulimit -n`) makes room the same way. So idle
//!   sockets, however many, never stop `/health`.
//! - **Request deadline**: a request, body read included, is answered within
//!   [`Limits::request_timeout`] (408 past it) so a slow body cannot hold a slot forever. A
//!   handler about to make a lasting change claims the request's [`Commitment`] first: past
//!   that point its answer is awaited and given, never a 408 for a change that was made.
//! - **Request line**: a connection's first request line longer than [`MAX_REQUEST_LINE`] is
//!   answered `414` with a JSON body by us (hyper's own 414, past 64 KiB, has none); later
//!   requests on the connection are held to the same bound by the router.
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
    /// While a request body is arriving: 1 + milliseconds since the server started at which it
    /// began; 0 otherwise.
    receiving: AtomicU64,
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
            receiving: AtomicU64::new(0),
        });
        lock(&self.open).insert(id, slot.clone());
        (id, slot)
    }

    /// Ask the connection idle the longest to close, else the one receiving a request body the
    /// longest; false when every one is answering a request.
    fn make_room(&self) -> bool {
        let open = lock(&self.open);
        let idlest = open
            .values()
            .filter(|s| s.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|s| s.last.load(Ordering::Acquire));
        let slowest = || {
            open.values()
                .filter(|s| s.receiving.load(Ordering::Acquire) != 0)
                .min_by_key(|s| s.receiving.load(Ordering::Acquire))
        };
        match idlest.or_else(slowest) {
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

/// A request body that marks its connection as receiving until the body has arrived (or is
/// dropped), so that at the cap a slow body can be cut to make room.
struct Receiving {
    inner: Incoming,
    slot: Option<Arc<Slot>>,
}

impl Receiving {
    fn new(inner: Incoming, slot: &Arc<Slot>, now_ms: u64) -> Receiving {
        use hyper::body::Body as _;
        let slot = (!inner.is_end_stream()).then(|| {
            slot.receiving.store(now_ms + 1, Ordering::Release);
            slot.clone()
        });
        Receiving { inner, slot }
    }

    fn arrived(&mut self) {
        if let Some(s) = self.slot.take() {
            s.receiving.store(0, Ordering::Release);
        }
    }
}

impl hyper::body::Body for Receiving {
    type Data = axum::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let r = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        if let std::task::Poll::Ready(frame) = &r {
            if !matches!(frame, Some(Ok(_))) || this.inner.is_end_stream() {
                this.arrived();
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.arrived();
    }
}

/// A request's point of no return (a request extension): a handler claims it before a lasting
/// change, the deadline abandons it before answering 408, and only the first of the two wins.
#[derive(Debug, Clone, Default)]
pub struct Commitment(Arc<std::sync::atomic::AtomicU8>);

impl Commitment {
    const OPEN: u8 = 0;
    const CLAIMED: u8 = 1;
    const ABANDONED: u8 = 2;

    fn settle(&self, to: u8) -> bool {
        let (o, s) = (Ordering::AcqRel, Ordering::Acquire);
        match self.0.compare_exchange(Self::OPEN, to, o, s) {
            Ok(_) => true,
            Err(now) => now == to,
        }
    }

    /// The handler's claim: false when the deadline has already answered 408 (make no change).
    pub fn claim(&self) -> bool {
        self.settle(Self::CLAIMED)
    }

    /// The deadline's side: false when the handler has claimed (await its answer instead).
    fn abandon(&self) -> bool {
        self.settle(Self::ABANDONED)
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

/// Longest request line (method, target, version) accepted, in bytes.
pub const MAX_REQUEST_LINE: usize = 8 * 1024;

/// The `414` answer for a request line over [`MAX_REQUEST_LINE`].
pub fn uri_too_long_body() -> String {
    format!(
        r#"{{"error":{{"code":"URI_TOO_LONG","message":"the request line is longer than {MAX_REQUEST_LINE} bytes; send long queries as a POST body","status":414}}}}"#
    )
}

/// A stream that first replays bytes already read from it.
struct Rewind {
    prefix: Vec<u8>,
    pos: usize,
    inner: tokio::net::TcpStream,
}

impl tokio::io::AsyncRead for Rewind {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if this.pos < this.prefix.len() {
            let n = buf.remaining().min(this.prefix.len() - this.pos);
            buf.put_slice(&this.prefix[this.pos..this.pos + n]);
            this.pos += n;
            return std::task::Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Rewind {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Read until the end of the first request line. `Ok(Some(bytes read))` when it fits in
/// [`MAX_REQUEST_LINE`], `Ok(None)` when it does not (or the peer closed first).
async fn read_request_line(stream: &mut tokio::net::TcpStream) -> std::io::Result<Option<Vec<u8>>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        let before = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf[before..].iter().position(|b| *b == b'\n') {
            return Ok((before + i <= MAX_REQUEST_LINE).then_some(buf));
        }
        if buf.len() > MAX_REQUEST_LINE {
            return Ok(None);
        }
    }
}

async fn answer_uri_too_long(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let body = uri_too_long_body();
    let head = format!(
        "HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
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
                    accept_failed(&e, &conns, &mut last_warning).await;
                    continue;
                }
            },
        };
        let permit = match permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => match wait_for_room(&permits, &conns).await {
                Some(p) => p,
                None => break,
            },
        };
        let _ = stream.set_nodelay(true);
        let opened = conns.open();
        let conn = Connection {
            app: app.clone(),
            limits,
            conns: conns.clone(),
            stop: stop_rx.clone(),
            builder: builder.clone(),
        };
        tokio::spawn(async move {
            let _permit = permit;
            conn.run(stream, opened).await;
        });
    }
    // Stop: idle connections close now, busy ones after their answer (bounded wait).
    let _ = stop_tx.send(true);
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(limits.request_timeout, permits.acquire_many(all)).await;
    Ok(())
}

/// At the cap: make room, and while every connection is answering a request, look again every
/// [`ROOM_RETRY`] (a connection that has answered since and sits idle, or one that started
/// receiving a body, is then closed; red team: one look at arrival left a new connection waiting
/// for a free slot while busy keep-alive clients kept going idle and busy again).
async fn wait_for_room(
    permits: &Arc<Semaphore>,
    conns: &Conns,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    loop {
        let asked = conns.make_room();
        let retry = if asked { ROOM_RETRY * 10 } else { ROOM_RETRY };
        tokio::select! {
            p = permits.clone().acquire_owned() => return p.ok(),
            _ = tokio::time::sleep(retry) => {}
        }
    }
}

/// How often a connection waiting at the cap looks again for room.
const ROOM_RETRY: Duration = Duration::from_millis(50);

/// A failed accept. Out of descriptors (the process limit is below the cap): make room as at
/// the cap. Anything else (a reset before accept): wait, go on. Warns at most once a second.
async fn accept_failed(e: &std::io::Error, conns: &Conns, last_warning: &mut Option<Instant>) {
    let room = out_of_descriptors(e) && conns.make_room();
    if last_warning.is_none_or(|t: Instant| t.elapsed() > Duration::from_secs(1)) {
        crate::report::warn(&format!("kdd serve: accept failed: {e}"));
        *last_warning = Some(Instant::now());
    }
    let pause = if room { 5 } else { 50 };
    tokio::time::sleep(Duration::from_millis(pause)).await;
}

/// What one accepted connection needs from the server.
struct Connection {
    app: Router,
    limits: Limits,
    conns: Arc<Conns>,
    stop: watch::Receiver<bool>,
    builder: hyper::server::conn::http1::Builder,
}

impl Connection {
    /// Serve one connection until it closes, idles out, is evicted or the server stops; its
    /// slot is released in every case.
    async fn run(mut self, mut stream: tokio::net::TcpStream, (id, slot): (u64, Arc<Slot>)) {
        // The first request line, read by us so an overlong one gets a JSON 414; bounded by
        // the idle and header timeouts, and given up on eviction or shutdown.
        let wait = self.limits.header_timeout.min(self.limits.idle_timeout);
        let first = tokio::select! {
            r = tokio::time::timeout(wait, read_request_line(&mut stream)) => r.ok(),
            _ = slot.evict.notified() => None,
            _ = self.stop.changed() => None,
        };
        match first {
            Some(Ok(Some(prefix))) => {
                let io = Rewind {
                    prefix,
                    pos: 0,
                    inner: stream,
                };
                self.http(io, &slot).await;
            }
            Some(Ok(None)) => answer_uri_too_long(stream).await,
            _ => {}
        }
        lock(&self.conns.open).remove(&id);
    }

    /// The HTTP exchange on a connection whose first request line was read.
    async fn http(&mut self, io: Rewind, slot: &Arc<Slot>) {
        let limits = self.limits;
        let svc = {
            let (slot, conns, app) = (slot.clone(), self.conns.clone(), self.app.clone());
            hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                let guard = InFlight::new(&slot, &conns);
                let app = app.clone();
                let mut req = req.map(|b| Body::new(Receiving::new(b, &slot, conns.now_ms())));
                let point = Commitment::default();
                req.extensions_mut().insert(point.clone());
                async move {
                    use tower::ServiceExt;
                    let mut answer = std::pin::pin!(app.oneshot(req));
                    let r =
                        match tokio::time::timeout(limits.request_timeout, answer.as_mut()).await {
                            Ok(Ok(r)) => r,
                            Ok(Err(never)) => match never {},
                            Err(_) if point.abandon() => request_timeout_response(),
                            // Claimed: its change is being made; the answer says how it went.
                            Err(_) => match answer.await {
                                Ok(r) => r,
                                Err(never) => match never {},
                            },
                        };
                    drop(guard);
                    Ok::<_, std::convert::Infallible>(r)
                }
            })
        };
        let conn = self.builder.serve_connection(TokioIo::new(io), svc);
        tokio::pin!(conn);
        let mut closing = false;
        loop {
            // While a request is in flight, look again one idle period later.
            let idle_at = if slot.busy.load(Ordering::Acquire) > 0 {
                Instant::now() + limits.idle_timeout
            } else {
                self.conns.started
                    + Duration::from_millis(slot.last.load(Ordering::Acquire))
                    + limits.idle_timeout
            };
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = slot.evict.notified() => {
                    // Idle, or a body still arriving: closed now (no answer is owed work).
                    if slot.busy.load(Ordering::Acquire) == 0
                        || slot.receiving.load(Ordering::Acquire) != 0
                    {
                        break;
                    }
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
                _ = tokio::time::sleep_until(idle_at) => {
                    let idle = self.conns.now_ms().saturating_sub(slot.last.load(Ordering::Acquire));
                    if slot.busy.load(Ordering::Acquire) == 0
                        && idle >= limits.idle_timeout.as_millis() as u64
                    {
                        break;
                    }
                }
                _ = self.stop.changed(), if !closing => {
                    if slot.busy.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Commitment;

    #[test]
    fn the_first_of_claim_and_abandon_wins() {
        let p = Commitment::default();
        assert!(p.claim() && p.claim(), "a claim holds");
        assert!(!p.abandon(), "the deadline awaits a claimed request");
        let q = Commitment::default();
        assert!(q.abandon() && q.abandon());
        assert!(!q.claim(), "no change after a 408");
    }
}
