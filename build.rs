//! Compiles a deliberately broken rule variant into this crate when `REHEARSAL_BROKEN` names
//! one (`REHEARSAL_BROKEN=lifo_queue`, as `scripts/broken-variants` does): the same
//! `cfg(broken = "lifo_queue")` that `RUSTFLAGS='--cfg broken="lifo_queue"'` sets, but for
//! this crate only. RUSTFLAGS reaches every dependency too, so each variant rebuilt all of
//! them (eight full builds on a fresh CI machine); this way they are built once and only
//! rehearsal is rebuilt per variant. Unset (every normal build), it does nothing.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=REHEARSAL_BROKEN");
    if let Ok(name) = std::env::var("REHEARSAL_BROKEN") {
        if !name.is_empty() {
            println!("cargo::rustc-cfg=broken=\"{name}\"");
        }
    }
}
