//! Text inputs (machine files, workload files, signature files): read with a bound on their size,
//! and their errors: which input, where in it, what is wrong.
//! An error displays as one line, as the command-line contract requires.

use thiserror::Error;

/// An input that cannot be used.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{source_name}: {location}{message}")]
pub struct InputError {
    /// A path, or `preset NAME`.
    pub source_name: String,
    /// `line N: ` or `field.path: ` (with the trailing separator), or empty.
    pub location: String,
    pub message: String,
}

impl InputError {
    /// An error in field `field` (a path such as `apps[0].threads[1].count`).
    pub fn at(source_name: &str, field: &str, message: impl Into<String>) -> Self {
        Self {
            source_name: source_name.into(),
            location: format!("{field}: "),
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error on one line: located by line, and by the key whose value is
    /// wrong when the error points into a `key = value` line.
    pub fn from_toml(source_name: &str, text: &str, e: &toml::de::Error) -> Self {
        let start = e.span().map(|s| s.start.min(text.len()));
        let location = match start {
            Some(at) => {
                let line = text[..at].matches('\n').count() + 1;
                let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
                // The key of `key = value` when the error is in the value.
                let key = text[line_start..at]
                    .split_once('=')
                    .map(|(k, _)| k.trim().trim_start_matches('{').trim())
                    .and_then(|k| k.rsplit([',', '{']).next())
                    .map(str::trim)
                    .filter(|k| !k.is_empty() && !k.contains(char::is_whitespace));
                match key {
                    Some(k) => format!("line {line}: {k}: "),
                    None => format!("line {line}: "),
                }
            }
            None => String::new(),
        };
        Self {
            source_name: source_name.into(),
            location,
            message: e
                .message()
                .lines()
                .next()
                .unwrap_or("malformed TOML")
                .to_string(),
        }
    }

    /// A file that cannot be read.
    pub fn unreadable(source_name: &str, e: &std::io::Error) -> Self {
        Self {
            source_name: source_name.into(),
            location: String::new(),
            message: format!("cannot read: {e}"),
        }
    }
}

/// The text of the file at `path`, refused (`InvalidData`) when it is longer than `max` bytes or
/// not UTF-8. Reads at most `max + 1` bytes whatever the file claims (a FIFO or /proc file has no
/// size).
pub fn read_bounded(path: &std::path::Path, max: u64) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let too_big = |n: u64| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {max} bytes ({n} bytes), refused"),
        )
    };
    if let Ok(m) = f.metadata() {
        if m.is_file() && m.len() > max {
            return Err(too_big(m.len()));
        }
    }
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(too_big(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}
