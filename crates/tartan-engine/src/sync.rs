//! The engine's one way to take a `std::sync::Mutex` or `RwLock`.
//!
//! A lock is poisoned when a thread panicked while holding it. The engine's
//! locks guard maps and counters that every holder changes whole under the
//! lock, so what a panicking holder left is still consistent: the guard is
//! taken anyway rather than the panic spreading to every later caller.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
