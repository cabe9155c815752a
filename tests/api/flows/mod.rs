//! Flows over the API: their life, delayed starts, their size, large outputs,
//! for_each volume.

mod bodies;
mod delayed;
mod flow_size;
mod lifecycle;
mod outputs;
mod query;
mod volume;
