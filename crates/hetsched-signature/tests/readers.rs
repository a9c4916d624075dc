//! Every reader on input it must refuse: truncated lines, non-hex addresses, binary garbage, empty
//! input. An error naming the place, never a panic (the fuzz targets in `fuzz/` run the same
//! readers on generated input for longer).

use hetsched_signature::hsb::HsbWriter;
use hetsched_signature::input::open_reader;
use hetsched_signature::readers::read_trace;
use hetsched_signature::synthetic::{trace, Mix};
use hetsched_signature::{Format, Kind, Ref};
use proptest::prelude::*;

fn count(bytes: &[u8], format: Format) -> Result<u64, String> {
    let mut n = 0;
    read_trace(bytes, format, &mut |_| n += 1)
        .map(|_| n)
        .map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        for f in [Format::Lackey, Format::Din, Format::Hsb] {
            let _ = count(&bytes, f);
        }
        let _ = open_reader(Box::new(std::io::Cursor::new(bytes.clone())), None)
            .map(|t| read_trace(t.reader, t.format, &mut |_| {}));
    }

    /// Text that looks almost right: lackey-like lines with random damage.
    #[test]
    fn damaged_lackey_never_panics(lines in prop::collection::vec("( [LSM]|I ) [0-9a-fA-FxX,]{0,20}[0-9]{0,3}", 1..50)) {
        let text = lines.join("\n");
        let _ = count(text.as_bytes(), Format::Lackey);
        let _ = count(text.as_bytes(), Format::Din);
    }

    /// An hsb trace cut or flipped anywhere fails cleanly or reads fewer references.
    #[test]
    fn damaged_hsb_never_panics(cut in 0usize..3000, flip in 0usize..3000, bit in 0u8..8) {
        let mut w = HsbWriter::new(Vec::new()).unwrap();
        for r in trace(600, Mix::default(), 5) {
            w.push(r).unwrap();
        }
        let mut bytes = w.finish().unwrap();
        if flip < bytes.len() {
            bytes[flip] ^= 1 << bit;
        }
        bytes.truncate(cut.min(bytes.len()));
        let _ = count(&bytes, Format::Hsb);
    }
}

#[test]
fn errors_name_the_line_or_byte() {
    let e = count(b" L 10,8\n L 20,8\n L 30\n", Format::Lackey).unwrap_err();
    assert!(e.starts_with("line 3:"), "{e}");
    let e = count(b"0 10\n0 zz\n", Format::Din).unwrap_err();
    assert!(e.starts_with("line 2:"), "{e}");
    assert_eq!(count(b"", Format::Din).unwrap_err(), "the trace is empty");
    let e = count(b"HSB\x01\0\0\0\0\x05\0\0", Format::Hsb).unwrap_err();
    assert!(e.starts_with("byte 8:"), "{e}");
}

/// Every reader takes an access of up to 65,536 bytes and refuses one byte more, naming it.
#[test]
fn access_sizes_are_bounded_in_every_format() {
    assert_eq!(count(b" L 10,65536\n", Format::Lackey), Ok(1));
    let e = count(b" L 10,8\n L 10,65537\n", Format::Lackey).unwrap_err();
    assert!(
        e.starts_with("line 2: an access of 65537 bytes (at most 65536)"),
        "{e}"
    );
    assert_eq!(count(b"0 10 65536\n", Format::Din), Ok(1));
    let e = count(b"0 10 999999999\n", Format::Din).unwrap_err();
    assert!(e.starts_with("line 1: an access of 999999999 bytes"), "{e}");
    let hsb = |size: u32| {
        let mut w = HsbWriter::new(Vec::new()).unwrap();
        w.push(Ref {
            kind: Kind::Load,
            addr: 0x40,
            size,
        })
        .unwrap();
        w.finish().unwrap()
    };
    assert_eq!(count(&hsb(65536), Format::Hsb), Ok(1));
    let e = count(&hsb(65537), Format::Hsb).unwrap_err();
    assert_eq!(e, "byte 17: a record of size 65537 (1..=65536)");
}

#[test]
fn formats_agree_on_the_same_references() {
    let refs: Vec<Ref> = trace(5000, Mix::default(), 9).collect();
    let mut lackey = String::new();
    let mut din = String::new();
    for r in &refs {
        let (l, d) = match r.kind {
            Kind::Instr => ("I ", 2),
            Kind::Load => (" L", 0),
            Kind::Store => (" S", 1),
            Kind::Modify => (" M", 0),
        };
        lackey.push_str(&format!("{l} {:x},{}\n", r.addr, r.size));
        din.push_str(&format!("{d} {:x} {}\n", r.addr, r.size));
    }
    let mut w = HsbWriter::new(Vec::new()).unwrap();
    for &r in &refs {
        w.push(r).unwrap();
    }
    let hsb = w.finish().unwrap();
    let mut from_lackey = Vec::new();
    read_trace(lackey.as_bytes(), Format::Lackey, &mut |r| {
        from_lackey.push(r);
    })
    .unwrap();
    let mut from_hsb = Vec::new();
    read_trace(&hsb[..], Format::Hsb, &mut |r| from_hsb.push(r)).unwrap();
    let mut from_din = Vec::new();
    read_trace(din.as_bytes(), Format::Din, &mut |r| from_din.push(r)).unwrap();
    assert_eq!(from_lackey, refs);
    assert_eq!(from_hsb, refs);
    assert_eq!(from_din.len(), refs.len());
    assert!(from_din
        .iter()
        .zip(&refs)
        .all(|(a, b)| a.addr == b.addr && a.size == b.size));
}
