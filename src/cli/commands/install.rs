//! `kdd install [--repo PATH]`: wire kdd into a repository, idempotently.
//!
//! - `merge.kdd.name` / `merge.kdd.driver` in the repository's git config;
//! - `.kdd-index/** merge=kdd` in `.gitattributes` (or `.git/info/attributes` with `--local`);
//! - hook shims (`pre-commit`, `post-commit`, `post-merge`, `post-checkout`, `post-rewrite`) in the hooks
//!   directory git uses, chaining an existing foreign hook (kept as `<hook>.pre-kdd`) instead of
//!   overwriting it. When lefthook or husky owns the hooks (or with `--lefthook` / `--husky`)
//!   kdd's hooks are added to their configuration instead ([`super::wiring`]).

use crate::cli::commands::gitattributes::{LINES, NO_EOL};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::config::Settings;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The plain-git hook shim (`hooks/kdd-shim.sh`).
pub const SHIM: &str = include_str!("../../../hooks/kdd-shim.sh");
/// Hooks kdd installs.
pub const HOOKS: [&str; 5] = [
    "pre-commit",
    "post-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
];

/// Arguments of `kdd install`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {
    /// Write the attributes to `.git/info/attributes` (local, untracked) instead of `.gitattributes`.
    #[arg(long)]
    pub local: bool,
    /// Only configure the merge driver and attributes; do not touch hooks.
    #[arg(long)]
    pub no_hooks: bool,
    /// Add kdd's hooks to lefthook's configuration (a new `lefthook.yml`, or
    /// `.lefthook-kdd.yml` that the existing one `extends`), then `lefthook install`.
    #[arg(long, conflicts_with_all = ["husky", "no_hooks"])]
    pub lefthook: bool,
    /// Add kdd's hooks to husky's `.husky/<hook>` files.
    #[arg(long, conflicts_with = "no_hooks")]
    pub husky: bool,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    for line in install(&settings, args)? {
        output::info(&line);
    }
    Ok(ExitStatus::Success)
}

fn sibling(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.with_file_name(name);
    p.exists().then_some(p)
}

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Route `.kdd-index/**` to the driver in `attr_file` (and mark it `-text`), once.
fn route_attributes(attr_file: &Path, done: &mut Vec<String>) -> anyhow::Result<()> {
    let existing = super::wiring::user_file(attr_file)?.unwrap_or_default();
    if existing
        .lines()
        .any(|l| l.trim() == ".kdd-index/** merge=kdd")
    {
        done.push(format!(
            "{}: already routes .kdd-index/ to kdd",
            attr_file.display()
        ));
        // Attributes written before artifacts were marked `-text` (an autocrlf checkout wrote
        // them CRLF, and every hook run then left them all modified).
        if !existing.lines().any(|l| l.trim() == NO_EOL) {
            let mut text = existing;
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&format!("{NO_EOL}\n"));
            std::fs::write(attr_file, text).with_context(|| attr_file.display().to_string())?;
            done.push(format!("{}: added {NO_EOL}", attr_file.display()));
        }
    } else {
        let mut text = existing;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(LINES);
        if let Some(parent) = attr_file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(attr_file, text).with_context(|| attr_file.display().to_string())?;
        done.push(format!(
            "{}: added .kdd-index/** merge=kdd",
            attr_file.display()
        ));
    }
    Ok(())
}

/// Install everything; returns what was done, one line each.
pub fn install(settings: &Settings, args: &Args) -> anyhow::Result<Vec<String>> {
    let mut done = Vec::new();
    let dir = &settings.repo_root;
    let driver = match sibling("kdd-merge-driver") {
        Some(p) => format!("{} %O %A %B %P", quote(&p)),
        None => "kdd-merge-driver %O %A %B %P".to_string(),
    };
    crate::git::git(dir, &["config", "merge.kdd.name", "kdd index merge driver"])?;
    crate::git::git(dir, &["config", "merge.kdd.driver", &driver])?;
    done.push(format!("merge.kdd.driver = {driver}"));

    let attr_file = if args.local || settings.bare {
        settings.git_common_dir.join("info").join("attributes")
    } else {
        settings.repo_root.join(".gitattributes")
    };
    route_attributes(&attr_file, &mut done)?;
    if args.no_hooks || settings.bare {
        return Ok(done);
    }
    use super::wiring::{install_husky, install_lefthook, manager, Manager};
    let detected = manager(settings);
    if args.husky || matches!(detected, Manager::Husky(_)) {
        done.extend(install_husky(settings, &HOOKS)?);
        return Ok(done);
    }
    if args.lefthook || matches!(detected, Manager::Lefthook(_)) {
        done.extend(install_lefthook(settings)?);
        return Ok(done);
    }
    let hooks_dir = crate::hook::hooks_dir(settings);
    refuse_a_shared_hooks_dir(settings, &hooks_dir)?;
    std::fs::create_dir_all(&hooks_dir)?;
    let bin = sibling("kdd-hook").unwrap_or_else(|| PathBuf::from("kdd-hook"));
    let shim = SHIM.replace(
        "@KDD_HOOK_BIN@",
        &bin.display().to_string().replace('"', ""),
    );
    for name in HOOKS {
        let p = hooks_dir.join(name);
        // A link or a device is refused by name: never followed, read or written through.
        let current = super::wiring::user_file(&p)?;
        match current {
            Some(c) if c == shim => {
                // A shim git ignores (not executable) is not up to date.
                make_executable(&p)?;
                done.push(format!("{}: up to date", p.display()));
                continue;
            }
            Some(c) if c.contains("kdd: managed hook shim") => {}
            Some(_) => {
                let prev = hooks_dir.join(format!("{name}.pre-kdd"));
                if prev.exists() {
                    anyhow::bail!(
                        "{}: a foreign hook is installed and {} already exists; merge them by hand",
                        p.display(),
                        prev.display()
                    );
                }
                std::fs::rename(&p, &prev)?;
                done.push(format!(
                    "{}: existing hook kept as {} and chained",
                    p.display(),
                    prev.display()
                ));
            }
            None => {}
        }
        std::fs::write(&p, &shim).with_context(|| p.display().to_string())?;
        make_executable(&p)?;
        done.push(format!("{}: installed", p.display()));
    }
    Ok(done)
}

/// A hooks directory outside the repository (`core.hooksPath`, often set globally) serves
/// other repositories too: kdd's hooks written there would index every one of them. Nothing is
/// written; the user wires it by hand or gives this repository its own hooks.
fn refuse_a_shared_hooks_dir(settings: &Settings, hooks_dir: &Path) -> anyhow::Result<()> {
    let dir = resolve(hooks_dir);
    // A linked worktree's main work tree holds the common git dir: its hooks are this
    // repository's too.
    let main = settings
        .git_common_dir
        .parent()
        .filter(|_| settings.git_common_dir.ends_with(".git"));
    let roots = [
        Some(settings.repo_root.as_path()),
        Some(&settings.git_common_dir),
        main,
    ];
    if roots
        .into_iter()
        .flatten()
        .any(|r| dir.starts_with(resolve(r)))
    {
        return Ok(());
    }
    anyhow::bail!(
        "git runs this repository's hooks from {} (core.hooksPath), outside it: kdd does not \
         write there, as every repository using that folder would run kdd's hooks; add \
         `kdd-hook <hook> \"$@\"` to its {} hooks yourself, or give this repository its own \
         (`git config --local core.hooksPath .git/hooks`) and run `kdd install` again",
        hooks_dir.display(),
        HOOKS.join(", ")
    )
}

/// `p` with `.` and `..` applied (so `repo/../shared` is never taken for a path inside `repo`),
/// then links resolved as far as it exists; a folder not made yet is appended as written.
fn resolve(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut existing = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                existing.pop();
            }
            Component::CurDir => {}
            other => existing.push(other),
        }
    }
    let mut rest = Vec::new();
    while existing.canonicalize().is_err() {
        match existing.file_name() {
            Some(name) => {
                rest.push(name.to_os_string());
                existing.pop();
            }
            None => break,
        }
    }
    let mut out = existing.canonicalize().unwrap_or(existing);
    out.extend(rest.iter().rev());
    out
}

#[cfg(unix)]
pub fn make_executable(p: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
pub fn make_executable(_p: &Path) -> std::io::Result<()> {
    Ok(())
}
