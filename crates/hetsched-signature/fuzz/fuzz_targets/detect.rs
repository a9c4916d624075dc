#![no_main]
//! Compression and format recognition, then the recognised reader, on arbitrary bytes (gzip and
//! zstd streams included).
use hetsched_signature::input::open_reader;
use hetsched_signature::readers::read_trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = open_reader(Box::new(std::io::Cursor::new(data.to_vec())), None) {
        let _ = read_trace(t.reader, t.format, &mut |_| {});
    }
});
