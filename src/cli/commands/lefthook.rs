//! lefthook, one of the hook managers of [`super::wiring`]: its configuration files (main, the
//! files it `extends`, `lefthook-local.yml`) read as lefthook merges them, whether they run
//! `kdd-hook <hook>`, and `kdd install --lefthook`: a new `lefthook.yml` holding kdd's snippet,
//! or `.lefthook-kdd.yml` with the kdd hooks no other file runs, which the existing
//! configuration `extends`. Invariants: a user's file is only given one `extends:` item in a
//! YAML block list (never a JSON file); every configuration file is read bounded, inside the
//! repository, links never followed.

use super::wiring::user_file;
use crate::config::Settings;
use std::collections::HashSet;
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

pub(super) fn lefthook_config(dir: &Path) -> Option<PathBuf> {
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
pub(super) fn lefthook_runs(dir: &Path, config: &Path, hook: &str) -> bool {
    lefthook_runs_but(dir, config, hook, None)
}

/// [`lefthook_runs`] leaving out the extended file `but` (a path relative to `dir`). lefthook
/// merges the files: a skip in any of them (the hook, or an entry of the same name) holds
/// (red team, eighteenth round: kdd's entry in `.lefthook-kdd.yml` took the name of one the
/// main file skips, and doctor said it ran).
fn lefthook_runs_but(dir: &Path, config: &Path, hook: &str, but: Option<&str>) -> bool {
    let main_rel = config
        .strip_prefix(dir)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let main = config_text(dir, &main_rel).unwrap_or_default();
    let mut rels = vec!["lefthook-local.yml".to_string()];
    rels.extend(lefthook_extends(&main));
    let left_out = |r: &String| but.is_some() && crate::paths::normalize_rel(r).as_deref() == but;
    let mut files = vec![(true, config_entries(&main, hook))];
    for r in &rels {
        if let Some(t) = config_text(dir, r) {
            files.push((!left_out(r), config_entries(&t, hook)));
        }
    }
    let skipped: HashSet<&String> = files.iter().flat_map(|(_, e)| &e.skipped).collect();
    !files.iter().any(|(_, e)| e.hook_skipped)
        && files
            .iter()
            .filter(|(counted, _)| *counted)
            .any(|(_, e)| e.running.iter().any(|n| !skipped.contains(n)))
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

/// What one lefthook configuration says of a hook: the names of its entries that run
/// `kdd-hook <hook>`, the names it skips, and whether it skips the whole hook.
#[derive(Default)]
struct HookEntries {
    running: Vec<String>,
    skipped: Vec<String>,
    hook_skipped: bool,
}

/// The [`HookEntries`] of one lefthook configuration: entries of the hook's `commands`,
/// `scripts` or `jobs` whose `run` calls `kdd-hook <hook>`; `skip: true` and `only:` skip (a
/// commented-out or skipped entry was taken for a running one: red team, seventeenth round).
/// Read with the bounded YAML loader; a file it refuses says nothing.
fn config_entries(text: &str, hook: &str) -> HookEntries {
    use yaml_rust2::Yaml;
    let needle = format!("kdd-hook {hook}");
    let Some(doc) = crate::parse::yaml::load(text)
        .ok()
        .and_then(|d| d.into_iter().next())
    else {
        return HookEntries::default();
    };
    // `skip: true` never runs; `only:` runs in some states alone (a merge, a branch), so a
    // plain commit may not run it.
    let skipped = |y: &Yaml| y["skip"].as_bool() == Some(true) || !y["only"].is_badvalue();
    let h = &doc[hook];
    let mut entries: Vec<(String, &Yaml)> = Vec::new();
    for key in ["commands", "scripts"] {
        for (k, v) in h[key].as_hash().into_iter().flatten() {
            entries.push((k.as_str().unwrap_or_default().to_string(), v));
        }
    }
    for (i, j) in h["jobs"].as_vec().into_iter().flatten().enumerate() {
        let name = j["name"]
            .as_str()
            .map_or(format!("#job{i}"), str::to_string);
        entries.push((name, j));
    }
    let mut out = HookEntries {
        hook_skipped: skipped(h),
        ..HookEntries::default()
    };
    for (name, e) in entries {
        if skipped(e) {
            out.skipped.push(name);
        } else if e["run"].as_str().is_some_and(|r| r.contains(&needle)) {
            out.running.push(name);
        }
    }
    out
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
            // A JSON configuration is never given YAML lines (every commit then failed).
            let json = config.extension().is_some_and(|e| e == "json");
            match add_extends(&text, LEFTHOOK_KDD).filter(|_| !json) {
                _ if extended => {}
                Some(new) => {
                    std::fs::write(&config, new)?;
                    done.push(format!("{}: extends {LEFTHOOK_KDD}", config.display()));
                }
                None => done.push(format!(
                    "{}: add `{LEFTHOOK_KDD}` to its `extends` list by hand (kdd adds it only to \
                     a YAML block list)",
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

    fn config_runs(text: &str, hook: &str) -> bool {
        let e = config_entries(text, hook);
        !e.hook_skipped && !e.running.is_empty()
    }

    #[test]
    fn lefthook_entries_that_run() {
        assert!(config_runs(LEFTHOOK, "post-merge"));
        let commented = "post-merge:\n  commands:\n    # kdd:\n    #   run: kdd-hook post-merge\n";
        assert!(!config_runs(commented, "post-merge"));
        let skipped = "post-merge:\n  commands:\n    kdd:\n      run: kdd-hook post-merge {0}\n      skip: true\n";
        assert!(!config_runs(skipped, "post-merge"));
        let jobs = "post-merge:\n  jobs:\n    - run: kdd-hook post-merge {0}\n";
        assert!(config_runs(jobs, "post-merge"));
        assert!(!config_runs("post-merge: [", "post-merge"));
        let only = "post-merge:\n  commands:\n    kdd:\n      run: kdd-hook post-merge\n      only: [rebase]\n";
        assert!(!config_runs(only, "post-merge"));
        let e = config_entries(skipped, "post-merge");
        assert_eq!((e.skipped, e.running), (vec!["kdd".to_string()], vec![]));
    }
}
