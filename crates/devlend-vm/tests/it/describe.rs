//! VMs from a description (`devlend_vm::describe`): local and remote devices take their paths,
//! and a bad description is a SpecError at its field with nothing left started.

use devlend_fabric::spec::VmSpec;
use devlend_host::Cluster;
use devlend_vm::describe::start;
use devlend_vm::{Path, Vmm};

const JSON: &str = include_str!("../expansion-chassis-vm.json");

fn specs(json: &str) -> Vec<VmSpec> {
    serde_json::from_str(json).unwrap()
}

#[test]
fn devices_take_the_path_their_place_implies() {
    let mut c = Cluster::from_json(JSON).unwrap();
    let mut vmm = Vmm::default();
    let vms = start(
        &mut c,
        &mut vmm,
        &specs(
            r#"[{"name": "l", "host": "lender", "memory": 67108864, "devices": [{"device": "gpu0"}]},
        {"name": "r", "host": "remote", "memory": 67108864, "devices": [{"device": "gpu1", "path": "mediated"}]}]"#,
        ),
    )
    .unwrap();
    let paths: Vec<Path> = vms.iter().map(|(_, id)| vmm.vm(*id).unwrap().devices.values().next().unwrap().path).collect();
    assert_eq!(paths, [Path::Vfio, Path::Mdev]);
    for (_, id) in vms {
        vmm.shutdown(&mut c, id).unwrap();
    }
    assert!(vmm.idle() && c.lending_idle());
}

#[test]
fn a_bad_description_points_at_its_field_and_starts_nothing() {
    for (json, path) in [
        (r#"[{"name": "v", "host": "nope", "memory": 67108864}]"#, "/vms/0/host"),
        (r#"[{"name": "v", "host": "lender", "memory": 1000}]"#, "/vms/0/memory"),
        (r#"[{"name": "lender", "host": "lender", "memory": 67108864}]"#, "/vms/0/name"),
        (r#"[{"name": "v", "host": "remote", "memory": 67108864, "devices": [{"device": "gpu0", "path": "vfio"}]}]"#, "/vms/0/devices/0/path"),
        (
            r#"[{"name": "v", "host": "lender", "memory": 67108864, "devices": [{"device": "gpu0"}]},
             {"name": "w", "host": "remote", "memory": 67108864, "devices": [{"device": "gpu0"}]}]"#,
            "/vms/1/devices/0/device",
        ),
    ] {
        let mut c = Cluster::from_json(JSON).unwrap();
        let mut vmm = Vmm::default();
        let e = start(&mut c, &mut vmm, &specs(json)).err().unwrap_or_else(|| panic!("{json} was accepted"));
        assert_eq!(e.path, path, "{}", e.fault);
        assert!(vmm.idle() && c.lending_idle() && vmm.anomalies.is_empty(), "{path}: something stayed started");
    }
}
