//! The kernel interface as a trait object. `devlend_host::Os` has a generic method
//! (`run_hardware`), so a driver behind a service trait ([`super::block`], [`super::copy`]),
//! called through `dyn`, cannot take `&mut impl Os`: it takes `&mut dyn DynOs`, which every
//! `Os` is ([`DynOs`]'s blanket impl), and wraps it in [`AnyOs`] to run its `Os`-generic body
//! unchanged. Every call goes through to the kernel it wraps, the defaulted ones (`poll_for`,
//! `wait_irq_for`, `spend`...) included, so a driver does the same through either. The calls are
//! listed once (`kernel_calls!` below), and that one list makes [`DynOs`], its blanket impl and
//! [`AnyOs`]'s impl. A method added to `Os` is to be added to the list too: else `AnyOs` would
//! answer it with `Os`'s default, not the wrapped kernel's own;
//! `tests::every_os_method_is_forwarded_both_ways` fails until it is.

use devlend_fabric::model::HostId;
use devlend_fabric::Fabric;
use devlend_host::{DevId, DmaDir, HResult, Os};

/// A `dyn DynOs` as an `Os` again, for a driver's `Os`-generic code.
pub struct AnyOs<'a>(pub &'a mut dyn DynOs);

/// From one list of `Os`'s calls (`ref` for `&self`, `mut` for `&mut self`): the trait [`DynOs`],
/// its impl for every `Os` (each call to the kernel's own) and `Os` for [`AnyOs`] (each call to
/// the wrapped kernel's).
macro_rules! kernel_calls {
    ($($recv:ident $name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {
        /// `Os` without its generic method: `run_hardware` takes a `dyn FnMut`.
        pub trait DynOs {
            fn run_hardware_dyn(&mut self, hw: &mut dyn FnMut(&mut Fabric));
            $(kernel_calls!(@decl $recv $name($($a: $t),*) -> $r);)*
        }

        impl<O: Os> DynOs for O {
            fn run_hardware_dyn(&mut self, hw: &mut dyn FnMut(&mut Fabric)) {
                Os::run_hardware(self, hw)
            }
            $(kernel_calls!(@own $recv $name($($a: $t),*) -> $r);)*
        }

        impl Os for AnyOs<'_> {
            fn run_hardware<R>(&mut self, hw: impl FnOnce(&mut Fabric) -> R) -> R {
                let (mut hw, mut out) = (Some(hw), None);
                self.0.run_hardware_dyn(&mut |f| out = hw.take().map(|hw| hw(f)));
                out.expect("the kernel runs the hardware once")
            }
            $(kernel_calls!(@back $recv $name($($a: $t),*) -> $r);)*
        }
    };
    (@decl ref $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&self $(, $a: $t)*) -> $r; };
    (@decl mut $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&mut self $(, $a: $t)*) -> $r; };
    (@own ref $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&self $(, $a: $t)*) -> $r { Os::$name(self $(, $a)*) } };
    (@own mut $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&mut self $(, $a: $t)*) -> $r { Os::$name(self $(, $a)*) } };
    (@back ref $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&self $(, $a: $t)*) -> $r { self.0.$name($($a),*) } };
    (@back mut $name:ident($($a:ident: $t:ty),*) -> $r:ty) => { fn $name(&mut self $(, $a: $t)*) -> $r { self.0.$name($($a),*) } };
}

kernel_calls! {
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

    #[test]
    fn every_os_method_is_forwarded_both_ways() {
        // A method added to `Os` and left out of the list would be answered by `Os`'s default (or
        // not compile, when it has none) instead of by the wrapped kernel's own.
        let os = fns_in(include_str!("../../../devlend-host/src/api.rs"), "pub trait Os {");
        let src = include_str!("kernel.rs");
        let at = src.find("\nkernel_calls! {\n").expect("the list of calls");
        let listed: Vec<String> = src[at..at + src[at..].find("\n}").expect("the list closes")]
            .lines()
            .filter_map(|l| l.trim().strip_prefix("ref ").or_else(|| l.trim().strip_prefix("mut ")))
            .map(|l| l.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
            .collect();
        assert!(os.len() > 20, "{os:?}");
        for name in os.iter().filter(|n| *n != "run_hardware") {
            assert!(listed.contains(name), "kernel_calls! does not list `{name}`");
        }
    }
}
