//! The shared C library carries a SONAME with its ABI version, so programs linked against it
//! keep working when a compatible version is installed in its place.

fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
    // The C ABI's version (include/hetsched_hint.h); it changes only when a C caller must.
    let abi = if major == "0" { "1" } else { major.as_str() };
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libhetsched_hint.so.{abi}");
    println!("cargo:rerun-if-changed=build.rs");
}
