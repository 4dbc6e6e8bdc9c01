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

use crate::config::Settings;
use std::path::{Path, PathBuf};

/// The lefthook snippet (`hooks/lefthook.yml`).
pub const LEFTHOOK: &str = include_str!("../../../hooks/lefthook.yml");
/// The file `kdd install --lefthook` writes when a lefthook configuration already exists; the
/// configuration `extends` it.
pub const LEFTHOOK_KDD: &str = ".lefthook-kdd.yml";
/// Lefthook main configuration names, in lefthook's order.
/// JSON is read by the same YAML loader (JSON is YAML's flow style); TOML is not read.
const LEFTHOOK_CONFIGS: [&str; 8] = [
    "lefthook.yml",
    ".lefthook.yml",
    "lefthook.yaml",
    ".lefthook.yaml",
    "lefthook.json",
    ".lefthook.json",
    ".config/lefthook.yml",
    ".config/lefthook.yaml",
];

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

fn lefthook_config(dir: &Path) -> Option<PathBuf> {
    LEFTHOOK_CONFIGS
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// The files `extends:` of a lefthook configuration lists (block or inline list).
fn lefthook_extends(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("extends:") {
            let rest = rest.trim();
            if let Some(inner) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
                out.extend(inner.split(',').map(|s| unquote(s.trim())));
            } else {
                in_block = rest.is_empty();
            }
            continue;
        }
        if in_block {
            match line.trim_start().strip_prefix("- ") {
                Some(item) if line.starts_with(' ') || line.starts_with('-') => {
                    out.push(unquote(item.trim()))
                }
                _ if line.trim().is_empty() || line.trim_start().starts_with('#') => {}
                _ => in_block = false,
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn unquote(s: &str) -> String {
    s.trim_matches(|c| c == '"' || c == '\'').to_string()
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

/// A lefthook configuration file's text: a regular file inside the repository (the path
/// normalised, no link followed), at most 1 MiB; `None` otherwise. A committed `extends:` entry
/// is a teammate's input: it never makes kdd read outside the repository or without bound.
fn config_text(dir: &Path, rel: &str) -> Option<String> {
    let rel = crate::paths::normalize_rel(rel).filter(|r| !r.is_empty())?;
    let bytes = crate::source::read_regular(&dir.join(&rel), &rel, 1 << 20).ok()?;
    String::from_utf8(bytes).ok()
}

/// Whether lefthook's configuration (main file, `lefthook-local.yml`, extended files) runs
/// `kdd-hook <hook>`.
fn lefthook_runs(dir: &Path, config: &Path, hook: &str) -> bool {
    lefthook_runs_but(dir, config, hook, None)
}

/// [`lefthook_runs`] leaving out the extended file `but` (a path relative to `dir`).
fn lefthook_runs_but(dir: &Path, config: &Path, hook: &str, but: Option<&str>) -> bool {
    let main_rel = config
        .strip_prefix(dir)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let main = config_text(dir, &main_rel).unwrap_or_default();
    let mut rels = vec!["lefthook-local.yml".to_string()];
    rels.extend(lefthook_extends(&main));
    let left_out = |r: &String| but.is_some() && crate::paths::normalize_rel(r).as_deref() == but;
    config_runs(&main, hook)
        || rels
            .iter()
            .filter(|r| !left_out(r))
            .filter_map(|r| config_text(dir, r))
            .any(|t| config_runs(&t, hook))
}

/// The sections of kdd's lefthook snippet ([`LEFTHOOK`]) for `hooks`, with its heading
/// comment: a top-level key and the indented lines under it.
fn lefthook_sections(hooks: &[&str]) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in LEFTHOOK.lines() {
        if !line.starts_with([' ', '#']) && !line.is_empty() {
            keep = hooks.iter().any(|h| line.strip_suffix(':') == Some(*h));
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether one lefthook configuration runs `kdd-hook <hook>`: an entry of the hook's
/// `commands`, `scripts` or `jobs` whose `run` calls it, neither it nor the hook `skip: true`
/// or limited by `only:`
/// (a commented-out or skipped entry was taken for a running one: red team, seventeenth round).
/// Read with the bounded YAML loader; a file it refuses runs nothing.
fn config_runs(text: &str, hook: &str) -> bool {
    use yaml_rust2::Yaml;
    let needle = format!("kdd-hook {hook}");
    let Some(doc) = crate::parse::yaml::load(text)
        .ok()
        .and_then(|d| d.into_iter().next())
    else {
        return false;
    };
    // `skip: true` never runs; `only:` runs in some states alone (a merge, a branch), so a
    // plain commit may not run it.
    let skipped = |y: &Yaml| y["skip"].as_bool() == Some(true) || !y["only"].is_badvalue();
    let h = &doc[hook];
    if skipped(h) {
        return false;
    }
    let mut entries: Vec<&Yaml> = Vec::new();
    for key in ["commands", "scripts"] {
        entries.extend(h[key].as_hash().into_iter().flat_map(|m| m.values()));
    }
    entries.extend(h["jobs"].as_vec().into_iter().flatten());
    entries
        .into_iter()
        .any(|e| !skipped(e) && e["run"].as_str().is_some_and(|r| r.contains(&needle)))
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

/// Wire kdd into lefthook: a new `lefthook.yml` holding the snippet, or (when a configuration
/// exists and does not run kdd yet) [`LEFTHOOK_KDD`] plus an `extends:` entry for it. Then
/// `lefthook install` when lefthook can be found. Returns what was done, one line each.
pub fn install_lefthook(settings: &Settings) -> std::io::Result<Vec<String>> {
    let dir = &settings.repo_root;
    let mut done = Vec::new();
    match lefthook_config(dir) {
        None => {
            let p = dir.join("lefthook.yml");
            user_file(&p)?;
            std::fs::write(&p, LEFTHOOK)?;
            done.push(format!("{}: written with kdd's hooks", p.display()));
        }
        Some(config)
            if super::install::HOOKS
                .iter()
                .all(|h| lefthook_runs(dir, &config, h)) =>
        {
            done.push(format!("{}: already runs kdd-hook", config.display()));
        }
        Some(config) => {
            // `.lefthook-kdd.yml` is kdd's own: written anew with the hooks no other file of
            // the configuration runs, so a configuration that already runs some of them (by
            // hand, say) is completed and nothing runs twice.
            let rest: Vec<&str> = super::install::HOOKS
                .into_iter()
                .filter(|h| !lefthook_runs_but(dir, &config, h, Some(LEFTHOOK_KDD)))
                .collect();
            let kdd = dir.join(LEFTHOOK_KDD);
            let text = user_file(&config)?.unwrap_or_default();
            user_file(&kdd)?;
            std::fs::write(&kdd, lefthook_sections(&rest))?;
            done.push(format!(
                "{}: written with kdd's {} hooks",
                kdd.display(),
                rest.join(", ")
            ));
            let extended = lefthook_extends(&text)
                .iter()
                .any(|r| crate::paths::normalize_rel(r).as_deref() == Some(LEFTHOOK_KDD));
            match add_extends(&text, LEFTHOOK_KDD) {
                _ if extended => {}
                Some(new) => {
                    std::fs::write(&config, new)?;
                    done.push(format!("{}: extends {LEFTHOOK_KDD}", config.display()));
                }
                None => done.push(format!(
                    "{}: add `{LEFTHOOK_KDD}` to its inline `extends:` list by hand",
                    config.display()
                )),
            }
        }
    }
    done.push(run_lefthook_install(dir));
    Ok(done)
}

/// `text` with `item` added to its `extends:` block list (or a new one appended); `None` for
/// an inline list, which is left to the user.
fn add_extends(text: &str, item: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines.iter().position(|l| l.starts_with("extends:")) else {
        let mut out = text.to_string();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("extends:\n  - {item}\n"));
        return Some(out);
    };
    if !lines[at]["extends:".len()..].trim().is_empty() {
        return None;
    }
    let indent = lines
        .get(at + 1)
        .map(|l| &l[..l.len() - l.trim_start().len()])
        .filter(|i| !i.is_empty())
        .unwrap_or("  ");
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    out.insert(at + 1, format!("{indent}- {item}"));
    Some(out.join("\n") + "\n")
}

fn run_lefthook_install(dir: &Path) -> String {
    let local = dir.join("node_modules/.bin/lefthook");
    let bin = if local.is_file() {
        local
    } else {
        PathBuf::from("lefthook")
    };
    match crate::proc::user_env(&mut std::process::Command::new(&bin))
        .arg("install")
        .current_dir(dir)
        .output()
    {
        Ok(o) if o.status.success() => "lefthook install: git hooks now call lefthook".into(),
        _ => "lefthook was not found or failed: run `lefthook install` so git calls it".into(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extends_parsed_and_added() {
        assert_eq!(
            lefthook_extends("a: 1\nextends:\n  - x.yml\n  - 'y.yml'\nb: 2\n  - z\n"),
            vec!["x.yml", "y.yml"]
        );
        assert_eq!(
            lefthook_extends("extends: [a.yml, \"b.yml\"]\n"),
            vec!["a.yml", "b.yml"]
        );
        assert_eq!(
            add_extends("pre-commit:\n  x: 1", "k.yml").unwrap(),
            "pre-commit:\n  x: 1\nextends:\n  - k.yml\n"
        );
        assert_eq!(
            add_extends("extends:\n    - a.yml\nx: 1\n", "k.yml").unwrap(),
            "extends:\n    - k.yml\n    - a.yml\nx: 1\n"
        );
        assert!(add_extends("extends: [a.yml]\n", "k.yml").is_none());
    }

    #[test]
    fn lefthook_entries_that_run() {
        assert!(config_runs(super::LEFTHOOK, "post-merge"));
        let commented = "post-merge:\n  commands:\n    # kdd:\n    #   run: kdd-hook post-merge\n";
        assert!(!config_runs(commented, "post-merge"));
        let skipped = "post-merge:\n  commands:\n    kdd:\n      run: kdd-hook post-merge {0}\n      skip: true\n";
        assert!(!config_runs(skipped, "post-merge"));
        let jobs = "post-merge:\n  jobs:\n    - run: kdd-hook post-merge {0}\n";
        assert!(config_runs(jobs, "post-merge"));
        assert!(!config_runs("post-merge: [", "post-merge"));
        let only = "post-merge:\n  commands:\n    kdd:\n      run: kdd-hook post-merge\n      only: [rebase]\n";
        assert!(!config_runs(only, "post-merge"));
    }
}
