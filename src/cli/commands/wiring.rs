//! How kdd is wired into a repository's git: the checks `kdd doctor` runs (merge driver,
//! attributes, hooks, conflicts under `.kdd-index/`) and the hook-manager installs behind
//! `kdd install --lefthook` / `--husky`.
//!
//! Hooks reach `kdd-hook` three ways, and [`checks`] recognises each:
//! - plain git: kdd's shim in the hooks directory (`core.hooksPath` or `.git/hooks`);
//! - lefthook: git's hook calls lefthook, and the lefthook configuration (its main file or a file
//!   it `extends`) runs `kdd-hook <hook>`;
//! - husky (v9: `core.hooksPath = .husky/_`; v8: `.husky`): `.husky/<hook>` runs `kdd-hook`.
//!
//! The snippets are compiled into the binary (`hooks/lefthook.yml`, [`husky_line`]), so nothing
//! points at files only a source checkout has. Invariants: installs are idempotent; a file of
//! the user's is only appended to (never rewritten) except for one `extends:` list item inserted
//! into an existing block list; the snippets never fail a commit when `kdd-hook` is missing.

pub use super::lefthook::{install_lefthook, LEFTHOOK, LEFTHOOK_KDD};
use super::lefthook::{lefthook_config, lefthook_runs};
use crate::config::Settings;
use std::path::{Path, PathBuf};

/// The line kdd adds to `.husky/<hook>`.
pub fn husky_line(hook: &str) -> String {
    format!("if command -v kdd-hook >/dev/null 2>&1; then kdd-hook {hook} \"$@\"; fi\n")
}

/// A git-integration check for `kdd doctor`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// `merge-driver`, `gitattributes`, `pre-commit-hook`, `hooks` or `index-conflicts`.
    pub name: String,
    pub ok: bool,
    /// What was found, and what to run when not ok.
    pub message: String,
}

/// Which hook manager owns the repository's hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manager {
    /// Plain git hooks (kdd's shims).
    Git,
    /// lefthook, with its main configuration file.
    Lefthook(PathBuf),
    /// husky, with its directory (`.husky`).
    Husky(PathBuf),
}

/// The hook manager in use: husky when `core.hooksPath` points into `.husky`, lefthook when a
/// lefthook configuration exists, else plain git.
pub fn manager(settings: &Settings) -> Manager {
    let dir = &settings.repo_root;
    if let Some(hp) = crate::git::config_get(dir, "core.hooksPath") {
        let p = Path::new(&hp);
        if p.components().any(|c| c.as_os_str() == ".husky") {
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            };
            let husky = if abs.ends_with("_") {
                abs.parent().map(Path::to_path_buf).unwrap_or(abs)
            } else {
                abs
            };
            return Manager::Husky(husky);
        }
    }
    match lefthook_config(dir) {
        Some(c) => Manager::Lefthook(c),
        None => Manager::Git,
    }
}

/// A hook-manager file kdd is about to change: `Ok(None)` when missing, its text when it is a
/// regular file (at most 1 MiB), an error naming it when it is a link or anything else — a
/// committed link must never make `kdd install` write outside the repository.
pub fn user_file(p: &Path) -> std::io::Result<Option<String>> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(m) if !m.file_type().is_file() => {
            let why = "not a regular file (a link?); kdd does not follow or change it";
            return Err(std::io::Error::other(format!("{}: {why}", p.display())));
        }
        Ok(_) => {}
    }
    let bytes = crate::source::read_regular(p, &p.display().to_string(), 1 << 20)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The text of the file git runs for a hook: links followed (hooks are often linked), but only a
/// regular file is read, at most 1 MiB of it (a committed `.husky/pre-commit` linked to
/// `/dev/zero` made `kdd doctor` read 24 GB). Empty otherwise.
fn hook_text(file: &Path) -> String {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(file)
    else {
        return String::new();
    };
    let mut bytes = Vec::new();
    if f.metadata().is_ok_and(|m| m.is_file()) {
        let _ = f.take(1 << 20).read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// How `hook` (one of [`super::install::HOOKS`]) reaches `kdd-hook`: `Ok(how)` or `Err(what
/// is missing and what to run)`.
pub fn hook_wiring(settings: &Settings, hook: &str) -> Result<String, String> {
    let file = crate::hook::hooks_dir(settings).join(hook);
    let script = hook_text(&file);
    let manager = manager(settings);
    ignored_by_git(&file, &manager)?;
    match manager {
        Manager::Husky(dir) => {
            let file = dir.join(hook);
            let runs = user_file(&file).is_ok_and(|t| t.is_some_and(|t| t.contains("kdd-hook")));
            if runs {
                Ok(format!("husky: {} runs kdd-hook", file.display()))
            } else {
                Err(format!(
                    "husky manages hooks but {} does not run kdd-hook; run `kdd install --husky`",
                    file.display()
                ))
            }
        }
        Manager::Lefthook(config) if !script.contains("kdd-hook") => {
            let runs = lefthook_runs(&settings.repo_root, &config, hook);
            let called = script.contains("lefthook");
            match (runs, called) {
                (true, true) => Ok(format!("lefthook: {} runs kdd-hook", config.display())),
                (true, false) => Err(format!(
                    "{} runs kdd-hook but git's {hook} hook does not call lefthook; run \
                     `lefthook install`",
                    config.display()
                )),
                (false, _) => Err(format!(
                    "lefthook manages hooks but {} does not run `kdd-hook {hook}`; run `kdd \
                     install --lefthook`",
                    config.display()
                )),
            }
        }
        _ if script.contains("kdd-hook") => Ok(format!("{hook} runs kdd-hook")),
        _ => Err(format!(
            "no {hook} hook runs kdd-hook; run `kdd install` (`--lefthook` or `--husky` when a \
             hook manager owns the hooks)"
        )),
    }
}

/// The file git runs for a hook must exist and be executable, or git runs nothing: husky 9's
/// wrappers (`.husky/_`, ignored by git, gone after `git clean -xfd` and absent from a new
/// worktree), or a hook whose mode lost its executable bit.
fn ignored_by_git(file: &Path, manager: &Manager) -> Result<(), String> {
    let husky = matches!(manager, Manager::Husky(d) if file.parent() != Some(d.as_path()));
    // husky 8's hooks source `.husky/_/husky.sh`, gone after `git clean -xfd`: every hook fails.
    if let Manager::Husky(d) = manager {
        let helper = d.join("_").join("husky.sh");
        let sources = hook_text(file).contains("_/husky.sh");
        if !husky && sources && !helper.exists() {
            return Err(format!(
                "{} sources {}, which is missing, so the hook fails (`npx husky install` writes \
                 it again)",
                file.display(),
                helper.display()
            ));
        }
    }
    match std::fs::metadata(file) {
        Err(_) if husky => Err(format!(
            "git runs no hook: {} is missing (husky's own folder; `npx husky` writes it again)",
            file.display()
        )),
        Ok(m) if !executable(&m) => Err(format!(
            "{} is not executable, so git ignores it; run `kdd doctor --fix` or `chmod +x {}`",
            file.display(),
            file.display()
        )),
        _ => Ok(()),
    }
}

#[cfg(unix)]
fn executable(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    m.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn executable(_m: &std::fs::Metadata) -> bool {
    true
}

/// The `hooks` check: every hook after `pre-commit` ([`super::install::HOOKS`]) reaches
/// `kdd-hook`. Without them merges, checkouts, rebases and amends are not healed.
fn other_hooks(settings: &Settings) -> Check {
    let missing: Vec<String> = super::install::HOOKS[1..]
        .iter()
        .filter_map(|h| hook_wiring(settings, h).err())
        .collect();
    Check {
        name: "hooks".into(),
        ok: missing.is_empty(),
        message: if missing.is_empty() {
            format!("{} run kdd-hook", super::install::HOOKS[1..].join(", "))
        } else {
            format!(
                "merges, checkouts and rewrites are not healed: {}",
                missing.join("; ")
            )
        },
    }
}

/// Checks `kdd doctor` runs for git integration.
pub fn checks(settings: &Settings) -> Vec<Check> {
    let dir = &settings.repo_root;
    let mut checks = Vec::new();
    let driver = crate::git::config_get(dir, "merge.kdd.driver");
    checks.push(Check {
        name: "merge-driver".into(),
        ok: driver.is_some(),
        message: match driver {
            Some(d) => format!("merge.kdd.driver = {d}"),
            None => "merge.kdd.driver is not configured: merges of .kdd-index/ fall back to a \
                     text merge; run `kdd install`"
                .into(),
        },
    });
    let attr = crate::git::git(
        dir,
        &["check-attr", "merge", "--", ".kdd-index/manifest.json"],
    )
    .unwrap_or_default();
    let attr_ok = attr.trim_end().ends_with(": kdd");
    checks.push(Check {
        name: "gitattributes".into(),
        ok: attr_ok,
        message: if attr_ok {
            ".kdd-index/** merge=kdd".into()
        } else {
            "`.kdd-index/** merge=kdd` is missing from .gitattributes; run `kdd install`".into()
        },
    });
    if settings.bare {
        return checks;
    }
    let wiring = hook_wiring(settings, "pre-commit");
    let pre_commit = wiring.is_ok();
    checks.push(Check {
        name: "pre-commit-hook".into(),
        ok: pre_commit,
        message: wiring.unwrap_or_else(|e| e),
    });
    // Without kdd's pre-commit the other hooks are missing too: one failure says it.
    if pre_commit {
        checks.push(other_hooks(settings));
    }
    let markers = crate::hook::conflict_marker_files(&settings.index_dir);
    checks.push(Check {
        name: "index-conflicts".into(),
        ok: markers.is_empty(),
        message: if markers.is_empty() {
            "no conflict markers in .kdd-index/".into()
        } else {
            format!(
                "conflict markers in {}; run `kdd resolve`",
                markers.join(", ")
            )
        },
    });
    checks
}

/// Wire kdd into husky: append [`husky_line`] to `.husky/<hook>` for every hook kdd uses
/// (creating the file when missing). Returns what was done, one line each.
pub fn install_husky(settings: &Settings, hooks: &[&str]) -> std::io::Result<Vec<String>> {
    let husky = match manager(settings) {
        Manager::Husky(d) => d,
        _ => settings.repo_root.join(".husky"),
    };
    if std::fs::symlink_metadata(&husky).is_ok_and(|m| !m.is_dir()) {
        return Err(std::io::Error::other(format!(
            "{}: not a directory (a link?); kdd does not follow or change it",
            husky.display()
        )));
    }
    std::fs::create_dir_all(&husky)?;
    let mut done = Vec::new();
    for hook in hooks {
        let p = husky.join(hook);
        let mut text = user_file(&p)?.unwrap_or_default();
        if text.contains("kdd-hook") {
            done.push(format!("{}: already runs kdd-hook", p.display()));
            continue;
        }
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        if text.is_empty() {
            text.push_str("#!/usr/bin/env sh\n");
        }
        text.push_str(&husky_line(hook));
        std::fs::write(&p, text)?;
        // husky 8 (`core.hooksPath = .husky`) has git run these files themselves.
        super::install::make_executable(&p)?;
        done.push(format!("{}: runs kdd-hook {hook}", p.display()));
    }
    if !matches!(manager(settings), Manager::Husky(_)) {
        done.push("git does not use .husky yet: run `npx husky` (husky init) once".into());
    }
    Ok(done)
}
