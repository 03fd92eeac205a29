//! Loop detection (engine.md 12.4): one signature per tool-using turn (every call's name and
//! canonical arguments, in order), the last [`WINDOW`] of them kept, and a loop found when
//! the most recent turns are a pattern of 1 to [`MAX_PATTERN`] turns repeated back to back
//! at least twice and covering at least the session's threshold of turns (3 by default: so
//! A-A-A, A-B-A-B and A-B-C-A-B-C are loops, but two identical turns are not yet: running a
//! check twice is normal, unlike F, which flags A-A). After a detection the window starts
//! afresh, so one loop is reported once.
//! Owns: signatures and the pattern test. Must not touch: events, steering or models.

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use serde_json::Value;

/// Tool-using turns looked at.
pub const WINDOW: usize = 10;
/// The longest repeating pattern looked for, in turns.
pub const MAX_PATTERN: usize = 3;

/// A repeating pattern at the end of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loop {
    /// Turns in one repetition.
    pub pattern_length: usize,
    /// Complete back-to-back repetitions at the end.
    pub repeats: usize,
}

/// The last [`WINDOW`] turn signatures of a session.
#[derive(Debug, Clone)]
pub struct LoopDetector {
    turns: VecDeque<u64>,
    /// Turns a repetition must cover to count; 0 disables detection.
    min_turns: usize,
}

impl LoopDetector {
    pub fn new(min_turns: u32) -> Self {
        Self {
            turns: VecDeque::with_capacity(WINDOW),
            min_turns: min_turns as usize,
        }
    }

    /// Records a tool-using turn; returns the loop it completes, if any (and then forgets
    /// the window).
    pub fn push(&mut self, signature: u64) -> Option<Loop> {
        if self.min_turns == 0 {
            return None;
        }
        if self.turns.len() == WINDOW {
            self.turns.pop_front();
        }
        self.turns.push_back(signature);
        let found = detect(self.turns.make_contiguous(), self.min_turns);
        if found.is_some() {
            self.turns.clear();
        }
        found
    }
}

/// The shortest pattern (1 to [`MAX_PATTERN`] turns) that the end of `turns` repeats at
/// least twice, covering at least `min_turns` turns.
pub fn detect(turns: &[u64], min_turns: usize) -> Option<Loop> {
    let n = turns.len();
    (1..=MAX_PATTERN).find_map(|len| {
        if n < 2 * len {
            return None;
        }
        let last = &turns[n - len..];
        let mut repeats = 1;
        while (repeats + 1) * len <= n && &turns[n - (repeats + 1) * len..n - repeats * len] == last
        {
            repeats += 1;
        }
        (repeats >= 2 && repeats * len >= min_turns).then_some(Loop {
            pattern_length: len,
            repeats,
        })
    })
}

/// A hash over a turn's calls (names and canonical arguments, in order).
pub fn signature(calls: &[crate::llm::ToolCall]) -> u64 {
    let mut h = DefaultHasher::new();
    for c in calls {
        c.name.hash(&mut h);
        canonical(&c.arguments).hash(&mut h);
    }
    h.finish()
}

/// JSON with object keys sorted (serde_json with `preserve_order` keeps the model's order).
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k:?}:{}", canonical(&o[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: u64 = 1;
    const B: u64 = 2;
    const C: u64 = 3;
    const D: u64 = 4;

    /// Feeds `turns` one by one; returns the turn (1-based) and loop of each detection.
    fn feed(turns: &[u64]) -> Vec<(usize, Loop)> {
        let mut d = LoopDetector::new(3);
        turns
            .iter()
            .enumerate()
            .filter_map(|(i, t)| d.push(*t).map(|l| (i + 1, l)))
            .collect()
    }

    fn at(turn: usize, pattern_length: usize, repeats: usize) -> (usize, Loop) {
        (
            turn,
            Loop {
                pattern_length,
                repeats,
            },
        )
    }

    #[test]
    fn the_same_turn_three_times_is_a_loop() {
        assert_eq!(feed(&[A, A, A]), [at(3, 1, 3)]);
        // Two identical turns are not (yet).
        assert_eq!(feed(&[A, A]), []);
        assert_eq!(feed(&[B, A, A, C]), []);
    }

    #[test]
    fn alternating_turns_are_a_loop() {
        // Caught as soon as A-B repeats, and reported once per loop.
        assert_eq!(feed(&[A, B, A, B, A, B]), [at(4, 2, 2)]);
        assert_eq!(
            detect(&[A, B, A, B, A, B], 3),
            Some(Loop {
                pattern_length: 2,
                repeats: 3
            })
        );
        assert_eq!(feed(&[A, B, A, B, A, B, A, B]), [at(4, 2, 2), at(8, 2, 2)]);
    }

    #[test]
    fn a_three_turn_cycle_is_a_loop() {
        assert_eq!(feed(&[D, A, B, C, A, B, C]), [at(7, 3, 2)]);
        assert_eq!(
            detect(&[A, B, C, A, B, C], 3),
            Some(Loop {
                pattern_length: 3,
                repeats: 2
            })
        );
    }

    #[test]
    fn progress_is_not_a_loop() {
        assert_eq!(feed(&[A, B, C, D, A, C, B, D, A, B, D, C]), []);
        assert_eq!(feed(&[A, B, A, C, A, B, A, C]), []); // a 4-turn cycle is beyond 3
        assert_eq!(detect(&[A, B, C, A, B], 3), None);
    }

    #[test]
    fn the_threshold_counts_turns_and_zero_disables() {
        let mut two = LoopDetector::new(2);
        assert_eq!(two.push(A), None);
        assert!(two.push(A).is_some());
        let mut off = LoopDetector::new(0);
        assert!((0..12).all(|_| off.push(A).is_none()));
        // Longer patterns only count within the 10-turn window.
        let mut big = LoopDetector::new(12);
        assert!((0..30).all(|_| big.push(A).is_none()));
    }

    #[test]
    fn signatures_ignore_key_order_but_not_values() {
        let call = |args: Value| crate::llm::ToolCall {
            id: "x".into(),
            name: "grep".into(),
            arguments: args,
            signature: None,
        };
        let a = signature(&[call(json!({"pattern": "x", "path": "."}))]);
        let b = signature(&[call(json!({"path": ".", "pattern": "x"}))]);
        let c = signature(&[call(json!({"path": ".", "pattern": "y"}))]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
