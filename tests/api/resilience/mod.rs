//! What survives: restarts, outages, SIGKILL, fairness under a bad step, the edges of a process's life.

mod backups;
mod chaos;
mod durability;
mod edges;
mod failover;
mod fairness;
mod outages;
