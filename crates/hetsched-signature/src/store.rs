//! The signature store: signatures recorded once (`hetsched signature --record --save`) and read
//! when a program starts (`hetsched run`, the daemon), as HASS computes a program's signature
//! offline and its scheduler reads it at the program's start (HASS section 3).
//!
//! A directory of JSON files, one per executable, keyed by the executable's canonical path and the
//! SHA-256 of its content: a rebuilt or replaced executable has another hash and does not match an
//! entry recorded from the old one. The file of a key is
//! `<first 16 hex digits of the SHA-256 of the path>-<SHA-256 of the content>.json`, and holds the
//! `signature --json` document (whole-run signature, no windows) with the key beside it:
//! `"executable": {"path": ..., "sha256": ..., "bytes": ...}`. A reader checks that key against the
//! one it looks up, so a file copied or renamed within the store matches nothing.
//!
//! Every read is bounded: an entry larger than [`MAX_ENTRY_BYTES`] is refused unread, and an
//! executable larger than [`MAX_EXECUTABLE_BYTES`] is not hashed.

use hetsched_core::input::read_bounded;
use hetsched_core::{InputError, Signature};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The environment variable naming the store's directory when no `--store` is given.
pub const STORE_ENV: &str = "HETSCHED_STORE";

/// The store of a root user when neither `--store` nor [`STORE_ENV`] names one.
pub const ROOT_STORE_DIR: &str = "/var/lib/hetsched/signatures";

/// Largest store entry read, bytes. An entry is a whole-run signature (44 values) and its
/// provenance, about 3 kB; anything near this size is not one.
pub const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// Largest executable hashed, bytes (256 MiB, about half a second of SHA-256 on one core of the
/// 2-core VM): a program larger than this has no store entry, rather than stalling the loop that
/// places threads while it is hashed.
pub const MAX_EXECUTABLE_BYTES: u64 = 256 << 20;

/// The store's default directory: [`STORE_ENV`] when set; else [`ROOT_STORE_DIR`] for root; else
/// `$XDG_DATA_HOME/hetsched/signatures`, `$XDG_DATA_HOME` defaulting to `~/.local/share` (the XDG
/// base directory specification).
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os(STORE_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return PathBuf::from(ROOT_STORE_DIR);
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("hetsched/signatures")
}

/// What identifies an executable in the store.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ExecutableKey {
    /// Canonical: absolute, without symbolic links (as the kernel shows it in /proc/PID/exe).
    pub path: PathBuf,
    /// SHA-256 of the file's content, 64 lowercase hex digits.
    pub sha256: String,
    /// The file's size, bytes.
    pub bytes: u64,
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

impl ExecutableKey {
    /// The key of the executable at `path` (made canonical).
    pub fn of_path(path: &Path) -> io::Result<ExecutableKey> {
        let canonical = std::fs::canonicalize(path)?;
        let file = File::open(&canonical)?;
        ExecutableKey::of_file(canonical, file)
    }

    /// The key of an open executable known as `path` (already canonical: /proc/PID/exe opened
    /// gives the very file a process runs, and its link text the canonical path).
    pub fn of_file(path: PathBuf, file: File) -> io::Result<ExecutableKey> {
        let bytes = file.metadata()?.len();
        if bytes > MAX_EXECUTABLE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: {bytes} bytes, larger than the {MAX_EXECUTABLE_BYTES} the store hashes",
                    path.display()
                ),
            ));
        }
        let sha256 = hash_bounded(file, MAX_EXECUTABLE_BYTES)?;
        Ok(ExecutableKey {
            path,
            sha256,
            bytes,
        })
    }

    /// The entry's file name in the store directory.
    pub fn file_name(&self) -> String {
        let path_hash = hex(&Sha256::digest(self.path.as_os_str().as_encoded_bytes()));
        format!("{}-{}.json", &path_hash[..16], self.sha256)
    }
}

/// SHA-256 of what `r` gives, refused past `max` bytes (a file growing while it is read).
fn hash_bounded(r: impl Read, max: u64) -> io::Result<String> {
    let mut r = r.take(max + 1);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        h.update(&buf[..n]);
    }
    if total > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than the {max} bytes the store hashes"),
        ));
    }
    Ok(hex(&h.finalize()))
}

/// A signature store directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether an entry can be written: the directory is made if it is missing, and a file is
    /// created in it and removed. Checked before a recording, which can take minutes, so that its
    /// signature is not left with nowhere to go.
    pub fn check_writable(&self) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        tempfile::Builder::new()
            .prefix(".write-check-")
            .tempfile_in(&self.dir)?
            .close()
    }

    /// Where the entry of `key` is (whether or not it exists).
    pub fn entry_path(&self, key: &ExecutableKey) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// Write the entry of `key`: `document` (a `signature --json` object) with the key added as
    /// `executable`. Written to a temporary file and renamed over the old entry, so a reader sees
    /// the old entry or the new one, never half of one. Returns the entry's path.
    pub fn save(
        &self,
        key: &ExecutableKey,
        mut document: serde_json::Map<String, serde_json::Value>,
    ) -> io::Result<PathBuf> {
        document.insert(
            "executable".into(),
            serde_json::json!({
                "path": key.path.to_string_lossy(),
                "sha256": key.sha256,
                "bytes": key.bytes,
            }),
        );
        let text = serde_json::to_string_pretty(&document)?;
        if text.len() as u64 > MAX_ENTRY_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the entry would be {} bytes, more than {MAX_ENTRY_BYTES}",
                    text.len()
                ),
            ));
        }
        std::fs::create_dir_all(&self.dir)?;
        let path = self.entry_path(key);
        let tmp = self
            .dir
            .join(format!(".{}.{}.tmp", key.file_name(), std::process::id()));
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map(|()| path)
    }

    /// The signature stored for `key`: `Ok(None)` when there is no entry (the usual case: most
    /// programs were never recorded), an error (one line naming the file) when the entry is
    /// unreadable, too large, malformed, or recorded for another executable.
    pub fn load(&self, key: &ExecutableKey) -> Result<Option<Signature>, InputError> {
        let path = self.entry_path(key);
        read_entry(&path, key)
    }
}

/// The signature in the store entry at `path`, checked to be the entry of `key`.
pub fn read_entry(path: &Path, key: &ExecutableKey) -> Result<Option<Signature>, InputError> {
    let name = path.display().to_string();
    let text = match read_bounded(path, MAX_ENTRY_BYTES) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(InputError::unreadable(&name, &e)),
    };
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| InputError {
        source_name: name.clone(),
        location: format!("line {}: ", e.line()),
        message: e.to_string(),
    })?;
    let exe = &value["executable"];
    let (Some(p), Some(h)) = (exe["path"].as_str(), exe["sha256"].as_str()) else {
        return Err(InputError::at(
            &name,
            "executable",
            "missing, or without a path and sha256: not a store entry",
        ));
    };
    if Path::new(p) != key.path || h != key.sha256 {
        return Err(InputError::at(
            &name,
            "executable",
            format!(
                "the entry of {p} (sha256 {h}), not of {} (sha256 {})",
                key.path.display(),
                key.sha256
            ),
        ));
    }
    Signature::parse(&text, &name).map(Some)
}

/// Whether the file at `path` is a script: it starts with `#!`, so the kernel runs its
/// interpreter, and /proc/PID/exe of the process names the interpreter, not the script.
pub fn is_script(path: &Path) -> io::Result<bool> {
    let mut head = [0u8; 2];
    let mut f = File::open(path)?;
    let n = crate::readers::read_some(&mut f, &mut head)?;
    Ok(head[..n] == *b"#!")
}

/// The executable a command names: a name with a `/` as given, else the first match on `PATH`
/// that is an executable file (as a shell looks it up).
pub fn resolve_command(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hs-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn document(row: &[f64]) -> serde_json::Map<String, serde_json::Value> {
        let sig = Signature::from_row("prog", row);
        let mut v = serde_json::to_value(&sig).unwrap();
        let m = v.as_object_mut().unwrap();
        m.insert("schema_version".into(), 2.into());
        m.insert("instructions".into(), 1000.into());
        m.clone()
    }

    #[test]
    fn the_key_follows_the_content_and_a_changed_executable_misses_the_old_entry() {
        let d = scratch("key");
        let exe = d.join("prog");
        std::fs::write(&exe, b"first build").unwrap();
        let k1 = ExecutableKey::of_path(&exe).unwrap();
        assert_eq!(k1.path, std::fs::canonicalize(&exe).unwrap());
        // SHA-256("first build").
        assert_eq!(
            k1.sha256,
            hex(&Sha256::digest(b"first build")),
            "the key hashes the file's bytes"
        );
        assert_eq!(k1.bytes, 11);
        let store = Store::new(d.join("store"));
        let saved = store.save(&k1, document(&[400.0, 100.0])).unwrap();
        assert!(saved.starts_with(store.dir()));
        let got = store.load(&k1).unwrap().unwrap();
        assert_eq!(got.misses_at(16 << 10, 4), 400.0);
        assert_eq!(got.misses_at(16 << 20, 32), 100.0);
        // The same path, one byte different: another key, and no entry.
        std::fs::write(&exe, b"first buile").unwrap();
        let k2 = ExecutableKey::of_path(&exe).unwrap();
        assert_eq!(k2.path, k1.path);
        assert_ne!(k2.sha256, k1.sha256);
        assert_ne!(k2.file_name(), k1.file_name());
        assert_eq!(store.load(&k2).unwrap(), None);
        // The same content at another path: another key too.
        let copy = d.join("copy");
        std::fs::write(&copy, b"first build").unwrap();
        let k3 = ExecutableKey::of_path(&copy).unwrap();
        assert_eq!(k3.sha256, k1.sha256);
        assert_ne!(k3.file_name(), k1.file_name());
        assert_eq!(store.load(&k3).unwrap(), None);
        // An entry copied to another key's file name matches nothing.
        std::fs::copy(&saved, store.entry_path(&k3)).unwrap();
        let e = store.load(&k3).unwrap_err().to_string();
        assert!(e.contains("executable: the entry of"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_corrupt_or_oversized_entry_is_one_line_of_error() {
        let d = scratch("bad");
        let exe = d.join("prog");
        std::fs::write(&exe, b"x").unwrap();
        let key = ExecutableKey::of_path(&exe).unwrap();
        let store = Store::new(d.join("store"));
        let path = store.save(&key, document(&[1.0])).unwrap();
        // Truncated JSON.
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        let e = store.load(&key).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: line ", path.display())), "{e}");
        assert_eq!(e.lines().count(), 1);
        // Absurdly large: refused before it is read (a sparse file of 1 MiB + 1).
        let f = File::create(&path).unwrap();
        f.set_len(MAX_ENTRY_BYTES + 1).unwrap();
        assert_eq!(
            store.load(&key).unwrap_err().to_string(),
            format!(
                "{}: cannot read: larger than 1048576 bytes (1048577 bytes), refused",
                path.display()
            )
        );
        // Valid JSON, not an entry.
        std::fs::write(&path, "{\"misses_per_4096\": [[1]]}").unwrap();
        assert_eq!(
            store.load(&key).unwrap_err().to_string(),
            format!(
                "{}: executable: missing, or without a path and sha256: not a store entry",
                path.display()
            )
        );
        // The entry's key right, its signature wrong.
        let mut doc = document(&[1.0]);
        doc.insert("misses_per_4096".into(), serde_json::json!([[1.0]]));
        store.save(&key, doc).unwrap();
        assert_eq!(
            store.load(&key).unwrap_err().to_string(),
            format!(
                "{}: misses_per_4096: needs one row per associativity (4), got 1",
                path.display()
            )
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn scripts_are_told_by_their_first_two_bytes() {
        let d = scratch("script");
        for (name, content, script) in [
            ("s.sh", &b"#!/bin/sh\nexit 0\n"[..], true),
            ("elf", &b"\x7fELF\x02\x01"[..], false),
            ("one", &b"#"[..], false),
            ("empty", &b""[..], false),
        ] {
            let p = d.join(name);
            std::fs::write(&p, content).unwrap();
            assert_eq!(is_script(&p).unwrap(), script, "{name}");
        }
        assert!(is_script(&d.join("missing")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_store_that_cannot_be_written_is_told_before_anything_is_saved() {
        let d = scratch("writable");
        let store = Store::new(d.join("a/b"));
        store.check_writable().unwrap();
        // The directory is made, and the check leaves nothing in it.
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 0);
        // A file where the directory should be: neither made nor written, for root too.
        std::fs::write(d.join("file"), b"x").unwrap();
        let e = Store::new(d.join("file")).check_writable().unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
        assert!(Store::new(d.join("file/sub")).check_writable().is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn commands_resolve_through_path_like_a_shell() {
        let sh = resolve_command("sh").expect("sh is on the PATH");
        assert!(sh.is_absolute() && sh.ends_with("sh"));
        assert_eq!(resolve_command("./x"), Some(PathBuf::from("./x")));
        assert_eq!(resolve_command("no-such-program-hetsched"), None);
    }
}
