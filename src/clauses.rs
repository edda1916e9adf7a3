//! The clause ids of `docs/rules/`: every rule clause of the rules pages, read from the pages
//! themselves at build time, and the ids a scenario's description may cite.
//!
//! A leaf: it imports nothing of the crate. `scenario` checks a description's cited ids at
//! load with it, and `coverage` measures the same clauses over a run's evidence, so neither
//! has to import the other.

use std::sync::OnceLock;

/// The rules pages, as the binary was built with them.
const PAGES: [(&str, &str); 3] = [
    ("docs/rules/roku.md", include_str!("../docs/rules/roku.md")),
    ("docs/rules/bub.md", include_str!("../docs/rules/bub.md")),
    ("docs/rules/core.md", include_str!("../docs/rules/core.md")),
];

/// One rule clause of the docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clause {
    /// Its id (`roku.grant.min-remaining-cap`).
    pub id: &'static str,
    /// The page that states it (`docs/rules/roku.md`).
    pub page: &'static str,
}

/// Every clause of the rules pages, in page order (Roku, Bub, core and oracles).
///
/// A clause is a list item that starts at the left margin with its id in bold code,
/// ``- **`id`**`` ([docs/rules/README.md](../docs/rules/README.md#clause-ids)).
pub fn clauses() -> &'static [Clause] {
    static CLAUSES: OnceLock<Vec<Clause>> = OnceLock::new();
    CLAUSES.get_or_init(|| {
        let mut out = Vec::new();
        for (page, text) in PAGES {
            for line in text.lines() {
                let Some(rest) = line.strip_prefix("- **`") else { continue };
                let Some((id, _)) = rest.split_once("`**") else { continue };
                out.push(Clause { id, page });
            }
        }
        out
    })
}

/// Pages whose clause ids a scenario may cite but coverage does not measure: the conformance
/// families of real runtimes (`bub051.*`, `pydanticai.*`, `oaiagents.*`, `smolagents.*`,
/// `claudecode.*`), checked by `scripts/conformance RUNTIME`, not by a detector.
const CITED_ONLY: [(&str, &str); 5] = [
    ("docs/rules/bub-0.5.1.md", include_str!("../docs/rules/bub-0.5.1.md")),
    ("docs/rules/claude-code.md", include_str!("../docs/rules/claude-code.md")),
    ("docs/rules/openai-agents.md", include_str!("../docs/rules/openai-agents.md")),
    ("docs/rules/pydantic-ai.md", include_str!("../docs/rules/pydantic-ai.md")),
    ("docs/rules/smolagents.md", include_str!("../docs/rules/smolagents.md")),
];

/// The families a clause id starts with.
const FAMILIES: [&str; 9] =
    ["roku", "bub", "core", "oracle", "bub051", "pydanticai", "oaiagents", "smolagents", "claudecode"];

/// Every clause id a scenario may cite: those of [`clauses`] and of the conformance page.
pub fn citable_ids() -> &'static [&'static str] {
    static IDS: OnceLock<Vec<&'static str>> = OnceLock::new();
    IDS.get_or_init(|| {
        let mut out: Vec<&'static str> = clauses().iter().map(|c| c.id).collect();
        for (_, text) in CITED_ONLY {
            for line in text.lines() {
                let Some(rest) = line.strip_prefix("- **`") else { continue };
                let Some((id, _)) = rest.split_once("`**") else { continue };
                out.push(id);
            }
        }
        out
    })
}

/// The clause ids a text cites, in order, each with its byte offset: a word of the form
/// `<family>.<area>.<name>` (lowercase words joined by dots, words within a part by hyphens)
/// whose family is one of the rules pages', or a whole area, `<family>.<area>.*`. A dotted
/// word of two parts (`core.md`) or after a `/` or a letter (`docs/rules/core.md`, `x.core.a`)
/// is not an id.
pub fn cited_ids(text: &str) -> Vec<(usize, &str)> {
    let in_word = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '*');
    let mut out = Vec::new();
    let mut rest = text;
    let mut offset = 0;
    while let Some(start) = rest.find(in_word) {
        let before = rest[..start].chars().next_back();
        let len = rest[start..].find(|c| !in_word(c)).unwrap_or(rest.len() - start);
        // A sentence may end right after an id.
        let word = rest[start..start + len].trim_end_matches(['.', '-']);
        let parts: Vec<&str> = word.split('.').collect();
        let shaped = parts.len() >= 3
            && FAMILIES.contains(&parts[0])
            && parts.iter().all(|p| !p.is_empty())
            && parts[..parts.len() - 1].iter().all(|p| !p.contains('*'))
            && parts.last().is_some_and(|p| *p == "*" || !p.contains('*'));
        let glued = before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '/' | '_'));
        if shaped && !glued {
            out.push((offset + start, word));
        }
        offset += start + len;
        rest = &rest[start + len..];
    }
    out
}

/// Whether `cited` (an id or `<family>.<area>.*`) names a clause of [`citable_ids`].
pub fn is_citable(cited: &str) -> bool {
    match cited.strip_suffix('*') {
        Some(area) => citable_ids().iter().any(|id| id.starts_with(area)),
        None => citable_ids().contains(&cited),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cited_ids_are_words_of_three_parts_in_a_rules_family() {
        let text = "roku.grant.never-refunded, bub.spawn.*: see docs/rules/core.md and core.md; x.core.a.b, Core.a.b and oracle.depth.alias-numbering.";
        let found: Vec<(usize, &str)> = cited_ids(text);
        assert_eq!(
            found,
            [(0, "roku.grant.never-refunded"), (27, "bub.spawn.*"), (101, "oracle.depth.alias-numbering")]
        );
        assert!(is_citable("bub.spawn.*"));
        assert!(!is_citable("bub.spawnn.*"));
        assert!(is_citable("bub051.nesting.no-grandchild"));
        assert!(!is_citable("core.budget.pre-deduction"));
    }
}
