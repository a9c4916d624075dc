//! Records the git commit the binary is built from (when built from a git checkout), for the
//! provenance every JSON document and every sweep row carries.

use std::process::Command;

/// What `git ARGS` prints (trimmed), if git runs and succeeds.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_default();
    println!("cargo:rustc-env=HETSCHED_GIT_COMMIT={commit}");
    // Rebuild when HEAD moves (a new commit or another branch). Git says where its files are,
    // which is not always ../../.git (a linked worktree keeps HEAD under the main repository's
    // .git/worktrees/, and every worktree's branches under its refs/). Without these lines the
    // commit recorded would be whichever HEAD was current when this package last changed.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
