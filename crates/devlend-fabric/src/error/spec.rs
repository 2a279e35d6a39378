//! What is wrong with a topology description ([`SpecError`]): a JSON pointer into it (`path`,
//! the context the Python front end turns into file, line and field) and a typed [`SpecFault`],
//! grouped by what is wrong: a name ([`NameFault`]), a host's address map ([`HostFault`]), a
//! count or size of a switch, device or NTB ([`DeviceFault`]), a BAR ([`BarFault`]), the links
//! and cables ([`LinkFault`], a link end: [`EndFault`]), a `params` override ([`ParamFault`]),
//! enumeration running out of bus numbers or MMIO space ([`ResourceFault`]), or a wrapped error
//! of the parser or of the live fabric. Each renders the text the loader printed when the fault
//! was a `String` (Python's `devlend.SpecError` and the CLI show it; tests assert it).
//!
//! `SpecError<F>` is generic over its fault so that an outer layer reports its own typed fault at
//! a pointer into the same description (`devlend_vm::describe`: `SpecError<VmSpecFault>`): the
//! fabric cannot name the outer crates' errors, and they carry theirs typed, not as text.

use super::FabricError;
use std::fmt;
use std::sync::Arc;

mod bar;
mod device;
mod end;
mod host;
mod link;
mod name;
mod param;
mod resource;
pub use bar::BarFault;
pub use device::DeviceFault;
pub use end::EndFault;
pub use host::HostFault;
pub use link::LinkFault;
pub use name::NameFault;
pub use param::ParamFault;
pub use resource::ResourceFault;

/// A fault at `path` in a description; `F` is the fabric's [`SpecFault`] unless an outer layer
/// reports its own. The fault is boxed: the error stays a `String` and a pointer (32 bytes, 48
/// when it held two `String`s) wherever it is carried (`HostError`, `RdmaError`, ...), however
/// many names and numbers its fault holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError<F = SpecFault> {
    /// JSON pointer into the topology description, "" for the whole document.
    pub path: String,
    pub fault: Box<F>,
}

impl<F> SpecError<F> {
    pub fn at(path: impl Into<String>, fault: impl Into<F>) -> Self {
        SpecError { path: path.into(), fault: Box::new(fault.into()) }
    }
}

impl<F: fmt::Display> fmt::Display for SpecError<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.fault)
        } else {
            write!(f, "{}: {}", self.path, self.fault)
        }
    }
}

impl<F: fmt::Display + fmt::Debug> std::error::Error for SpecError<F> {}

/// What is wrong with a topology description, by group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecFault {
    /// The text is not JSON of a description's shape (serde_json's error: line, column, why).
    Malformed(JsonError),
    Name(NameFault),
    Host(HostFault),
    Device(DeviceFault),
    Bar(BarFault),
    Link(LinkFault),
    Param(ParamFault),
    /// Boxed: a BAR that cannot be placed names the BAR, function, port and window.
    Resource(Box<ResourceFault>),
    /// A request of the description (a `setup` step, interrupt remapping) the fabric refused.
    Fabric(FabricError),
}

impl fmt::Display for SpecFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecFault::Malformed(e) => write!(f, "malformed description: {e}"),
            SpecFault::Name(e) => write!(f, "{e}"),
            SpecFault::Host(e) => write!(f, "{e}"),
            SpecFault::Device(e) => write!(f, "{e}"),
            SpecFault::Bar(e) => write!(f, "{e}"),
            SpecFault::Link(e) => write!(f, "{e}"),
            SpecFault::Param(e) => write!(f, "{e}"),
            SpecFault::Resource(e) => write!(f, "{e}"),
            SpecFault::Fabric(e) => write!(f, "{e}"),
        }
    }
}

/// Each group's fault is a description's fault.
macro_rules! into_spec_fault {
    ($($group:ty => $variant:ident),*) => {$(
        impl From<$group> for SpecFault {
            fn from(e: $group) -> Self {
                SpecFault::$variant(e)
            }
        }
    )*};
}
into_spec_fault!(NameFault => Name, HostFault => Host, DeviceFault => Device, BarFault => Bar, LinkFault => Link, ParamFault => Param, FabricError => Fabric, JsonError => Malformed);

impl From<ResourceFault> for SpecFault {
    fn from(e: ResourceFault) -> Self {
        SpecFault::Resource(Box::new(e))
    }
}

/// serde_json's error, shared so that a [`SpecError`] can be cloned (`serde_json::Error` is not
/// `Clone`). Two are equal when they are at the same line and column, of the same category, and
/// say the same (serde_json keeps its reason private: its text is the only way to compare it).
#[derive(Clone, Debug)]
pub struct JsonError(pub Arc<serde_json::Error>);

impl From<serde_json::Error> for JsonError {
    fn from(e: serde_json::Error) -> Self {
        JsonError(Arc::new(e))
    }
}

impl PartialEq for JsonError {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&*self.0, &*other.0);
        Arc::ptr_eq(&self.0, &other.0) || ((a.line(), a.column(), a.classify()) == (b.line(), b.column(), b.classify()) && a.to_string() == b.to_string())
    }
}

impl Eq for JsonError {}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Unknown;

    /// The wrapped errors render as the loader printed them, after the pointer when there is one.
    #[test]
    fn wrapped_errors_render_the_loader_s_message() {
        let json = serde_json::from_str::<crate::spec::TopologySpec>("{\"name\": 3}").expect_err("not a description");
        let malformed = SpecError::<SpecFault>::at("", JsonError::from(json));
        assert_eq!(malformed.to_string(), "malformed description: invalid type: integer `3`, expected a string at line 1 column 10");
        assert_eq!(malformed.clone(), malformed);
        let refused = SpecError::<SpecFault>::at("/setup/2", FabricError::from(Unknown::Ntb { name: "x".into() }));
        assert_eq!(refused.to_string(), "/setup/2: no NTB named 'x'");
    }
}
