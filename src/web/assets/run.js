// The run page: header and controls, the workflow graph coloured live by stage state, the
// event log (SSE with Last-Event-ID resume), stage details, pending questions answered in
// place, steering while an agent stage runs, usage and file diffs, the Ask panel (questions
// about the run, answers streamed, interrupt), "rewind to here" on completed stages, and the
// run's pull request with its checks.
'use strict';
(() => {
  const {el, api, show, errorBox, fmtMs, fmtUsd, fmtInt, fmtTime, fmtSecs, statusWords, isTerminal} = svc;
  const id = decodeURIComponent(location.pathname.split('/')[2] || '');
  const base = '/api/v1/runs/' + encodeURIComponent(id);
  const nodeState = new Map();   // node id -> pending|running|succeeded|failed|retried|skipped
  const nodeEvents = new Map();  // node id -> events
  const agents = new Set();      // agent stages running now
  const questions = new Map();   // question id -> question item
  let run = null;
  let lastSeq = 0;
  let selected = null;
  let es = null;
  const ui = {};

  function section(title, idName, ...kids) {
    return el('section', {class: 'panel', id: idName, 'aria-labelledby': idName + '-h'},
      el('h2', {id: idName + '-h'}, title), ...kids);
  }

  // ---- header and controls ----
  function controlsFor(r) {
    const st = r.lifecycle.status;
    const s = st.kind;
    const pc = r.lifecycle.pending_control;
    const arch = r.lifecycle.archived;
    const out = [];
    if (!arch && s === 'submitted') out.push(['start', 'Start']);
    if (!arch && ((s === 'failed' && st.reason !== 'approval_denied') || s === 'dead')) out.push(['resume', 'Resume']);
    if (['submitted', 'pending', 'runnable'].includes(s) ||
        (['starting', 'running', 'blocked', 'paused'].includes(s) && pc !== 'cancel')) out.push(['cancel', 'Cancel']);
    if (!pc && (s === 'running' || s === 'blocked')) out.push(['pause', 'Pause']);
    if (!pc && s === 'paused') out.push(['unpause', 'Unpause']);
    if (s === 'pending' && st.reason === 'approval_required') out.push(['approve', 'Approve'], ['deny', 'Deny']);
    if (isTerminal(s) && !arch) out.push(['archive', 'Archive']);
    if (arch) out.push(['unarchive', 'Unarchive']);
    if (isTerminal(s)) out.push(['delete', 'Delete']);
    return out;
  }

  async function control(action) {
    svc.fill(ui.controlMsg);
    try {
      if (action === 'delete') {
        if (!window.confirm('Delete this run and its events? This cannot be undone.')) return;
        await api('DELETE', base);
        location.assign('/');
        return;
      }
      let body;
      if (action === 'resume') { body = {resume: true}; action = 'start'; }
      if (action === 'deny') {
        const reason = window.prompt('Reason for denying (optional):', '');
        if (reason === null) return;
        body = reason ? {reason} : {};
      }
      run = await api('POST', `${base}/${action}`, body);
      renderHead();
    } catch (e) {
      svc.fill(ui.controlMsg, errorBox(e, 'That did not work'));
    }
  }

  function renderHead() {
    const r = run;
    const st = r.lifecycle.status;
    const wall = r.timing ? r.timing.wall_time_ms : null;
    const cost = r.billing ? r.billing.total_usd_micros : null;
    ui.title.textContent = r.title || r.id;
    document.title = `${r.title || r.id} · svc`;
    ui.badge.textContent = statusWords(st);
    ui.badge.className = 'badge s-' + st.kind;
    const facts = [
      ['Workflow', (r.workflow && (r.workflow.name || r.workflow.slug)) || '–'],
      ['Created', fmtTime(r.timestamps.created_at)],
      ['Started', fmtTime(r.timestamps.started_at)],
      ['Completed', fmtTime(r.timestamps.completed_at)],
      ['Wall time', fmtMs(wall)],
      ['Cost', r.billing ? fmtUsd(cost) : '–'],
    ];
    if (r.repository) facts.splice(1, 0, ['Repository', r.repository.name]);
    if (r.automation) {
      facts.push(['Automation', el('a', {id: 'run-automation', href: '/automations/' + encodeURIComponent(r.automation.id)},
        (r.automation.name || r.automation.id) + (r.automation.trigger_id ? ` (${r.automation.trigger_id})` : ''))]);
    }
    const plan = r.sandbox && r.sandbox.plan;
    if (plan && plan.environment) {
      facts.push(['Environment', el('a', {id: 'run-environment', href: '/environments#env-' + encodeURIComponent(plan.environment)},
        `${plan.environment} (${plan.provider})`)]);
    } else if (plan) {
      facts.push(['Sandbox', plan.provider]);
    }
    if (r.lifecycle.queue_position) facts.push(['Queue position', String(r.lifecycle.queue_position)]);
    if (r.lifecycle.pending_control) facts.push(['Pending', r.lifecycle.pending_control]);
    if (r.lifecycle.archived) facts.push(['Archived', fmtTime(r.lifecycle.archived_at)]);
    // Each label and its value in one cell, so the grid never wraps a value onto the row
    // below its label.
    svc.fill(ui.facts, ...facts.map(([k, v]) => el('div', {class: 'fact'}, el('dt', {}, k), el('dd', {}, v))));
    ui.goal.textContent = r.goal || '';
    svc.fill(ui.runError, r.lifecycle.error
      ? el('p', {class: 'error', role: 'alert'}, r.lifecycle.error.message) : '');
    if (r.pull_request && !ui.prLoaded) loadPrSoon();
    ui.pr.hidden = !r.pull_request;
    svc.fill(ui.controls, ...controlsFor(r).map(([a, label]) =>
      el('button', {type: 'button', class: 'ctl ctl-' + a + (a === 'delete' || a === 'cancel' || a === 'deny' ? ' danger' : ''),
        'data-action': a, on: {click: () => control(a)}}, label)));
    renderSteer();
    if (ui.askText) renderAsk();
  }

  let headTimer = null;
  function refreshRunSoon() {
    if (headTimer) return;
    headTimer = setTimeout(async () => {
      headTimer = null;
      try { run = await api('GET', base); renderHead(); } catch (e) { /* shown on next action */ }
    }, 50);
  }

  // ---- pull request ----
  let prTimer = null;
  let prPoll = null;
  function loadPrSoon() {
    if (prTimer) return;
    prTimer = setTimeout(() => { prTimer = null; loadPr(); }, 200);
  }

  // The link, state, counts and checks as svc keeps them (the server asks the host again
  // when they are older than 30 s); an open pull request is looked at again every 15 s.
  async function loadPr() {
    ui.prLoaded = true;
    let v;
    try {
      v = await api('GET', base + '/pull_request');
    } catch (e) {
      if (e.status === 404) { ui.pr.hidden = true; return; }
      svc.fill(ui.prBody, errorBox(e, 'The pull request could not be loaded'));
      return;
    }
    ui.pr.hidden = false;
    const d = v.data;
    const det = d.details || {};
    const checks = d.checks || [];
    const failing = checks.filter((c) => svc.checkClass(c.status) === 'bad');
    svc.fill(ui.prBody,
      el('p', {class: 'card-pr', 'data-pr': d.link.number, 'data-pr-state': d.state},
        el('a', {href: d.link.html_url, rel: 'noopener', id: 'pr-link'}, `${d.link.owner}/${d.link.repo}#${d.link.number}`),
        el('span', {class: 'pr-state pr-' + d.state}, d.state),
        det.title ? el('strong', {}, det.title) : null),
      det.head_branch ? el('p', {class: 'muted'}, `${det.head_branch} → ${det.base_branch || '?'} · `,
        el('span', {class: 'add'}, '+' + (det.additions || 0)), ' ', el('span', {class: 'del'}, '−' + (det.deletions || 0)),
        ` · ${d.comments} comment${d.comments === 1 ? '' : 's'}`) : null,
      v.meta.details_status === 'unavailable'
        ? el('p', {class: 'muted', role: 'status'}, `Live details unavailable (${v.meta.details_unavailable_reason}): ${v.meta.details_error || ''}`) : null,
      el('h3', {}, 'Checks ', el('span', {class: 'muted', id: 'pr-verdict'}, d.checks_verdict)),
      checks.length
        ? el('ul', {class: 'pr-checks', id: 'pr-checks'}, checks.map((c) => el('li', {},
            svc.checkChip(c),
            c.duration_secs !== null && c.duration_secs !== undefined ? el('span', {class: 'muted'}, ' ' + fmtSecs(c.duration_secs)) : null,
            svc.checkClass(c.status) === 'bad' && (c.title || c.summary)
              ? el('span', {class: 'summary'}, [c.title, c.summary].filter(Boolean).join(': ')) : null)))
        : el('p', {class: 'muted'}, 'No checks reported yet.'),
      failing.length ? el('p', {class: 'error'}, `${failing.length} check${failing.length === 1 ? '' : 's'} failing.`) : null);
    const open = d.state === 'open' || d.state === 'draft' || d.state === 'unknown';
    if (open && !prPoll) prPoll = setInterval(loadPr, 30000);
    if (!open && prPoll) { clearInterval(prPoll); prPoll = null; }
  }

  // ---- graph ----
  function nodeEl(node) {
    return ui.graph.querySelector(`g.node[data-node="${CSS.escape(node)}"]`);
  }

  function paint(node) {
    const g = nodeEl(node);
    if (!g) return false;
    const s = nodeState.get(node) || 'pending';
    g.setAttribute('class', (g.getAttribute('class') || '').replace(/\s*s-\w+/g, '') + ' s-' + s);
    const t = g.querySelector('title');
    g.setAttribute('aria-label', `${t ? t.textContent : node}: ${s}`);
    return true;
  }

  // The path the run took: each `edge.selected` marks its edge (the one with the same label
  // or condition when several join the same two nodes), also when the graph loads later.
  const taken = [];
  function markTaken(t) {
    if (!ui.graph) return;
    const all = [...ui.graph.querySelectorAll('g.edge')].filter((g) =>
      g.dataset.from === t.from && g.dataset.to === t.to);
    const g = all.find((g) => (t.label && g.dataset.label === t.label) ||
      (t.condition && g.dataset.condition === t.condition)) || all[0];
    if (g) g.classList.add('taken');
  }

  async function loadGraph() {
    try {
      const text = await svc.text(base + '/graph');
      const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
      const svg = document.importNode(doc.documentElement, true);
      if (svg.nodeName.toLowerCase() !== 'svg') throw new Error('The graph could not be drawn.');
      svc.fill(ui.graph, svg);
      for (const g of svg.querySelectorAll('g.node')) {
        const pick = () => select(g.dataset.node);
        g.addEventListener('click', pick);
        g.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); pick(); } });
        paint(g.dataset.node);
      }
      for (const t of taken) markTaken(t);
    } catch (e) {
      svc.fill(ui.graph, errorBox(e, 'The graph is unavailable'));
    }
  }

  // ---- stage details ----
  function select(node) {
    selected = node;
    for (const g of ui.graph.querySelectorAll('g.node.selected')) g.classList.remove('selected');
    const g = nodeEl(node);
    if (g) g.classList.add('selected');
    renderDetails();
  }

  function usageLine(u) {
    if (!u) return null;
    const t = u.tokens || {};
    return el('p', {class: 'usage'}, `${u.model || 'model'}: ${fmtInt(t.input)} in, ${fmtInt(t.output)} out` +
      (t.reasoning ? `, ${fmtInt(t.reasoning)} reasoning` : '') + ` · ${fmtUsd(u.cost && u.cost.usd_micros)}`);
  }

  function block(label, text) {
    if (text === undefined || text === null || text === '') return null;
    return el('div', {class: 'block'}, el('h4', {}, label), el('pre', {}, String(text)));
  }

  // A stage's MCP servers: each one's state, the tools it offered and the agent used, the
  // error of one that failed, and the end of its stderr.
  function mcpBlock(servers) {
    if (!servers || !servers.size) return null;
    return el('div', {class: 'block mcp'}, el('h4', {}, 'MCP servers'),
      el('ul', {}, ...[...servers.values()].map((s) => el('li', {class: s.state === 'failed' ? 'error' : ''},
        `${s.server}: ${s.state}` + (s.state === 'failed'
          ? ` · ${s.error || ''}`
          : ` · ${(s.tools || []).length} tools offered · ` +
            ((s.used || []).length ? `used ${s.used.join(', ')}` : 'none used')),
        s.stderr ? el('pre', {}, s.stderr) : null))));
  }

  function renderDetails() {
    const box = ui.details;
    if (!selected) {
      svc.fill(box, el('p', {class: 'muted'}, 'Select a node in the graph to see its prompt, output, usage and timing.'));
      return;
    }
    const g = nodeEl(selected);
    const title = g && g.querySelector('title') ? g.querySelector('title').textContent : selected;
    const desc = g && g.querySelector('desc') ? g.querySelector('desc').textContent : '';
    const evs = nodeEvents.get(selected) || [];
    const visits = [];
    let cur = null;
    let text = '';
    for (const ev of evs) {
      const p = ev.properties || {};
      switch (ev.event) {
        case 'stage.started':
          if (!cur || p.attempt === 1 || !p.attempt) { cur = {start: ev, attempts: 0, out: []}; visits.push(cur); }
          cur.attempts = p.attempt || 1;
          break;
        case 'agent.message.delta': text += p.text || ''; break;
        case 'agent.message': text = ''; if (cur) cur.out.push(block('Response', p.text)); break;
        case 'agent.tool.started':
          if (cur) {
            cur.out.push(el('p', {class: 'tool'}, `Tool: ${p.tool_name || p.name || 'tool'}`));
            for (const s of (cur.mcp || new Map()).values()) {
              const t = (s.tools || []).find((x) => x.name === p.tool_name);
              if (t && !s.used.includes(t.original_name)) s.used.push(t.original_name);
            }
          }
          break;
        case 'agent.mcp.ready': case 'agent.mcp.failed':
          if (cur) {
            cur.mcp = cur.mcp || new Map();
            cur.mcp.set(p.server, ev.event === 'agent.mcp.ready'
              ? {server: p.server, state: 'ready', tools: p.tools || [], used: []}
              : {server: p.server, state: 'failed', error: p.error, tools: [], used: []});
          }
          break;
        case 'agent.mcp.summary':
          if (cur) { cur.mcp = new Map(); for (const s of (p.servers || [])) cur.mcp.set(s.server, s); }
          break;
        case 'agent.steering.injected': if (cur) cur.out.push(block('Steering', p.text)); break;
        case 'command.completed':
          if (cur) cur.out.push(el('p', {}, `Exit code ${p.exit_code} (${p.termination || 'exited'}) after ${fmtMs(p.duration_ms)}`),
            block('Output', p.stdout), block('Errors', p.stderr));
          break;
        case 'workspace.checkpoint':
          if (cur && p.checkpoint_id) {
            const box = el('div', {class: 'stage-diff'});
            cur.out.push(el('button', {type: 'button', class: 'link', on: {click: () => {
              svc.fill(box, el('p', {class: 'muted'}, 'Loading changes…'));
              loadDiffs(box, p.checkpoint_id);
            }}}, 'Show the files this stage changed'), box);
          }
          break;
        case 'interview.started': if (cur) cur.out.push(block('Question', p.question)); break;
        case 'interview.completed': if (cur) cur.out.push(block('Answer', p.answer)); break;
        case 'stage.completed':
          if (cur) {
            cur.end = ev;
            if (p.response && !cur.out.some((o) => o && o.textContent.startsWith('Response'))) cur.out.push(block('Response', p.response));
            cur.out.push(block('Notes', p.notes), usageLine(p.usage));
          }
          break;
        case 'stage.failed':
          if (cur) { cur.end = ev; cur.out.push(el('p', {class: 'error'}, (p.failure && p.failure.message) || 'failed'), usageLine(p.usage)); }
          break;
        default: break;
      }
    }
    const state = nodeState.get(selected) || 'pending';
    const canRewind = run && isTerminal(run.lifecycle.status.kind) && visits.some((v) => v.end) &&
      !selected.includes('/');
    svc.fill(box,
      el('h3', {}, title, ' ', el('span', {class: 'badge s-' + state}, state)),
      el('p', {class: 'muted'}, `Node ${selected}`),
      canRewind ? el('button', {type: 'button', id: 'rewind-here', on: {click: () => rewind(selected)}},
        'Rewind to here') : null,
      ui.rewindMsg,
      block('Prompt / script', desc),
      visits.length ? null : el('p', {class: 'muted'}, 'This stage has not run yet.'),
      ...visits.map((v, i) => el('div', {class: 'visit'},
        el('h4', {}, `Visit ${i + 1}`),
        el('p', {}, `Started ${fmtTime(v.start.ts)}` + (v.attempts > 1 ? ` · ${v.attempts} attempts` : '') +
          (v.end ? ` · ${(v.end.properties || {}).status || 'failed'} in ${fmtMs((v.end.properties || {}).duration_ms)}` : ' · running')),
        mcpBlock(v.mcp),
        ...v.out)),
      text ? block('Streaming', text) : null);
  }

  // ---- rewind ----
  async function rewind(node) {
    svc.fill(ui.rewindMsg);
    if (!window.confirm(`Run ${node} and everything after it again, in a new run?`)) return;
    try {
      const fresh = await api('POST', base + '/rewind', {to: node});
      location.assign('/runs/' + encodeURIComponent(fresh.id));
    } catch (e) {
      svc.fill(ui.rewindMsg, errorBox(e, 'The run could not be rewound'));
    }
  }

  // ---- Ask ----
  const askWords = {
    no_sandbox: 'Ask is unavailable: this run has no sandbox to inspect.',
    sandbox_not_ready: 'Ask is unavailable until the run\'s sandbox is ready.',
    llm_unconfigured: 'Ask is unavailable: no LLM provider is configured (store a provider key).',
  };
  let askSession = null;
  let askTurn = null;

  function renderAsk() {
    const a = (run && run.ask_svc) || {available: false, unavailable_reason: 'no_sandbox'};
    const busy = askTurn !== null;
    ui.askText.disabled = !a.available || busy;
    ui.askSend.disabled = !a.available || busy;
    ui.askStop.hidden = !busy;
    svc.fill(ui.askState, a.available
      ? el('p', {class: 'muted'}, `Answers come from a read-only analyst (${a.default_model || 'default model'}) that reads this run's events, stages and files.`)
      : el('p', {class: 'muted', id: 'ask-unavailable'}, askWords[a.unavailable_reason] || 'Ask is unavailable.'));
  }

  function askFrame(block, answer) {
    let data = null;
    for (const line of block.split('\n')) if (line.startsWith('data: ')) data = JSON.parse(line.slice(6));
    if (!data) return;
    const p = data.properties || {};
    switch (data.event) {
      case 'run.session.assistant_delta': answer.textContent += p.delta || ''; break;
      case 'run.session.assistant_message': if (p.text) answer.textContent = p.text; break;
      case 'run.session.tool_call.started':
        ui.askLog.append(el('li', {class: 'muted tool'}, `Looked at: ${p.tool_name}`));
        answer.textContent = '';
        break;
      case 'run.session.turn.failed': answer.append(el('p', {class: 'error'}, p.error || 'The answer failed.')); break;
      case 'run.session.turn.interrupted': answer.append(el('p', {class: 'muted'}, 'Interrupted.')); break;
      default: break;
    }
  }

  async function ask(e) {
    e.preventDefault();
    const input = ui.askText.value.trim();
    svc.fill(ui.askMsg);
    if (!input) { svc.fill(ui.askMsg, errorBox('Write a question first.')); return; }
    try {
      if (!askSession) askSession = await api('POST', base + '/sessions', {title: input.slice(0, 80)});
      const r = await fetch('/api/v1/sessions/' + encodeURIComponent(askSession.id) + '/turns', {
        method: 'POST', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json', Accept: 'text/event-stream'},
        body: JSON.stringify({input}),
      });
      if (!r.ok) {
        const body = await r.json().catch(() => null);
        const e0 = body && body.errors && body.errors[0];
        throw new svc.ApiError(r.status, (e0 && e0.detail) || `The server answered ${r.status}.`, body);
      }
      askTurn = r.headers.get('x-svc-turn-id');
      ui.askText.value = '';
      const answer = el('div', {class: 'answer', 'aria-live': 'polite'});
      ui.askLog.append(el('li', {class: 'question'}, input), el('li', {}, answer));
      renderAsk();
      const reader = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const {done, value} = await reader.read();
        if (done) break;
        buf += dec.decode(value, {stream: true});
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) { askFrame(buf.slice(0, i), answer); buf = buf.slice(i + 2); }
      }
    } catch (err) {
      svc.fill(ui.askMsg, errorBox(err, 'The question was not answered'));
    } finally {
      askTurn = null;
      renderAsk();
    }
  }

  async function askInterrupt() {
    if (!askSession || !askTurn) return;
    try {
      await api('POST', `/api/v1/sessions/${encodeURIComponent(askSession.id)}/turns/${encodeURIComponent(askTurn)}/interrupt`);
    } catch (err) {
      svc.fill(ui.askMsg, errorBox(err, 'The answer could not be interrupted'));
    }
  }

  // ---- questions ----
  // Keyed by question id: a form stays as it is (with what the user typed) while its
  // question is open; only new questions are added and answered ones removed.
  function renderQuestions() {
    const shown = new Map([...ui.qlist.children].map((f) => [f.dataset.question, f]));
    for (const [qid, form] of shown) if (!questions.has(qid)) form.remove();
    for (const [qid, q] of questions) if (!shown.has(qid)) ui.qlist.append(questionForm(q));
    ui.questions.hidden = questions.size === 0;
    // A link from chat (`#question-<id>`) opens the page at its question, once.
    const target = location.hash.startsWith('#question-') && document.getElementById(location.hash.slice(1));
    if (target && !target.dataset.shown) {
      target.dataset.shown = '1';
      target.scrollIntoView({block: 'center'});
      const first = target.querySelector('button, input, textarea');
      if (first) first.focus({preventScroll: true});
    }
  }

  function questionForm(q) {
    const msg = el('div', {class: 'q-msg'});
    const send = async (body, form) => {
      svc.fill(msg);
      for (const b of form.querySelectorAll('button, input, textarea')) b.disabled = true;
      try {
        await api('POST', `${base}/questions/${encodeURIComponent(q.id)}/answer`, body);
        svc.fill(msg, el('p', {class: 'ok', role: 'status'}, 'Answer sent.'));
      } catch (e) {
        for (const b of form.querySelectorAll('button, input, textarea')) b.disabled = false;
        svc.fill(msg, errorBox(e, 'The answer was not accepted'));
      }
    };
    const form = el('form', {class: 'question-form', 'data-question': q.id, id: `question-${q.id}`});
    const opts = q.options || [];
    const free = q.question_type === 'freeform' || q.allow_freeform || opts.length === 0;
    const kids = [el('p', {class: 'q-text'}, q.text || 'The run asks a question.')];
    if (q.stage) kids.push(el('p', {class: 'muted'}, `Stage ${q.stage}`));
    if (q.question_type === 'multi_select' && opts.length) {
      kids.push(el('div', {class: 'options'}, opts.map((o) =>
        el('label', {}, el('input', {type: 'checkbox', value: o.key}), ' ', o.label))));
      kids.push(el('button', {type: 'button', class: 'primary', on: {click: () => {
        const keys = [...form.querySelectorAll('input[type=checkbox]:checked')].map((c) => c.value);
        send({selected_option_keys: keys}, form);
      }}}, 'Send selection'));
    } else if (opts.length && q.question_type !== 'freeform') {
      kids.push(el('div', {class: 'options'}, opts.map((o) =>
        el('button', {type: 'button', class: 'option', 'data-key': o.key,
          on: {click: () => send({selected_option_key: o.key}, form)}}, o.label))));
    }
    if (free) {
      const input = el('textarea', {name: 'answer', rows: 2, 'aria-label': 'Your answer', placeholder: 'Type an answer'});
      kids.push(input, el('button', {type: 'submit', class: 'primary'}, 'Send answer'));
      form.addEventListener('submit', (e) => {
        e.preventDefault();
        if (!input.value.trim()) { svc.fill(msg, errorBox('Write an answer first.')); return; }
        send({value: input.value}, form);
      });
    } else {
      form.addEventListener('submit', (e) => e.preventDefault());
    }
    form.append(...kids, msg);
    return form;
  }

  function addQuestion(p, node) {
    if (questions.has(p.question_id || p.id)) return;
    questions.set(p.question_id || p.id, {
      id: p.question_id || p.id, text: p.question || p.text, stage: p.stage || node,
      question_type: p.question_type, options: p.options || [], allow_freeform: !!p.allow_freeform,
    });
    renderQuestions();
  }

  // ---- steering ----
  function renderSteer() {
    const on = agents.size > 0 && run && run.lifecycle.status.kind === 'running';
    ui.steer.hidden = !on;
  }

  async function steer(e) {
    e.preventDefault();
    const guidance = ui.steerText.value.trim();
    svc.fill(ui.steerMsg);
    if (!guidance) { svc.fill(ui.steerMsg, errorBox('Write some guidance first.')); return; }
    try {
      await api('POST', base + '/steer', {guidance});
      ui.steerText.value = '';
      svc.fill(ui.steerMsg, el('p', {class: 'ok', role: 'status'}, 'Guidance sent to the agent.'));
    } catch (err) {
      svc.fill(ui.steerMsg, errorBox(err, 'The guidance was not accepted'));
    }
  }

  // ---- event log ----
  function summary(ev) {
    const p = ev.properties || {};
    switch (ev.event) {
      case 'stage.started': return `${p.handler_type || 'stage'} started` + (p.max_attempts > 1 ? ` (attempt ${p.attempt}/${p.max_attempts})` : '');
      case 'stage.completed': return `${p.status} in ${fmtMs(p.duration_ms)}`;
      case 'stage.failed': return ((p.failure && p.failure.message) || 'failed') + (p.will_retry ? ' (will retry)' : '');
      case 'stage.retrying': return 'retrying';
      case 'edge.selected': return `${p.from_node} → ${p.to_node} (${p.reason || ''})`;
      case 'interview.started': return p.question || '';
      case 'interview.completed': return `answer: ${p.answer === undefined ? '' : p.answer}`;
      case 'command.completed': return `exit code ${p.exit_code}`;
      case 'agent.message': return (p.text || '').slice(0, 160);
      case 'agent.tool.started': return p.tool_name || p.name || '';
      case 'run.failed': return p.error || p.reason || '';
      case 'run.completed': return p.status || '';
      case 'run.blocked': return (p.blocked_reason || '').replace(/_/g, ' ');
      default: return '';
    }
  }

  let pendingLog = [];
  let logFrame = 0;
  function logEvent(ev) {
    if (ev.event === 'agent.message.delta') return;
    pendingLog.push(el('li', {class: 'ev ev-' + ev.event.replace(/\./g, '-'), 'data-seq': ev.seq},
      el('span', {class: 'seq'}, String(ev.seq)),
      el('time', {datetime: ev.ts}, ev.ts ? ev.ts.slice(11, 19) : ''),
      el('span', {class: 'kind'}, ev.event),
      ev.node_id ? el('span', {class: 'node'}, ev.node_id) : null,
      el('span', {class: 'sum'}, summary(ev))));
    if (!logFrame) logFrame = requestAnimationFrame(flushLog);
  }

  function flushLog() {
    logFrame = 0;
    const list = ui.log;
    const stick = list.scrollTop + list.clientHeight >= list.scrollHeight - 8;
    list.append(...pendingLog);
    pendingLog = [];
    while (list.children.length > 2000) list.firstElementChild.remove();
    if (stick) list.scrollTop = list.scrollHeight;
  }

  // ---- applying events ----
  function setNode(node, s) {
    nodeState.set(node, s);
    return paint(node);
  }

  function apply(ev) {
    const p = ev.properties || {};
    const node = ev.node_id;
    logEvent(ev);
    if (node) {
      if (!nodeEvents.has(node)) nodeEvents.set(node, []);
      nodeEvents.get(node).push(ev);
    }
    let painted = false;
    switch (ev.event) {
      case 'stage.started':
        painted = setNode(node, (p.attempt || 1) > 1 ? 'retried' : 'running');
        if (p.handler_type === 'agent') { agents.add(node); renderSteer(); }
        break;
      case 'stage.retrying': painted = setNode(node, 'retried'); break;
      case 'stage.completed': {
        const s = p.status === 'failed' ? 'failed' : p.status === 'skipped' ? 'skipped' : 'succeeded';
        painted = setNode(node, s);
        agents.delete(node); renderSteer();
        if (p.usage) loadUsageSoon();
        break;
      }
      case 'stage.failed':
        painted = setNode(node, p.will_retry ? 'retried' : 'failed');
        agents.delete(node); renderSteer();
        if (p.usage) loadUsageSoon();
        break;
      case 'edge.selected': {
        const t = {from: p.from_node, to: p.to_node, label: p.label, condition: p.condition};
        taken.push(t);
        markTaken(t);
        break;
      }
      case 'interview.started': addQuestion(p, node); break;
      case 'interview.completed': case 'interview.timeout': case 'interview.interrupted':
        questions.delete(p.question_id);
        if (!p.question_id) for (const [k, q] of questions) if (q.stage === node) questions.delete(k);
        renderQuestions();
        break;
      default: break;
    }
    if (ev.event === 'artifact.captured') loadArtifactsSoon();
    if (ev.event.startsWith('pull_request.')) {
      loadPrSoon();
      if (ev.event === 'pull_request.created' || ev.event === 'pull_request.linked' || ev.event === 'pull_request.unlinked') refreshRunSoon();
    }
    if (ev.event.startsWith('run.')) {
      refreshRunSoon();
      if (ev.event === 'run.completed' || ev.event === 'run.failed') {
        agents.clear();
        renderSteer();
        loadUsageSoon();
        loadFiles();
      }
    }
    if (node && node === selected) renderDetails();
    if (painted) svc.probe(ev);
  }

  // A finished run's stream closes; its pull request lives on: follow what is appended to
  // the run from then on (pull_request.* from webhooks, merge, close) on the live stream.
  let after = null;
  function followAfterEnd() {
    if (after || svc.demo) return;
    after = new EventSource('/api/v1/attach?run_id=' + encodeURIComponent(id));
    after.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (typeof ev.seq === 'number') {
        if (ev.seq <= lastSeq) return;
        lastSeq = ev.seq;
      }
      apply(ev);
    };
    after.onopen = () => { if (run && run.pull_request) loadPrSoon(); };
  }

  function follow() {
    // Last-Event-ID resume: the browser reconnects with the last id it saw and the server
    // continues after it; seqs already applied are skipped in case of overlap.
    es = new EventSource(base + '/attach?since_seq=1');
    es.onopen = () => { ui.live.textContent = 'Live'; ui.live.className = 'live ok'; };
    es.onmessage = (m) => {
      window.__svcFrames = (window.__svcFrames || 0) + 1;
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (typeof ev.seq === 'number') {
        if (ev.seq <= lastSeq) return;
        lastSeq = ev.seq;
      }
      apply(ev);
      if (ev.event === 'run.completed' || ev.event === 'run.failed') {
        es.close();
        ui.live.textContent = 'Finished';
        ui.live.className = 'live';
        followAfterEnd();
      }
    };
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        ui.live.textContent = run && isTerminal(run.lifecycle.status.kind) ? 'Finished' : 'Live updates stopped; reload the page to resume.';
        ui.live.className = 'live' + (run && isTerminal(run.lifecycle.status.kind) ? '' : ' bad');
      } else {
        ui.live.textContent = 'Connection lost; reconnecting…';
        ui.live.className = 'live bad';
      }
    };
  }

  // ---- usage ----
  let usageTimer = null;
  function loadUsageSoon() {
    if (usageTimer) return;
    usageTimer = setTimeout(() => { usageTimer = null; loadUsage(); }, 300);
  }

  async function loadUsage() {
    let u;
    try { u = await api('GET', base + '/usage'); } catch (e) {
      svc.fill(ui.usage, errorBox(e, 'Usage is unavailable'));
      return;
    }
    if (!u.stages || u.stages.length === 0) {
      svc.fill(ui.usage, el('p', {class: 'muted'}, 'No model usage yet.'));
      return;
    }
    const row = (name, model, usage, timing, stages) => {
      const t = usage.tokens || {};
      return el('tr', {}, el('td', {}, name), el('td', {}, model), stages === undefined ? null : el('td', {}, String(stages)),
        el('td', {class: 'num'}, fmtInt(t.input)), el('td', {class: 'num'}, fmtInt(t.output)),
        el('td', {class: 'num'}, fmtInt((t.cache_read || 0) + (t.cache_write || 0))),
        el('td', {class: 'num'}, fmtUsd(usage.cost && usage.cost.usd_micros)),
        timing ? el('td', {class: 'num'}, fmtMs(timing.active_time_ms)) : null);
    };
    const head = (first, extra) => el('thead', {}, el('tr', {}, el('th', {}, first), el('th', {}, 'Model'), extra ? el('th', {}, extra) : null,
      el('th', {}, 'Input'), el('th', {}, 'Output'), el('th', {}, 'Cache'), el('th', {}, 'Cost'), extra ? null : el('th', {}, 'Active')));
    const modelName = (m) => m ? `${m.model_id || m.id || ''}${m.provider ? ' (' + m.provider + ')' : ''}` : '–';
    svc.fill(ui.usage,
      el('table', {class: 'usage-table'}, el('caption', {}, 'Per stage'), head('Stage'),
        el('tbody', {}, u.stages.map((s) => row(s.stage.name || s.stage.id, modelName(s.model), s.usage, s.timing))),
        el('tfoot', {}, row('Total', '', u.totals.usage, u.totals.timing))),
      el('table', {class: 'usage-table'}, el('caption', {}, 'Per model'), head('Model', 'Stages'),
        el('tbody', {}, (u.by_model || []).map((m) => row(modelName(m.model), '', m.usage, null, m.stages)))));
  }

  // ---- artifacts ----
  let artifactsTimer = null;
  function loadArtifactsSoon() {
    if (artifactsTimer) return;
    artifactsTimer = setTimeout(() => { artifactsTimer = null; loadArtifacts(); }, 300);
  }

  function fmtBytes(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  async function loadArtifacts() {
    let page;
    try { page = await api('GET', base + '/artifacts?page[limit]=100'); } catch (e) {
      svc.fill(ui.artifacts, errorBox(e, 'Artifacts are unavailable'));
      return;
    }
    const items = page.data || [];
    if (items.length === 0) {
      svc.fill(ui.artifacts, el('p', {class: 'muted'}, 'No artifacts kept (set [run] artifacts or the run\'s artifacts patterns).'));
      return;
    }
    const more = page.meta && page.meta.has_more ? el('p', {class: 'muted'}, `First 100 of ${page.meta.total}.`) : null;
    svc.fill(ui.artifacts,
      el('table', {class: 'usage-table', id: 'artifacts-table'},
        el('thead', {}, el('tr', {}, el('th', {}, 'File'), el('th', {}, 'Stage'), el('th', {}, 'Size'), el('th', {}, 'Kept'))),
        el('tbody', {}, items.map((a) => el('tr', {'data-artifact': a.id},
          el('td', {}, el('a', {href: a.download_url, download: a.path.split('/').pop()}, a.path)),
          el('td', {}, a.node_id || '–'),
          el('td', {class: 'num'}, fmtBytes(a.bytes)),
          el('td', {}, fmtTime(a.captured_at)))))),
      more);
  }

  // ---- diffs ----
  // Line diff by longest common subsequence (bounded; huge files show as replaced).
  function diffLines(a, b) {
    const x = a === '' ? [] : a.replace(/\n$/, '').split('\n');
    const y = b === '' ? [] : b.replace(/\n$/, '').split('\n');
    const n = x.length, m = y.length;
    if (n * m > 4e6) return [...x.map((l) => ['-', l]), ...y.map((l) => ['+', l])];
    const w = m + 1;
    const L = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
      L[i * w + j] = x[i] === y[j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    const out = [];
    let i = 0, j = 0;
    while (i < n && j < m) {
      if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; }
      else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) out.push(['-', x[i++]]);
      else out.push(['+', y[j++]]);
    }
    while (i < n) out.push(['-', x[i++]]);
    while (j < m) out.push(['+', y[j++]]);
    return out;
  }

  // Fills `box` with the diffs of `/files` (all the run's changes, or one checkpoint's).
  async function loadDiffs(box, checkpoint) {
    let page;
    const q = checkpoint ? '&checkpoint=' + encodeURIComponent(checkpoint) : '';
    try { page = await api('GET', base + '/files?page[limit]=100' + q); } catch (e) {
      svc.fill(box, el('p', {class: 'muted'},
        e.status === 501 ? 'File diffs are not available on this server yet.' : `File diffs are unavailable: ${e.message}`));
      return;
    }
    if (!page.data || page.data.length === 0) {
      svc.fill(box, el('p', {class: 'muted'}, checkpoint ? 'This stage changed no files.' : 'This run has not changed any files.'));
      return;
    }
    svc.fill(box, ...page.data.map((f) => {
      const name = (f.new_file && f.new_file.name) || (f.old_file && f.old_file.name) || 'file';
      const lines = diffLines((f.old_file && f.old_file.contents) || '', (f.new_file && f.new_file.contents) || '');
      const add = lines.filter((l) => l[0] === '+').length;
      const del = lines.filter((l) => l[0] === '-').length;
      return el('details', {class: 'file-diff', open: page.data.length <= 5},
        el('summary', {}, name, ' ', el('span', {class: 'add'}, '+' + add), ' ', el('span', {class: 'del'}, '−' + del)),
        el('pre', {class: 'diff'}, lines.map(([k, l]) =>
          el('span', {class: k === '+' ? 'l-add' : k === '-' ? 'l-del' : 'l-ctx'}, k + ' ' + l + '\n'))));
    }), page.meta && page.meta.has_more ? el('p', {class: 'muted'}, 'More files changed than are shown.') : '');
  }

  function loadFiles() {
    return loadDiffs(ui.files, null);
  }

  // ---- page ----
  async function start() {
    try {
      run = await api('GET', base);
    } catch (e) {
      show(el('h1', {}, 'Run'), errorBox(e, e.status === 404 ? 'This run does not exist' : 'The run could not be loaded'),
        el('p', {}, el('a', {href: '/'}, 'Back to the runs board')));
      return;
    }
    ui.title = el('h1', {id: 'run-title'});
    ui.badge = el('span', {class: 'badge', id: 'run-status'});
    ui.live = el('span', {class: 'live', role: 'status'}, 'Connecting…');
    ui.facts = el('dl', {class: 'facts', id: 'facts'});
    ui.goal = el('p', {class: 'goal'});
    ui.runError = el('div');
    ui.controls = el('div', {class: 'controls', id: 'controls', role: 'group', 'aria-label': 'Run controls'});
    ui.controlMsg = el('div');
    ui.qlist = el('div');
    ui.questions = section('Waiting for your answer', 'questions', ui.qlist);
    ui.questions.classList.add('attention');
    ui.questions.hidden = true;
    ui.steerText = el('textarea', {rows: 2, id: 'steer-text', 'aria-label': 'Guidance for the agent', placeholder: 'Tell the running agent what to do differently'});
    ui.steerMsg = el('div');
    ui.steer = section('Steer the agent', 'steer',
      el('form', {on: {submit: steer}}, ui.steerText, el('button', {type: 'submit', class: 'primary'}, 'Send guidance')), ui.steerMsg);
    ui.steer.hidden = true;
    ui.rewindMsg = el('div', {id: 'rewind-msg'});
    ui.askState = el('div', {id: 'ask-state'});
    ui.askLog = el('ol', {class: 'ask-log', id: 'ask-log'});
    ui.askText = el('textarea', {rows: 2, id: 'ask-text', 'aria-label': 'Question about this run', placeholder: 'Why did a stage fail? What changed under src/?'});
    ui.askSend = el('button', {type: 'submit', class: 'primary', id: 'ask-send'}, 'Ask');
    ui.askStop = el('button', {type: 'button', id: 'ask-stop', on: {click: askInterrupt}}, 'Interrupt');
    ui.askMsg = el('div');
    ui.ask = section('Ask about this run', 'ask', ui.askState, ui.askLog,
      el('form', {on: {submit: ask}}, ui.askText, ui.askSend, ui.askStop), ui.askMsg);
    ui.graph = el('div', {class: 'graph-wrap', id: 'graph'}, el('p', {class: 'muted'}, 'Drawing the workflow…'));
    ui.details = el('div', {id: 'details'});
    ui.log = el('ol', {class: 'log', id: 'events', 'aria-live': 'off'});
    ui.usage = el('div', {id: 'usage-body'}, el('p', {class: 'muted'}, 'Loading usage…'));
    ui.files = el('div', {id: 'files-body'}, el('p', {class: 'muted'}, 'Loading changes…'));
    ui.artifacts = el('div', {id: 'artifacts-body'}, el('p', {class: 'muted'}, 'Loading artifacts…'));
    ui.prBody = el('div', {id: 'pr-body'}, el('p', {class: 'muted'}, 'Loading the pull request…'));
    ui.pr = section('Pull request', 'pull-request', ui.prBody);
    ui.pr.hidden = true;
    show(
      el('nav', {class: 'crumbs'}, el('a', {href: '/'}, '← Runs'), ' · ',
        el('a', {id: 'make-automation', href: '/automations/new?from_run=' + encodeURIComponent(run.id)},
          'Make an automation from this run')),
      el('div', {class: 'run-head'}, ui.title, ui.badge, ui.live),
      ui.goal, ui.facts, ui.runError, ui.controls, ui.controlMsg,
      ui.questions, ui.steer, ui.pr,
      el('div', {class: 'run-grid'},
        section('Workflow', 'graph-panel', ui.graph),
        section('Stage details', 'details-panel', ui.details)),
      ui.ask,
      section('Event log', 'log-panel', ui.log),
      section('Usage and cost', 'usage', ui.usage),
      section('Files changed', 'files', ui.files),
      section('Artifacts', 'artifacts', ui.artifacts));
    renderHead();
    renderDetails();
    renderAsk();
    try {
      const qs = await api('GET', base + '/questions');
      for (const q of qs.data || []) addQuestion(q, q.stage);
    } catch (e) { /* the stream brings questions too */ }
    await loadGraph();
    follow();
    loadUsage();
    loadFiles();
    loadArtifacts();
  }
  start();
})();
