//! Scenario text: a string, a repeated string, or a list of those, read and rendered.
//!
//! It does not check a text against the limits; `validate` does.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Scenario text: a string, `{"repeat": "ab", "count": 3}`, or a list of those, joined.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Text {
    /// Literal text.
    Plain(String),
    /// `repeat` written `count` times.
    Repeat {
        /// The unit.
        repeat: String,
        /// How many times.
        count: usize,
    },
    /// Pieces, joined.
    Parts(Vec<Text>),
}

/// Hand-written so that a bad text says which forms are accepted and an unknown key inside
/// `{"repeat", "count"}` is rejected like everywhere else (an untagged derive would say only
/// "did not match any variant").
impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        use serde::de::{self, MapAccess, SeqAccess, Visitor};
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(r#"a text: a string, {"repeat": "…", "count": N}, or a list of those"#)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text, E> {
                Ok(Text::Plain(s.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
                let mut parts = Vec::new();
                while let Some(part) = seq.next_element()? {
                    parts.push(part);
                }
                Ok(Text::Parts(parts))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Text, A::Error> {
                const FIELDS: &[&str] = &["repeat", "count"];
                let (mut repeat, mut count) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "repeat" if repeat.is_none() => repeat = Some(map.next_value::<String>()?),
                        "count" if count.is_none() => count = Some(map.next_value::<usize>()?),
                        "repeat" | "count" => return Err(de::Error::custom(format!("duplicate field `{key}`"))),
                        _ => return Err(de::Error::unknown_field(&key, FIELDS)),
                    }
                }
                let repeat = repeat.ok_or_else(|| de::Error::missing_field("repeat"))?;
                let count = count.ok_or_else(|| de::Error::missing_field("count"))?;
                Ok(Text::Repeat { repeat, count })
            }
        }
        d.deserialize_any(TextVisitor)
    }
}

/// Written by hand like the `Deserialize` above: the three forms, the `repeat` one closed.
impl schemars::JsonSchema for Text {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Text".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let list = generator.subschema_for::<Text>();
        schemars::json_schema!({
            "description": "A text: a string, {\"repeat\": \"…\", \"count\": N} (the unit N times), or a list of those, joined.",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {"repeat": {"type": "string"}, "count": {"type": "integer", "minimum": 0}},
                    "required": ["repeat", "count"],
                    "additionalProperties": false
                },
                {"type": "array", "items": list}
            ]
        })
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text::Plain(text.to_string())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text::Plain(text)
    }
}

impl Text {
    /// The length in bytes of the text [`Text::render`] builds, without building it (`None`
    /// past `usize::MAX`): the harness asks before it makes a text, against the run budget.
    pub fn byte_len(&self) -> Option<usize> {
        match self {
            Text::Plain(s) => Some(s.len()),
            Text::Repeat { repeat, count } => repeat.len().checked_mul(*count),
            Text::Parts(parts) => parts.iter().try_fold(0usize, |sum, part| sum.checked_add(part.byte_len()?)),
        }
    }

    /// Whether the text [`Text::render`] builds is empty or whitespace, without building it.
    pub fn is_blank(&self) -> bool {
        match self {
            Text::Plain(s) => s.trim().is_empty(),
            Text::Repeat { repeat, count } => *count == 0 || repeat.trim().is_empty(),
            Text::Parts(parts) => parts.iter().all(Text::is_blank),
        }
    }

    /// The text it stands for.
    pub fn render(&self) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Repeat { repeat, count } => repeat.repeat(*count),
            Text::Parts(parts) => parts.iter().map(Text::render).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_render() {
        let t: Text = serde_json::from_str(r#"["a", {"repeat": "字", "count": 3}]"#).unwrap();
        assert_eq!(t.render(), "a字字字");
    }
}
