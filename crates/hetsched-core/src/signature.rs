//! Architectural signatures (HASS section 3): a thread's expected last-level-cache misses per 4096
//! instructions for a grid of cache sizes (powers of two, 16 KB..16 MB) and associativities (4, 8,
//! 16, 32), estimated offline from its reuse-distance profile. A policy looks a thread's signature
//! up at a core class's LLC size and associativity to predict how fast the thread runs there.
//!
//! The file format (TOML or JSON, the same fields `hetsched signature --json` prints):
//!
//! ```toml
//! name = "179.art"                                  # optional
//! sizes_bytes = [16384, 32768, ...]                 # optional: default 16 KiB..16 MiB
//! assoc = [4, 8, 16, 32]                            # optional: default
//! misses_per_4096 = [[427, ...], [...], [...], [...]]   # one row per associativity
//! ```

use crate::input::InputError;
use serde::{Deserialize, Serialize};

/// Instructions a signature entry counts misses over (HASS section 3: "the number 4096 was selected
/// to speed up calculations at scheduling time").
pub const SIGNATURE_INSTRUCTIONS: f64 = 4096.0;

/// The cache sizes of a HASS signature: 11 powers of two from 16 KB to 16 MB (HASS section 3).
pub const SIGNATURE_SIZES: [u64; 11] = [
    16 << 10,
    32 << 10,
    64 << 10,
    128 << 10,
    256 << 10,
    512 << 10,
    1 << 20,
    2 << 20,
    4 << 20,
    8 << 20,
    16 << 20,
];

/// The associativities of a HASS signature (HASS section 3).
pub const SIGNATURE_ASSOC: [u32; 4] = [4, 8, 16, 32];

/// A signature matrix: `misses[a][s]` misses per 4096 instructions with associativity `assoc[a]`
/// and size `sizes_bytes[s]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default = "default_sizes")]
    pub sizes_bytes: Vec<u64>,
    #[serde(default = "default_assoc")]
    pub assoc: Vec<u32>,
    #[serde(rename = "misses_per_4096")]
    pub misses: Vec<Vec<f64>>,
}

fn default_sizes() -> Vec<u64> {
    SIGNATURE_SIZES.to_vec()
}

fn default_assoc() -> Vec<u32> {
    SIGNATURE_ASSOC.to_vec()
}

impl Signature {
    /// A signature on the standard grid whose every associativity row is `row` (misses per 4096
    /// instructions at 16 KiB, 32 KiB, ...; a short row repeats its last value).
    pub fn from_row(name: &str, row: &[f64]) -> Signature {
        let full: Vec<f64> = (0..SIGNATURE_SIZES.len())
            .map(|i| row.get(i).or(row.last()).copied().unwrap_or(0.0))
            .collect();
        Signature {
            name: name.to_string(),
            sizes_bytes: default_sizes(),
            assoc: default_assoc(),
            misses: vec![full; SIGNATURE_ASSOC.len()],
        }
    }

    /// Parse a signature file: JSON when it starts with `{`, TOML otherwise. The error names the
    /// source and the field. A JSON document hetsched printed (one carrying the provenance field
    /// `schema_version`: `signature --json` output, or a signature store entry) gives its
    /// signature fields and its other fields are passed over; any other file has the signature's
    /// fields alone.
    pub fn parse(text: &str, source_name: &str) -> Result<Signature, InputError> {
        let sig: Signature = if text.trim_start().starts_with('{') {
            let json_error = |e: serde_json::Error| InputError {
                source_name: source_name.into(),
                location: if e.line() > 0 {
                    format!("line {}: ", e.line())
                } else {
                    String::new()
                },
                message: e.to_string(),
            };
            let mut value: serde_json::Value = serde_json::from_str(text).map_err(json_error)?;
            if let Some(map) = value.as_object_mut() {
                if map.contains_key("schema_version") {
                    map.retain(|k, _| SIGNATURE_FIELDS.contains(&k.as_str()));
                }
            }
            serde_json::from_value(value).map_err(json_error)?
        } else {
            toml::from_str(text).map_err(|e| InputError::from_toml(source_name, text, &e))?
        };
        sig.validate()
            .map_err(|(field, msg)| InputError::at(source_name, field, msg))?;
        Ok(sig)
    }

    /// Read a signature file of at most [`MAX_SIGNATURE_FILE_BYTES`]; a larger one is refused
    /// unread.
    pub fn load(path: &std::path::Path) -> Result<Signature, InputError> {
        let name = path.display().to_string();
        let text = crate::input::read_bounded(path, MAX_SIGNATURE_FILE_BYTES)
            .map_err(|e| InputError::unreadable(&name, &e))?;
        Signature::parse(&text, &name)
    }

    /// Check the grid: sizes and associativities strictly increasing and positive, one row per
    /// associativity, one finite non-negative value per size.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.sizes_bytes.is_empty() || !strictly_increasing(&self.sizes_bytes) {
            return Err((
                "sizes_bytes",
                "must be a non-empty list of increasing sizes".into(),
            ));
        }
        if self.sizes_bytes[0] == 0 {
            return Err(("sizes_bytes", "sizes must be positive".into()));
        }
        let assoc: Vec<u64> = self.assoc.iter().map(|&a| a as u64).collect();
        if assoc.is_empty() || !strictly_increasing(&assoc) || assoc[0] == 0 {
            return Err((
                "assoc",
                "must be a non-empty list of increasing positive associativities".into(),
            ));
        }
        if self.misses.len() != self.assoc.len() {
            return Err((
                "misses_per_4096",
                format!(
                    "needs one row per associativity ({}), got {}",
                    self.assoc.len(),
                    self.misses.len()
                ),
            ));
        }
        for (i, row) in self.misses.iter().enumerate() {
            if row.len() != self.sizes_bytes.len() {
                return Err((
                    "misses_per_4096",
                    format!(
                        "row {i} has {} values, need one per size ({})",
                        row.len(),
                        self.sizes_bytes.len()
                    ),
                ));
            }
            if let Some(v) = row.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                return Err((
                    "misses_per_4096",
                    format!("row {i}: {v} is not a non-negative number"),
                ));
            }
        }
        Ok(())
    }

    /// Expected misses per 4096 instructions with an LLC of `size_bytes` and associativity `assoc`:
    /// the matrix entry, interpolated linearly in log2(size) and log2(associativity) between grid
    /// points and clamped to the grid's edges (HASS section 3: "looked up at the class's LLC size
    /// and associativity"). A fully associative cache (`assoc` 0) reads as the largest.
    pub fn misses_at(&self, size_bytes: u64, assoc: u32) -> f64 {
        let a = if assoc == 0 { u32::MAX } else { assoc };
        let (a0, a1, fa) = bracket(&self.assoc, a as f64, |&g| g as f64);
        let (s0, s1, fs) = bracket(&self.sizes_bytes, size_bytes as f64, |&g| g as f64);
        let row = |r: usize| {
            let v = &self.misses[r];
            v[s0] + (v[s1] - v[s0]) * fs
        };
        row(a0) + (row(a1) - row(a0)) * fa
    }
}

/// The fields of a signature in a file (and in `signature --json`).
const SIGNATURE_FIELDS: [&str; 4] = ["name", "sizes_bytes", "assoc", "misses_per_4096"];

/// Largest signature file read, bytes: a whole-run signature is about 2 kB of JSON, and 4 MiB
/// holds a `signature --json` document with a few thousand windows. Larger is not a signature
/// file, and is refused before it is read.
pub const MAX_SIGNATURE_FILE_BYTES: u64 = 4 << 20;

fn strictly_increasing(v: &[u64]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

/// The grid indices around `x` and the fraction of the way (in log2) from the first to the second.
fn bracket<T>(grid: &[T], x: f64, value: impl Fn(&T) -> f64) -> (usize, usize, f64) {
    let last = grid.len() - 1;
    if x <= value(&grid[0]) {
        return (0, 0, 0.0);
    }
    if x >= value(&grid[last]) {
        return (last, last, 0.0);
    }
    let hi = grid.iter().position(|g| value(g) >= x).unwrap_or(last);
    let lo = hi - 1;
    let (l, h) = (value(&grid[lo]).log2(), value(&grid[hi]).log2());
    (lo, hi, (x.log2() - l) / (h - l))
}

/// The 179.art signature printed in HASS section 3 (columns 16 KB..128 KB equal the 256 KB value,
/// 427, as the paper says), as a signature file.
pub const ART_179_TOML: &str = include_str!("../fixtures/signatures/179-art.toml");

#[cfg(test)]
mod tests {
    use super::*;

    fn art() -> Signature {
        Signature::parse(ART_179_TOML, "179-art.toml").unwrap()
    }

    #[test]
    fn the_papers_art_signature_reads_back_at_its_grid_points() {
        let s = art();
        assert_eq!(s.name, "179.art");
        assert_eq!(s.misses_at(16 << 10, 4), 427.0);
        assert_eq!(s.misses_at(256 << 10, 8), 427.0);
        assert_eq!(s.misses_at(2 << 20, 4), 157.0);
        assert_eq!(s.misses_at(2 << 20, 32), 86.0);
        assert_eq!(s.misses_at(4 << 20, 16), 11.0);
        assert_eq!(s.misses_at(16 << 20, 32), 0.0);
    }

    #[test]
    fn lookups_between_grid_points_interpolate_in_log_size_and_log_assoc() {
        let s = art();
        // 3 MB is 0.585 of the way from 2 MB to 4 MB in log2: 157 + (42 - 157) * 0.585.
        let want = 157.0 + (42.0 - 157.0) * (3.0f64.log2() - 1.0);
        assert!((s.misses_at(3 << 20, 4) - want).abs() < 1e-9);
        // Associativity 12 between 8 (131) and 16 (107) at 2 MB.
        let f = (12.0f64.log2() - 3.0) / 1.0;
        assert!((s.misses_at(2 << 20, 12) - (131.0 + (107.0 - 131.0) * f)).abs() < 1e-9);
        // Outside the grid: clamped.
        assert_eq!(s.misses_at(1 << 10, 2), 427.0);
        assert_eq!(s.misses_at(64 << 20, 64), 0.0);
        assert_eq!(
            s.misses_at(2 << 20, 0),
            86.0,
            "fully associative reads the last row"
        );
    }

    #[test]
    fn json_and_toml_read_the_same() {
        let s = art();
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"misses_per_4096\""));
        assert_eq!(Signature::parse(&json, "art.json").unwrap(), s);
    }

    #[test]
    fn malformed_signatures_name_the_field() {
        let cases = [
            (
                "misses_per_4096 = [[1, 2]]",
                "s.toml: misses_per_4096: needs one row per associativity (4), got 1",
            ),
            (
                "assoc = [8, 4]\nmisses_per_4096 = [[1], [1]]\nsizes_bytes = [1]",
                "s.toml: assoc: must be a non-empty list of increasing positive associativities",
            ),
            (
                "sizes_bytes = [1024, 2048]\nassoc = [4]\nmisses_per_4096 = [[1, -2]]",
                "s.toml: misses_per_4096: row 0: -2 is not a non-negative number",
            ),
            (
                "sizes_bytes = [1024, 2048]\nassoc = [4]\nmisses_per_4096 = [[1]]",
                "s.toml: misses_per_4096: row 0 has 1 values, need one per size (2)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(
                Signature::parse(text, "s.toml").unwrap_err().to_string(),
                want
            );
        }
        assert!(Signature::parse("misses = 3", "s.toml")
            .unwrap_err()
            .to_string()
            .starts_with("s.toml: line 1: unknown field `misses`"));
    }

    #[test]
    fn a_hetsched_document_gives_its_signature_and_plain_files_stay_strict() {
        let doc = r#"{"schema_version": 2, "hetsched_version": "0.1.0", "name": "x",
            "instructions": 10, "engine": {"wall_s": 1.0},
            "executable": {"path": "/bin/x", "sha256": "ab"},
            "sizes_bytes": [1024, 2048], "assoc": [4], "misses_per_4096": [[3, 1]]}"#;
        let s = Signature::parse(doc, "d.json").unwrap();
        assert_eq!(s.name, "x");
        assert_eq!(s.misses, vec![vec![3.0, 1.0]]);
        // Without provenance, an unknown field is a mistake.
        let plain = r#"{"instructions": 10, "misses_per_4096": [[1], [1], [1], [1]]}"#;
        let e = Signature::parse(plain, "p.json").unwrap_err().to_string();
        assert!(e.starts_with("p.json: unknown field `instructions`"), "{e}");
        // A document's signature is checked like any other.
        let bad = r#"{"schema_version": 2, "misses_per_4096": [[1]]}"#;
        assert_eq!(
            Signature::parse(bad, "b.json").unwrap_err().to_string(),
            "b.json: misses_per_4096: needs one row per associativity (4), got 1"
        );
    }

    #[test]
    fn an_oversized_or_malformed_file_is_one_line_of_error() {
        let dir = std::env::temp_dir().join(format!("hs-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("big.json");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_SIGNATURE_FILE_BYTES + 1).unwrap();
        let e = Signature::load(&big).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: cannot read: larger than 4194304 bytes (4194305 bytes), refused",
                big.display()
            )
        );
        let bad = dir.join("bad.json");
        std::fs::write(&bad, "{\"misses_per_4096\": [[1, 2\n").unwrap();
        let e = Signature::load(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: line 2: ", bad.display())),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn from_row_fills_every_associativity() {
        let s = Signature::from_row("x", &[10.0, 5.0]);
        assert!(s.validate().is_ok());
        assert_eq!(s.misses_at(16 << 10, 4), 10.0);
        assert_eq!(s.misses_at(16 << 20, 32), 5.0);
    }
}
