//! Property tests: generated scenarios across both rule sets, run through the real core,
//! with every oracle of docs/rules/core.md checked on every case (`rehearsal::internals::fuzz::check`).
//!
//! 256 cases per property by default; set `PROPTEST_CASES` for more. Failing cases are
//! persisted under `proptest-regressions/` and replayed first on every run. A failure prints
//! the shrunk scenario as JSON, ready to save as a file and replay with `rehearsal run`.
//! `scripts/broken-variants/run` shows these properties catch deliberately broken rules.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rehearsal::internals::fuzz::{self, CaseResult};
use rehearsal::internals::generate::{self, Family};
use rehearsal::internals::harness::schedule::Schedule;
use rehearsal::scenario::Scenario;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/properties.txt"))),
        ..ProptestConfig::default()
    }
}

/// Every oracle holds on the scenario in the given tie order. A case whose script the core
/// could not follow is a generator gap, not a rule violation; it passes (and is rare:
/// `rehearsal fuzz` counts them).
fn every_oracle_holds(scenario: &Scenario, schedule: Schedule) -> Result<(), TestCaseError> {
    match fuzz::check(scenario, schedule) {
        CaseResult::Holds | CaseResult::Invalid(_) => Ok(()),
        CaseResult::Panics(panics) => {
            let json = serde_json::to_string_pretty(scenario).expect("scenarios serialise");
            Err(TestCaseError::fail(format!("internal error: {}\nscenario:\n{json}", panics.join("\n"))))
        }
        CaseResult::Violates(violations) => {
            let broken: Vec<String> = violations.iter().map(|v| format!("  - {v}")).collect();
            let json = serde_json::to_string_pretty(scenario).expect("scenarios serialise");
            let order = schedule.seed().map(|s| format!(" (tie order --explore-seed {s})")).unwrap_or_default();
            Err(TestCaseError::fail(format!("{}{order}\nscenario:\n{json}", broken.join("\n"))))
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn roku_rules_hold_on_generated_scenarios(scenario in generate::scenario(Family::Roku)) {
        every_oracle_holds(&scenario, Schedule::default_order())?;
    }

    #[test]
    fn bub_rules_hold_on_generated_scenarios(scenario in generate::scenario(Family::Bub)) {
        every_oracle_holds(&scenario, Schedule::default_order())?;
    }

    #[test]
    fn mixed_rules_hold_on_generated_scenarios(scenario in generate::scenario(Family::Any)) {
        every_oracle_holds(&scenario, Schedule::default_order())?;
    }

    #[test]
    fn every_oracle_holds_in_explored_tie_orders(
        scenario in generate::scenario(Family::Any),
        order in 1u64..1_000_000,
    ) {
        every_oracle_holds(&scenario, Schedule::seeded(order))?;
    }
}
