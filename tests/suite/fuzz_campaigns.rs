//! Long fuzz campaigns: a shard's cases are disjoint from the other shards' and together they
//! make the unsharded campaign; a stopped campaign ran the first cases of its shard.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use rehearsal::fuzz::{self, Ended, Options, Report, Shard, Stop};
use rehearsal::generate::Family;

/// Seed 3's first 121 cases hold an invalid one (case 115 when this was written), so the
/// shards' invalid counts show which shard ran it; the checks hold whatever the generator draws.
const SEED: u64 = 3;
const CASES: u64 = 121;

fn options(cases: u64) -> Options {
    Options { cases, seed: SEED, explore: 0, family: Family::Any, shrink_steps: 64, jobs: 2 }
}

fn campaign(cases: u64, shard: Shard) -> Report {
    fuzz::run_campaign(&options(cases), shard, || None, |_| {})
}

#[test]
fn shards_partition_the_case_numbers() {
    for count in 1..=5 {
        for cases in [0, 1, 2, 3, 7, 23, 24] {
            let mut seen = BTreeSet::new();
            for index in 1..=count {
                let shard = Shard::new(index, count).expect("a valid shard");
                let mine: Vec<u64> = shard.cases(cases).collect();
                assert_eq!(mine.len() as u64, shard.size(cases), "{shard} of {cases}");
                for (nth, &case) in mine.iter().enumerate() {
                    assert!(shard.contains(case), "{shard} runs {case}");
                    assert_eq!(shard.nth(nth as u64), Some(case), "{shard}");
                    assert!(seen.insert(case), "case {case} is in two shards of {count}");
                }
            }
            assert_eq!(seen, (0..cases).collect::<BTreeSet<_>>(), "{count} shards of {cases} cases");
        }
    }
    assert_eq!(Shard::new(2, 2).expect("valid").nth(u64::MAX), None, "no case number past u64::MAX");
    assert_eq!(Shard::WHOLE.size(u64::MAX), u64::MAX);
}

#[test]
fn shard_reads_i_of_n_from_1_and_rejects_the_rest() {
    let shard: Shard = "2/4".parse().expect("2/4 is a shard");
    assert_eq!((shard.index(), shard.count(), shard.to_string()), (2, 4, "2/4".to_string()));
    for bad in ["0/2", "3/2", "1/0", "2", "a/2", "1/2/3", ""] {
        assert!(bad.parse::<Shard>().is_err(), "{bad:?} is not a shard");
    }
}

#[test]
fn sharded_campaigns_run_exactly_the_unsharded_cases_with_the_same_verdicts() {
    let whole = campaign(CASES, Shard::WHOLE);
    assert_eq!((whole.cases, whole.ended), (CASES, Ended::AllCases));
    assert_eq!(whole.case_numbers().collect::<Vec<_>>(), (0..CASES).collect::<Vec<_>>());
    for count in [2, 3] {
        let mut ran = BTreeSet::new();
        let (mut invalid, mut reasons) = (0, Vec::new());
        for index in 1..=count {
            let shard = Shard::new(index, count).expect("a valid shard");
            let report = campaign(CASES, shard);
            assert_eq!((report.shard, report.ended), (shard, Ended::AllCases));
            assert!(report.finding.is_none(), "the correct core has a finding: {:?}", report.finding);
            for case in report.case_numbers() {
                assert!(ran.insert(case), "case {case} ran on two of {count} shards");
            }
            invalid += report.invalid;
            reasons.extend(report.invalid_reasons.into_values().map(|(_, example)| example));
        }
        assert_eq!(ran, (0..CASES).collect::<BTreeSet<_>>(), "the union of {count} shards");
        assert_eq!(invalid, whole.invalid, "the invalid cases of {count} shards");
        let mut whole_reasons: Vec<String> = whole.invalid_reasons.values().map(|(_, e)| e.clone()).collect();
        whole_reasons.sort();
        reasons.sort();
        assert_eq!(reasons, whole_reasons, "the same invalid cases, on {count} shards");
    }
}

#[test]
fn a_stopped_campaign_ran_the_first_cases_of_its_shard_and_reports_them_as_a_full_run_would() {
    let shard = Shard::new(2, 3).expect("a valid shard");
    // Stops after 60 cases were started, wherever the two threads are: no clock involved.
    let asked = AtomicU64::new(0);
    let stop = || (asked.fetch_add(1, Ordering::SeqCst) >= 60).then_some(Stop::TimeLimit);
    let stopped = fuzz::run_campaign(&options(u64::MAX), shard, stop, |_| {});
    assert_eq!(stopped.ended, Ended::TimeLimit);
    assert!((1..=60).contains(&stopped.cases), "ran {} cases", stopped.cases);
    let ran: Vec<u64> = stopped.case_numbers().collect();
    let last = *ran.last().expect("some cases ran");
    assert_eq!(ran, shard.cases(last + 1).collect::<Vec<_>>(), "what ran is the shard's first cases");
    // The same cases run to the end, as `--cases {last + 1} --shard 2/3` runs them.
    let full = campaign(last + 1, shard);
    assert_eq!(full.ended, Ended::AllCases);
    assert_eq!((full.cases, full.invalid), (stopped.cases, stopped.invalid));
    assert_eq!(full.invalid_reasons, stopped.invalid_reasons);
}

#[test]
fn a_campaign_stopped_before_its_first_case_ran_nothing() {
    let report = fuzz::run_campaign(&options(CASES), Shard::WHOLE, || Some(Stop::Interrupted), |_| {});
    assert_eq!((report.cases, report.invalid, report.ended), (0, 0, Ended::Interrupted));
    assert!(report.finding.is_none());
    assert_eq!(report.case_numbers().count(), 0);
}
