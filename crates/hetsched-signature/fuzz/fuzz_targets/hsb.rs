#![no_main]
//! The hsb reader on arbitrary bytes: an error or references, never a panic.
use hetsched_signature::readers::read_trace;
use hetsched_signature::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = read_trace(data, Format::Hsb, &mut |_| {});
});
