//! Build script: link settings for the `svc` binary, and the `has_<tool>` cfgs that mark
//! the tests needing a missing external tool as ignored (`src/test_tools.rs`). Owns nothing
//! else.
//!
//! Must not: change what the library or the binary do (the cfgs only touch test
//! attributes).

// Compiled here for the probe: the test helpers in it are unused by the build script, and
// its self-test's cfg is declared for the crate, not for this script.
#[allow(dead_code, unexpected_cfgs)]
#[path = "src/test_tools.rs"]
mod test_tools;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    link_settings();
    // `cfg(has_<tool>)` for each external tool some tests need (see src/test_tools.rs).
    test_tools::emit_build_cfgs();
}

/// Link arguments for the `svc` binary.
fn link_settings() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let native = std::env::var("HOST").ok() == std::env::var("TARGET").ok();
    if os == "linux" && env == "gnu" && native && host_glibc_has_relr() {
        // Packed relative relocations (DT_RELR, glibc >= 2.36, binutils >= 2.38): the
        // position-independent binary's 590 KB relocation table shrinks to 7 KB, which the
        // loader no longer reads (and keeps resident) at every start. Peak memory of a
        // short `svc validate` drops by about 0.5 MB; nothing else changes. Only where the
        // glibc the binary links against can load it (a binary built on glibc 2.35 would not
        // start there).
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether this machine's glibc (the one a native build links against) is 2.36 or later.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn host_glibc_has_relr() -> bool {
    // SAFETY: gnu_get_libc_version returns a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    let mut parts = version
        .to_str()
        .unwrap_or("")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn host_glibc_has_relr() -> bool {
    false
}
