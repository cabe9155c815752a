//! Runtime values, mirroring Ale's data types (`data` package in Ale).
//!
//! Every heap node records the bytes it was charged (`acct`) so that its
//! `Drop` can give them back: the memory limit bounds live data, not the total
//! ever allocated. Drops are iterative (see `drop_children`) so that a
//! million-long list or a deeply nested vector never overflows the stack.

use std::cell::Cell;
use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use crate::builtins::Builtin;
use crate::lazy::LazyState;
use crate::node::LambdaDef;

thread_local! {
    /// Bytes of live values charged on this (evaluation) thread.
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

pub(crate) fn live_bytes() -> usize {
    LIVE.with(Cell::get)
}

pub(crate) fn add_live(bytes: usize) -> usize {
    LIVE.with(|l| {
        let v = l.get().saturating_add(bytes);
        l.set(v);
        v
    })
}

fn release(bytes: usize) {
    if bytes > 0 {
        LIVE.with(|l| l.set(l.get().saturating_sub(bytes)));
    }
}

/// Approximate per-node overhead charged on top of the payload.
pub(crate) const NODE_BYTES: usize = 48;
pub(crate) const SLOT_BYTES: usize = std::mem::size_of::<Value>();

/// An Ale value. `Null` is Ale's empty list `()`.
#[derive(Clone, Default)]
pub enum Value {
    #[default]
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A normalized ratio: denominator > 1, gcd(num, den) == 1.
    Ratio(i64, i64),
    Str(Arc<StrBox>),
    Keyword(Arc<str>),
    Symbol(Arc<str>),
    /// A non-empty list.
    List(Arc<ListCell>),
    Vector(VecView),
    Object(ObjView),
    /// An improper pair `(car . cdr)`.
    Cons(Arc<ConsCell>),
    Closure(Arc<Closure>),
    Builtin(&'static Builtin),
    Native(Arc<NativeFn>),
    Lazy(Arc<Lazy>),
}

pub struct StrBox {
    pub text: String,
    pub acct: usize,
}

pub struct ListCell {
    pub head: Value,
    /// `Null` or another `List`.
    pub tail: Value,
    pub len: usize,
    pub acct: usize,
}

pub struct VecData {
    pub items: Vec<Value>,
    pub acct: usize,
}

/// A vector is a window on shared storage, so `rest` is O(1) as in Go.
#[derive(Clone)]
pub struct VecView {
    pub data: Arc<VecData>,
    pub start: usize,
    pub end: usize,
}

pub struct ObjData {
    /// Sorted by key, keys unique.
    pub entries: Vec<(Key, Value)>,
    pub acct: usize,
}

#[derive(Clone)]
pub struct ObjView {
    pub data: Arc<ObjData>,
    pub start: usize,
}

pub struct ConsCell {
    pub car: Value,
    pub cdr: Value,
    pub acct: usize,
}

pub type Env = Option<Arc<Frame>>;

pub enum Slots {
    Values(Vec<Value>),
    /// A `let-rec` group: references build closures on demand, so the frame
    /// never points at closures that point back at it (no Arc cycles).
    Rec(Arc<[Arc<LambdaDef>]>),
}

pub struct Frame {
    pub slots: Slots,
    pub parent: Env,
    pub acct: usize,
}

pub struct Closure {
    pub def: Arc<LambdaDef>,
    pub env: Env,
    pub acct: usize,
}

/// Procedures that Ale defines as lambdas in its core library.
pub enum NativeKind {
    Partial(Value, Vec<Value>),
    Constantly(Value),
    Juxt(Vec<Value>),
}

pub struct NativeFn {
    pub kind: NativeKind,
    pub acct: usize,
}

pub struct Lazy {
    pub state: Mutex<LazyState>,
    pub acct: usize,
}

/// Object keys: the hashable scalar values. Other keys are refused at run
/// time rather than given an ordering Ale does not have.
#[derive(Clone)]
pub enum Key {
    Null,
    Bool(bool),
    Int(i64),
    /// Never NaN; -0.0 is stored as 0.0 (Ale hashes and compares them equal).
    Float(f64),
    Ratio(i64, i64),
    Str(Arc<StrBox>),
    Keyword(Arc<str>),
    Symbol(Arc<str>),
}

impl Key {
    fn rank(&self) -> u8 {
        match self {
            Key::Null => 0,
            Key::Bool(_) => 1,
            Key::Int(_) => 2,
            Key::Float(_) => 3,
            Key::Ratio(..) => 4,
            Key::Str(_) => 5,
            Key::Keyword(_) => 6,
            Key::Symbol(_) => 7,
        }
    }

    pub fn from_value(v: &Value) -> Option<Key> {
        Some(match v {
            Value::Null => Key::Null,
            Value::Bool(b) => Key::Bool(*b),
            Value::Int(i) => Key::Int(*i),
            Value::Float(f) if f.is_nan() => return None,
            Value::Float(f) => Key::Float(if *f == 0.0 { 0.0 } else { *f }),
            Value::Ratio(n, d) => Key::Ratio(*n, *d),
            Value::Str(s) => Key::Str(s.clone()),
            Value::Keyword(k) => Key::Keyword(k.clone()),
            Value::Symbol(s) => Key::Symbol(s.clone()),
            _ => return None,
        })
    }

    pub fn to_value(&self) -> Value {
        match self {
            Key::Null => Value::Null,
            Key::Bool(b) => Value::Bool(*b),
            Key::Int(i) => Value::Int(*i),
            Key::Float(f) => Value::Float(*f),
            Key::Ratio(n, d) => Value::Ratio(*n, *d),
            Key::Str(s) => Value::Str(s.clone()),
            Key::Keyword(k) => Value::Keyword(k.clone()),
            Key::Symbol(s) => Value::Symbol(s.clone()),
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Key::Bool(a), Key::Bool(b)) => a.cmp(b),
            (Key::Int(a), Key::Int(b)) => a.cmp(b),
            (Key::Float(a), Key::Float(b)) => a.total_cmp(b),
            (Key::Ratio(a, b), Key::Ratio(c, d)) => (a, b).cmp(&(c, d)),
            (Key::Str(a), Key::Str(b)) => a.text.cmp(&b.text),
            (Key::Keyword(a), Key::Keyword(b)) | (Key::Symbol(a), Key::Symbol(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl VecView {
    pub fn as_slice(&self) -> &[Value] {
        self.data.items.get(self.start..self.end).unwrap_or(&[])
    }
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl ObjView {
    pub fn entries(&self) -> &[(Key, Value)] {
        self.data.entries.get(self.start..).unwrap_or(&[])
    }
    pub fn get(&self, key: &Key) -> Option<&Value> {
        let e = self.entries();
        e.binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .and_then(|i| e.get(i))
            .map(|(_, v)| v)
    }
}

impl Value {
    pub fn is_false(&self) -> bool {
        matches!(self, Value::Bool(false))
    }

    /// Builds an uncharged constant string (compile time, error messages).
    pub fn str_const(s: &str) -> Value {
        Value::Str(Arc::new(StrBox {
            text: s.to_string(),
            acct: 0,
        }))
    }

    pub fn keyword(s: &str) -> Value {
        Value::Keyword(Arc::from(s))
    }

    /// Uncharged vector (compile-time constants).
    pub fn vector_const(items: Vec<Value>) -> Value {
        let end = items.len();
        Value::Vector(VecView {
            data: Arc::new(VecData { items, acct: 0 }),
            start: 0,
            end,
        })
    }

    pub fn empty_vector() -> Value {
        Value::vector_const(Vec::new())
    }

    pub fn empty_object() -> Value {
        Value::Object(ObjView {
            data: Arc::new(ObjData {
                entries: Vec::new(),
                acct: 0,
            }),
            start: 0,
        })
    }

    /// Ale's type name, as `%type-of` and error messages report it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) | Value::Float(_) | Value::Ratio(..) => "number",
            Value::Str(_) => "string",
            Value::Keyword(_) => "keyword",
            Value::Symbol(_) => "symbol",
            Value::List(_) => "list",
            Value::Vector(_) => "vector",
            Value::Object(_) => "object",
            Value::Cons(_) => "cons",
            Value::Closure(_) | Value::Builtin(_) | Value::Native(_) => "procedure",
            Value::Lazy(_) => "lazy-sequence",
        }
    }

    /// A heap node this is the last reference to: dropping it would drop
    /// its children, so the iterative drop must take them first.
    fn is_last_heap_ref(&self) -> bool {
        match self {
            Value::List(a) => Arc::strong_count(a) == 1,
            Value::Vector(v) => Arc::strong_count(&v.data) == 1,
            Value::Object(o) => Arc::strong_count(&o.data) == 1,
            Value::Cons(a) => Arc::strong_count(a) == 1,
            Value::Closure(a) => Arc::strong_count(a) == 1,
            Value::Native(a) => Arc::strong_count(a) == 1,
            Value::Lazy(a) => Arc::strong_count(a) == 1,
            _ => false,
        }
    }
}

/// Something whose children still have to be released.
enum Garbage {
    V(Value),
    F(Arc<Frame>),
}

/// Shared values are just released here (no recursion: they live on);
/// last references are queued so that their children are taken first.
fn push_value(out: &mut Vec<Garbage>, v: Value) {
    if v.is_last_heap_ref() {
        out.push(Garbage::V(v));
    }
}

fn push_env(out: &mut Vec<Garbage>, env: Env) {
    if let Some(f) = env {
        if Arc::strong_count(&f) == 1 {
            out.push(Garbage::F(f));
        }
    }
}

/// Moves the children of a uniquely owned node into `out`; the emptied node
/// is then dropped with nothing left to recurse into.
fn take_children(g: Garbage, out: &mut Vec<Garbage>) {
    match g {
        Garbage::F(mut f) => {
            if let Some(frame) = Arc::get_mut(&mut f) {
                frame.take_children(out);
            }
        }
        Garbage::V(v) => match v {
            Value::List(mut a) => {
                if let Some(c) = Arc::get_mut(&mut a) {
                    push_value(out, std::mem::take(&mut c.head));
                    push_value(out, std::mem::take(&mut c.tail));
                }
            }
            Value::Vector(mut view) => {
                if let Some(d) = Arc::get_mut(&mut view.data) {
                    for v in d.items.drain(..) {
                        push_value(out, v);
                    }
                }
            }
            Value::Object(mut view) => {
                if let Some(d) = Arc::get_mut(&mut view.data) {
                    for (_, v) in d.entries.drain(..) {
                        push_value(out, v);
                    }
                }
            }
            Value::Cons(mut a) => {
                if let Some(c) = Arc::get_mut(&mut a) {
                    push_value(out, std::mem::take(&mut c.car));
                    push_value(out, std::mem::take(&mut c.cdr));
                }
            }
            Value::Closure(mut a) => {
                if let Some(c) = Arc::get_mut(&mut a) {
                    push_env(out, c.env.take());
                }
            }
            Value::Native(mut a) => {
                if let Some(n) = Arc::get_mut(&mut a) {
                    n.take_children(out);
                }
            }
            Value::Lazy(mut a) => {
                if let Some(l) = Arc::get_mut(&mut a) {
                    if let Ok(state) = l.state.get_mut() {
                        for v in state.take_values() {
                            push_value(out, v);
                        }
                    }
                }
            }
            _ => {}
        },
    }
}

fn drain(mut stack: Vec<Garbage>) {
    while let Some(g) = stack.pop() {
        take_children(g, &mut stack);
    }
}

impl Frame {
    fn take_children(&mut self, out: &mut Vec<Garbage>) {
        if let Slots::Values(vals) = &mut self.slots {
            for v in vals.drain(..) {
                push_value(out, v);
            }
        }
        push_env(out, self.parent.take());
    }
}

impl NativeFn {
    fn take_children(&mut self, out: &mut Vec<Garbage>) {
        match &mut self.kind {
            NativeKind::Partial(f, args) => {
                push_value(out, std::mem::take(f));
                for v in args.drain(..) {
                    push_value(out, v);
                }
            }
            NativeKind::Constantly(v) => push_value(out, std::mem::take(v)),
            NativeKind::Juxt(fs) => {
                for v in fs.drain(..) {
                    push_value(out, v);
                }
            }
        }
    }
}

impl Drop for StrBox {
    fn drop(&mut self) {
        release(self.acct);
    }
}

impl Drop for ListCell {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        push_value(&mut st, std::mem::take(&mut self.head));
        push_value(&mut st, std::mem::take(&mut self.tail));
        drain(st);
    }
}

impl Drop for VecData {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        for v in self.items.drain(..) {
            push_value(&mut st, v);
        }
        drain(st);
    }
}

impl Drop for ObjData {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        for (_, v) in self.entries.drain(..) {
            push_value(&mut st, v);
        }
        drain(st);
    }
}

impl Drop for ConsCell {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        push_value(&mut st, std::mem::take(&mut self.car));
        push_value(&mut st, std::mem::take(&mut self.cdr));
        drain(st);
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        self.take_children(&mut st);
        drain(st);
    }
}

impl Drop for Closure {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        push_env(&mut st, self.env.take());
        drain(st);
    }
}

impl Drop for NativeFn {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        self.take_children(&mut st);
        drain(st);
    }
}

impl Drop for Lazy {
    fn drop(&mut self) {
        release(self.acct);
        let mut st = Vec::new();
        if let Ok(state) = self.state.get_mut() {
            for v in state.take_values() {
                push_value(&mut st, v);
            }
        }
        drain(st);
    }
}

/// Uncharged constructors for compile-time constants (quoted data).
impl Value {
    pub fn list_const(items: Vec<Value>) -> Value {
        let mut res = Value::Null;
        for (i, head) in items.into_iter().rev().enumerate() {
            res = Value::List(Arc::new(ListCell {
                head,
                tail: res,
                len: i + 1,
                acct: 0,
            }));
        }
        res
    }

    pub fn cons_const(car: Value, cdr: Value) -> Value {
        Value::Cons(Arc::new(ConsCell { car, cdr, acct: 0 }))
    }

    /// `entries` must be sorted by key and unique.
    pub fn object_const(entries: Vec<(Key, Value)>) -> Value {
        Value::Object(ObjView {
            data: Arc::new(ObjData { entries, acct: 0 }),
            start: 0,
        })
    }
}
