//! Flows over the API: their life, delayed starts, concurrency keys and
//! priority, their size, large outputs,
//! for_each volume.

mod bodies;
mod concurrency;
mod delayed;
mod flow_size;
mod lifecycle;
mod outputs;
mod query;
mod volume;
