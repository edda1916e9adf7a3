//! Agent profile files: `.agents/agents/*.md` with YAML front matter (`docs/rules/bub.md`, `bub.profile.*`).
//!
//! Files are read before a run starts, never during one. A file without a `description`, or
//! whose front matter does not parse, is an error naming the file (and the line, where the
//! YAML parser knows it): bad input. Precedence between folders is [`super::resolve_profiles`]'s
//! business. Whether the core reads a profile as it is written is not judged here but by the
//! oracles (`oracle.context.profiles-as-written`).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::scenario::{ProfileSpec, ScenarioError};
use crate::sut::Profile;

/// A list written as a YAML list or as a comma-separated string.
#[derive(Deserialize)]
#[serde(untagged)]
enum List {
    Items(Vec<String>),
    Joined(String),
}

impl List {
    fn items(self) -> Vec<String> {
        match self {
            List::Items(items) => items,
            List::Joined(s) => s.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: Option<String>,
    description: Option<String>,
    model: Option<String>,
    reasoning_effort: Option<String>,
    tools: Option<List>,
    skills: Option<List>,
    timeout_seconds: Option<f64>,
}

fn invalid(path: &Path, field: &str, message: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        path: path.to_path_buf(),
        place: None,
        field: field.to_string(),
        message: message.into(),
        hint: None,
    }
}

/// Parses one profile file's text; `path` names it in errors and gives the default name.
pub fn parse(path: &Path, text: &str) -> Result<Profile, ScenarioError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(invalid(
            path,
            "front matter",
            "a profile file starts with a `---` line, then YAML front matter, then `---`",
        ));
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err(invalid(path, "front matter", "the front matter has no closing `---` line"));
    }
    let body: String = lines.collect();
    bounded(&yaml).map_err(|m| invalid(path, "front matter", m))?;
    let front = front_matter(path, &yaml)?;
    let description = front.description.map(|d| d.trim().to_string()).filter(|d| !d.is_empty());
    let Some(description) = description else {
        return Err(invalid(path, "description", "a profile needs a `description` in its front matter"));
    };
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let timeout = match front.timeout_seconds {
        Some(seconds) => {
            crate::scenario::check_seconds(seconds).map_err(|m| invalid(path, "timeout_seconds", m))?;
            Some(Duration::from_secs_f64(seconds))
        }
        None => None,
    };
    Ok(Profile {
        name: front.name.map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).unwrap_or(stem),
        description,
        model: front.model,
        reasoning_effort: front.reasoning_effort,
        tools: front.tools.map(List::items),
        skills: front.skills.map(List::items),
        timeout,
        body: body.trim().to_string(),
    })
}

/// The most bytes of front matter a profile may have: a profile's fields (a name, a
/// description of a few paragraphs, two lists, three scalars) fit in far less, and the
/// prompt is the body below the front matter, which has no such cap. At this size even the
/// parser's worst case (nested flow collections the nesting count missed) stays far below a
/// second.
pub const MAX_FRONT_MATTER_BYTES: usize = 16 << 10;

/// The deepest nesting of flow collections (`[…]`, `{…}`) front matter may have. No field of a
/// profile nests at all; a list of tools is one level.
pub const MAX_FRONT_MATTER_NESTING: usize = 16;

/// Refuses front matter past [`MAX_FRONT_MATTER_BYTES`] or nested past
/// [`MAX_FRONT_MATTER_NESTING`], before the YAML parser sees it: the parser's own recursion
/// limit applies only after quadratic work on nested flow collections (162 KB of them take
/// 16 s). The nesting is counted in one pass, outside quoted scalars and comments (a quote
/// opens a scalar after a blank or `[{,:`, as YAML's do; an apostrophe inside a word does
/// not); a bracket in a plain scalar counts too, which can only over-count.
fn bounded(yaml: &str) -> Result<(), String> {
    if yaml.len() > MAX_FRONT_MATTER_BYTES {
        return Err(format!(
            "the front matter is {} bytes, more than the {MAX_FRONT_MATTER_BYTES} a profile may have",
            yaml.len()
        ));
    }
    let (mut depth, mut line) = (0usize, 1usize);
    let mut quote: Option<char> = None;
    let mut chars = yaml.chars().peekable();
    let mut previous = '\n';
    while let Some(c) = chars.next() {
        match (quote, c) {
            // A quoted scalar may go on over a line break.
            (_, '\n') => line += 1,
            (Some('"'), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => {
                // `''` inside a single-quoted scalar is an escaped quote.
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    quote = None;
                }
            }
            (Some(_), _) => {}
            (None, '"' | '\'') if previous.is_whitespace() || matches!(previous, '[' | '{' | ',' | ':') => {
                quote = Some(c)
            }
            (None, '#') if previous.is_whitespace() => {
                while chars.peek().is_some_and(|c| *c != '\n') {
                    chars.next();
                }
            }
            (None, '[' | '{') => {
                depth += 1;
                if depth > MAX_FRONT_MATTER_NESTING {
                    return Err(format!(
                        "the front matter nests more than {MAX_FRONT_MATTER_NESTING} deep (`[` and `{{`), at its line {line}: a profile's fields do not nest"
                    ));
                }
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        previous = c;
    }
    Ok(())
}

#[cfg(feature = "profile-files")]
fn front_matter(path: &Path, yaml: &str) -> Result<FrontMatter, ScenarioError> {
    serde_norway::from_str(yaml).map_err(|e| {
        let (line, column) = e.location().map_or((2, 1), |l| (l.line() + 1, l.column()));
        // The YAML parser counts from the front matter; the place is printed in front instead.
        let message = without_positions(&e.to_string());
        let hint = crate::scenario::hint_for_serde(&message);
        ScenarioError::Parse { path: path.to_path_buf(), line, column, field: "front matter".into(), message, hint }
    })
}

#[cfg(not(feature = "profile-files"))]
fn front_matter(path: &Path, _: &str) -> Result<FrontMatter, ScenarioError> {
    Err(invalid(
        path,
        "front matter",
        "this build of rehearsal reads no profile files: enable the `profile-files` feature",
    ))
}

/// The message without its ` at line L column C` parts.
#[cfg(feature = "profile-files")]
fn without_positions(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " at line ".len()..];
        let skip = tail.find(|c: char| !(c.is_ascii_digit() || c == ' ' || "column".contains(c))).unwrap_or(tail.len());
        rest = &tail[skip..];
    }
    out.push_str(rest);
    out
}

/// Loads every `*.md` profile of a folder, in file-name order.
pub fn load_dir(dir: &Path) -> Result<Vec<Profile>, ScenarioError> {
    let io = |e: std::io::Error| ScenarioError::Io { path: dir.to_path_buf(), message: e.to_string() };
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(io)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let text = super::read(path, "profile file")?;
            parse(path, &text)
        })
        .collect()
}

/// A profile declared inline in a scenario.
pub fn from_spec(spec: &ProfileSpec) -> Profile {
    Profile {
        name: spec.name.clone(),
        description: spec.description.clone(),
        model: spec.model.clone(),
        reasoning_effort: spec.reasoning_effort.clone(),
        tools: spec.tools.clone(),
        skills: spec.skills.clone(),
        // Validated with the scenario (`scenario::check_seconds`); clamped all the same.
        timeout: spec.timeout_seconds.map(|s| Duration::from_secs_f64(s.clamp(0.0, crate::rules::MAX_SECONDS))),
        body: spec.body.clone(),
    }
}

#[cfg(all(test, feature = "profile-files"))]
mod tests {
    use super::*;

    #[test]
    fn nested_flow_front_matter_is_refused_before_the_yaml_parser_sees_it() {
        // 162 KB of nested flow YAML takes the parser 16 s to reach its recursion limit.
        let nested = format!("---\ndescription: x\ntools: {}{}\n---\n", "[".repeat(80_000), "]".repeat(80_000));
        let e = parse(Path::new("p.md"), &nested).unwrap_err().to_string();
        assert!(e.contains("more than the 16384 a profile may have"), "{e}");
        let deep = format!("---\ndescription: x\ntools: {}a{}\n---\n", "[{".repeat(9), "}]".repeat(9));
        let e = parse(Path::new("p.md"), &deep).unwrap_err().to_string();
        assert!(e.contains("nests more than 16 deep"), "{e}");
        // Brackets in quoted scalars and comments are text; an apostrophe in a word opens nothing.
        let text = "---\ndescription: \"[[[[[[[[[[[[[[[[[[[[\" # [[[[[[[[[[[[[[[[[[\nmodel: it's [x]\ntools: [a, '[[[[[[[[[[[[[[[[[[[[']\n---\n";
        let p = parse(Path::new("p.md"), text).unwrap();
        assert_eq!(p.tools.unwrap()[1], "[[[[[[[[[[[[[[[[[[[[");
        // A closing bracket in a string does not hide the nesting around it.
        let hidden = format!("---\ndescription: x\ntools: {}\n---\n", "[\"]\", ".repeat(17));
        assert!(parse(Path::new("p.md"), &hidden).unwrap_err().to_string().contains("nests more than 16 deep"));
    }

    #[test]
    fn front_matter_fields_and_defaults() {
        let p = parse(
            Path::new("x/reviewer.md"),
            "---\ndescription: Reviews diffs\ntools: fs.read, grep\ntimeout_seconds: 30\n---\nBe terse.\n",
        )
        .unwrap();
        assert_eq!(p.name, "reviewer");
        assert_eq!(p.tools, Some(vec!["fs.read".to_string(), "grep".to_string()]));
        assert_eq!(p.timeout, Some(Duration::from_secs(30)));
        assert_eq!(p.body, "Be terse.");
    }

    #[test]
    fn missing_description_names_the_file() {
        let e = parse(Path::new("a/b.md"), "---\nname: b\n---\n").unwrap_err().to_string();
        assert!(e.contains("a/b.md") && e.contains("description"), "{e}");
    }

    #[test]
    fn broken_front_matter_names_the_file_and_line() {
        let e = parse(Path::new("a/c.md"), "---\ndescription: ok\ntools: [a, b\n---\n").unwrap_err().to_string();
        assert!(e.starts_with("a/c.md:"), "{e}");
    }
}
