//! Running the built `hetsched` binary from integration tests.

use std::process::Command;

/// Run `hetsched` with `args`: (exit code, stdout, stderr).
pub fn hetsched(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hetsched"))
        .args(args)
        .output()
        .expect("run hetsched");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
