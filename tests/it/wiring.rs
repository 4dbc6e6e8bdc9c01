//! Hook managers: `kdd install --lefthook` / `--husky` write kdd's hooks from the binary, and
//! `kdd doctor` recognises kdd wired through lefthook or husky (no false "no pre-commit hook").
//! The end-to-end commits run the real lefthook and husky (npm packages) when they are on PATH
//! at build time, and are ignored with that reason otherwise.

use crate::repo::{text, Repo};

fn doctor_hook(r: &Repo) -> serde_json::Value {
    doctor_check(r, "pre-commit-hook")
}

fn doctor_check(r: &Repo, name: &str) -> serde_json::Value {
    let o = r.kdd(&["doctor", "--no-load", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor --json");
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} check in {v}"))
}

/// A hook git ignores is not wired: one that lost its executable bit, or husky 9's wrappers
/// gone from `.husky/_` (`git clean -xfd`, a new worktree). Doctor said ok for both, and
/// `--fix` left the bit off (red team, seventeenth round).
#[test]
fn doctor_sees_the_hooks_git_ignores() {
    let r = Repo::new();
    assert!(r.kdd(&["install"]).status.success());
    let hook = r.dir.join(".git/hooks/pre-commit");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o644)).unwrap();
    let c = doctor_hook(&r);
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["message"].as_str().unwrap().contains("not executable"),
        "{c}"
    );
    let _ = r.kdd(&["doctor", "--no-load", "--fix"]);
    assert_eq!(doctor_hook(&r)["status"], "ok");
    // husky 9 whose wrapper folder is gone: git runs nothing.
    let r = Repo::new();
    r.git(&["config", "core.hooksPath", ".husky/_"]);
    assert!(r.kdd(&["install"]).status.success());
    let c = doctor_hook(&r);
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["message"].as_str().unwrap().contains("npx husky"), "{c}");
}

/// A `core.hooksPath` outside the repository serves other repositories too: `kdd install`
/// writes nothing there and says how to wire it, and a kdd hook reaching a repository that
/// does not use kdd does nothing (`doctor --fix` wrote the shims into a global hooks folder,
/// and an unrelated repository's commit then held `.kdd-index/`: red team, seventeenth round).
#[test]
fn a_shared_hooks_folder_is_never_written_nor_indexes_other_repositories() {
    let r = Repo::new();
    let shared = r.tmp.path().join("shared-hooks");
    std::fs::create_dir_all(&shared).unwrap();
    r.git(&["config", "core.hooksPath", shared.to_str().unwrap()]);
    let o = r.kdd(&["install"]);
    assert!(!o.status.success(), "{:?}", text(&o));
    assert!(text(&o).1.contains("outside it"), "{:?}", text(&o));
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
    // A relative path climbing out to a folder not made yet is outside too.
    r.git(&["config", "core.hooksPath", "../not-yet"]);
    assert!(!r.kdd(&["install"]).status.success());
    assert!(
        !r.tmp.path().join("not-yet").exists(),
        "wrote outside the repository"
    );
    // A folder of the repository's own, not made yet, is inside.
    r.git(&["config", "core.hooksPath", ".githooks"]);
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(r.exists(".githooks/pre-commit"));
    // The user wires the shared folder by hand: a repository without kdd stays untouched.
    let other = Repo::new();
    other.write("specs/01-domain/entities/Pedido.md", SPEC);
    other.git(&["add", "."]);
    let o = crate::repo::command("kdd-hook", &other.dir)
        .arg("pre-commit")
        .output()
        .expect("kdd-hook");
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(
        !other.exists(".kdd-index"),
        "a repository without kdd was indexed"
    );
    // A clone that never ran `kdd install` but whose HEAD holds an index still uses kdd, even
    // with `.kdd-index/` removed from the work tree by hand.
    r.write("specs/01-domain/entities/Pedido.md", SPEC);
    r.git(&["add", "."]);
    r.git(&["commit", "-q", "-m", "spec"]);
    let c = r.at(r.clone_to("clone"));
    std::fs::remove_dir_all(c.dir.join(".kdd-index")).unwrap();
    c.git(&["config", "core.hooksPath", ".githooks"]);
    c.write(
        "specs/01-domain/entities/Pedido.md",
        &SPEC.replace("Un pedido", "Un pedido editado"),
    );
    c.git(&["commit", "-q", "-a", "-m", "edit"]);
    let left = c.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index/nodes"]);
    assert_eq!(
        left.lines().count(),
        1,
        "the clone's commit dropped the index"
    );
}

/// Every hook kdd installs is checked, not only pre-commit: a missing `post-merge` leaves
/// merges unhealed, and `kdd doctor` said ok (red team, sixteenth round).
#[test]
fn doctor_checks_and_repairs_every_hook() {
    let r = Repo::new();
    assert!(r.kdd(&["install"]).status.success());
    assert_eq!(doctor_check(&r, "hooks")["status"], "ok");
    std::fs::remove_file(r.dir.join(".git/hooks/post-merge")).unwrap();
    let c = doctor_check(&r, "hooks");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["message"].as_str().unwrap().contains("post-merge"), "{c}");
    let (_, err) = text(&r.kdd(&["doctor", "--no-load", "--fix"]));
    assert!(err.contains("repaired hooks"), "{err}");
    assert!(r.exists(".git/hooks/post-merge"));
    assert_eq!(doctor_check(&r, "hooks")["status"], "ok");
}

/// The hooks kdd installs.
const HOOKS: [&str; 5] = [
    "pre-commit",
    "post-commit",
    "post-merge",
    "post-checkout",
    "post-rewrite",
];

/// Write `rel` with `content`, executable.
fn write_executable(r: &Repo, rel: &str, content: &str) {
    use std::os::unix::fs::PermissionsExt;
    r.write(rel, content);
    std::fs::set_permissions(r.dir.join(rel), std::fs::Permissions::from_mode(0o755)).unwrap();
}

const SPEC: &str = "---\nid: Pedido\nkind: entity\n---\n# Pedido\n\nUn pedido.\n";

#[test]
fn lefthook_config_is_extended_not_rewritten() {
    let r = Repo::new();
    r.write(
        "lefthook.yml",
        "pre-commit:\n  commands:\n    lint:\n      run: echo lint\n",
    );
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let main = r.read("lefthook.yml");
    assert!(
        main.starts_with("pre-commit:\n  commands:\n    lint:\n"),
        "{main}"
    );
    assert!(main.contains("extends:\n  - .lefthook-kdd.yml\n"), "{main}");
    assert!(r.read(".lefthook-kdd.yml").contains("kdd-hook pre-commit"));
    // No message points at files only a source checkout has.
    let (out, err) = text(&o);
    assert!(
        !out.contains("hooks/") && !err.contains("hooks/lefthook"),
        "{out}{err}"
    );
    // Idempotent.
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success());
    assert_eq!(r.read("lefthook.yml"), main);
    // Doctor sees kdd in lefthook's configuration and says what is left (git must call
    // lefthook), never "no pre-commit hook runs kdd-hook".
    let c = doctor_hook(&r);
    let msg = c["message"].as_str().unwrap();
    assert!(!msg.contains("no pre-commit hook"), "{c}");
    if c["status"] != "ok" {
        assert!(msg.contains("lefthook install"), "{c}");
    }
}

/// A lefthook configuration that runs kdd's pre-commit by hand but no other kdd hook is
/// completed by `kdd install --lefthook` (and so by `doctor --fix`): `.lefthook-kdd.yml` holds
/// the hooks nothing else runs, never a second pre-commit (red team, seventeenth round: the
/// advice said "by hand" and `--fix` could not repair it).
#[test]
fn a_lefthook_config_running_only_kdds_pre_commit_is_completed() {
    let r = Repo::new();
    let by_hand = "pre-commit:\n  commands:\n    kdd:\n      run: kdd-hook pre-commit\n";
    r.write("lefthook.yml", by_hand);
    // git calls lefthook for every hook, as `lefthook install` leaves it.
    for hook in HOOKS {
        let run = format!("#!/bin/sh\nlefthook run {hook} \"$@\"\n");
        write_executable(&r, &format!(".git/hooks/{hook}"), &run);
    }
    let c = doctor_check(&r, "hooks");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(!c["message"].as_str().unwrap().contains("by hand"), "{c}");
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let kdd = r.read(".lefthook-kdd.yml");
    assert!(!kdd.contains("pre-commit"), "{kdd}");
    for hook in ["post-commit", "post-merge", "post-checkout", "post-rewrite"] {
        assert!(kdd.contains(&format!("kdd-hook {hook}")), "{kdd}");
    }
    let main = r.read("lefthook.yml");
    assert_eq!(main, format!("{by_hand}extends:\n  - .lefthook-kdd.yml\n"));
    let c = doctor_check(&r, "hooks");
    assert_eq!(c["status"], "ok", "{c}");
    // Idempotent.
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(r.read("lefthook.yml"), main);
    assert_eq!(r.read(".lefthook-kdd.yml"), kdd);
    // lefthook merges the files: a kdd entry the user skips stays skipped under the same name
    // in `.lefthook-kdd.yml`, so the hook does not run (doctor said ok: red team, eighteenth
    // round).
    let skip = "post-merge:\n  commands:\n    kdd-heal:\n      skip: true\n";
    r.write("lefthook.yml", &format!("{main}{skip}"));
    let c = doctor_check(&r, "hooks");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["message"].as_str().unwrap().contains("post-merge"), "{c}");
    // A JSON configuration is never given YAML lines (every commit failed after).
    let r = Repo::new();
    let json = r#"{"pre-commit": {"commands": {"kdd": {"run": "kdd-hook pre-commit"}}}}"#;
    r.write("lefthook.json", json);
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert_eq!(r.read("lefthook.json"), json);
    assert!(text(&o).1.contains("by hand"), "{:?}", text(&o));
}

#[test]
fn husky_files_get_one_line_each() {
    let r = Repo::new();
    r.write(".husky/pre-commit", "npm test\n");
    r.git(&["config", "core.hooksPath", ".husky/_"]);
    // husky's own wrappers, as `npx husky` writes them: git runs these.
    for hook in HOOKS {
        let wrapper = "#!/usr/bin/env sh\n. \"$(dirname \"$0\")/h\"\n";
        write_executable(&r, &format!(".husky/_/{hook}"), wrapper);
    }
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let pre = r.read(".husky/pre-commit");
    assert!(
        pre.starts_with("npm test\n") && pre.contains("kdd-hook pre-commit \"$@\""),
        "{pre}"
    );
    assert!(r.read(".husky/post-merge").contains("kdd-hook post-merge"));
    assert!(r.exists(".husky/post-rewrite"));
    let o = r.kdd(&["install", "--husky"]);
    assert!(o.status.success());
    assert_eq!(r.read(".husky/pre-commit"), pre, "idempotent");
    let c = doctor_hook(&r);
    assert_eq!(c["status"], "ok", "{c}");
    assert!(c["message"].as_str().unwrap().contains("husky"), "{c}");
    // doctor --fix on a husky repo missing the line repairs it and says so truthfully.
    r.write(".husky/pre-commit", "npm test\n");
    assert_eq!(doctor_hook(&r)["status"], "warn");
    let o = r.kdd(&["doctor", "--no-load", "--fix"]);
    let (_, err) = text(&o);
    assert!(
        err.contains("repaired") && err.contains("pre-commit-hook"),
        "{err}"
    );
    assert!(!err.contains("still not repaired"), "{err}");
    assert_eq!(doctor_hook(&r)["status"], "ok");
}

fn commit_spec_and_check(r: &Repo) {
    r.write("specs/01-domain/entities/Pedido.md", SPEC);
    r.git(&["add", "."]);
    let o = r.git_out(&["commit", "-q", "-m", "spec"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let files = r.git(&["ls-tree", "-r", "--name-only", "HEAD", ".kdd-index"]);
    assert!(
        files.contains(".kdd-index/nodes/entity/Pedido.json"),
        "{files}"
    );
    assert_eq!(doctor_hook(r)["status"], "ok", "{}", doctor_hook(r));
    let c = doctor_check(r, "hooks");
    assert_eq!(c["status"], "ok", "{c}");
    let o = r.kdd(&["verify"]);
    assert!(o.status.success(), "{:?}", text(&o));
}

#[test]
#[cfg_attr(
    not(kdd_hook_managers),
    ignore = "needs lefthook and husky (npm packages) on PATH when the tests are built"
)]
fn real_lefthook_and_husky_run_kdd_hook() {
    // lefthook: fresh repository, `kdd install --lefthook` writes lefthook.yml and runs
    // `lefthook install`.
    let r = Repo::new();
    let o = r.kdd(&["install", "--lefthook"]);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(r.read(".git/hooks/pre-commit").contains("lefthook"));
    commit_spec_and_check(&r);
    // husky v9: `husky` sets core.hooksPath=.husky/_; kdd install detects it.
    let r = Repo::new();
    let o = crate::repo::command("husky", &r.dir)
        .output()
        .expect("husky");
    assert!(o.status.success(), "{:?}", text(&o));
    let o = r.kdd(&["install"]);
    assert!(o.status.success(), "{:?}", text(&o));
    commit_spec_and_check(&r);
}

#[test]
fn committed_links_and_hostile_extends_never_leave_the_repository() {
    // A teammate commits `.husky/pre-commit` as a link to a file outside the repository:
    // `kdd install` refuses it by name and the outside file is untouched.
    let r = Repo::new();
    let outside = r.tmp.path().join("outside-rc");
    std::fs::write(&outside, "OUTSIDE\n").unwrap();
    std::fs::create_dir_all(r.dir.join(".husky")).unwrap();
    std::os::unix::fs::symlink(&outside, r.dir.join(".husky/pre-commit")).unwrap();
    r.git(&["config", "core.hooksPath", ".husky/_"]);
    let o = r.kdd(&["install"]);
    assert!(!o.status.success(), "{:?}", text(&o));
    assert!(text(&o).1.contains("pre-commit"), "{:?}", text(&o));
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "OUTSIDE\n");
    // lefthook `extends:` naming /dev/zero, an absolute path and `..`: doctor answers at once
    // and reads none of them.
    let r = Repo::new();
    r.write(
        "lefthook.yml",
        "extends:\n  - /dev/zero\n  - ../../etc/passwd\n  - /etc/passwd\n",
    );
    let t = std::time::Instant::now();
    let c = doctor_hook(&r);
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "{c}");
    assert_eq!(c["status"], "warn", "{c}");
    // A committed `.gitattributes` or hook linked outside: install refuses, nothing written
    // there; a husky 8 hook linked to /dev/zero: doctor answers at once (it read 24 GB).
    for (link, config) in [
        (".gitattributes", None),
        (".githooks/pre-commit", Some(".githooks")),
    ] {
        let r = Repo::new();
        let outside = r.tmp.path().join("outside-file");
        std::fs::write(&outside, "OUTSIDE\n").unwrap();
        std::fs::create_dir_all(r.dir.join(".githooks")).unwrap();
        std::os::unix::fs::symlink(&outside, r.dir.join(link)).unwrap();
        if let Some(dir) = config {
            r.git(&["config", "core.hooksPath", dir]);
        }
        let o = r.kdd(&["install"]);
        assert!(!o.status.success(), "{link}: {:?}", text(&o));
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "OUTSIDE\n",
            "{link}"
        );
    }
    let r = Repo::new();
    std::fs::create_dir_all(r.dir.join(".husky")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", r.dir.join(".husky/pre-commit")).unwrap();
    r.git(&["config", "core.hooksPath", ".husky"]);
    let t = std::time::Instant::now();
    let c = doctor_hook(&r);
    assert!(t.elapsed() < std::time::Duration::from_secs(20), "{c}");
    assert_eq!(c["status"], "warn", "{c}");
}
