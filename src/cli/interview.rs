//! The terminal interviewer of `svc run`/`svc resume`: scripted `--answer NODE=CHOICE`
//! answers first (in order per node), then `--auto-approve` (first option), then the
//! terminal when stdin is one. Without any of these a question with a timeout waits it out
//! (so `human.default_choice` applies) and a question without one fails at once with a
//! message saying how to answer.
//! Must not touch: answer semantics (the engine matches and routes answers).

use crate::base::cancel::CancelToken;
use crate::engine::handlers::human::question::{match_answer, Answer, Question};
use crate::engine::{InterviewError, Interviewer, Reply};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, IsTerminal};
use std::sync::OnceLock;
use std::time::Duration;

pub struct CliInterviewer {
    answers: Mutex<HashMap<String, VecDeque<String>>>,
    auto_approve: bool,
    terminal: bool,
}

impl CliInterviewer {
    pub fn new(answers: Vec<(String, String)>, auto_approve: bool) -> CliInterviewer {
        let mut map: HashMap<String, VecDeque<String>> = HashMap::new();
        for (node, choice) in answers {
            map.entry(node).or_default().push_back(choice);
        }
        CliInterviewer {
            answers: Mutex::new(map),
            auto_approve,
            terminal: std::io::stdin().is_terminal(),
        }
    }

    /// The next scripted answer for the stage (`manager/gate` also matches `gate`).
    fn scripted(&self, stage: &str) -> Option<String> {
        let mut answers = self.answers.lock();
        let short = stage.rsplit('/').next().unwrap_or(stage);
        for key in [stage, short] {
            if let Some(a) = answers.get_mut(key).and_then(VecDeque::pop_front) {
                return Some(a);
            }
        }
        None
    }
}

impl Interviewer for CliInterviewer {
    fn ask(&self, q: &Question, cancel: &CancelToken) -> Result<Reply, InterviewError> {
        if let Some(a) = self.scripted(&q.stage) {
            eprintln!("? {}: {} → {a}", q.stage, q.text);
            return Ok(Reply::Text(a));
        }
        if self.auto_approve {
            return Ok(auto_answer(q));
        }
        if self.terminal {
            return ask_terminal(q, cancel);
        }
        if q.timeout_seconds.is_some() {
            eprintln!(
                "? {}: {} (no answer source; waiting for the question's timeout)",
                q.stage, q.text
            );
            while !cancel.sleep(Duration::from_secs(3600)) {}
            return Err(InterviewError::Cancelled);
        }
        Err(InterviewError::Unavailable(format!(
            "human stage `{}` needs an answer and stdin is not a terminal: pass --answer {}=CHOICE or --auto-approve",
            q.stage,
            q.stage.rsplit('/').next().unwrap_or(&q.stage)
        )))
    }
}

fn auto_answer(q: &Question) -> Reply {
    match q.options.first() {
        Some(o) => {
            eprintln!("? {}: {} → {} (auto-approved)", q.stage, q.text, o.label);
            Reply::Answer(Answer::Option {
                key: o.key.clone(),
                label: o.label.clone(),
                target: o.target.clone(),
            })
        }
        None => Reply::Text("approved".into()),
    }
}

/// Lines of stdin, read by one thread for the whole process.
fn stdin_lines() -> &'static Mutex<Receiver<String>> {
    static LINES: OnceLock<Mutex<Receiver<String>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(l) = line else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Mutex::new(rx)
    })
}

fn ask_terminal(q: &Question, cancel: &CancelToken) -> Result<Reply, InterviewError> {
    eprintln!("\n? {} ({})", q.text, q.stage);
    if let Some(d) = &q.context_display {
        eprintln!("  {}", d.lines().take(10).collect::<Vec<_>>().join("\n  "));
    }
    for o in &q.options {
        eprintln!("  [{}] {}", o.key, o.label);
    }
    if q.allow_freeform {
        eprintln!("  (or type a free-form answer)");
    }
    let lines = stdin_lines().lock();
    loop {
        eprint!("> ");
        let line = loop {
            if cancel.is_cancelled() {
                return Err(InterviewError::Cancelled);
            }
            match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => break l,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(InterviewError::Unavailable(format!(
                        "stdin closed before human stage `{}` was answered",
                        q.stage
                    )))
                }
            }
        };
        match match_answer(q, &line) {
            Ok(a) => return Ok(Reply::Answer(a)),
            Err(e) => eprintln!("  {e}; try again"),
        }
    }
}
