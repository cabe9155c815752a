//! The evaluation context: step, memory, time and depth accounting, and the
//! constructors of heap values (which charge memory before allocating).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lazy::{Gen, LazyState};
use crate::node::LambdaDef;
use crate::value::{
    add_live, live_bytes, Closure, ConsCell, Env, Frame, Key, Lazy, ListCell, NativeFn, NativeKind, ObjData,
    ObjView, Slots, StrBox, Value, VecData, VecView, NODE_BYTES, SLOT_BYTES,
};
use crate::{EvalError, Limits};

/// Nested evaluations (non-tail calls, lazy forcing, value walks) allowed
/// before the evaluation fails; Ale itself would grow its Go stack instead.
pub(crate) const MAX_DEPTH: usize = 10_000;

/// Stack the evaluation thread gets, and the part of it evaluation may use
/// (checked by address, so frame sizes of debug builds cannot overflow it).
/// (Measured: about 0.6 KiB per level optimised, 5 KiB unoptimised.)
pub(crate) const EVAL_STACK_BYTES: usize = 64 * 1024 * 1024;
const STACK_BUDGET_BYTES: usize = 56 * 1024 * 1024;

/// How often (in steps) the wall clock is read (a power of two).
const CLOCK_EVERY: u64 = 1024;

/// Bytes allocated between clock reads, so that loops copying large values
/// (few steps, much work) still notice the deadline.
const CLOCK_EVERY_BYTES: usize = 1 << 20;

pub struct Ctx {
    max_steps: u64,
    steps: u64,
    max_memory: usize,
    max_duration: Duration,
    deadline: Option<Instant>,
    depth: usize,
    stack_base: usize,
    allocated_since_clock: usize,
}

#[inline(always)]
fn stack_address() -> usize {
    let marker = 0u8;
    std::ptr::addr_of!(marker) as usize
}

pub(crate) type R<T> = Result<T, EvalError>;

pub(crate) fn rt<T>(msg: impl Into<String>) -> R<T> {
    Err(EvalError::Runtime(msg.into()))
}

impl Ctx {
    pub fn new(limits: &Limits) -> Ctx {
        Ctx {
            max_steps: limits.max_steps,
            steps: 0,
            max_memory: limits.max_memory_bytes,
            max_duration: limits.max_duration,
            deadline: Instant::now().checked_add(limits.max_duration),
            depth: 0,
            stack_base: stack_address(),
            allocated_since_clock: 0,
        }
    }

    /// Counts one step of evaluation.
    #[inline]
    pub fn tick(&mut self) -> R<()> {
        self.steps += 1;
        if self.steps > self.max_steps {
            return Err(EvalError::StepLimit(self.max_steps));
        }
        if self.steps & (CLOCK_EVERY - 1) == 0 {
            self.check_clock()?;
        }
        Ok(())
    }

    pub fn check_clock(&self) -> R<()> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(EvalError::Timeout(self.max_duration)),
            _ => Ok(()),
        }
    }

    /// Enters a nested evaluation; pair with `leave`.
    #[inline]
    pub fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH || stack_address().abs_diff(self.stack_base) > STACK_BUDGET_BYTES {
            self.depth -= 1;
            return rt(format!("maximum evaluation depth ({MAX_DEPTH}) exceeded"));
        }
        Ok(())
    }

    pub fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Runs `f` one level deeper.
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Ctx) -> R<T>) -> R<T> {
        self.enter()?;
        let r = f(self);
        self.leave();
        r
    }

    /// Charges `bytes` of live memory, failing before the allocation is made.
    pub fn charge(&mut self, bytes: usize) -> R<usize> {
        if add_live(bytes) > self.max_memory {
            return Err(EvalError::MemoryLimit(self.max_memory));
        }
        self.allocated_since_clock += bytes;
        if self.allocated_since_clock >= CLOCK_EVERY_BYTES {
            self.allocated_since_clock = 0;
            self.check_clock()?;
        }
        Ok(bytes)
    }

    /// Checks that `extra` more bytes would still fit, without charging them.
    pub fn check_room(&self, extra: usize) -> R<()> {
        if live_bytes().saturating_add(extra) > self.max_memory {
            return Err(EvalError::MemoryLimit(self.max_memory));
        }
        Ok(())
    }

    pub fn new_str(&mut self, text: String) -> R<Value> {
        let acct = self.charge(text.len() + NODE_BYTES)?;
        Ok(Value::Str(Arc::new(StrBox { text, acct })))
    }

    pub fn new_vec(&mut self, items: Vec<Value>) -> R<Value> {
        let acct = self.charge(items.len() * SLOT_BYTES + NODE_BYTES)?;
        let end = items.len();
        Ok(Value::Vector(VecView {
            data: Arc::new(VecData { items, acct }),
            start: 0,
            end,
        }))
    }

    /// Builds a proper list (`Null` when empty).
    pub fn new_list(&mut self, items: Vec<Value>) -> R<Value> {
        let mut res = Value::Null;
        for v in items.into_iter().rev() {
            res = self.prepend_list(v, res)?;
        }
        Ok(res)
    }

    /// `tail` must be `Null` or a `List`.
    pub fn prepend_list(&mut self, head: Value, tail: Value) -> R<Value> {
        let len = match &tail {
            Value::List(c) => c.len + 1,
            _ => 1,
        };
        let acct = self.charge(NODE_BYTES)?;
        Ok(Value::List(Arc::new(ListCell {
            head,
            tail,
            len,
            acct,
        })))
    }

    /// Builds an object from sorted, unique entries.
    pub fn new_obj(&mut self, entries: Vec<(Key, Value)>) -> R<Value> {
        let acct = self.charge(entries.len() * (SLOT_BYTES + std::mem::size_of::<Key>()) + NODE_BYTES)?;
        Ok(Value::Object(ObjView {
            data: Arc::new(ObjData { entries, acct }),
            start: 0,
        }))
    }

    pub fn new_cons(&mut self, car: Value, cdr: Value) -> R<Value> {
        let acct = self.charge(NODE_BYTES)?;
        Ok(Value::Cons(Arc::new(ConsCell { car, cdr, acct })))
    }

    pub fn new_closure(&mut self, def: Arc<LambdaDef>, env: Env) -> R<Value> {
        let acct = self.charge(NODE_BYTES)?;
        Ok(Value::Closure(Arc::new(Closure { def, env, acct })))
    }

    pub fn new_frame(&mut self, vals: Vec<Value>, parent: Env) -> R<Arc<Frame>> {
        let acct = self.charge(vals.len() * SLOT_BYTES + NODE_BYTES)?;
        Ok(Arc::new(Frame {
            slots: Slots::Values(vals),
            parent,
            acct,
        }))
    }

    pub fn new_rec_frame(&mut self, defs: Arc<[Arc<LambdaDef>]>, parent: Env) -> R<Arc<Frame>> {
        let acct = self.charge(NODE_BYTES)?;
        Ok(Arc::new(Frame {
            slots: Slots::Rec(defs),
            parent,
            acct,
        }))
    }

    pub fn new_native(&mut self, kind: NativeKind) -> R<Value> {
        let acct = self.charge(NODE_BYTES)?;
        Ok(Value::Native(Arc::new(NativeFn { kind, acct })))
    }

    pub fn new_lazy(&mut self, gen: Gen) -> R<Value> {
        self.lazy_with(LazyState::Pending(gen))
    }

    /// An already realized lazy cell (Ale's `Prepend` on a lazy sequence).
    pub fn lazy_cell(&mut self, first: Value, rest: Value) -> R<Value> {
        self.lazy_with(LazyState::Done(Some((first, rest))))
    }

    fn lazy_with(&mut self, state: LazyState) -> R<Value> {
        let acct = self.charge(NODE_BYTES * 2)?;
        Ok(Value::Lazy(Arc::new(Lazy {
            state: Mutex::new(state),
            acct,
        })))
    }
}
