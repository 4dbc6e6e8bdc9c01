//! Repository-relative path rules every layer shares, with no I/O: the index folder's name,
//! normalising a user-given relative path, and turning any string into one safe file-name
//! component. The lowest module with `spec` and `report`, so `source`, `roots`, `config`,
//! `embed` and `artifact` all use one definition.

/// Name of the committed index directory at the repository root.
pub const INDEX_DIR: &str = ".kdd-index";

/// Normalise a user-given relative path (`./specs/`, `docs\specs`) to `a/b` form; `None` when it
/// is absolute or escapes with `..`.
pub fn normalize_rel(p: &str) -> Option<String> {
    let p = p.replace('\\', "/");
    if p.starts_with('/') {
        return None;
    }
    let mut parts = Vec::new();
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => return None,
            c => parts.push(c),
        }
    }
    if parts.is_empty() {
        return Some(String::new());
    }
    Some(parts.join("/"))
}

/// Longest component kept verbatim (bytes); longer ones are cut and suffixed with a hash.
const MAX_COMPONENT: usize = 96;

/// Turn any string into one safe path component.
///
/// Keeps Unicode letters and digits, `-`, `_` and `.`; everything else becomes `_`; leading dots
/// are dropped (no `.`, `..`, hidden files). When anything changed, or the name was too long, a
/// `~` and 8 hex chars of blake3 of the original are appended so two different hostile ids never
/// collide. Deterministic.
pub fn sanitize_component(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    while out.starts_with('.') {
        out.remove(0);
    }
    let mut changed = out != raw;
    if out.len() > MAX_COMPONENT {
        let mut cut = MAX_COMPONENT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        changed = true;
    }
    if out.is_empty() {
        out.push('_');
        changed = true;
    }
    if changed {
        let h = blake3::hash(raw.as_bytes()).to_hex();
        out.push('~');
        out.push_str(&h[..8]);
    }
    out
}
