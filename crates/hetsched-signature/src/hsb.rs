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

use crate::readers::{ReadStats, RefSink};
use crate::trace::{Kind, Ref, TraceError, MAX_ACCESS_BYTES};
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

/// Read an hsb trace, header included, handing each block's records to `sink` as an iterator
/// that decodes while it is taken (so the consumer's loop and the decoder fuse into one). The
/// block's lengths and sizes are checked once it is decoded: a bad block reaches the sink, and the
/// read then fails naming its byte, so a consumer must drop what it made of a read that fails.
pub fn read_records(
    mut input: impl Read,
    sink: &mut impl RefSink,
) -> Result<ReadStats, TraceError> {
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
    // Version 1 defines no flags: a set flag would change the meaning of what follows in a way
    // this reader cannot know.
    let flags = u32::from_le_bytes(header[4..8].try_into().unwrap_or([0; 4]));
    if flags != 0 {
        return Err(TraceError::byte(
            4,
            format!("hsb flags {flags:#010x} (version 1 has none: 0)"),
        ));
    }
    let mut offset = HEADER_BYTES as u64;
    let mut prev = [0u64; 2];
    // One block: its tags, then its payload in a region of `MAX_RECORD_PAYLOAD` bytes a record
    // (what the decoder may touch whatever the tags say).
    let mut block: Vec<u8> = Vec::new();
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
        let region = n + n * MAX_RECORD_PAYLOAD;
        if block.len() < region {
            block.resize(region, 0);
        }
        let got = read_full(&mut input, &mut block[..body])?;
        stats.bytes += got as u64;
        if got < body {
            return Err(TraceError::byte(
                offset,
                format!("a truncated block: {got} of {body} bytes"),
            ));
        }
        let payload_start = offset + (BLOCK_HEADER + n) as u64;
        let (tags, data) = block[..region].split_at(n);
        let mut end = BlockEnd {
            prev,
            off: 0,
            bad_size: false,
        };
        // Only a size held in the payload (codes 0 and 7) can be 0: a block without one is
        // decoded without looking for it (for a code, `tag + 32` wraps below 64 just for those).
        let payload_sizes = tags
            .iter()
            .fold(0u8, |any, &t| any | (t.wrapping_add(0x20) < 0x40) as u8);
        match (payload_sizes != 0, sink.needs_instruction_addresses()) {
            (true, true) => sink.refs(Records::<true, true>::new(tags, data, &mut end)),
            (true, false) => sink.refs(Records::<true, false>::new(tags, data, &mut end)),
            (false, true) => sink.refs(Records::<false, true>::new(tags, data, &mut end)),
            (false, false) => sink.refs(Records::<false, false>::new(tags, data, &mut end)),
        }
        // Checked after the fact: a block whose records do not use its payload exactly, or with a
        // record of size 0 or above `MAX_ACCESS_BYTES`, fails (the consumer has seen its records,
        // sizes clamped to the bound).
        if end.off != payload || end.bad_size {
            let (at, msg) = first_error(tags, data, payload);
            return Err(TraceError::byte(payload_start + at as u64, msg));
        }
        prev = end.prev;
        stats.refs += n as u64;
        offset += (BLOCK_HEADER + body) as u64;
    }
}

/// Per size code: the payload bytes that hold the size (codes 0 and 7), and their mask.
const SIZE_BYTES: [usize; 8] = [1, 0, 0, 0, 0, 0, 0, 4];
const SIZE_MASKS: [u64; 8] = [0xff, 0, 0, 0, 0, 0, 0, 0xffff_ffff];

/// What a tag says, looked up once a record.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct TagInfo {
    /// The mask of the delta's bytes.
    delta_mask: u64,
    /// The mask of the size's bytes in the payload (0 when the tag holds the size).
    size_mask: u64,
    /// The size when the tag holds it (0 otherwise).
    size: u32,
    /// Payload bytes before the delta (the size's).
    size_bytes: u8,
    /// Payload bytes of the record.
    advance: u8,
}

/// `TagInfo` of every tag.
static TAGS: [TagInfo; 256] = {
    let mut t = [TagInfo {
        delta_mask: 0,
        size_mask: 0,
        size: 0,
        size_bytes: 0,
        advance: 0,
    }; 256];
    let mut tag = 0;
    while tag < 256 {
        let len = ((tag >> 2) & 7) + 1;
        let code = tag >> 5;
        t[tag] = TagInfo {
            delta_mask: BYTE_MASKS[len],
            size_mask: SIZE_MASKS[code],
            size: SIZE_CODES[code],
            size_bytes: SIZE_BYTES[code] as u8,
            advance: (SIZE_BYTES[code] + len) as u8,
        };
        tag += 1;
    }
    t
};

/// The first fault of a block that failed its checks: (payload offset, message).
fn first_error(tags: &[u8], data: &[u8], payload: usize) -> (usize, String) {
    let mut off = 0usize;
    for &tag in tags {
        let code = (tag >> 5) as usize;
        let size_bytes = SIZE_BYTES[code];
        if off + size_bytes > payload {
            return (off, "a truncated record".into());
        }
        if size_bytes > 0 {
            let mut le = [0u8; 4];
            le[..size_bytes].copy_from_slice(&data[off..off + size_bytes]);
            let size = u32::from_le_bytes(le);
            if size == 0 || size > MAX_ACCESS_BYTES {
                return (
                    off,
                    format!("a record of size {size} (1..={MAX_ACCESS_BYTES})"),
                );
            }
        }
        off += size_bytes;
        let len = (((tag >> 2) & 7) + 1) as usize;
        if off + len > payload {
            return (off, "a record past the end of its block".into());
        }
        off += len;
    }
    if off != payload {
        return (off, format!("{} payload bytes left over", payload - off));
    }
    (0, "a block that does not decode".into())
}

/// What decoding a block leaves for the reader: the streams' last addresses, the payload bytes
/// the records took, and whether a record had a size of 0 or above `MAX_ACCESS_BYTES`.
struct BlockEnd {
    prev: [u64; 2],
    off: usize,
    bad_size: bool,
}

/// The records of one block, decoded as they are taken, without a bounds check: whatever its tags
/// say, a record moves at most `MAX_RECORD_PAYLOAD` bytes on and the payload lies in a region of
/// that many bytes a record. The consumer owns it (its state then lives in registers, not behind
/// a pointer); dropping it decodes what the consumer left and hands the block's end back to the
/// reader, which checks it. `PAYLOAD_SIZES`: some tag of the block says its size is in the
/// payload (otherwise every size comes from the tag and none can be 0). Without
/// `INSTRUCTION_ADDRESSES` (a sink that does not need them), instruction fetches come with address
/// 0 and their deltas are never decoded.
pub struct Records<'a, const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool> {
    tags: std::slice::Iter<'a, u8>,
    /// The payload's region: `MAX_RECORD_PAYLOAD` bytes for each tag.
    data: &'a [u8],
    off: usize,
    prev_instr: u64,
    prev_data: u64,
    bad_size: bool,
    end: &'a mut BlockEnd,
}

impl<'a, const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool>
    Records<'a, PAYLOAD_SIZES, INSTRUCTION_ADDRESSES>
{
    fn new(tags: &'a [u8], data: &'a [u8], end: &'a mut BlockEnd) -> Self {
        debug_assert!(data.len() >= tags.len() * MAX_RECORD_PAYLOAD);
        Records {
            tags: tags.iter(),
            data,
            off: 0,
            prev_instr: end.prev[0],
            prev_data: end.prev[1],
            bad_size: false,
            end,
        }
    }
}

impl<const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool> Drop
    for Records<'_, PAYLOAD_SIZES, INSTRUCTION_ADDRESSES>
{
    fn drop(&mut self) {
        for _ in self.by_ref() {}
        *self.end = BlockEnd {
            prev: [self.prev_instr, self.prev_data],
            off: self.off,
            bad_size: self.bad_size,
        };
    }
}

impl<const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool>
    Records<'_, PAYLOAD_SIZES, INSTRUCTION_ADDRESSES>
{
    /// Decode the record of `tag` at payload offset `*off`, from the streams' last addresses.
    #[inline(always)]
    fn decode(
        &self,
        tag: u8,
        off: &mut usize,
        (prev_instr, prev_data): (&mut u64, &mut u64),
        bad_size: &mut bool,
    ) -> Ref {
        let kind = tag & 3;
        let info = &TAGS[tag as usize];
        // SAFETY: before this record `off` is at most `MAX_RECORD_PAYLOAD` (12) bytes a record
        // taken, and the reads below, 8 bytes at `off` and 8 at `off + size_bytes` (at most 4),
        // end within 12 bytes of it: inside `data`, which holds 12 bytes for every tag.
        // read_unaligned has no alignment requirement.
        debug_assert!(*off + info.size_bytes as usize + 8 <= self.data.len());
        let p = unsafe { self.data.as_ptr().add(*off) };
        let (size, word) = if PAYLOAD_SIZES {
            // SAFETY: as above.
            let (head, word) = unsafe {
                let q = p.add(info.size_bytes as usize);
                (
                    u64::from_le(std::ptr::read_unaligned(p.cast::<u64>())),
                    u64::from_le(std::ptr::read_unaligned(q.cast::<u64>())),
                )
            };
            // The size without a branch: from the tag, or from the payload's first bytes.
            let size = (info.size as u64 | (head & info.size_mask)) as u32;
            // A size of 0 or above the bound fails the block; the consumer meanwhile sees it
            // clamped, so a claimed 4 GiB access costs no more than the largest allowed.
            *bad_size |= size.wrapping_sub(1) >= MAX_ACCESS_BYTES;
            (size.min(MAX_ACCESS_BYTES), word)
        } else {
            // SAFETY: as above (the size takes no payload byte).
            let word = unsafe { u64::from_le(std::ptr::read_unaligned(p.cast::<u64>())) };
            (info.size, word)
        };
        *off += info.advance as usize;
        if !INSTRUCTION_ADDRESSES && kind == 0 {
            return Ref {
                kind: Kind::Instr,
                addr: 0,
                size,
            };
        }
        let delta = word & info.delta_mask;
        // Both streams' last addresses as named values, updated by selects (an array indexed by
        // the stream would live in memory, a store-to-load chain from record to record).
        let is_data = kind != 0;
        let base = if is_data { *prev_data } else { *prev_instr };
        let addr = base.wrapping_add(unzigzag(delta) as u64);
        if is_data {
            *prev_data = addr;
        } else {
            *prev_instr = addr;
        }
        Ref {
            kind: Kind::from_code(kind),
            addr,
            size,
        }
    }
}

impl<const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool> Iterator
    for Records<'_, PAYLOAD_SIZES, INSTRUCTION_ADDRESSES>
{
    type Item = Ref;

    #[inline(always)]
    fn next(&mut self) -> Option<Ref> {
        let &tag = self.tags.next()?;
        let (mut off, mut prev_instr, mut prev_data, mut bad_size) =
            (self.off, self.prev_instr, self.prev_data, self.bad_size);
        let r = self.decode(
            tag,
            &mut off,
            (&mut prev_instr, &mut prev_data),
            &mut bad_size,
        );
        (self.off, self.prev_instr, self.prev_data, self.bad_size) =
            (off, prev_instr, prev_data, bad_size);
        Some(r)
    }

    /// The whole block in one loop with the decoder's state in locals (through `self` the
    /// streams' last addresses make a store-to-load chain from one record to the next).
    #[inline(always)]
    fn fold<B, F: FnMut(B, Ref) -> B>(mut self, init: B, mut f: F) -> B {
        let (mut off, mut prev_instr, mut prev_data, mut bad_size) =
            (self.off, self.prev_instr, self.prev_data, self.bad_size);
        let mut acc = init;
        let tags = std::mem::replace(&mut self.tags, [].iter());
        for &tag in tags {
            let r = self.decode(
                tag,
                &mut off,
                (&mut prev_instr, &mut prev_data),
                &mut bad_size,
            );
            acc = f(acc, r);
        }
        (self.off, self.prev_instr, self.prev_data, self.bad_size) =
            (off, prev_instr, prev_data, bad_size);
        acc
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.tags.size_hint()
    }
}

impl<const PAYLOAD_SIZES: bool, const INSTRUCTION_ADDRESSES: bool> ExactSizeIterator
    for Records<'_, PAYLOAD_SIZES, INSTRUCTION_ADDRESSES>
{
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block's references, collected.
    fn read(input: &[u8], sink: &mut impl FnMut(&[Ref])) -> Result<ReadStats, TraceError> {
        struct Blocks<'a, F>(&'a mut F);
        impl<F: FnMut(&[Ref])> RefSink for Blocks<'_, F> {
            fn refs(&mut self, refs: impl ExactSizeIterator<Item = Ref>) {
                let block: Vec<Ref> = refs.collect();
                (self.0)(&block);
            }
        }
        read_records(input, &mut Blocks(sink))
    }

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
    fn a_size_of_zero_and_left_over_bytes_name_their_byte() {
        let load = |size| Ref {
            kind: Kind::Load,
            addr: 0x40,
            size,
        };
        // Header (8), block header (8), the tag at 16, the payload from 17: size, then delta.
        let byte_size = encode(&[load(3)]);
        let mut zero = byte_size.clone();
        zero[17] = 0;
        let e = read(&zero[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert_eq!(e.to_string(), "byte 17: a record of size 0 (1..=65536)");
        let word_size = encode(&[load(4096)]);
        let mut zero = word_size.clone();
        zero[17..21].fill(0);
        let e = read(&zero[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert_eq!(e.to_string(), "byte 17: a record of size 0 (1..=65536)");
        // A claimed 4 GiB access: refused, and the consumer saw it at most at the bound.
        let mut huge = word_size.clone();
        huge[17..21].fill(0xff);
        let mut seen = 0;
        let e = read(&huge[..], &mut |r: &[Ref]| {
            seen = seen.max(r.iter().map(|r| r.size).max().unwrap_or(0));
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "byte 17: a record of size 4294967295 (1..=65536)"
        );
        assert_eq!(seen, MAX_ACCESS_BYTES);
        assert_eq!(huge.len(), 22);
        // The block claims one payload byte more than its record takes.
        let mut left = byte_size.clone();
        left[12..16].copy_from_slice(&3u32.to_le_bytes());
        left.push(0);
        let e = read(&left[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert_eq!(e.to_string(), "byte 19: 1 payload bytes left over");
    }

    #[test]
    fn tags_that_overstate_their_records_fail_inside_the_block() {
        // Every tag claims a u32 size and an 8-byte delta (12 bytes) over a payload of one byte a
        // record: the decoder runs past the payload, never past its region, and the reader
        // refuses the block where its records first overrun it.
        let n = 1000usize;
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&(n as u32).to_le_bytes());
        bytes.extend_from_slice(&(n as u32).to_le_bytes());
        bytes.extend(std::iter::repeat_n(0xffu8, n));
        // Each record's size 1, then its delta.
        let record = [1u8, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
        bytes.extend(record.iter().cycle().take(n));
        let mut seen = 0;
        let e = read(&bytes[..], &mut |b: &[Ref]| seen += b.len()).unwrap_err();
        // 83 whole records fit in 1000 bytes; the 84th's delta runs past them.
        assert_eq!(
            e.to_string(),
            format!(
                "byte {}: a record past the end of its block",
                16 + n + 83 * 12 + 4
            )
        );
        // The bad block's references reached the consumer, which must drop them.
        assert_eq!(seen, n);
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
        let e = read(&b"HSB\x01\xff\xff\xff\xff"[..], &mut |_: &[Ref]| {}).unwrap_err();
        assert_eq!(
            e.to_string(),
            "byte 4: hsb flags 0xffffffff (version 1 has none: 0)"
        );
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
