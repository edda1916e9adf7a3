//! Text written into the XML-family reports (the JUnit report, the timeline's SVG and HTML):
//! one escaping for all of them.
//!
//! Markup characters become entities (`'` as `&#39;`, which HTML and XML both read). The
//! characters XML 1.0 cannot hold at all (most control characters), and the ones the text
//! report also escapes ([`crate::trace::printable`]: C1 controls, bidi overrides and isolates,
//! line and paragraph separators, which XML could hold but which reorder or split what a CI
//! page shows), are written as `\u{..}`, as are the non-characters U+FFFE and
//! U+FFFF. Line breaks and tabs are kept as character references where a report's text may
//! run over lines ([`Breaks::Keep`]: a JUnit failure message), and shown as `\u{..}` where it
//! is one line ([`Breaks::Show`]: a timeline label).

use std::fmt::Write as _;

/// What to do with a line feed, a tab or a carriage return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Breaks {
    /// Kept, as character references (`&#10;`), so an attribute keeps them too.
    Keep,
    /// Shown as `\u{a}`: the text is one line.
    Show,
}

/// `text` as XML character data or an attribute value (in double quotes).
pub(crate) fn escape(text: &str, breaks: Breaks) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' | '\r' if breaks == Breaks::Keep => {
                let _ = write!(out, "&#{};", c as u32);
            }
            c if crate::trace::unprintable(c) || c == '\u{fffe}' || c == '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped_the_same_for_every_report() {
        for breaks in [Breaks::Keep, Breaks::Show] {
            assert_eq!(escape("a<b>&\"c\"'", breaks), "a&lt;b&gt;&amp;&quot;c&quot;&#39;");
            assert_eq!(escape("字 é", breaks), "字 é");
            assert_eq!(
                escape("bell\u{7} del\u{7f} c1\u{85} \u{FFFF}", breaks),
                "bell\\u{7} del\\u{7f} c1\\u{85} \\u{ffff}"
            );
            assert_eq!(escape("rtl\u{202e}x \u{2066}y\u{2028}", breaks), "rtl\\u{202e}x \\u{2066}y\\u{2028}");
        }
    }

    #[test]
    fn line_breaks_are_kept_as_references_or_shown() {
        assert_eq!(escape("a\nb\tc\rd", Breaks::Keep), "a&#10;b&#9;c&#13;d");
        assert_eq!(escape("a\nb\tc\rd", Breaks::Show), "a\\u{a}b\\u{9}c\\u{d}d");
    }
}
