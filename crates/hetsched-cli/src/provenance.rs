//! What produced a JSON document: the format's version, hetsched's version and commit, the command
//! line, and a hash of each input file, so a result can be traced and reproduced.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::Path;

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
        let commit = env!("HETSCHED_GIT_COMMIT");
        Self {
            schema_version: SCHEMA_VERSION,
            hetsched_version: env!("CARGO_PKG_VERSION"),
            git_commit: (!commit.is_empty()).then_some(commit),
            command: std::env::args().collect(),
            inputs: inputs.into_iter().map(input).collect(),
        }
    }
}

/// An input by name: hashed when it names a readable file.
fn input(name: &str) -> Input {
    let path = Path::new(name);
    let sha256 = path
        .is_file()
        .then(|| std::fs::read(path).ok())
        .flatten()
        .map(|bytes| {
            Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        });
    Input {
        name: name.to_string(),
        sha256,
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
}
