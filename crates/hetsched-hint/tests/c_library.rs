//! The C library as a C user gets it: installed by `dist/install-hint-library.sh` into a prefix,
//! the example built with the documented command (`cc fragments.c $(pkg-config --cflags --libs
//! hetsched_hint)`), run against a socket standing in for the daemon, and without one.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hetsched-hint-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_installed_library_builds_the_c_example_with_the_documented_command() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let prefix = scratch("prefix");
    // A target directory of its own: the outer cargo may still hold the workspace's.
    let target = std::env::temp_dir().join("hetsched-hint-install-target");
    run(Command::new(root.join("dist/install-hint-library.sh"))
        .arg("--prefix")
        .arg(&prefix)
        .arg("--target-dir")
        .arg(&target));
    let lib = prefix.join("lib");
    for f in [
        "libhetsched_hint.so",
        "libhetsched_hint.so.1",
        "libhetsched_hint.a",
        "pkgconfig/hetsched_hint.pc",
    ] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    assert!(prefix.join("include/hetsched_hint.h").exists());
    let dynamic = run(Command::new("readelf")
        .arg("-d")
        .arg(lib.join("libhetsched_hint.so")));
    assert!(
        dynamic.contains("Library soname: [libhetsched_hint.so.1]"),
        "{dynamic}"
    );
    let sections = run(Command::new("readelf")
        .arg("-S")
        .arg(lib.join("libhetsched_hint.so")));
    assert!(!sections.contains(".debug_info"), "not stripped");

    let work = scratch("example");
    let example = root.join("crates/hetsched-hint/examples/c/fragments.c");
    run(Command::new("sh")
        .arg("-c")
        .arg(format!(
            "cc {} $(pkg-config --cflags --libs hetsched_hint) -o fragments",
            example.display()
        ))
        .current_dir(&work)
        .env("PKG_CONFIG_PATH", lib.join("pkgconfig")));
    // Against a socket standing in for the daemon: two enters and two leaves arrive.
    let socket = work.join("hint.sock");
    let daemon = UnixDatagram::bind(&socket).unwrap();
    let out = run(Command::new(work.join("fragments")).env("HETSCHED_HINT_SOCKET", &socket));
    assert!(out.contains("fragment 0: enter 0, leave 0"), "{out}");
    assert!(out.contains("fragment 1: enter 0, leave 0"), "{out}");
    assert!(out.contains("hint format 1, dropped 0"), "{out}");
    daemon.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 512];
    let received = std::iter::from_fn(|| daemon.recv(&mut buf).ok()).count();
    assert_eq!(received, 4);
    // No daemon: the program runs the same and is told so.
    let out =
        run(Command::new(work.join("fragments"))
            .env("HETSCHED_HINT_SOCKET", work.join("none.sock")));
    assert!(out.contains("fragment 0: enter -"), "{out}");
    let _ = std::fs::remove_dir_all(&prefix);
    let _ = std::fs::remove_dir_all(&work);
}
