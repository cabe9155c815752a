//! The `WHERE` of a flow filter (`tartan_core::filter::FlowFilter`), one
//! for a flow query and a bulk job, so that both match the same flows.

use tartan_core::filter::FlowFilter;

use super::Bind;
use crate::dialect::Backend;
use crate::model::to_us;

/// The condition that hides child flows (only the engine names flows with a
/// `:`: its child flows, docs/steps.md, "Sub-flows"). The partial indexes
/// `flows_roots_*` (migrations/*/20261205000000_flow_indexes.sql) have this
/// predicate: change both together, or the planners stop using them, and
/// a listing of root flows reads every child row between two of them.
pub(super) const ROOTS_ONLY: &str = "f.id NOT LIKE '%:%'";

/// The statement that counts the flows a filter matches (column `n`), and
/// its binds: a bulk job's dry run and a flow query's `total`.
pub(super) fn count_matches(backend: Backend, filter: &FlowFilter) -> (String, Vec<Bind>) {
    let mut binds = Vec::new();
    let sql = format!(
        "SELECT COUNT(*) AS n FROM flows f WHERE {}",
        filter_where(backend, filter, &mut binds)
    );
    (sql, binds)
}

/// The `WHERE` conditions of a filter on `flows f`, its binds appended to
/// `binds` (numbered on from there).
pub(super) fn filter_where(backend: Backend, filter: &FlowFilter, binds: &mut Vec<Bind>) -> String {
    let mut param = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    // Child flows are hidden unless asked for.
    let mut sql = String::from(if filter.children { "1 = 1" } else { ROOTS_ONLY });
    if !filter.ids.is_empty() {
        let ps: Vec<String> = filter
            .ids
            .iter()
            .map(|id| param(Bind::Text(id.clone())))
            .collect();
        sql.push_str(&format!(" AND f.id IN ({})", ps.join(", ")));
    }
    if let Some(prefix) = filter.id_prefix.as_deref().filter(|p| !p.is_empty()) {
        // A range of bytes, not a LIKE: an index serves it on both
        // databases (`flows_roots_by_id`, and the primary key or
        // `flows_by_id_bytes` with children), also in a plan made before
        // the prefix is known, and no character of the prefix is special.
        let id = backend.bytewise("f.id");
        let lo = param(Bind::Text(prefix.to_string()));
        sql.push_str(&format!(" AND {id} >= {lo}"));
        if let Some(end) = prefix_end(prefix) {
            let hi = param(Bind::Text(end));
            sql.push_str(&format!(" AND {id} < {hi}"));
        }
    }
    if !filter.statuses.is_empty() {
        let ps: Vec<String> = filter
            .statuses
            .iter()
            .map(|s| param(Bind::Text(s.as_str().to_string())))
            .collect();
        sql.push_str(&format!(" AND f.status IN ({})", ps.join(", ")));
    }
    for (k, v) in &filter.labels {
        let pk = param(Bind::Text(k.clone()));
        let pv = param(Bind::Text(v.clone()));
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM flow_labels l WHERE l.flow_id = f.id AND l.key = {pk} AND l.value = {pv})"
        ));
    }
    if let Some(t) = filter.created_after {
        let p = param(Bind::Int(to_us(t)));
        sql.push_str(&format!(" AND f.created_us >= {p}"));
    }
    if let Some(t) = filter.created_before {
        let p = param(Bind::Int(to_us(t)));
        sql.push_str(&format!(" AND f.created_us < {p}"));
    }
    if filter.failed_step.is_some() || filter.error_class.is_some() {
        let mut work = String::from("w.flow_id = f.id AND w.status = 'failed'");
        if let Some(step) = &filter.failed_step {
            let p = param(Bind::Text(step.clone()));
            work.push_str(&format!(" AND w.step_id = {p}"));
        }
        if let Some(class) = filter.error_class {
            let p = param(Bind::Text(class.as_str().to_string()));
            work.push_str(&format!(
                " AND {} = {p}",
                backend.last_attempt_outcome("w.detail")
            ));
        }
        sql.push_str(&format!(" AND EXISTS (SELECT 1 FROM work_items w WHERE {work})"));
    }
    sql
}

/// The least string greater than every string that starts with `prefix`,
/// in code point order (UTF-8's byte order, which a bytewise collation
/// compares): the prefix with its last character that has a successor
/// replaced by that successor, and what follows it dropped. None when no
/// character has one: every string from `prefix` up starts with it.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last {
            '\u{D7FF}' => Some('\u{E000}'),
            c => char::from_u32(u32::from(c) + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn a_prefix_ends_at_the_next_string_that_does_not_start_with_it() {
        assert_eq!(prefix_end("a_b").as_deref(), Some("a_c"));
        assert_eq!(prefix_end("a\\").as_deref(), Some("a]"));
        assert_eq!(prefix_end("az").as_deref(), Some("a{"));
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_end(""), None);
    }
}
