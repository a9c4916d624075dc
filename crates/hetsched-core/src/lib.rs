//! hetsched-core: the machine model, thread observations, the `Policy` trait and the placement
//! policies of hetsched. Nothing here calls the operating system: the simulator and the live Linux
//! backend both feed it values and apply what it answers.

pub mod cpuset;
pub mod ids;
pub mod input;
pub mod machine_file;
pub mod observe;
pub mod policies;
pub mod policy;
pub mod prefetch;
pub mod presets;
pub mod rng;
pub mod shapes;
pub mod signature;
pub mod topology;

pub use cpuset::CpuSet;
pub use ids::{AppId, ClassId, CoreId, Id, IdVec, LlcId, ModuleId, NodeId, ThreadId};
pub use input::InputError;
pub use observe::{CoreObs, Counters, LlcTraffic, ThreadObs, ThreadState, View};
pub use policy::{Hint, PageMove, Placement, Policy};
pub use signature::Signature;
pub use topology::{
    Cache, Core, CoreClass, Module, Node, Partition, Topology, TopologyError, TopologySpec,
};
