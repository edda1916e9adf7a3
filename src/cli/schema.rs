//! `rehearsal schema`: the JSON Schema of scenario files, on stdout.
//!
//! The committed copy is `docs/scenario.schema.json`; a test fails when it differs from what
//! this prints.

use std::io::Write;

use super::Exit;

/// Prints the schema, pretty, with a final newline.
pub(super) fn schema(out: &mut dyn Write) -> Exit {
    let text = serde_json::to_string_pretty(&crate::scenario::schema()).expect("a JSON value prints");
    match writeln!(out, "{text}") {
        Ok(()) => Exit::Passed,
        Err(_) => Exit::BadInput,
    }
}
