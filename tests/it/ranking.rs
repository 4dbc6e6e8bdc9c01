//! Ranking product contracts over the English two-domain check corpus (`fixtures/check-multi`):
//! calibrated scores and `NO_MATCH`, cited spans (section + line range of the best evidence),
//! and agent-side expansion (`keywords`, `hypothetical_answer`, `translation`) through the
//! library API. Indexed at L1 with the real binary; the real-model figures are in
//! `tools/eval/cv.py`'s reports, not here.

use crate::util::{ids, kdd, text};
use kdd::cache::{Cache, OpenOptions};
use kdd::query::{hybrid, Expansion, HybridRequest};
use serde_json::Value;
use std::path::Path;

fn check_repo() -> tempfile::TempDir {
    crate::util::indexed_fixture_repo("check-multi")
}

/// The check corpus indexed at L2 with the deterministic test embedder (the real model's
/// figures are in cv.py's reports), and the environment that selects that embedder.
fn check_repo_l2() -> (tempfile::TempDir, [(&'static str, &'static str); 1]) {
    let dir = check_multi_repo();
    let l2 = [("KDD_TEST_EMBEDDER", "1")];
    let o = crate::util::kdd_env(dir.path(), &["index"], &l2);
    assert!(o.status.success(), "{}", text(&o));
    (dir, l2)
}

/// The JSON answer (an empty answer exits 1, as every query without results does).
fn json(dir: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let o = kdd(dir, &a);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

fn open(dir: &Path, cache: &Path) -> Cache {
    Cache::open_paths(&dir.join(".kdd-index"), dir, cache, &OpenOptions::default())
        .expect("cache opens")
}

fn codes(v: &Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn nonsense_query_is_no_match_at_the_default_threshold() {
    let dir = check_repo();
    let v = json(dir.path(), &["query", "zzzzqqqq xyzzyplugh"]);
    assert_eq!(v["results"].as_array().unwrap().len(), 0, "{v}");
    assert!(codes(&v).contains(&"NO_MATCH".to_string()), "{v}");
}

#[test]
fn scores_are_calibrated_and_min_score_cuts_across_questions() {
    let dir = check_repo();
    let good = json(dir.path(), &["query", "deposit for large parties"]);
    let scores = crate::util::scores(&good);
    assert!(
        scores[0] >= 0.6,
        "a question in the specs' words is confident: {good}"
    );
    assert!(scores.iter().all(|s| (0.0..=1.0).contains(s)), "{scores:?}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // A question half made of words no spec has is less confident than one fully covered.
    let half = json(
        dir.path(),
        &["query", "deposit qwertyuiop asdfghjkl", "--min-score", "0"],
    );
    let top = half["results"][0]["score"].as_f64().unwrap();
    assert!(top < scores[0], "{top} vs {}", scores[0]);
    // The threshold means the same everywhere: every kept hit clears it.
    let cut = json(
        dir.path(),
        &["query", "deposit for large parties", "--min-score", "0.7"],
    );
    for r in cut["results"].as_array().unwrap() {
        assert!(r["score"].as_f64().unwrap() >= 0.7, "{r}");
    }
}

#[test]
fn every_result_cites_the_section_and_lines_of_its_best_evidence() {
    let dir = check_repo();
    let v = json(dir.path(), &["query", "tables released after 15 minutes"]);
    let results = v["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{v}");
    for r in results {
        let lines = r["lines"]
            .as_array()
            .unwrap_or_else(|| panic!("no lines: {r}"));
        let (a, b) = (
            lines[0].as_u64().unwrap() as usize,
            lines[1].as_u64().unwrap() as usize,
        );
        assert!(a >= 1 && a <= b, "{r}");
        let file =
            std::fs::read_to_string(dir.path().join(r["source_file"].as_str().unwrap())).unwrap();
        let all: Vec<&str> = file.lines().collect();
        assert!(b <= all.len(), "{r}");
        // The span ends on the section's last written line: nothing but blanks follows it
        // before the next heading or the end of the file.
        assert!(!all[b - 1].trim().is_empty(), "line {b} is blank: {r}");
        let rest = all[b..].iter().take_while(|l| !l.starts_with('#'));
        assert!(
            rest.into_iter().all(|l| l.trim().is_empty()),
            "span cut short: {r}"
        );
        let section = r["section"].as_str().unwrap();
        let heading = section.rsplit(" > ").next().unwrap();
        assert!(
            all[a - 1].starts_with('#') && all[a - 1].contains(heading),
            "line {a} of {} is not the heading {heading:?}: {:?}",
            r["source_file"],
            all[a - 1]
        );
    }
    let top = &results[0];
    assert!(
        top["source_file"]
            .as_str()
            .unwrap()
            .ends_with("BR-002-TableRelease.md"),
        "{v}"
    );
}

#[test]
fn agent_side_expansion_is_searched_and_reported() {
    let dir = check_repo();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), cache_dir.path());
    // The question alone shares no word with the reminder policy; the agent's keywords do.
    let mut req = HybridRequest::new("what do people get before they come");
    req.min_score = 0.0;
    req.expansion = Expansion {
        keywords: vec!["reminder text message".into()],
        hypothetical_answer: Some("A reminder is sent 24 hours before the booking.".into()),
        translation: None,
    };
    let r = hybrid(&cache, &req).unwrap();
    assert_eq!(r.expanded_with, vec!["keywords", "hypothetical_answer"]);
    assert!(
        r.results[0].source_file.ends_with("XP-001-Reminders.md"),
        "{:?}",
        r.results.iter().map(|h| &h.node_id).collect::<Vec<_>>()
    );
    // An agent's translation replaces the machine one and is reported.
    let mut es = HybridRequest::new("¿cuánto es la señal para grupos grandes?");
    es.expansion.translation = Some("how much is the deposit for large parties".into());
    let r = hybrid(&cache, &es).unwrap();
    assert_eq!(r.expanded_with, vec!["translation"]);
    assert!(
        r.results[0]
            .source_file
            .ends_with("BR-001-LargePartyDeposit.md"),
        "{:?}",
        r.results.iter().map(|h| &h.node_id).collect::<Vec<_>>()
    );
    // Oversized expansions are refused with a clear code.
    let mut big = HybridRequest::new("deposit");
    big.expansion.keywords = vec!["x".into(); 21];
    let e = hybrid(&cache, &big).unwrap_err();
    assert_eq!(e.code(), "INVALID_EXPANSION");
}

/// Every spec file of a context answer (constraints and behaviour).
fn context_files(v: &Value) -> Vec<String> {
    ["constraints", "behavior"]
        .iter()
        .flat_map(|k| v[*k].as_array().unwrap().clone())
        .map(|i| i["source_file"].as_str().unwrap().to_string())
        .collect()
}

/// A context answer's files hold `spec`.
fn assert_has(files: &[String], spec: &str) {
    assert!(files.iter().any(|f| f.ends_with(spec)), "{spec}: {files:?}");
}

/// A context answer's files hold `spec` and nothing from the domain folder `other`.
/// Both business domains' specs are in the answer.
fn assert_both_domains(files: &[String]) {
    assert!(files.iter().any(|f| f.contains("/clinic/")), "{files:?}");
    assert!(files.iter().any(|f| f.contains("/dining/")), "{files:?}");
}

fn assert_in_domain(files: &[String], spec: &str, other: &str) {
    assert_has(files, spec);
    let other = format!("/{other}/");
    assert!(!files.iter().any(|f| f.contains(&other)), "{files:?}");
}

#[test]
fn context_focused_on_one_domain_keeps_the_other_domain_out() {
    let dir = check_repo();
    // A domain-qualified short id resolves inside that domain (both domains have a BR-003).
    let v = json(dir.path(), &["context", "--hint", "dining:BR-003"]);
    assert_in_domain(&context_files(&v), "BR-003-FreeCancellation.md", "clinic");
    // A path under one domain plus a keyword both domains use: no look-alikes from the other,
    // while the shared card-capture policy stays eligible.
    let v = json(
        dir.path(),
        &[
            "context",
            "--hint",
            "src/dining/reservations/cancel.py",
            "--hint",
            "cancellation",
        ],
    );
    let files = context_files(&v);
    assert!(!files.is_empty(), "{v}");
    assert!(!files.iter().any(|f| f.contains("/clinic/")), "{files:?}");
    // Without a focus (hints in both domains) nothing is filtered.
    let v = json(
        dir.path(),
        &[
            "context",
            "--hint",
            "clinic:BR-001",
            "--hint",
            "dining:BR-001",
        ],
    );
    assert_both_domains(&context_files(&v));
}

#[test]
fn a_keyword_hint_found_in_one_domain_keeps_the_other_domain_out() {
    let dir = check_repo();
    // The shared reminder policy and the clinic's booking flow match: the keyword points into
    // the clinic, so the restaurant's flows the shared policy also serves stay out.
    let v = json(
        dir.path(),
        &["context", "--hint", "reminder before the visit"],
    );
    assert_in_domain(&context_files(&v), "XP-001-Reminders.md", "dining");
    // Found in `_shared` alone, a keyword names no domain: every flow the policy serves.
    let v = json(dir.path(), &["context", "--hint", "reminder"]);
    assert_both_domains(&context_files(&v));
    // A hint that names a domain decides over a keyword found only in the other one.
    let v = json(
        dir.path(),
        &[
            "context",
            "--hint",
            "src/dining/reservations/remind.py",
            "--hint",
            "missed visits",
        ],
    );
    assert_in_domain(&context_files(&v), "UC-001-ReserveTable.md", "clinic");
}

#[test]
fn an_id_numbered_in_every_domain_resolves_inside_the_domain_the_other_hints_name() {
    let dir = check_repo();
    // Alone, `BR-001` is ambiguous (the clinic's fee rule, the restaurant's deposit rule): both.
    let v = json(dir.path(), &["context", "--hint", "BR-001"]);
    let files = context_files(&v);
    assert_has(&files, "BR-001-LateCancellationFee.md");
    assert_has(&files, "BR-001-LargePartyDeposit.md");
    // Next to a path under the restaurant's folder it means the restaurant's rule; the clinic's
    // leaves the resolved entities and a warning says so.
    let v = json(
        dir.path(),
        &[
            "context",
            "--hint",
            "src/dining/reservations/deposit.py",
            "--hint",
            "BR-001",
        ],
    );
    assert_in_domain(&context_files(&v), "BR-001-LargePartyDeposit.md", "clinic");
    let resolved = v["resolved_entities"].to_string();
    assert!(!resolved.contains("clinic:"), "{resolved}");
    assert_warns(&v, "several domains");
}

#[test]
fn a_code_path_named_like_no_spec_resolves_by_its_words_inside_its_domain() {
    let dir = check_repo();
    // `late_fee.ts` names no spec; its words find the clinic's late cancellation fee, and the
    // restaurant's deposit rules (which share the words) stay out.
    let v = json(
        dir.path(),
        &["context", "--hint", "src/clinic/billing/late_fee.ts"],
    );
    let resolved = v["resolved_entities"].as_array().unwrap();
    assert!(
        resolved
            .iter()
            .any(|r| r["node_id"] == "clinic:BR:BR-001" && r["match_method"] == "path_words"),
        "{v}"
    );
    assert_in_domain(
        &context_files(&v),
        "BR-001-LateCancellationFee.md",
        "dining",
    );
    // A plural file name finds the entity by its alias (`DiningTable`, alias `Table`).
    let v = json(dir.path(), &["context", "--hint", "src/dining/tables.go"]);
    assert_in_domain(&context_files(&v), "BR-002-TableRelease.md", "clinic");
    // The file's name is the subject, its folder only the place: `book.py` under
    // `appointments/` resolves to the booking command, not to the Appointment entity (which
    // would bring the cancellation rules with it).
    let v = json(
        dir.path(),
        &["context", "--hint", "src/clinic/appointments/book.py"],
    );
    let resolved = ids(&v, "resolved_entities", "node_id");
    assert_eq!(resolved, ["clinic:CMD:CMD-001"], "{v}");
    let files = context_files(&v);
    assert_has(&files, "UC-001-BookAppointment.md");
    assert!(!files.iter().any(|f| f.contains("Cancel")), "{files:?}");
    // Without the domain's folder, the folder named after one domain's entity names it
    // (`reservations` → the restaurant's `Reservation`): the clinic's cancellation stays out.
    let v = json(
        dir.path(),
        &["context", "--hint", "src/reservations/cancel.py"],
    );
    assert_in_domain(&context_files(&v), "BR-003-FreeCancellation.md", "clinic");
    // A folder named after a shared entity names no domain: both domains' cancellations.
    let v = json(
        dir.path(),
        &["context", "--hint", "src/customers/cancel.py"],
    );
    assert_both_domains(&context_files(&v));
}

#[test]
fn hostile_and_outside_paths_name_no_spec_and_are_not_echoed_whole() {
    let dir = check_repo();
    // A hostile 60 KB path of unknown folders finds nothing, and the warning does not echo it.
    let long = format!("{}x.py", "abcdefgh/".repeat(6_000));
    let v = json(dir.path(), &["context", "--hint", &long]);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("No match found") && w.len() < 1_000,
        "{}",
        w.len()
    );
    // One that resolves is not echoed whole either (its `matched_from` is clipped too).
    let long = format!("{}cancel.py", "reservations/".repeat(4_000));
    let v = json(dir.path(), &["context", "--hint", &long]);
    assert!(
        !v["resolved_entities"].as_array().unwrap().is_empty(),
        "{v}"
    );
    assert!(v.to_string().len() < 20_000, "{}", v.to_string().len());
    // Generic words alone find nothing, and say so.
    let v = json(dir.path(), &["context", "--hint", "src/lib/index.ts"]);
    assert!(v["resolved_entities"].as_array().unwrap().is_empty(), "{v}");
    assert_warns(&v, "No match found");
    // A path that leaves the repository names no spec: it found three through its words
    // (`id`, `rsa`, `ssh`) before. Inside the repository, `.`/`..` and the absolute form
    // resolve like the plain path.
    for outside in [
        "src/../../root/.ssh/id_rsa",
        "/etc/ssh/ssh_config",
        "../clinic/x.py",
    ] {
        let v = json(dir.path(), &["context", "--hint", outside]);
        assert!(v["resolved_entities"].as_array().unwrap().is_empty(), "{v}");
        assert_warns(&v, "points outside the repository");
    }
    let abs = dir.path().join("src/clinic/appointments/book.py");
    for inside in [
        abs.to_string_lossy().to_string(),
        "./src/clinic/../clinic/appointments/book.py".to_string(),
    ] {
        let v = json(dir.path(), &["context", "--hint", &inside]);
        let resolved = ids(&v, "resolved_entities", "node_id");
        assert_eq!(resolved, ["clinic:CMD:CMD-001"], "{v}");
    }
}

fn files(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source_file"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_question_naming_one_domain_keeps_the_other_domain_down() {
    let dir = check_repo();
    // Both domains have cancellation rules with fees and deposits: unfocused, both answer.
    let all = files(&json(
        dir.path(),
        &["query", "cancellation fee and deposit rules"],
    ));
    assert!(all.iter().any(|f| f.contains("/clinic/")), "{all:?}");
    assert!(all.iter().any(|f| f.contains("/dining/")), "{all:?}");
    // Naming the clinic: every clinic or shared spec ranks above every restaurant spec.
    let v = json(
        dir.path(),
        &["query", "cancellation fee and deposit rules at the clinic"],
    );
    let got = files(&v);
    let first_other = got.iter().position(|f| f.contains("/dining/"));
    let last_inside = got.iter().rposition(|f| !f.contains("/dining/"));
    assert!(
        first_other.is_none_or(|o| last_inside.is_some_and(|i| i < o)),
        "{got:?}"
    );
    assert!(got[0].contains("/clinic/"), "{got:?}");
    // Shared specs stay eligible; nothing is removed, only reordered.
    assert!(got.iter().any(|f| f.contains("/_shared/")), "{got:?}");
}

#[test]
fn an_event_is_found_by_its_identity_vector() {
    let (dir, l2) = check_repo_l2();
    let o = crate::util::kdd_env(
        dir.path(),
        &[
            "search",
            "--semantic",
            "--json",
            "the room planner prepares the consulting room for an accepted appointment",
        ],
        &l2,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    // Among the first three: the 64-d hashed test embedder at the committed 4-bit precision is
    // too coarse to promise first place (with the real model it ranks first).
    let results = v["results"].as_array().unwrap();
    let hit = results.iter().take(3).find(|r| {
        r["source_file"]
            .as_str()
            .unwrap()
            .ends_with("EVT-Appointment-Booked.md")
    });
    let hit = hit.unwrap_or_else(|| panic!("event not in the first three: {v}"));
    assert_eq!(hit["match_source"], "semantic", "{v}");
}

#[test]
fn a_question_naming_an_identifier_ranks_the_specs_that_contain_it_first() {
    let (dir, l2) = check_repo_l2();
    // `SLOT_TAKEN` is written in three specs; a question naming it asks for those, whatever
    // else sounds alike to the embedding model.
    let q = "what raises the SLOT_TAKEN error when booking";
    let o = crate::util::kdd_env(dir.path(), &["query", "--json", q], &l2);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = files(&v);
    let mut holders: Vec<&str> = vec![
        "BR-002-NoOverlap.md",
        "REQ-001-Booking.md",
        "CMD-001-BookAppointment.md",
    ];
    for f in got.iter().take(3) {
        let name = f.rsplit('/').next().unwrap();
        holders.retain(|h| *h != name);
    }
    assert!(
        holders.is_empty(),
        "not in the first three: {holders:?}; {got:?}"
    );
    // The answer says how the question was read.
    assert_eq!(
        v["read_as"],
        serde_json::json!(["identifier:SLOT_TAKEN"]),
        "{v}"
    );
}

#[test]
fn a_question_asking_which_event_brings_the_event_up() {
    let dir = check_repo();
    let q = "When a patient books an appointment, which event is emitted?";
    let top = |envs: &[(&str, &str)]| {
        let o = crate::util::kdd_env(dir.path(), &["query", "--json", q], envs);
        assert!(o.status.success(), "{}", text(&o));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        // The answer says how the question was read, only when the rule is on.
        let read_as = if envs.is_empty() {
            serde_json::json!(["asks_for:event"])
        } else {
            Value::Null
        };
        assert_eq!(v["read_as"], read_as, "{v}");
        files(&v)
    };
    let asked = top(&[]);
    let first_event = asked.iter().position(|f| f.contains("/events/"));
    assert!(first_event.is_some_and(|p| p < 3), "{asked:?}");
    assert!(
        asked[..3]
            .iter()
            .any(|f| f.ends_with("EVT-Appointment-Booked.md")),
        "{asked:?}"
    );
    // Without the kind boost the event sits lower: the rule is what lifts it.
    let plain = top(&[("KDD_RANK_KIND", "0")]);
    let plain_event = plain
        .iter()
        .position(|f| f.ends_with("EVT-Appointment-Booked.md"));
    assert!(
        plain_event.is_none_or(|p| p > first_event.unwrap()),
        "{plain:?}"
    );
}

#[test]
fn single_strategy_search_is_not_touched_by_the_identifier_rule() {
    // The identifier rule sets a fusion weight; `search --semantic` has one signal and must
    // still rank by it (a zero weight once erased every score and left the order by id).
    let (dir, l2) = check_repo_l2();
    let q = "what raises the SLOT_TAKEN error when booking";
    let o = crate::util::kdd_env(dir.path(), &["search", "--semantic", "--json", q], &l2);
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let scores = crate::util::scores(&v);
    assert!(scores.len() >= 3 && scores[0] > 0.0, "{v}");
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
}

/// Spec translation (`cache/doctr.rs`): a Spanish question meets an English spec through the
/// spec's Spanish translation. The question's own translation is made inert (a translator that
/// echoes its input), so only the spec's translation can bridge the two languages; with it
/// switched off the same question finds nothing. The translation ranks but is never shown.
#[test]
#[cfg_attr(not(kdd_apertium), ignore = "Apertium with eng-spa is not installed")]
fn a_spanish_question_meets_an_english_spec_through_its_translation() {
    let (dir, tools) = repo_and_tools();
    let echo = translator(tools.path(), "echo-translator", "cat");
    let question = "¿Se puede elegir una mesa en la terraza?";
    let ask = |doc_tr: &str| {
        let args = ["search", "--lexical", question, "--limit", "3", "--json"];
        translated_l1(dir.path(), &echo, doc_tr, &args)
    };
    let v = ask("1");
    let found = ids(&v, "results", "node_id");
    assert!(
        found.iter().any(|id| id == "dining:Entity:DiningTable"),
        "{found:?}"
    );
    assert!(!v["results"].to_string().contains("terraza"), "{v}");
    let memo = std::fs::read_dir(dir.path().join(".git/kdd-cache"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("translations/eng-spa"))
        .find(|p| p.is_dir())
        .expect("translation memo");
    assert!(std::fs::read_dir(memo).unwrap().count() >= 20);
    // Switched off, the cache is rebuilt without translations and the question finds nothing.
    let v = ask("0");
    let found = ids(&v, "results", "node_id");
    assert!(
        !found.iter().any(|id| id == "dining:Entity:DiningTable"),
        "{found:?}"
    );
}

/// Keywords carry no function words, so their language is told by the corpus's vocabulary
/// (`cache/vocab.rs`): "mesa terraza" has no accent and no Spanish function word, but only the
/// English specs' Spanish translations hold its words, so it is read as Spanish: translated,
/// and it meets the specs through their translations. English keywords over the same corpus
/// are its own words and are left alone.
#[test]
#[cfg_attr(not(kdd_apertium), ignore = "Apertium with eng-spa is not installed")]
fn keywords_only_the_translations_hold_are_read_as_the_other_language() {
    let (dir, tools) = repo_and_tools();
    let echo = translator(tools.path(), "echo-translator", "cat");
    let ask = |q: &str| {
        let args = ["search", "--lexical", q, "--limit", "3", "--json"];
        translated_l1(dir.path(), &echo, "1", &args)
    };
    let v = ask("mesa terraza");
    let found = ids(&v, "results", "node_id");
    assert!(
        found.iter().any(|id| id == "dining:Entity:DiningTable"),
        "{found:?}"
    );
    assert_warns(&v, "The query is Spanish");
    let v = ask("table terrace");
    assert!(!v["warnings"].to_string().contains("The query is"), "{v}");
}

/// Domain isolation reads the question's translation too: a Spanish question that names the
/// clinic only as "la clínica" is focused on `clinic` once its translation says "clinic", so
/// the restaurant's look-alike cancellation specs drop below the clinic's. A translator that
/// echoes the question names no domain, and the same question starts with a dining spec.
#[test]
fn a_domain_named_in_the_translation_focuses_the_question() {
    let (dir, tools) = repo_and_tools();
    let echo = translator(tools.path(), "echo-translator", "cat");
    let names = translator(tools.path(), "names", "sed -e 's/clínica/clinic/g'");
    let question = "¿Cuánto cuesta cancelar la reserva tarde en la clínica?";
    let ask = |translator: &str| {
        let v = translated_l1(dir.path(), translator, "0", &["query", question, "--json"]);
        ids(&v, "results", "node_id")
    };
    let unfocused = ask(&echo);
    assert!(unfocused[0].starts_with("dining:"), "{unfocused:?}");
    // Focused: every dining spec (if any is left in the answer) comes after the clinic's and
    // the shared ones.
    let focused = ask(&names);
    let first_dining = focused.iter().position(|id| id.starts_with("dining:"));
    let last_other = focused.iter().rposition(|id| !id.starts_with("dining:"));
    assert!(focused[0].starts_with("clinic:"), "{focused:?}");
    assert!(
        first_dining.is_none_or(|d| Some(d) > last_other),
        "{focused:?}"
    );
}

/// A git repository holding the check corpus (`fixtures/check-multi/specs`).
fn check_multi_repo() -> tempfile::TempDir {
    let dir = crate::util::git_repo();
    crate::util::copy_dir(
        &crate::util::fixture("check-multi/specs"),
        &dir.path().join("specs"),
    );
    dir
}

/// A translator for `KDD_TRANSLATOR`: a shell script in `dir` running `command` over stdin.
fn translator(dir: &Path, name: &str, command: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{command}\n")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.to_string_lossy().to_string()
}

/// Index `dir` at L1 and run `args` with `translator` as the question translator and spec
/// translation `doc_tr` (`KDD_DOC_TRANSLATE`); the answer's JSON.
fn translated_l1(dir: &Path, translator: &str, doc_tr: &str, args: &[&str]) -> Value {
    let env = [
        ("KDD_NO_EMBED", "1"),
        ("KDD_TRANSLATE", "on"),
        ("KDD_TRANSLATOR", translator),
        ("KDD_DOC_TRANSLATE", doc_tr),
    ];
    let o = crate::util::kdd_env(dir, &["index"], &env);
    assert!(o.status.success(), "{}", text(&o));
    let o = crate::util::kdd_env(dir, args, &env);
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(&o));
    serde_json::from_slice::<Value>(&o.stdout).unwrap()
}

/// A context keyword hint in the other language of the corpus is searched with its machine
/// translation, like a search's question, and a warning quotes it: a Spanish hint that shares
/// no word with the English specs resolves to the rule it describes. Without a translator
/// (the echo) the same hint matches nothing.
#[test]
fn a_keyword_hint_in_the_other_language_is_resolved_through_its_translation() {
    let (dir, tools) = repo_and_tools();
    let echo = translator(tools.path(), "echo-translator", "cat");
    let english = translator(
        tools.path(),
        "to-english",
        "sed -e 's/la mesa se libera si nadie llega/the table is released when nobody arrives/'",
    );
    let hint = "la mesa se libera si nadie llega";
    let args = ["context", hint, "--json"];
    let v = translated_l1(dir.path(), &echo, "0", &args);
    assert!(
        !ids(&v, "resolved_entities", "node_id").contains(&"dining:BR:BR-002".to_string()),
        "{v}"
    );
    let v = translated_l1(dir.path(), &english, "0", &args);
    let resolved = ids(&v, "resolved_entities", "node_id");
    assert!(resolved.contains(&"dining:BR:BR-002".to_string()), "{v}");
    assert_warns(&v, "the table is released when nobody arrives");
}

/// A Spanish keyword query has no function words to tell its language; a letter English never
/// writes does, so it is translated like a Spanish question over the English check corpus.
#[test]
fn a_spanish_keyword_query_is_told_by_its_accents_and_translated() {
    let (dir, tools) = repo_and_tools();
    let english = translator(
        tools.path(),
        "to-english",
        "sed -e 's/cancelación tardía/late cancellation fee/'",
    );
    let args = ["query", "cancelación tardía", "--json"];
    let v = translated_l1(dir.path(), &english, "0", &args);
    assert_warns(&v, "QUERY_TRANSLATED");
    assert_eq!(ids(&v, "results", "node_id")[0], "clinic:BR:BR-001", "{v}");
}

/// A failing translator is tried once per context request, not once or twice per hint, and the
/// answer says the keyword hints were searched untranslated.
#[test]
fn a_failing_translator_is_tried_once_per_context_request_and_named() {
    let (dir, tools) = repo_and_tools();
    let runs = tools.path().join("runs");
    let failing = translator(
        tools.path(),
        "failing",
        &format!("echo run >> '{}'; exit 1", runs.display()),
    );
    let args = [
        "context",
        "la mesa se libera si nadie llega",
        "el depósito de los grupos grandes",
        "los recordatorios de una cita",
        "--json",
    ];
    let v = translated_l1(dir.path(), &failing, "0", &args);
    let n = std::fs::read_to_string(&runs)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(n, 1, "translator runs: {n}");
    assert_warns(&v, "could not be translated");
}

/// A translator that never answers is killed with everything it started once the deadline
/// passes, and the question is answered untranslated with a warning; a question over 2,000
/// bytes is never sent to a translator at all.
#[test]
fn a_hanging_translator_is_killed_with_its_children_and_long_questions_skip_it() {
    let (dir, tools) = repo_and_tools();
    let pid = tools.path().join("child.pid");
    let hanging = translator(
        tools.path(),
        "hanging",
        &format!("sleep 60 & echo $! > '{}'; sleep 60", pid.display()),
    );
    let t = std::time::Instant::now();
    let args = ["query", "¿cuánto cuesta cancelar tarde una cita?", "--json"];
    let v = translated_l1(dir.path(), &hanging, "0", &args);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(30),
        "{:?}",
        t.elapsed()
    );
    assert_warns(&v, "NO_TRANSLATION");
    // Dead once it is gone or a zombie waiting for its reaper (the kill is asynchronous).
    let child = std::fs::read_to_string(&pid).unwrap();
    let stat = std::path::Path::new("/proc")
        .join(child.trim())
        .join("stat");
    let running = || {
        std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.to_string()))
            .is_some_and(|r| !r.starts_with('Z') && !r.starts_with('X'))
    };
    let t = std::time::Instant::now();
    while running() && t.elapsed() < std::time::Duration::from_secs(3) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !running(),
        "the translator's child {child} outlived the deadline"
    );
    // Over 2,000 bytes: searched as it is, the translator never started.
    std::fs::remove_file(&pid).unwrap();
    let long = "¿cuánto cuesta cancelar tarde una cita? ".repeat(60);
    let v = translated_l1(dir.path(), &hanging, "0", &["query", &long, "--json"]);
    assert_warns(&v, "over 2000 bytes");
    assert!(!pid.exists());
}

/// `v`'s warnings mention `text`.
fn assert_warns(v: &Value, text: &str) {
    assert!(v["warnings"].to_string().contains(text), "{v}");
}

/// The check corpus's repository and a folder for script translators.
fn repo_and_tools() -> (tempfile::TempDir, tempfile::TempDir) {
    (check_multi_repo(), tempfile::tempdir().unwrap())
}
