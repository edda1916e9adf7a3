//! The tool names a script may call without declaring them, which depends on who answers the
//! calls. In process that is the built-in core: its tools (`final_answer`, `Agent`,
//! `subagent`, ...) are known, reserved from `tools` and checked against the schemas it offers.
//! Over the wire it is a runtime rehearsal did not write: the tools its dialect names (spawn,
//! send, wait, cancel, terminal, root-only and handoff tools) are known as the runtime spells
//! them, and a built-in core name its dialect does not use (smolagents' own `final_answer`) is
//! the runtime's own tool, which a scenario may declare.

use std::collections::BTreeSet;

/// Who answers a script's calls, as far as tool names go.
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Names the runtime's dialect reads (its spawn, send, wait, cancel, terminal, root-only
    /// and handoff tools): callable without declaring them, never declared.
    own: BTreeSet<String>,
    /// Prefixes of handoff tools written `transfer_to_*`.
    own_prefixes: Vec<String>,
    /// Whether the built-in core's tools are the runtime's: in process, and over the wire under
    /// one of the core's own dialects. Otherwise a core name the dialect does not use may be
    /// declared, and a call of a name the dialect uses is not checked against the core's
    /// parameter schemas (the runtime's parameters are its own).
    core: bool,
}

impl Vocabulary {
    /// The built-in core's: its tools are known and reserved.
    pub fn core() -> Vocabulary {
        Vocabulary { own: BTreeSet::new(), own_prefixes: Vec::new(), core: true }
    }

    /// A runtime's whose dialect reads the tools `names` (a name ending in `*` is a prefix);
    /// `core`: whether its tools are the built-in core's.
    pub fn runtime<'a>(names: impl IntoIterator<Item = &'a str>, core: bool) -> Vocabulary {
        let mut v = Vocabulary { own: BTreeSet::new(), own_prefixes: Vec::new(), core };
        for name in names {
            match name.strip_suffix('*') {
                Some(prefix) => v.own_prefixes.push(prefix.to_string()),
                None => {
                    v.own.insert(name.to_string());
                }
            }
        }
        v
    }

    /// Whether the runtime's dialect reads the tool `name`.
    pub fn owns(&self, name: &str) -> bool {
        self.own.contains(name) || self.own_prefixes.iter().any(|p| name.starts_with(p.as_str()))
    }

    /// Whether `name`, a built-in core tool's name, is reserved: known without declaring and
    /// never declared (in process, under a core dialect, or where the dialect reads it).
    pub fn reserves_core_name(&self, name: &str) -> bool {
        self.core || self.owns(name)
    }

    /// The names the dialect reads, for a did-you-mean.
    pub(crate) fn own_names(&self) -> impl Iterator<Item = &str> {
        self.own.iter().map(String::as_str)
    }

    /// Whether a call of the built-in core tool `name` is checked against the core's schema.
    pub fn checks_core_schema(&self, name: &str) -> bool {
        self.core || !self.owns(name)
    }
}

impl Default for Vocabulary {
    fn default() -> Vocabulary {
        Vocabulary::core()
    }
}
