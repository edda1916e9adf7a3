//! Helpers shared by the modules that run the built `rehearsal` binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What one run of the binary gave.
pub struct Output {
    /// The exit code (`None` if it died of a signal).
    pub code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Output {
    /// Both streams, for assertion messages.
    pub fn both(&self) -> String {
        format!("exit code: {:?}\n--- stdout ---\n{}--- stderr ---\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs `rehearsal ARGS` from the crate's root, so fixture paths are printed as given
/// (`tests/fixtures/bad/x.json`).
pub fn rehearsal(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_rehearsal"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the rehearsal binary runs");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
    }
}

/// The absolute path of a file under the crate's root.
pub fn manifest_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Every `*.json` file under `dir`, in sorted order, into `out`.
pub fn scenario_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            scenario_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}
