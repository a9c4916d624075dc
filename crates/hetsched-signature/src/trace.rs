//! What every trace reader produces: a stream of memory references, and errors that name where the
//! trace went wrong.

use std::fmt;

/// What a trace record is. The discriminants are the hsb codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// An instruction fetch (lackey `I`, din label 2).
    Instr = 0,
    /// A data load (lackey `L`, din 0).
    Load = 1,
    /// A data store (lackey `S`, din 1).
    Store = 2,
    /// A load and a store to the same address (lackey `M`).
    Modify = 3,
}

impl Kind {
    /// The 2-bit code of the hsb format.
    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Kind {
        match c & 3 {
            0 => Kind::Instr,
            1 => Kind::Load,
            2 => Kind::Store,
            _ => Kind::Modify,
        }
    }
}

/// The largest access a trace may give, bytes: every reader refuses a larger one, naming it, so
/// the work and memory of a reference stay bounded (1,024 lines of 64 bytes) whatever a trace
/// claims. Well above any one instruction's data access: the largest on x86-64, XSAVE of every
/// state component with AMX tile data, writes 11,008 bytes (Intel SDM vol. 1, ch. 13; CPUID leaf
/// 0xD); valgrind splits longer string operations into one access an element.
pub const MAX_ACCESS_BYTES: u32 = 1 << 16;

/// One memory reference of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ref {
    pub kind: Kind,
    pub addr: u64,
    /// Bytes accessed (1..=`MAX_ACCESS_BYTES` from any reader).
    pub size: u32,
}

/// The trace formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `valgrind --tool=lackey --trace-mem=yes`: `I  addr,size`, ` L addr,size`, ` S addr,size`,
    /// ` M addr,size`; valgrind's own `==pid==` and `--pid--` lines are skipped.
    Lackey,
    /// Dinero III/IV "din": `label address [size]`, label 0 read, 1 write, 2 instruction fetch,
    /// 3 escape, 4 cache flush (3 and 4 are skipped).
    Din,
    /// hetsched's compact binary trace (`docs/hsb-format.md`).
    Hsb,
}

impl Format {
    pub fn parse(name: &str) -> Option<Format> {
        match name {
            "lackey" => Some(Format::Lackey),
            "din" => Some(Format::Din),
            "hsb" => Some(Format::Hsb),
            _ => None,
        }
    }
}

/// A trace that cannot be read: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// "line 12" for text formats, "byte 4096" for hsb, or empty for the input as a whole.
    pub at: String,
    pub message: String,
}

impl TraceError {
    pub fn line(n: u64, message: impl Into<String>) -> Self {
        TraceError {
            at: format!("line {n}"),
            message: message.into(),
        }
    }
    pub fn byte(offset: u64, message: impl Into<String>) -> Self {
        TraceError {
            at: format!("byte {offset}"),
            message: message.into(),
        }
    }
    pub fn whole(message: impl Into<String>) -> Self {
        TraceError {
            at: String::new(),
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.at.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.at, self.message)
        }
    }
}

impl std::error::Error for TraceError {}

/// Value of an ASCII hex digit, or 0xff.
pub(crate) const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Parse a hex number (at most 16 digits) from the start of `s`: (value, digits used).
#[inline]
pub(crate) fn parse_hex(s: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    let mut i = 0;
    while i < s.len() {
        let d = HEX[s[i] as usize];
        if d == 0xff {
            break;
        }
        if i == 16 {
            return None;
        }
        v = (v << 4) | d as u64;
        i += 1;
    }
    (i > 0).then_some((v, i))
}

/// Parse a decimal number (at most 9 digits) from the start of `s`: (value, digits used).
#[inline]
pub(crate) fn parse_dec(s: &[u8]) -> Option<(u32, usize)> {
    let mut v: u32 = 0;
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        if i == 9 {
            return None;
        }
        v = v * 10 + (s[i] - b'0') as u32;
        i += 1;
    }
    (i > 0).then_some((v, i))
}
