//! The compiler: resolves every symbol at compile time (locals, then Ale's
//! special forms and macros, then builtins) so that anything this
//! interpreter does not implement is a compile error, never a wrong value.

use std::sync::Arc;

use crate::builtins::{self, Builtin};
use crate::node::{LambdaCase, LambdaDef, Node, N};
use crate::reader::{err, Datum, Form, Pos, Prefix};
use crate::value::{Key, Value};
use crate::CompileError;

pub type C<T> = Result<T, CompileError>;

/// Compiled nesting deeper than this (e.g. long `->` chains) is refused;
/// compilation runs on the caller's stack.
pub(crate) const MAX_COMPILE_DEPTH: usize = 320;

pub(crate) struct Scope {
    pub names: Vec<String>,
    pub rec: bool,
}

pub struct Compiler {
    pub(crate) scopes: Vec<Scope>,
    depth: usize,
}

pub(crate) fn node(n: Node) -> N {
    Arc::new(n)
}

pub(crate) fn konst(v: Value) -> N {
    node(Node::Const(v))
}

/// Names this compiler handles as special forms or macros.
pub(crate) const SPECIAL_FORMS: &[&str] = &[
    "quote",
    "if",
    "begin",
    "let",
    "let*",
    "let-rec",
    "lambda",
    "λ",
    "lambda-rec",
    "label",
    "thunk",
    "and",
    "or",
    "!and",
    "!or",
    "when",
    "when-not",
    "unless",
    "cond",
    "case",
    "if-let",
    "when-let",
    "->",
    "->>",
    "some->",
    "some->>",
    "lazy-seq",
    "comp",
];

fn symbol_name(f: &Form) -> Option<&str> {
    match &f.datum {
        Datum::Symbol(s) => Some(s),
        _ => None,
    }
}

impl Compiler {
    pub fn new(params: Vec<String>) -> Compiler {
        Compiler {
            scopes: vec![Scope {
                names: params,
                rec: false,
            }],
            depth: 0,
        }
    }

    /// Finds a local: frames out, slot, and whether it is a `let-rec` name.
    pub(crate) fn resolve(&self, name: &str) -> Option<(usize, usize, bool)> {
        for (up, scope) in self.scopes.iter().rev().enumerate() {
            if let Some(idx) = scope.names.iter().rposition(|n| n == name) {
                return Some((up, idx, scope.rec));
            }
        }
        None
    }

    pub(crate) fn with_scope<T>(&mut self, scope: Scope, f: impl FnOnce(&mut Self) -> C<T>) -> C<T> {
        self.scopes.push(scope);
        let r = f(self);
        self.scopes.pop();
        r
    }

    pub fn compile(&mut self, f: &Form) -> C<N> {
        self.depth += 1;
        let r = if self.depth > MAX_COMPILE_DEPTH {
            err(
                f.pos,
                format!("expression nested deeper than {MAX_COMPILE_DEPTH} levels"),
            )
        } else {
            self.compile_inner(f)
        };
        self.depth -= 1;
        r
    }

    fn compile_inner(&mut self, f: &Form) -> C<N> {
        match &f.datum {
            Datum::Int(i) => Ok(konst(Value::Int(*i))),
            Datum::Float(x) => Ok(konst(Value::Float(*x))),
            Datum::Ratio(n, d) => Ok(konst(Value::Ratio(*n, *d))),
            Datum::Str(s) => Ok(konst(Value::str_const(s))),
            Datum::Keyword(k) => Ok(konst(Value::keyword(k))),
            Datum::Bool(b) => Ok(konst(Value::Bool(*b))),
            Datum::Symbol(s) => self.symbol(s, f.pos),
            Datum::List(items) => match items.split_first() {
                None => Ok(konst(Value::Null)),
                Some((head, args)) => self.call(head, args, f.pos),
            },
            Datum::Dotted(items, tail) => {
                let mut acc = self.compile(tail)?;
                for item in items.iter().rev() {
                    let car = self.compile(item)?;
                    acc = node(Node::Cons(car, acc));
                }
                Ok(acc)
            }
            Datum::Vector(items) => {
                if items.is_empty() {
                    return Ok(konst(Value::empty_vector()));
                }
                Ok(node(Node::Vector(self.compile_all(items)?)))
            }
            Datum::Object(pairs) => {
                if pairs.is_empty() {
                    return Ok(konst(Value::empty_object()));
                }
                let mut flat = Vec::with_capacity(pairs.len() * 2);
                for (k, v) in pairs {
                    flat.push(self.compile(k)?);
                    flat.push(self.compile(v)?);
                }
                Ok(node(Node::Object(flat)))
            }
            Datum::Prefixed(Prefix::Quote, inner) => Ok(konst(quote(inner)?)),
            Datum::Prefixed(p, _) => err(
                f.pos,
                format!("unsupported form: {} (macros are not supported)", prefix_name(*p)),
            ),
        }
    }

    pub(crate) fn compile_all(&mut self, forms: &[Form]) -> C<Vec<N>> {
        forms.iter().map(|f| self.compile(f)).collect()
    }

    /// A body of forms: the value of the last, null when empty.
    pub(crate) fn body(&mut self, forms: &[Form]) -> C<N> {
        match forms {
            [] => Ok(konst(Value::Null)),
            [one] => self.compile(one),
            many => Ok(node(Node::Do(self.compile_all(many)?))),
        }
    }

    fn symbol(&mut self, name: &str, pos: Pos) -> C<N> {
        if let Some((up, idx, rec)) = self.resolve(name) {
            return Ok(node(if rec {
                Node::RecRef { up, idx }
            } else {
                Node::Local { up, idx }
            }));
        }
        global_value(
            name.strip_prefix("ale/")
                .filter(|s| !s.is_empty())
                .unwrap_or(name),
            pos,
        )
    }

    fn call(&mut self, head: &Form, args: &[Form], pos: Pos) -> C<N> {
        match &head.datum {
            Datum::Symbol(name) if self.resolve(name).is_none() => {
                let global = name
                    .strip_prefix("ale/")
                    .filter(|s| !s.is_empty())
                    .unwrap_or(name);
                if let Some(r) = self.special(global, args, pos) {
                    return r;
                }
                if let Some(b) = builtins::lookup(global) {
                    return self.call_builtin(b, args, pos);
                }
                let f = global_value(global, head.pos)?;
                self.dynamic(f, args)
            }
            Datum::Keyword(_) | Datum::Int(_) | Datum::Str(_) => {
                // Ale checks the arity of these procedures at compile time.
                if args.is_empty() || args.len() > 2 {
                    return err(pos, format!("got {} arguments, expected 1-2", args.len()));
                }
                let f = self.compile(head)?;
                self.dynamic(f, args)
            }
            _ => {
                let f = self.compile(head)?;
                self.dynamic(f, args)
            }
        }
    }

    pub(crate) fn call_builtin(&mut self, b: &'static Builtin, args: &[Form], pos: Pos) -> C<N> {
        if !b.accepts(args.len()) {
            return err(
                pos,
                format!(
                    "{}: got {} arguments, expected {}",
                    b.name,
                    args.len(),
                    b.arity_text()
                ),
            );
        }
        Ok(node(Node::CallBuiltin {
            f: b,
            args: self.compile_all(args)?,
        }))
    }

    fn dynamic(&mut self, f: N, args: &[Form]) -> C<N> {
        Ok(node(Node::Call {
            f,
            args: self.compile_all(args)?,
        }))
    }

    /// `(lambda params body...)` or `(lambda [params body...] ...)`.
    pub(crate) fn lambda(&mut self, args: &[Form], pos: Pos) -> C<Arc<LambdaDef>> {
        let Some(first) = args.first() else {
            return err(pos, "lambda: no parameter cases defined");
        };
        let mut cases: Vec<LambdaCase> = Vec::new();
        if matches!(first.datum, Datum::Vector(_)) {
            for case in args {
                let Datum::Vector(items) = &case.datum else {
                    return err(case.pos, "lambda: unexpected case syntax");
                };
                let Some((params, body)) = items.split_first() else {
                    return err(case.pos, "lambda: unexpected case syntax");
                };
                self.add_case(&mut cases, params, body, case.pos)?;
            }
        } else {
            self.add_case(&mut cases, first, args.get(1..).unwrap_or(&[]), pos)?;
        }
        Ok(Arc::new(LambdaDef { cases }))
    }

    fn add_case(&mut self, cases: &mut Vec<LambdaCase>, params: &Form, body: &[Form], pos: Pos) -> C<()> {
        let (names, rest) = param_names(params)?;
        if body.is_empty() {
            return err(pos, "lambda: no parameter case body");
        }
        let fixed = names.len() - usize::from(rest);
        // Ale rejects cases that an earlier case always shadows.
        let low_rest = cases.iter().filter(|c| c.rest).map(|c| c.fixed).min();
        let reachable = match low_rest {
            Some(lr) => fixed < lr,
            None => rest || !cases.iter().any(|c| c.fixed == fixed),
        };
        if !cases.is_empty() && !reachable {
            return err(params.pos, "lambda: unreachable parameter case");
        }
        let body = self.with_scope(Scope { names, rec: false }, |c| c.body(body))?;
        cases.push(LambdaCase { fixed, rest, body });
        Ok(())
    }
}

fn prefix_name(p: Prefix) -> &'static str {
    match p {
        Prefix::Quote => "quote",
        Prefix::SyntaxQuote => "syntax-quote",
        Prefix::Unquote => "unquote",
        Prefix::Splice => "unquote-splicing",
    }
}

/// Parameter names and whether the last one collects the rest.
fn param_names(params: &Form) -> C<(Vec<String>, bool)> {
    let name = |f: &Form| -> C<String> {
        match symbol_name(f) {
            Some(s) if !s.contains('/') || s == "/" => Ok(s.to_string()),
            _ => err(f.pos, "lambda: parameter names must be local symbols"),
        }
    };
    let (names, rest) = match &params.datum {
        Datum::Symbol(_) => (vec![name(params)?], true),
        Datum::List(items) => (items.iter().map(name).collect::<C<Vec<_>>>()?, false),
        Datum::Dotted(items, tail) => {
            let mut v = items.iter().map(name).collect::<C<Vec<_>>>()?;
            v.push(name(tail)?);
            (v, true)
        }
        _ => return err(params.pos, "lambda: unexpected parameter syntax"),
    };
    for (i, n) in names.iter().enumerate() {
        if names.iter().skip(i + 1).any(|m| m == n) {
            return err(params.pos, format!("lambda: duplicate parameter name: {n}"));
        }
    }
    Ok((names, rest))
}

/// The value of a global name in value position.
fn global_value(name: &str, pos: Pos) -> C<N> {
    if let Some(v) = builtins::constant(name) {
        return Ok(konst(v));
    }
    if let Some(b) = builtins::lookup(name) {
        return Ok(konst(Value::Builtin(b)));
    }
    if SPECIAL_FORMS.contains(&name) {
        return err(
            pos,
            format!("cannot use special form or macro as a value: {name}"),
        );
    }
    if builtins::UNSUPPORTED_ALE_NAMES.contains(&name) {
        return err(pos, format!("unsupported Ale form or function: {name}"));
    }
    err(pos, format!("unknown symbol: {name}"))
}

/// The value of quoted data.
pub fn quote(f: &Form) -> C<Value> {
    Ok(match &f.datum {
        Datum::Int(i) => Value::Int(*i),
        Datum::Float(x) => Value::Float(*x),
        Datum::Ratio(n, d) => Value::Ratio(*n, *d),
        Datum::Str(s) => Value::str_const(s),
        Datum::Keyword(k) => Value::keyword(k),
        Datum::Symbol(s) => Value::Symbol(Arc::from(s.as_str())),
        Datum::Bool(b) => Value::Bool(*b),
        Datum::List(items) => Value::list_const(items.iter().map(quote).collect::<C<Vec<_>>>()?),
        Datum::Dotted(items, tail) => {
            let mut acc = quote(tail)?;
            for item in items.iter().rev() {
                acc = Value::cons_const(quote(item)?, acc);
            }
            acc
        }
        Datum::Vector(items) => Value::vector_const(items.iter().map(quote).collect::<C<Vec<_>>>()?),
        Datum::Object(pairs) => {
            let mut entries: Vec<(Key, Value)> = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                let Some(key) = Key::from_value(&quote(k)?) else {
                    return err(k.pos, "unsupported object key (keys must be scalar values)");
                };
                entries.push((key, quote(v)?));
            }
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            entries.dedup_by(|later, earlier| later.0 == earlier.0);
            Value::object_const(entries)
        }
        Datum::Prefixed(p, inner) => Value::list_const(vec![
            Value::Symbol(Arc::from(format!("ale/{}", prefix_name(*p)).as_str())),
            quote(inner)?,
        ]),
    })
}
