//! The one source of everything a run draws: SplitMix64 over the scenario's seed.
//!
//! The built-in core draws background task ids from it; the harness draws tie orders and the
//! fuzzer draws cases from it. Nothing on a run's path draws from anywhere else.

/// SplitMix64's increment: a sequence of draws is `splitmix64(seed + n * GAMMA)`.
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64: a small, well-mixed function of one `u64`. Every draw of a run comes from the
/// scenario's seed through it.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a: a stable hash of a text, to derive a draw from a name (a schedule site).
pub fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
