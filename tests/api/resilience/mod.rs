//! What survives: restarts, outages, SIGKILL, fairness under a bad step, the edges of a process's life.

mod chaos;
mod durability;
mod edges;
mod fairness;
mod outages;
