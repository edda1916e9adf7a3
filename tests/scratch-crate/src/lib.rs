//! A user's own tests, written against the library only.

#[cfg(test)]
mod tests {
    use rehearsal::runner::Runner;
    use rehearsal::scenario::{Lane, Reply, Scenario, ToolSpec, Turn};
    use rehearsal::sut::event::OutcomeKind;
    use serde_json::json;

    #[test]
    fn a_scenario_built_in_code_runs_and_passes() {
        let scenario = Scenario::builder("scratch")
            .tool(ToolSpec::new("Read").latency_ms(50).result("log contents"))
            .lane(
                Lane::agent("main")
                    .reply(Reply::call("Agent", json!({"task": "Summarise the logs"})).latency_ms(100))
                    .reply(Reply::text("All clear.").latency_ms(100)),
            )
            .lane(Lane::agent("main/1").reply(Reply::text("Nothing to report.").latency_ms(200)))
            .turn(Turn::user("Check the logs").expect_outcome(OutcomeKind::FinalAnswer).expect_budget_left(18))
            .build()
            .expect("a valid scenario");
        Runner::new().explore(4).check(&scenario).expect("the built-in core runs it").assert_passed();
    }
}
