//! Issue 16's device and software mechanisms, each by what it adds to a run when its constant is
//! changed through the topology's `params` (no rebuild): a device's DMA issue and completion time,
//! a GPU kernel's stores and polling through the GPU's memory system, the CUDA-like driver's CPU
//! time per copy and its GPFIFO fetches on the links, and a host's interrupt entry.
//! Every difference is exact: the machine is deterministic and these runs have no contention.

use devlend_drivers::gpu_run::*;
use devlend_experiments::gpu::*;
use devlend_experiments::nvme::read_blocks;
use serde_json::{json, Value};

const TWO: &str = include_str!("../../../devlend-drivers/tests/pxh830-two-host.json");
const THREE: &str = include_str!("../../../devlend-drivers/tests/three-host-cluster.json");
const B2B: &str = include_str!("../../../devlend-drivers/tests/b2b.json");
const NS: u64 = 1000;

/// `json` with `params.<scope>[.<name>].<key>` set to `v` ps.
fn with(json: &str, scope: &str, name: Option<&str>, key: &str, v: u64) -> String {
    let mut d: Value = serde_json::from_str(json).unwrap();
    let p = d.as_object_mut().unwrap().entry("params").or_insert(json!({}));
    let s = p.as_object_mut().unwrap().entry(scope).or_insert(json!({}));
    let target = match name {
        Some(n) => s.as_object_mut().unwrap().entry(n).or_insert(json!({})),
        None => s,
    };
    target[key] = json!(v);
    d.to_string()
}

fn copy_ps(json: &str, runner: &str, dir: Dir) -> u64 {
    memcpy(json, runner, "gpu0", dir, 4096).unwrap().total_ps
}

/// What raising `key` of gpu0 from 1 us to 2 us adds to a 4 KiB copy by `runner`, in us (from
/// 1 us, not 0: with none, a request can queue behind the one before it on a link).
fn gpu0_adds(key: &str, runner: &str, dir: Dir) -> f64 {
    let base = copy_ps(&with(TWO, "devices", Some("gpu0"), key, 1000 * NS), runner, dir);
    let more = copy_ps(&with(TWO, "devices", Some("gpu0"), key, 2000 * NS), runner, dir);
    (more - base) as f64 / 1e6
}

#[test]
fn a_copy_engine_pays_its_issue_time_per_request_and_its_completion_time_per_read() {
    // Requests on a copy's path: the GPFIFO entry, the methods, the data, the semaphore.
    assert_eq!(gpu0_adds("dma_issue_ps", "lender", Dir::DtoH), 4.0);
    assert_eq!(gpu0_adds("dma_issue_ps", "lender", Dir::HtoD), 4.0);
    // Read data the engine takes in: the entry and the methods, and a host-to-device copy's data.
    assert_eq!(gpu0_adds("dma_completion_ps", "lender", Dir::DtoH), 2.0);
    assert_eq!(gpu0_adds("dma_completion_ps", "borrower", Dir::HtoD), 3.0);
}

#[test]
fn a_borrowed_gpus_driver_pays_per_copy_for_the_fetches_crossing_the_ntb() {
    // The NTB's latency on a copy's path: the doorbell, the entry's and the methods' fetches
    // (there and back), the data and the semaphore: seven crossings for the borrower, none for
    // the lender, with the same constants: the path makes the difference.
    let adds = |runner: &str| {
        let base = copy_ps(&with(TWO, "timing", None, "ntb_latency_ps", 0), runner, Dir::DtoH);
        let more = copy_ps(&with(TWO, "timing", None, "ntb_latency_ps", 1000 * NS), runner, Dir::DtoH);
        (more - base) / (1000 * NS)
    };
    assert_eq!((adds("lender"), adds("borrower")), (0, 7));
}

#[test]
fn each_copy_costs_the_runtimes_cpu_time_of_the_runners_host() {
    let at = |v| copy_ps(&with(TWO, "hosts", Some("borrower"), "cuda_call_ps", v), "borrower", Dir::DtoH);
    assert_eq!(at(3000 * NS) - at(1000 * NS), 2000 * NS);
    // The lender's setting is not the borrower's.
    let lender = |v| copy_ps(&with(TWO, "hosts", Some("lender"), "cuda_call_ps", v), "borrower", Dir::DtoH);
    assert_eq!(lender(3000 * NS), lender(1000 * NS));
}

#[test]
fn a_ping_pong_round_trip_pays_the_sm_to_pcie_path_and_the_polling_loop_of_each_gpu() {
    let rt = |json: &str| pingpong(json, "borrower", "gpu0", "gpu1", Via::Peer).unwrap();
    let base = rt(THREE);
    // Both GPUs store once per round trip, each through its memory system.
    let store = rt(&with(THREE, "timing", None, "sm_to_pcie_ps", 1200 * NS));
    let store0 = rt(&with(THREE, "timing", None, "sm_to_pcie_ps", 200 * NS));
    assert_eq!(store - store0, 2 * 1000 * NS);
    // Each GPU sees the other's store one polling period after it is in its memory; gpu0's
    // period alone moves only gpu0's half.
    let poll = rt(&with(THREE, "devices", Some("gpu0"), "sm_poll_ps", 1250 * NS));
    assert_eq!(poll - base, 1000 * NS);
}

#[test]
fn a_bare_metal_driver_waiting_for_its_interrupt_pays_the_hosts_interrupt_entry() {
    let at = |v| read_blocks(&with(B2B, "hosts", Some("borrower"), "irq_entry_ps", v), "borrower", "nvme0", &[7, 100], 8).unwrap().total_ps;
    assert_eq!(at(2500 * NS) - at(500 * NS), 2000 * NS);
}

#[test]
fn an_nvme_controller_pays_its_issue_and_completion_time_on_a_reads_path() {
    let at = |key, v| read_blocks(&with(B2B, "devices", Some("nvme0"), key, v), "lender", "nvme0", &[7, 100], 8).unwrap().total_ps;
    // Issued on the path: the command fetch, the data, the completion entry and the interrupt
    // behind it; taken in: the fetched command.
    assert_eq!(at("dma_issue_ps", 2000 * NS) - at("dma_issue_ps", 1000 * NS), 3000 * NS);
    assert_eq!(at("dma_completion_ps", 2000 * NS) - at("dma_completion_ps", 1000 * NS), 1000 * NS);
}
