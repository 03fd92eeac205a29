// The runs board: one column per board status, cards updated live from the all-runs SSE
// stream (GET /api/v1/attach) without reloading; archive filter; pagination.
'use strict';
(() => {
  const {el, api, show, errorBox, fmtSecs, column} = svc;
  const COLUMNS = [
    ['queued', 'Queued'], ['initializing', 'Initializing'], ['running', 'Running'],
    ['blocked', 'Blocked'], ['succeeded', 'Succeeded'], ['failed', 'Failed'],
  ];
  const LIVE = new Set(['queued', 'initializing', 'running', 'blocked']);
  const LIMIT = 100;
  const params = new URLSearchParams(location.search);
  const offset = Math.max(0, parseInt(params.get('offset') || '0', 10) || 0);
  const archived = params.get('archived') === '1';
  const cards = new Map(); // id -> {item, node, since}
  const lists = {};
  const counts = {};
  let status;

  function href(o, a) {
    const q = new URLSearchParams();
    if (o) q.set('offset', o);
    if (a) q.set('archived', '1');
    const s = q.toString();
    return '/' + (s ? '?' + s : '');
  }

  function elapsedOf(c) {
    const base = (c.item.timings && c.item.timings.elapsed_secs) || 0;
    return LIVE.has(c.item.status) && c.item.status !== 'queued'
      ? base + (Date.now() - c.since) / 1000 : base;
  }

  // The board API names a run without a repository `unknown` (docs/decisions.md,
  // RepositoryRef): such a card shows no repository rather than a made-up one.
  function repoName(item) {
    const name = item.repository && item.repository.name;
    return name && name !== 'unknown' ? name : null;
  }

  function cardNode(item, c) {
    const q = item.question && item.question.text;
    const diff = item.diff || (item.pull_request && item.pull_request.additions !== undefined
      ? item.pull_request : null);
    const warn = item.timings && item.timings.elapsed_warning;
    return el('li', {class: 'card', 'data-id': item.id, 'data-status': item.status},
      el('a', {class: 'card-title', href: '/runs/' + item.id}, item.title || item.id),
      el('div', {class: 'card-meta'},
        el('span', {class: 'wf', title: 'Workflow'}, (item.workflow && item.workflow.slug) || 'workflow'),
        repoName(item) ? el('span', {class: 'repo', title: 'Repository'}, repoName(item)) : null,
        el('span', {class: 'elapsed' + (warn ? ' warn' : ''), title: 'Elapsed'}, fmtSecs(elapsedOf(c))),
        item.automation ? el('a', {class: 'auto', title: 'Started by this automation',
          href: '/automations/' + encodeURIComponent(item.automation.id)},
        '⟳ ' + (item.automation.name || item.automation.id)) : null),
      q ? el('p', {class: 'question'}, el('strong', {}, 'Question: '), q) : null,
      diff ? el('p', {class: 'diff', title: 'Changed lines'},
        el('span', {class: 'add'}, '+' + (diff.additions || 0)), ' ',
        el('span', {class: 'del'}, '−' + (diff.deletions || 0)),
        diff.files_changed !== undefined ? ` in ${diff.files_changed} files` : '') : null,
      prNode(item.pull_request));
  }

  // The card's pull request: number (a link), state, comments and each check.
  function prNode(pr) {
    if (!pr || !pr.number) return null;
    const checks = pr.checks || [];
    return el('div', {class: 'card-pr', 'data-pr': pr.number, 'data-pr-state': pr.state || ''},
      pr.html_url ? el('a', {href: pr.html_url, rel: 'noopener'}, 'PR #' + pr.number) : 'PR #' + pr.number,
      pr.state ? el('span', {class: 'pr-state pr-' + pr.state}, pr.state) : null,
      pr.comments ? el('span', {class: 'muted'}, `${pr.comments} comment${pr.comments === 1 ? '' : 's'}`) : null,
      checks.length ? el('span', {class: 'checks'}, checks.map(svc.checkChip)) : null);
  }

  function setCount(col) {
    counts[col].textContent = String(lists[col].children.length);
    lists[col].parentElement.classList.toggle('empty', lists[col].children.length === 0);
  }

  // Puts the card in its column, newest (largest ULID) first.
  function place(item) {
    const old = cards.get(item.id);
    const c = {item, since: Date.now(), node: null};
    c.node = cardNode(item, c);
    const list = lists[item.status];
    if (!list) return;
    if (old) {
      const oldCol = old.item.status;
      old.node.remove();
      setCount(oldCol);
    }
    let before = null;
    for (const n of list.children) {
      if (n.dataset.id < item.id) { before = n; break; }
    }
    list.insertBefore(c.node, before);
    cards.set(item.id, c);
    setCount(item.status);
  }

  function drop(id) {
    const old = cards.get(id);
    if (!old) return;
    old.node.remove();
    cards.delete(id);
    setCount(old.item.status);
  }

  function itemFromRun(r) {
    return {
      id: r.id, title: r.title,
      workflow: {slug: r.workflow && (r.workflow.slug || r.workflow.name)},
      repository: r.repository ? {name: r.repository.name} : null,
      status: column(r.lifecycle.status.kind), created_at: r.timestamps.created_at,
      question: r.current_question,
      timings: {elapsed_secs: Math.floor(((r.timing && r.timing.wall_time_ms) || 0) / 1000)},
      diff: r.diff, pull_request: keptPr(r), archived: r.lifecycle.archived,
      automation: r.automation,
    };
  }

  // The Run carries only the pull request's link; what the card showed of it (state,
  // counts, checks) stays until a `pull_request.updated` event says otherwise.
  function keptPr(r) {
    if (!r.pull_request) return null;
    const had = cards.get(r.id);
    const old = had && had.item.pull_request;
    if (old && old.number === r.pull_request.number) return old;
    return {number: r.pull_request.number, html_url: r.pull_request.html_url, checks: []};
  }

  // Status changes the event itself tells: the card moves at once, without a request.
  const KIND_COLUMN = {
    'run.queued': 'queued', 'run.pending': 'queued', 'run.approved': 'queued',
    'run.starting': 'initializing', 'run.started': 'running', 'run.running': 'running',
    'run.unpaused': 'running', 'run.paused': 'running', 'run.unblocked': 'running',
    'run.blocked': 'blocked', 'run.failed': 'failed',
  };

  function onEvent(ev) {
    const k = ev.event || '';
    if (!ev.run_id || !(k.startsWith('run.') || k.startsWith('interview.') || k.startsWith('pull_request.'))) return;
    const p = ev.properties || {};
    const c = cards.get(ev.run_id);
    if (k === 'pull_request.updated') {
      if (c && p.pull_request) {
        place(Object.assign({}, c.item, {pull_request: p.pull_request}));
        svc.probe(ev);
      }
      return;
    }
    if (c) {
      let col = KIND_COLUMN[k];
      if (k === 'run.completed') col = column(p.status) || 'succeeded';
      const item = Object.assign({}, c.item);
      if (k === 'interview.started') item.question = {text: p.question};
      if (k === 'interview.completed' || k === 'interview.timeout' || k === 'interview.interrupted') item.question = null;
      if (col) item.status = col;
      if (col !== c.item.status || item.question !== c.item.question) {
        place(item);
        svc.probe(ev);
      }
    }
    // Then the run itself, for what events do not carry (title, timing, diff, archive).
    refreshSoon(ev.run_id, ev, c ? 250 : 0);
  }

  // One refresh per run at a time, coalescing bursts of events.
  const timers = new Map();
  const inflight = new Map();
  function refreshSoon(id, ev, delay) {
    if (timers.has(id)) return;
    timers.set(id, setTimeout(() => { timers.delete(id); refresh(id, ev); }, delay));
  }

  async function refresh(id, ev) {
    if (inflight.has(id)) { inflight.set(id, ev); return; }
    inflight.set(id, null);
    try {
      const r = await api('GET', '/api/v1/runs/' + encodeURIComponent(id));
      const item = itemFromRun(r);
      const had = cards.get(id);
      if (item.archived && !archived) drop(id);
      else if (had || offset === 0) {
        place(item);
        if (!had || had.item.status !== item.status) svc.probe(ev);
      }
    } catch (e) {
      if (e.status === 404) drop(id);
    } finally {
      const again = inflight.get(id);
      inflight.delete(id);
      if (again) refreshSoon(id, again, 250);
    }
  }

  function follow() {
    let opened = false;
    const es = new EventSource('/api/v1/attach');
    es.onopen = () => {
      status.textContent = 'Live';
      status.className = 'live ok';
      // After a drop the all-runs stream cannot replay (no ids): reload what is shown.
      if (opened) load(false);
      opened = true;
    };
    es.onerror = () => {
      status.className = 'live bad';
      status.textContent = es.readyState === EventSource.CLOSED
        ? 'Live updates stopped; reload the page to resume.'
        : 'Connection lost; reconnecting…';
    };
    es.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      onEvent(ev);
    };
  }

  function tick() {
    for (const c of cards.values()) {
      if (!LIVE.has(c.item.status) || c.item.status === 'queued') continue;
      const span = c.node.querySelector('.elapsed');
      if (span) span.textContent = fmtSecs(elapsedOf(c));
    }
  }

  async function load(first) {
    let page;
    try {
      page = await api('GET', `/api/v1/runs?page[limit]=${LIMIT}&page[offset]=${offset}` +
        (archived ? '&include_archived=true' : ''));
    } catch (e) {
      if (first) show(el('h1', {}, 'Runs'), errorBox(e, 'The runs could not be loaded'));
      return false;
    }
    for (const col of Object.keys(lists)) lists[col].replaceChildren();
    cards.clear();
    for (const item of page.data) place(item);
    for (const [col] of COLUMNS) setCount(col);
    showCap(page.meta && page.meta.daily_cap);
    svc.fill(nav,
      offset > 0 ? el('a', {href: href(Math.max(0, offset - LIMIT), archived), rel: 'prev'}, '← Newer') : null,
      el('span', {class: 'muted'}, page.data.length
        ? `Runs ${offset + 1}–${offset + page.data.length}` : 'No runs yet.'),
      page.meta && page.meta.has_more
        ? el('a', {href: href(offset + LIMIT, archived), rel: 'next'}, 'Older →') : null);
    return true;
  }

  // [server] max_usd_per_day: today's spend, and why LLM runs wait once it is reached.
  let cap;
  function showCap(c) {
    if (!c) { cap.hidden = true; return; }
    const usd = (m) => '$' + (m / 1e6).toFixed(2);
    cap.hidden = false;
    cap.className = c.reached ? 'daily-cap error' : 'daily-cap muted';
    cap.textContent = c.reached && c.message ? c.message
      : `LLM spend today (UTC): ${usd(c.spent_usd_micros)} of the ${usd(c.max_usd_micros)} daily cap.`;
  }

  let nav;
  async function start() {
    status = el('span', {class: 'live', role: 'status'}, 'Connecting…');
    const filter = el('label', {class: 'filter'},
      el('input', {type: 'checkbox', id: 'show-archived', checked: archived,
        on: {change: (e) => location.assign(href(0, e.target.checked))}}),
      ' Show archived');
    const board = el('div', {class: 'board', id: 'board'},
      COLUMNS.map(([key, name]) => {
        lists[key] = el('ul', {class: 'cards', 'aria-label': name});
        counts[key] = el('span', {class: 'count'}, '0');
        return el('section', {class: 'column col-' + key, 'data-column': key},
          el('h2', {}, name, ' ', counts[key]), lists[key]);
      }));
    nav = el('nav', {class: 'pager', 'aria-label': 'Pages'});
    cap = el('p', {id: 'daily-cap', role: 'status', hidden: true});
    show(el('div', {class: 'toolbar'}, el('h1', {}, 'Runs'), status, filter,
      el('a', {class: 'button primary', href: '/runs/new'}, 'New run')), cap, board, nav);
    if (!(await load(true))) return;
    window.__svcBoardPainted = performance.now();
    if (svc.demo) {
      // The demo stream replays canned events that would shuffle the fixtures around.
      status.textContent = 'Demo data (not live)';
      return;
    }
    follow();
    setInterval(tick, 1000);
  }
  start();
})();
