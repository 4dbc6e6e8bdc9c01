//! Request guards of the HTTP API, pure and unit-tested: the `Host` rule and the bearer token.
//!
//! - Every request needs exactly one well-formed `Host` (`name[:port]`, `IPv4[:port]` or
//!   `[IPv6][:port]`; no userinfo, no path, a port ≤ 65535), and an absolute-form target must
//!   name the same authority: anything else is 400 (`MISSING_HOST`, `DUPLICATE_HOST`,
//!   `INVALID_HOST`). On a loopback bind, a `Host` that is not `localhost` or a loopback
//!   address is 403 `FORBIDDEN_HOST` (DNS-rebinding guard).
//! - `KDD_TOKEN` is checked at startup ([`check_token`]: at least [`MIN_TOKEN_LEN`] printable
//!   characters) and compared in constant time ([`ct_eq`]).

use super::api::ApiError;
use axum::extract::Request;
use axum::http::header;

/// Shortest accepted `KDD_TOKEN`.
pub const MIN_TOKEN_LEN: usize = 16;

/// Check a bearer token before the server starts: at least [`MIN_TOKEN_LEN`] characters, no
/// whitespace or control characters (a token that can be guessed or mangled is refused).
pub fn check_token(token: &str) -> Result<(), String> {
    let n = token.chars().count();
    if n < MIN_TOKEN_LEN {
        return Err(format!(
            "KDD_TOKEN is {n} characters long; use at least {MIN_TOKEN_LEN} random characters \
             (for example `openssl rand -hex 32`)"
        ));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(
            "KDD_TOKEN contains whitespace or control characters; use printable characters only"
                .into(),
        );
    }
    Ok(())
}

/// The host part of a well-formed `Host` value (`name[:port]`, `IPv4[:port]`,
/// `[IPv6][:port]`), or `None` (userinfo, paths, spaces, a bad port, an empty name…).
fn host_name(h: &str) -> Option<&str> {
    let port_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| n <= 65535)
    };
    if let Some(rest) = h.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        ip.parse::<std::net::Ipv6Addr>().ok()?;
        return match after {
            "" => Some(ip),
            _ => after.strip_prefix(':').filter(|p| port_ok(p)).map(|_| ip),
        };
    }
    let (name, port) = match h.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (h, None),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    (name_ok && port.is_none_or(port_ok)).then_some(name)
}

fn host_is_loopback(h: &str) -> bool {
    host_name(h).is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// The Host rule (see the module doc): `None` when the request may proceed.
pub(super) fn host_error(req: &Request, loopback: bool) -> Option<ApiError> {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let bad = |code: &str, msg: &str| Some(ApiError::new(400, code, msg.to_string()));
    let Some(first) = hosts.next() else {
        return bad("MISSING_HOST", "the request has no Host header");
    };
    if hosts.next().is_some() {
        return bad(
            "DUPLICATE_HOST",
            "the request has more than one Host header",
        );
    }
    let Some(h) = first.to_str().ok().filter(|h| host_name(h).is_some()) else {
        return bad(
            "INVALID_HOST",
            "the Host header is not `name[:port]`, `IPv4[:port]` or `[IPv6][:port]`",
        );
    };
    if let Some(a) = req.uri().authority() {
        if !a.as_str().eq_ignore_ascii_case(h) {
            return bad(
                "INVALID_HOST",
                "the request target names another host than the Host header",
            );
        }
    }
    (loopback && !host_is_loopback(h)).then(|| {
        ApiError::new(
            403,
            "FORBIDDEN_HOST",
            "this server only answers requests addressed to localhost",
        )
    })
}

pub(super) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    // Constant time in the length of the expected token.
    let mut diff = (a.len() ^ b.len()) as u8;
    for (i, x) in b.iter().enumerate() {
        diff |= x ^ a.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        assert!(host_is_loopback("localhost:8080"));
        assert!(host_is_loopback("127.0.0.1:1"));
        assert!(host_is_loopback("[::1]:80"));
        assert!(!host_is_loopback("evil.example:80"));
        assert!(!host_is_loopback("127.0.0.1.evil.example"));
        assert!(host_is_loopback("LOCALHOST"));
        for bad in [
            "localhost:8080@evil.com",
            "localhost@evil.com",
            "user@localhost",
            "localhost:",
            "localhost:99999",
            "localhost:80:80",
            "",
            "[::1",
            "[::1]x",
            "local host",
            "localhost/x",
        ] {
            assert_eq!(host_name(bad), None, "{bad}");
            assert!(!host_is_loopback(bad), "{bad}");
        }
        assert_eq!(host_name("kdd.example.com:443"), Some("kdd.example.com"));
        assert_eq!(host_name("[2001:db8::1]"), Some("2001:db8::1"));
    }

    #[test]
    fn token_length() {
        assert!(check_token("x").unwrap_err().contains("16"));
        assert!(check_token("0123456789abcde").is_err());
        assert!(check_token("0123456789abcdef").is_ok());
        assert!(check_token("0123456789 abcdef").is_err());
    }

    #[test]
    fn tokens() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abd", b"abc"));
        assert!(!ct_eq(b"ab", b"abc"));
        assert!(!ct_eq(b"abcd", b"abc"));
    }
}
