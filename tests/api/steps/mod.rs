//! The step catalog: registering, reading, large catalogs.

mod catalog;
mod limits;
