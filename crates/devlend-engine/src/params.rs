//! The `[timing]` table of `params/hardware.toml`: every constant the engine charges, with its
//! source there. The engine reads a fabric's own effective parameters (`Fabric::tuning`, the
//! defaults merged with the topology's `params` section); [`timing`] is only those defaults.

pub use devlend_fabric::tuning::Timing;

/// The compiled-in defaults.
pub fn timing() -> &'static Timing {
    devlend_fabric::tuning::default_timing()
}

#[cfg(test)]
mod tests {
    #[test]
    fn timing_table_parses() {
        assert_eq!(super::timing().max_payload, 256);
    }
}
