//! The attack suite (`devlend_vm::attacks`), one test per case: blocked, recorded, no memory changed.

use devlend_vm::{attacks, SetupError};

const JSON: &str = include_str!("../expansion-chassis-vm.json");

fn case(name: &str, by: &str, says: &str) {
    let o = attacks::run(name, JSON).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!((o.case, o.blocked_by), (name, by));
    assert!(o.record.contains(says), "{name}: {}", o.record);
}

#[test]
fn dma_write_outside_guest_memory() {
    case("dma_write_outside_guest_memory", "IOMMU", "IOMMU fault in host lender");
}
#[test]
fn dma_read_outside_guest_memory() {
    case("dma_read_outside_guest_memory", "IOMMU", "IOMMU fault in host lender");
}
#[test]
fn dma_into_the_ntb_window() {
    case("dma_into_the_ntb_window", "IOMMU", "IOMMU fault in host lender");
}
#[test]
fn dma_into_another_vm() {
    case("dma_into_another_vm", "IOMMU", "IOMMU fault in host lender");
}
#[test]
fn dma_stale_after_hot_remove() {
    case("dma_stale_after_hot_remove", "IOMMU", "IOMMU fault in host lender");
}
#[test]
fn config_bar_relocation() {
    case("config_bar_relocation", "mediated parent", "BAR relocation");
}
#[test]
fn config_msix_table_redirection() {
    case("config_msix_table_redirection", "mediated parent", "MSI-X table redirection");
}
#[test]
fn config_msix_table_move() {
    case("config_msix_table_move", "mediated parent", "read-only config register");
}
#[test]
fn config_bus_master_of_another_function() {
    case("config_bus_master_of_another_function", "mediated parent", "outside the VM");
}

#[test]
fn every_case_has_a_test_and_unknown_names_are_errors() {
    let src = include_str!("attacks.rs");
    for n in attacks::names() {
        assert!(src.contains(&format!("fn {n}()")), "no test for {n}");
    }
    let e = attacks::run("nope", JSON).unwrap_err();
    assert!(matches!(&e, attacks::AttackError::UnknownCase { name } if name == "nope"), "{e}");
    assert!(e.to_string().contains("dma_into_another_vm"), "{e}");
}

#[test]
fn a_case_on_a_testbed_it_cannot_build_names_the_case_and_the_step() {
    let e = attacks::run("dma_into_another_vm", "{").unwrap_err();
    let attacks::AttackError::Case { case, error: attacks::CaseError::Setup(setup) } = &e else { panic!("{e:?}") };
    let SetupError::Host { step, .. } = setup.as_ref() else { panic!("{e:?}") };
    assert_eq!((*case, *step), ("dma_into_another_vm", "building the cluster"));
    let no_gpu1 = JSON.replace("\"gpu1\"", "\"gpux\"");
    let e = attacks::run("msi_from_passthrough_gpu_into_another_vm", &no_gpu1).unwrap_err();
    let attacks::AttackError::Case { error: attacks::CaseError::Setup(setup), .. } = &e else { panic!("{e:?}") };
    let SetupError::Host { device, .. } = setup.as_ref() else { panic!("{e:?}") };
    assert_eq!(device, "gpu1", "{e}");
}
#[test]
fn msi_from_passthrough_gpu_into_another_vm() {
    case("msi_from_passthrough_gpu_into_another_vm", "interrupt remapping", "interrupt remapping fault in host lender");
}
#[test]
fn msi_from_mediated_gpu_into_a_vm_on_the_lender() {
    case("msi_from_mediated_gpu_into_a_vm_on_the_lender", "interrupt remapping", "interrupt remapping fault in host lender");
}
