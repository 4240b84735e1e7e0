//! Arbitrary bytes as a pcap file, read by the ports crate's `PcapReader` with a full-size buffer
//! and with a small one (the "skip a record too big for the buffer" path). Must never panic, never
//! return a record longer than the buffer or the file's limit, and stop after an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ports::{PcapReader, PortError};

fn read_all(data: &[u8], small: bool) {
    let Ok(mut r) = PcapReader::new(data, "fuzz.pcap") else {
        return;
    };
    let limit = r.max_caplen();
    let mut buf = vec![0u8; if small { 64 } else { limit }];
    let mut last = 0;
    // A record needs at least 16 bytes, so there are never more than data.len() / 16 of them.
    for _ in 0..=data.len() / 16 + 1 {
        match r.next_record(&mut buf) {
            Ok(Some(rec)) => {
                assert!(rec.caplen <= buf.len() && rec.caplen <= limit);
                assert!(r.records_read() > last);
                last = r.records_read();
            }
            Ok(None) => {
                assert!(r.is_done());
                assert!(r.next_record(&mut buf).expect("after the end").is_none());
                return;
            }
            Err(PortError::BufferTooSmall { caplen, .. }) => {
                assert!(small && caplen as usize > buf.len());
                last = r.records_read();
            }
            Err(_) => {
                assert!(r.is_done());
                assert!(r.next_record(&mut buf).expect("after an error").is_none());
                return;
            }
        }
    }
    panic!("the reader returned more records than the input can hold");
}

fuzz_target!(|data: &[u8]| {
    read_all(data, false);
    read_all(data, true);
});
