//! Validation rules, one test or more per rule: the diagnostic, its severity and its words.
//! Must not: run a workflow.

use super::*;
use crate::workflow::{load, NoFiles};
use std::collections::HashMap;

struct Files(HashMap<&'static str, &'static str>);

impl FileSource for Files {
    fn read(&self, rel: &str) -> Option<String> {
        self.0.get(rel).map(|s| s.to_string())
    }
}

fn diags_with(src: &str, files: &dyn FileSource) -> Vec<Diagnostic> {
    match load(src, files) {
        Ok(l) => l.diagnostics,
        Err(e) => panic!("parse error: {e}\n{src}"),
    }
}

fn diags(src: &str) -> Vec<Diagnostic> {
    diags_with(src, &NoFiles)
}

/// Rules that fired, with their severity.
fn fired(src: &str, rule: &str) -> Vec<Diagnostic> {
    diags(src).into_iter().filter(|d| d.rule == rule).collect()
}

fn flow(body: &str) -> String {
    format!("digraph T {{\n start [shape=Mdiamond]\n exit [shape=Msquare]\n {body}\n}}")
}

fn assert_clean(src: &str) {
    let d = diags(src);
    assert!(d.iter().all(|d| d.severity != Severity::Error), "{d:#?}");
}

#[test]
fn minimal_workflow_is_clean() {
    let d = diags(&flow("start -> a -> exit\n a [prompt=\"do it\"]"));
    assert!(d.is_empty(), "{d:#?}");
}

#[test]
fn start_node_rule() {
    assert!(fired(&flow("start -> exit"), "start_node").is_empty());
    let d = fired(
        "digraph T { a -> exit [label=x] exit [shape=Msquare] }",
        "start_node",
    );
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("Mdiamond") && d[0].message.contains("found none"));
    let d = fired(
        &flow("start -> exit\n s2 [shape=Mdiamond] s2 -> exit"),
        "start_node",
    );
    assert!(d[0].message.contains("found 2"), "{}", d[0].message);
    // Reserved ids count as start/exit even without a shape.
    assert!(fired("digraph T { start -> a -> end }", "start_node").is_empty());
    assert!(fired("digraph T { start -> a -> end }", "terminal_node").is_empty());
}

#[test]
fn terminal_node_rule() {
    let d = fired("digraph T { start -> a }", "terminal_node");
    assert!(d[0].message.contains("Msquare"));
    let d = fired(
        &flow("start -> exit\n start -> e2\n e2 [shape=Msquare]"),
        "terminal_node",
    );
    assert!(d[0].message.contains("found 2"));
    assert_eq!(d[0].severity, Severity::Error);
}

#[test]
fn start_no_incoming_rule() {
    assert!(fired(&flow("start -> exit"), "start_no_incoming").is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a -> start [condition=\"outcome=failed\"]"),
        "start_no_incoming",
    );
    assert_eq!(d[0].node_id.as_deref(), Some("start"));
}

#[test]
fn exit_no_outgoing_rule() {
    assert!(fired(&flow("start -> exit"), "exit_no_outgoing").is_empty());
    assert_eq!(
        fired(&flow("start -> exit -> a -> exit"), "exit_no_outgoing").len(),
        1
    );
}

#[test]
fn dead_end_rule() {
    let d = fired(&flow("start -> a -> exit\n start -> b"), "dead_end");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].node_id.as_deref(), Some("b"));
    // Other engines accept dead ends: a warning that says what a run would do.
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(
        d[0].message.contains("no route from `b`"),
        "{}",
        d[0].message
    );
    assert!(d[0].line.is_some());
    // A parallel branch may end without edges.
    assert!(fired(
        &flow("start -> fork -> a\n fork -> b\n fork -> join -> exit\n fork [shape=component]\n join [shape=tripleoctagon]"),
        "dead_end"
    )
    .is_empty());
}

#[test]
fn all_conditional_out_edges_are_allowed() {
    assert_clean(&flow(
        "start -> check\n check [shape=diamond]\n check -> exit [condition=\"outcome=succeeded\"]\n check -> fix [condition=\"outcome!=succeeded\"]\n fix -> check",
    ));
}

#[test]
fn type_known_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [type=\"codergen\"]"),
        "type_known"
    )
    .is_empty());
    assert!(fired(
        &flow("start -> a -> exit\n a [type=\"wait.human\"]"),
        "type_known"
    )
    .is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [type=\"subgraph\"]"),
        "type_known",
    );
    assert!(d[0].message.contains("unknown type `subgraph`"));
}

#[test]
fn attribute_type_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [max_retries=\"3\", goal_gate=\"true\", timeout=\"900s\"]"),
        "attribute_type"
    )
    .is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [max_retries=lots]"),
        "attribute_type",
    );
    assert!(
        d[0].message
            .contains("`max_retries` has value `lots`, expected an integer"),
        "{}",
        d[0].message
    );
    let d = fired(&flow("start -> a -> exit [weight=heavy]"), "attribute_type");
    assert_eq!(d.len(), 2, "both edges of the chain carry the bad weight");
    assert!(d[0].edge.is_some());
    let d = fired(
        &flow("start -> exit\n graph [stall_timeout=300]"),
        "attribute_type",
    );
    assert_eq!(d.len(), 1);
    assert!(fired(
        &flow("start -> exit\n graph [stall_timeout=0]"),
        "attribute_type"
    )
    .is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [fidelity=\"summary\"]"),
        "attribute_type",
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn condition_syntax_rule() {
    assert!(fired(
        &flow("start -> exit [condition=\"outcome=succeeded\"]\n start -> exit"),
        "condition_syntax"
    )
    .is_empty());
    let d = fired(
        &flow("start -> exit [condition=\"(outcome=succeeded)\"]\n start -> exit"),
        "condition_syntax",
    );
    assert_eq!(d.len(), 1);
    let d = fired(
        &flow("start -> exit [condition=\"context.x matches \\\"[\\\"\"]\n start -> exit"),
        "condition_syntax",
    );
    assert_eq!(d.len(), 1, "bad regex is a condition error");
    let d = fired(
        &flow("start -> exit [condition=\"context.x !contains y\"]\n start -> exit"),
        "condition_syntax",
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn stylesheet_syntax_rule() {
    assert!(fired(
        &flow("start -> exit\n graph [model_stylesheet=\"* { model: sonnet; }\"]"),
        "stylesheet_syntax"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> exit\n graph [model_stylesheet=\"* { model sonnet }\"]"),
            "stylesheet_syntax"
        )
        .len(),
        1
    );
}

#[test]
fn random_selection_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a -> exit\n a [selection=random]"),
        "random_selection_no_conditions"
    )
    .is_empty());
    let d = fired(
        &flow(
            "start -> a -> exit\n a -> exit [condition=\"outcome=failed\"]\n a [selection=random]",
        ),
        "random_selection_no_conditions",
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn wait_duration_rule() {
    assert!(fired(
        &flow("start -> w -> exit\n w [shape=insulator, duration=5s]"),
        "wait_duration"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> w -> exit\n w [shape=insulator]"),
            "wait_duration"
        )
        .len(),
        1
    );
    assert_eq!(
        fired(
            &flow("start -> w -> exit\n w [shape=insulator, duration=5]"),
            "wait_duration"
        )
        .len(),
        1
    );
}

#[test]
fn freeform_edge_count_rule() {
    assert!(fired(
        &flow("start -> h -> exit [freeform=true]\n h [shape=hexagon]"),
        "freeform_edge_count"
    )
    .is_empty());
    let d = fired(
        &flow("start -> h -> exit [freeform=true]\n h -> exit [freeform=true]\n h [shape=hexagon]"),
        "freeform_edge_count",
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn retry_target_exists_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [retry_target=a]"),
        "retry_target_exists"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [retry_target=nope]"),
            "retry_target_exists"
        )
        .len(),
        1
    );
    assert_eq!(
        fired(
            &flow("start -> exit\n graph [fallback_retry_target=nope]"),
            "retry_target_exists"
        )
        .len(),
        1
    );
}

#[test]
fn unresolved_file_ref_rule() {
    let src = flow("start -> a -> exit\n a [prompt=\"@prompts/a.md\"]");
    let files = Files(HashMap::from([("prompts/a.md", "Do the thing")]));
    let loaded = load(&src, &files).unwrap();
    assert!(loaded
        .diagnostics
        .iter()
        .all(|d| d.rule != "unresolved_file_ref"));
    let i = loaded.workflow.node_index("a").unwrap();
    assert_eq!(
        loaded.workflow.node_view(i).text("prompt"),
        Some("Do the thing")
    );
    let d = fired(&src, "unresolved_file_ref");
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("prompts/a.md"));
    let d = fired(
        &flow("start -> m -> exit\n m [shape=house, stack.child_workflow=\"child.dot\"]"),
        "unresolved_file_ref",
    );
    assert_eq!(d.len(), 1);
}

#[test]
#[cfg(feature = "schema")]
fn output_schema_valid_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [output_schema=routing]"),
        "output_schema_valid"
    )
    .is_empty());
    assert!(fired(&flow("start -> a -> exit\n a [shape=parallelogram, script=\"echo\", output_schema=\"{\\\"type\\\": \\\"object\\\"}\"]"), "output_schema_valid").is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [output_schema=\"{not json\"]"),
            "output_schema_valid"
        )
        .len(),
        1
    );
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [output_schema=\"{\\\"type\\\": 12}\"]"),
            "output_schema_valid"
        )
        .len(),
        1
    );
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [shape=hexagon, output_schema=routing]"),
            "output_schema_valid"
        )
        .len(),
        1
    );
}

#[test]
fn acp_rules() {
    assert!(fired(
        &flow("start -> a -> exit\n a [backend=acp, acp.command=\"agent\"]"),
        "acp_output_schema"
    )
    .is_empty());
    assert_eq!(fired(&flow("start -> a -> exit\n a [backend=acp, acp.command=\"agent\", output_schema=routing]"), "acp_output_schema").len(), 1);
    assert!(fired(
        &flow("start -> a -> exit\n a [backend=acp, acp.config=\"c.json\"]"),
        "acp_command_or_config"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [backend=acp, acp.command=\"x\", acp.config=\"c.json\"]"),
            "acp_command_or_config"
        )
        .len(),
        1
    );
    assert!(fired(
        &flow("start -> a -> exit\n a [shape=tab]"),
        "prompt_backend_api"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [shape=tab, backend=acp]"),
            "prompt_backend_api"
        )
        .len(),
        1
    );
}

#[test]
fn acp_output_schema_is_refused_with_a_clear_message() {
    let d = fired(
        &flow("start -> a -> exit\n a [backend=acp, acp.command=\"agent\", output_schema=routing]"),
        "acp_output_schema",
    );
    assert_eq!(d[0].severity, Severity::Error);
    assert_eq!(d[0].node_id.as_deref(), Some("a"));
    assert!(
        d[0].message
            .contains("backend=acp does not support output_schema"),
        "{}",
        d[0].message
    );
}

#[test]
fn acp_agents_must_say_which_agent_to_run() {
    let d = fired(
        &flow("start -> a -> exit\n a [backend=acp]"),
        "acp_command_or_config",
    );
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].message.contains("needs acp.command or acp.config"));
    // A prompt node with backend=acp gets prompt_backend_api, not this one too.
    assert!(fired(
        &flow("start -> a -> exit\n a [shape=tab, backend=acp]"),
        "acp_command_or_config"
    )
    .is_empty());
}

#[test]
fn acp_config_must_be_a_readable_agent_description() {
    let files = Files(HashMap::from([
        (
            "agents/ok.json",
            r#"{"command": "my-agent", "args": ["--acp"]}"#,
        ),
        ("agents/bad.json", r#"{"cmd": "my-agent"}"#),
    ]));
    let rule = |attrs: &str| -> Vec<Diagnostic> {
        diags_with(
            &flow(&format!("start -> a -> exit\n a [backend=acp, {attrs}]")),
            &files,
        )
        .into_iter()
        .filter(|d| d.rule == "acp_config_valid")
        .collect()
    };
    assert!(rule("acp.config=\"agents/ok.json\"").is_empty());
    assert!(rule("acp.config=\"@agents/ok.json\"").is_empty());
    assert!(rule(r#"acp.config="{\"command\": \"x\"}""#).is_empty());
    let d = rule("acp.config=\"agents/missing.json\"");
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("cannot be read"), "{}", d[0].message);
    let d = rule("acp.config=\"agents/bad.json\"");
    assert!(
        d[0].message.contains("not a valid ACP agent description"),
        "{}",
        d[0].message
    );
}

#[test]
fn acp_attributes_without_the_acp_backend_are_a_warning() {
    let d = fired(
        &flow("start -> a -> exit\n a [acp.command=\"agent\"]"),
        "acp_without_backend",
    );
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].message.contains("add backend=acp"));
    assert!(fired(
        &flow("start -> a -> exit\n a [backend=acp, acp.command=\"agent\"]"),
        "acp_without_backend"
    )
    .is_empty());
}

#[test]
fn max_turns_outside_api_agents_is_a_warning() {
    assert!(fired(
        &flow("start -> a -> exit\n a [max_turns=5]"),
        "max_turns_ignored"
    )
    .is_empty());
    for (attrs, why) in [
        ("shape=tab, max_turns=5", "one model call"),
        (
            "shape=parallelogram, script=\"true\", max_turns=5",
            "only agent nodes",
        ),
        (
            "backend=acp, acp.command=\"agent\", max_turns=5",
            "ACP agent keeps its own",
        ),
    ] {
        let d = fired(
            &flow(&format!("start -> a -> exit\n a [{attrs}]")),
            "max_turns_ignored",
        );
        assert_eq!(d.len(), 1, "{attrs}");
        assert_eq!(d[0].severity, Severity::Warning);
        assert!(d[0].message.contains(why), "{}", d[0].message);
    }
    let d = fired(
        &flow("start -> a -> exit\n a [max_turns=lots]"),
        "attribute_type",
    );
    assert_eq!(d.len(), 1);
}

#[test]
fn manager_child_workflow_rule() {
    assert!(fired(&flow("start -> m -> exit\n m [shape=house, stack.child_dot_source=\"digraph C { start -> exit }\"]"), "manager_child_workflow").is_empty());
    assert_eq!(
        fired(
            &flow("start -> m -> exit\n m [shape=house]"),
            "manager_child_workflow"
        )
        .len(),
        1
    );
}

#[test]
fn reachability_is_a_warning() {
    assert!(fired(&flow("start -> exit"), "reachability").is_empty());
    let d = fired(&flow("start -> exit\n orphan -> exit"), "reachability");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Warning);
}

#[test]
fn model_known_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [model=sonnet]"),
        "model_known"
    )
    .is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [model=\"gpt-9000\"]"),
        "model_known",
    );
    assert_eq!(d[0].severity, Severity::Warning);
}

#[test]
fn legacy_outcome_names_rule() {
    assert!(fired(
        &flow("start -> exit [condition=\"outcome=succeeded\"]\n start -> exit"),
        "legacy_outcome_names"
    )
    .is_empty());
    let d = fired(
        &flow("start -> exit [condition=\"outcome=success\"]\n start -> exit"),
        "legacy_outcome_names",
    );
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].message.contains("`succeeded`"));
}

#[test]
fn thread_id_requires_full_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [thread_id=t, fidelity=full]"),
        "thread_id_requires_full"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [thread_id=t]"),
            "thread_id_requires_full"
        )
        .len(),
        1
    );
}

#[test]
fn rankdir_rule() {
    assert!(fired(&flow("start -> exit\n rankdir=LR"), "rankdir_valid").is_empty());
    assert_eq!(
        fired(&flow("start -> exit\n rankdir=XY"), "rankdir_valid").len(),
        1
    );
}

#[test]
fn goal_gate_has_retry_rule() {
    assert!(fired(
        &flow("start -> a -> exit\n a [goal_gate=true, retry_target=a]"),
        "goal_gate_has_retry"
    )
    .is_empty());
    assert!(fired(
        &flow("start -> a -> exit\n a [goal_gate=true]\n graph [retry_target=a]"),
        "goal_gate_has_retry"
    )
    .is_empty());
    assert_eq!(
        fired(
            &flow("start -> a -> exit\n a [goal_gate=true]"),
            "goal_gate_has_retry"
        )
        .len(),
        1
    );
}

#[test]
fn prompt_variables_rule() {
    assert!(fired(&flow("start -> a -> exit\n a [prompt=\"Goal: $goal, ${context.x} $inputs.y costs $5 $HOME\"]"), "prompt_variables").is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [prompt=\"Use $golas\"]"),
        "prompt_variables",
    );
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("$golas"));
}

#[test]
fn stylesheet_fills_missing_and_beats_defaults_only() {
    let src = flow(
        "graph [model_stylesheet=\"* { model: sonnet; provider: anthropic } .fast { model: haiku } #b { model: opus }\"]\n node [model=\"gpt-5.2\"]\n start -> a -> b -> c -> exit\n a [class=fast]\n c [model=\"gpt-5.4\"]",
    );
    let w = load(&src, &NoFiles).unwrap().workflow;
    let model = |id: &str| {
        w.node_view(w.node_index(id).unwrap())
            .text("model")
            .map(str::to_string)
    };
    assert_eq!(model("a").as_deref(), Some("haiku"));
    assert_eq!(model("b").as_deref(), Some("opus"));
    assert_eq!(
        model("c").as_deref(),
        Some("gpt-5.4"),
        "explicit attribute wins"
    );
    let prov = w
        .node_view(w.node_index("c").unwrap())
        .text("provider")
        .map(str::to_string);
    assert_eq!(prov.as_deref(), Some("anthropic"));
}

#[test]
fn handler_resolution() {
    let w = load(&flow("start -> a -> b -> c -> exit\n a [shape=tab]\n b [shape=box, type=command]\n c [shape=weird]"), &NoFiles).unwrap().workflow;
    let h = |id: &str| w.handler(w.node_index(id).unwrap());
    assert_eq!(h("a"), Some(HandlerKind::Prompt));
    assert_eq!(h("b"), Some(HandlerKind::Command));
    assert_eq!(h("c"), Some(HandlerKind::Agent));
    assert_eq!(h("start"), Some(HandlerKind::Start));
    let w = load("digraph T { Start -> x -> End }", &NoFiles)
        .unwrap()
        .workflow;
    assert_eq!(
        w.handler(w.node_index("Start").unwrap()),
        Some(HandlerKind::Start)
    );
    assert_eq!(
        w.handler(w.node_index("End").unwrap()),
        Some(HandlerKind::Exit)
    );
}

#[test]
fn no_path_to_exit_names_the_loop() {
    let d = fired(
        &flow("start -> a -> b -> a\n start -> exit [condition=\"outcome=failed\"]\n c -> c"),
        "no_path_to_exit",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert_eq!(d[0].node_id.as_deref(), Some("a"));
    assert!(d[0].message.contains("a, b"), "{}", d[0].message);
    // A self-loop with no way out is a loop too; the unreachable `c -> c` above is not reported.
    let d = fired(&flow("start -> a -> a\n start -> exit"), "no_path_to_exit");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].node_id.as_deref(), Some("a"));
    // Two separate traps are two errors; the node leading into a trap is not on it.
    let d = fired(
        &flow("start -> exit\n start -> p -> a -> b -> a\n p -> c -> d -> c"),
        "no_path_to_exit",
    );
    let nodes: Vec<_> = d.iter().map(|d| d.node_id.clone().unwrap()).collect();
    assert_eq!(nodes, ["a", "c"]);
}

#[test]
fn loops_with_a_way_out_are_fine() {
    // Any edge counts as a way out, conditional or not.
    assert!(fired(
        &flow("start -> a -> b -> a\n b -> exit [condition=\"outcome=succeeded\"]"),
        "no_path_to_exit"
    )
    .is_empty());
    // A dead end is only a warning, not a trapped loop.
    assert!(fired(&flow("start -> a -> exit\n a -> b"), "no_path_to_exit").is_empty());
}

#[test]
fn no_path_to_exit_stays_linear_on_a_long_trapped_chain() {
    // 100,000 nodes in one big loop with no way out: one error listing the first ten.
    let n = 100_000;
    let mut body = String::from("start -> exit [condition=\"outcome=failed\"]\n start -> n0\n");
    for i in 0..n {
        body.push_str(&format!("n{i} -> n{}\n", (i + 1) % n));
    }
    let d = fired(&flow(&body), "no_path_to_exit");
    assert_eq!(d.len(), 1);
    assert!(d[0].message.contains("and 99990 more"), "{}", d[0].message);
}

#[test]
fn command_without_script_is_an_error() {
    let d = fired(
        &flow("start -> run -> exit\n run [shape=parallelogram]"),
        "command_script",
    );
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Error);
    assert_eq!(d[0].node_id.as_deref(), Some("run"));
    assert!(fired(
        &flow("start -> run -> exit\n run [shape=parallelogram, script=\"true\"]"),
        "command_script"
    )
    .is_empty());
    // Another engine's tool_command is read as the script.
    assert!(fired(
        &flow("start -> run -> exit\n run [shape=parallelogram, tool_command=\"true\"]"),
        "command_script"
    )
    .is_empty());
}

#[test]
fn unknown_attributes_warn_with_a_suggestion() {
    let d = fired(
        &flow("graph [goal=x, gaol=y, color=red]\n start -> run -> exit [wieght=2, style=bold]\n run [shape=parallelogram, scirpt=\"true\", script=\"true\", fontname=Arial]\n other [scirpt=1]\n run -> other [max_visits=2] other -> exit"),
        "unknown_attribute",
    );
    let msgs: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert!(d.iter().all(|d| d.severity == Severity::Warning));
    assert_eq!(msgs.len(), 4, "{msgs:#?}");
    assert!(msgs[0].contains("`gaol`") && msgs[0].contains("did you mean `goal`?"));
    // Reported once per key and scope, at its first use.
    assert!(msgs[1].starts_with("node `run`") && msgs[1].contains("did you mean `script`?"));
    assert!(msgs[2].contains("`wieght`") && msgs[2].contains("did you mean `weight`?"));
    assert!(
        msgs[3].contains("`max_visits` is a node attribute"),
        "{}",
        msgs[3]
    );
}

#[test]
fn did_you_mean_stays_close() {
    let names = ["script", "prompt", "timeout", "goal"];
    assert_eq!(
        did_you_mean("scirpt", names.iter().copied()),
        Some("script")
    );
    assert_eq!(did_you_mean("promt", names.iter().copied()), Some("prompt"));
    assert_eq!(did_you_mean("join_policy", names.iter().copied()), None);
    assert_eq!(did_you_mean("go", names.iter().copied()), None);
}

#[test]
fn stylesheet_properties_unknown_and_aliased() {
    let src = flow(
        "graph [model_stylesheet=\"* { llm_model: claude-sonnet-4-6; modle: x; speed: fast }\"]\n start -> a -> exit",
    );
    let unknown = fired(&src, "stylesheet_property");
    let msgs: Vec<&str> = unknown.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    assert!(msgs[0].contains("`modle`") && msgs[0].contains("did you mean `model`?"));
    assert!(msgs[1].contains("`speed`"));
    let alias = fired(&src, "alias_attribute");
    assert_eq!(alias.len(), 1);
    assert!(alias[0].message.contains("write `model`"));
    // The alias is applied as `model`.
    let wf = load(&src, &NoFiles).unwrap().workflow;
    let a = wf.node_index("a").unwrap();
    assert_eq!(wf.node_view(a).text("model"), Some("claude-sonnet-4-6"));
}

#[test]
fn aliases_are_read_as_ours_with_a_warning() {
    let src = flow(
        "graph [default_max_retry=2]\n start -> run -> ag -> m -> exit\n run [shape=parallelogram, tool_command=\"echo hi\"]\n ag [llm_model=gpt-5.2, llm_provider=openai, model=claude-opus-4-6]\n m [shape=house, stack.child_dotfile=\"child.dot\", max_cycles=3, stop_condition=\"context.done=true\", poll_interval=\"1s\"]\n other [max_cycles=3]\n run -> other -> exit",
    );
    let files = Files(HashMap::from([(
        "child.dot",
        "digraph C { start -> exit }",
    )]));
    let loaded = load(&src, &files).unwrap();
    let wf = &loaded.workflow;
    let v = |id: &str, k: &str| {
        let i = wf.node_index(id).unwrap();
        wf.node(i).attrs.get(k).map(|v| v.to_text())
    };
    assert_eq!(v("run", "script").as_deref(), Some("echo hi"));
    assert_eq!(v("ag", "provider").as_deref(), Some("openai"));
    // Ours wins when both are set.
    assert_eq!(v("ag", "model").as_deref(), Some("claude-opus-4-6"));
    assert_eq!(v("m", "stack.child_workflow").as_deref(), Some("child.dot"));
    assert_eq!(v("m", "manager.max_cycles").as_deref(), Some("3"));
    assert_eq!(v("m", "manager.poll_interval").as_deref(), Some("1s"));
    assert_eq!(
        v("m", "manager.stop_condition").as_deref(),
        Some("context.done=true")
    );
    // Unprefixed manager keys on other nodes mean nothing.
    assert_eq!(v("other", "manager.max_cycles"), None);
    assert_eq!(wf.graph_view().int("default_max_retries"), Some(2));

    let alias: Vec<String> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.rule == "alias_attribute")
        .map(|d| d.message.clone())
        .collect();
    assert_eq!(alias.len(), 8, "{alias:#?}");
    assert!(alias
        .iter()
        .any(|m| m.contains("`tool_command` is read as `script`")));
    assert!(
        alias
            .iter()
            .any(|m| m
                .contains("`llm_model` is another engine's name for `model`, which is also set"))
    );
    assert!(alias
        .iter()
        .any(|m| m.contains("`stack.child_dotfile` is read as `stack.child_workflow`")));
    assert!(alias.iter().any(|m| m.contains("`default_max_retry`")));
    let unknown: Vec<&Diagnostic> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.rule == "unknown_attribute")
        .collect();
    assert_eq!(unknown.len(), 1, "{unknown:#?}");
    assert_eq!(unknown[0].node_id.as_deref(), Some("other"));
    assert!(!loaded.has_errors(), "{:#?}", loaded.diagnostics);
}

#[test]
fn tool_output_condition_key_warns_naming_command_output() {
    let d = fired(
        &flow("start -> t\n t -> exit [condition=\"context.tool.output\"]\n t -> exit\n t [shape=parallelogram, script=\"echo\"]"),
        "alias_context_key",
    );
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].severity, Severity::Warning);
    assert!(d[0].message.contains("context.command.output"));
    // A manager's stop condition too.
    let d = fired(
        &flow("start -> m -> exit\n m [shape=house, stack.child_dot_source=\"digraph C { start -> exit }\", manager.stop_condition=\"tool.output=done\"]"),
        "alias_context_key",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].node_id.as_deref(), Some("m"));
}

#[test]
fn tool_hooks_only_on_api_agents() {
    let d = fired(
        &flow("start -> a -> c -> exit\n a [tool_hooks.pre=\"true\"]\n c [shape=parallelogram, script=\"x\", tool_hooks.post=\"true\"]"),
        "tool_hooks_ignored",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].node_id.as_deref(), Some("c"));
    assert!(fired(
        &flow("graph [tool_hooks.pre=\"true\"]\n start -> a -> exit"),
        "unknown_attribute"
    )
    .is_empty());
}

#[test]
fn mcp_servers_names_ids_on_agent_nodes() {
    // Ids separated by commas or spaces; empty means none; all of it is ours, not unknown.
    let ok = flow("start -> a -> b -> exit\n a [mcp_servers=\"time, git\"]\n b [mcp_servers=\"\"]");
    assert!(fired(&ok, "mcp_servers_list").is_empty());
    assert!(fired(&ok, "unknown_attribute").is_empty());
    let d = fired(
        &flow("start -> a -> exit\n a [mcp_servers=\"time, Git_Hub\"]"),
        "mcp_servers_list",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Error);
    assert!(d[0].message.contains("`Git_Hub`"), "{}", d[0].message);
    let d = fired(
        &flow("start -> c -> exit\n c [shape=parallelogram, script=\"x\", mcp_servers=\"time\"]"),
        "mcp_servers_list",
    );
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].severity, Severity::Warning);
}
