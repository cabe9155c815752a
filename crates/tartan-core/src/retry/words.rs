//! A retry policy in words, for people reading a step (`tartan step show`,
//! the API's `effective_retry.in_words`; docs/retries.md, "In words"):
//! the attempts, the waits between them as the policy computes them
//! (before jitter), the cap, the jitter, what is retried and the budget.

use std::time::Duration;

use crate::duration::format_duration;

use super::{delay, BackoffType, Jitter, RetryOn, RetryPolicy, NO_CAP};

/// Waits spelled out before the rest is summed up.
const WAITS_SHOWN: u32 = 5;

impl RetryPolicy {
    /// E.g. `up to 5 attempts, waiting 1s, 2s, 4s, 8s; capped at 30s;
    /// jittered (full); retried on 5xx, 408, 425, 429, honouring
    /// Retry-After; gives up 10m after the first attempt`.
    pub fn in_words(&self) -> String {
        if self.is_skipped() {
            return "never called (max_attempts is 0): the step is skipped".into();
        }
        let retries = self.max_retries();
        let mut parts = vec![match self.max_attempts {
            Some(1) => "one attempt, no retry".to_string(),
            Some(n) => format!("up to {n} attempts, waiting {}", self.waits(retries)),
            None => format!(
                "attempts until it succeeds (the flow's max_step_attempts bounds them), waiting {}",
                self.waits(retries)
            ),
        }];
        if retries != Some(0) {
            if self.max_backoff_ms != NO_CAP && self.reaches_cap(retries) {
                parts.push(format!("capped at {}", ms(self.max_backoff_ms)));
            }
            match self.jitter {
                Jitter::None => {}
                Jitter::Full => parts.push("jittered (full: each wait random, up to it)".into()),
                Jitter::Equal => parts.push("jittered (equal: each wait between half of it and all)".into()),
            }
            if let Some((from, to)) = self.extra_jitter_ms {
                parts.push(format!("plus {} to {} at random", ms(from), ms(to)));
            }
            let on: Vec<String> = self.retry_on.iter().map(|r| retry_on(*r)).collect();
            let mut retried = if on.is_empty() {
                "retried on timeouts and transport errors only".to_string()
            } else {
                format!("retried on {}, timeouts and transport errors", on.join(", "))
            };
            if self.honor_retry_after {
                retried.push_str(", honouring Retry-After");
            }
            parts.push(retried);
        }
        if let Some(budget) = self.max_retry_duration_ms {
            parts.push(format!("gives up {} after the first attempt", ms(budget)));
        }
        parts.join("; ")
    }

    /// The waits before each retry, jitter left out: all of them up to
    /// [`WAITS_SHOWN`], else the first ones and how it goes on.
    fn waits(&self, retries: Option<u32>) -> String {
        let nominal = self.without_jitter();
        let wait = |r: u32| delay(&nominal, r, None, &mut || 0.0).delay_ms;
        let shown = retries.unwrap_or(u32::MAX).min(WAITS_SHOWN);
        let mut text: Vec<String> = (0..shown).map(|r| ms(wait(r))).collect();
        let more = retries.is_none_or(|n| n > shown);
        if more {
            let next = wait(shown);
            let steady = self.backoff_type == BackoffType::Fixed || next == self.max_backoff_ms;
            text.push(if steady {
                format!("then {} each", ms(next))
            } else {
                "and so on".into()
            });
        }
        text.join(", ")
    }

    /// Whether some retry's computed wait is above the cap.
    fn reaches_cap(&self, retries: Option<u32>) -> bool {
        let nominal = self.without_jitter();
        // The waits only grow: the last retry's is the largest. Unlimited
        // retries reach any cap (the count is bounded for the check).
        let last = retries.unwrap_or(u32::MAX).saturating_sub(1).min(64);
        delay(&nominal, last, None, &mut || 0.0).cap_applied
    }

    fn without_jitter(&self) -> RetryPolicy {
        RetryPolicy {
            jitter: Jitter::None,
            extra_jitter_ms: None,
            ..self.clone()
        }
    }
}

fn ms(n: u64) -> String {
    format_duration(Duration::from_millis(n))
}

fn retry_on(r: RetryOn) -> String {
    match r {
        RetryOn::Status(s) => s.to_string(),
        RetryOn::Class(c) => format!("{c}xx"),
    }
}
