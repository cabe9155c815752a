//! Flows over the API: their life, their size, large outputs, for_each volume.

mod bodies;
mod flow_size;
mod lifecycle;
mod outputs;
mod query;
mod volume;
