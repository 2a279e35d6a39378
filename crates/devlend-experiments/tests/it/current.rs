//! Current devices beside the papers' (issue 15): an A100 PCIe 40GB and an Optane P5800X on Gen4
//! links, against the K40c and the Optane 900P on the same topologies with their own links. The
//! GPU comparison copies device to host (posted writes, bounded by the links); host to device is
//! bounded by the copy engine's read tags and the round trip ([timing] read_tags), which Gen4 does not change.

use devlend_drivers::gpu_run::{bind, Dir};
use devlend_experiments::gpu::memcpy;
use devlend_host::Cluster;
use devlend_workloads::fio_job::{fio, Job, Rw};

const TWO: &str = include_str!("../../../devlend-drivers/tests/pxh830-two-host.json");
const B2B: &str = include_str!("../../../devlend-drivers/tests/b2b.json");
const MIB: u64 = 1 << 20;

/// `json` with its Xeon E5 hosts' root write intake off (`ram_write_line_ps` 0): the intake was
/// fitted behind pcie-bench's Gen3 x8 root ports and holds every DMA write to RAM near 6.5 GB/s,
/// which would make any copy to RAM of these tests end at that intake, not at the links they
/// compare. A platform with Gen4 root ports has no measured intake here; it is assumed not to bind,
/// as `topologies/nic-lending.yaml` assumes for its Gen4 x16 testbed. Both sides of each comparison
/// run on it.
fn no_root_intake(json: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["params"] = serde_json::json!({"cpus": {"intel-xeon-e5": {"ram_write_line_ps": 0}}});
    v.to_string()
}

/// The fixture with device `dev` of profile `profile`, the links down to it (ends named in
/// `path`) at `gen` (their widths kept).
fn with_device(json: &str, dev: &str, profile: &str, gen: u8, path: &[&str]) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for d in v["devices"].as_array_mut().unwrap().iter_mut().filter(|d| d["name"] == dev) {
        d["profile"] = profile.into();
    }
    for l in v["links"].as_array_mut().unwrap().iter_mut().filter(|l| path.iter().any(|p| l["b"] == *p)) {
        l["gen"] = gen.into();
    }
    v.to_string()
}

#[test]
fn an_a100_shows_all_its_40_gb_through_bar1_and_copies_faster_on_gen4() {
    // The GPU sits below the lender's switch: both links of its path at the card's generation. The
    // fixture's PEX8796 is a Gen3 switch, below which Gen4 links train down to Gen3
    // (`Fabric::trained_down`): here the switch has no profile, as a Gen4 switch of its place.
    let gen4_switch = TWO.replace(r#""profile":"pex8796","#, "");
    assert_ne!(gen4_switch, TWO);
    let (two, gen4_switch) = (no_root_intake(TWO), no_root_intake(&gen4_switch));
    let a100 = with_device(&gen4_switch, "gpu0", "a100-pcie-40gb", 4, &["lender-sw", "gpu0"]);
    let k40 = with_device(&two, "gpu0", "tesla-k40c", 3, &["lender-sw", "gpu0"]);
    let mut c = Cluster::from_json(&a100).unwrap();
    let g = bind(&mut c, "lender", "gpu0").unwrap();
    assert_eq!((g.drv.mem_size, g.gpu.bar1_size), (40 << 30, 64 << 30));
    let bw = |json: &str| memcpy(json, "lender", "gpu0", Dir::DtoH, 4 * MIB).unwrap().bandwidth();
    let (new, old) = (bw(&a100), bw(&k40));
    assert!(new > 1.5 * old, "Gen4 x16 A100 {new:.3e} B/s vs Gen3 x16 K40c {old:.3e} B/s");
}

#[test]
fn a_p5800x_answers_sooner_and_serves_more_iops_than_the_900p() {
    let p5800 = with_device(B2B, "nvme0", "optane-p5800x", 4, &["nvme0"]);
    let job = |qd| Job { rw: Rw::RandRead, iodepth: qd, numjobs: 1, ios: 64, verify: false, size_blocks: None };
    let run = |json: &str, qd| fio(json, "lender", "nvme0", job(qd)).unwrap();
    let (new1, old1) = (run(&p5800, 1), run(B2B, 1));
    assert!(new1.lat_p50_ps < old1.lat_p50_ps, "QD1 P5800X {} ps vs 900P {} ps", new1.lat_p50_ps, old1.lat_p50_ps);
    let (new32, old32) = (run(&p5800, 32), run(B2B, 32));
    assert!(new32.iops > 1.5 * old32.iops, "QD32 P5800X {:.0} IOPS vs 900P {:.0}", new32.iops, old32.iops);
    eprintln!("P5800X QD1 {} ns, QD32 {:.0} IOPS; 900P QD1 {} ns, QD32 {:.0} IOPS", new1.lat_p50_ps / 1000, new32.iops, old1.lat_p50_ps / 1000, old32.iops);
}

/// The two-host fixture with its NTB pair of profile `profile` on links of `gen` x`width`.
fn with_adapters(json: &str, profile: &str, gen: u8, width: u8) -> String {
    let mut v: serde_json::Value = serde_json::from_str(json).unwrap();
    for n in v["ntbs"].as_array_mut().unwrap() {
        n["profile"] = profile.into();
    }
    for l in v["links"].as_array_mut().unwrap() {
        let ntb_end = |e: &serde_json::Value| e.as_str().is_some_and(|s| s.starts_with("ntb-"));
        if ntb_end(&l["a"]) || ntb_end(&l["b"]) || l["b"] == "lender-sw" {
            (l["gen"], l["width"]) = (gen.into(), width.into());
        }
    }
    v.to_string()
}

#[test]
fn a_borrowed_k40c_writes_faster_across_an_mxh930_pair_than_a_pxh830_pair() {
    // The K40c's Gen3 x16 is twice the PXH830's Gen3 x8; the MXH930's Gen4 x16 no longer limits it.
    let k40 = with_device(&no_root_intake(TWO), "gpu0", "tesla-k40c", 3, &["lender-sw", "gpu0"]);
    let bw = |json: &str| memcpy(json, "borrower", "gpu0", Dir::DtoH, 4 * MIB).unwrap().bandwidth();
    let (mxh, pxh) = (bw(&with_adapters(&k40, "mxh930", 4, 16)), bw(&k40));
    assert!(mxh > 1.5 * pxh, "MXH930 Gen4 x16 {mxh:.3e} B/s vs PXH830 Gen3 x8 {pxh:.3e} B/s");
}

#[test]
fn an_a100s_64_gib_bar1_is_too_large_to_lend_through_512_mib_windows() {
    let a100 = with_adapters(&with_device(TWO, "gpu0", "a100-pcie-40gb", 4, &["lender-sw", "gpu0"]), "mxh930", 4, 16);
    let e = memcpy(&a100, "borrower", "gpu0", Dir::DtoH, 4 * MIB).unwrap_err();
    assert!(e.to_string().contains("BAR1 of 64 GiB is larger than the NTB can map"), "{e}");
}
