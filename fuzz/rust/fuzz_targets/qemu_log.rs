//! Arbitrary bytes as a QEMU intel-iommu log, read the way `devlend trace build` / `replay` read
//! one (`qemu::read_log_events` through a `BufReader`, each page event's page taken, as
//! `construct` does). Every input is read to its end, or fails with one one-line error that
//! starts `fuzz.log:<line>: ` for a line the input has. A panic, or any other error shape, is a
//! crash.
#![no_main]

use devlend_hypertrio::qemu;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // lines as `read_until(b'\n')` counts them: a last line without a newline counts too
    let lines = data.iter().filter(|&&b| b == b'\n').count()
        + usize::from(data.last().is_some_and(|&b| b != b'\n'));
    let mut requests = 0u64;
    let r = qemu::read_log_events(
        "fuzz.log",
        std::io::BufReader::with_capacity(64, data),
        |ev| {
            if let Some((_, base, size)) = ev.page() {
                assert!(size.is_power_of_two() && base % size == 0, "{ev:?}");
                requests += 1;
            }
            Ok(())
        },
    );
    match r {
        Ok(s) => {
            assert!(s.lines as usize == lines && s.requests == requests && s.events <= s.lines)
        }
        Err(e) => {
            let e = e.to_string();
            let rest = e
                .strip_prefix("fuzz.log:")
                .unwrap_or_else(|| panic!("no file: {e}"));
            let (line, msg) = rest
                .split_once(": ")
                .unwrap_or_else(|| panic!("no line: {e}"));
            let line: usize = line.parse().unwrap_or_else(|_| panic!("no line: {e}"));
            assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
            assert!(!msg.trim().is_empty() && !e.contains('\n'), "{e:?}");
        }
    }
});
