//! Heading normalisation: heading text → canonical section key (`declaration`, `main_flow`…).
//!
//! Headings are cleaned (HTML comments stripped, trailing parenthetical dropped, case and
//! accents folded, punctuation trimmed) and matched against a synonym table covering the v2
//! English templates and the PRD-era Spanish specs: exact match first, then the longest synonym
//! that is a whole-word prefix of the heading (`Main Flow (Happy Path)`, `Métricas de éxito y
//! telemetría`). A heading that matches nothing has no key.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Fold a string for comparisons: NFD, combining marks dropped, lower case, whitespace collapsed.
pub fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.nfd() {
        if is_combining_mark(c) {
            continue;
        }
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        for l in c.to_lowercase() {
            out.push(l);
        }
    }
    out
}

/// Remove `<!-- … -->` comments (an unterminated comment removes the rest) and trim.
pub fn strip_html_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("<!--") {
        out.push_str(&rest[..i]);
        match rest[i + 4..].find("-->") {
            Some(j) => rest = &rest[i + 4 + j + 3..],
            None => {
                rest = "";
                break;
            }
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// The cleaned, folded form used for matching: comments stripped, trailing `(…)` dropped,
/// surrounding punctuation trimmed.
pub fn normalize(heading: &str) -> String {
    let mut h = fold(&strip_html_comments(heading));
    loop {
        let t = h.trim_end();
        if t.ends_with(')') {
            if let Some(open) = t.rfind('(') {
                if open > 0 {
                    h = t[..open].to_string();
                    continue;
                }
            }
        }
        break;
    }
    h.trim_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '.' | '*' | '#' | '-'))
        .to_string()
}

/// (synonym, key). Synonyms are already folded.
const SYNONYMS: &[(&str, &str)] = &[
    ("description", "description"),
    ("descripcion", "description"),
    ("overview", "description"),
    ("examples", "examples"),
    ("example", "examples"),
    ("ejemplos", "examples"),
    ("ejemplo", "examples"),
    ("attributes", "attributes"),
    ("atributos", "attributes"),
    ("relations", "relations"),
    ("relationships", "relations"),
    ("relaciones", "relations"),
    ("entidades relacionadas", "relations"),
    ("related entities", "relations"),
    ("states", "states"),
    ("estados", "states"),
    ("transitions", "transitions"),
    ("transiciones", "transitions"),
    ("state transitions", "transitions"),
    ("transiciones de estado", "transitions"),
    ("lifecycle", "lifecycle"),
    ("life cycle", "lifecycle"),
    ("ciclo de vida", "lifecycle"),
    ("state machine", "lifecycle"),
    ("maquina de estados", "lifecycle"),
    ("invariants", "invariants"),
    ("invariantes", "invariants"),
    ("constraints", "invariants"),
    ("restricciones", "invariants"),
    ("events", "events"),
    ("eventos", "events"),
    ("lifecycle events", "events"),
    ("eventos del ciclo de vida", "events"),
    ("events emitted", "events"),
    ("eventos emitidos", "events"),
    ("emitted events", "events"),
    ("consumed events", "events"),
    ("eventos consumidos", "events"),
    ("related events", "events"),
    ("eventos relacionados", "events"),
    ("payload", "payload"),
    ("emitter", "emitter"),
    ("emisor", "emitter"),
    ("productor", "emitter"),
    ("producer", "emitter"),
    ("subscribers", "subscribers"),
    ("suscriptores", "subscribers"),
    ("consumidores", "subscribers"),
    ("consumers", "subscribers"),
    ("statement", "declaration"),
    ("declaration", "declaration"),
    ("declaracion", "declaration"),
    ("rationale", "rationale"),
    ("por que existe", "rationale"),
    ("why it exists", "rationale"),
    ("when applies", "when_applies"),
    ("when it applies", "when_applies"),
    ("cuando aplica", "when_applies"),
    ("violation behavior", "violation"),
    ("violation behaviour", "violation"),
    ("violation", "violation"),
    ("what happens if violated", "violation"),
    ("what happens on violation", "violation"),
    ("que pasa si se incumple", "violation"),
    ("parameters", "parameters"),
    ("parametros", "parameters"),
    ("formalization", "formalization"),
    ("formalizacion", "formalization"),
    ("ears formalization", "formalization"),
    ("formalizacion ears", "formalization"),
    ("purpose", "purpose"),
    ("proposito", "purpose"),
    ("standard behavior", "standard_behavior"),
    ("standard behaviour", "standard_behavior"),
    ("comportamiento estandar", "standard_behavior"),
    ("input", "input"),
    ("inputs", "input"),
    ("entrada", "input"),
    ("entradas", "input"),
    ("output", "output"),
    ("outputs", "output"),
    ("salida", "output"),
    ("salidas", "output"),
    ("authorization", "authorization"),
    ("autorizacion", "authorization"),
    ("preconditions", "preconditions"),
    ("precondiciones", "preconditions"),
    ("postconditions", "postconditions"),
    ("postcondiciones", "postconditions"),
    ("garantias minimas", "postconditions"),
    ("possible errors", "errors"),
    ("errors", "errors"),
    ("errores posibles", "errors"),
    ("errores", "errors"),
    ("rules validated", "rules_validated"),
    ("reglas validadas", "rules_validated"),
    ("events generated", "events_generated"),
    ("eventos generados", "events_generated"),
    ("eventos producidos", "events_generated"),
    ("participants", "participants"),
    ("participantes", "participants"),
    ("steps", "steps"),
    ("pasos", "steps"),
    ("pasos del flujo", "steps"),
    ("diagram", "diagram"),
    ("diagrama", "diagram"),
    ("diagrama de flujo", "diagram"),
    ("actors", "actors"),
    ("actores", "actors"),
    ("triggers", "triggers"),
    ("disparadores", "triggers"),
    ("main flow", "main_flow"),
    ("flujo principal", "main_flow"),
    ("happy path", "main_flow"),
    ("extensions", "alternatives"),
    ("extensions / alternative flows", "alternatives"),
    ("alternative flows", "alternatives"),
    ("alternatives", "alternatives"),
    ("flujos alternativos", "alternatives"),
    ("extensiones", "alternatives"),
    ("extensiones / flujos alternativos", "alternatives"),
    ("exceptions", "exceptions"),
    ("excepciones", "exceptions"),
    ("business rules", "rules_applied"),
    ("rules applied", "rules_applied"),
    ("applied rules", "rules_applied"),
    ("reglas aplicadas", "rules_applied"),
    ("reglas de negocio", "rules_applied"),
    ("reglas de negocio aplicables", "rules_applied"),
    ("commands executed", "commands_executed"),
    ("comandos ejecutados", "commands_executed"),
    ("navigation", "navigation"),
    ("navegacion", "navigation"),
    ("contexto de navegacion", "navigation"),
    ("layout", "layout"),
    ("diseno", "layout"),
    ("components", "components"),
    ("componentes", "components"),
    ("componentes utilizados", "components"),
    ("data", "data"),
    ("datos", "data"),
    ("datos requeridos", "data"),
    ("view states", "view_states"),
    ("estados de la vista", "view_states"),
    ("functional states", "view_states"),
    ("behavior", "behavior"),
    ("behaviour", "behavior"),
    ("comportamiento", "behavior"),
    ("structure", "structure"),
    ("estructura", "structure"),
    ("actions", "actions"),
    ("acciones", "actions"),
    ("interactions", "actions"),
    ("interacciones", "actions"),
    ("variants", "variants"),
    ("variantes", "variants"),
    ("acceptance criteria", "acceptance_criteria"),
    ("criterios de aceptacion", "acceptance_criteria"),
    ("acceptance criteria / go-live", "acceptance"),
    ("criterios de aceptacion / go-live", "acceptance"),
    ("go-live", "acceptance"),
    ("traceability", "traceability"),
    ("trazabilidad", "traceability"),
    ("traceability matrix", "traceability"),
    ("matriz de trazabilidad", "traceability"),
    ("requirements", "requirements"),
    ("requirements summary", "requirements"),
    ("requisitos", "requirements"),
    ("resumen de requisitos", "requirements"),
    ("objective", "objective"),
    ("objetivo", "objective"),
    ("actor", "actor"),
    ("actor and context", "actor"),
    ("actor principal", "actor"),
    ("success criteria", "success_criteria"),
    ("criterios de exito", "success_criteria"),
    ("exit criteria", "success_criteria"),
    ("criterios de salida", "success_criteria"),
    ("key results", "key_results"),
    ("resultados clave", "key_results"),
    ("related use cases", "related_use_cases"),
    ("casos de uso relacionados", "related_use_cases"),
    ("casos de uso involucrados", "related_use_cases"),
    ("affected use cases", "related_use_cases"),
    ("casos de uso afectados", "related_use_cases"),
    ("use cases", "related_use_cases"),
    ("casos de uso", "related_use_cases"),
    ("problem / opportunity", "problem"),
    ("problema / oportunidad", "problem"),
    ("problem", "problem"),
    ("problema", "problem"),
    ("users and jobs-to-be-done", "users"),
    ("usuarios y jobs-to-be-done", "users"),
    ("users", "users"),
    ("usuarios", "users"),
    ("scope", "scope"),
    ("alcance", "scope"),
    ("in scope", "scope"),
    ("en alcance", "scope"),
    ("functional requirements", "functional_requirements"),
    ("requisitos funcionales", "functional_requirements"),
    ("non-functional requirements", "nfrs"),
    ("requisitos no funcionales", "nfrs"),
    ("nfrs", "nfrs"),
    ("nfr", "nfrs"),
    ("success metrics", "metrics"),
    ("metrics", "metrics"),
    ("metricas", "metrics"),
    ("metricas de exito", "metrics"),
    ("dependencies", "dependencies"),
    ("dependencias", "dependencies"),
    ("risks", "risks"),
    ("riesgos", "risks"),
    ("risks and mitigations", "risks"),
    ("riesgos y mitigaciones", "risks"),
    ("context", "context"),
    ("contexto", "context"),
    ("decision", "decision"),
    ("options considered", "options"),
    ("options", "options"),
    ("opciones consideradas", "options"),
    ("opciones", "options"),
    ("consequences", "consequences"),
    ("consecuencias", "consequences"),
    ("implementation plan", "implementation_plan"),
    ("plan de implementacion", "implementation_plan"),
    ("references", "references"),
    ("referencias", "references"),
    ("goal", "goal"),
    ("trade-offs", "trade_offs"),
    ("tradeoffs", "trade_offs"),
    ("trade offs", "trade_offs"),
    ("scenario", "scenario"),
    ("escenario", "scenario"),
    ("background", "background"),
    ("antecedentes", "background"),
];

/// Canonical key of a heading, or `None`.
pub fn section_key(heading: &str) -> Option<&'static str> {
    let h = normalize(heading);
    if h.is_empty() {
        return None;
    }
    // EARS requirement blocks: `REQ-001.1: Name (Pattern)`.
    if h.starts_with("req-") && h[4..].starts_with(|c: char| c.is_ascii_digit() || c == 'n') {
        return Some("requirements");
    }
    if let Some((_, k)) = SYNONYMS.iter().find(|(s, _)| *s == h) {
        return Some(k);
    }
    let mut best: Option<(&str, &'static str)> = None;
    for (s, k) in SYNONYMS {
        if h.len() > s.len() && h.starts_with(s) {
            let next = h[s.len()..].chars().next().unwrap_or(' ');
            if !next.is_alphanumeric() && best.is_none_or(|(b, _)| s.len() > b.len()) {
                best = Some((s, k));
            }
        }
    }
    best.map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_and_spanish_headings() {
        let cases = [
            ("Descripción", Some("description")),
            ("Description <!-- required -->", Some("description")),
            (
                "Main Flow (Happy Path) <!-- required -->",
                Some("main_flow"),
            ),
            ("Flujo Principal", Some("main_flow")),
            (
                "Extensions / Alternative Flows <!-- optional -->",
                Some("alternatives"),
            ),
            ("Statement <!-- required -->", Some("declaration")),
            ("Declaración", Some("declaration")),
            ("Por qué existe", Some("rationale")),
            ("Qué pasa si se incumple", Some("violation")),
            ("Business Rules", Some("rules_applied")),
            ("Reglas Aplicadas", Some("rules_applied")),
            ("Métricas de éxito y telemetría", Some("metrics")),
            ("Criterios de aceptación / Go-Live", Some("acceptance")),
            ("Criterios de Aceptación", Some("acceptance_criteria")),
            ("Parameters (BP only) <!-- optional -->", Some("parameters")),
            (
                "REQ-NNN.1: Requirement Name (Pattern)",
                Some("requirements"),
            ),
            ("Eventos del ciclo de vida", Some("events")),
            ("Estados de la Vista", Some("view_states")),
            ("Database migration", None),
            ("FA-1: Documento sin front-matter", None),
            ("", None),
        ];
        for (h, k) in cases {
            assert_eq!(section_key(h), k, "{h}");
        }
    }

    #[test]
    fn folding() {
        assert_eq!(fold("  Sesión  ÁRBOL\tx "), "sesion arbol x");
        assert_eq!(strip_html_comments("A <!-- x --> B <!-- y"), "A  B");
    }
}
