//! Engines and live runtimes: the warm pools, the registry of kept runtimes,
//! their directories, their lineage and the outer bound on their turns. It
//! knows no bus and no operation.

pub(crate) mod bounded;
pub(crate) mod engines;
pub(crate) mod isolation;
pub(crate) mod kept;
pub(crate) mod lineage;
pub(crate) mod links;
pub(crate) mod loading;
pub(crate) mod pool;
pub(crate) mod ready;
pub(crate) mod registry;
pub(crate) mod slot;
pub(crate) mod transit;
pub(crate) mod workdir;
