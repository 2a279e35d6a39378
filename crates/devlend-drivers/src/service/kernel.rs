//! The kernel interface as a trait object. `devlend_host::Os` has a generic method
//! (`run_hardware`), so a driver behind a service trait ([`super::block`], [`super::copy`]),
//! called through `dyn`, cannot take `&mut impl Os`: it takes `&mut dyn DynOs`, which every
//! `Os` is ([`DynOs`]'s blanket impl), and wraps it in [`AnyOs`] to run its `Os`-generic body
//! unchanged. Every call goes through to the kernel it wraps, the defaulted ones (`poll_for`,
//! `wait_irq_for`, `spend`...) included, so a driver does the same through either. A method
//! added to `Os` is to be added here too (to [`DynOs`] and both forwarding lists): else `AnyOs`
//! would answer it with `Os`'s default, not the wrapped kernel's own;
//! `tests::every_os_method_is_forwarded_both_ways` fails until it is.

use devlend_fabric::model::HostId;
use devlend_fabric::Fabric;
use devlend_host::{DevId, DmaDir, HResult, Os};

/// `Os` without its generic method: `run_hardware` takes a `dyn FnMut`.
pub trait DynOs {
    fn host(&self) -> HostId;
    fn run_hardware_dyn(&mut self, hw: &mut dyn FnMut(&mut Fabric));
    fn find(&self, name: &str) -> HResult<DevId>;
    fn pci_iomap(&self, dev: DevId, bar: u8) -> HResult<u64>;
    fn pci_resource_len(&self, dev: DevId, bar: u8) -> HResult<u64>;
    fn pci_set_master(&mut self, dev: DevId) -> HResult<()>;
    fn pci_clear_master(&mut self, dev: DevId) -> HResult<()>;
    fn pci_read_config(&self, dev: DevId, off: usize, len: usize) -> HResult<u32>;
    fn kmalloc(&mut self, size: u64) -> HResult<u64>;
    fn kfree(&mut self, phys: u64) -> HResult<()>;
    fn write(&mut self, addr: u64, data: &[u8]) -> HResult<()>;
    fn read(&mut self, addr: u64, len: usize) -> HResult<Vec<u8>>;
    fn dma_map_single(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
    fn dma_unmap_single(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
    fn dma_alloc_coherent(&mut self, dev: DevId, len: u64) -> HResult<(u64, u64)>;
    fn dma_free_coherent(&mut self, dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()>;
    fn dma_map_resource(&mut self, dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
    fn dma_unmap_resource(&mut self, dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
    fn request_irq(&mut self, dev: DevId, entry: u16, handler: u32) -> HResult<u8>;
    fn free_irq(&mut self, dev: DevId, entry: u16) -> HResult<()>;
    fn irq_count(&mut self, vector: u8) -> u64;
    fn wait_irq(&mut self, vector: u8, seen: u64) -> HResult<u64>;
    fn spend(&mut self, ps: u64);
    fn poll(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>>;
    fn wait_irq_for(&mut self, vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>>;
    fn poll_for(&mut self, addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>>;
}

/// Forwards each call to `O`'s own (`Os::run_hardware` runs the closure once).
macro_rules! forward {
    () => {};
    (ref $name:ident($($a:ident: $t:ty),*) -> $r:ty; $($rest:tt)*) => {
        fn $name(&self $(, $a: $t)*) -> $r { Os::$name(self $(, $a)*) }
        forward! { $($rest)* }
    };
    (mut $name:ident($($a:ident: $t:ty),*) -> $r:ty; $($rest:tt)*) => {
        fn $name(&mut self $(, $a: $t)*) -> $r { Os::$name(self $(, $a)*) }
        forward! { $($rest)* }
    };
}

impl<O: Os> DynOs for O {
    fn run_hardware_dyn(&mut self, hw: &mut dyn FnMut(&mut Fabric)) {
        Os::run_hardware(self, hw)
    }
    forward! {
        ref host() -> HostId;
        ref find(name: &str) -> HResult<DevId>;
        ref pci_iomap(dev: DevId, bar: u8) -> HResult<u64>;
        ref pci_resource_len(dev: DevId, bar: u8) -> HResult<u64>;
        mut pci_set_master(dev: DevId) -> HResult<()>;
        mut pci_clear_master(dev: DevId) -> HResult<()>;
        ref pci_read_config(dev: DevId, off: usize, len: usize) -> HResult<u32>;
        mut kmalloc(size: u64) -> HResult<u64>;
        mut kfree(phys: u64) -> HResult<()>;
        mut write(addr: u64, data: &[u8]) -> HResult<()>;
        mut read(addr: u64, len: usize) -> HResult<Vec<u8>>;
        mut dma_map_single(dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
        mut dma_unmap_single(dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
        mut dma_alloc_coherent(dev: DevId, len: u64) -> HResult<(u64, u64)>;
        mut dma_free_coherent(dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()>;
        mut dma_map_resource(dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
        mut dma_unmap_resource(dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
        mut request_irq(dev: DevId, entry: u16, handler: u32) -> HResult<u8>;
        mut free_irq(dev: DevId, entry: u16) -> HResult<()>;
        mut irq_count(vector: u8) -> u64;
        mut wait_irq(vector: u8, seen: u64) -> HResult<u64>;
        mut spend(ps: u64) -> ();
        mut poll(addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>>;
        mut wait_irq_for(vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>>;
        mut poll_for(addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>>;
    }
}

/// A `dyn DynOs` as an `Os` again, for a driver's `Os`-generic code.
pub struct AnyOs<'a>(pub &'a mut dyn DynOs);

/// Forwards each call to the wrapped kernel's.
macro_rules! back {
    () => {};
    (ref $name:ident($($a:ident: $t:ty),*) -> $r:ty; $($rest:tt)*) => {
        fn $name(&self $(, $a: $t)*) -> $r { self.0.$name($($a),*) }
        back! { $($rest)* }
    };
    (mut $name:ident($($a:ident: $t:ty),*) -> $r:ty; $($rest:tt)*) => {
        fn $name(&mut self $(, $a: $t)*) -> $r { self.0.$name($($a),*) }
        back! { $($rest)* }
    };
}

impl Os for AnyOs<'_> {
    fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
        let (mut hw, mut out) = (Some(hw), None);
        self.0.run_hardware_dyn(&mut |f| out = hw.take().map(|hw| hw(f)));
        out.expect("the kernel runs the hardware once")
    }
    back! {
        ref host() -> HostId;
        ref find(name: &str) -> HResult<DevId>;
        ref pci_iomap(dev: DevId, bar: u8) -> HResult<u64>;
        ref pci_resource_len(dev: DevId, bar: u8) -> HResult<u64>;
        mut pci_set_master(dev: DevId) -> HResult<()>;
        mut pci_clear_master(dev: DevId) -> HResult<()>;
        ref pci_read_config(dev: DevId, off: usize, len: usize) -> HResult<u32>;
        mut kmalloc(size: u64) -> HResult<u64>;
        mut kfree(phys: u64) -> HResult<()>;
        mut write(addr: u64, data: &[u8]) -> HResult<()>;
        mut read(addr: u64, len: usize) -> HResult<Vec<u8>>;
        mut dma_map_single(dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
        mut dma_unmap_single(dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
        mut dma_alloc_coherent(dev: DevId, len: u64) -> HResult<(u64, u64)>;
        mut dma_free_coherent(dev: DevId, len: u64, cpu: u64, dma: u64) -> HResult<()>;
        mut dma_map_resource(dev: DevId, phys: u64, len: u64, dir: DmaDir) -> HResult<u64>;
        mut dma_unmap_resource(dev: DevId, dma: u64, len: u64, dir: DmaDir) -> HResult<()>;
        mut request_irq(dev: DevId, entry: u16, handler: u32) -> HResult<u8>;
        mut free_irq(dev: DevId, entry: u16) -> HResult<()>;
        mut irq_count(vector: u8) -> u64;
        mut wait_irq(vector: u8, seen: u64) -> HResult<u64>;
        mut spend(ps: u64) -> ();
        mut poll(addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool) -> HResult<Vec<u8>>;
        mut wait_irq_for(vector: u8, seen: u64, timeout_ps: u64) -> HResult<Option<u64>>;
        mut poll_for(addr: u64, len: usize, what: &str, done: fn(&[u8]) -> bool, timeout_ps: u64) -> HResult<Option<Vec<u8>>>;
    }
}

#[cfg(test)]
mod tests {
    /// The `fn` names declared between `open` and the next line that is only `}` at the block's
    /// indentation.
    fn fns_in(src: &str, open: &str) -> Vec<String> {
        let at = src.find(open).unwrap_or_else(|| panic!("`{open}` not found"));
        let indent = &src[src[..at].rfind('\n').map_or(0, |i| i + 1)..at];
        let close = format!("\n{indent}}}");
        let body = &src[at..at + src[at..].find(&close).expect("the block closes")];
        body.split("fn ").skip(1).map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()).collect()
    }

    /// The names a forwarding macro's list gives: each entry `ref NAME(` or `mut NAME(`.
    fn listed(src: &str, open: &str) -> Vec<String> {
        let at = src.find(open).unwrap_or_else(|| panic!("`{open}` not found"));
        let body = &src[at..at + src[at..].find("\n    }").expect("the list closes")];
        body.lines()
            .filter_map(|l| l.trim().strip_prefix("ref ").or_else(|| l.trim().strip_prefix("mut ")))
            .map(|l| l.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
            .collect()
    }

    #[test]
    fn every_os_method_is_forwarded_both_ways() {
        // A method added to `Os` and left out here would be answered by `Os`'s default (or not
        // compile, when it has none) instead of by the wrapped kernel's own.
        let os = fns_in(include_str!("../../../devlend-host/src/api.rs"), "pub trait Os {");
        let here = include_str!("kernel.rs");
        let (dyn_os, forward, back) = (fns_in(here, "pub trait DynOs {"), listed(here, "\n    forward! {\n"), listed(here, "\n    back! {\n"));
        assert!(os.len() > 20, "{os:?}");
        for name in os.iter().filter(|n| *n != "run_hardware") {
            assert!(dyn_os.contains(name), "DynOs lacks `{name}`");
            assert!(forward.contains(name), "DynOs for every Os does not forward `{name}`");
            assert!(back.contains(name), "AnyOs does not forward `{name}`");
        }
        assert!(dyn_os.contains(&"run_hardware_dyn".to_string()));
    }
}
