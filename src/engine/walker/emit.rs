//! How a walk records: events tagged with the scope's node prefix and branch, held events
//! committed with the next one (a stage's closing events in one transaction), and the copy
//! of each event every enclosing child run gets.
//!
//! Must not touch: what a stage does or where the walk goes.

use super::*;

impl<'w> Walker<'w> {
    /// Appends an event tagged with this scope's node prefix and branch.
    pub fn emit(&self, kind: &str, node: Option<usize>, props: Value) -> Result<(), StoreError> {
        self.emit_seq(kind, node, props).map(|_| ())
    }

    /// [`Walker::emit`], returning the committed event's seq.
    pub fn emit_seq(
        &self,
        kind: &str,
        node: Option<usize>,
        props: Value,
    ) -> Result<u64, StoreError> {
        let draft = self.draft(kind, node, props);
        // Questions are asked and answered on the run itself only.
        if !kind.starts_with("interview.") {
            for m in &self.scope.mirrors {
                self.mirror(m, &draft)?;
            }
        }
        let mut held = std::mem::take(&mut *self.held.lock());
        if held.is_empty() {
            return self.shared.emitter.emit(draft);
        }
        held.push(draft);
        let last = self.shared.emitter.emit_all(held)?;
        Ok(last.unwrap_or_default())
    }

    /// Records an event that the next [`Walker::emit`] (or [`Walker::flush`]) commits
    /// together with its own, in one store transaction, so a stage's closing events (and a
    /// no-op stage's whole record) cost one commit. Only for events followed by no external
    /// effect before that commit but the workspace checkpoint: a crash before it loses them
    /// all and the run resumes from the previous checkpoint, re-running the stage, exactly
    /// as when the crash comes before its `checkpoint.completed` today. Scopes that copy
    /// events into child runs commit at once.
    pub fn hold(&self, kind: &str, node: Option<usize>, props: Value) -> Result<(), StoreError> {
        if !self.scope.mirrors.is_empty() {
            return self.emit(kind, node, props);
        }
        let draft = self.draft(kind, node, props);
        self.held.lock().push(draft);
        Ok(())
    }

    /// Commits the held events, if any.
    pub fn flush(&self) -> Result<(), StoreError> {
        let held = std::mem::take(&mut *self.held.lock());
        self.shared.emitter.emit_all(held).map(|_| ())
    }

    /// An event of this scope: its node id prefixed, its branch tagged.
    pub(super) fn draft(&self, kind: &str, node: Option<usize>, props: Value) -> EventDraft {
        let mut draft = EventDraft::new(kind, props);
        if let Some(n) = node {
            draft = draft.node(&self.scoped_id(n));
        }
        if let Some((group, branch)) = &self.scope.branch {
            draft = draft.parallel(group, branch);
        }
        draft
    }

    /// A copy of `draft` for a child run, node ids relative to it.
    pub(super) fn mirror(&self, m: &Mirror, draft: &EventDraft) -> Result<(), StoreError> {
        let mut copy = draft.clone();
        if let Some(id) = &draft.node_id {
            copy.node_id = Some(id.get(m.strip..).unwrap_or(id).to_string());
        }
        let emitter = Emitter {
            run_id: m.run_id.clone(),
            ..self.shared.emitter.clone()
        };
        emitter.emit(copy).map(|_| ())
    }
}
