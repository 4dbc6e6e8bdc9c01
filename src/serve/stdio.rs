//! JSON-RPC line framing in front of rmcp's stdio transport for `kdd mcp`.
//!
//! rmcp silently drops a line that is not JSON; JSON-RPC 2.0 asks for a `-32700` "Parse error"
//! response with `"id": null`. [`framed`] sits between the process's stdin/stdout and rmcp:
//! every input line that is not JSON (bad syntax, truncated, not UTF-8) is answered with
//! [`PARSE_ERROR`] and never reaches rmcp; a JSON line rmcp cannot read either (an `id` that is
//! neither a string nor an integer, such as `1.5` or `true`, a number past 64-bit range, such
//! as `1e400`, or nesting past serde's 128 levels in otherwise valid JSON; rmcp dropped those in
//! silence too) is answered with [`INVALID_REQUEST`]; a request with an id that rmcp would
//! refuse without naming it (no `method`, `jsonrpc` other than `"2.0"`, a member given twice,
//! `params` that are not an object, `tools/call` without a tool name) is answered here with that id ([`misshapen`]), so
//! the client can match the error to its request; a line over [`MAX_LINE`] bytes is answered
//! with `-32600` and skipped without being buffered whole; blank lines are ignored; every other
//! line goes to rmcp unchanged. The server keeps serving. rmcp's own error answers that carry
//! no `id` (to `"id": null`, a batch) get `"id":null` on the way out.
//!
//! Invariants: stdout carries whole lines only (rmcp's answers and ours never interleave
//! inside a line), in the order they were produced; nothing but JSON-RPC is ever written.

use serde_json::Value;
use std::borrow::Cow;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::io::{BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Longest accepted request line (rmcp's own limit).
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// The answer to a line that is not JSON.
pub const PARSE_ERROR: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the line is not a JSON value"}}"#;

/// The answer to a JSON line whose id (or another number) rmcp cannot read.
pub const INVALID_REQUEST: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the message cannot be read: its id must be a string or an integer, every number must fit a 64-bit float, and nesting may go at most 128 levels deep"}}"#;

/// The answer to a line over [`MAX_LINE`].
pub const TOO_LONG: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: the line is over 16 MiB"}}"#;

/// Put the framing between `input`/`output` and rmcp. Returns rmcp's reader and writer, and
/// the output task (await it after the service ends so every answer is flushed).
pub fn framed<R, W>(input: R, output: W) -> (DuplexStream, DuplexStream, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, to_rmcp) = tokio::io::duplex(64 * 1024);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(64 * 1024);
    let (err_tx, err_rx) = mpsc::channel::<Cow<'static, str>>(64);
    tokio::spawn(pump_input(input, to_rmcp, err_tx));
    let out = tokio::spawn(pump_output(from_rmcp, err_rx, output));
    (rmcp_in, rmcp_out, out)
}

/// The answer a line gets from the framing itself, if any: not JSON → [`PARSE_ERROR`]; JSON
/// that rmcp cannot read → [`INVALID_REQUEST`]; a request rmcp would refuse without its id →
/// [`misshapen`]'s answer; anything else goes on to rmcp.
fn refusal(line: &[u8]) -> Option<Cow<'static, str>> {
    if values_over(line, MAX_VALUES) {
        let why =
            format!("the message holds more than {MAX_VALUES} JSON values; kdd's tools take a few");
        return Some(invalid(id_of(line), &why).into());
    }
    match serde_json::from_slice::<Value>(line) {
        Ok(v) if !v.get("id").is_none_or(readable) => Some(INVALID_REQUEST.into()),
        Ok(v) => misshapen(&v, line).map(Cow::Owned),
        Err(e) if serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() => {
            // Its id can be read (a bad string or number lies elsewhere): answered with it,
            // naming what is wrong (a lone surrogate, a byte that is not UTF-8, a depth).
            let text = e.to_string();
            let hint = match ["escape", "unicode", "utf"].iter().any(|w| text.contains(w)) {
                true => " (strings must be UTF-8; a \\ud800-\\udbff escape needs its low surrogate after it)",
                false => "",
            };
            match id_of(line) {
                Some(id) => {
                    let why = format!("the message cannot be read: {text}{hint}");
                    Some(invalid(Some(id), &why).into())
                }
                None => Some(INVALID_REQUEST.into()),
            }
        }
        Err(_) => Some(PARSE_ERROR.into()),
    }
}

/// Most JSON values a line may hold: kdd's tools take a few dozen, and a line of millions of
/// one-byte values cost about 50 times its size to parse (red team, nineteenth round: 1.4 GB).
pub const MAX_VALUES: usize = 1 << 16;

/// True when `line` holds more than `max` JSON values, counted without parsing it: commas and
/// openings outside strings.
fn values_over(line: &[u8], max: usize) -> bool {
    let (mut n, mut in_str, mut esc) = (0usize, false, false);
    for &b in line {
        if in_str {
            match b {
                _ if esc => esc = false,
                b'\\' => esc = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b',' | b'[' | b'{' => n += 1,
            _ => {}
        }
        if n > max {
            return true;
        }
    }
    false
}

/// The `-32600` answer naming `why`, with the request's id when one was read.
fn invalid(id: Option<Value>, why: &str) -> String {
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": -32600, "message": format!("Invalid Request: {why}")},
    });
    answer.to_string()
}

/// A top-level object's readable, non-null `id`, read without keeping any other member.
fn id_of(line: &[u8]) -> Option<Value> {
    let id = top_level(line)?.id?;
    (!id.is_null() && readable(&id)).then_some(id)
}

/// What the framing reads of a top-level JSON object line without keeping its other members:
/// its `id` and the first member named twice.
struct TopLevel {
    id: Option<Value>,
    twice: Option<String>,
}

struct TopKeys;
impl<'de> serde::de::Visitor<'de> for TopKeys {
    type Value = TopLevel;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<TopLevel, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut top = TopLevel {
            id: None,
            twice: None,
        };
        while let Some(k) = m.next_key::<String>()? {
            match k.as_str() {
                "id" => top.id = Some(m.next_value::<Value>()?),
                _ => drop(m.next_value::<serde::de::IgnoredAny>()?),
            }
            if top.twice.is_none() && !seen.insert(k.clone()) {
                top.twice = Some(k);
            }
        }
        Ok(top)
    }
}
impl<'de> serde::Deserialize<'de> for TopLevel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TopLevel, D::Error> {
        d.deserialize_map(TopKeys)
    }
}

fn top_level(line: &[u8]) -> Option<TopLevel> {
    serde_json::from_slice::<TopLevel>(line).ok()
}

/// An `id` as rmcp reads one: null, a string, or an integer (also written `1.0` or `1e2`,
/// below 2^53). Batches and other shapes are rmcp's to judge.
fn readable(id: &Value) -> bool {
    match id {
        Value::Null | Value::String(_) => true,
        Value::Number(n) => {
            n.as_i64().is_some()
                || n.as_f64()
                    .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0)
        }
        _ => false,
    }
}

/// The error answer, with the request's own id, to a request rmcp would refuse with
/// `"id": null` (JSON-RPC 2.0 asks for the id whenever it can be read): `jsonrpc` not `"2.0"`
/// or no `method` string, or a `jsonrpc` / `method` / `params` member given twice (`-32600`;
/// a doubled `id` names no one id and is left to rmcp), `params` present but not an object as MCP requires, a
/// `tools/call` without a tool `name`, or `arguments` that are not an object (`-32602`). `None` for notifications, responses and
/// well-formed requests.
fn misshapen(v: &Value, line: &[u8]) -> Option<String> {
    let msg = v.as_object()?;
    let id = msg.get("id").filter(|id| !id.is_null())?;
    if msg.contains_key("result") || msg.contains_key("error") {
        return None; // a response: rmcp's to take or ignore
    }
    let params = msg.get("params").filter(|p| !p.is_null());
    let twice =
        member_twice(line).filter(|k| ["jsonrpc", "method", "params"].contains(&k.as_str()));
    let dup;
    let (code, why) = if let Some(k) = twice {
        // serde_json kept the last one; rmcp refuses the message without naming its id.
        dup = format!("Invalid Request: member \"{k}\" appears twice");
        (-32600, dup.as_str())
    } else if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        (-32600, "Invalid Request: \"jsonrpc\" must be \"2.0\"")
    } else if !msg.get("method").is_some_and(Value::is_string) {
        (
            -32600,
            "Invalid Request: a request needs a \"method\" string",
        )
    } else if params.is_some_and(|p| !p.is_object()) {
        (-32602, "Invalid params: MCP params are a JSON object")
    } else if msg.get("method").and_then(Value::as_str) == Some("tools/call")
        && !params.is_some_and(|p| p.get("name").is_some_and(Value::is_string))
    {
        (
            -32602,
            "Invalid params: tools/call needs {\"name\": <a tool of tools/list>, \"arguments\": {…}}",
        )
    } else if params
        .and_then(|p| p.get("arguments"))
        .is_some_and(|a| !a.is_object() && !a.is_null())
    {
        (-32602, "Invalid params: `arguments` are a JSON object")
    } else {
        return None;
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": why},
    });
    Some(answer.to_string())
}

/// The first top-level member of a JSON object line named twice (`None` for other lines).
fn member_twice(line: &[u8]) -> Option<String> {
    top_level(line)?.twice
}

async fn pump_input<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    errors: mpsc::Sender<Cow<'static, str>>,
) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = (MAX_LINE + 1) as u64;
        match (&mut reader).take(limit).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
            // Skip the rest of the oversized line without keeping it.
            loop {
                line.clear();
                match (&mut reader)
                    .take(64 * 1024)
                    .read_until(b'\n', &mut line)
                    .await
                {
                    Ok(0) | Err(_) => {
                        // Cut off by the end of input: still answered.
                        let _ = errors.send(TOO_LONG.into()).await;
                        return;
                    }
                    Ok(_) if line.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
            if errors.send(TOO_LONG.into()).await.is_err() {
                return;
            }
            continue;
        }
        let body = line
            .strip_prefix(b"\xEF\xBB\xBF".as_slice())
            .unwrap_or(&line);
        if body.trim_ascii().is_empty() {
            continue;
        }
        if let Some(answer) = refusal(body) {
            if errors.send(answer).await.is_err() {
                return;
            }
            continue;
        }
        if to_rmcp.write_all(&line).await.is_err() {
            return;
        }
        if line.last() != Some(&b'\n') && to_rmcp.write_all(b"\n").await.is_err() {
            return;
        }
    }
}

async fn pump_output<W: AsyncWrite + Unpin>(
    mut from_rmcp: DuplexStream,
    mut errors: mpsc::Receiver<Cow<'static, str>>,
    mut output: W,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut errors_open = true;
    loop {
        tokio::select! {
            n = from_rmcp.read(&mut buf) => {
                let n = n.unwrap_or(0);
                if n == 0 {
                    // rmcp is done: the framing's own answers still queued go out too.
                    errors.close();
                    let mut rest = with_null_ids(&pending).into_owned();
                    while let Some(m) = errors.recv().await {
                        rest.extend_from_slice(m.as_bytes());
                        rest.push(b'\n');
                    }
                    let _ = output.write_all(&rest).await;
                    let _ = output.flush().await;
                    return;
                }
                pending.extend_from_slice(&buf[..n]);
                if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                    let rest = pending.split_off(end + 1);
                    let lines = with_null_ids(&pending);
                    if output.write_all(&lines).await.is_err() || output.flush().await.is_err() {
                        return;
                    }
                    pending = rest;
                }
            }
            msg = errors.recv(), if errors_open => match msg {
                Some(m) => {
                    // Whatever else is queued goes out with it, under one flush.
                    let mut lines = format!("{m}\n");
                    while let Ok(m) = errors.try_recv() {
                        lines.push_str(&m);
                        lines.push('\n');
                    }
                    if output.write_all(lines.as_bytes()).await.is_err()
                        || output.flush().await.is_err()
                    {
                        return;
                    }
                }
                None => errors_open = false,
            },
        }
    }
}

/// rmcp's own error answers to a message it cannot take (`"id": null`, no method, a batch)
/// carry no `id` member, which JSON-RPC 2.0 requires in every response: `"id":null` is added
/// to each such line of `lines` (whole lines; rmcp writes `jsonrpc` first, then `id` when it
/// has one).
fn with_null_ids(lines: &[u8]) -> Cow<'_, [u8]> {
    const BARE: &[u8] = br#"{"jsonrpc":"2.0","error":"#;
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","#;
    if !lines.windows(BARE.len()).any(|w| w == BARE) {
        return lines.into();
    }
    let mut out = Vec::with_capacity(lines.len() + 16);
    for line in lines.split_inclusive(|&b| b == b'\n') {
        match line.strip_prefix(HEAD) {
            Some(rest) if line.starts_with(BARE) => {
                out.extend_from_slice(HEAD);
                out.extend_from_slice(br#""id":null,"#);
                out.extend_from_slice(rest);
            }
            _ => out.extend_from_slice(line),
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_values_rmcp_can_read_pass() {
        for ok in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1e2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "[1, 2]",
        ] {
            assert_eq!(refusal(ok.as_bytes()), None, "{ok}");
        }
        for bad in [
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#,
        ] {
            assert_eq!(
                refusal(bad.as_bytes()),
                Some(INVALID_REQUEST.into()),
                "{bad}"
            );
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":20,"method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let v: Value = serde_json::from_str(&refusal(deep.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            (&v["id"], v["error"]["code"].as_i64()),
            (&serde_json::json!(20), Some(-32600))
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("recursion limit"),
            "{v}"
        );
        assert_eq!(refusal(b"{not json"), Some(PARSE_ERROR.into()));
        assert_eq!(refusal(b"\xff\xfe"), Some(PARSE_ERROR.into()));
        assert_eq!(refusal(&[b'['; 10_000]), Some(PARSE_ERROR.into()));
        for line in [PARSE_ERROR, TOO_LONG, INVALID_REQUEST] {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert!(v["id"].is_null());
        }
        let v: serde_json::Value = serde_json::from_str(INVALID_REQUEST).unwrap();
        assert_eq!(v["error"]["code"], -32600);
    }

    /// Red team, nineteenth round: a line of millions of tiny values cost 1.4 GB to parse, and
    /// a lone surrogate was answered with `"id": null` and a message about ids and numbers.
    #[test]
    fn a_line_of_too_many_values_or_a_bad_string_is_refused_with_its_id_and_the_reason() {
        let many = format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"kdd_query","arguments":{{"query":"q","keywords":[{}]}}}}}}"#,
            vec![r#""x""#; MAX_VALUES + 1].join(",")
        );
        let v: Value = serde_json::from_str(&refusal(many.as_bytes()).unwrap()).unwrap();
        assert_eq!(v["id"], 7);
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON values"));
        let commas_in_a_string = format!(
            r#"{{"jsonrpc":"2.0","id":8,"method":"ping","params":{{"x":"{}"}}}}"#,
            ",[{".repeat(MAX_VALUES)
        );
        assert_eq!(refusal(commas_in_a_string.as_bytes()), None);
        for (line, word) in [
            (&br#"{"jsonrpc":"2.0","id":77,"method":"ping","params":{"q":"a \ud800 b"}}"#[..], "hex escape"),
            (&b"{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"ping\",\"params\":{\"q\":\"a \xff b\"}}"[..], "unicode"),
        ] {
            let v: Value = serde_json::from_str(&refusal(line).unwrap()).unwrap();
            assert!(v["id"].is_number(), "{v}");
            let m = v["error"]["message"].as_str().unwrap().to_lowercase();
            assert!(m.contains(word), "{m}");
        }
    }

    #[test]
    fn error_answers_without_an_id_get_a_null_one() {
        let rmcp = concat!(
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"x"}}"#,
            "\n"
        );
        let out = with_null_ids(rmcp.as_bytes()).into_owned();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["id"], 3);
        assert!(
            lines[1].get("id").is_some_and(|v| v.is_null()),
            "{}",
            lines[1]
        );
        assert_eq!(lines[2]["id"], 4);
        let plain = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(matches!(with_null_ids(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn a_misshapen_request_is_refused_with_its_own_id() {
        for (line, id, code) in [
            (
                r#"{"jsonrpc":"2.0","id":11}"#,
                serde_json::json!(11),
                -32600,
            ),
            (
                r#"{"id":"b","method":"ping"}"#,
                serde_json::json!("b"),
                -32600,
            ),
            (
                r#"{"jsonrpc":"1.0","id":13,"method":"ping"}"#,
                serde_json::json!(13),
                -32600,
            ),
            (
                r#"{"jsonrpc":"2.0","id":15,"method":5}"#,
                serde_json::json!(15),
                -32600,
            ),
            (
                r#"{"jsonrpc":"2.0","id":12,"method":"ping","params":[]}"#,
                serde_json::json!(12),
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":16,"method":"tools/call","params":"x"}"#,
                serde_json::json!(16),
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":5}}"#,
                serde_json::json!(20),
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":25,"method":"tools/call"}"#,
                serde_json::json!(25),
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":26,"method":"tools/call","params":{"name":"x","arguments":[]}}"#,
                serde_json::json!(26),
                -32602,
            ),
            (
                r#"{"jsonrpc":"2.0","id":27,"method":"ping","method":"tools/list"}"#,
                serde_json::json!(27),
                -32600,
            ),
        ] {
            let answer = refusal(line.as_bytes()).unwrap_or_else(|| panic!("{line}"));
            let v: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(
                (&v["id"], v["error"]["code"].as_i64()),
                (&id, Some(code)),
                "{line}: {v}"
            );
        }
        for pass in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"kdd_query"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":null}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":null}"#,
            r#"[{"jsonrpc":"2.0","id":4}]"#,
            r#"{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}"#,
        ] {
            assert_eq!(refusal(pass.as_bytes()), None, "{pass}");
        }
    }
}
