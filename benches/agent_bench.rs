//! Agent-loop benchmarks (harness = false): per-turn overhead of the loop with an in-process
//! model that answers instantly, per-turn client-side cost through the real HTTP client
//! against the scripted provider server (server handling time subtracted), and the memory
//! held by an idle agent conversation (counted by a global allocator wrapper); and the
//! wall time of a shell tool call for a trivial command.
//!
//! Run: `cargo bench --bench agent_bench`.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use svc::internal::agent::{AgentConfig, Session};
use svc::internal::base::cancel::CancelToken;
use svc::internal::llm::{
    ChatModel, LlmError, Message, Part, Provider, Request, Response, Role, StopReason, StreamEvent,
    ToolCall, Usage,
};
use svc::internal::sandbox::Sandbox;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Answers instantly: `turns - 1` tool turns, then a text turn.
struct Stub {
    turns: usize,
    n: AtomicUsize,
    tool: &'static str,
    args: serde_json::Value,
}

impl ChatModel for Stub {
    fn chat(
        &self,
        _req: &Request,
        _cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Response, LlmError> {
        let i = self.n.fetch_add(1, Ordering::Relaxed);
        let usage = Usage {
            input: 1200,
            output: 80,
            ..Default::default()
        };
        let r = if i % self.turns == self.turns - 1 {
            on_event(StreamEvent::TextDelta("Done.".into()));
            Response {
                text: "Done.".into(),
                usage,
                model: "claude-sonnet-4-6".into(),
                ..Default::default()
            }
        } else {
            let call = ToolCall {
                id: format!("toolu_{i}"),
                name: self.tool.into(),
                arguments: self.args.clone(),
                signature: None,
            };
            Response {
                text: "Checking.".into(),
                tool_calls: vec![call.clone()],
                usage,
                stop_reason: StopReason::ToolUse,
                model: "claude-sonnet-4-6".into(),
                provider: Some(Provider::Anthropic),
                message: Some(Message {
                    role: Role::Assistant,
                    parts: vec![Part::text("Checking."), Part::ToolCall(call)],
                }),
            }
        };
        Ok(r)
    }
}

fn per_turn_stub(dir: &std::path::Path, tool: &'static str, args: serde_json::Value) -> Duration {
    let turns = 20;
    let sessions = 50;
    let stub = Stub {
        turns,
        n: AtomicUsize::new(0),
        tool,
        args,
    };
    let cancel = CancelToken::new();
    let start = Instant::now();
    for _ in 0..sessions {
        let mut s = Session::new(AgentConfig::new("sonnet"), Sandbox::new(dir).expect("sb"))
            .expect("session");
        let mut events = 0usize;
        let out = s
            .run(&stub, "Do the thing.", &cancel, &mut |_| events += 1)
            .expect("run");
        assert_eq!(out.turns as usize, turns);
    }
    start.elapsed() / (turns * sessions) as u32
}

/// CPU time consumed by the calling thread (excludes waiting for the server).
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn per_turn_http(dir: &std::path::Path, provider: Provider) -> (Duration, Duration, Duration) {
    let turns = 20u64;
    let sessions = 10u64;
    let server_ns = Arc::new(AtomicU64::new(0));
    let sn = server_ns.clone();
    let server = support::llm::ScriptedServer::start_with(move |n, _| {
        let t = Instant::now();
        let u = Usage {
            input: 1200,
            output: 80,
            ..Default::default()
        };
        let turn = if (n as u64) % turns == turns - 1 {
            support::llm::text("Done.")
        } else {
            support::llm::tools(&[(
                &format!("call_{n}"),
                "read_file",
                json!({"file_path": "small.txt"}),
            )])
        };
        let r = support::llm::reply(provider, &turn, u, true);
        sn.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    });
    let client = support::llm::client(provider, &server);
    let cancel = CancelToken::new();
    let start = Instant::now();
    let cpu0 = thread_cpu();
    for _ in 0..sessions {
        let cfg = AgentConfig {
            provider: Some(provider),
            ..AgentConfig::new(&support::llm::model_for(provider))
        };
        let mut s = Session::new(cfg, Sandbox::new(dir).expect("sb")).expect("session");
        let out = s
            .run(&client, "Do the thing.", &cancel, &mut |_| {})
            .expect("run");
        assert_eq!(out.turns as u64, turns);
    }
    let cpu = thread_cpu() - cpu0;
    let total = start.elapsed();
    let n = (turns * sessions) as u32;
    let server = Duration::from_nanos(server_ns.load(Ordering::Relaxed));
    (total / n, total.saturating_sub(server) / n, cpu / n)
}

fn idle_memory(dir: &std::path::Path) -> (usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    let fresh =
        Session::new(AgentConfig::new("sonnet"), Sandbox::new(dir).expect("sb")).expect("session");
    let fresh_bytes = LIVE.load(Ordering::Relaxed) - before;
    drop(fresh);
    let stub = Stub {
        turns: 20,
        n: AtomicUsize::new(0),
        tool: "read_file",
        args: json!({"file_path": "small.txt"}),
    };
    let before = LIVE.load(Ordering::Relaxed);
    let mut s =
        Session::new(AgentConfig::new("sonnet"), Sandbox::new(dir).expect("sb")).expect("session");
    s.run(&stub, "Do the thing.", &CancelToken::new(), &mut |_| {})
        .expect("run");
    let after = LIVE.load(Ordering::Relaxed) - before;
    std::hint::black_box(&s);
    (fresh_bytes, after)
}

/// Median wall time of the shell tool running `script` (100 calls after a warm-up).
fn shell_call(dir: &std::path::Path, script: &str) -> Duration {
    let sb = Sandbox::new(dir).expect("sandbox");
    let cancel = CancelToken::new();
    let call = || {
        let started = Instant::now();
        let out =
            svc::internal::agent::tools::shell::run(&sb, script, Duration::from_secs(10), &cancel)
                .expect("shell tool");
        assert!(!out.is_error(), "{out:?}");
        started.elapsed()
    };
    call();
    let mut samples: Vec<Duration> = (0..100).map(|_| call()).collect();
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("small.txt"),
        "line one\nline two\nline three\n",
    )
    .expect("write");
    // Warm up.
    per_turn_stub(dir.path(), "no_such_tool", json!({}));

    let pure = per_turn_stub(dir.path(), "no_such_tool", json!({}));
    println!(
        "agent loop, in-process model, unknown tool (pure loop overhead): {:>8.1} µs/turn",
        pure.as_secs_f64() * 1e6
    );
    let read = per_turn_stub(dir.path(), "read_file", json!({"file_path": "small.txt"}));
    println!(
        "agent loop, in-process model, read_file of a small file:          {:>8.1} µs/turn",
        read.as_secs_f64() * 1e6
    );
    for p in [
        Provider::Anthropic,
        Provider::OpenAi,
        Provider::Gemini,
        Provider::Kimi,
    ] {
        let (total, client, cpu) = per_turn_http(dir.path(), p);
        println!(
            "agent loop over HTTP+SSE ({:<9}) read_file: {:>7.1} µs/turn wall, {:>7.1} µs/turn wall minus server handling, {:>6.1} µs/turn agent-thread CPU",
            p.id(),
            total.as_secs_f64() * 1e6,
            client.as_secs_f64() * 1e6,
            cpu.as_secs_f64() * 1e6
        );
    }
    for script in ["true", "sleep 0.005"] {
        let label = format!("shell tool, `{script}` (start, wait, capture; no model):");
        println!(
            "{label:<67}{:>8.0} µs/call",
            shell_call(dir.path(), script).as_secs_f64() * 1e6
        );
    }
    let (fresh, after) = idle_memory(dir.path());
    println!("idle agent session, fresh (system prompt + tool specs): {fresh} bytes");
    println!("idle agent session after a 20-turn conversation:      {after} bytes");
}
