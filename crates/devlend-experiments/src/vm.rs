//! The paper figures measured in a VM (000 §7.3-7.5), on devlend-vm's hypervisor model.

pub mod d4;
pub mod d5;
pub mod d6;
pub mod epoch;
pub mod error;

pub use error::VmRunError;
