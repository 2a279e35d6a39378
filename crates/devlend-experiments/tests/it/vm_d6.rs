//! D6's epoch on one machine (000 §7.5): within a step the input copy, compute and gradient
//! exchange follow each other; the next batch's reads and decoding overlap the step.

use devlend_experiments::vm::epoch::{epoch, EpochSpec};

const JSON: &str = include_str!("../../../devlend-vm/tests/expansion-chassis-vm.json");

fn spec(steps: u32) -> EpochSpec {
    // A small model of the workload: the parts' proportions, not VGG19's sizes.
    EpochSpec {
        steps,
        reads: 8,
        read_blocks: 256,
        decode_ps: 2_000_000_000,
        input_bytes: 1 << 20,
        compute_ps: 3_000_000_000,
        exchange_bytes: 4 << 20,
        max_queue: 10,
    }
}

#[test]
fn reads_and_decoding_overlap_the_step_and_nothing_overlaps_within_it() {
    for sc in ["VMLoc", "VMRem", "NatLoc"] {
        let r = epoch(JSON, sc, spec(3)).unwrap();
        assert_eq!(r.step_end_ps.len(), 3);
        let steady = r.step_end_ps[2] - r.step_end_ps[1];
        let per = |ps: u64| ps / 3;
        let step = per(r.input_ps) + per(r.compute_ps) + per(r.exchange_ps);
        let producer = per(r.nvme_ps) + per(r.cpu_ps);
        assert!(steady >= step * 99 / 100, "{sc}: a step is at least its copy, compute and exchange: {steady} vs {step}");
        assert!(steady < step + producer, "{sc}: the reads and decoding of the next batch overlap the step: {steady} vs {}", step + producer);
        let s = spec(3);
        assert!(r.step_end_ps[0] > s.decode_ps + s.compute_ps, "{sc}: the first step waits for the first batch");
    }
}

#[test]
fn a_full_queue_holds_the_enqueuer_back() {
    // A queue of one batch and a fast enqueuer: still no step waits for its batch after the first.
    let mut s = spec(3);
    s.max_queue = 1;
    let r = epoch(JSON, "VMLoc", s).unwrap();
    let full = epoch(JSON, "VMLoc", spec(3)).unwrap();
    assert_eq!(r.step_end_ps[2] - r.step_end_ps[1], full.step_end_ps[2] - full.step_end_ps[1]);
    assert!(epoch(JSON, "nope", spec(1)).unwrap_err().to_string().contains("no D6 set-up 'nope'"));
}
