//! The compiled form of a script: a tree whose symbols are already resolved
//! to frame slots or builtins.

use std::sync::Arc;

use crate::builtins::Builtin;
use crate::value::Value;

pub type N = Arc<Node>;

pub enum Node {
    Const(Value),
    /// A slot `idx` of the frame `up` levels out.
    Local {
        up: usize,
        idx: usize,
    },
    /// A `let-rec` name: yields a closure over the group's frame.
    RecRef {
        up: usize,
        idx: usize,
    },
    If(N, N, N),
    /// Non-empty; the value of the last.
    Do(Vec<N>),
    /// Values are evaluated in the outer frame, then bound in a new one.
    Let {
        values: Vec<N>,
        body: N,
    },
    LetRec {
        defs: Arc<[Arc<LambdaDef>]>,
        body: N,
    },
    Lambda(Arc<LambdaDef>),
    /// Ale's `lazy-seq`: a lazy sequence realized by calling a thunk.
    LazySeq(Arc<LambdaDef>),
    /// Non-empty (empty forms compile to constants).
    And(Vec<N>),
    Or(Vec<N>),
    /// First truthy test wins; none gives null.
    Cond(Vec<(N, N)>),
    CallBuiltin {
        f: &'static Builtin,
        args: Vec<N>,
    },
    Call {
        f: N,
        args: Vec<N>,
    },
    /// A vector literal with evaluated elements.
    Vector(Vec<N>),
    /// An object literal: `(object k v ...)`.
    Object(Vec<N>),
    /// A dotted pair literal `(a . b)`.
    Cons(N, N),
}

pub struct LambdaCase {
    /// Fixed parameters (the rest parameter, if any, comes after them).
    pub fixed: usize,
    pub rest: bool,
    pub body: N,
}

pub struct LambdaDef {
    pub cases: Vec<LambdaCase>,
}

impl LambdaDef {
    pub fn find_case(&self, argc: usize) -> Option<&LambdaCase> {
        self.cases
            .iter()
            .find(|c| if c.rest { argc >= c.fixed } else { argc == c.fixed })
    }

    /// Ale's wording of the accepted argument counts, e.g. "1, 3 or more".
    pub fn signature(&self) -> String {
        let mut fixed: Vec<usize> = self.cases.iter().filter(|c| !c.rest).map(|c| c.fixed).collect();
        fixed.sort_unstable();
        let low_rest = self.cases.iter().filter(|c| c.rest).map(|c| c.fixed).min();
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < fixed.len() {
            let start = fixed[i];
            let mut end = start;
            while i + 1 < fixed.len() && fixed[i + 1] == end + 1 {
                i += 1;
                end += 1;
            }
            i += 1;
            if let Some(lr) = low_rest {
                if end + 1 >= lr {
                    parts.push(format!("{start} or more"));
                    return parts.join(", ");
                }
            }
            parts.push(if start == end {
                format!("{start}")
            } else {
                format!("{start}-{end}")
            });
        }
        if let Some(lr) = low_rest {
            parts.push(format!("{lr} or more"));
        }
        parts.join(", ")
    }
}
