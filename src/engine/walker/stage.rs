//! One stage of a walk: its plan (fidelity, thread, preamble), its attempts with retries,
//! backoff and per-attempt timeouts, post-processing (`allow_partial`, `auto_status`),
//! recording the outcome into the state and the context, and the failure-signature breaker.
//!
//! Must not touch: where the walk goes next (`route`), handler internals.

use super::*;
use crate::base::event_kind;

impl<'w> Walker<'w> {
    /// Resolves the stage's fidelity and thread (engine.md 5.3), writes `internal.fidelity`
    /// and `internal.thread_id`, and builds the preamble of LLM and manager stages.
    pub(super) fn plan_stage(
        &mut self,
        node: usize,
        via: Option<usize>,
        previous: Option<usize>,
        branch_start: bool,
    ) {
        let wf = self.wf;
        let mode = fidelity::resolve_fidelity(wf, via, node, branch_start);
        let inherited = self
            .state
            .context
            .get(fidelity::THREAD_KEY)
            .and_then(Value::as_str);
        let thread = fidelity::resolve_thread(wf, via, node, branch_start, inherited, previous);
        let run_id = &self.shared.options.run_id;
        let kind = wf.handler(node).unwrap_or(HandlerKind::Agent);
        let preamble = (kind.is_llm() || kind == HandlerKind::ManagerLoop)
            .then(|| {
                let ctx = &self.state.context;
                let history = History {
                    wf,
                    goal: ctx
                        .get(context::GRAPH_GOAL)
                        .and_then(Value::as_str)
                        .unwrap_or_else(|| wf.goal()),
                    run_id,
                    state: &self.state,
                };
                let parent = ctx.get(preamble::PARENT_PREAMBLE).and_then(Value::as_str);
                preamble::preamble_for(mode, &history, parent)
            })
            .flatten();
        let conversation = (mode == Fidelity::Full).then(|| {
            let scope = match &self.scope.branch {
                Some((group, branch)) => format!("{}{group}:{branch}", self.scope.prefix),
                None => self.scope.prefix.clone(),
            };
            fidelity::conversation_key(run_id, self.state.restarts, &scope, &thread)
        });
        self.state.set(
            fidelity::FIDELITY_KEY,
            Value::String(mode.as_str().to_string()),
        );
        self.state
            .set(fidelity::THREAD_KEY, Value::String(thread.clone()));
        self.plan = Some(StagePlan {
            fidelity: mode,
            thread,
            conversation,
            preamble,
        });
    }

    /// Attempts with retries, then `allow_partial` and `auto_status`; emits the stage events.
    pub(super) fn run_stage(&mut self, node: usize) -> Result<Finished, Stop> {
        let kind = self.wf.handler(node).unwrap_or(HandlerKind::Agent);
        let nv = self.wf.node_view(node);
        let policy = failure::backoff(
            nv.nonempty("retry_policy"),
            nv.int("max_retries"),
            self.wf.graph_view().int("default_max_retries"),
        );
        let max_attempts = policy.attempts.max(1);
        let index = self.shared.stages.fetch_add(1, Ordering::Relaxed);
        let clock = self.services().clock.clone();
        let mut attempt = 1;
        let (outcome, attempt_start) = loop {
            let props = json!({"index": index, "handler_type": kind.name(), "attempt": attempt,
                       "max_attempts": max_attempts});
            // Committed with the handler's first event or the stage's end where nothing
            // happens in between; otherwise seen to start before the handler runs.
            if starts_quietly(kind) {
                self.hold(event_kind::STAGE_STARTED, Some(node), props)?;
            } else {
                self.emit(event_kind::STAGE_STARTED, Some(node), props)?;
            }
            let started = clock.now();
            let outcome = self.attempt(node, kind)?;
            let retry = outcome
                .failure
                .as_ref()
                .is_some_and(|f| f.retryable && outcome.is_failed())
                && attempt < max_attempts;
            if !retry {
                break (outcome, started);
            }
            let delay = failure::delay(&policy, attempt, self.shared.rng.lock().unit());
            let failure_json = outcome.failure.as_ref().map(|f| f.to_json(None));
            let mut props = json!({"index": index, "failure": failure_json, "will_retry": true,
                       "duration_ms": millis(clock.now() - started), "attempt": attempt});
            // Tokens a failed attempt spent are billed too.
            if let (Value::Object(m), Some(u)) = (&mut props, &outcome.usage) {
                m.insert("usage".into(), u.clone());
            }
            self.emit(event_kind::STAGE_FAILED, Some(node), props)?;
            attempt += 1;
            self.emit(
                event_kind::STAGE_RETRYING,
                Some(node),
                json!({"index": index, "attempt": attempt, "max_attempts": max_attempts,
                       "delay_ms": millis(delay)}),
            )?;
            if clock.sleep(delay, &self.scope.cancel) {
                self.check_cancel()?;
            }
        };
        let outcome = self.post_process(node, outcome);
        let signature = outcome
            .failure
            .as_ref()
            .filter(|_| outcome.is_failed())
            .map(|f| failure::signature(&self.wf.node(node).id, f.class, &f.message));
        let duration_ms = millis(clock.now() - attempt_start);
        let end = StageEnd {
            index,
            attempt,
            max_attempts,
            duration_ms,
        };
        self.capture_artifacts(node, kind, &end)?;
        self.emit_stage_end(node, &end, &outcome, signature.as_deref())?;
        if let Some(message) = &outcome.budget_spent {
            // The stage's turns are recorded (and billed) above; the run goes no further.
            return Err(Stop::Failed(RunFailure {
                message: message.clone(),
                reason: FailureReason::BudgetExceeded,
            }));
        }
        Ok(Finished {
            outcome,
            attempts: attempt,
            signature,
        })
    }

    /// `artifact.captured` (or `artifact.failed`) for each file the stage left that matches
    /// the run's artifact patterns, committed with the stage's end. Stages that do no work
    /// (start, exit, conditional) keep nothing.
    pub(super) fn capture_artifacts(
        &self,
        node: usize,
        kind: HandlerKind,
        end: &StageEnd,
    ) -> Result<(), Stop> {
        let sink = &self.services().artifacts;
        if !sink.wanted() || !writes_last_stage(Some(kind)) {
            return Ok(());
        }
        let node_id = self.scoped_id(node);
        for c in sink.capture(&node_id, &self.options().workdir) {
            match c {
                Capture::Kept(a) => self.hold(
                    event_kind::ARTIFACT_CAPTURED,
                    Some(node),
                    json!({"index": end.index, "attempt": end.attempt, "artifact_id": a.id,
                           "path": a.path, "key": a.key, "bytes": a.bytes,
                           "content_sha256": a.sha256}),
                )?,
                Capture::Failed { path, error } => self.hold(
                    event_kind::ARTIFACT_FAILED,
                    Some(node),
                    json!({"index": end.index, "attempt": end.attempt, "path": path,
                           "error": error}),
                )?,
            }
        }
        Ok(())
    }

    /// `stage.failed` (final) or `stage.completed`.
    pub(super) fn emit_stage_end(
        &self,
        node: usize,
        end: &StageEnd,
        outcome: &StageOutcome,
        signature: Option<&str>,
    ) -> Result<(), Stop> {
        let StageEnd {
            index,
            attempt,
            max_attempts,
            duration_ms,
        } = *end;
        if let (true, Some(f)) = (outcome.is_failed(), &outcome.failure) {
            let mut props = json!({"index": index, "failure": f.to_json(signature), "will_retry": false,
                       "duration_ms": duration_ms, "attempt": attempt});
            if let (Value::Object(m), Some(u)) = (&mut props, &outcome.usage) {
                m.insert("usage".into(), u.clone());
            }
            self.hold(event_kind::STAGE_FAILED, Some(node), props)?;
            return Ok(());
        }
        let mut props = json!({
            "index": index,
            "duration_ms": duration_ms,
            "status": outcome.status.as_str(),
            "suggested_next_ids": outcome.suggested_next_ids,
            "attempt": attempt,
            "max_attempts": max_attempts,
        });
        if let Value::Object(m) = &mut props {
            if let Some(l) = &outcome.preferred_label {
                m.insert("preferred_label".into(), Value::String(l.clone()));
            }
            if !outcome.context_updates.is_empty() {
                m.insert(
                    "context_updates".into(),
                    Value::Object(outcome.context_updates.clone()),
                );
            }
            if let Some(r) = &outcome.response {
                m.insert("response".into(), Value::String(r.clone()));
            }
            if let Some(n) = &outcome.notes {
                m.insert("notes".into(), Value::String(n.clone()));
            }
            if let Some(u) = &outcome.usage {
                m.insert("usage".into(), u.clone());
            }
            if !outcome.files_touched.is_empty() {
                m.insert("files_touched".into(), json!(outcome.files_touched));
            }
        }
        self.hold(event_kind::STAGE_COMPLETED, Some(node), props)?;
        Ok(())
    }

    /// One attempt under a per-attempt child token, cancelled at the node `timeout` (command
    /// nodes kill their process themselves; human nodes use it as the question timeout).
    pub(super) fn attempt(&self, node: usize, kind: HandlerKind) -> Result<StageOutcome, Stop> {
        let token = self.scope.cancel.child();
        let timeout = self
            .wf
            .node_view(node)
            .duration("timeout")
            .filter(|d| !d.is_zero());
        let timer = timeout
            .filter(|_| uses_attempt_timer(kind))
            .map(|t| start_timer(&token, t));
        let cx = StageCtx::new(self, node, kind, &token);
        let result = handlers::run(&cx);
        let timed_out = token.reason().as_deref() == Some(TIMED_OUT);
        token.cancel(ATTEMPT_DONE);
        if let Some(t) = timer {
            let _ = t.join();
        }
        match result {
            Ok(outcome) => Ok(outcome),
            Err(Interrupt::Store(e)) => Err(e.into()),
            Err(Interrupt::BudgetExceeded(message)) => Err(Stop::Failed(RunFailure {
                message,
                reason: FailureReason::BudgetExceeded,
            })),
            Err(Interrupt::Cancelled) if timed_out && !self.scope.cancel.is_cancelled() => {
                Ok(StageOutcome::failed(Failure::timeout(format!(
                    "stage `{}` timed out after {}",
                    self.scoped_id(node),
                    describe_duration(timeout.unwrap_or_default())
                ))))
            }
            Err(Interrupt::Cancelled) => {
                self.check_cancel()?;
                Err(Stop::Cancelled("cancelled".into()))
            }
        }
    }

    /// `allow_partial` (a retryable failure after the last attempt becomes
    /// partially_succeeded), then `auto_status` (anything but succeeded/skipped becomes
    /// succeeded).
    pub(super) fn post_process(&self, node: usize, mut o: StageOutcome) -> StageOutcome {
        let nv = self.wf.node_view(node);
        let retryable = o.failure.as_ref().is_some_and(|f| f.retryable);
        if o.is_failed() && retryable && nv.flag("allow_partial") {
            o.status = StageStatus::PartiallySucceeded;
            o.notes = o
                .failure
                .take()
                .map(|f| format!("allow_partial: {}", f.message));
        }
        if nv.flag("auto_status")
            && !matches!(o.status, StageStatus::Succeeded | StageStatus::Skipped)
        {
            let was = o.status.as_str();
            o.status = StageStatus::Succeeded;
            let why = o.failure.take().map(|f| f.message).or(o.notes.take());
            o.notes = Some(match why {
                Some(m) => format!("auto_status: {was} ({m})"),
                None => format!("auto_status: {was}"),
            });
        }
        o
    }

    /// Folds a finished stage into the state and the context; the breaker may stop the run.
    pub(super) fn record(&mut self, node: usize, f: &Finished) -> Result<(), Stop> {
        let id = self.wf.node(node).id.clone();
        let o = &f.outcome;
        self.state
            .complete(&id, o.status, f.attempts.saturating_sub(1));
        let kind = self.wf.handler(node).unwrap_or(HandlerKind::Agent);
        self.state.note(&id, StageNote::of(kind, o));
        if let Some(nested) = &o.nested {
            self.merge_nested(nested);
        }
        for (k, v) in &o.context_updates {
            self.state.set(k.clone(), v.clone());
            self.written.insert(k.clone());
        }
        self.write_engine_keys(node, &id, f);
        if let Some(mirror) = &self.mirror {
            *mirror.lock() = self.state.context.clone();
        }
        match &f.signature {
            Some(sig) => self.count_signature(node, sig),
            None => Ok(()),
        }
    }

    pub(super) fn write_engine_keys(&mut self, node: usize, id: &str, f: &Finished) {
        let st = &mut self.state;
        let o = &f.outcome;
        st.set(
            format!("{}{id}", context::RETRY_COUNT_PREFIX),
            Value::from(f.attempts.saturating_sub(1)),
        );
        // Start, exit and conditional nodes do no work: they leave `last_stage` and the
        // previous stage's outcome keys, so a diamond routes on the stage before it.
        if !writes_last_stage(self.wf.handler(node)) {
            return;
        }
        st.set(context::LAST_STAGE, Value::String(id.to_string()));
        st.set(context::OUTCOME, Value::String(o.status.as_str().into()));
        let failure = o.failure.as_ref().filter(|_| o.is_failed());
        let class = failure.map(|f| f.class.as_str()).unwrap_or("");
        st.set(context::FAILURE_CLASS, Value::String(class.into()));
        let sig = f.signature.clone().unwrap_or_default();
        st.set(context::FAILURE_SIGNATURE, Value::String(sig));
        match &o.preferred_label {
            Some(l) => st.set(context::PREFERRED_LABEL, Value::String(l.clone())),
            None => st.remove(context::PREFERRED_LABEL),
        }
    }

    /// Folds branch stage visits into this state, in order (branches never restart, so
    /// their path and completed nodes are the same list).
    pub(super) fn merge_nested(&mut self, n: &Nested) {
        for id in &n.path {
            let latest = |list: &[(String, StageStatus)]| {
                list.iter().rev().find(|(o, _)| o == id).map(|(_, s)| *s)
            };
            let status = latest(&n.outcomes).unwrap_or(StageStatus::Succeeded);
            let retries = n
                .retries
                .iter()
                .rev()
                .find(|(r, _)| r == id)
                .map_or(0, |(_, c)| *c);
            self.state.complete(id, status, retries);
            let note = n.notes.iter().rev().find(|(o, _)| o == id);
            self.state
                .note(id, note.map(|(_, x)| x.clone()).unwrap_or_default());
        }
        for (id, v) in &n.visits {
            self.state.add_visits(id, *v);
        }
        for (sig, c) in &n.signatures {
            self.state.count_signature(sig, *c);
        }
    }

    pub(super) fn count_signature(&mut self, node: usize, sig: &str) -> Result<(), Stop> {
        let count = self.state.count_signature(sig, 1);
        let limit = self
            .wf
            .graph_view()
            .int("loop_restart_signature_limit")
            .filter(|&l| l >= 1)
            .unwrap_or(DEFAULT_SIGNATURE_LIMIT);
        if i64::from(count) >= limit {
            return Err(Stop::failed(format!(
                "stage `{}` failed the same way {count} times (signature `{sig}`, loop_restart_signature_limit={limit}); stopping the run",
                self.scoped_id(node)
            )));
        }
        Ok(())
    }
}

/// Handlers that return at once with no effect, or whose first act is to record an event
/// (a command's `command.started`, before its process starts): their `stage.started` is
/// committed together with that event, or with the stage's end.
pub(super) fn starts_quietly(kind: HandlerKind) -> bool {
    matches!(
        kind,
        HandlerKind::Start | HandlerKind::Conditional | HandlerKind::Command
    )
}

/// Handlers that get the generic per-attempt timer; commands kill their own process and
/// human gates use `timeout` as the question's timeout.
pub(super) fn uses_attempt_timer(kind: HandlerKind) -> bool {
    !matches!(
        kind,
        HandlerKind::Command | HandlerKind::Human | HandlerKind::Start | HandlerKind::Exit
    )
}

/// Whether a stage of this handler is "a stage that does work": it sets `last_stage`,
/// `outcome`, `failure_class`, `failure_signature` and `preferred_label`. Start, exit and
/// conditional nodes do not (docs/decisions.md lists the handlers).
pub(super) fn writes_last_stage(kind: Option<HandlerKind>) -> bool {
    !matches!(
        kind,
        Some(HandlerKind::Start | HandlerKind::Exit | HandlerKind::Conditional)
    )
}
