//! hsb: hetsched's compact binary memory trace, version 1 (`docs/hsb-format.md`).
//!
//! ```text
//! header  8 bytes: "HSB" 0x01, then 4 bytes of flags (little-endian u32, 0 in version 1)
//! block   n: u32 LE, records in the block (1..=65536)
//!         payload: u32 LE, bytes of the block's payload
//!         n tag bytes, one a record:
//!             bits 0-1  kind: 0 instruction fetch, 1 load, 2 store, 3 modify
//!             bits 2-4  bytes of the address delta, minus 1 (1..=8)
//!             bits 5-7  size: 1 → 1, 2 → 2, 3 → 4, 4 → 8, 5 → 16, 6 → 32 bytes;
//!                       0 → one size byte (1..=255) in the payload; 7 → a u32 LE size
//!         payload, record after record: [size byte or u32], then the address delta:
//!             zigzag(address − previous address of the record's stream), little-endian, in as
//!             many bytes as the tag says; two streams, instruction fetches and data, each
//!             starting at 0
//! ```
//!
//! Tags come before the payload so that a reader knows every record's length without decoding
//! the one before it: the records of a block decode independently of each other's bytes, which is
//! what lets a reader run at a few cycles a reference. A sequential data stream (8-byte loads one
//! after another) takes 2 bytes a reference; a lackey line takes about 15.

use crate::readers::ReadStats;
use crate::trace::{Kind, Ref, TraceError};
use std::io::{Read, Write};

pub const MAGIC: [u8; 4] = *b"HSB\x01";
pub const HEADER_BYTES: usize = 8;
/// Records a block holds at most.
pub const MAX_BLOCK_RECORDS: usize = 1 << 16;
/// Largest payload of a record: a 4-byte size and an 8-byte delta.
const MAX_RECORD_PAYLOAD: usize = 12;
const BLOCK_HEADER: usize = 8;
/// Records the writer puts in a block.
const WRITER_BLOCK: usize = 4096;

const SIZE_CODES: [u32; 8] = [0, 1, 2, 4, 8, 16, 32, 0];
/// The low `n` bytes of a word, for `n` in 1..=8.
const BYTE_MASKS: [u64; 9] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    0xff_ffff_ffff_ffff,
    u64::MAX,
];

#[inline]
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The tag's size code for a size.
fn size_code(size: u32) -> u8 {
    match size {
        1 => 1,
        2 => 2,
        4 => 3,
        8 => 4,
        16 => 5,
        32 => 6,
        _ if size <= 255 => 0,
        _ => 7,
    }
}

/// Writes hsb blocks.
pub struct HsbWriter<W: Write> {
    out: W,
    tags: Vec<u8>,
    payload: Vec<u8>,
    prev: [u64; 2],
}

impl<W: Write> HsbWriter<W> {
    pub fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(&MAGIC)?;
        out.write_all(&0u32.to_le_bytes())?;
        Ok(HsbWriter {
            out,
            tags: Vec::with_capacity(WRITER_BLOCK),
            payload: Vec::with_capacity(WRITER_BLOCK * 4),
            prev: [0; 2],
        })
    }

    pub fn push(&mut self, r: Ref) -> std::io::Result<()> {
        let size = r.size.max(1);
        let code = size_code(size);
        match code {
            0 => self.payload.push(size as u8),
            7 => self.payload.extend_from_slice(&size.to_le_bytes()),
            _ => {}
        }
        let stream = (r.kind != Kind::Instr) as usize;
        let delta = zigzag(r.addr.wrapping_sub(self.prev[stream]) as i64);
        self.prev[stream] = r.addr;
        let len = (8 - delta.leading_zeros() as usize / 8).max(1);
        self.payload.extend_from_slice(&delta.to_le_bytes()[..len]);
        self.tags
            .push(r.kind.code() | (((len - 1) as u8) << 2) | (code << 5));
        if self.tags.len() == WRITER_BLOCK {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> std::io::Result<()> {
        if self.tags.is_empty() {
            return Ok(());
        }
        self.out
            .write_all(&(self.tags.len() as u32).to_le_bytes())?;
        self.out
            .write_all(&(self.payload.len() as u32).to_le_bytes())?;
        self.out.write_all(&self.tags)?;
        self.out.write_all(&self.payload)?;
        self.tags.clear();
        self.payload.clear();
        Ok(())
    }

    /// Flush and hand back the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.flush_block()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Fill `buf` from `input` as far as it goes; bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> Result<usize, TraceError> {
    crate::readers::read_some(input, buf)
        .map_err(|e| TraceError::whole(format!("cannot read the trace: {e}")))
}

/// Read an hsb trace, header included.
pub fn read(mut input: impl Read, sink: &mut impl FnMut(&[Ref])) -> Result<ReadStats, TraceError> {
    let mut stats = ReadStats::default();
    let mut header = [0u8; HEADER_BYTES];
    let got = read_full(&mut input, &mut header)?;
    stats.bytes = got as u64;
    if got == 0 {
        return Ok(stats);
    }
    if got < HEADER_BYTES || header[..3] != MAGIC[..3] {
        return Err(TraceError::byte(0, "not an hsb trace (no \"HSB\" header)"));
    }
    if header[3] != MAGIC[3] {
        return Err(TraceError::byte(
            3,
            format!("hsb version {} (this reader knows version 1)", header[3]),
        ));
    }
    let mut offset = HEADER_BYTES as u64;
    let mut prev = [0u64; 2];
    // One block: its tags, then its payload with 8 bytes of slack for word reads.
    let mut block: Vec<u8> = Vec::new();
    let mut refs: Vec<Ref> = Vec::new();
    loop {
        let mut bh = [0u8; BLOCK_HEADER];
        let got = read_full(&mut input, &mut bh)?;
        stats.bytes += got as u64;
        if got == 0 {
            return Ok(stats);
        }
        if got < BLOCK_HEADER {
            return Err(TraceError::byte(offset, "a truncated block header"));
        }
        let n = u32::from_le_bytes(bh[..4].try_into().unwrap_or([0; 4])) as usize;
        let payload = u32::from_le_bytes(bh[4..].try_into().unwrap_or([0; 4])) as usize;
        if n == 0 || n > MAX_BLOCK_RECORDS {
            return Err(TraceError::byte(
                offset,
                format!("a block of {n} records (1..={MAX_BLOCK_RECORDS})"),
            ));
        }
        if payload < n || payload > n * MAX_RECORD_PAYLOAD {
            return Err(TraceError::byte(
                offset,
                format!("a block of {n} records with {payload} payload bytes"),
            ));
        }
        let body = n + payload;
        if block.len() < body + 8 {
            block.resize(body + 8, 0);
        }
        block[body..body + 8].fill(0);
        let got = read_full(&mut input, &mut block[..body])?;
        stats.bytes += got as u64;
        if got < body {
            return Err(TraceError::byte(
                offset,
                format!("a truncated block: {got} of {body} bytes"),
            ));
        }
        let payload_start = offset + (BLOCK_HEADER + n) as u64;
        decode_block(&block[..body + 8], n, payload, &mut prev, &mut refs)
            .map_err(|(at, msg)| TraceError::byte(payload_start + at as u64, msg))?;
        sink(&refs);
        stats.refs += n as u64;
        offset += (BLOCK_HEADER + body) as u64;
    }
}

/// Decode one block (`n` tags, then `payload` bytes, then at least 8 bytes of slack); on error,
/// (payload offset, message).
#[inline]
fn decode_block(
    block: &[u8],
    n: usize,
    payload: usize,
    prev: &mut [u64; 2],
    out: &mut Vec<Ref>,
) -> Result<(), (usize, String)> {
    // The word reads below rely on it (an invariant of `read`, not a property of the input).
    assert!(
        block.len() >= n + payload + 8,
        "an hsb block without its slack"
    );
    let (tags, data) = block.split_at(n);
    let mut off = 0usize;
    // The previous addresses in registers (through memory they make a store-to-load chain from
    // one record to the next).
    let (mut prev_instr, mut prev_data) = (prev[0], prev[1]);
    out.clear();
    out.resize(
        n,
        Ref {
            kind: Kind::Instr,
            addr: 0,
            size: 1,
        },
    );
    for (&tag, slot) in tags.iter().zip(out.iter_mut()) {
        let kind = tag & 3;
        let len = (((tag >> 2) & 7) + 1) as usize;
        let code = (tag >> 5) as usize;
        let size = match code {
            0 => {
                let s = *data
                    .get(off)
                    .ok_or_else(|| (off, "a truncated record".to_string()))?
                    as u32;
                off += 1;
                if s == 0 {
                    return Err((off - 1, "a record of size 0".into()));
                }
                s
            }
            7 => {
                let bytes = data
                    .get(off..off + 4)
                    .ok_or_else(|| (off, "a truncated record".to_string()))?;
                off += 4;
                let s = u32::from_le_bytes(bytes.try_into().unwrap_or([0; 4]));
                if s == 0 {
                    return Err((off - 4, "a record of size 0".into()));
                }
                s
            }
            c => SIZE_CODES[c],
        };
        if off + len > payload {
            return Err((off, "a record past the end of its block".into()));
        }
        // SAFETY: off + len <= payload (checked above) and `data` holds payload + 8 bytes (the
        // caller's slack), so the 8 bytes at `off` are inside `data`; read_unaligned has no
        // alignment requirement.
        let word = unsafe { std::ptr::read_unaligned(data.as_ptr().add(off) as *const u64) };
        let delta = u64::from_le(word) & BYTE_MASKS[len];
        off += len;
        let is_data = kind != 0;
        let base = if is_data { prev_data } else { prev_instr };
        let addr = base.wrapping_add(unzigzag(delta) as u64);
        if is_data {
            prev_data = addr;
        } else {
            prev_instr = addr;
        }
        *slot = Ref {
            kind: Kind::from_code(kind),
            addr,
            size,
        };
    }
    *prev = [prev_instr, prev_data];
    if off != payload {
        return Err((off, format!("{} payload bytes left over", payload - off)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(refs: &[Ref]) -> Vec<u8> {
        let mut w = HsbWriter::new(Vec::new()).unwrap();
        for &r in refs {
            w.push(r).unwrap();
        }
        w.finish().unwrap()
    }

    fn roundtrip(refs: &[Ref]) -> Vec<Ref> {
        let bytes = encode(refs);
        let mut back = Vec::new();
        read(&bytes[..], &mut |b: &[Ref]| back.extend_from_slice(b)).unwrap();
        back
    }

    #[test]
    fn records_survive_a_roundtrip() {
        let refs = vec![
            Ref {
                kind: Kind::Instr,
                addr: 0x400000,
                size: 3,
            },
            Ref {
                kind: Kind::Load,
                addr: u64::MAX,
                size: 8,
            },
            Ref {
                kind: Kind::Store,
                addr: 0,
                size: 62,
            },
            Ref {
                kind: Kind::Modify,
                addr: 0x7fff_0000,
                size: 32,
            },
            Ref {
                kind: Kind::Load,
                addr: 0x10,
                size: 4096,
            },
            Ref {
                kind: Kind::Instr,
                addr: 0x3ffffe,
                size: 1,
            },
        ];
        assert_eq!(roundtrip(&refs), refs);
        // Many blocks.
        let many: Vec<Ref> = (0..10_000u64)
            .map(|i| Ref {
                kind: Kind::from_code((i % 4) as u8),
                addr: i * 977,
                size: (i % 40 + 1) as u32,
            })
            .collect();
        assert_eq!(roundtrip(&many), many);
    }

    #[test]
    fn blocks_of_coded_sizes_decode_the_same() {
        // Every size coded in its tag, addresses jumping both ways, all four kinds.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let refs: Vec<Ref> = (0..20_000u64)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Ref {
                    kind: Kind::from_code((x % 4) as u8),
                    addr: if i % 3 == 0 { x } else { x & 0xffff },
                    size: [1, 2, 4, 8, 16, 32][(x >> 8) as usize % 6],
                }
            })
            .collect();
        assert_eq!(roundtrip(&refs), refs);
    }

    #[test]
    fn a_sequential_stream_takes_two_bytes_a_reference() {
        let refs: Vec<Ref> = (0..1000)
            .map(|i| Ref {
                kind: Kind::Load,
                addr: 0x1000 + 8 * i,
                size: 8,
            })
            .collect();
        let bytes = encode(&refs);
        assert!(
            bytes.len() <= HEADER_BYTES + 8 + 2 * 1000 + 2,
            "{}",
            bytes.len()
        );
        assert_eq!(roundtrip(&refs), refs);
    }

    #[test]
    fn corrupt_traces_name_the_byte() {
        read(&b""[..], &mut |_: &[Ref]| {}).unwrap();
        let e = read(&b"HSX\x01\0\0\0\0"[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert_eq!(
            e.to_string(),
            "byte 0: not an hsb trace (no \"HSB\" header)"
        );
        let e = read(&b"HSB\x02\0\0\0\0"[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert!(e.to_string().starts_with("byte 3: hsb version 2"), "{e}");
        let good = encode(&[Ref {
            kind: Kind::Load,
            addr: 0x1234,
            size: 8,
        }]);
        // Cut inside the block.
        let e = read(&good[..good.len() - 1], &mut |_: &[Ref]| {}).unwrap_err();
        assert!(
            e.to_string().starts_with("byte 8: a truncated block"),
            "{e}"
        );
        // A block claiming zero records.
        let mut zero = good.clone();
        zero[8..12].copy_from_slice(&0u32.to_le_bytes());
        let e = read(&zero[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert!(
            e.to_string().starts_with("byte 8: a block of 0 records"),
            "{e}"
        );
        // A tag whose delta runs past the payload.
        let mut long = good.clone();
        long[16] |= 7 << 2;
        let e = read(&long[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert!(e.to_string().contains("past the end of its block"), "{e}");
    }
}
