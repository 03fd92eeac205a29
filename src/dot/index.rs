//! [`IdIndex`]: node id -> position in a node list, without a second copy of the ids.
//!
//! A `HashMap<String, usize>` keeps its own copy of every id (one allocation each) and, with
//! the default hasher, runs SipHash over them; on a 100,000-node graph that was ~7 MiB and a
//! visible share of load time. This table stores only `u32` positions and compares against
//! the ids in the node list the caller passes in, so it must always be used with the same
//! list it was filled from (the parser's graph under construction, a workflow's nodes).
//!
//! Must not: be used with a list other than the one it was filled from.

use super::Node;

/// Open addressing with linear probing, kept at most half full; a slot is a node's
/// position (4 bytes: 1 MiB for 100,000 nodes).
#[derive(Debug, Clone, Default)]
pub(crate) struct IdIndex {
    slots: Vec<u32>,
    len: usize,
    /// log2 of `slots.len()`.
    bits: u32,
}

const EMPTY: u32 = u32::MAX;

/// FNV-1a, then a multiply so that every bit of the result depends on every byte: ids are
/// short and often differ only in their last digit. A workflow file is trusted input, so
/// SipHash's resistance to crafted collisions buys nothing (and it showed up in profiles).
fn hash(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl IdIndex {
    /// An index over `nodes`; with duplicate ids the last one wins (as a map insert would).
    pub(crate) fn build(nodes: &[Node]) -> Self {
        let mut index = IdIndex::default();
        index.grow_for(nodes.len(), nodes);
        for i in 0..nodes.len() {
            index.insert(nodes, i);
        }
        index
    }

    /// The first slot to probe, from the high bits (the best mixed).
    fn start(&self, id: &str) -> usize {
        (hash(id) >> (64 - self.bits)) as usize
    }

    /// Position of `id` in `nodes`.
    pub(crate) fn get(&self, nodes: &[Node], id: &str) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut s = self.start(id);
        loop {
            let i = self.slots[s];
            if i == EMPTY {
                return None;
            }
            if nodes[i as usize].id == id {
                return Some(i as usize);
            }
            s = (s + 1) & mask;
        }
    }

    /// Records `nodes[i]` (already pushed by the caller); replaces an equal id.
    pub(crate) fn insert(&mut self, nodes: &[Node], i: usize) {
        self.grow_for(self.len + 1, nodes);
        let mask = self.slots.len() - 1;
        let mut s = self.start(&nodes[i].id);
        loop {
            let cur = self.slots[s];
            if cur == EMPTY {
                self.slots[s] = i as u32;
                self.len += 1;
                return;
            }
            if nodes[cur as usize].id == nodes[i].id {
                self.slots[s] = i as u32;
                return;
            }
            s = (s + 1) & mask;
        }
    }

    /// Makes room for `want` entries at a load factor of at most one half.
    fn grow_for(&mut self, want: usize, nodes: &[Node]) {
        if want * 2 <= self.slots.len() {
            return;
        }
        let size = (want * 2).next_power_of_two().max(16);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; size]);
        self.bits = size.trailing_zeros();
        self.len = 0;
        for i in old.into_iter().filter(|&i| i != EMPTY) {
            self.insert(nodes, i as usize);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::{Attrs, Pos};

    fn node(id: &str) -> Node {
        Node {
            id: id.into(),
            attrs: Attrs::new(),
            pos: Pos::default(),
            defaulted: Vec::new(),
        }
    }

    #[test]
    fn finds_every_id_after_growing_and_nothing_else() {
        let mut nodes = Vec::new();
        let mut index = IdIndex::default();
        for i in 0..5000 {
            nodes.push(node(&format!("n{i}")));
            index.insert(&nodes, i);
        }
        for i in 0..5000 {
            assert_eq!(index.get(&nodes, &format!("n{i}")), Some(i));
        }
        assert_eq!(index.get(&nodes, "n5000"), None);
        assert_eq!(index.get(&nodes, ""), None);
        assert_eq!(IdIndex::default().get(&nodes, "n1"), None);
    }

    #[test]
    fn a_duplicate_id_points_at_the_last_node() {
        let nodes = vec![node("a"), node("b"), node("a")];
        let index = IdIndex::build(&nodes);
        assert_eq!(index.get(&nodes, "a"), Some(2));
        assert_eq!(index.get(&nodes, "b"), Some(1));
    }
}
