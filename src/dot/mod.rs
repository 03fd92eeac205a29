//! The DOT subset of SPEC 2.13: text in, a flat [`Graph`] out.
//!
//! Owns `grammar/dot.pest`, lexical value types ([`Value`]), graph construction (defaults
//! scoped to subgraphs, subgraph labels as classes, edge chains expanded pairwise, implicit
//! nodes) and printing a graph back to DOT. It knows nothing about handlers, typed
//! attributes or validation: that is [`crate::workflow`]'s job.
//!
//! Must not: know handler semantics or attribute types.

mod build;
mod error;
mod grammar;
mod id;
mod index;
mod print;
mod stream;
mod text;
mod value;

pub use build::parse;
pub(crate) use build::{parse_indexed, Parsed};
pub use error::ParseError;
pub use id::Id;
pub(crate) use index::IdIndex;
pub use print::to_dot;
pub use stream::parse_file;
pub(crate) use stream::parse_file_indexed;
pub use text::Text;
pub use value::{parse_duration, unescape, Value};

/// A 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl std::fmt::Display for Pos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Attributes in first-set order. Lists are short (a handful per node), so a vector with a
/// linear search beats a map in both time and memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attrs(Box<[(Key, Value)]>);

/// [`Attrs::set`] on the list being edited.
fn set_in(list: &mut Vec<(Key, Value)>, key: Key, value: Value) {
    match list.iter_mut().find(|(mine, _)| *mine == key) {
        Some(slot) => slot.1 = value,
        None => list.push((key, value)),
    }
}

/// Attribute keys: the common ones by number (no allocation per node, which matters for
/// 100k-node graphs), others owned. 16 bytes, where a `Cow<'static, str>` took 24: with
/// a 32-byte [`Value`], an attribute is 48 bytes instead of 56. Every key that has a
/// number is stored by number, so equal keys compare equal.
#[derive(Clone, PartialEq)]
// A `Box<String>` on purpose: a thin pointer keeps the key at 16 bytes; uncommon keys are rare.
#[allow(clippy::box_collection)]
enum Key {
    Common(u8),
    Owned(Box<String>),
}

impl Key {
    fn as_str(&self) -> &str {
        match self {
            Key::Common(i) => COMMON_KEYS[usize::from(*i)],
            Key::Owned(s) => s,
        }
    }
}

/// As the text prints, like the `Cow` it replaced.
impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Position of `key` in [`COMMON_KEYS`], worked out at compile time.
const fn common_index(key: &str) -> u8 {
    let mut i = 0;
    while i < COMMON_KEYS.len() {
        let (a, b) = (COMMON_KEYS[i].as_bytes(), key.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                return i as u8;
            }
        }
        i += 1;
    }
    panic!("not a common key")
}

/// The common keys, as a `match` so that each compare is against a constant (inlined
/// word compares rather than a `memcmp` call per candidate).
macro_rules! common_keys {
    ($($k:literal),* $(,)?) => {
        const COMMON_KEYS: &[&str] = &[$($k),*];
        fn common_key(key: &str) -> Option<u8> {
            match key {
                $($k => Some(const { common_index($k) }),)*
                _ => None,
            }
        }
    };
}

common_keys!(
    "label",
    "shape",
    "prompt",
    "type",
    "class",
    "timeout",
    "max_retries",
    "retry_policy",
    "retry_target",
    "fallback_retry_target",
    "goal_gate",
    "auto_status",
    "allow_partial",
    "model",
    "provider",
    "reasoning_effort",
    "script",
    "language",
    "condition",
    "weight",
    "fidelity",
    "thread_id",
    "loop_restart",
    "freeform",
    "duration",
    "max_visits",
    "output_schema",
    "goal",
    "rankdir",
    "selection",
    "max_parallel",
    "question_type",
);

fn intern(key: &str) -> Key {
    match common_key(key) {
        Some(i) => Key::Common(i),
        None => Key::Owned(Box::new(key.to_string())),
    }
}

impl Attrs {
    pub fn new() -> Self {
        Attrs(Box::default())
    }
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v)
    }
    /// Changes the list as a `Vec`; it is stored without spare room. Lists are built once
    /// and rarely changed, so the reallocation is cheaper than 8 more bytes on every node
    /// and edge (a boxed slice is 16 bytes, a `Vec` 24).
    fn edit<T>(&mut self, f: impl FnOnce(&mut Vec<(Key, Value)>) -> T) -> T {
        let mut list = std::mem::take(&mut self.0).into_vec();
        let out = f(&mut list);
        self.0 = list.into_boxed_slice();
        out
    }
    /// Sets a key, replacing an earlier value in place (so the first-set order is kept).
    pub fn set(&mut self, key: &str, value: Value) {
        match self.0.iter_mut().find(|(k, _)| k.as_str() == key) {
            Some(slot) => slot.1 = value,
            None => self.edit(|list| list.push((intern(key), value))),
        }
    }
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self.0.iter().position(|(k, _)| k.as_str() == key)?;
        Some(self.edit(|list| list.remove(i).1))
    }
    /// Copies every attribute of `other` over this one (later wins).
    pub fn merge(&mut self, other: &Attrs) {
        self.edit(|list| {
            for (k, v) in other.0.iter() {
                set_in(list, k.clone(), v.clone());
            }
        });
    }
    /// [`Attrs::merge`] that moves the values instead of copying them.
    pub(crate) fn merge_from(&mut self, other: Attrs) {
        if self.0.is_empty() {
            *self = other;
            return;
        }
        self.edit(|list| {
            for (k, v) in other.0.into_vec() {
                set_in(list, k, v);
            }
        });
    }
    /// A list from key/value pairs in order (a repeated key keeps its first place and its
    /// last value).
    pub(crate) fn from_pairs<'k>(pairs: impl ExactSizeIterator<Item = (&'k str, Value)>) -> Self {
        let mut list = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            match list
                .iter_mut()
                .find(|(mine, _): &&mut (Key, Value)| mine.as_str() == k)
            {
                Some(slot) => slot.1 = v,
                None => list.push((intern(k), v)),
            }
        }
        Attrs(list.into_boxed_slice())
    }
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The attribute as text (see [`Value::as_text`]).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.get(key).map(Value::as_text)
    }
}

impl FromIterator<(String, Value)> for Attrs {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut a = Attrs::new();
        a.edit(|list| {
            for (k, v) in iter {
                set_in(list, intern(&k), v);
            }
        });
        a
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: Id,
    pub attrs: Attrs,
    /// Where the node was first mentioned.
    pub pos: Pos,
    /// Keys that came from `node [...]` defaults and were never set on the node itself
    /// (the model stylesheet may override these, but not explicit attributes).
    pub defaulted: Vec<String>,
}

impl Node {
    /// Classes from the `class` attribute: split on commas, trimmed, empties dropped.
    pub fn classes(&self) -> Vec<String> {
        split_classes(self.attrs.text("class").unwrap_or(""))
    }
}

pub fn split_classes(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// The ends' ids, shared with their nodes.
    pub from: Id,
    pub to: Id,
    pub attrs: Attrs,
    /// Where the edge's source id appears in the edge statement.
    pub pos: Pos,
}

/// A parsed digraph, flattened: subgraphs are gone, defaults applied, chains expanded.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    pub name: String,
    pub attrs: Attrs,
    /// Nodes in order of first mention.
    pub nodes: Vec<Node>,
    /// Edges in declaration order.
    pub edges: Vec<Edge>,
    /// Where each graph attribute was set (for diagnostics).
    pub attr_pos: Vec<(String, Pos)>,
}

impl Graph {
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }
    /// Same model: equal names, attributes, nodes and edges, ignoring source positions and
    /// where attributes came from (what a printed-and-reparsed graph must preserve).
    pub fn same_model(&self, other: &Graph) -> bool {
        self.name == other.name
            && self.attrs == other.attrs
            && self.nodes.len() == other.nodes.len()
            && self.edges.len() == other.edges.len()
            && self
                .nodes
                .iter()
                .zip(&other.nodes)
                .all(|(a, b)| a.id == b.id && a.attrs == b.attrs)
            && self
                .edges
                .iter()
                .zip(&other.edges)
                .all(|(a, b)| a.from == b.from && a.to == b.to && a.attrs == b.attrs)
    }

    pub fn attr_pos(&self, key: &str) -> Option<Pos> {
        self.attr_pos
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, p)| *p)
    }
}

#[cfg(test)]
mod tests;
