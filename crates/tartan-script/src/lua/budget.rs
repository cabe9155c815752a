//! One evaluation's bounds as Luau's interrupt enforces them.
//!
//! Luau calls the interrupt at every safepoint: each function call, each
//! loop iteration, and each step of its pattern matcher (so a backtracking
//! `string.find` is bounded too). The interrupt counts safepoints against
//! the instruction budget, reads the clock every [`CLOCK_EVERY`] of them,
//! and reads the cancel flag every time.
//!
//! A limit, once hit, is final: the budget remembers it, and from then on
//! every safepoint raises it again. So a `pcall` that catches it gains
//! nothing (the next call or loop iteration raises it anew), an `xpcall`
//! handler that loops is stopped like any loop, and an answer the script
//! returns after catching it is thrown away: the evaluation ends with the
//! limit it hit, within at most one safepoint's work of it.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Lua, VmState};

use crate::cancel::Cancel;

/// How many safepoints pass between two readings of the clock (a reading
/// costs about what a few safepoints do).
const CLOCK_EVERY: u64 = 32;

/// Which bound ended an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trip {
    Instructions = 1,
    Time = 2,
    Cancelled = 3,
}

impl Trip {
    fn from_u8(n: u8) -> Option<Trip> {
        match n {
            1 => Some(Trip::Instructions),
            2 => Some(Trip::Time),
            3 => Some(Trip::Cancelled),
            _ => None,
        }
    }

    fn message(self) -> &'static str {
        match self {
            Trip::Instructions => "tartan: instruction limit",
            Trip::Time => "tartan: time limit",
            Trip::Cancelled => "tartan: cancelled",
        }
    }
}

/// What one evaluation may still spend, shared with its interrupt.
pub(super) struct Budget {
    spent: AtomicU64,
    instructions: u64,
    started: Instant,
    wall: Duration,
    tripped: AtomicU8,
    cancel: Option<Cancel>,
}

impl Budget {
    pub(super) fn new(instructions: u64, wall: Duration, cancel: Option<Cancel>) -> Arc<Budget> {
        Arc::new(Budget {
            spent: AtomicU64::new(0),
            instructions,
            started: Instant::now(),
            wall,
            tripped: AtomicU8::new(0),
            cancel,
        })
    }

    /// The bound this evaluation hit, if any.
    pub(super) fn tripped(&self) -> Option<Trip> {
        Trip::from_u8(self.tripped.load(Ordering::Relaxed))
    }

    /// Whether the time is up or the evaluation was cancelled: read
    /// outside the VM too (while its answer is converted).
    pub(super) fn overdue(&self) -> Option<Trip> {
        if let Some(trip) = self.tripped() {
            return Some(trip);
        }
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Some(self.trip(Trip::Cancelled));
        }
        if self.started.elapsed() > self.wall {
            return Some(self.trip(Trip::Time));
        }
        None
    }

    fn trip(&self, trip: Trip) -> Trip {
        // The first bound hit is the one reported.
        let _ = self
            .tripped
            .compare_exchange(0, trip as u8, Ordering::Relaxed, Ordering::Relaxed);
        self.tripped().unwrap_or(trip)
    }

    /// One safepoint.
    fn check(&self) -> Result<(), Trip> {
        if let Some(trip) = self.tripped() {
            return Err(trip);
        }
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Err(self.trip(Trip::Cancelled));
        }
        let spent = self.spent.fetch_add(1, Ordering::Relaxed) + 1;
        if spent > self.instructions {
            return Err(self.trip(Trip::Instructions));
        }
        if spent.is_multiple_of(CLOCK_EVERY) && self.started.elapsed() > self.wall {
            return Err(self.trip(Trip::Time));
        }
        Ok(())
    }
}

/// Enforce `budget` at every safepoint of the state's evaluations.
pub(super) fn arm(lua: &Lua, budget: Arc<Budget>) {
    lua.set_interrupt(move |_| match budget.check() {
        Ok(()) => Ok(VmState::Continue),
        Err(trip) => Err(mlua::Error::runtime(trip.message())),
    });
}
