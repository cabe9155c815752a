//! The `WHERE` of a flow filter (`tartan_core::filter::FlowFilter`), one
//! for a flow query and a bulk job, so that both match the same flows.

use tartan_core::filter::FlowFilter;

use super::Bind;
use crate::dialect::Backend;
use crate::model::to_us;

/// The `WHERE` conditions of a filter on `flows f`, its binds appended to
/// `binds` (numbered on from there).
pub(super) fn filter_where(backend: Backend, filter: &FlowFilter, binds: &mut Vec<Bind>) -> String {
    let mut param = |b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    // Only the engine names flows with a `:`: its child flows, hidden
    // unless asked for (docs/steps.md, "Sub-flows").
    let mut sql = String::from(if filter.children {
        "1 = 1"
    } else {
        "f.id NOT LIKE '%:%'"
    });
    if !filter.ids.is_empty() {
        let ps: Vec<String> = filter
            .ids
            .iter()
            .map(|id| param(Bind::Text(id.clone())))
            .collect();
        sql.push_str(&format!(" AND f.id IN ({})", ps.join(", ")));
    }
    if let Some(prefix) = &filter.id_prefix {
        // Ids hold no LIKE wildcards except `_`, which is escaped (and `\`).
        let pattern = format!("{}%", prefix.replace('\\', "\\\\").replace('_', "\\_"));
        let p = param(Bind::Text(pattern));
        sql.push_str(&format!(" AND f.id LIKE {p} ESCAPE '\\'"));
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
