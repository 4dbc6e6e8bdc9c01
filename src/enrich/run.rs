//! Running the developer's agent command: `sh -c <command>` in the repository, the request on
//! stdin, the answer read from stdout.
//!
//! Invariants:
//! - The environment passes through untouched: kdd adds, stores and forwards no credential; the
//!   agent uses whatever login or API key the developer's own environment gives it.
//! - The agent runs under [`crate::proc::run`]: in its own process group, killed whole on timeout
//!   (SIGKILL), so a shell pipeline or a child the agent started does not outlive the run; at
//!   most [`MAX_ANSWER_BYTES`] of stdout and the last [`STDERR_TAIL`] bytes of stderr are kept
//!   (the rest is drained and dropped), so a runaway agent cannot fill memory.

use super::Error;
use crate::proc::{Caps, Failure};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Largest answer read from the agent's stdout.
pub const MAX_ANSWER_BYTES: usize = 1 << 20;
/// Bytes of the agent's stderr kept for the error message.
pub const STDERR_TAIL: usize = 2048;

/// Run `command` with `request` on stdin; return its stdout when it exits 0 within `timeout`.
pub fn run_agent(
    command: &str,
    cwd: &Path,
    request: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, Error> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(cwd);
    let caps = Caps {
        stdout: MAX_ANSWER_BYTES,
        stderr: STDERR_TAIL,
    };
    let f = crate::proc::run(&mut cmd, request.to_vec(), timeout, caps).map_err(|e| match e {
        Failure::Spawn(e) => Error::Agent(format!("cannot start `sh -c {command}`: {e}")),
        Failure::Wait(e) => Error::Agent(format!("waiting for the agent: {e}")),
        Failure::Timeout => Error::Timeout(timeout.as_millis() as u64),
    })?;
    let (status, stdout, over, stderr) = (f.status, f.stdout, f.stdout_over, f.stderr);
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
