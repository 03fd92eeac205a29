// Shared helpers for every svc page: DOM building (text only, never HTML strings), the
// JSON API client with errors in words, formatting, and the demo-mode banner.
'use strict';

const svc = (() => {
  const demo = document.cookie.split(/;\s*/).includes('svc-demo=1');

  // el('div', {class: 'x', text: 'hi', on: {click: f}, 'data-id': 1}, child, ...)
  function el(tag, attrs, ...kids) {
    const svgTag = tag.startsWith('svg:');
    const n = svgTag
      ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
      : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'text') n.textContent = String(v);
      else if (k === 'on') for (const [ev, f] of Object.entries(v)) n.addEventListener(ev, f);
      else if (k === 'class') n.setAttribute('class', v);
      else if (v === true) n.setAttribute(k, '');
      else n.setAttribute(k, String(v));
    }
    for (const c of kids.flat()) {
      if (c === null || c === undefined || c === false) continue;
      n.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return n;
  }

  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
    // The first error entry of the SPEC 2.7 body, if any.
    get entry() {
      return (this.body && Array.isArray(this.body.errors) && this.body.errors[0]) || null;
    }
  }

  function signIn() {
    location.assign('/login?next=' + encodeURIComponent(location.pathname + location.search));
  }

  // `headers`: more request headers (e.g. a catalog's `If-Match`).
  async function request(method, path, body, accept, headers) {
    const opts = {method, credentials: 'same-origin', headers: {...headers, Accept: accept}};
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(path, opts);
    } catch (e) {
      throw new ApiError(0, 'The server could not be reached. Check the connection and try again.');
    }
    const raw = r.status === 204 ? '' : await r.text();
    if (r.ok) return raw;
    let data = null;
    try { data = raw ? JSON.parse(raw) : null; } catch (e) { data = null; }
    const e0 = data && Array.isArray(data.errors) ? data.errors[0] : null;
    const words = e0 && (e0.detail || e0.title)
      ? e0.detail || e0.title
      : `The server answered ${r.status}${r.statusText ? ' ' + r.statusText : ''}.`;
    const err = new ApiError(r.status, words, data);
    if (r.status === 401 && !demo && document.body.dataset.page !== 'sign-in') signIn();
    throw err;
  }

  async function api(method, path, body, headers) {
    const raw = await request(method, path, body, 'application/json', headers);
    return raw ? JSON.parse(raw) : null;
  }

  function text(path) {
    return request('GET', path, undefined, '*/*');
  }

  // An alert box saying what went wrong, in words.
  function errorBox(err, prefix) {
    const msg = err instanceof Error ? err.message : String(err);
    return el('p', {class: 'error', role: 'alert'}, prefix ? `${prefix}: ${msg}` : msg);
  }

  function main() {
    return document.getElementById('main');
  }

  // Replaces a node's children, skipping null/undefined/false (replaceChildren would
  // print them as text).
  function fill(node, ...kids) {
    node.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
    return node;
  }

  // Replaces the page's content.
  function show(...kids) {
    return fill(main(), ...kids);
  }

  function fmtSecs(s) {
    s = Math.max(0, Math.floor(s || 0));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
    const h = Math.floor(s / 3600);
    if (h < 48) return `${h}h ${Math.floor((s % 3600) / 60)}m`;
    return `${Math.floor(h / 24)}d ${h % 24}h`;
  }

  function fmtMs(ms) {
    if (ms === null || ms === undefined) return '–';
    return ms < 1000 ? `${ms} ms` : fmtSecs(ms / 1000);
  }

  function fmtUsd(micros) {
    if (micros === null || micros === undefined) return 'unpriced';
    const usd = micros / 1e6;
    return usd < 0.01 && usd > 0 ? '<$0.01' : `$${usd.toFixed(2)}`;
  }

  function fmtInt(n) {
    return (n || 0).toLocaleString('en');
  }

  function fmtTime(iso) {
    if (!iso) return '–';
    const d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleString();
  }

  // Board column of a run status kind (the server's board status mapping).
  function column(kind) {
    switch (kind) {
      case 'submitted': case 'pending': case 'runnable': return 'queued';
      case 'starting': return 'initializing';
      case 'running': case 'paused': return 'running';
      case 'blocked': return 'blocked';
      case 'succeeded': return 'succeeded';
      case 'failed': case 'dead': return 'failed';
      default: return null;
    }
  }

  function statusWords(status) {
    if (!status) return 'unknown';
    const extra = status.reason || status.blocked_reason || status.prior_block;
    const k = status.kind;
    return extra ? `${k} (${String(extra).replace(/_/g, ' ')})` : k;
  }

  function isTerminal(kind) {
    return kind === 'succeeded' || kind === 'failed' || kind === 'dead';
  }

  // Latency probes for the benchmark: commit time (event ts) to DOM change, in ms.
  const probes = [];
  function probe(ev) {
    const t = Date.parse(ev && ev.ts);
    if (!isNaN(t) && probes.length < 100000) probes.push(Date.now() - t);
  }

  // A check's status as a word class: ok (passed), bad (failed) or wait (still running).
  const CHECK_OK = new Set(['success', 'neutral', 'skipped']);
  const CHECK_BAD = new Set(['failure', 'cancelled', 'timed_out', 'action_required', 'error', 'stale', 'startup_failure']);
  function checkClass(status) {
    return CHECK_OK.has(status) ? 'ok' : CHECK_BAD.has(status) ? 'bad' : 'wait';
  }
  // One check as a small labelled chip: mark, name, status and duration in its title.
  function checkChip(c) {
    const cls = checkClass(c.status);
    const mark = cls === 'ok' ? '✓' : cls === 'bad' ? '✗' : '●';
    const took = c.duration_secs !== null && c.duration_secs !== undefined ? ` in ${fmtSecs(c.duration_secs)}` : '';
    return el('span', {class: 'chip chip-' + cls, 'data-check': c.name, 'data-status': c.status,
      title: `${c.name}: ${c.status}${took}`}, `${mark} ${c.name}`);
  }

  function setupChrome() {
    const badge = document.getElementById('demo-badge');
    if (demo && badge) {
      badge.hidden = false;
      const out = document.getElementById('nav-signout');
      if (out) out.hidden = true;
      document.getElementById('demo-leave').addEventListener('click', () => {
        document.cookie = 'svc-demo=; path=/; max-age=0; samesite=lax';
        location.assign('/login');
      });
    }
  }
  document.addEventListener('DOMContentLoaded', setupChrome);

  return {demo, el, fill, api, request, text, ApiError, errorBox, show, main, signIn, fmtSecs, fmtMs, fmtUsd,
    fmtInt, fmtTime, column, statusWords, isTerminal, probes, probe, checkClass, checkChip};
})();
window.svc = svc;
