//! `kdd doctor [--json]`: check the installation and report a list of checks, each with a status,
//! a message and (when something is wrong) the command that fixes it.
//!
//! The report is a flat list so other areas add their own checks by pushing more [`Check`]s
//! (see [`collect`]): runtime, models, active model, index level of the current repository.
//! Exit status: 0 when no check failed, 1 otherwise.
//!
//! The hidden `--embed-server SOCKET` flag runs the per-user warm embedding service
//! ([`crate::embed::service`]); it is started automatically by the hook and the CLI, never by
//! hand. The `embed-service` check shows that one shared service: model, pid and RSS.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::embed::model::{self, data_dir, discover, runtime_path, ModelChoice, ORT_VERSION};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `kdd doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Do not load the active model (faster; skips the load-time figure).
    #[arg(long)]
    pub no_load: bool,
    /// Repair what can be repaired in the current repository: install the merge driver,
    /// `.gitattributes` line and hooks when missing (same as `kdd install`).
    #[arg(long)]
    pub fix: bool,
    /// Run the warm embedder server on this socket (internal).
    #[arg(long, hide = true, value_name = "SOCKET")]
    pub embed_server: Option<PathBuf>,
}

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok  ",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable identifier (`runtime`, `model:<name>`, `active-model`, `index`…).
    pub name: String,
    pub status: Status,
    pub message: String,
    /// Command or action that fixes a warn/fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn new(name: impl Into<String>, status: Status, message: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            message: message.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub checks: Vec<Check>,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    if let Some(socket) = &args.embed_server {
        crate::embed::service::serve(socket)?;
        return Ok(ExitStatus::Success);
    }
    if args.fix {
        fix_git(global)?;
    }
    let report = Report {
        checks: collect(args, global),
    };
    if global.json {
        output::json(&report)?;
    } else {
        let mut text = String::new();
        for c in &report.checks {
            text.push_str(&format!(
                "{} {:<14} {}\n",
                c.status.label(),
                c.name,
                c.message
            ));
            if let Some(f) = &c.fix {
                text.push_str(&format!("     {:<14} fix: {f}\n", ""));
            }
        }
        output::data(&text)?;
    }
    Ok(if report.checks.iter().any(|c| c.status == Status::Fail) {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// Every check, in report order.
pub fn collect(args: &Args, global: &GlobalArgs) -> Vec<Check> {
    let mut checks = Vec::new();
    embedding_checks(args, &mut checks);
    checks.push(translator_check());
    index_check(global, &mut checks);
    cache_check(global, args.fix, &mut checks);
    git_checks(global, &mut checks);
    checks
}

/// The query translator for cross-lingual questions (optional: a warning when missing).
fn translator_check() -> Check {
    use crate::query::translate::{self, Lang, Style};
    if !translate::enabled() {
        return Check::new(
            "translator",
            Status::Info,
            "query translation disabled by KDD_TRANSLATE",
        );
    }
    match translate::translate("the rule", Lang::En, Lang::Es, Style::Full) {
        Ok(t) => Check::new(
            "translator",
            Status::Ok,
            format!("cross-lingual queries are translated (eng-spa: \"the rule\" -> \"{t}\")"),
        ),
        Err(e) => Check::new(
            "translator",
            Status::Warn,
            format!("cross-lingual queries are not translated: {e}"),
        )
        .fix("sudo apt-get install apertium apertium-eng-spa (or ./install.sh as root)"),
    }
}

/// Git integration (merge driver, attributes, hooks, conflicts under `.kdd-index/`), from
/// [`super::wiring::checks`].
fn git_checks(global: &GlobalArgs, checks: &mut Vec<Check>) {
    let Ok(settings) = global.settings() else {
        return;
    };
    for c in super::wiring::checks(&settings) {
        let check = if c.ok {
            Check::new(c.name, Status::Ok, c.message)
        } else {
            Check::new(c.name, Status::Warn, c.message).fix("kdd doctor --fix")
        };
        checks.push(check);
    }
}

/// `--fix`: run `kdd install` when any git integration check fails, then check again and say
/// what was repaired and what still is not (never a repair it did not make).
fn fix_git(global: &GlobalArgs) -> anyhow::Result<()> {
    let settings = global.settings()?;
    let broken = |settings| -> Vec<String> {
        super::wiring::checks(settings)
            .into_iter()
            .filter(|c| !c.ok && c.name != "index-conflicts")
            .map(|c| c.name)
            .collect()
    };
    let before = broken(&settings);
    if before.is_empty() {
        return Ok(());
    }
    output::info(&format!("doctor --fix: repairing {}", before.join(", ")));
    for line in super::install::install(&settings, &super::install::Args::default())? {
        output::info(&line);
    }
    let after = broken(&settings);
    let fixed: Vec<&String> = before.iter().filter(|b| !after.contains(b)).collect();
    if !fixed.is_empty() {
        output::info(&format!(
            "doctor --fix: repaired {}",
            fixed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !after.is_empty() {
        output::warn(&format!(
            "doctor --fix: still not repaired: {} (see the messages above)",
            after.join(", ")
        ));
    }
    Ok(())
}

const INSTALL: &str = "./install.sh (from the kdd source tree)";

/// `sha256sum -c SHA256SUMS` in `dir`: Some(true/false), None when it cannot be run.
fn verify_sums(dir: &Path) -> Option<Result<(), String>> {
    if !dir.join("SHA256SUMS").is_file() {
        return Some(Err("no SHA256SUMS manifest".into()));
    }
    let out = std::process::Command::new("sha256sum")
        .args(["--quiet", "-c", "SHA256SUMS"])
        .current_dir(dir)
        .output()
        .ok()?;
    if out.status.success() {
        Some(Ok(()))
    } else {
        let detail = String::from_utf8_lossy(&out.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&out.stderr).lines())
            .next()
            .unwrap_or("mismatch")
            .to_string();
        Some(Err(detail))
    }
}

fn embedding_checks(args: &Args, checks: &mut Vec<Check>) {
    let data = data_dir();
    checks.push(Check::new(
        "data-dir",
        Status::Info,
        match &data {
            Some(d) => format!("{} (KDD_DATA_DIR overrides)", d.display()),
            None => {
                "none (HOME unset or not an absolute path; set KDD_DATA_DIR to an absolute path)"
                    .into()
            }
        },
    ));
    runtime_checks(checks);
    if let Some(models) = data.as_ref().map(|d| d.join("models")) {
        model_checks(&models, checks);
    }
    active_model_checks(args, checks);
}

/// The ONNX Runtime library: present, its version, its files' checksums.
fn runtime_checks(checks: &mut Vec<Check>) {
    let rt = runtime_path();
    if !rt.exists() {
        checks.push(
            Check::new(
                "runtime",
                Status::Warn,
                format!(
                    "ONNX Runtime not found at {} (indexing runs at L1)",
                    rt.display()
                ),
            )
            .fix(INSTALL),
        );
    } else {
        match model::runtime_version(&rt) {
            Ok(v) => {
                let status = if v == ORT_VERSION {
                    Status::Ok
                } else {
                    Status::Info
                };
                checks.push(Check::new(
                    "runtime",
                    status,
                    format!("ONNX Runtime {v} at {}", rt.display()),
                ));
            }
            Err(e) => checks.push(Check::new("runtime", Status::Fail, e.to_string()).fix(INSTALL)),
        }
        if let Some(lib_dir) = rt.parent() {
            if lib_dir.join("SHA256SUMS").is_file() {
                checks.push(sums_check("runtime-files", lib_dir));
            }
        }
    }
}

/// The models installed under the data directory, each with its checksums.
fn model_checks(models: &std::path::Path, checks: &mut Vec<Check>) {
    let mut names: Vec<String> = std::fs::read_dir(models)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        checks.push(
            Check::new(
                "models",
                Status::Warn,
                format!("no model installed in {}", models.display()),
            )
            .fix(INSTALL),
        );
    }
    for n in names {
        checks.push(sums_check(&format!("model:{n}"), &models.join(&n)));
    }
}

/// The model this process would use, loaded once (unless `--no-load`), and its service.
fn active_model_checks(args: &Args, checks: &mut Vec<Check>) {
    match discover() {
        ModelChoice::Disabled => checks.push(Check::new(
            "active-model",
            Status::Info,
            "embeddings disabled by KDD_NO_EMBED=1 (L1)",
        )),
        ModelChoice::Test => checks.push(Check::new(
            "active-model",
            Status::Warn,
            "KDD_TEST_EMBEDDER=1: the hashed TEST embedder is active (not semantic)",
        )),
        ModelChoice::Model(spec) => {
            if let Some(missing) = spec.missing_file() {
                checks.push(
                    Check::new(
                        "active-model",
                        Status::Warn,
                        format!(
                            "{}: {} is missing (indexing runs at L1)",
                            spec.id,
                            missing.display()
                        ),
                    )
                    .fix(INSTALL),
                );
            } else if args.no_load {
                checks.push(Check::new(
                    "active-model",
                    Status::Ok,
                    format!(
                        "{} at {} (not loaded: --no-load)",
                        spec.id,
                        spec.dir.display()
                    ),
                ));
            } else {
                let t = Instant::now();
                match model::OrtEmbedder::load(&spec) {
                    Ok(m) => checks.push(Check::new(
                        "active-model",
                        Status::Ok,
                        format!(
                            "{} ({} dims) at {}; loads in {:.2}s, {} MB RSS once loaded (this process; warm service target ≤ {} MB)",
                            spec.id,
                            crate::embed::Embedder::dims(&m),
                            spec.dir.display(),
                            t.elapsed().as_secs_f64(),
                            crate::embed::warm::self_rss_kb() / 1024,
                            model::RSS_TARGET_MB
                        ),
                    )),
                    Err(e) => checks
                        .push(Check::new("active-model", Status::Fail, e.to_string()).fix(INSTALL)),
                }
            }
            checks.push(embed_service_check(&spec));
        }
    }
}

/// The one per-user warm embedding service of the active model: socket, model, pid and RSS.
fn embed_service_check(spec: &model::ModelSpec) -> Check {
    use crate::embed::warm;
    let Some(socket) = warm::socket_path(spec) else {
        return Check::new("embed-service", Status::Info, "no service directory");
    };
    if !warm::enabled() {
        return Check::new(
            "embed-service",
            Status::Info,
            "disabled by KDD_EMBED_WARM=0 (every command loads the model in-process)",
        );
    }
    match warm::running(spec) {
        Some(st) => {
            let mb = st.rss_kb / 1024;
            let (status, fix) = if mb <= model::RSS_TARGET_MB {
                (Status::Ok, None)
            } else {
                (
                    Status::Warn,
                    Some(format!(
                        "above the target: stop it (`kill {}`; the hook and the CLI start it again on demand) and report the figure if it recurs",
                        st.pid
                    )),
                )
            };
            let check = Check::new(
                "embed-service",
                status,
                format!(
                    "one shared service for this user: {} (pid {}, {} MB RSS, target ≤ {} MB) at {}",
                    st.model,
                    st.pid,
                    mb,
                    model::RSS_TARGET_MB,
                    st.socket.display()
                ),
            );
            match fix {
                Some(f) => check.fix(f),
                None => check,
            }
        }
        None => Check::new(
            "embed-service",
            Status::Info,
            format!(
                "not running (started on demand by the hook and the CLI; exits after {} s idle) at {}",
                warm::idle_secs(),
                socket.display()
            ),
        ),
    }
}

fn sums_check(name: &str, dir: &Path) -> Check {
    match verify_sums(dir) {
        Some(Ok(())) => Check::new(
            name,
            Status::Ok,
            format!("{} (checksums ok)", dir.display()),
        ),
        Some(Err(e)) => Check::new(
            name,
            Status::Fail,
            format!("{}: checksum check failed: {e}", dir.display()),
        )
        .fix(format!("{INSTALL} (re-provisions what is damaged)")),
        None => Check::new(
            name,
            Status::Info,
            format!("{} (sha256sum unavailable: not verified)", dir.display()),
        ),
    }
}

fn index_check(global: &GlobalArgs, checks: &mut Vec<Check>) {
    let settings = match global.settings() {
        Ok(s) => s,
        Err(_) => {
            checks.push(Check::new(
                "index",
                Status::Info,
                "not inside a git repository",
            ));
            return;
        }
    };
    let manifest = settings.index_dir.join("manifest.json");
    if !manifest.exists() {
        checks.push(
            Check::new(
                "index",
                Status::Info,
                format!("{}: no index yet", settings.repo_root.display()),
            )
            .fix("kdd index"),
        );
        return;
    }
    match crate::artifact::read_manifest(&manifest) {
        Err(e) => checks.push(Check::new("index", Status::Fail, e.to_string()).fix("kdd index")),
        Ok(m) => {
            let level = format!("{:?}", m.index_level);
            let mut msg = format!("{}: index level {level}", settings.repo_root.display());
            let mut status = Status::Ok;
            let mut fix = None;
            if let Some(e) = &m.embedding {
                msg.push_str(&format!(
                    ", embeddings {} ({} dims, {})",
                    e.model, e.dimensions, e.quantization
                ));
                if let Some(active) = discover().model_id() {
                    if active != e.model {
                        status = Status::Warn;
                        msg.push_str(&format!("; the active model is {active}"));
                        fix = Some("kdd index (re-embeds with the active model)".to_string());
                    }
                }
            } else if discover().model_id().is_some()
                && discover_loadable()
                && m.index_level == crate::artifact::IndexLevel::L1
            {
                status = Status::Info;
                msg.push_str("; a model is installed now");
                fix = Some("kdd index (upgrades the index to L2)".to_string());
            }
            let mut c = Check::new("index", status, msg);
            c.fix = fix;
            checks.push(c);
        }
    }
}

/// The query cache of the current repository: every store read through (LMDB tables, vectors,
/// tantivy checksums). A damaged cache is condemned (the next query rebuilds it); with
/// `--fix` it is rebuilt now.
fn cache_check(global: &GlobalArgs, fix: bool, checks: &mut Vec<Check>) {
    use crate::cache::{self, Cache, Health, OpenOptions};
    let Ok(settings) = global.settings() else {
        return;
    };
    if !settings.index_dir.join("manifest.json").is_file() {
        return;
    }
    let root = cache::cache_root(&settings);
    let (gen, why) = match cache::health(&root) {
        Health::Missing => {
            let msg = "no query cache yet (the first query builds it)";
            checks.push(Check::new("cache", Status::Info, msg));
            return;
        }
        Health::Outdated(why) => {
            let msg =
                format!("query cache built by another kdd ({why}); the next query rebuilds it");
            checks.push(Check::new("cache", Status::Info, msg));
            return;
        }
        Health::Intact(gen) => {
            checks.push(Check::new(
                "cache",
                Status::Ok,
                format!("query cache intact ({})", gen.display()),
            ));
            return;
        }
        Health::Damaged(gen, why) => (gen, why),
    };
    let damaged = format!("query cache damaged: {why}");
    if !fix {
        checks.push(
            Check::new(
                "cache",
                Status::Warn,
                format!("{damaged}; discarded, the next query rebuilds it"),
            )
            .fix("kdd doctor --fix (rebuilds it now)"),
        );
        return;
    }
    let opts = OpenOptions {
        force_rebuild: true,
    };
    match Cache::open_with(&settings, &opts) {
        Ok(c) => checks.push(Check::new(
            "cache",
            Status::Ok,
            format!(
                "{damaged}; rebuilt into {} (was {})",
                c.generation().display(),
                gen.display()
            ),
        )),
        Err(e) => checks.push(
            Check::new(
                "cache",
                Status::Fail,
                format!("{damaged}; rebuild failed: {e}"),
            )
            .fix(format!("delete {} and run `kdd index`", root.display())),
        ),
    }
}

fn discover_loadable() -> bool {
    match discover() {
        ModelChoice::Model(spec) => spec.missing_file().is_none() && spec.runtime.exists(),
        ModelChoice::Test => true,
        ModelChoice::Disabled => false,
    }
}
