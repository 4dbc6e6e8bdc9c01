//! The kinds of spec a question asks for: "which event…", "what command…", "¿qué reglas…".
//!
//! A question that asks *which* event is emitted or *what* rule applies wants a spec of that
//! kind in its answer, next to the use case or command that sets the scene; the specs of the
//! asked kinds among the candidates get a share more score (knob `KDD_RANK_KIND`, see
//! [`super::knobs`]). The vocabulary is the KDD standard's own kind names, in English and
//! Spanish, not any corpus's.
//!
//! Rule: an interrogative (`which`, `what`, `qué`, `cuál`, `cuáles`) followed, within
//! [`REACH`] words, by a kind noun (`event`, `command`, `rule`, `policy`, `use case`,
//! `entity`, `requirement`/`SLO`, `query`, `scenario`, `process`, in either language, singular
//! or plural). A kind word elsewhere ("the events of a spec") names a topic, not a wanted kind,
//! and counts for nothing; so does an unaccented Spanish `que` (a conjunction).
//!
//! Invariants: only the question as asked is read; the boost multiplies the score of a
//! candidate of an asked kind, so it never adds a candidate nor removes one.

use super::expand::Candidate;
use super::Error;
use crate::cache::Snapshot;
use crate::spec::Kind;

/// Words after an interrogative within which a kind noun counts ("which shared policy").
const REACH: usize = 3;

const INTERROGATIVES: &[&str] = &["which", "what", "qué", "cuál", "cuáles"];

/// Kind nouns (lowercase, singular and plural) and the kinds they ask for.
const NOUNS: &[(&[&str], &[Kind])] = &[
    (&["event", "events", "evento", "eventos"], &[Kind::Event]),
    (
        &["command", "commands", "comando", "comandos"],
        &[Kind::Command],
    ),
    (&["rule", "rules", "regla", "reglas"], &[Kind::BusinessRule]),
    (
        &["policy", "policies", "política", "políticas"],
        &[Kind::BusinessPolicy, Kind::CrossPolicy],
    ),
    (
        &["entity", "entities", "entidad", "entidades"],
        &[Kind::Entity],
    ),
    (
        &[
            "requirement",
            "requirements",
            "requisito",
            "requisitos",
            "slo",
            "slos",
        ],
        &[Kind::Requirement, Kind::Nfr],
    ),
    (
        &["query", "queries", "consulta", "consultas"],
        &[Kind::Query],
    ),
    (
        &["scenario", "scenarios", "escenario", "escenarios"],
        &[Kind::Feature],
    ),
    (
        &["process", "processes", "proceso", "procesos"],
        &[Kind::Process],
    ),
];

/// The kinds the question asks for, in the order asked, without repeats.
pub(super) fn asked_kinds(question: &str) -> Vec<Kind> {
    let lower = question.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let mut out: Vec<Kind> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if !INTERROGATIVES.contains(w) {
            continue;
        }
        for j in i + 1..(i + 1 + REACH).min(words.len()) {
            let next = words.get(j + 1).copied().unwrap_or("");
            let after = words.get(j + 2).copied().unwrap_or("");
            let kinds: &[Kind] = match (words[j], next, after) {
                ("use", "case" | "cases", _) => &[Kind::UseCase],
                ("caso" | "casos", "de", "uso") => &[Kind::UseCase],
                (w, _, _) => NOUNS
                    .iter()
                    .find(|(nouns, _)| nouns.contains(&w))
                    .map_or(&[], |(_, k)| *k),
            };
            for k in kinds {
                if !out.contains(k) {
                    out.push(*k);
                }
            }
            if !kinds.is_empty() {
                break;
            }
        }
    }
    out
}

/// The candidates with the kinds `question` asks for lifted by the knob's share, best first, and
/// those kinds (none when the question asks for none or the knob is off).
pub(super) fn lift(
    snap: &Snapshot<'_>,
    cands: Vec<Candidate>,
    question: &str,
) -> Result<(Vec<Candidate>, Vec<Kind>), Error> {
    let share = super::knobs::knobs().kind_boost;
    let asked = if share > 0.0 {
        asked_kinds(question)
    } else {
        Vec::new()
    };
    Ok((boost(snap, cands, &asked, share)?, asked))
}

/// The candidates with the score of each spec of an asked kind times `1 + share`, best first.
fn boost(
    snap: &Snapshot<'_>,
    mut cands: Vec<Candidate>,
    kinds: &[Kind],
    share: f32,
) -> Result<Vec<Candidate>, Error> {
    if kinds.is_empty() || share <= 0.0 {
        return Ok(cands);
    }
    for c in cands.iter_mut() {
        if snap
            .node_brief(&c.0)?
            .is_some_and(|r| kinds.contains(&r.node.kind))
        {
            c.1 *= 1.0 + share;
        }
    }
    cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(cands)
}

#[cfg(test)]
mod tests {
    use super::asked_kinds;
    use crate::spec::Kind;

    #[test]
    fn asked_kinds_follow_an_interrogative() {
        assert_eq!(
            asked_kinds(
                "Which event is emitted when a patient books, and which shared policy reacts?"
            ),
            [Kind::Event, Kind::BusinessPolicy, Kind::CrossPolicy]
        );
        assert_eq!(
            asked_kinds("¿Qué comando ejecuta la cancelación y qué evento emite?"),
            [Kind::Command, Kind::Event]
        );
        assert_eq!(
            asked_kinds("Which use case books a table? ¿Cuál caso de uso?"),
            [Kind::UseCase]
        );
        assert_eq!(
            asked_kinds("what fee rule applies, and which SLO is checked"),
            [Kind::BusinessRule, Kind::Requirement, Kind::Nfr]
        );
    }

    #[test]
    fn a_kind_word_without_a_question_names_a_topic() {
        assert!(asked_kinds("¿Los ficheros de eventos reciben vectores?").is_empty());
        assert!(asked_kinds("hay que enlazar un evento en el comando").is_empty());
        assert!(asked_kinds("What happens to the events of a deleted spec?").is_empty());
    }
}
