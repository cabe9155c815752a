//! "Did you mean": the known name nearest to one that is not known, when
//! it is near enough to be a slip (a step id in a goal or a URL, a
//! setting's key). One rule everywhere: at most one edit (a letter added,
//! dropped, changed or two swapped) for every three letters of the known
//! name, and at least two, but never half the letters (`zap` is no slip
//! of `a`).
//!
//! The cost is bounded, since a client chooses the name: a name over
//! [`MAX_LEN`] bytes gets no suggestion, and a known name whose length
//! alone puts it out of reach is not compared.

use std::fmt;

/// Names longer than this get no suggestion.
pub const MAX_LEN: usize = 64;

/// The known name nearest to `wanted`, if near enough to be a slip.
pub fn nearest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if wanted.is_empty() || wanted.len() > MAX_LEN {
        return None;
    }
    known
        .into_iter()
        .filter(|k| k.len() <= MAX_LEN && *k != wanted)
        .filter_map(|k| {
            let reach = reach(k);
            if k.len().abs_diff(wanted.len()) > reach {
                return None;
            }
            let distance = strsim::damerau_levenshtein(wanted, k);
            let longer = k.chars().count().max(wanted.chars().count());
            (distance <= reach && 2 * distance <= longer).then_some((distance, k))
        })
        .min_by_key(|&(distance, k)| (distance, k))
        .map(|(_, k)| k)
}

/// How many edits from `known` still count as a slip.
fn reach(known: &str) -> usize {
    (known.chars().count() / 3).max(2)
}

/// A name that is not known, with the nearest one that is: shown as
/// `gret (did you mean "greet"?)`, or the name alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub name: String,
    pub nearest: Option<String>,
}

impl Missing {
    /// `name`, with the nearest of `known`.
    pub fn among<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Missing {
        Missing {
            name: name.to_string(),
            nearest: nearest(name, known).map(str::to_string),
        }
    }

    /// `name`, with no suggestion.
    pub fn alone(name: impl Into<String>) -> Missing {
        Missing {
            name: name.into(),
            nearest: None,
        }
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        match &self.nearest {
            Some(n) => write!(f, " (did you mean {n:?}?)"),
            None => Ok(()),
        }
    }
}

/// Names each shown with its suggestion, comma-separated.
pub fn listed(names: &[Missing]) -> String {
    names
        .iter()
        .map(Missing::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: [&str; 4] = ["greet", "shout", "charge-card", "ship"];

    #[test]
    fn a_slip_finds_its_name() {
        assert_eq!(nearest("gret", STEPS), Some("greet"));
        assert_eq!(nearest("greeet", STEPS), Some("greet"));
        assert_eq!(nearest("gerte", STEPS), Some("greet"));
        assert_eq!(nearest("charge_card", STEPS), Some("charge-card"));
        assert_eq!(nearest("chrage-crad", STEPS), Some("charge-card"));
    }

    #[test]
    fn a_name_far_from_all_finds_none() {
        assert_eq!(nearest("payment", STEPS), None);
        assert_eq!(nearest("", STEPS), None);
        assert_eq!(nearest("greet", STEPS), None, "itself is no suggestion");
        assert_eq!(nearest(&"g".repeat(MAX_LEN + 1), STEPS), None);
        assert_eq!(nearest("x", std::iter::empty()), None);
        assert_eq!(nearest("zap", ["a", "b"]), None);
        assert_eq!(nearest("bb", ["a", "b"]), Some("b"));
    }

    #[test]
    fn ties_go_to_the_first_name_in_order() {
        assert_eq!(nearest("shop", ["ship", "shot"]), Some("ship"));
        assert_eq!(nearest("shop", ["shot", "ship"]), Some("ship"));
    }

    #[test]
    fn shown_with_its_suggestion() {
        assert_eq!(
            Missing::among("gret", STEPS).to_string(),
            "gret (did you mean \"greet\"?)"
        );
        assert_eq!(Missing::among("nope", STEPS).to_string(), "nope");
        assert_eq!(Missing::alone("x").to_string(), "x");
    }
}
