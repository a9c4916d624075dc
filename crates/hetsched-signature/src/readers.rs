//! The trace readers: lackey and din text, line by line over large chunks; hsb binary, block by
//! block. Each hands references to a [`RefSink`] in batches (up to a few thousand, in trace order:
//! one call a batch keeps the consumer's loop tight; an hsb block is decoded as the sink takes it),
//! and stops at the first bad record with an error naming its line (text) or byte offset (hsb);
//! the records of a bad hsb block reach the sink before the error, so a sink drops what it made of
//! a read that fails. Input bytes are never trusted: a truncated line, a non-hex address, binary
//! garbage or an empty trace is an error, not a panic.

use crate::hsb;
use crate::trace::{parse_dec, parse_hex, Format, Kind, Ref, TraceError, MAX_ACCESS_BYTES};
use std::io::Read;

/// Bytes read from the input at a time.
const CHUNK: usize = 1 << 20;
/// The longest text line accepted (lackey's are under 40 bytes).
const MAX_LINE: usize = 4096;

/// What a read saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// References delivered (every record that is a memory access).
    pub refs: u64,
    /// Input bytes (after decompression).
    pub bytes: u64,
    /// Text lines (0 for hsb).
    pub lines: u64,
}

/// References handed over at once by the text readers.
const BATCH: usize = 4096;

/// A consumer of references, a batch at a time. The batch is an iterator, generic so that a
/// reader can hand over one that decodes as it is taken and the consumer's loop fuses with the
/// decoder (hsb); the text readers hand over their parsed batches.
pub trait RefSink {
    /// The next references, in trace order.
    fn refs(&mut self, refs: impl ExactSizeIterator<Item = Ref>);

    /// Whether instruction fetches must come with their addresses; a sink that only counts them
    /// says no, and an hsb reader then skips decoding them (they come with address 0).
    fn needs_instruction_addresses(&self) -> bool {
        true
    }
}

/// Read a whole trace of `format` from `input` into `sink`. On an error the sink may have been
/// given some references of the bad hsb block: what it made of them is to be dropped.
pub fn read_trace_into(
    input: impl Read,
    format: Format,
    sink: &mut impl RefSink,
) -> Result<ReadStats, TraceError> {
    let stats = match format {
        Format::Lackey => read_lines(input, sink, lackey_line)?,
        Format::Din => read_lines(input, sink, din_line)?,
        Format::Hsb => hsb::read_records(input, sink)?,
    };
    if stats.refs == 0 {
        return Err(TraceError::whole(if stats.bytes == 0 {
            "the trace is empty"
        } else {
            "the trace has no memory references"
        }));
    }
    Ok(stats)
}

/// Read a whole trace of `format` from `input`, one reference at a time (as `read_trace_into`).
pub fn read_trace(
    input: impl Read,
    format: Format,
    sink: &mut impl FnMut(Ref),
) -> Result<ReadStats, TraceError> {
    struct EachRef<'a, F>(&'a mut F);
    impl<F: FnMut(Ref)> RefSink for EachRef<'_, F> {
        fn refs(&mut self, refs: impl ExactSizeIterator<Item = Ref>) {
            refs.for_each(&mut *self.0);
        }
    }
    read_trace_into(input, format, &mut EachRef(sink))
}

/// A line parser: `Ok(Some(ref))` for a reference, `Ok(None)` for a line to skip.
type LineParser = fn(&[u8]) -> Result<Option<Ref>, String>;

fn read_lines(
    mut input: impl Read,
    sink: &mut impl RefSink,
    parse: LineParser,
) -> Result<ReadStats, TraceError> {
    let mut batch: Vec<Ref> = Vec::with_capacity(BATCH);
    let mut stats = ReadStats::default();
    let mut buf = vec![0u8; CHUNK + MAX_LINE];
    // Bytes of an unfinished line carried over from the previous chunk.
    let mut carry = 0usize;
    loop {
        let n = read_some(&mut input, &mut buf[carry..carry + CHUNK])
            .map_err(|e| TraceError::whole(format!("cannot read the trace: {e}")))?;
        stats.bytes += n as u64;
        let end = carry + n;
        let data = &buf[..end];
        let mut start = 0;
        while let Some(nl) = memchr(b'\n', &data[start..]) {
            let line = &data[start..start + nl];
            stats.lines += 1;
            handle_line(line, stats.lines, parse, &mut batch)?;
            if batch.len() == BATCH {
                stats.refs += batch.len() as u64;
                sink.refs(batch.drain(..));
            }
            start += nl + 1;
        }
        let rest = end - start;
        if n == 0 {
            if rest > 0 {
                // A last line without a newline.
                stats.lines += 1;
                let line = buf[start..end].to_vec();
                handle_line(&line, stats.lines, parse, &mut batch)?;
            }
            stats.refs += batch.len() as u64;
            sink.refs(batch.drain(..));
            return Ok(stats);
        }
        if rest > MAX_LINE {
            return Err(TraceError::line(
                stats.lines + 1,
                format!("a line longer than {MAX_LINE} bytes: not a text trace"),
            ));
        }
        buf.copy_within(start..end, 0);
        carry = rest;
    }
}

#[inline]
fn handle_line(
    line: &[u8],
    number: u64,
    parse: LineParser,
    batch: &mut Vec<Ref>,
) -> Result<(), TraceError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    match parse(line) {
        Ok(Some(r)) => {
            batch.push(r);
            Ok(())
        }
        Ok(None) => Ok(()),
        Err(msg) => Err(TraceError::line(number, msg)),
    }
}

/// Fill as much of `buf` as the input gives before its end.
pub(crate) fn read_some(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match input.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[inline]
fn memchr(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// Show at most 40 bytes of a bad line, printable.
fn shown(line: &[u8]) -> String {
    let s: String = line
        .iter()
        .take(40)
        .map(|&c| {
            if c.is_ascii_graphic() || c == b' ' {
                c as char
            } else {
                '?'
            }
        })
        .collect();
    if line.len() > 40 {
        format!("{s}...")
    } else {
        s
    }
}

/// A size above `MAX_ACCESS_BYTES` refused, naming the line.
#[inline]
fn check_size(size: u32, line: &[u8]) -> Result<(), String> {
    if size > MAX_ACCESS_BYTES {
        return Err(format!(
            "an access of {size} bytes (at most {MAX_ACCESS_BYTES}) in {:?}",
            shown(line)
        ));
    }
    Ok(())
}

/// `address,size` after the kind letter and spaces.
#[inline]
fn addr_size(s: &[u8], line: &[u8]) -> Result<(u64, u32), String> {
    let (addr, n) = parse_hex(s).ok_or_else(|| {
        format!(
            "expected a hex address (at most 16 digits) in {:?}",
            shown(line)
        )
    })?;
    let rest = &s[n..];
    let rest = rest
        .strip_prefix(b",")
        .ok_or_else(|| format!("expected `,size` after the address in {:?}", shown(line)))?;
    let (size, m) =
        parse_dec(rest).ok_or_else(|| format!("expected a decimal size in {:?}", shown(line)))?;
    if m != rest.len() && !rest[m..].iter().all(u8::is_ascii_whitespace) {
        return Err(format!(
            "unexpected text after the size in {:?}",
            shown(line)
        ));
    }
    if size == 0 {
        return Err(format!("a size of 0 in {:?}", shown(line)));
    }
    check_size(size, line)?;
    Ok((addr, size))
}

/// One lackey line: `I  0400d7d4,8`, ` L 7ff000398,8`, ` S ...`, ` M ...`; valgrind's `==pid==`
/// and `--pid--` messages and blank lines are skipped.
pub fn lackey_line(line: &[u8]) -> Result<Option<Ref>, String> {
    let Some(&first) = line.first() else {
        return Ok(None);
    };
    let (kind, rest) = match first {
        b'I' => (Kind::Instr, &line[1..]),
        b' ' => {
            let kind = match line.get(1) {
                Some(b'L') => Kind::Load,
                Some(b'S') => Kind::Store,
                Some(b'M') => Kind::Modify,
                _ if line.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                _ => {
                    return Err(format!(
                        "expected ` L`, ` S`, ` M` or `I` at the start of {:?}",
                        shown(line)
                    ))
                }
            };
            (kind, &line[2..])
        }
        b'=' | b'-' if line.get(1) == Some(&first) => return Ok(None),
        _ => {
            return Err(format!(
                "not a lackey record (` L`, ` S`, ` M` or `I`): {:?}",
                shown(line)
            ))
        }
    };
    let spaces = rest.iter().take_while(|&&c| c == b' ').count();
    if spaces == 0 {
        return Err(format!(
            "expected a space after the kind in {:?}",
            shown(line)
        ));
    }
    let (addr, size) = addr_size(&rest[spaces..], line)?;
    Ok(Some(Ref { kind, addr, size }))
}

/// One din line: `label address [size]`: 0 read, 1 write, 2 instruction fetch, 3 escape and 4
/// cache flush (skipped); the address in hex, optionally `0x`-prefixed; the size decimal,
/// default 4 (Dinero IV's default access size for din input).
pub fn din_line(line: &[u8]) -> Result<Option<Ref>, String> {
    let mut fields = line
        .split(|c| *c == b' ' || *c == b'\t')
        .filter(|f| !f.is_empty());
    let Some(label) = fields.next() else {
        return Ok(None);
    };
    let kind = match label {
        b"0" => Kind::Load,
        b"1" => Kind::Store,
        b"2" => Kind::Instr,
        b"3" | b"4" => return Ok(None),
        _ => {
            return Err(format!(
                "expected a din label 0-4 at the start of {:?}",
                shown(line)
            ))
        }
    };
    let addr_field = fields
        .next()
        .ok_or_else(|| format!("a label without an address: {:?}", shown(line)))?;
    let a = addr_field
        .strip_prefix(b"0x")
        .or_else(|| addr_field.strip_prefix(b"0X"))
        .unwrap_or(addr_field);
    let addr = match parse_hex(a) {
        Some((v, n)) if n == a.len() => v,
        _ => {
            return Err(format!(
                "expected a hex address (at most 16 digits) in {:?}",
                shown(line)
            ))
        }
    };
    let size = match fields.next() {
        None => 4,
        Some(f) => match parse_dec(f) {
            Some((v, n)) if n == f.len() && v > 0 => v,
            _ => {
                return Err(format!(
                    "expected a positive decimal size in {:?}",
                    shown(line)
                ))
            }
        },
    };
    if fields.next().is_some() {
        return Err(format!("more than three fields in {:?}", shown(line)));
    }
    check_size(size, line)?;
    Ok(Some(Ref { kind, addr, size }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], format: Format) -> Result<Vec<Ref>, TraceError> {
        let mut v = Vec::new();
        read_trace(text, format, &mut |r| v.push(r))?;
        Ok(v)
    }

    #[test]
    fn lackey_records_and_valgrind_messages() {
        let text = b"==123== Lackey, an example Valgrind tool\n--123-- warning\nI  04000be0,3\n L 1ffefffd58,8\n S 04224158,4\n M 7ff000398,16\n";
        let v = all(text, Format::Lackey).unwrap();
        assert_eq!(
            v,
            vec![
                Ref {
                    kind: Kind::Instr,
                    addr: 0x4000be0,
                    size: 3
                },
                Ref {
                    kind: Kind::Load,
                    addr: 0x1ffefffd58,
                    size: 8
                },
                Ref {
                    kind: Kind::Store,
                    addr: 0x4224158,
                    size: 4
                },
                Ref {
                    kind: Kind::Modify,
                    addr: 0x7ff000398,
                    size: 16
                },
            ]
        );
        // No trailing newline, CRLF line ends.
        assert_eq!(all(b" L 10,8\r\n L 20,8", Format::Lackey).unwrap().len(), 2);
    }

    #[test]
    fn bad_lackey_lines_name_their_line() {
        let cases: [(&[u8], &str); 6] = [
            (
                b" L 10,8\n L 1g0,8\n",
                "line 2: expected `,size` after the address",
            ),
            (b" L 10,8\n L 10\n", "line 2: expected `,size`"),
            (b" L zz,8\n", "line 1: expected a hex address"),
            (b" L 10,\n", "line 1: expected a decimal size"),
            (b"\x00\x01\x02garbage\n", "line 1: not a lackey record"),
            (
                b" L 11112222333344445,8\n",
                "line 1: expected a hex address (at most 16 digits)",
            ),
        ];
        for (text, want) in cases {
            let e = all(text, Format::Lackey).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e:?} does not start with {want:?}");
        }
        assert_eq!(
            all(b"", Format::Lackey).unwrap_err().to_string(),
            "the trace is empty"
        );
        assert_eq!(
            all(b"==1== hello\n", Format::Lackey)
                .unwrap_err()
                .to_string(),
            "the trace has no memory references"
        );
    }

    #[test]
    fn din_records() {
        let v = all(b"0 7ff0005b8\n1 0x10 8\n2 400000\n3 0\n4 0\n", Format::Din).unwrap();
        assert_eq!(
            v,
            vec![
                Ref {
                    kind: Kind::Load,
                    addr: 0x7ff0005b8,
                    size: 4
                },
                Ref {
                    kind: Kind::Store,
                    addr: 0x10,
                    size: 8
                },
                Ref {
                    kind: Kind::Instr,
                    addr: 0x400000,
                    size: 4
                },
            ]
        );
        let e = all(b"0 10\n7 10\n", Format::Din).unwrap_err().to_string();
        assert!(e.starts_with("line 2: expected a din label"), "{e}");
        let e = all(b"0 10 x\n", Format::Din).unwrap_err().to_string();
        assert!(
            e.starts_with("line 1: expected a positive decimal size"),
            "{e}"
        );
    }

    #[test]
    fn a_huge_line_is_refused() {
        let mut text = b" L 10,8\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 10_000));
        let e = all(&text, Format::Lackey).unwrap_err().to_string();
        assert!(e.starts_with("line 2:"), "{e}");
    }
}
