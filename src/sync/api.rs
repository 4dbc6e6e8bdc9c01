//! The API transport, client side: `POST /v1/index/push` and `GET /v1/index/pull` on a
//! `kdd serve` (server side in `serve/sync.rs`), bodies in the [`super::bundle`] form, bearer
//! token from `KDD_TOKEN`.
//!
//! A deliberately small HTTP/1.1 client over `std::net::TcpStream` (plain `http://` only — put
//! a TLS-terminating proxy in front of a server reached over a network; one request per
//! connection, `Connection: close`, bounded answer size, connect/read/write timeouts), so the
//! transport adds no dependency. Status codes map to CMD-005 errors: connection failures →
//! `REMOTE_UNREACHABLE`, 401/403 → `AUTH_FAILED`, 409/413/422 → `PUSH_REJECTED`, 404 on pull →
//! `NO_REMOTE_INDEX`. The pulled index is merged into the local one per BR-MERGE-001
//! (`merge::refs::merge_file_sets`: the local side counts as the newer write) and installed only
//! when everything succeeded.

use super::{bundle, count, Error, Report};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// Largest pull answer accepted (bytes).
pub const MAX_ANSWER: usize = 256 << 20;
const TIMEOUT: Duration = Duration::from_secs(120);
/// Longest a whole answer may take to arrive (a server sending a byte a second never trips the
/// per-read timeout; red team, nineteenth round). 256 MiB at 1 MB/s fits.
const DEADLINE: Duration = Duration::from_secs(300);

/// Read the answer until the server closes, at most `max` bytes: its header within
/// [`TIMEOUT`], the whole of it within [`DEADLINE`].
fn read_answer(s: &mut TcpStream, max: u64, raw: &mut Vec<u8>) -> std::io::Result<()> {
    use std::io::ErrorKind::{TimedOut, WouldBlock};
    let start = std::time::Instant::now();
    let mut buf = [0u8; 64 * 1024];
    let mut headed = false;
    while (raw.len() as u64) < max {
        // Only the bytes new since the last read (and the 3 before them) are searched.
        let (limit, what) = match headed {
            true => (DEADLINE, "the answer"),
            false => (TIMEOUT, "the answer's header"),
        };
        let left = (start + limit).saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            let why = format!("{what} took longer than {} s", limit.as_secs());
            return Err(std::io::Error::new(TimedOut, why));
        }
        let wait = left.min(TIMEOUT);
        s.set_read_timeout(Some(wait))?;
        let want = buf.len().min((max - raw.len() as u64) as usize);
        match s.read(&mut buf[..want]) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                let from = raw.len().saturating_sub(3);
                raw.extend_from_slice(&buf[..n]);
                headed = headed || raw[from..].windows(4).any(|w| w == b"\r\n\r\n");
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), WouldBlock | TimedOut) => {
                let why = match wait < TIMEOUT {
                    true => format!("{what} took longer than {} s", limit.as_secs()),
                    false => format!("the server sent nothing for {} s", wait.as_secs()),
                };
                return Err(std::io::Error::new(TimedOut, why));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A parsed `http://host:port[/prefix]` base URL.
#[derive(Debug, Clone)]
struct Base {
    authority: String,
    prefix: String,
}

fn parse_url(url: &str) -> Result<Base, Error> {
    let unreachable = |d: &str| Error::RemoteUnreachable {
        remote: url.to_string(),
        detail: d.to_string(),
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| unreachable("only http:// URLs are supported (put TLS in a proxy)"))?;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() || authority.contains('@') {
        return Err(unreachable("the URL needs a host[:port] and no user info"));
    }
    let authority = if authority.contains(':') && !authority.ends_with(']') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let prefix = path.trim_end_matches('/');
    Ok(Base {
        authority,
        prefix: if prefix.is_empty() {
            String::new()
        } else {
            format!("/{prefix}")
        },
    })
}

/// One answer: status, `x-kdd-…`/error code, body.
struct Answer {
    status: u16,
    body: Vec<u8>,
}

impl Answer {
    /// The `error.code` and `error.message` of a JSON error body, when there is one.
    fn error(&self) -> (String, String) {
        let v: serde_json::Value = serde_json::from_slice(&self.body).unwrap_or_default();
        (
            v["error"]["code"].as_str().unwrap_or("").to_string(),
            v["error"]["message"].as_str().unwrap_or("").to_string(),
        )
    }
}

fn request(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Result<Answer, Error> {
    let base = parse_url(url)?;
    let unreachable = |d: String| Error::RemoteUnreachable {
        remote: url.to_string(),
        detail: d,
    };
    let addr = base
        .authority
        .to_socket_addrs()
        .map_err(|e| unreachable(e.to_string()))?
        .next()
        .ok_or_else(|| unreachable("no address".into()))?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = s.set_read_timeout(Some(TIMEOUT));
    let _ = s.set_write_timeout(Some(TIMEOUT));
    let host = base.authority.trim_end_matches(":80");
    let mut head = format!(
        "{method} {}{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        base.prefix,
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let io = |e: std::io::Error| Error::transport(method, e);
    // A server may answer (413, 401) and close before the whole body is sent: read its answer
    // even when writing failed, and report the write error only when there is none.
    let sent = s.write_all(head.as_bytes()).and_then(|_| s.write_all(body));
    let mut raw = Vec::new();
    let read = read_answer(&mut s, MAX_ANSWER as u64 + 64 * 1024, &mut raw);
    // Past a deadline what arrived is a part of the answer at best.
    if let Err(e) = read.as_ref() {
        if e.kind() == std::io::ErrorKind::TimedOut {
            return Err(Error::transport(method, e));
        }
    }
    match parse_answer(&raw) {
        Some(a) => Ok(a),
        None => {
            sent.map_err(io)?;
            read.map_err(io)?;
            Err(Error::transport(method, "malformed HTTP answer"))
        }
    }
}

fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
            {
                chunked = true;
            }
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Some(Answer { status, body })
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let nl = b.windows(2).position(|w| w == b"\r\n")?;
        let size_s = std::str::from_utf8(&b[..nl]).ok()?;
        let size = usize::from_str_radix(size_s.split(';').next()?.trim(), 16).ok()?;
        b = &b[nl + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..size)?);
        b = b.get(size + 2..)?;
    }
}

fn token_header() -> Vec<(&'static str, String)> {
    match std::env::var(crate::config::env::TOKEN) {
        Ok(t) if !t.trim().is_empty() => vec![("Authorization", format!("Bearer {}", t.trim()))],
        _ => Vec::new(),
    }
}

fn fail(url: &str, direction: &str, a: &Answer) -> Error {
    let (code, message) = a.error();
    let remote = url.to_string();
    match a.status {
        401 | 403 => Error::AuthFailed {
            remote,
            detail: message,
        },
        404 if direction == "pull" && code == "NO_REMOTE_INDEX" => Error::NoRemoteIndex(remote),
        409 | 413 | 422 if direction == "push" => Error::PushRejected(if message.is_empty() {
            format!("HTTP {}", a.status)
        } else {
            message
        }),
        409 | 422 => Error::Incompatible(message),
        s => Error::transport(direction, format!("HTTP {s} {code} {message}")),
    }
}

/// A stable, non-identifying name of this index source (the server keeps the latest push of
/// each source and merges them): blake3 of the repository path and branch, 16 hex digits.
pub fn source_id(repo_dir: &Path, branch: &str) -> String {
    let key = format!("{}\0{branch}", repo_dir.display());
    blake3::hash(key.as_bytes()).to_hex()[..16].to_string()
}

/// `kdd sync push --api URL`.
pub fn push(url: &str, index_dir: &Path, source: &str, text: bool) -> Result<Report, Error> {
    let files = super::collect(index_dir, text)?;
    let mut report = Report {
        direction: "push".into(),
        transport: "api".into(),
        remote: url.to_string(),
        text,
        ..Report::default()
    };
    count(&mut report, &files);
    let mut headers = token_header();
    headers.push(("Content-Type", bundle::CONTENT_TYPE.to_string()));
    headers.push(("X-Kdd-Source", source.to_string()));
    let a = request(
        url,
        "POST",
        "/v1/index/push",
        &headers,
        &bundle::encode(&files),
    )?;
    if a.status != 200 {
        return Err(fail(url, "push", &a));
    }
    let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap_or_default();
    report.conflicts_resolved = v["conflicts_resolved"].as_u64().unwrap_or(0) as usize;
    report.up_to_date = v["up_to_date"].as_bool().unwrap_or(false);
    Ok(report)
}

/// `kdd sync pull --api URL`.
pub fn pull(url: &str, index_dir: &Path) -> Result<Report, Error> {
    let mut report = Report {
        direction: "pull".into(),
        transport: "api".into(),
        remote: url.to_string(),
        text: true,
        ..Report::default()
    };
    let local = match super::collect(index_dir, true) {
        Ok(f) => Some(f),
        Err(Error::NoLocalIndex(_)) => None,
        Err(e) => return Err(e),
    };
    let a = request(url, "GET", "/v1/index/pull", &token_header(), b"")?;
    if a.status != 200 {
        return Err(fail(url, "pull", &a));
    }
    let remote = bundle::decode(&a.body, "pull answer")?;
    if !remote.contains_key("manifest.json") {
        return Err(Error::NoRemoteIndex(url.to_string()));
    }
    let files: BTreeMap<String, Vec<u8>> = match &local {
        None => remote,
        Some(l) => {
            let merged = crate::merge::refs::merge_file_sets(
                &["local".to_string(), url.to_string()],
                vec![l.clone(), remote],
                &[1, 0],
            )
            .map_err(|e| match e {
                crate::merge::refs::Error::Incompatible(m) => Error::Incompatible(m),
                other => Error::Merge(other),
            })?;
            report.conflicts_resolved = merged.conflicts_resolved.len();
            report.warnings.extend(merged.warnings);
            super::normalise(merged.files)
        }
    };
    count(&mut report, &files);
    report.up_to_date = local.as_ref() == Some(&files);
    if !report.up_to_date {
        super::install(index_dir, &files)?;
    }
    Ok(report)
}
