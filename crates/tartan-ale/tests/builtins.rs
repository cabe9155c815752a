//! Builtin procedures, checked against Ale's semantics (many cases come from
//! Ale's own test suite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ok, runtime_err};
use serde_json::json;

#[test]
fn arithmetic() {
    assert_eq!(
        ok("[(+) (*) (+ 1 1) (- 10 4 2) (- 5) (/ 10 2) (/ 10 2 5) (mod 10 3) (mod 100 8 7)]"),
        json!([0, 1, 2, 4, -5, 5, 1, 1, 4])
    );
    assert_eq!(
        ok("[(+ 1 2.5) (* 2 0.5) (/ 1.0 4) (inc 1) (dec 1.5)]"),
        json!([3.5, 1.0, 0.25, 2, 0.5])
    );
    // Integer division is exact: ratios print as n/d.
    assert_eq!(
        ok("[(/ 1 3) (/ 3) (+ (/ 1 3) (/ 2 3)) (* (/ 1 2) 4) (+ (/ 1 2) 0.5)]"),
        json!(["1/3", "1/3", 1, 2, 1.0])
    );
    // mod takes the sign of the divisor.
    assert_eq!(
        ok("[(mod -7 2) (mod 7 -2) (mod -7.5 2) (mod (/ 7 2) 2)]"),
        json!([1, -1, 0.5, "3/2"])
    );
    assert_eq!(runtime_err("(/ 1 0)"), "divide by zero");
    assert_eq!(runtime_err("(mod 1 0)"), "divide by zero");
    assert!(runtime_err("(+ 99 \"hello\")").contains("expected a number, got string"));
    assert!(runtime_err("(+ \"hello\")").contains("expected a number"));
}

#[test]
fn float_division_by_zero_is_infinite() {
    assert_eq!(
        ok("[(inf? (/ 99.0 0)) (-inf? (/ -99.0 0)) (nan? (/ 0.0 0)) (nan? 99) (nan? \"x\") (inf? 99)]"),
        json!([true, true, true, false, false, false])
    );
    assert!(runtime_err("(/ 1.0 0)").contains("+Inf"));
    assert_eq!(ok("(str +inf -inf nan)"), json!("+inf-infnan"));
}

#[test]
fn overflow_is_an_error_not_a_wrong_value() {
    for src in [
        "(+ 9223372036854775807 1)",
        "(* 4611686018427387904 2)",
        "(- -9223372036854775808 1)",
        "(/ -9223372036854775808 -1)",
    ] {
        assert!(runtime_err(src).contains("integer overflow"), "{src}");
    }
}

#[test]
fn comparisons() {
    assert_eq!(
        ok("[(= 1 1) (= 1 1 1 1 '1 1 1) (= 1 2) (!= 1 2) (!= 1 1 1) (= 1 1.0) (= (/ 1 2) 0.5)]"),
        json!([true, true, false, true, false, true, true])
    );
    assert_eq!(
        ok("[(> 2 1) (> 1 2 3) (> 5 4 3 2 1) (>= 1 1) (< 1 2 3 4 5) (<= 1 0) (< 1)]"),
        json!([true, false, true, true, true, false, true])
    );
    // A lone argument is not type-checked, as in Ale.
    assert_eq!(ok("[(< \"a\") (= :k)]"), json!([true, true]));
    assert!(runtime_err("(< 99 \"hello\")").contains("expected a number"));
    assert!(runtime_err("(= \"a\" \"a\")").contains("expected a number"));
    // NaN is incomparable.
    assert_eq!(
        ok("[(= nan nan) (< nan 1) (!= nan nan)]"),
        json!([false, false, true])
    );
}

#[test]
fn equality() {
    assert_eq!(
        ok("[(eq 1 1) (eq 1 1.0) (eq \"a\" \"a\") (eq :a :a) (eq [1 [2]] [1 [2]]) (eq '(1) [1])]"),
        json!([true, false, true, true, true, false])
    );
    assert_eq!(
        ok("(eq {:name \"Ale\" :age 3 :colors [:red]} {:age 3 :colors [:red] :name \"Ale\"})"),
        json!(true)
    );
    assert_eq!(
        ok("[(eq true true true) (eq true false true) (!eq true false) (eq null '()) (eq null [])]"),
        json!([true, false, true, true, false])
    );
    assert_eq!(ok("(let [f (lambda (x) x)] (eq f f))"), json!(true));
    assert!(runtime_err("(eq (lambda (x) x) (lambda (x) x))").contains("cannot compare"));
    assert_eq!(ok("[(eq first car) (eq first rest)]"), json!([true, false]));
}

#[test]
fn type_predicates() {
    assert_eq!(
        ok("[(null? '()) (null? '() '() '()) (null? false) (null? []) (!null? 1 \"a\")]"),
        json!([true, true, false, false, true])
    );
    assert_eq!(ok("[(list? '(1)) (list? '()) (list? [1]) (vector? []) (!vector? 99) (object? {}) (string? \"a\" 1)]"),
               json!([true, true, false, true, true, true, false]));
    assert_eq!(
        ok("[(number? 1 1.5 (/ 1 2)) (keyword? :a) (boolean? false) (symbol? 'a) (procedure? +)]"),
        json!([true, true, true, true, true])
    );
    assert_eq!(
        ok("[(procedure? :a) (seq? \"\") (seq? 99) (counted? [1]) (indexed? {}) (pair? []) (pair? '())]"),
        json!([false, true, false, true, false, true, false])
    );
    assert_eq!(ok("[(cons? (cons 1 2)) (cons? '(1)) (mapped? {}) (mapper? [1]) (appendable? \"\") (reversible? {})]"),
               json!([true, false, true, false, true, false]));
    assert_eq!(
        ok("[(atom? \"hello\") (!atom? '(1 2 3)) (local? 'x) (qualified? 'a/b) (any? 1)]"),
        json!([true, true, true, true, true])
    );
    assert_eq!(
        ok("[(even? 2) (odd? -1) (zero? 0.0) (!zero? 1) (true? true) (false? null) (empty? \"\" [] {})]"),
        json!([true, true, true, true, true, false, true])
    );
    assert!(runtime_err("(even? \"x\")").contains("expected a number"));
    assert!(runtime_err("(empty? 5)").contains("not a sequence"));
    assert_eq!(
        ok("[(is-a :number 1) (is-a :string 1) (is-a :sequence [])]"),
        json!([true, false, true])
    );
    assert_eq!(runtime_err("(is-a :dog \"woof!\")"), "unknown predicate: :dog");
}

#[test]
fn lists_and_vectors() {
    assert_eq!(
        ok("[(list) (list 1 2) (vector 1 (- 5 3)) (cons 1 [2]) (cons 1 '(2)) (cons 1 null)]"),
        json!([null, [1, 2], [1, 2], [1, 2], [1, 2], [1]])
    );
    assert_eq!(
        ok("[(conj [1 2] 3) (conj '(1 2) 0) (conj null 1) (conj* [1] 2 3)]"),
        json!([[1, 2, 3], [0, 1, 2], [1], [1, 2, 3]])
    );
    assert_eq!(
        ok("[(first [1 2]) (rest [1 2]) (rest [1]) (first []) (rest []) (first null) (rest '(1))]"),
        json!([1, [2], [], null, [], null, null])
    );
    assert_eq!(
        ok("[(nth [1 2 3 4] 2) (nth [1 2 3 4] 10 \"oops\") (nth '(a b) 1) (nth \"héllo\" 1)]"),
        json!([3, "oops", "b", "é"])
    );
    assert_eq!(runtime_err("(nth [1 2 3 4] 10)"), "index out of bounds");
    assert_eq!(
        ok("[(length [1 2 3]) (length '(1 2)) (length \"héllo\") (length {:a 1}) (length null)]"),
        json!([3, 2, 5, 1, 0])
    );
    assert_eq!(
        ok("[(last [1 2 37]) (last []) (last \"abc\") (last '(1 2))]"),
        json!([37, null, "c", 2])
    );
    assert_eq!(
        ok("[(reverse '(1 2 3)) (reverse [1 2]) (reverse \"abc\") (reverse '()) (reverse [])]"),
        json!([[3, 2, 1], [2, 1], "cba", null, []])
    );
    assert_eq!(
        ok("[(index-of [1 2 3] 2) (index-of [1 2 3] 9) (cadr [1 2 3]) (caddr '(1 2 3))]"),
        json!([1, false, 2, 3])
    );
    assert_eq!(
        ok("[(append [1] 2) (append \"ab\" \"c\") (append* [] 1 2)]"),
        json!([[1, 2], "abc", [1, 2]])
    );
}

#[test]
fn calling_data() {
    assert_eq!(
        ok("[([1 2 3 4] 2) ([1 2 3 4] 1 3) ('(1 2 3 4) 2) (\"hello\" 1 3) (0 [7 8]) (5 [7] :d) (5 [7])]"),
        json!([[3, 4], [2, 3], [3, 4], "el", 7, "d", null])
    );
    assert_eq!(
        ok("[(:name {:name \"Ale\"}) (:x {} 1) ({:a 1} :a) ({:a 1} :b 2) (true 1 2)]"),
        json!(["Ale", 1, 1, 2, true])
    );
    assert!(runtime_err("(:kind null)").contains("not a mapped value"));
    assert!(runtime_err("(let [k :kind] (k \"text\"))").contains("not a mapped value"));
    assert!(runtime_err("(1.5 [1])").contains("not a procedure"));
}

#[test]
fn objects() {
    assert_eq!(ok("[(get {:a 1} :a) (get {:a 1} :b 2) (contains? {:a 1} :a) (contains? {:a 1} :b) (contains? [1] 0)]"),
               json!([1, 2, true, false, false]));
    assert_eq!(runtime_err("(get {:a 1} :b)"), "key not found");
    assert!(runtime_err("(get [1] 0)").contains("not a mapped value"));
    assert_eq!(ok("(assoc {:a 1} (:b . 2))"), json!({"a": 1, "b": 2}));
    assert_eq!(ok("(assoc {:a 1} (:a . 3))"), json!({"a": 3}));
    // A vector pair's cdr is the rest of the vector, as in Ale.
    assert_eq!(ok("(assoc {} [:a 1])"), json!({"a": [1]}));
    assert!(runtime_err("(assoc {} :not-a-pair)").contains("not a pair"));
    assert_eq!(
        ok("[(dissoc {:a 1 :b 2} :a) (dissoc {} :a) (dissoc* {:a 1 :b 2 :c 3} :a :c)]"),
        json!([{"b": 2}, {}, {"b": 2}])
    );
    assert_eq!(
        ok("(object :name \"Ale\" :age 45)"),
        json!({"name": "Ale", "age": 45})
    );
    assert_eq!(
        runtime_err("(object :too \"few\" :args)"),
        "map must contain an even number of elements"
    );
    assert_eq!(
        ok("(object \"s\" 1 2 :two 1.5 :f)"),
        json!({"s": 1, "2": "two", "1.5": "f"})
    );
    assert!(runtime_err("(object [1] 2)").contains("unsupported object key"));
    assert_eq!(
        ok("(seq->object [:name \"Ale\" :age 45])"),
        json!({"name": "Ale", "age": 45})
    );
    assert_eq!(ok("(first {:a 1})"), json!("(:a . 1)"));
    assert_eq!(ok("(seq->vector {:b 2 :a 1})"), json!(["(:a . 1)", "(:b . 2)"]));
}

#[test]
fn strings() {
    assert_eq!(ok("(str \"hello\" '() [1 2 3 4])"), json!("hello[1 2 3 4]"));
    assert_eq!(
        ok("(str 1 1.0 1.5 :k 'sym true (/ 1 2) [\"q\" :k] '(1 \"a\") {:b \"x\" :a 1})"),
        json!("11.01.5:ksym#t1/2[\"q\" :k](1 \"a\"){:a 1 :b \"x\"}")
    );
    assert_eq!(
        ok("(str 1e21 1234567.5 0.0001 1e-5 -2.5 100.0 123456.7)"),
        json!("1e+211.2345675e+060.00011e-05-2.5100.0123456.7")
    );
    assert_eq!(ok("(str! \"hello\nyou\")"), json!("\"hello\\nyou\""));
    assert_eq!(
        ok("[(str! \"hello\" \"you\") (str!) (str! null)]"),
        json!(["\"hello\" \"you\"", "", "()"])
    );
    assert_eq!(
        ok("[(first \"abc\") (rest \"abc\") (seq->vector \"ab\") (conj \"ab\" \"c\")]"),
        json!(["a", "bc", ["a", "b"], "abc"])
    );
    assert_eq!(runtime_err("(raise \"bad \" 42)"), "bad 42");
    assert!(runtime_err("(str (lambda (x) x))").contains("procedure"));
}

#[test]
fn cons_cells() {
    assert_eq!(
        ok("(cons 7 (cons 8 (cons (cons 10 11) 9)))"),
        json!("(7 8 (10 . 11) . 9)")
    );
    assert_eq!(ok("(car (cons 7 (cons 8 9)))"), json!(7));
    assert_eq!(
        ok("(cdr (cons 7 (cons 8 (cons (cons 10 11) 9))))"),
        json!("(8 (10 . 11) . 9)")
    );
    assert_eq!(
        ok("[(pair? (cons 7 8)) (pair? 99) (cons 1 \"a\") (cons 1 {})]"),
        json!([true, false, "(1 . \"a\")", "(1)"])
    );
}

#[test]
fn higher_order() {
    assert_eq!(
        ok("[(apply + '(1 2 3)) (apply + 9 8 7 '(1 2 3)) (apply + [1 2 3]) (apply vector {:a 1})]"),
        json!([6, 30, 6, ["(:a . 1)"]])
    );
    assert_eq!(runtime_err("(apply + 1)"), "got number, expected sequence");
    assert!(runtime_err("(apply 32.5 [1 2 3])").contains("not a procedure"));
    assert_eq!(
        ok("[(reduce + [1 2 3]) (reduce + 10 [1 2 3]) (reduce + []) (fold-left conj [] '(1 2))]"),
        json!([6, 16, 0, [1, 2]])
    );
    // fold-right calls (f element acc).
    assert_eq!(
        ok("[(fold-right cons '() '(1 2 3)) (foldr + 0 [1 2]) (foldl - 0 [1 2]) (fold-right conj [] [1 2])]"),
        json!([[1, 2, 3], 3, -3, "(([] . 2) . 1)"])
    );
    assert!(runtime_err("(fold-right + [])").contains("got 0 arguments"));
    assert_eq!(
        ok("[((partial + 1 2) 1 1 1) ((partial +) 1 1 1) ((constantly 4) 1 2) (identity 3) (no-op 1)]"),
        json!([6, 3, 4, 3, null])
    );
    assert_eq!(ok("((juxt inc dec) 1)"), json!([2, 0]));
    assert!(runtime_err("(partial 1 2)").contains("partial requires a procedure"));
}

#[test]
fn lazy_sequences() {
    assert_eq!(
        ok("(seq->vector (map (lambda (x) (* x 2)) [1 2 3 4]))"),
        json!([2, 4, 6, 8])
    );
    assert_eq!(
        ok("(seq->vector (map + [1 2 3 4] '(2 4 6 8) (range 20 30)))"),
        json!([23, 27, 31, 35])
    );
    assert_eq!(
        ok("(reduce + (map (lambda (x) (* x 2)) (filter (lambda (x) (<= x 5)) [1 2 3 4 5 6 7 8 9 10])))"),
        json!(30)
    );
    assert_eq!(
        ok("[(seq->vector (range 4)) (seq->vector (range 2 5)) (seq->vector (range 0 1 0.25)) (range 5 1)]"),
        json!([[0, 1, 2, 3], [2, 3, 4], [0, 0.25, 0.5, 0.75], []])
    );
    assert_eq!(
        ok("[(reduce + (range 1 5 1)) (reduce + (range 5 1 -1)) (seq->vector (range -3))]"),
        json!([10, 14, [0, -1, -2]])
    );
    assert_eq!(ok("(seq->vector (take 3 (drop 2 (range))))"), json!([2, 3, 4]));
    assert_eq!(
        ok("(seq->vector (take-while (lambda (x) (< x 3)) (range)))"),
        json!([0, 1, 2])
    );
    assert_eq!(
        ok("(seq->vector (concat [1] '(2) \"ab\" 5 [3]))"),
        json!([1, 2, "a", "b", 3])
    );
    assert_eq!(
        ok("(seq->vector (zip [1 2] [:a :b :c]))"),
        json!([[1, "a"], [2, "b"]])
    );
    assert_eq!(
        ok("(seq->vector (mapcat (lambda (x) [x x]) [1 2]))"),
        json!([1, 1, 2, 2])
    );
    assert_eq!(
        ok("(seq->vector (partition 2 [1 2 3 4 5]))"),
        json!([[1, 2], [3, 4], [5]])
    );
    assert_eq!(
        ok("(seq->vector (partition 2 1 [1 2 3]))"),
        json!([[1, 2], [2, 3], [3]])
    );
    assert_eq!(
        ok("[(first (map inc [1 2])) (seq (filter odd? [2 4])) (empty? (map inc []))]"),
        json!([2, false, true])
    );
    // Mapping over a non-sequence gives an empty sequence (Ale's `(seq 5)` is #f).
    assert_eq!(ok("(seq->vector (map inc 5))"), json!([]));
    // Only realized elements are computed.
    assert_eq!(ok("(first (map (lambda (x) (/ 10 x)) [5 0]))"), json!(2));
    assert!(runtime_err("(length (map inc [1]))").contains("not a counted sequence"));
    assert!(runtime_err("(last (take 2 (range)))").contains("not a counted sequence"));
    assert!(runtime_err("(reverse (take 4 (range 1 1000)))").contains("not reversible"));
    assert_eq!(ok("[(length! (take 100 (range 1 1000))) (last! (take 100 (range 1 1000 2))) (reverse! (take 3 (range)))]"),
               json!([100, 199, [2, 1, 0]]));
    assert_eq!(
        ok("[(nth! (range) 5) (nth! (range 3) 5 :none)]"),
        json!([5, "none"])
    );
    assert!(runtime_err("(last! (drop 99 57))").contains("not a pair"));
    assert!(runtime_err("(last! (take 99 57))").contains("not a sequence"));
}
