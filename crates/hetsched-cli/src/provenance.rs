//! What produced a JSON document: the format's version, hetsched's version and commit, the command
//! line, and a hash of each input file, so a result can be traced and reproduced.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

/// The version of the JSON documents' shapes (docs/json.md); raised when a field changes meaning
/// or goes away.
pub const SCHEMA_VERSION: u32 = 2;

/// An input a document depends on.
#[derive(Clone, Debug, Serialize)]
pub struct Input {
    /// What the user named: a path, or a preset's name.
    pub name: String,
    /// SHA-256 of the file's bytes (hex); `None` for a preset, which the version identifies.
    pub sha256: Option<String>,
}

/// The provenance block of every JSON document.
#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    /// See [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// hetsched's version.
    pub hetsched_version: &'static str,
    /// The git commit the binary was built from, when built from a git checkout.
    pub git_commit: Option<&'static str>,
    /// The command line.
    pub command: Vec<String>,
    /// The input files and presets.
    pub inputs: Vec<Input>,
}

impl Provenance {
    /// The provenance of this process's output, depending on `inputs` (preset names or paths).
    pub fn new<'a>(inputs: impl IntoIterator<Item = &'a str>) -> Self {
        Self::with_inputs(inputs.into_iter().map(Input::named).collect())
    }

    /// The provenance of this process's output, its inputs already described (hashed as they
    /// were read, say).
    pub fn with_inputs(inputs: Vec<Input>) -> Self {
        let commit = env!("HETSCHED_GIT_COMMIT");
        Self {
            schema_version: SCHEMA_VERSION,
            hetsched_version: env!("CARGO_PKG_VERSION"),
            git_commit: (!commit.is_empty()).then_some(commit),
            command: std::env::args().collect(),
            inputs,
        }
    }
}

/// The provenance block of a document that has a `command` field of its own (`run --json`, where
/// `command` is the program run): the same fields, the command line under `hetsched_command`, so
/// flattening it beside the document's fields gives no key twice.
#[derive(Clone, Debug, Serialize)]
pub struct ProvenanceBesideCommand {
    pub schema_version: u32,
    pub hetsched_version: &'static str,
    pub git_commit: Option<&'static str>,
    /// hetsched's command line (the `command` of [`Provenance`]).
    pub hetsched_command: Vec<String>,
    pub inputs: Vec<Input>,
}

impl From<Provenance> for ProvenanceBesideCommand {
    fn from(p: Provenance) -> Self {
        Self {
            schema_version: p.schema_version,
            hetsched_version: p.hetsched_version,
            git_commit: p.git_commit,
            hetsched_command: p.command,
            inputs: p.inputs,
        }
    }
}

/// A byte stream and the hash of what has been read from it so far.
struct Hashed {
    inner: Box<dyn Read>,
    hasher: Sha256,
}

/// A reader that hashes every byte read through it, so an input too large to read twice (a trace;
/// stdin) is hashed in the one pass that uses it. [`InputHash::finish`] gives the hash.
pub struct HashingReader(Rc<RefCell<Hashed>>);

/// The hash of the bytes of a [`HashingReader`], once its user is done with it.
pub struct InputHash(Rc<RefCell<Hashed>>);

/// `inner`, hashed as it is read.
pub fn hashing_reader(inner: Box<dyn Read>) -> (HashingReader, InputHash) {
    let shared = Rc::new(RefCell::new(Hashed {
        inner,
        hasher: Sha256::new(),
    }));
    (HashingReader(Rc::clone(&shared)), InputHash(shared))
}

impl Read for HashingReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut h = self.0.borrow_mut();
        let n = h.inner.read(buf)?;
        h.hasher.update(&buf[..n]);
        Ok(n)
    }
}

impl InputHash {
    /// SHA-256 (hex) of every byte of the stream: what was read through the reader, and whatever
    /// its user left unread (bytes after the end of a compressed stream, say), read now.
    pub fn finish(self) -> std::io::Result<String> {
        let mut h = self.0.borrow_mut();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match h.inner.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            h.hasher.update(&buf[..n]);
        }
        Ok(hex(&std::mem::take(&mut h.hasher).finalize()))
    }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Input {
    /// An input by name: hashed when it names a readable file. TOML text given in place of a name
    /// (a machine or workload from the Python package) is named `inline` and hashed.
    pub fn named(name: &str) -> Input {
        if crate::machine::is_inline(name) {
            return Input::of_bytes("inline", name.as_bytes());
        }
        let path = Path::new(name);
        let sha256 = path
            .is_file()
            .then(|| std::fs::read(path).ok())
            .flatten()
            .map(|bytes| hex(&Sha256::digest(&bytes)));
        Input {
            name: name.to_string(),
            sha256,
        }
    }

    /// An input file by name, hashed from the bytes that were read from it (not read again, so
    /// the hash is of what was used even if the file has changed since).
    pub fn of_bytes(name: impl Into<String>, bytes: &[u8]) -> Input {
        Input {
            name: name.into(),
            sha256: Some(hex(&Sha256::digest(bytes))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_hashed_and_presets_named() {
        let dir = std::env::temp_dir().join(format!("hs-prov-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("w.toml");
        std::fs::write(&f, "abc").unwrap();
        let p = Provenance::new([f.to_str().unwrap(), "amps-smp"]);
        assert_eq!(p.schema_version, SCHEMA_VERSION);
        // SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(
            p.inputs[0].sha256.as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(p.inputs[1].sha256, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stream_is_hashed_whole_however_much_its_user_reads() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        // Read to the end.
        let (mut r, hash) = hashing_reader(Box::new(std::io::Cursor::new(b"abc".to_vec())));
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, b"abc");
        assert_eq!(hash.finish().unwrap(), abc);
        // Read in part, then dropped: the rest is read for the hash.
        let (mut r, hash) = hashing_reader(Box::new(std::io::Cursor::new(b"abc".to_vec())));
        let mut one = [0u8; 1];
        r.read_exact(&mut one).unwrap();
        drop(r);
        assert_eq!(hash.finish().unwrap(), abc);
    }
}
