//! The scenario format as a JSON Schema, generated from the same Rust types that read it
//! (schemars derives, which follow the serde attributes: unknown fields refused, defaults,
//! enum names), so a field added to a type is in the schema at once.
//!
//! Three things the derives cannot know are added here, each by a rule over the whole schema
//! rather than per field: the notes for readers (`$comment` in every object of the format,
//! `$schema` at the top), and the built-in tools' arguments, taken from the parameter schemas
//! the core offers the model. The schema is draft 7, which editors support best. It describes
//! the shape of a file; what only validation can see (one selector per lane, a declared tool,
//! the limits) is still `rehearsal run`'s to say.

use serde_json::{Value, json};

use super::{Scenario, builtin, place::NOTES};

/// The JSON Schema of a scenario file (what `rehearsal schema` prints).
pub fn schema() -> Value {
    let generator = schemars::generate::SchemaSettings::draft07().into_generator();
    let mut schema = generator.into_root_schema_for::<Scenario>().to_value();
    schema["title"] = json!("rehearsal scenario");
    allow_comments(&mut schema);
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            NOTES[1].to_string(),
            json!({"type": "string", "description": "The schema this file follows, for editors; ignored by rehearsal."}),
        );
    }
    schema["definitions"]["Call"]["allOf"] = Value::Array(builtin_arguments());
    // The meta-schema, title and description first, for a reader of the file.
    let Value::Object(mut rest) = schema else { return schema };
    let mut ordered = serde_json::Map::new();
    for key in ["$schema", "title", "description"] {
        if let Some(value) = rest.shift_remove(key) {
            ordered.insert(key.to_string(), value);
        }
    }
    ordered.extend(rest);
    Value::Object(ordered)
}

/// Every object of the format that refuses unknown fields accepts a `$comment` string.
fn allow_comments(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            let closed = object.get("additionalProperties") == Some(&Value::Bool(false));
            if closed && let Some(Value::Object(properties)) = object.get_mut("properties") {
                properties.insert(
                    NOTES[0].to_string(),
                    json!({"type": "string", "description": "A note for readers; ignored by rehearsal."}),
                );
            }
            object.values_mut().for_each(allow_comments);
        }
        Value::Array(items) => items.iter_mut().for_each(allow_comments),
        _ => {}
    }
}

/// For each built-in tool: a call of it without `"bad_args": true` has arguments its parameter
/// schema accepts, and no others.
fn builtin_arguments() -> Vec<Value> {
    builtin::names()
        .filter_map(|name| Some((name, builtin::parameters(name)?)))
        .map(|(name, parameters)| {
            let mut arguments = parameters.clone();
            arguments["additionalProperties"] = json!(false);
            let mut then = json!({"properties": {"args": arguments}});
            // `args` may be left out only when the tool needs no argument.
            if parameters["required"].as_array().is_some_and(|r| !r.is_empty()) {
                then["required"] = json!(["args"]);
            }
            json!({
                "if": {
                    "properties": {"tool": {"const": name}, "bad_args": {"not": {"const": true}}},
                    "required": ["tool"]
                },
                "then": then
            })
        })
        .collect()
}
