//! `cargo bench --bench bench -- index [N…]`: full L1 index of synthetic corpora (default 1k and
//! 10k specs). Prints, per size: full-index time (cold = empty index, warm = nothing changed),
//! graph load + resolution time, one-file incremental `apply` time, peak memory (VmHWM of this
//! process) and the storage ratio (`.kdd-index` bytes / spec bytes).
//!
//! The corpus comes from a small deterministic generator in this file ([`generate`]): every
//! kind in its layer folder, Spanish and English headings, realistic link fan-out (entities →
//! entities, rules → entities, commands → entities/events, use cases → rules/commands/entities,
//! views → use cases/components, requirements and features → use cases/rules) and a few upward
//! links. Sizes mimic the real corpus (≈2–3 KB per spec).

use kdd::config::Settings;
use kdd::index::{self, SpecSource};
use std::path::Path;
use std::time::Instant;

/// A tiny deterministic PRNG (xorshift64*), so every run generates the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "pedido",
    "cliente",
    "factura",
    "pago",
    "envío",
    "stock",
    "order",
    "customer",
    "invoice",
    "payment",
    "shipment",
    "the",
    "el",
    "la",
    "de",
    "que",
    "system",
    "sistema",
    "valida",
    "validates",
    "registra",
    "records",
    "cuando",
    "when",
    "antes",
    "before",
    "después",
    "after",
    "importe",
    "amount",
    "estado",
    "state",
    "usuario",
    "user",
    "regla",
    "rule",
    "evento",
    "event",
];

fn words(r: &mut Rng, n: usize) -> String {
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[r.below(WORDS.len())]);
    }
    s
}

/// (folder, file prefix, kind, share per 100 specs)
const MIX: &[(&str, &str, &str, usize)] = &[
    ("01-domain/entities", "", "entity", 15),
    ("01-domain/events", "EVT-", "event", 12),
    ("01-domain/rules", "BR-", "business-rule", 10),
    ("02-behavior/policies", "BP-", "business-policy", 3),
    ("02-behavior/policies", "XP-", "cross-policy", 2),
    ("02-behavior/commands", "CMD-", "command", 10),
    ("02-behavior/queries", "QRY-", "query", 8),
    ("02-behavior/processes", "PROC-", "process", 3),
    ("02-behavior/use-cases", "UC-", "use-case", 12),
    ("03-experience/views", "UI-", "ui-view", 5),
    ("03-experience/components", "", "ui-component", 5),
    ("04-verification/criteria", "REQ-", "requirement", 6),
    ("00-requirements/objectives", "OBJ-", "objective", 2),
    ("00-requirements", "PRD-", "prd", 1),
    ("05-architecture/decisions", "ADR-", "adr", 2),
    ("04-verification/examples", "", "feature", 4),
];

struct Spec {
    kind: &'static str,
    stem: String,
    path: String,
}

/// Generate `n` specs under `<root>/specs`; returns the total spec bytes.
pub fn generate(root: &Path, n: usize) -> u64 {
    let mut r = Rng(0x9E37_79B9_7F4A_7C15 ^ n as u64);
    let total_share: usize = MIX.iter().map(|m| m.3).sum();
    let mut specs: Vec<Spec> = Vec::with_capacity(n);
    for (folder, prefix, kind, share) in MIX {
        let count = (n * share).div_ceil(total_share);
        for i in 0..count {
            if specs.len() >= n {
                break;
            }
            let name = format!(
                "{}{:04}",
                ["Order", "Pago", "Stock", "Cliente", "Invoice"][i % 5],
                i
            );
            let stem = match *kind {
                "entity" | "ui-component" => name,
                "event" => format!("EVT-{name}-Created"),
                "feature" => format!("feature-{i:05}"),
                "prd" => format!("PRD-{name}"),
                "adr" => format!("ADR-{i:04}-{name}"),
                _ => format!("{prefix}{i:03}-{name}"),
            };
            let ext = if *kind == "feature" { "feature" } else { "md" };
            specs.push(Spec {
                kind,
                path: format!("specs/{folder}/{stem}.{ext}"),
                stem,
            });
        }
    }
    let by_kind = |k: &str| -> Vec<usize> {
        specs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.kind == k)
            .map(|(i, _)| i)
            .collect()
    };
    let pools: Vec<(&str, Vec<usize>)> = [
        "entity",
        "event",
        "business-rule",
        "command",
        "use-case",
        "ui-component",
        "objective",
    ]
    .iter()
    .map(|k| (*k, by_kind(k)))
    .collect();
    let pool = |k: &str| &pools.iter().find(|(p, _)| *p == k).unwrap().1;
    let mut bytes = 0u64;
    for s in &specs {
        let link = |r: &mut Rng, k: &str| -> String {
            let p = pool(k);
            if p.is_empty() {
                return "Nada".into();
            }
            format!("[[{}]]", specs[p[r.below(p.len())]].stem)
        };
        let es = r.below(2) == 0;
        let mut t = String::new();
        if s.kind == "feature" {
            let uc = link(&mut r, "use-case");
            let br = link(&mut r, "business-rule");
            t.push_str(&format!(
                "@{}\nFeature: {}\n  {}\n\n  Scenario: SCN-{}-001 {}\n    Given {}\n    When {}\n    Then {}\n",
                uc.trim_matches(['[', ']']),
                s.stem,
                words(&mut r, 20),
                s.stem,
                words(&mut r, 5),
                br,
                words(&mut r, 12),
                words(&mut r, 12)
            ));
        } else {
            let id = match s.kind {
                "entity" | "ui-component" | "event" | "ui-view" => String::new(),
                _ => format!(
                    "id: {}\n",
                    s.stem.split('-').take(2).collect::<Vec<_>>().join("-")
                ),
            };
            t.push_str(&format!(
                "---\n{id}kind: {}\nstatus: draft\n---\n\n# {}\n\n",
                s.kind, s.stem
            ));
            let (desc, main) = if es {
                ("Descripción", "Declaración")
            } else {
                ("Description", "Statement")
            };
            t.push_str(&format!(
                "## {desc}\n\n{} {} {}.\n\n",
                words(&mut r, 60),
                link(&mut r, "entity"),
                words(&mut r, 40)
            ));
            match s.kind {
                "entity" => {
                    t.push_str(if es {
                        "## Atributos\n\n| Atributo | Tipo | Descripción |\n|---|---|---|\n"
                    } else {
                        "## Attributes\n\n| Attribute | Type | Description |\n|---|---|---|\n"
                    });
                    for _ in 0..5 {
                        t.push_str(&format!(
                            "| {} | string | {} |\n",
                            words(&mut r, 1),
                            words(&mut r, 8)
                        ));
                    }
                    t.push_str(if es {
                        "\n## Relaciones\n\n| Relación | Cardinalidad | Destino |\n|---|---|---|\n"
                    } else {
                        "\n## Relations\n\n| Relation | Cardinality | Target |\n|---|---|---|\n"
                    });
                    for _ in 0..2 {
                        t.push_str(&format!(
                            "| pertenece_a | N:1 | {} |\n",
                            link(&mut r, "entity")
                        ));
                    }
                    t.push_str(&format!(
                        "\n## {}\n\n- {}\n",
                        if es {
                            "Eventos del ciclo de vida"
                        } else {
                            "Events"
                        },
                        link(&mut r, "event")
                    ));
                    if r.below(20) == 0 {
                        t.push_str(&format!("- Used by {}\n", link(&mut r, "use-case")));
                    }
                }
                "business-rule" | "business-policy" | "cross-policy" => {
                    t.push_str(&format!(
                        "## {main}\n\n{} {} {}.\n\n",
                        words(&mut r, 30),
                        link(&mut r, "entity"),
                        words(&mut r, 30)
                    ));
                }
                "command" => {
                    t.push_str("## Input\n\n| Parameter | Type | Required |\n|---|---|---|\n| id | uuid | yes |\n\n");
                    t.push_str(&format!(
                        "## Postconditions\n\n- {} {}\n- {}\n",
                        words(&mut r, 20),
                        link(&mut r, "entity"),
                        link(&mut r, "event")
                    ));
                }
                "use-case" => {
                    t.push_str(&format!(
                        "## {}\n\n",
                        if es {
                            "Flujo Principal"
                        } else {
                            "Main Flow (Happy Path)"
                        }
                    ));
                    for i in 1..=6 {
                        t.push_str(&format!(
                            "{i}. {} {}\n",
                            words(&mut r, 15),
                            link(&mut r, if i % 2 == 0 { "command" } else { "entity" })
                        ));
                    }
                    t.push_str(&format!(
                        "\n## {}\n\n- {}\n- {}\n\n{}\n",
                        if es {
                            "Reglas Aplicadas"
                        } else {
                            "Business Rules"
                        },
                        link(&mut r, "business-rule"),
                        link(&mut r, "business-rule"),
                        link(&mut r, "objective")
                    ));
                }
                "ui-view" => {
                    t.push_str(&format!(
                        "## Components\n\n- {}\n\nTriggers {}.\n",
                        link(&mut r, "ui-component"),
                        link(&mut r, "use-case")
                    ));
                }
                "requirement" => {
                    t.push_str(&format!(
                        "## {}\n\n- {}\n- {}\n",
                        if es { "Trazabilidad" } else { "Traceability" },
                        link(&mut r, "use-case"),
                        link(&mut r, "business-rule")
                    ));
                }
                "adr" | "prd" | "objective" => {
                    t.push_str(&format!(
                        "## Context\n\n{} {}\n",
                        words(&mut r, 50),
                        link(&mut r, "use-case")
                    ));
                }
                _ => {
                    t.push_str(&format!(
                        "## Purpose\n\n{} {}\n",
                        words(&mut r, 50),
                        link(&mut r, "entity")
                    ));
                }
            }
            t.push_str(&format!(
                "\n## Notes\n\n{}\n\n{}\n\n```\n{}\n```\n",
                words(&mut r, 110),
                words(&mut r, 90),
                words(&mut r, 10)
            ));
        }
        let p = root.join(&s.path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &t).unwrap();
        bytes += t.len() as u64;
    }
    bytes
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                n += dir_bytes(&e.path());
            } else {
                n += e.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    n
}

fn vm_hwm_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn say(s: &str) {
    let _ = kdd::cli::output::data(s);
}

/// Run the benchmark for the sizes in `args` (default 1000 and 10000).
pub fn run(args: &[String]) {
    let sizes: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 10_000]
    } else {
        sizes
    };
    say(&format!(
        "index bench: {} threads (rayon), L1",
        rayon::current_num_threads()
    ));
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::process::Command::new("git")
            .args(["init", "-q"])
            .current_dir(root)
            .status()
            .unwrap();
        let t = Instant::now();
        let spec_bytes = generate(root, n);
        let gen_s = t.elapsed().as_secs_f64();
        let settings = Settings::discover(root, None).unwrap();
        let t = Instant::now();
        let out = index::full(&settings, &index::Options::default()).unwrap();
        let cold = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let again = index::full(&settings, &index::Options::default()).unwrap();
        let warm = t.elapsed().as_secs_f64();
        assert!(again.written.is_empty(), "re-index rewrote files");
        let t = Instant::now();
        let (g, errs) = kdd::graph::Graph::load(&settings.index_dir).unwrap();
        let load = t.elapsed().as_secs_f64();
        assert!(errs.is_empty());
        // One-file incremental apply (what the pre-commit hook does).
        let victim = g
            .nodes
            .iter()
            .find(|n| n.kind == kdd::spec::Kind::UseCase)
            .unwrap()
            .source_file
            .clone();
        let mut bytes = std::fs::read(root.join(&victim)).unwrap();
        bytes.extend_from_slice(b"\nOne more line with [[Nada]].\n");
        let t = Instant::now();
        let inc = index::apply(
            &settings,
            vec![SpecSource {
                path: victim,
                bytes,
            }],
            vec![],
        )
        .unwrap();
        let apply_s = t.elapsed().as_secs_f64();
        let idx_bytes = dir_bytes(&settings.index_dir);
        say(&format!(
            "n={n}: generated {:.1} MB of specs in {gen_s:.2}s\n  full index (cold): {cold:.3}s  ({} nodes, {} failed, {} files written)\n  full index (warm, unchanged): {warm:.3}s  (0 files written)\n  graph load + resolve: {load:.3}s  ({} edges, {} orphans, {} layer violations)\n  incremental apply (1 file): {apply_s:.3}s  ({} files written)\n  peak memory (VmHWM, process so far): {:.1} MB\n  storage: .kdd-index {} bytes / specs {} bytes = {:.1}%",
            spec_bytes as f64 / 1e6,
            out.indexed,
            out.failed,
            out.written.len(),
            g.edges.len(),
            g.orphans.len(),
            g.violations().count(),
            inc.written.len(),
            vm_hwm_mb(),
            idx_bytes,
            spec_bytes,
            100.0 * idx_bytes as f64 / spec_bytes as f64
        ));
    }
}
