//! Special forms and core macros, with Ale's semantics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{compile_err, ok, runtime_err, truth};
use serde_json::json;
use tartan_ale::{compile_lambda, Limits};

#[test]
fn if_and_truthiness() {
    // Only #f is false: null, 0 and "" are true.
    assert_eq!(
        ok("[(if false 1 0) (if true 1 0) (if '() 1 0) (if 0 1 0) (if \"\" 1 0) (if false 1)]"),
        json!([0, 1, 1, 1, 1, null])
    );
    assert!(compile_err("(if)").message.contains("if"));
    assert!(compile_err("(if 1 2 3 4)").message.contains("if"));
}

#[test]
fn begin_and_quote() {
    assert_eq!(ok("(begin 55 (if true 99 33))"), json!(99));
    assert_eq!(ok("(begin)"), json!(null));
    assert_eq!(ok("(quote (blah 2 3))"), json!(["blah", 2, 3]));
    assert_eq!(ok("'[1 (+ 1 1)]"), json!([1, ["+", 1, 1]]));
}

#[test]
fn let_binds_in_parallel() {
    assert_eq!(ok("(let [x 5] (* x x))"), json!(25));
    assert_eq!(ok("(let ([x 99] [y 1]) (+ x y))"), json!(100));
    // Values see the outer scope, not each other.
    assert_eq!(compile_err("(let ([a 1] [b a]) b)").message, "unknown symbol: a");
    assert_eq!(ok("(let [a 1] (let ([a 2] [b a]) b))"), json!(1));
    assert_eq!(
        compile_err("(let ([x 99] [y]) 1)").message,
        "binding must be paired"
    );
    assert!(compile_err("(let ([x 1] [x 2]) x)")
        .message
        .contains("name already bound"));
    assert_eq!(compile_err("(let [a 1 b 2] a)").message, "binding must be paired");
    assert_eq!(
        compile_err("(let ((a blah)) 1)").message,
        "unexpected binding syntax"
    );
    assert!(compile_err("(let [a 1])").message.contains("body"));
}

#[test]
fn let_star_binds_in_sequence() {
    assert_eq!(
        ok("(let* ([a 1] [b (+ a 1)] [c (* b 10)]) [a b c])"),
        json!([1, 2, 20])
    );
    assert_eq!(ok("(let* [a 3] a)"), json!(3));
    assert!(compile_err("(let* (a) 1)").message.contains("binding"));
}

#[test]
fn lambdas_and_arity() {
    assert_eq!(ok("((lambda (x y) (+ x y)) 1 2)"), json!(3));
    assert_eq!(ok("((lambda x x) 1 2 3)"), json!([1, 2, 3]));
    assert_eq!(ok("((lambda (a . r) [a r]) 1 2 3)"), json!([1, [2, 3]]));
    assert_eq!(ok("((lambda (a . r) r) 1)"), json!([]));
    assert_eq!(ok("((lambda [(x y) (+ x y)] [(x) (* x 2)]) 20 30)"), json!(50));
    assert_eq!(ok("((lambda [(x y) (+ x y)] [(x) (* x 2)]) 20)"), json!(40));
    assert_eq!(
        ok("((lambda [(x y) (+ x y)] [(x) (* x 2)] [x x]) 20 30 40)"),
        json!([20, 30, 40])
    );
    assert_eq!(ok("((λ () 7))"), json!(7));
    assert_eq!(ok("((thunk 1 2))"), json!(2));
    assert_eq!(runtime_err("((lambda (x) x) 1 2)"), "got 2 arguments, expected 1");
    assert_eq!(
        runtime_err("((lambda [(x) x] [(x y z) x]) 1 2)"),
        "got 2 arguments, expected 1, 3"
    );
    assert_eq!(
        compile_err("(lambda)").message,
        "lambda: no parameter cases defined"
    );
    assert!(compile_err("(lambda (x))")
        .message
        .contains("no parameter case body"));
    assert!(compile_err("(lambda :kwd 1)")
        .message
        .contains("unexpected parameter syntax"));
    assert!(compile_err("(lambda [x 1] [(y) 2])")
        .message
        .contains("unreachable"));
    assert!(compile_err("(lambda (x x) x)").message.contains("duplicate"));
}

#[test]
fn closures_capture_their_scope() {
    assert_eq!(
        ok("(let [greeting \"hello\"] (let [foo (thunk greeting)] (foo)))"),
        json!("hello")
    );
    assert_eq!(
        ok("(let [adder (lambda (n) (lambda (x) (+ x n)))] ((adder 5) 10))"),
        json!(15)
    );
}

#[test]
fn recursion_forms() {
    assert_eq!(
        ok("(let-rec [f (lambda (n) (if (= n 0) 1 (* n (f (- n 1)))))] (f 10))"),
        json!(3_628_800)
    );
    let mutual = "(let-rec ([is-even? (lambda (n) (or (= n 0) (is-odd? (dec n))))]
                            [is-odd? (lambda (n) (and (not (= n 0)) (is-even? (dec n))))])
                   [(is-even? 13) (is-odd? 13)])";
    assert_eq!(ok(mutual), json!([false, true]));
    assert_eq!(
        ok("((lambda-rec fact (n) (if (= n 0) 1 (* n (fact (dec n))))) 5)"),
        json!(120)
    );
    assert_eq!(
        ok("((label f (lambda (n) (if (> n 3) n (f (inc n))))) 0)"),
        json!(4)
    );
    // A recursive function is a value like any other.
    assert_eq!(
        ok("(let-rec [f (lambda (n) (if (= n 0) [] (conj (f (dec n)) n)))] (f 3))"),
        json!([1, 2, 3])
    );
    assert!(compile_err("(let-rec [x 5] x)")
        .message
        .contains("must be lambdas"));
}

#[test]
fn tail_calls_do_not_grow_the_stack() {
    let src =
        "(let-rec [to-zero (lambda (x) (cond [(> x 0) (to-zero (- x 1))] [:else 0]))] (to-zero 200000))";
    assert_eq!(ok(src), json!(0));
    let src = "(let-rec [loop (lambda (n acc) (if (= n 0) acc (let [m (dec n)] (loop m (+ acc 1)))))]
                 (loop 100000 0))";
    assert_eq!(ok(src), json!(100_000));
}

#[test]
fn and_or_return_values() {
    assert_eq!(
        ok("[(and) (or) (and 1 2) (and 1 false 2) (or false 3) (or false false) (and null 1)]"),
        json!([true, false, 2, false, 3, false, 1])
    );
    assert_eq!(ok("[(!and true false) (!or false false)]"), json!([true, true]));
    // Short circuit: the failing form is never evaluated.
    assert_eq!(ok("(or 1 (/ 1 0))"), json!(1));
    assert_eq!(ok("(and false (/ 1 0))"), json!(false));
}

#[test]
fn when_unless() {
    assert_eq!(
        ok("[(when true 1 2) (when false 1) (when-not false 3) (unless false 4) (unless true 4 5)]"),
        json!([2, null, 3, 4, 5])
    );
    // A lone test is not evaluated (Ale: `[(test) null]`).
    assert_eq!(ok("(when (/ 1 0))"), json!(null));
}

#[test]
fn cond_and_case() {
    assert_eq!(ok("(cond)"), json!(null));
    assert_eq!(
        ok("(cond [false \"goodbye\"] [:else \"hello\"] [\"hi\" \"ignored\"])"),
        json!("hello")
    );
    assert_eq!(ok("(cond [false 1] ['() 2])"), json!(2));
    assert_eq!(ok("(cond [false 1])"), json!(null));
    assert!(compile_err("(cond [true 1] [99])")
        .message
        .contains("invalid cond clause"));
    assert!(compile_err("(cond false 1)")
        .message
        .contains("invalid cond clause"));
    assert_eq!(
        ok("(case 3 [1 :one] [(2 3) :two-or-three])"),
        json!("two-or-three")
    );
    assert_eq!(ok("(case \"b\" [\"a\" 1] [\"b\" 2])"), json!(2));
    assert_eq!(ok("(let [x :k] (case :k [x :same]))"), json!("same"));
    assert_eq!(runtime_err("(case 9 [1 :one])"), "no cases could be matched");
}

#[test]
fn if_let_and_when_let() {
    assert_eq!(
        ok("[(if-let [x 5] (* x 2) 0) (if-let [x false] 1 0) (if-let [x false] 1) (when-let [y 3] 1 y)]"),
        json!([10, 0, null, 3])
    );
    assert!(compile_err("(if-let [1 2] 3)")
        .message
        .contains("invalid if-let binding"));
}

#[test]
fn threading() {
    assert_eq!(ok("(-> 5 (+ 1) (* 2) inc)"), json!(13));
    assert_eq!(
        ok("(->> [1 2 3] (map inc) (filter odd?) seq->vector)"),
        json!([3])
    );
    assert_eq!(ok("(-> {:a {:b 7}} :a :b)"), json!(7));
    assert_eq!(ok("(-> 10 (- 3))"), json!(7));
    assert_eq!(ok("(->> 10 (- 3))"), json!(-7));
    assert_eq!(
        ok("[(some-> {:a {:b 1}} :a :b inc) (some-> {:a 1} :x inc) (some->> [1] (conj [0]))]"),
        json!([2, null, [0, [1]]])
    );
}

#[test]
fn comp_applies_left_to_right() {
    // Ale's comp: (comp f g) is (lambda args (g (apply f args))).
    assert_eq!(ok("((comp (lambda (x) (* x 10)) inc) 1)"), json!(11));
    assert_eq!(ok("((comp + inc str) 1 2)"), json!("4"));
    assert_eq!(ok("((comp) 5)"), json!(5));
}

#[test]
fn lazy_seq_form() {
    assert_eq!(ok("(fold-left + (lazy-seq (cons 1 (lazy-seq [2 3]))))"), json!(6));
    assert_eq!(ok("(length (seq->vector (lazy-seq '())))"), json!(0));
    let src = "(let-rec [nat (lambda (n) (lazy-seq (cons n (nat (inc n)))))] (seq->vector (take 4 (nat 7))))";
    assert_eq!(ok(src), json!([7, 8, 9, 10]));
}

#[test]
fn literals_evaluate_their_elements() {
    assert_eq!(
        ok("(let [x 2] [x {:k x} (x . 3)])"),
        json!([2, {"k": 2}, "(2 . 3)"])
    );
    assert_eq!(ok("(let [k :a] {k 1})"), json!({"a": 1}));
    assert_eq!(ok("(1 . [2 3])"), json!([1, 2, 3]));
}

#[test]
fn locals_shadow_everything() {
    let p = compile_lambda(&["if", "map", "str"], "(str if map)").unwrap();
    // `str` is the parameter `false` here; Ale's booleans return themselves
    // when called.
    let r = p.call_truth(&[json!(1), json!(2), json!(false)], &Limits::default());
    assert_eq!(r, Ok(false));
    // ... and strings slice themselves.
    let r = p.call(&[json!(1), json!(2), json!("str-value")], &Limits::default());
    assert_eq!(r, Ok(json!("t")));
    assert_eq!(ok("(let [first (lambda (x) :mine)] (first [1]))"), json!("mine"));
    assert_eq!(
        ok("(let [and (lambda (a b) [a b])] (and 1 false))"),
        json!([1, false])
    );
}

#[test]
fn unsupported_forms_are_compile_errors() {
    for (src, msg) in [
        ("(define x 1)", "unsupported Ale form or function: define"),
        ("(try 1)", "unsupported Ale form or function: try"),
        ("(for [x [1]] x)", "unsupported Ale form or function: for"),
        ("(partition-by odd? [1])", "unknown symbol: partition-by"),
        ("(do 1 2)", "unknown symbol: do"),
        ("(fn [x] x)", "unknown symbol: fn"),
        ("(count [1])", "unknown symbol: count"),
        (
            "(map and [1])",
            "cannot use special form or macro as a value: and",
        ),
        ("nil", "unknown symbol: nil"),
    ] {
        assert_eq!(compile_err(src).message, msg, "{src}");
    }
    assert_eq!(ok("(ale/str 1 2)"), json!("12"));
}

#[test]
fn static_arity_is_checked_at_compile_time() {
    assert_eq!(
        compile_err("(conj [1] 2 3)").message,
        "conj: got 3 arguments, expected 2"
    );
    assert_eq!(
        compile_err("(null?)").message,
        "null?: got 0 arguments, expected 1 or more"
    );
    assert_eq!(compile_err("(:a)").message, "got 0 arguments, expected 1-2");
    assert_eq!(
        compile_err("(0 [1] 2 3)").message,
        "got 3 arguments, expected 1-2"
    );
    // Through a variable, the check happens when called.
    assert!(runtime_err("(let [f conj] (f [1] 2 3))").contains("conj: got 3 arguments"));
}

#[test]
fn predicates_follow_truthiness() {
    assert!(truth("null"));
    assert!(truth("0"));
    assert!(!truth("false"));
    assert!(!truth("(not null)"));
    assert!(truth("(not false)"));
}
