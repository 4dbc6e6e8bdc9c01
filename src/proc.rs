//! Running a helper program once under a deadline, with bounded output: the developer's agent
//! (`enrich::run`) and a cold translator (`query::translate`); and the environment kdd's
//! processes run in ([`confine_runtime_cache`], [`user_env`]).
//!
//! Invariants:
//! - The program runs in its own process group; past the deadline, and after it exits, the
//!   whole group is killed (SIGKILL), so a shell pipeline or a child it left behind neither
//!   outlives the run nor holds its pipes open.
//! - The input is written, and both outputs are read, on threads of their own: a program that
//!   never reads its stdin, or floods stderr, cannot block the caller past the deadline.
//! - Reads are bounded: at most `out_cap` bytes of stdout (the head) and `err_cap` bytes of
//!   stderr (the tail) are kept; the rest is drained and dropped.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where ONNX Runtime's own files would go: a path that cannot exist (`/dev/null` is no
/// directory), so the runtime, which keeps a device id under `$XDG_CACHE_HOME/Microsoft/…`
/// (else `~/.cache/…`) whenever a model loads, writes nothing outside the repository and
/// kdd's cache. Its telemetry is switched off as well (`embed::model`).
const NO_RUNTIME_CACHE: &str = "/dev/null/kdd-onnxruntime-keeps-no-files";

/// `XDG_CACHE_HOME` as this process received it (see [`confine_runtime_cache`]).
static USER_CACHE_HOME: OnceLock<Option<OsString>> = OnceLock::new();

/// Point `XDG_CACHE_HOME` at [`NO_RUNTIME_CACHE`] for this process and kdd's own children.
/// Called first thing in `main`, while the process has a single thread (kdd never reads the
/// variable itself); programs run for the user get their value back through [`user_env`].
pub fn confine_runtime_cache() {
    USER_CACHE_HOME.get_or_init(|| std::env::var_os("XDG_CACHE_HOME"));
    std::env::set_var("XDG_CACHE_HOME", NO_RUNTIME_CACHE);
}

/// Give `cmd` (the developer's agent, a hook manager) the `XDG_CACHE_HOME` this process
/// received.
pub fn user_env(cmd: &mut Command) -> &mut Command {
    match USER_CACHE_HOME.get() {
        Some(Some(v)) => cmd.env("XDG_CACHE_HOME", v),
        Some(None) => cmd.env_remove("XDG_CACHE_HOME"),
        None => cmd,
    }
}

/// How often a running program is checked for exit.
const POLL: Duration = Duration::from_millis(2);

/// What a program that exited in time left.
pub struct Finished {
    pub status: ExitStatus,
    /// The head of stdout, at most the cap.
    pub stdout: Vec<u8>,
    /// True when stdout was longer than the cap.
    pub stdout_over: bool,
    /// The tail of stderr, at most its cap.
    pub stderr: Vec<u8>,
}

/// Why a program left no answer.
#[derive(Debug)]
pub enum Failure {
    /// It could not be started (`NotFound` when the program does not exist).
    Spawn(std::io::Error),
    /// Waiting for it failed.
    Wait(std::io::Error),
    /// It was still running at the deadline, and was killed with its group.
    Timeout,
}

/// Output caps of [`run`].
#[derive(Clone, Copy)]
pub struct Caps {
    pub stdout: usize,
    pub stderr: usize,
}

/// Run `cmd` (its stdio is set here) with `input` on stdin until it exits or `timeout` passes.
pub fn run(
    cmd: &mut Command,
    input: Vec<u8>,
    timeout: Duration,
    caps: Caps,
) -> Result<Finished, Failure> {
    let mut child = user_env(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(Failure::Spawn)?;
    let pid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        // A program that exits without reading is reported by its status.
        std::thread::spawn(move || stdin.write_all(&input));
    }
    let out = child.stdout.take();
    let err = child.stderr.take();
    let out_t = std::thread::spawn(move || drain(out, caps.stdout, false));
    let err_t = std::thread::spawn(move || drain(err, caps.stderr, true));
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if t0.elapsed() >= timeout => {
                kill_group(pid);
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::Timeout);
            }
            Ok(None) => std::thread::sleep(POLL),
            Err(e) => return Err(Failure::Wait(e)),
        }
    };
    // It exited; a child it left behind still holding the pipes is killed with the group.
    kill_group(pid);
    let (stdout, stdout_over) = out_t.join().unwrap_or_default();
    let (stderr, _) = err_t.join().unwrap_or_default();
    Ok(Finished {
        status,
        stdout,
        stdout_over,
        stderr,
    })
}

/// Read everything from `r`, keeping at most `cap` bytes (the head, or the tail when `tail`);
/// also whether there was more.
fn drain(r: Option<impl Read>, cap: usize, tail: bool) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut over = false;
    let Some(mut r) = r else {
        return (kept, over);
    };
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

/// SIGKILL the process group `pgid` (a program started by [`run`], or any started with
/// `process_group(0)`, and everything it started); errors ignored.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("sh")
        // `kill -SIG -PGID`, the form every POSIX shell's builtin accepts (dash refuses `--`).
        .args(["-c", &format!("kill -KILL -{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Caps = Caps {
        stdout: 16,
        stderr: 8,
    };

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn outputs_are_capped_head_and_tail() {
        let f = run(
            &mut sh("cat; echo 0123456789abcdefXYZ; echo errors-end >&2"),
            b"in:".to_vec(),
            Duration::from_secs(5),
            CAPS,
        )
        .unwrap();
        assert!(f.status.success());
        assert_eq!(f.stdout, b"in:0123456789abc");
        assert!(f.stdout_over);
        assert_eq!(f.stderr, b"ors-end\n");
    }

    #[test]
    fn a_program_that_reads_nothing_is_killed_at_the_deadline() {
        let t = Instant::now();
        let r = run(
            &mut sh("sleep 30"),
            vec![b'x'; 1 << 20],
            Duration::from_millis(300),
            CAPS,
        );
        assert!(matches!(r, Err(Failure::Timeout)));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_child_left_holding_the_pipes_does_not_hold_the_caller() {
        let t = Instant::now();
        let f = run(
            &mut sh("sleep 30 & echo done"),
            Vec::new(),
            Duration::from_secs(5),
            CAPS,
        )
        .unwrap();
        assert_eq!(f.stdout, b"done\n");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}
