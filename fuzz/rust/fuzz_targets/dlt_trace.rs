//! Arbitrary bytes as a `.dlt` trace, read to the end three ways: from a file as `devlend trace
//! info` / `replay` read one (`trace::info`: `Reader::open` checks the end record first, then a
//! full pass), and streamed from memory whole and 3 bytes per `read` (`Reader::new`). The two
//! streamed reads must agree exactly (chunking changes nothing), the file read must succeed
//! exactly when they do, with the same packet count, and every error is one line naming the
//! file and either a byte offset inside the input or the truncation. A panic, or an allocation
//! over libFuzzer's `-malloc_limit_mb`, is a crash.
#![no_main]

use devlend_hypertrio::trace::{self, Reader};
use libfuzzer_sys::fuzz_target;
use std::io::Read;

/// A reader that hands out at most 3 bytes per call.
struct Trickle<'a>(&'a [u8]);
impl Read for Trickle<'_> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = b.len().min(3).min(self.0.len());
        b[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn read_all(r: impl Read) -> Result<u64, devlend_hypertrio::HtError> {
    let mut n = 0;
    for p in Reader::new("fuzz.dlt", r)? {
        p?;
        n += 1;
    }
    Ok(n)
}

fn check_error(e: &str, name: &str, len: usize) {
    let rest = e
        .strip_prefix(name)
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no file: {e}"));
    assert!(!e.contains('\n'), "{e:?}");
    if let Some(r) = rest.strip_prefix("byte ") {
        let (off, msg) = r
            .split_once(": ")
            .unwrap_or_else(|| panic!("no offset: {e}"));
        let off: usize = off.parse().unwrap_or_else(|_| panic!("no offset: {e}"));
        assert!(
            off <= len && !msg.trim().is_empty(),
            "byte {off} of {len}: {e}"
        );
    } else {
        assert!(
            rest.starts_with("truncated"),
            "neither a byte offset nor truncated: {e}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let whole = read_all(data);
    let trickled = read_all(Trickle(data));
    assert_eq!(whole, trickled, "chunking changed the result");
    if let Err(e) = &whole {
        check_error(&e.to_string(), "fuzz.dlt", data.len());
    }
    let path = std::env::temp_dir().join(format!("devlend-fuzz-{}.dlt", std::process::id()));
    let path = path.to_str().unwrap();
    std::fs::write(path, data).unwrap();
    match trace::info(path) {
        Ok(i) => assert_eq!(
            whole.as_ref().ok(),
            Some(&i.packets),
            "file read Ok, stream read {whole:?}"
        ),
        Err(e) => {
            assert!(whole.is_err(), "file read failed, stream read Ok: {e}");
            check_error(&e.to_string(), path, data.len());
        }
    }
});
