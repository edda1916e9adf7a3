//! Colour and terminals: `--color auto|always|never`, `NO_COLOR`, and which streams are
//! terminals.
//!
//! Only a few words are ever coloured: `PASS` and `FAIL`, the `error:` and `note:` prefixes,
//! the counts of the summary and `UNHIT` in a coverage table. Machine formats (JSON lines,
//! JUnit XML) are never coloured, whatever the choice.

use std::io::IsTerminal;

use clap::ValueEnum;

/// When to colour the text report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour a stream that is a terminal, unless `NO_COLOR` is set (to anything but empty)
    /// or `TERM` is `dumb`.
    #[default]
    Auto,
    /// Always colour (even into a pipe, and despite `NO_COLOR`).
    Always,
    /// Never colour.
    Never,
}

/// Which of the two output streams are terminals. The binary detects it; a caller that hands
/// [`execute`](super::execute) its own writers says so (the default: neither is one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Terminal {
    /// Whether standard output is a terminal.
    pub stdout: bool,
    /// Whether standard error is a terminal.
    pub stderr: bool,
}

impl Terminal {
    /// The process's own streams.
    pub fn detect() -> Terminal {
        Terminal { stdout: std::io::stdout().is_terminal(), stderr: std::io::stderr().is_terminal() }
    }
}

/// Paints words for one stream, or leaves them plain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Paint {
    on: bool,
}

impl Paint {
    /// The paint for a stream under `choice`; `terminal` says whether the stream is one.
    pub(super) fn new(choice: ColorChoice, terminal: bool) -> Paint {
        let on = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
                let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
                terminal && !no_color && !dumb
            }
        };
        Paint { on }
    }

    fn wrap(self, code: &str, text: &str) -> String {
        if self.on { format!("\u{1b}[{code}m{text}\u{1b}[0m") } else { text.to_string() }
    }

    /// A success (`PASS`, a count of passed scenarios).
    pub(super) fn good(self, text: &str) -> String {
        self.wrap("32", text)
    }

    /// A failure (`FAIL`, `error:`, a count of failures, `UNHIT`).
    pub(super) fn bad(self, text: &str) -> String {
        self.wrap("1;31", text)
    }

    /// Something to notice (`note:`).
    pub(super) fn note(self, text: &str) -> String {
        self.wrap("33", text)
    }

    /// A count: painted `bad` (or `good`) when it is not zero, plain otherwise.
    pub(super) fn count(self, n: usize, what: &str, bad: bool) -> String {
        let text = format!("{n} {what}");
        match (n, bad) {
            (0, _) => text,
            (_, true) => self.bad(&text),
            (_, false) => self.good(&text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_and_always_ignore_the_terminal_and_auto_follows_it() {
        assert_eq!(Paint::new(ColorChoice::Never, true).bad("FAIL"), "FAIL");
        assert_eq!(Paint::new(ColorChoice::Always, false).bad("FAIL"), "\u{1b}[1;31mFAIL\u{1b}[0m");
        assert_eq!(Paint::new(ColorChoice::Auto, false).good("PASS"), "PASS");
    }

    #[test]
    fn a_zero_count_is_never_painted() {
        let paint = Paint::new(ColorChoice::Always, false);
        assert_eq!(paint.count(0, "failed", true), "0 failed");
        assert_eq!(paint.count(2, "failed", true), "\u{1b}[1;31m2 failed\u{1b}[0m");
    }
}
