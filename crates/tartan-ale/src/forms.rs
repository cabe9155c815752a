//! Ale's special forms and core macros, compiled directly to nodes with the
//! expansions Ale's `basics.ale`, `branching.ale`, `binding.ale`,
//! `threading.ale` and `functions.ale` define.

use std::sync::Arc;

use crate::builtins;
use crate::compile::{konst, node, quote, Compiler, Scope, C};
use crate::node::{LambdaDef, Node, N};
use crate::reader::{err, Datum, Form, Pos};
use crate::value::Value;

/// Names introduced by expansions contain a space, which no symbol read
/// from source can, so they never capture user names.
const HIDDEN: &str = " val";

fn builtin(name: &str, pos: Pos) -> C<&'static builtins::Builtin> {
    builtins::lookup(name).map_or_else(|| err(pos, format!("internal error: missing builtin {name}")), Ok)
}

fn sym(name: &str, pos: Pos) -> Form {
    Form {
        datum: Datum::Symbol(name.to_string()),
        pos,
    }
}

fn list(items: Vec<Form>, pos: Pos) -> Form {
    Form {
        datum: Datum::List(items),
        pos,
    }
}

/// A `[name value]` binding clause.
fn binding_clause(f: &Form) -> Option<(&str, &Form)> {
    match &f.datum {
        Datum::Vector(v) => match v.as_slice() {
            [Form {
                datum: Datum::Symbol(n),
                ..
            }, value]
                if !n.contains('/') || n == "/" =>
            {
                Some((n, value))
            }
            _ => None,
        },
        _ => None,
    }
}

fn vector_pair(f: &Form) -> Option<(&Form, &Form)> {
    match &f.datum {
        Datum::Vector(v) => match v.as_slice() {
            [a, b] => Some((a, b)),
            _ => None,
        },
        _ => None,
    }
}

impl Compiler {
    /// Compiles a special form or macro call; `None` if `name` is neither.
    pub(crate) fn special(&mut self, name: &str, args: &[Form], pos: Pos) -> Option<C<N>> {
        Some(match name {
            "quote" => match args {
                [one] => quote(one).map(konst),
                _ => err(pos, "quote: expected 1 argument"),
            },
            "if" => match args {
                [t, a] => self.if_node(t, a, None),
                [t, a, b] => self.if_node(t, a, Some(b)),
                _ => err(pos, format!("if: got {} arguments, expected 2-3", args.len())),
            },
            "begin" => self.body(args),
            "let" => self.let_form(args, pos),
            "let*" => self.let_star(args, pos),
            "let-rec" => self.let_rec(args, pos),
            "lambda" | "λ" => self.lambda(args, pos).map(|d| node(Node::Lambda(d))),
            "thunk" => self.thunk(args, pos).map(|d| node(Node::Lambda(d))),
            "lazy-seq" => self.thunk(args, pos).map(|d| node(Node::LazySeq(d))),
            "lambda-rec" => self.lambda_rec(args, pos),
            "label" => match args {
                [name, form] => self.label(name, form, pos),
                _ => err(pos, "label: expected a name and a form"),
            },
            "and" | "or" => self.and_or(name == "and", args),
            "!and" | "!or" => self
                .and_or(name == "!and", args)
                .and_then(|n| self.not_node(n, pos)),
            "when" | "when-not" => self.when(name == "when", args, pos),
            "unless" => self.unless(args, pos),
            "cond" => self.cond(args),
            "case" => self.case(args, pos),
            "if-let" | "when-let" => self.if_let(name == "if-let", args, pos),
            "->" | "->>" => self
                .thread(name == "->", args, pos)
                .and_then(|f| self.compile(&f)),
            "some->" | "some->>" => self.some_thread(name == "some->", args, pos),
            "comp" => self.comp(args, pos),
            _ => return None,
        })
    }

    fn if_node(&mut self, t: &Form, a: &Form, b: Option<&Form>) -> C<N> {
        let t = self.compile(t)?;
        let a = self.compile(a)?;
        let b = match b {
            Some(b) => self.compile(b)?,
            None => konst(Value::Null),
        };
        Ok(node(Node::If(t, a, b)))
    }

    fn not_node(&mut self, n: N, pos: Pos) -> C<N> {
        Ok(node(Node::CallBuiltin {
            f: builtin("not", pos)?,
            args: vec![n],
        }))
    }

    /// `let` bindings: `[name value]` or a list of such vectors.
    fn bindings<'f>(&self, b: &'f Form) -> C<Vec<(&'f str, &'f Form)>> {
        let one = |f: &'f Form| -> C<(&'f str, &'f Form)> {
            match &f.datum {
                Datum::Vector(v) if v.len() != 2 => err(f.pos, "binding must be paired"),
                _ => binding_clause(f).map_or_else(|| err(f.pos, "unexpected binding syntax"), Ok),
            }
        };
        let res = match &b.datum {
            Datum::Vector(_) => vec![one(b)?],
            Datum::List(items) => items.iter().map(one).collect::<C<Vec<_>>>()?,
            _ => return err(b.pos, "unexpected binding syntax"),
        };
        for (i, (n, _)) in res.iter().enumerate() {
            if res.iter().skip(i + 1).any(|(m, _)| m == n) {
                return err(b.pos, format!("name already bound: {n}"));
            }
        }
        Ok(res)
    }

    fn let_form(&mut self, args: &[Form], pos: Pos) -> C<N> {
        let Some((b, body)) = args.split_first().filter(|(_, body)| !body.is_empty()) else {
            return err(pos, "let: expected bindings and a body");
        };
        let binds = self.bindings(b)?;
        let values = binds
            .iter()
            .map(|(_, v)| self.compile(v))
            .collect::<C<Vec<_>>>()?;
        let names = binds.iter().map(|(n, _)| n.to_string()).collect();
        let body = self.with_scope(Scope { names, rec: false }, |c| c.body(body))?;
        Ok(node(Node::Let { values, body }))
    }

    /// `let*`: one frame per binding, each seeing the previous ones.
    fn let_star(&mut self, args: &[Form], pos: Pos) -> C<N> {
        let Some((b, body)) = args.split_first().filter(|(_, body)| !body.is_empty()) else {
            return err(pos, "let*: expected bindings and a body");
        };
        let binds = match &b.datum {
            Datum::Vector(_) => vec![binding_clause(b)],
            Datum::List(items) if !items.is_empty() => items.iter().map(binding_clause).collect(),
            _ => vec![None],
        };
        let Some(binds) = binds.into_iter().collect::<Option<Vec<_>>>() else {
            return err(b.pos, "invalid binding");
        };
        self.let_chain(&binds, body)
    }

    fn let_chain(&mut self, binds: &[(&str, &Form)], body: &[Form]) -> C<N> {
        let Some(((name, value), more)) = binds.split_first() else {
            return self.body(body);
        };
        let value = self.compile(value)?;
        let inner = self.with_scope(
            Scope {
                names: vec![name.to_string()],
                rec: false,
            },
            |c| c.let_chain(more, body),
        )?;
        Ok(node(Node::Let {
            values: vec![value],
            body: inner,
        }))
    }

    /// Only lambdas may be bound recursively: a `let-rec` frame builds its
    /// closures on demand, which avoids reference cycles.
    fn rec_lambda(&mut self, f: &Form) -> C<Arc<LambdaDef>> {
        if let Datum::List(items) = &f.datum {
            if let Some((
                Form {
                    datum: Datum::Symbol(h),
                    ..
                },
                rest,
            )) = items.split_first()
            {
                if self.resolve(h).is_none() {
                    match h.as_str() {
                        "lambda" | "λ" => return self.lambda(rest, f.pos),
                        "thunk" => return self.thunk(rest, f.pos),
                        _ => {}
                    }
                }
            }
        }
        err(
            f.pos,
            "unsupported: recursive bindings (let-rec, label) must be lambdas",
        )
    }

    fn let_rec(&mut self, args: &[Form], pos: Pos) -> C<N> {
        let Some((b, body)) = args.split_first().filter(|(_, body)| !body.is_empty()) else {
            return err(pos, "let-rec: expected bindings and a body");
        };
        let binds = self.bindings(b)?;
        let names: Vec<String> = binds.iter().map(|(n, _)| n.to_string()).collect();
        self.with_scope(Scope { names, rec: true }, |c| {
            let defs = binds
                .iter()
                .map(|(_, v)| c.rec_lambda(v))
                .collect::<C<Vec<_>>>()?;
            let body = c.body(body)?;
            Ok(node(Node::LetRec {
                defs: Arc::from(defs),
                body,
            }))
        })
    }

    fn label(&mut self, name: &Form, form: &Form, pos: Pos) -> C<N> {
        let Datum::Symbol(n) = &name.datum else {
            return err(pos, "label: expected a name");
        };
        self.with_scope(
            Scope {
                names: vec![n.clone()],
                rec: true,
            },
            |c| {
                let def = c.rec_lambda(form)?;
                Ok(node(Node::LetRec {
                    defs: Arc::from(vec![def]),
                    body: node(Node::RecRef { up: 0, idx: 0 }),
                }))
            },
        )
    }

    fn lambda_rec(&mut self, args: &[Form], pos: Pos) -> C<N> {
        match args.split_first() {
            Some((
                name @ Form {
                    datum: Datum::Symbol(_),
                    ..
                },
                rest,
            )) => {
                let mut items = vec![sym("lambda", pos)];
                items.extend_from_slice(rest);
                self.label(name, &list(items, pos), pos)
            }
            _ => self.lambda(args, pos).map(|d| node(Node::Lambda(d))),
        }
    }

    fn thunk(&mut self, body: &[Form], pos: Pos) -> C<Arc<LambdaDef>> {
        let mut args = vec![list(Vec::new(), pos)];
        args.extend_from_slice(body);
        self.lambda(&args, pos)
    }

    fn and_or(&mut self, is_and: bool, args: &[Form]) -> C<N> {
        match args {
            [] => Ok(konst(Value::Bool(is_and))),
            [one] => self.compile(one),
            many => {
                let items = self.compile_all(many)?;
                Ok(node(if is_and { Node::And(items) } else { Node::Or(items) }))
            }
        }
    }

    /// `when`/`when-not`: a lone test is not even evaluated (Ale: `[(test) null]`).
    fn when(&mut self, positive: bool, args: &[Form], pos: Pos) -> C<N> {
        let Some((test, body)) = args.split_first() else {
            return err(pos, "when: expected a test");
        };
        if body.is_empty() {
            return Ok(konst(Value::Null));
        }
        let t = self.compile(test)?;
        let b = self.body(body)?;
        let null = konst(Value::Null);
        Ok(node(if positive {
            Node::If(t, b, null)
        } else {
            Node::If(t, null, b)
        }))
    }

    fn unless(&mut self, args: &[Form], pos: Pos) -> C<N> {
        match args {
            [_] => Ok(konst(Value::Null)),
            [t, then] => {
                let t = self.compile(t)?;
                Ok(node(Node::If(t, konst(Value::Null), self.compile(then)?)))
            }
            [t, then, otherwise] => {
                let t = self.compile(t)?;
                let e = self.compile(otherwise)?;
                Ok(node(Node::If(t, e, self.compile(then)?)))
            }
            _ => err(pos, format!("unless: got {} arguments, expected 1-3", args.len())),
        }
    }

    fn cond(&mut self, clauses: &[Form]) -> C<N> {
        let mut out = Vec::with_capacity(clauses.len());
        for c in clauses {
            let Some((t, b)) = vector_pair(c) else {
                return err(c.pos, "invalid cond clause");
            };
            out.push((self.compile(t)?, self.compile(b)?));
        }
        if out.is_empty() {
            return Ok(konst(Value::Null));
        }
        Ok(node(Node::Cond(out)))
    }

    /// `(case expr [test branch] ...)`: tests are evaluated and compared with
    /// `eq`; a list test matches any of its elements.
    fn case(&mut self, args: &[Form], pos: Pos) -> C<N> {
        let Some((expr, clauses)) = args.split_first() else {
            return err(pos, "case: expected an expression");
        };
        let value = self.compile(expr)?;
        let eq = builtin("eq", pos)?;
        let raise = builtin("raise", pos)?;
        let body = self.with_scope(
            Scope {
                names: vec![HIDDEN.to_string()],
                rec: false,
            },
            |c| {
                let mut out = Vec::new();
                for clause in clauses {
                    let Some((test, branch)) = vector_pair(clause) else {
                        return err(clause.pos, "invalid case clause");
                    };
                    let mut eqs = Vec::new();
                    let alternatives = match &test.datum {
                        Datum::List(items) => items.as_slice(),
                        _ => std::slice::from_ref(test),
                    };
                    for alt in alternatives {
                        let v = node(Node::Local { up: 0, idx: 0 });
                        eqs.push(node(Node::CallBuiltin {
                            f: eq,
                            args: vec![v, c.compile(alt)?],
                        }));
                    }
                    let t = match eqs.len() {
                        0 => konst(Value::Bool(false)),
                        1 => eqs.remove(0),
                        _ => node(Node::Or(eqs)),
                    };
                    out.push((t, c.compile(branch)?));
                }
                let msg = konst(Value::str_const("no cases could be matched"));
                out.push((
                    konst(Value::Bool(true)),
                    node(Node::CallBuiltin {
                        f: raise,
                        args: vec![msg],
                    }),
                ));
                Ok(node(Node::Cond(out)))
            },
        )?;
        Ok(node(Node::Let {
            values: vec![value],
            body,
        }))
    }

    fn if_let(&mut self, is_if: bool, args: &[Form], pos: Pos) -> C<N> {
        let Some((binding, rest)) = args.split_first() else {
            return err(pos, "if-let: expected a binding");
        };
        let Some((name, test)) = binding_clause(binding) else {
            return err(binding.pos, "invalid if-let binding");
        };
        if rest.is_empty() || (is_if && rest.len() > 2) {
            return err(pos, "if-let: expected a binding and branches");
        }
        let value = self.compile(test)?;
        let body = self.with_scope(
            Scope {
                names: vec![name.to_string()],
                rec: false,
            },
            |c| {
                let t = node(Node::Local { up: 0, idx: 0 });
                let (then, otherwise) = if let (true, [then, more @ ..]) = (is_if, rest) {
                    (
                        c.compile(then)?,
                        match more.first() {
                            Some(e) => c.compile(e)?,
                            None => konst(Value::Null),
                        },
                    )
                } else {
                    (c.body(rest)?, konst(Value::Null))
                };
                Ok(node(Node::If(t, then, otherwise)))
            },
        )?;
        Ok(node(Node::Let {
            values: vec![value],
            body,
        }))
    }

    /// Rewrites `(-> v f (g a))` into `(g (f v) a)` (`->>` puts `v` last).
    fn thread(&mut self, first: bool, args: &[Form], pos: Pos) -> C<Form> {
        let Some((value, forms)) = args.split_first() else {
            return err(pos, "->: expected a value");
        };
        // Each step nests one level: refuse before building a deep form.
        if forms.len() > crate::compile::MAX_COMPILE_DEPTH {
            return err(
                pos,
                format!(
                    "expression nested deeper than {} levels",
                    crate::compile::MAX_COMPILE_DEPTH
                ),
            );
        }
        let mut acc = value.clone();
        for f in forms {
            acc = thread_one(first, acc, f);
        }
        Ok(acc)
    }

    /// `some->`: stops with null as soon as a step yields null.
    fn some_thread(&mut self, first: bool, args: &[Form], pos: Pos) -> C<N> {
        let Some((value, forms)) = args.split_first() else {
            return err(pos, "some->: expected a value");
        };
        if forms.len() > crate::compile::MAX_COMPILE_DEPTH {
            return err(
                pos,
                format!(
                    "expression nested deeper than {} levels",
                    crate::compile::MAX_COMPILE_DEPTH
                ),
            );
        }
        let Some((step, more)) = forms.split_first() else {
            return self.compile(value);
        };
        let v = self.compile(value)?;
        let null_p = builtin("null?", pos)?;
        let body = self.with_scope(
            Scope {
                names: vec![HIDDEN.to_string()],
                rec: false,
            },
            |c| {
                let next = thread_one(first, sym(HIDDEN, pos), step);
                let mut rest_args = vec![next];
                rest_args.extend_from_slice(more);
                let inner = c.some_thread(first, &rest_args, pos)?;
                let test = node(Node::CallBuiltin {
                    f: null_p,
                    args: vec![node(Node::Local { up: 0, idx: 0 })],
                });
                Ok(node(Node::If(test, konst(Value::Null), inner)))
            },
        )?;
        Ok(node(Node::Let {
            values: vec![v],
            body,
        }))
    }

    /// `(comp f g h)` is `(lambda args (h (g (apply f args))))`: Ale's `comp`
    /// applies its functions left to right.
    fn comp(&mut self, args: &[Form], pos: Pos) -> C<N> {
        match args {
            [] => Ok(konst(Value::Builtin(builtin("identity", pos)?))),
            [one] => self.compile(one),
            [f, outer @ ..] => {
                let apply = builtin("apply", pos)?;
                let def = self.with_scope(
                    Scope {
                        names: vec![HIDDEN.to_string()],
                        rec: false,
                    },
                    |c| {
                        let argv = node(Node::Local { up: 0, idx: 0 });
                        let mut acc = node(Node::CallBuiltin {
                            f: apply,
                            args: vec![c.compile(f)?, argv],
                        });
                        for g in outer {
                            acc = node(Node::Call {
                                f: c.compile(g)?,
                                args: vec![acc],
                            });
                        }
                        Ok(acc)
                    },
                )?;
                let case = crate::node::LambdaCase {
                    fixed: 0,
                    rest: true,
                    body: def,
                };
                Ok(node(Node::Lambda(Arc::new(LambdaDef { cases: vec![case] }))))
            }
        }
    }
}

/// One threading step: a list form gets the value inserted, anything else
/// is called with it.
fn thread_one(first: bool, value: Form, f: &Form) -> Form {
    let pos = f.pos;
    match &f.datum {
        Datum::List(items) if !items.is_empty() => {
            let mut out = Vec::with_capacity(items.len() + 1);
            if let Some((head, args)) = items.split_first() {
                out.push(head.clone());
                if first {
                    out.push(value);
                    out.extend_from_slice(args);
                } else {
                    out.extend_from_slice(args);
                    out.push(value);
                }
            }
            list(out, pos)
        }
        _ => list(vec![f.clone(), value], pos),
    }
}
