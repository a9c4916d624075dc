//! Opening a trace: a file or stdin, plain or gzip- or zstd-compressed (told by the stream's magic
//! bytes, not the file name), in a format given or recognised from its first bytes.

use crate::trace::{Format, TraceError};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const BUFFER: usize = 1 << 16;

/// An opened trace: the decompressed byte stream and its format.
pub struct OpenTrace {
    pub reader: Box<dyn Read>,
    pub format: Format,
    /// "gzip", "zstd" or "none".
    pub compression: &'static str,
}

/// Open `path` (`-` for stdin).
pub fn open(path: &Path, format: Option<Format>) -> Result<OpenTrace, TraceError> {
    let raw: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(path)
            .map_err(|e| TraceError::whole(format!("cannot open the trace: {e}")))?;
        Box::new(f)
    };
    open_reader(raw, format)
}

/// Recognise compression and format of a byte stream.
pub fn open_reader(raw: Box<dyn Read>, format: Option<Format>) -> Result<OpenTrace, TraceError> {
    let mut buffered = BufReader::with_capacity(BUFFER, raw);
    let head = fill(&mut buffered)?;
    // A decompressor gets a buffer of its own for the format's first bytes; a plain stream keeps
    // its one buffer (another would copy every byte once more).
    let (mut plain, compression): (BufReader<Box<dyn Read>>, &'static str) =
        if head.starts_with(&GZIP_MAGIC) {
            let gz: Box<dyn Read> = Box::new(flate2::read::MultiGzDecoder::new(buffered));
            (BufReader::with_capacity(BUFFER, gz), "gzip")
        } else if head.starts_with(&ZSTD_MAGIC) {
            let zstd: Box<dyn Read> =
                Box::new(ruzstd::StreamingDecoder::new(buffered).map_err(|e| {
                    TraceError::byte(0, format!("a zstd stream that does not start: {e}"))
                })?);
            (BufReader::with_capacity(BUFFER, zstd), "zstd")
        } else {
            (buffered, "none")
        };
    let head = fill(&mut plain)?;
    let format = match format {
        Some(f) => f,
        None => detect(&head)?,
    };
    Ok(OpenTrace {
        reader: Box::new(plain),
        format,
        compression,
    })
}

fn fill(r: &mut impl BufRead) -> Result<Vec<u8>, TraceError> {
    r.fill_buf()
        .map(<[u8]>::to_vec)
        .map_err(|e| TraceError::whole(format!("cannot read the trace: {e}")))
}

/// The format of a trace from its first bytes: the hsb magic; else the first line that is not a
/// valgrind message: a lackey record (`I ` or ` L`/` S`/` M`) or a din one (a digit).
pub fn detect(head: &[u8]) -> Result<Format, TraceError> {
    if head.starts_with(b"HSB") {
        return Ok(Format::Hsb);
    }
    if head.is_empty() {
        return Err(TraceError::whole("the trace is empty"));
    }
    for line in head.split(|&c| c == b'\n') {
        if line.starts_with(b"==") || line.starts_with(b"--") || line.is_empty() {
            continue;
        }
        return match line {
            [b'I', b' ', ..] | [b' ', b'L' | b'S' | b'M', b' ', ..] => Ok(Format::Lackey),
            [b'0'..=b'4', b' ' | b'\t', ..] => Ok(Format::Din),
            _ => Err(TraceError::line(
                1,
                "not a trace hetsched knows (lackey, din, hsb; plain, gzip or zstd); give --format",
            )),
        };
    }
    Ok(Format::Lackey)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn formats_are_recognised() {
        assert_eq!(detect(b"HSB\x01\0\0\0\0").unwrap(), Format::Hsb);
        assert_eq!(
            detect(b"==1== Lackey\nI  0400,3\n").unwrap(),
            Format::Lackey
        );
        assert_eq!(detect(b" L 10,8\n").unwrap(), Format::Lackey);
        assert_eq!(detect(b"2 400000\n0 10\n").unwrap(), Format::Din);
        assert!(detect(b"\x7fELF\x02\x01").is_err());
        assert!(detect(b"").is_err());
    }

    #[test]
    fn gzip_is_read_through() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b" L 10,8\n S 20,4\n").unwrap();
        let bytes = gz.finish().unwrap();
        let t = open_reader(Box::new(std::io::Cursor::new(bytes)), None).unwrap();
        assert_eq!(t.compression, "gzip");
        assert_eq!(t.format, Format::Lackey);
        let mut n = 0;
        crate::readers::read_trace(t.reader, t.format, &mut |_| n += 1).unwrap();
        assert_eq!(n, 2);
    }
}
