//! Kind router (BR-DOCUMENT-001) and location facts (domain, layer) from a spec's path.

use crate::parse::fold;
use crate::spec::{Kind, Layer};

/// Where a spec sits under the specs root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Path relative to the specs root (`01-domain/entities/Pedido.md`).
    pub rel: String,
    /// `domains/<d>/…` → `d`; `_shared/…` → `_shared`.
    pub domain: Option<String>,
    /// The first `NN-name` folder, if any.
    pub layer: Option<Layer>,
    /// File name without its extension.
    pub stem: String,
    /// Folders between the specs root (or domain root) and the file.
    pub dirs: Vec<String>,
}

/// Analyse a repo-relative `path` against the `specs_root` (`specs`, or `` for the repo root).
pub fn locate(path: &str, specs_root: &str) -> Location {
    let rel = if specs_root.is_empty() {
        path
    } else {
        path.strip_prefix(specs_root)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(path)
    };
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    let file = comps.last().copied().unwrap_or("");
    let stem = match file.rfind('.') {
        Some(0) | None => file,
        Some(i) => &file[..i],
    };
    // `x.template.md` → `x.template`; keep it, ids come from front-matter anyway.
    let mut dirs: Vec<&str> = comps[..comps.len().saturating_sub(1)].to_vec();
    let mut domain = None;
    if dirs.len() >= 2 && dirs[0] == "domains" {
        domain = Some(dirs[1].to_string());
        dirs.drain(..2);
    } else if dirs.first() == Some(&"_shared") {
        domain = Some("_shared".to_string());
        dirs.remove(0);
    }
    let layer = dirs.iter().find_map(|d| layer_of_dir(d));
    Location {
        rel: rel.to_string(),
        domain,
        layer,
        stem: stem.to_string(),
        dirs: dirs.iter().map(|s| s.to_string()).collect(),
    }
}

fn layer_of_dir(d: &str) -> Option<Layer> {
    if let Some(l) = Layer::parse(d) {
        return (l != Layer::Unknown).then_some(l);
    }
    let b = d.as_bytes();
    if b.len() >= 3 && b[0].is_ascii_digit() && b[1].is_ascii_digit() && b[2] == b'-' {
        return Layer::parse(&d[..2]);
    }
    None
}

/// Kind implied by the file name (`UC-001-X.md`, `EVT-…`, `charter.md`, `*.feature`).
pub fn kind_from_filename(file_stem: &str, is_feature: bool) -> Option<Kind> {
    if is_feature {
        return Some(Kind::Feature);
    }
    let upper = file_stem.to_ascii_uppercase();
    let prefixes: &[(&str, Kind)] = &[
        ("EVT-", Kind::Event),
        ("BR-", Kind::BusinessRule),
        ("BP-", Kind::BusinessPolicy),
        ("XP-", Kind::CrossPolicy),
        ("CMD-", Kind::Command),
        ("QRY-", Kind::Query),
        ("PROC-", Kind::Process),
        ("PRC-", Kind::Process),
        ("UC-", Kind::UseCase),
        ("UI-", Kind::UiView),
        ("REQ-", Kind::Requirement),
        ("VER-", Kind::Requirement),
        ("OBJ-", Kind::Objective),
        ("ADR-", Kind::Adr),
        ("NFR-", Kind::Nfr),
        ("UV-", Kind::ValueUnit),
        ("REL-", Kind::Release),
        ("PRD-", Kind::Prd),
    ];
    for (p, k) in prefixes {
        if upper.starts_with(p) && upper.len() > p.len() {
            return Some(*k);
        }
    }
    match upper.as_str() {
        "PRD" => Some(Kind::Prd),
        "CHARTER" => Some(Kind::ImplementationCharter),
        "GLOSSARY" | "GLOSARIO" => Some(Kind::Glossary),
        _ => None,
    }
}

/// Kind implied by a typed folder (`entities/`, `use-cases/`…), innermost folder first.
pub fn kind_from_dirs(dirs: &[String]) -> Option<Kind> {
    dirs.iter().rev().find_map(|d| {
        Some(match fold(d).as_str() {
            "entities" | "entidades" => Kind::Entity,
            "events" | "eventos" => Kind::Event,
            "rules" | "reglas" => Kind::BusinessRule,
            "policies" | "politicas" => Kind::BusinessPolicy,
            "commands" | "comandos" => Kind::Command,
            "queries" | "consultas" => Kind::Query,
            "processes" | "procesos" => Kind::Process,
            "use-cases" | "casos-de-uso" => Kind::UseCase,
            "views" | "vistas" => Kind::UiView,
            "components" | "componentes" => Kind::UiComponent,
            "flows" | "flujos" => Kind::UiFlow,
            "criteria" | "criterios" => Kind::Requirement,
            "objectives" | "objetivos" => Kind::Objective,
            "decisions" | "decisiones" => Kind::Adr,
            "value-units" => Kind::ValueUnit,
            "releases" => Kind::Release,
            "nfr" | "nfrs" => Kind::Nfr,
            "glossary" | "glosario" => Kind::Glossary,
            _ => return None,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        let l = locate("specs/domains/auth/01-domain/entities/Token.md", "specs");
        assert_eq!(l.domain.as_deref(), Some("auth"));
        assert_eq!(l.layer, Some(Layer::Domain));
        assert_eq!(l.stem, "Token");
        assert_eq!(kind_from_dirs(&l.dirs), Some(Kind::Entity));
        let l = locate("specs/_shared/policies/XP-003-Audit.md", "specs");
        assert_eq!(l.domain.as_deref(), Some("_shared"));
        assert_eq!(l.layer, None);
        let l = locate("docs/05-architecture/charter.md", "docs");
        assert_eq!(l.layer, Some(Layer::Architecture));
        assert_eq!(
            kind_from_filename(&l.stem, false),
            Some(Kind::ImplementationCharter)
        );
        assert_eq!(
            kind_from_filename("UC-001-IndexDocument", false),
            Some(Kind::UseCase)
        );
        assert_eq!(kind_from_filename("Pedido", false), None);
    }
}
