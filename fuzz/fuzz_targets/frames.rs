#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| soku_proto::fuzzing::frames(data));
