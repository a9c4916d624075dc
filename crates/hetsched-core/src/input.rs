//! Errors for text inputs (machine files, workload files): which input, where in it, what is wrong.
//! Displays as one line, as the command-line contract requires.

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
    pub fn at(source_name: &str, field: &str, message: impl Into<String>) -> Self {
        Self {
            source_name: source_name.into(),
            location: format!("{field}: "),
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error, located by line.
    pub fn from_toml(source_name: &str, text: &str, e: &toml::de::Error) -> Self {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        Self {
            source_name: source_name.into(),
            location: line.map(|l| format!("line {l}: ")).unwrap_or_default(),
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
