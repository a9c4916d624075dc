//! Typed identities. Every index into the machine model has its own type, so a node number can
//! never be passed where a core number is expected (STYLE.md, habit 3).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into the owning table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A core (a logical CPU) of the machine model: a dense index `0..n`. On a live machine the
    /// operating system's CPU number is kept beside it in `Core::os_cpu`.
    CoreId
);
id_type!(
    /// A core class: cores of one class are identical (HASS section 4, "processor class").
    ClassId
);
id_type!(
    /// A module: cores sharing an FPU and an L2, as on AMD Bulldozer (BulldOver section 2).
    ModuleId
);
id_type!(
    /// A last-level-cache domain: the cores sharing one last-level cache.
    LlcId
);
id_type!(
    /// A NUMA node: cores attached to one memory controller (AMPS section 2.4).
    NodeId
);
id_type!(
    /// A thread, unique within one run (a simulation or a live session).
    ThreadId
);
id_type!(
    /// An application (a process): a group of threads sharing an address space.
    AppId
);
