//! Running the developer's agent command: `sh -c <command>` in the repository, the request on
//! stdin, the answer read from stdout.
//!
//! Invariants:
//! - The environment passes through untouched: kdd adds, stores and forwards no credential; the
//!   agent uses whatever login or API key the developer's own environment gives it.
//! - The agent runs in its own process group; on timeout the whole group is killed (SIGKILL), so
//!   a shell pipeline or a child the agent started does not outlive the run.
//! - Reads are bounded: at most [`MAX_ANSWER_BYTES`] of stdout and the last [`STDERR_TAIL`]
//!   bytes of stderr are kept (the rest is drained and dropped), so a runaway agent cannot fill
//!   memory.

use super::Error;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Largest answer read from the agent's stdout.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// Bytes of the agent's stderr kept for the error message.
pub const STDERR_TAIL: usize = 2048;

/// Read everything from `r`, keeping at most `cap` bytes (the head, or the tail when `tail`).
fn drain(mut r: impl Read, cap: usize, tail: bool) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut over = false;
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > cap {
            over = true;
            if tail {
                kept.drain(..kept.len() - cap);
            } else {
                kept.truncate(cap);
            }
        }
    }
    (kept, over)
}

/// Run `command` with `request` on stdin; return its stdout when it exits 0 within `timeout`.
pub fn run_agent(
    command: &str,
    cwd: &Path,
    request: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, Error> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Agent(format!("cannot start `sh -c {command}`: {e}")))?;
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("piped stdin");
    let req = request.to_vec();
    // An agent that never reads its stdin must not block us: write from a thread.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&req);
    });
    let out = child.stdout.take().expect("piped stdout");
    let err = child.stderr.take().expect("piped stderr");
    let out_t = std::thread::spawn(move || drain(out, MAX_ANSWER_BYTES, false));
    let err_t = std::thread::spawn(move || drain(err, STDERR_TAIL, true));
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t0.elapsed() >= timeout => {
                kill_group(pid);
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout(timeout.as_millis() as u64));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(Error::Agent(format!("waiting for the agent: {e}"))),
        }
    };
    // The agent exited; a child it left behind still holding the pipes is killed with the group.
    kill_group(pid);
    let (stdout, over) = out_t.join().unwrap_or_default();
    let (stderr, _) = err_t.join().unwrap_or_default();
    if !status.success() {
        let tail = String::from_utf8_lossy(&stderr).trim().to_string();
        return Err(Error::Agent(format!(
            "the agent exited with {status}{}",
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )));
    }
    if over {
        return Err(Error::Agent(format!(
            "the answer is larger than {MAX_ANSWER_BYTES} bytes"
        )));
    }
    Ok(stdout)
}

/// SIGKILL the process group `pgid` (the agent and everything it started); errors ignored.
fn kill_group(pgid: u32) {
    let _ = Command::new("sh")
        // `kill -SIG -PGID`, the form every POSIX shell's builtin accepts (dash refuses `--`).
        .args(["-c", &format!("kill -KILL -{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}
