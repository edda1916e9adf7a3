//! Where things stand in a scenario file's text: the line and column of a JSON path (for
//! errors found after parsing), and the notes for readers (`$comment` keys, a top-level
//! `$schema`) taken out before the text is read as a scenario.
//!
//! Both walk the text itself rather than a parsed value, because a parsed value has forgotten
//! its places. The walk is a small scanner over JSON that serde_json has accepted (locating)
//! or is about to read (notes); on anything it does not understand it stops and leaves the
//! judgement to serde_json, so it never rejects a file on its own. It does not build values.

use std::borrow::Cow;
use std::fmt;

/// A place in a file: 1-based line and column. Columns count characters, not bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

impl Place {
    /// The place of byte `offset` of `text`.
    pub fn of_offset(text: &str, offset: usize) -> Place {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let line_start = text[..offset].rfind('\n').map_or(0, |nl| nl + 1);
        Place {
            line: text[..line_start].matches('\n').count() + 1,
            column: text[line_start..offset].chars().count() + 1,
        }
    }

    /// serde_json's place (its columns count bytes) with the column counted in characters.
    pub fn from_serde(text: &str, line: usize, byte_column: usize) -> Place {
        let line = line.max(1);
        let Some(line_text) = text.split('\n').nth(line - 1) else {
            return Place { line, column: byte_column.max(1) };
        };
        let end = floor_char_boundary(line_text, byte_column.min(line_text.len()));
        // serde_json's column is that of the last byte it read; past a multi-byte character
        // the count of characters up to it is the same column.
        let column = line_text[..end].chars().count().max(1);
        Place { line, column: if byte_column > line_text.len() { column + 1 } else { column } }
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// serde_json refuses deeper nesting; the scanner stops there too, so it cannot overflow the
/// stack on a hostile file.
const MAX_NESTING: usize = 128;

/// The place the JSON path `path` (as validation writes it: `lanes[0].replies[2].calls[1].tool`,
/// `.` for the top) stands at in `text`: the key of its last member, or the start of its last
/// element. A path that leads where the text has nothing (a field left to its default) stands
/// at the deepest part that exists.
pub fn locate(text: &str, path: &str) -> Place {
    let mut scanner = Scanner { bytes: text.as_bytes(), at: 0 };
    scanner.skip_ws();
    let mut found = scanner.at;
    let path = if path == "." { "" } else { path };
    let _ = scanner.follow(path, &mut found, 0);
    Place::of_offset(text, found)
}

/// A member of an object, as the scanner saw it.
struct Member {
    /// Byte range from the key's opening quote to the end of the value.
    span: (usize, usize),
    /// Where the comma after it stands, if one does.
    comma: Option<usize>,
    /// A note to take out.
    note: bool,
}

struct Scanner<'t> {
    bytes: &'t [u8],
    at: usize,
}

/// The scanner met something it does not read (serde_json will say what).
struct Unreadable;

impl Scanner<'_> {
    fn skip_ws(&mut self) {
        while self.bytes.get(self.at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Result<(), Unreadable> {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Unreadable)
        }
    }

    /// A string token; returns its decoded text.
    fn string(&mut self) -> Result<String, Unreadable> {
        self.skip_ws();
        let start = self.at;
        if self.peek() != Some(b'"') {
            return Err(Unreadable);
        }
        self.at += 1;
        loop {
            match self.peek().ok_or(Unreadable)? {
                b'"' => break,
                b'\\' => self.at += 2,
                _ => self.at += 1,
            }
        }
        self.at += 1;
        let token = std::str::from_utf8(&self.bytes[start..self.at]).map_err(|_| Unreadable)?;
        serde_json::from_str(token).map_err(|_| Unreadable)
    }

    /// Skips one value of any kind.
    fn value(&mut self, depth: usize) -> Result<(), Unreadable> {
        self.skip_ws();
        match self.peek().ok_or(Unreadable)? {
            b'"' => self.string().map(drop),
            b'{' | b'[' if depth >= MAX_NESTING => Err(Unreadable),
            b'{' => {
                self.at += 1;
                self.members(|s, _, _| s.value(depth + 1))
            }
            b'[' => {
                self.at += 1;
                self.elements(|s, _| s.value(depth + 1))
            }
            _ => {
                // A number, `true`, `false` or `null`: up to the next delimiter.
                let start = self.at;
                while self.peek().is_some_and(|b| !matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                    self.at += 1;
                }
                if self.at == start { Err(Unreadable) } else { Ok(()) }
            }
        }
    }

    /// An object's members after its `{`, each key and the place of its opening quote passed
    /// to `each` with the scanner at the value (which `each` must read).
    fn members(
        &mut self,
        mut each: impl FnMut(&mut Self, String, usize) -> Result<(), Unreadable>,
    ) -> Result<(), Unreadable> {
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            let key_start = self.at;
            let key = self.string()?;
            self.eat(b':')?;
            each(self, key, key_start)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Unreadable),
            }
        }
    }

    /// An array's elements after its `[`, each index passed to `each` with the scanner at the
    /// element.
    fn elements(&mut self, mut each: impl FnMut(&mut Self, usize) -> Result<(), Unreadable>) -> Result<(), Unreadable> {
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        let mut index = 0;
        loop {
            self.skip_ws();
            each(self, index)?;
            index += 1;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Unreadable),
            }
        }
    }

    /// Follows `path` from the value at the scanner, moving `found` to each part it finds.
    fn follow(&mut self, path: &str, found: &mut usize, depth: usize) -> Result<(), Unreadable> {
        if path.is_empty() || depth >= MAX_NESTING {
            return Ok(());
        }
        self.skip_ws();
        if let Some(rest) = path.strip_prefix('[') {
            let (number, rest) = rest.split_once(']').ok_or(Unreadable)?;
            let wanted: usize = number.parse().map_err(|_| Unreadable)?;
            if self.peek() != Some(b'[') {
                return Err(Unreadable);
            }
            self.at += 1;
            let mut target = None;
            self.elements(|s, index| {
                if index == wanted {
                    target = Some(s.at);
                }
                s.value(depth + 1)
            })?;
            let start = target.ok_or(Unreadable)?;
            *found = start;
            self.at = start;
            return self.follow(rest, found, depth + 1);
        }
        let path = path.strip_prefix('.').unwrap_or(path);
        if self.peek() != Some(b'{') {
            return Err(Unreadable);
        }
        self.at += 1;
        // The longest key the path starts with, so a key holding a dot is still found.
        let mut best: Option<(usize, usize, usize)> = None;
        self.members(|s, key, key_start| {
            let follows = path.strip_prefix(key.as_str()).is_some_and(|r| r.is_empty() || r.starts_with(['.', '[']));
            if follows && best.is_none_or(|(len, _, _)| key.len() > len) {
                s.skip_ws();
                best = Some((key.len(), key_start, s.at));
            }
            s.value(depth + 1)
        })?;
        let (len, key_start, value_start) = best.ok_or(Unreadable)?;
        *found = key_start;
        self.at = value_start;
        self.follow(&path[len..], found, depth + 1)
    }
}

/// The keys that are notes for readers: `$comment` in any object (but inside a call's
/// `args`, which are sent as written) and `$schema` at the top.
pub const NOTES: [&str; 2] = ["$comment", "$schema"];

/// `text` with every note member (a `$comment` or top-level `$schema` key holding a string)
/// and the commas that went with it turned into spaces. Lines and columns of everything else
/// stay where they were, so serde_json's places are places in the file.
pub fn without_notes(text: &str) -> Cow<'_, str> {
    if !NOTES.iter().any(|note| text.contains(&format!("\"{note}\""))) {
        return Cow::Borrowed(text);
    }
    let mut blank = Vec::new();
    let mut scanner = Scanner { bytes: text.as_bytes(), at: 0 };
    // An unreadable text is left to serde_json; the notes found before the place it stops at
    // are still taken out, so its error is about that place and not about a note.
    let _ = notes_in_value(&mut scanner, &mut blank, Context::Top, 0);
    if blank.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut bytes = text.as_bytes().to_vec();
    for (start, end) in blank {
        for byte in &mut bytes[start..end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    }
    // Only whole string tokens, colons, commas and whitespace were blanked: still UTF-8.
    Cow::Owned(String::from_utf8(bytes).expect("blanking ASCII-delimited tokens keeps UTF-8"))
}

#[derive(Clone, Copy, PartialEq)]
enum Context {
    Top,
    Format,
    Args,
}

fn notes_in_value(
    s: &mut Scanner,
    blank: &mut Vec<(usize, usize)>,
    context: Context,
    depth: usize,
) -> Result<(), Unreadable> {
    s.skip_ws();
    match s.peek() {
        Some(b'{') if depth < MAX_NESTING => {
            s.at += 1;
            notes_in_object(s, blank, context, depth)
        }
        Some(b'[') if depth < MAX_NESTING => {
            s.at += 1;
            let inner = if context == Context::Args { Context::Args } else { Context::Format };
            s.elements(|s, _| notes_in_value(s, blank, inner, depth + 1))
        }
        _ => s.value(depth),
    }
}

fn notes_in_object(
    s: &mut Scanner,
    blank: &mut Vec<(usize, usize)>,
    context: Context,
    depth: usize,
) -> Result<(), Unreadable> {
    let mut members: Vec<Member> = Vec::new();
    let result = (|| {
        s.skip_ws();
        if s.peek() == Some(b'}') {
            s.at += 1;
            return Ok(());
        }
        loop {
            s.skip_ws();
            let start = s.at;
            let key = s.string()?;
            s.eat(b':')?;
            s.skip_ws();
            let note = match key.as_str() {
                "$comment" => context != Context::Args,
                "$schema" => context == Context::Top,
                _ => false,
            } && s.peek() == Some(b'"');
            let inner = match (context, key.as_str()) {
                (Context::Args, _) | (_, "args") => Context::Args,
                _ => Context::Format,
            };
            // A member counts once its value is read; an unreadable one is kept as it is.
            members.push(Member { span: (start, start), comma: None, note: false });
            notes_in_value(s, blank, inner, depth + 1)?;
            let last = members.last_mut().expect("just pushed");
            *last = Member { span: (start, s.at), comma: None, note };
            s.skip_ws();
            match s.peek() {
                Some(b',') => {
                    last.comma = Some(s.at);
                    s.at += 1;
                }
                Some(b'}') => {
                    s.at += 1;
                    return Ok(());
                }
                _ => return Err(Unreadable),
            }
        }
    })();
    // Each kept member keeps the comma after it only when another kept member follows.
    for (i, member) in members.iter().enumerate() {
        if member.note {
            blank.push(member.span);
        }
        let kept_later = members[i + 1..].iter().any(|m| !m.note);
        if let Some(comma) = member.comma
            && (member.note || !kept_later)
        {
            blank.push((comma, comma + 1));
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, path: &str) -> (usize, usize) {
        let place = locate(text, path);
        (place.line, place.column)
    }

    #[test]
    fn locates_members_and_elements() {
        let text = "{\n  \"name\": \"x\",\n  \"lanes\": [\n    {\"agent\": \"main\", \"replies\": [{\"text\": \"a\"}, {\"calls\": [{\"tool\": \"Agnet\"}]}]}\n  ]\n}";
        assert_eq!(at(text, "."), (1, 1));
        assert_eq!(at(text, "name"), (2, 3));
        assert_eq!(at(text, "lanes"), (3, 3));
        assert_eq!(at(text, "lanes[0]"), (4, 5));
        assert_eq!(at(text, "lanes[0].replies[1].calls[0].tool"), (4, 62));
        // Missing parts stand at the deepest part found.
        assert_eq!(at(text, "lanes[0].replies[1].calls[0].args.task"), (4, 61));
        assert_eq!(at(text, "rules.depth_limit"), (1, 1));
        assert_eq!(at(text, "lanes[3]"), (3, 3));
    }

    #[test]
    fn keys_with_dots_and_escapes_are_found() {
        let text = r#"{"args": {"a.b": {"c": 1}, "a": {"b": 2}, "q\"k": 3}}"#;
        assert_eq!(at(text, "args.a.b.c"), (1, 19));
        assert_eq!(at(text, "args.a.b"), (1, 11));
        assert_eq!(at(text, "args.q\"k"), (1, 43));
    }

    #[test]
    fn columns_count_characters() {
        let text = "{\"name\": \"日本\", \"seed\": 1}";
        assert_eq!(at(text, "seed"), (1, 16));
        assert_eq!(Place::from_serde("{\"日\": x}", 1, 10), Place { line: 1, column: 8 });
    }

    #[test]
    fn notes_are_blanked_keeping_places() {
        let text =
            "{\"$schema\": \"s.json\", \"name\": \"x\",\n \"$comment\": \"a, b\", \"seed\": 1, \"$comment\": \"c\"}";
        let out = without_notes(text);
        assert_eq!(out.len(), text.len());
        let value: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(value, serde_json::json!({"name": "x", "seed": 1}));
        assert_eq!(out.find("\"seed\""), text.find("\"seed\""));
        assert_eq!(out.matches('\n').count(), 1);
    }

    #[test]
    fn notes_only_objects_and_nested_notes() {
        for (text, want) in [
            (r#"{"$comment": "a"}"#, serde_json::json!({})),
            (r#"{"$comment": "a", "$comment": "b"}"#, serde_json::json!({})),
            (r#"{"a": 1, "$comment": "x", "$comment": "y"}"#, serde_json::json!({"a": 1})),
            (r#"{"l": [{"$comment": "x", "b": [1, {"$comment": "y"}]}]}"#, serde_json::json!({"l": [{"b": [1, {}]}]})),
        ] {
            let out = without_notes(text);
            assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap(), want, "{text} -> {out}");
        }
    }

    #[test]
    fn notes_stay_inside_args_and_schema_stays_below_the_top() {
        let text = r#"{"c": {"args": {"$comment": "sent"}, "$schema": "x"}}"#;
        assert_eq!(without_notes(text), text);
        // A note holding something other than a string is left for serde to refuse.
        let text = r#"{"$comment": 5}"#;
        assert_eq!(without_notes(text), text);
    }

    #[test]
    fn notes_before_a_syntax_error_are_blanked_and_the_error_stays_put() {
        let text = r#"{"$comment": "x", "name": "a" "lanes": []}"#;
        let out = without_notes(text);
        let error = serde_json::from_str::<serde_json::Value>(&out).unwrap_err();
        let original = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!((error.line(), error.column()), (original.line(), original.column()));
        assert!(!out.contains("$comment"), "{out}");
    }

    #[test]
    fn hostile_nesting_neither_overflows_nor_blanks() {
        let text = format!("{}\"$comment\"{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(without_notes(&text), text);
        let _ = locate(&text, "[0][0][0]");
    }
}
