//! The arithmetic of steps and results: pre-deduction and truncation.
//!
//! Pure functions, so the rules are testable without a runtime and the oracles can recompute
//! what the core should have done.

/// The budget of one loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Steps left; saturates at 0 (calls of one response are not stopped by it).
    pub remaining: u32,
    /// Recovery left (failed tools and unknown names draw on it); saturates at 0.
    pub recovery: u32,
}

impl Budget {
    /// Pays `steps`, saturating at 0.
    pub fn spend(&mut self, steps: u32) {
        self.remaining = self.remaining.saturating_sub(steps);
    }

    /// Pays one recovery, saturating at 0.
    pub fn spend_recovery(&mut self) {
        self.recovery = self.recovery.saturating_sub(1);
    }

    /// Whether the exhaustion nudge is due.
    pub fn exhausted(&self) -> bool {
        self.remaining == 0 || self.recovery == 0
    }

    /// Pre-deducts a child's grant: `min(remaining, cap)` leaves now and never comes back.
    /// Returns the grant.
    pub fn grant(&mut self, child_step_cap: u32) -> u32 {
        let grant = self.remaining.min(child_step_cap);
        self.remaining -= grant;
        grant
    }
}

/// The result handed to a parent: the original when it has at most `limit` Unicode scalar
/// values, else its first `limit` of them and the notice. Never splits a character.
pub fn truncate_result(result: &str, limit: Option<usize>) -> (String, bool) {
    let Some(limit) = limit else {
        return (result.to_string(), false);
    };
    match result.char_indices().nth(limit) {
        None => (result.to_string(), false),
        Some((cut, _)) => (format!("{}...\n[Sub-agent response truncated to {limit} chars]", &result[..cut]), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(remaining: u32) -> Budget {
        Budget { remaining, recovery: 5 }
    }

    #[test]
    fn grant_examples_of_roku_grant_examples() {
        // (remaining before the grant, after the spawn cost) -> (grant, left)
        for (before, grant, left) in [(29, 10, 19), (10, 10, 0), (4, 4, 0), (0, 0, 0)] {
            let mut b = budget(before);
            assert_eq!(b.grant(10), grant, "from {before}");
            assert_eq!(b.remaining, left, "from {before}");
        }
    }

    #[test]
    fn two_spawns_from_thirty_leave_eight() {
        let mut b = budget(30);
        b.spend(1);
        b.grant(10);
        assert_eq!(b.remaining, 19);
        b.spend(1);
        b.grant(10);
        assert_eq!(b.remaining, 8);
    }

    #[test]
    fn spending_saturates_at_zero() {
        let mut b = budget(1);
        b.spend(1);
        b.spend(1);
        assert_eq!(b.remaining, 0);
        assert!(b.exhausted());
    }

    #[test]
    fn truncation_counts_scalar_values_not_bytes() {
        let notice = "...\n[Sub-agent response truncated to 4000 chars]";
        for n in [3999, 4000] {
            let s = "字".repeat(n);
            assert_eq!(truncate_result(&s, Some(4000)), (s.clone(), false));
        }
        let s = "😀".repeat(4001);
        let (out, cut) = truncate_result(&s, Some(4000));
        assert!(cut);
        assert_eq!(out, format!("{}{notice}", "😀".repeat(4000)));
        assert_eq!(truncate_result(&s, None), (s.clone(), false));
    }

    #[test]
    fn the_notice_names_the_configured_limit() {
        let (out, _) = truncate_result("abcdef", Some(3));
        assert_eq!(out, "abc...\n[Sub-agent response truncated to 3 chars]");
    }
}
