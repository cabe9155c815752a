//! Evaluation bounds: steps, time, memory, depth; none may crash the
//! process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use serde_json::json;
use tartan_ale::{compile_lambda, EvalError, Limits, Program};

fn run(src: &str, limits: Limits) -> Result<serde_json::Value, EvalError> {
    compile_lambda(&[], src).unwrap().call(&[], &limits)
}

fn lim(steps: u64, mem: usize, ms: u64) -> Limits {
    Limits {
        max_steps: steps,
        max_memory_bytes: mem,
        max_duration: Duration::from_millis(ms),
    }
}

const MB: usize = 1024 * 1024;

#[test]
fn infinite_loop_hits_the_step_limit() {
    let r = run(
        "(let-rec [loop (lambda () (loop))] (loop))",
        lim(100_000, 64 * MB, 60_000),
    );
    assert_eq!(r, Err(EvalError::StepLimit(100_000)));
    let r = run("(reduce + (range))", lim(100_000, 64 * MB, 60_000));
    assert_eq!(r, Err(EvalError::StepLimit(100_000)));
}

#[test]
fn infinite_loop_hits_the_time_limit() {
    let start = Instant::now();
    let r = run(
        "(let-rec [loop (lambda (n) (loop (inc n)))] (loop 0))",
        lim(u64::MAX, 64 * MB, 200),
    );
    assert_eq!(r, Err(EvalError::Timeout(Duration::from_millis(200))));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn copying_loops_notice_the_deadline() {
    // Few steps, each copying a large vector.
    let src = "(reduce (lambda (acc x) (conj acc x)) [] (range 1000000))";
    let start = Instant::now();
    let r = run(src, lim(u64::MAX, 1024 * MB, 300));
    assert_eq!(r, Err(EvalError::Timeout(Duration::from_millis(300))));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_million_deep_recursion_is_an_error_not_a_crash() {
    let src = "(let-rec [f (lambda (n) (if (= n 0) 0 (+ 1 (f (- n 1)))))] (f 1000000))";
    match run(src, lim(100_000_000, 256 * MB, 60_000)) {
        Err(EvalError::Runtime(m)) => assert!(m.contains("maximum evaluation depth"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Moderate recursion is fine.
    let src = "(let-rec [f (lambda (n) (if (= n 0) 0 (+ 1 (f (- n 1)))))] (f 5000))";
    assert_eq!(run(src, lim(10_000_000, 64 * MB, 60_000)), Ok(json!(5000)));
}

#[test]
fn doubling_string_hits_the_memory_limit() {
    let r = run(
        "(let-rec [f (lambda (s) (f (str s s)))] (f \"x\"))",
        lim(10_000_000, 16 * MB, 60_000),
    );
    assert_eq!(r, Err(EvalError::MemoryLimit(16 * MB)));
}

#[test]
fn a_gigabyte_str_is_refused_before_it_is_built() {
    // 1024 references to one 1 MiB string, joined: 1 GiB of text.
    let src = "(let-rec [dbl (lambda (s n) (if (= n 0) s (dbl (str s s) (dec n))))]
                 (let [s (dbl \"x\" 20)]
                   (apply str (seq->vector (take 1024 (map (constantly s) (range)))))))";
    let start = Instant::now();
    let r = run(src, lim(10_000_000, 64 * MB, 60_000));
    assert_eq!(r, Err(EvalError::MemoryLimit(64 * MB)));
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn huge_range_vector_hits_the_memory_limit() {
    let r = run("(seq->vector (range 100000000))", lim(u64::MAX, 16 * MB, 60_000));
    assert_eq!(r, Err(EvalError::MemoryLimit(16 * MB)));
    let r = run(
        "(length (seq->vector (range 1000)))",
        lim(1_000_000, 16 * MB, 60_000),
    );
    assert_eq!(r, Ok(json!(1000)));
}

#[test]
fn memory_is_given_back_when_values_die() {
    // Each iteration builds and drops a 256 KiB string: far more in total
    // than the limit, but never much alive at once.
    let src = "(let-rec ([dbl (lambda (s n) (if (= n 0) s (dbl (str s s) (dec n))))]
                          [loop (lambda (i) (if (= i 0) :done (begin (dbl \"x\" 18) (loop (dec i)))))])
                 (loop 200))";
    assert_eq!(run(src, lim(10_000_000, 4 * MB, 60_000)), Ok(json!("done")));
}

#[test]
fn deep_and_long_values_drop_without_overflow() {
    let limits = lim(50_000_000, 512 * MB, 120_000);
    // 200k nested vectors: fine to build, count and drop.
    let src = "(let [v (reduce (lambda (acc x) [acc]) [] (range 200000))] (length v))";
    assert_eq!(run(src, limits), Ok(json!(1)));
    // ... but too deep to hand back as JSON.
    let src = "(reduce (lambda (acc x) [acc]) [] (range 200000))";
    match run(src, limits) {
        Err(EvalError::Runtime(m)) => assert!(m.contains("nested deeper"), "{m}"),
        other => panic!("{:?}", other.map(|_| "value")),
    }
    // A million-long list and a long chain of closures.
    let src = "(length (reduce (lambda (acc x) (cons x acc)) '() (range 1000000)))";
    assert_eq!(run(src, limits), Ok(json!(1_000_000)));
    let src = "(let [f (reduce (lambda (g x) (lambda () (g))) (lambda () 0) (range 200000))] 1)";
    assert_eq!(run(src, limits), Ok(json!(1)));
    // A long realized lazy sequence.
    let src = "(let [s (map inc (range 300000))] (reduce + 0 s))";
    assert_eq!(run(src, limits), Ok(json!(45_000_150_000_i64)));
}

#[test]
fn deeply_nested_input_is_bounded() {
    let mut v = json!(1);
    for _ in 0..20_000 {
        v = serde_json::Value::Array(vec![v]);
    }
    let p = compile_lambda(&["x"], "(vector? x)").unwrap();
    let r = p.call_truth(std::slice::from_ref(&v), &lim(1_000_000, 64 * MB, 60_000));
    match r {
        Err(EvalError::Runtime(m)) => assert!(m.contains("depth"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Drop the deep input iteratively so this test itself does not overflow.
    let mut stack = vec![v];
    while let Some(mut x) = stack.pop() {
        if let Some(a) = x.as_array_mut() {
            stack.append(a);
        }
    }
}

#[test]
fn wrong_argument_count_is_an_error() {
    let p = compile_lambda(&["a", "b"], "(+ a b)").unwrap();
    assert!(matches!(
        p.call(&[json!(1)], &Limits::default()),
        Err(EvalError::Runtime(_))
    ));
}

#[test]
fn programs_are_shared_across_threads() {
    fn assert_traits<T: Send + Sync + Clone + 'static>() {}
    assert_traits::<Program>();
    let p = compile_lambda(&["n"], "(reduce + (range n))").unwrap();
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let p = p.clone();
            std::thread::spawn(move || p.call(&[json!(i * 10)], &Limits::default()))
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        let n = (i * 10) as i64;
        assert_eq!(h.join().unwrap(), Ok(json!(n * (n - 1) / 2)));
    }
}

#[test]
fn errors_read_clearly() {
    assert_eq!(
        EvalError::StepLimit(5).to_string(),
        "script exceeded its step limit of 5"
    );
    assert_eq!(
        EvalError::MemoryLimit(9).to_string(),
        "script exceeded its memory limit of 9 bytes"
    );
    assert_eq!(
        EvalError::Timeout(Duration::from_millis(5)).to_string(),
        "script exceeded its time limit of 5ms"
    );
    assert_eq!(
        EvalError::Runtime("divide by zero".into()).to_string(),
        "script error: divide by zero"
    );
}
