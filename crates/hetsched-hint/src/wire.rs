//! The hint wire format, version 1: one message a datagram, little-endian.
//!
//! ```text
//! offset size  field
//!      0    4  magic  b"HSHT"
//!      4    1  version (1)
//!      5    1  kind: 1 data fragment, 2 signature
//!      6    2  reserved, 0
//!      8    4  tid: the thread the hint is about (a thread of the sending process)
//! kind 1 (data fragment), 32 bytes in all:
//!     12    1  flags: bit 0 current DF present, bit 1 next DF present; other bits 0
//!     13    3  reserved, 0
//!     16    8  current DF
//!     24    8  next DF
//! kind 2 (signature, HASS section 3), 16 + 8 s + 4 a + 4 s a bytes:
//!     12    1  s: number of cache sizes (1..=16)
//!     13    1  a: number of associativities (1..=8)
//!     14    2  reserved, 0
//!     16  8 s  cache sizes, bytes, increasing
//!      .  4 a  associativities, increasing
//!      . 4 sa  misses per 4096 instructions, f32, row by associativity
//! ```
//!
//! A receiver rejects anything else: wrong magic or version, unknown kind, nonzero reserved bits,
//! a length that does not match, counts out of range, non-increasing grids, negative or
//! non-finite misses. The largest message (16 sizes, 8 associativities) is [`MAX_MESSAGE_BYTES`].

/// The message magic.
pub const MAGIC: [u8; 4] = *b"HSHT";
/// The format version this crate writes and reads.
pub const VERSION: u8 = 1;
/// Most cache sizes a signature may carry.
pub const MAX_SIZES: usize = 16;
/// Most associativities a signature may carry.
pub const MAX_ASSOC: usize = 8;
/// Length of a data-fragment message.
pub const DF_MESSAGE_BYTES: usize = 32;
/// The longest message: a signature of 16 sizes and 8 associativities.
pub const MAX_MESSAGE_BYTES: usize = 16 + 8 * MAX_SIZES + 4 * MAX_ASSOC + 4 * MAX_SIZES * MAX_ASSOC;

const KIND_DF: u8 = 1;
const KIND_SIGNATURE: u8 = 2;

/// A decoded hint.
#[derive(Clone, Debug, PartialEq)]
pub enum WireHint {
    /// The thread leaves `current` (if any) and works on `next` (if any) from now on.
    DataFragment {
        /// The sending thread's kernel thread id.
        tid: u32,
        /// The fragment it stops working on.
        current: Option<u64>,
        /// The fragment it works on from now on.
        next: Option<u64>,
    },
    /// The thread's architectural signature.
    Signature {
        /// The thread the signature describes (kernel thread id).
        tid: u32,
        /// The cache sizes of the grid, bytes, increasing.
        sizes_bytes: Vec<u64>,
        /// The associativities of the grid (ways), increasing.
        assoc: Vec<u32>,
        /// One row per associativity, one value per size.
        misses_per_4096: Vec<Vec<f32>>,
    },
}

/// Why bytes are not a hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes (the count) than a header.
    TooShort(usize),
    /// The first bytes are not the format's magic: not a hetsched hint.
    BadMagic,
    /// A version (the byte) this build does not read.
    UnsupportedVersion(u8),
    /// A hint kind (the byte) this version does not define.
    UnknownKind(u8),
    /// A reserved header field is not zero.
    ReservedNotZero,
    /// The datagram's length disagrees with what its header announces.
    WrongLength {
        /// Bytes the header announces.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// A signature grid with no sizes or associativities, or more than the format allows.
    CountOutOfRange {
        /// Cache sizes announced.
        sizes: usize,
        /// Associativities announced.
        assoc: usize,
    },
    /// The grid's sizes or associativities do not increase strictly.
    GridNotIncreasing,
    /// A miss value is negative or not finite.
    BadMisses,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::TooShort(n) => write!(f, "hint of {n} bytes is shorter than a header"),
            WireError::BadMagic => write!(f, "not a hetsched hint (bad magic)"),
            WireError::UnsupportedVersion(v) => {
                write!(f, "hint format version {v} (this build reads {VERSION})")
            }
            WireError::UnknownKind(k) => write!(f, "unknown hint kind {k}"),
            WireError::ReservedNotZero => write!(f, "reserved bits set"),
            WireError::WrongLength { expected, got } => {
                write!(f, "hint of {got} bytes, expected {expected}")
            }
            WireError::CountOutOfRange { sizes, assoc } => write!(
                f,
                "signature of {sizes} sizes x {assoc} associativities (limits 1..={MAX_SIZES} x 1..={MAX_ASSOC})"
            ),
            WireError::GridNotIncreasing => write!(f, "signature grid not increasing"),
            WireError::BadMisses => write!(f, "signature misses negative or not finite"),
        }
    }
}

impl std::error::Error for WireError {}

fn header(kind: u8, tid: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&tid.to_le_bytes());
}

impl WireHint {
    /// The message bytes. Fails only for a signature outside the limits.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(DF_MESSAGE_BYTES);
        match self {
            WireHint::DataFragment { tid, current, next } => {
                header(KIND_DF, *tid, &mut out);
                let flags = u8::from(current.is_some()) | (u8::from(next.is_some()) << 1);
                out.extend_from_slice(&[flags, 0, 0, 0]);
                out.extend_from_slice(&current.unwrap_or(0).to_le_bytes());
                out.extend_from_slice(&next.unwrap_or(0).to_le_bytes());
            }
            WireHint::Signature {
                tid,
                sizes_bytes,
                assoc,
                misses_per_4096,
            } => {
                check_signature(sizes_bytes, assoc, misses_per_4096)?;
                header(KIND_SIGNATURE, *tid, &mut out);
                out.extend_from_slice(&[sizes_bytes.len() as u8, assoc.len() as u8, 0, 0]);
                for s in sizes_bytes {
                    out.extend_from_slice(&s.to_le_bytes());
                }
                for a in assoc {
                    out.extend_from_slice(&a.to_le_bytes());
                }
                for row in misses_per_4096 {
                    for m in row {
                        out.extend_from_slice(&m.to_le_bytes());
                    }
                }
            }
        }
        Ok(out)
    }

    /// Read one message; anything but a well-formed version-1 hint is an error.
    pub fn decode(b: &[u8]) -> Result<WireHint, WireError> {
        if b.len() < 16 {
            return Err(WireError::TooShort(b.len()));
        }
        if b[0..4] != MAGIC {
            return Err(WireError::BadMagic);
        }
        if b[4] != VERSION {
            return Err(WireError::UnsupportedVersion(b[4]));
        }
        if b[6] != 0 || b[7] != 0 {
            return Err(WireError::ReservedNotZero);
        }
        let tid = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        match b[5] {
            KIND_DF => {
                if b.len() != DF_MESSAGE_BYTES {
                    return Err(WireError::WrongLength {
                        expected: DF_MESSAGE_BYTES,
                        got: b.len(),
                    });
                }
                let flags = b[12];
                if flags & !3 != 0 || b[13..16] != [0, 0, 0] {
                    return Err(WireError::ReservedNotZero);
                }
                Ok(WireHint::DataFragment {
                    tid,
                    current: (flags & 1 != 0).then(|| u64_at(16)),
                    next: (flags & 2 != 0).then(|| u64_at(24)),
                })
            }
            KIND_SIGNATURE => {
                let (s, a) = (b[12] as usize, b[13] as usize);
                if !(1..=MAX_SIZES).contains(&s) || !(1..=MAX_ASSOC).contains(&a) {
                    return Err(WireError::CountOutOfRange { sizes: s, assoc: a });
                }
                if b[14] != 0 || b[15] != 0 {
                    return Err(WireError::ReservedNotZero);
                }
                let expected = 16 + 8 * s + 4 * a + 4 * s * a;
                if b.len() != expected {
                    return Err(WireError::WrongLength {
                        expected,
                        got: b.len(),
                    });
                }
                let sizes_bytes: Vec<u64> = (0..s).map(|i| u64_at(16 + 8 * i)).collect();
                let base = 16 + 8 * s;
                let assoc: Vec<u32> = (0..a).map(|i| u32_at(base + 4 * i)).collect();
                let base = base + 4 * a;
                let misses_per_4096: Vec<Vec<f32>> = (0..a)
                    .map(|r| {
                        (0..s)
                            .map(|c| {
                                f32::from_le_bytes(u32_at(base + 4 * (r * s + c)).to_le_bytes())
                            })
                            .collect()
                    })
                    .collect();
                check_signature(&sizes_bytes, &assoc, &misses_per_4096)?;
                Ok(WireHint::Signature {
                    tid,
                    sizes_bytes,
                    assoc,
                    misses_per_4096,
                })
            }
            k => Err(WireError::UnknownKind(k)),
        }
    }
}

fn check_signature(sizes: &[u64], assoc: &[u32], misses: &[Vec<f32>]) -> Result<(), WireError> {
    let (s, a) = (sizes.len(), assoc.len());
    if !(1..=MAX_SIZES).contains(&s) || !(1..=MAX_ASSOC).contains(&a) {
        return Err(WireError::CountOutOfRange { sizes: s, assoc: a });
    }
    if sizes[0] == 0
        || assoc[0] == 0
        || sizes.windows(2).any(|w| w[0] >= w[1])
        || assoc.windows(2).any(|w| w[0] >= w[1])
    {
        return Err(WireError::GridNotIncreasing);
    }
    if misses.len() != a || misses.iter().any(|r| r.len() != s) {
        return Err(WireError::CountOutOfRange { sizes: s, assoc: a });
    }
    if misses
        .iter()
        .flatten()
        .any(|m| !(m.is_finite() && *m >= 0.0))
    {
        return Err(WireError::BadMisses);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(s: usize, a: usize) -> WireHint {
        WireHint::Signature {
            tid: 42,
            sizes_bytes: (0..s).map(|i| 16384u64 << i).collect(),
            assoc: (0..a).map(|i| 4u32 << i).collect(),
            misses_per_4096: (0..a)
                .map(|r| (0..s).map(|c| (r * 100 + c) as f32).collect())
                .collect(),
        }
    }

    #[test]
    fn data_fragment_round_trips_in_32_bytes() {
        for (current, next) in [
            (None, Some(7)),
            (Some(7), Some(u64::MAX)),
            (Some(3), None),
            (None, None),
        ] {
            let h = WireHint::DataFragment {
                tid: 1234,
                current,
                next,
            };
            let b = h.encode().unwrap();
            assert_eq!(b.len(), DF_MESSAGE_BYTES);
            assert_eq!(&b[..4], b"HSHT");
            assert_eq!(WireHint::decode(&b).unwrap(), h);
        }
    }

    #[test]
    fn encoding_limits() {
        // The largest signature fits MAX_MESSAGE_BYTES exactly; one more size or way is refused.
        let big = sig(MAX_SIZES, MAX_ASSOC).encode().unwrap();
        assert_eq!(big.len(), MAX_MESSAGE_BYTES);
        assert_eq!(MAX_MESSAGE_BYTES, 688);
        assert_eq!(WireHint::decode(&big).unwrap(), sig(MAX_SIZES, MAX_ASSOC));
        assert_eq!(
            sig(MAX_SIZES + 1, 4).encode(),
            Err(WireError::CountOutOfRange {
                sizes: 17,
                assoc: 4
            })
        );
        assert_eq!(
            sig(11, MAX_ASSOC + 1).encode(),
            Err(WireError::CountOutOfRange {
                sizes: 11,
                assoc: 9
            })
        );
        // The HASS grid: 11 sizes x 4 associativities.
        assert_eq!(sig(11, 4).encode().unwrap().len(), 16 + 88 + 16 + 176);
    }

    #[test]
    fn malformed_messages_are_refused() {
        let good = WireHint::DataFragment {
            tid: 1,
            current: None,
            next: Some(2),
        }
        .encode()
        .unwrap();
        let with = |i: usize, v: u8| {
            let mut b = good.clone();
            b[i] = v;
            WireHint::decode(&b)
        };
        assert_eq!(WireHint::decode(&good[..10]), Err(WireError::TooShort(10)));
        assert_eq!(with(0, b'X'), Err(WireError::BadMagic));
        assert_eq!(with(4, 2), Err(WireError::UnsupportedVersion(2)));
        assert_eq!(with(5, 9), Err(WireError::UnknownKind(9)));
        assert_eq!(with(6, 1), Err(WireError::ReservedNotZero));
        assert_eq!(with(12, 4), Err(WireError::ReservedNotZero));
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            WireHint::decode(&long),
            Err(WireError::WrongLength {
                expected: 32,
                got: 33
            })
        );
        let mut s = sig(2, 2);
        if let WireHint::Signature {
            misses_per_4096, ..
        } = &mut s
        {
            misses_per_4096[0][0] = f32::NAN;
        }
        assert_eq!(s.encode(), Err(WireError::BadMisses));
        let mut b = sig(2, 2).encode().unwrap();
        b[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes()); // first size above the second
        assert_eq!(WireHint::decode(&b), Err(WireError::GridNotIncreasing));
    }
}
