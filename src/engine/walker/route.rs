//! Where a walk goes after a stage: the next route (jumps, edges, no route), `edge.selected`,
//! loop restarts and their guard, checkpoints, goal gates at the exit.
//!
//! Must not touch: running stages (`stage`), handler internals.

use super::*;
use crate::base::event_kind;

impl<'w> Walker<'w> {
    pub(super) fn next_route(&self, node: usize, o: &StageOutcome) -> Option<Route> {
        if let Some(target) = &o.jump_to {
            let to = self.wf.node_index(target)?;
            return Some(Route::jump(to, routing::RouteReason::ParallelJoin));
        }
        let ctx = &self.state.context;
        let transparent = self.wf.handler(node) == Some(HandlerKind::Conditional);
        let text = |key: &str| ctx.get(key).and_then(Value::as_str).unwrap_or("");
        let (outcome, label) = if transparent {
            (text(context::OUTCOME), text(context::PREFERRED_LABEL))
        } else {
            (
                o.status.as_str(),
                o.preferred_label.as_deref().unwrap_or(""),
            )
        };
        let env = MapEnv {
            outcome,
            preferred_label: label,
            context: ctx,
        };
        let input = RoutingInput {
            status: o.status,
            preferred_label: o.preferred_label.as_deref(),
            suggested_next_ids: &o.suggested_next_ids,
        };
        routing::select_route(self.wf, node, input, &env, &mut self.shared.rng.lock())
    }

    pub(super) fn no_route(&self, node: usize, o: &StageOutcome) -> Result<WalkEnd, Stop> {
        if let (true, Some(f)) = (o.is_failed(), &o.failure) {
            return Err(Stop::Failed(RunFailure {
                message: format!("stage `{}` failed: {}", self.scoped_id(node), f.message),
                reason: FailureReason::of_class(f.class),
            }));
        }
        if self.scope.kind == ScopeKind::Branch && self.wf.out_edges[node].is_empty() {
            return Ok(WalkEnd::Ended(o.status));
        }
        Err(Stop::failed(format!(
            "no route from `{}`: the stage ended {} and none of its outgoing edges applies",
            self.scoped_id(node),
            o.status.as_str()
        )))
    }

    pub(super) fn emit_edge(
        &self,
        from: usize,
        route: &Route,
        status: StageStatus,
    ) -> Result<(), Stop> {
        let mut props = json!({
            "from_node": self.scoped_id(from),
            "to_node": self.scoped_id(route.to),
            "reason": route.reason.as_str(),
            "stage_status": status.as_str(),
            "is_jump": route.is_jump(),
        });
        if let (Some(e), Value::Object(m)) = (route.edge, &mut props) {
            let ev = self.wf.edge_view(e);
            if let Some(l) = ev.nonempty("label") {
                m.insert("label".into(), Value::String(l.into()));
            }
            if let Some(c) = ev.nonempty("condition") {
                m.insert("condition".into(), Value::String(c.into()));
            }
            if route.random {
                m.insert("random".into(), Value::Bool(true));
            }
        }
        self.hold(event_kind::EDGE_SELECTED, Some(from), props)?;
        Ok(())
    }

    pub(super) fn is_loop_restart(&self, route: &Route) -> bool {
        route
            .edge
            .is_some_and(|e| self.wf.edge_view(e).flag("loop_restart"))
    }

    /// Only successes and transient infrastructure failures may take a `loop_restart` edge,
    /// and never inside a parallel branch.
    pub(super) fn guard_restart(
        &self,
        node: usize,
        route: &Route,
        o: &StageOutcome,
    ) -> Result<(), Stop> {
        if self.scope.kind == ScopeKind::Branch {
            return Err(Stop::failed(format!(
                "stage `{}` selected a loop_restart edge inside a parallel branch; restarts are only allowed outside branches",
                self.scoped_id(node)
            )));
        }
        match (&o.failure, o.is_failed()) {
            (Some(f), true) if f.class != FailureClass::TransientInfra => Err(Stop::failed(format!(
                "stage `{}` failed ({}: {}); only transient infrastructure failures may take the loop_restart edge to `{}`",
                self.scoped_id(node),
                f.class.as_str(),
                f.message,
                self.scoped_id(route.to)
            ))),
            _ => Ok(()),
        }
    }

    /// Context reset and re-seeded; completed nodes, outcomes and retry counts cleared;
    /// visits and failure signatures kept.
    pub(super) fn restart(&mut self, from: usize, to: usize) -> Result<(), Stop> {
        self.state.restart();
        self.emit(
            event_kind::LOOP_RESTART,
            Some(from),
            json!({"from_node": self.scoped_id(from), "to_node": self.scoped_id(to),
                   "restart": self.state.restarts}),
        )?;
        self.seed_context();
        Ok(())
    }

    /// `checkpoint.completed` after every stage of the run itself (not branches or
    /// children: their parent stage is the unit of resume).
    pub(super) fn checkpoint(&mut self, node: usize, next: Option<usize>) -> Result<(), Stop> {
        if self.scope.kind != ScopeKind::Run {
            return Ok(());
        }
        let sha = self.checkpoint_workspace(node)?;
        let (mut props, full) = self
            .state
            .checkpoint_payload(
                &self.wf.node(node).id,
                next.map(|n| self.wf.node(n).id.as_str()),
                self.shared.stages.load(Ordering::Relaxed),
            )
            .map_err(|e| Stop::failed(format!("cannot encode the checkpoint: {e}")))?;
        if let (Some(sha), Some(obj)) = (sha, props.as_object_mut()) {
            obj.insert("git_commit_sha".into(), Value::String(sha));
        }
        let seq = self.emit_seq(event_kind::CHECKPOINT_COMPLETED, Some(node), props)?;
        self.state.checkpointed(seq, full);
        Ok(())
    }

    /// Commits what the stage changed in the workspace (`workspace.checkpoint` with the
    /// commit and the stage's and run's diff figures) and returns the workspace's current
    /// checkpoint, for the run checkpoint a resume restores. A failed commit is recorded
    /// (`workspace.checkpoint.failed`) and does not fail the run: the files are still there.
    pub(super) fn checkpoint_workspace(&self, node: usize) -> Result<Option<String>, Stop> {
        let ws = &self.services().workspace;
        let stage = self.wf.node(node).id.clone();
        match ws.checkpoint(&stage) {
            Ok(Some(cp)) => {
                self.hold(
                    event_kind::WORKSPACE_CHECKPOINT,
                    Some(node),
                    json!({"checkpoint_id": cp.id, "stage": stage,
                           "stage_diff": cp.stage_diff, "diff": cp.run_diff}),
                )?;
                Ok(Some(cp.id))
            }
            Ok(None) => Ok(ws.head()),
            Err(error) => {
                self.hold(
                    event_kind::WORKSPACE_CHECKPOINT_FAILED,
                    Some(node),
                    json!({"stage": stage, "error": error}),
                )?;
                Ok(ws.head())
            }
        }
    }

    /// The first goal gate, in declaration order, whose latest outcome is neither
    /// succeeded nor partially_succeeded (gates that never ran are not checked).
    pub(super) fn unsatisfied_goal_gate(&self) -> Option<usize> {
        (0..self.wf.graph.nodes.len()).find(|&i| {
            self.wf.node_view(i).flag("goal_gate")
                && self
                    .state
                    .outcomes
                    .get(self.wf.node(i).id.as_str())
                    .is_some_and(|s| {
                        !matches!(s, StageStatus::Succeeded | StageStatus::PartiallySucceeded)
                    })
        })
    }

    pub(super) fn goal_gate_jump(&mut self, exit: usize, gate: usize) -> Result<usize, Stop> {
        let status = self
            .state
            .outcomes
            .get(self.wf.node(gate).id.as_str())
            .copied()
            .unwrap_or(StageStatus::Failed);
        let Some(route) = routing::retry_target(self.wf, gate, true) else {
            return Err(Stop::failed(format!(
                "goal gate `{}` is not satisfied (its latest outcome is {}) and it has no retry target",
                self.scoped_id(gate),
                status.as_str()
            )));
        };
        let props = json!({
            "from_node": self.scoped_id(exit),
            "to_node": self.scoped_id(route.to),
            "reason": "goal_gate",
            "goal_gate": self.scoped_id(gate),
            "via": route.reason.as_str(),
            "stage_status": status.as_str(),
            "is_jump": true,
        });
        self.emit(event_kind::EDGE_SELECTED, Some(exit), props)?;
        self.checkpoint(exit, Some(route.to))?;
        Ok(route.to)
    }

    /// The exit's handler never runs: it is recorded as a succeeded stage.
    pub(super) fn pass_exit(&mut self, node: usize) -> Result<(), Stop> {
        let index = self.shared.stages.fetch_add(1, Ordering::Relaxed);
        self.hold(
            event_kind::STAGE_STARTED,
            Some(node),
            json!({"index": index, "handler_type": "exit", "attempt": 1, "max_attempts": 1}),
        )?;
        self.hold(
            event_kind::STAGE_COMPLETED,
            Some(node),
            json!({"index": index, "duration_ms": 0, "status": "succeeded",
                   "suggested_next_ids": [], "attempt": 1, "max_attempts": 1}),
        )?;
        let id = self.wf.node(node).id.clone();
        self.state.complete(&id, StageStatus::Succeeded, 0);
        Ok(())
    }
}
