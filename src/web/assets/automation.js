// One automation: the form to create or edit it (the server's 422 errors shown beside the
// field each names), and for an existing one its fires, "Fire now", and delete.
// `/automations/new?from_run=<id>` fills the form from a run.
'use strict';
(() => {
  const {el, api, show, errorBox, fmtTime} = svc;
  const path = location.pathname.split('/');
  const editing = path[2] && path[2] !== 'new' ? decodeURIComponent(path[2]) : null;
  const f = {};
  let current = null;
  let triggers = [];

  function field(label, input, key, help) {
    input.dataset.field = key;
    const hid = input.id + '-help';
    if (help) input.setAttribute('aria-describedby', hid);
    return el('div', {class: 'field'}, el('label', {for: input.id}, label), input,
      help ? el('p', {class: 'help', id: hid}, help) : null);
  }

  // `key=value` lines <-> object.
  function toLines(obj) {
    return Object.entries(obj || {}).map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join('\n');
  }
  function fromLines(text) {
    const out = {};
    for (const line of text.split('\n')) {
      const t = line.trim();
      if (!t || t.startsWith('#')) continue;
      const eq = t.indexOf('=');
      if (eq <= 0) return null;
      out[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
    }
    return out;
  }
  const list = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);

  function triggerRow(t) {
    const i = triggers.length;
    const id = (s) => `t${i}-${s}`;
    const r = {
      id: el('input', {id: id('id'), value: t.id || '', autocomplete: 'off'}),
      kind: el('select', {id: id('kind')}, ['api', 'schedule', 'webhook', 'codehost'].map((k) =>
        el('option', {value: k, selected: t.kind === k}, k))),
      enabled: el('input', {type: 'checkbox', id: id('enabled'), checked: t.enabled !== false}),
      expression: el('input', {id: id('expression'), value: t.expression || '', placeholder: '0 2 * * 2'}),
      timezone: el('input', {id: id('timezone'), value: t.timezone || '', placeholder: 'UTC'}),
      secret: el('input', {id: id('secret'), type: 'password', autocomplete: 'new-password',
        placeholder: t.secret_set ? 'unchanged (set)' : 'at least 16 characters'}),
      inputs: el('textarea', {id: id('inputs'), rows: 2, class: 'code', placeholder: 'pr=$.pull_request.number'}, toLines(t.inputs)),
      events: el('input', {id: id('events'), value: (t.events || []).join(', '), placeholder: 'pull_request.opened, issues.labeled'}),
      repositories: el('input', {id: id('repositories'), value: ((t.filter || {}).repositories || []).join(', ')}),
      branches: el('input', {id: id('branches'), value: ((t.filter || {}).branches || []).join(', ')}),
      labels: el('input', {id: id('labels'), value: ((t.filter || {}).labels || []).join(', ')}),
      removed: false,
    };
    const k = (name) => `triggers[${i}].${name}`;
    const parts = {
      schedule: el('div', {}, field('Cron expression (five fields)', r.expression, k('expression')),
        field('Time zone (IANA)', r.timezone, k('timezone'))),
      secret: field('Secret', r.secret, k('secret'), 'Signs deliveries: X-Svc-Signature-256 = sha256=HMAC-SHA256(body).'),
      inputs: field('Inputs from the delivery', r.inputs, k('inputs'), 'name=$.json.path per line; other values are literals.'),
      codehost: el('div', {}, field('Events', r.events, k('events')),
        field('Repositories (owner/name)', r.repositories, k('filter')),
        field('Branches', r.branches, k('filter.branches')), field('Labels', r.labels, k('filter.labels'))),
    };
    const sync = () => {
      const kind = r.kind.value;
      parts.schedule.hidden = kind !== 'schedule';
      parts.secret.hidden = kind !== 'webhook' && kind !== 'codehost';
      parts.inputs.hidden = kind !== 'webhook' && kind !== 'codehost';
      parts.codehost.hidden = kind !== 'codehost';
    };
    r.kind.addEventListener('change', sync);
    r.node = el('fieldset', {class: 'trigger', 'data-index': i, 'data-field': `triggers[${i}]`}, el('legend', {}, `Trigger ${i + 1}`),
      field('Id', r.id, k('id')), field('Kind', r.kind, k('kind')),
      el('label', {class: 'check'}, r.enabled, ' Enabled'),
      parts.schedule, parts.codehost, parts.secret, parts.inputs,
      el('button', {type: 'button', class: 'link', on: {click: () => { r.removed = true; r.node.remove(); }}}, 'Remove trigger'));
    sync();
    triggers.push(r);
    f.triggers.append(r.node);
  }

  function triggerBody(r) {
    const t = {id: r.id.value.trim(), kind: r.kind.value, enabled: r.enabled.checked};
    if (t.kind === 'schedule') {
      t.expression = r.expression.value.trim();
      if (r.timezone.value.trim()) t.timezone = r.timezone.value.trim();
    }
    if (t.kind === 'webhook' || t.kind === 'codehost') {
      if (r.secret.value) t.secret = r.secret.value;
      t.inputs = fromLines(r.inputs.value) || {};
    }
    if (t.kind === 'codehost') {
      t.events = list(r.events.value);
      t.filter = {repositories: list(r.repositories.value), branches: list(r.branches.value), labels: list(r.labels.value)};
    }
    return t;
  }

  function body() {
    const b = {
      name: f.name.value, description: f.description.value.trim() || null,
      triggers: triggers.filter((r) => !r.removed).map(triggerBody),
      inputs: fromLines(f.inputs.value) || {}, labels: fromLines(f.labels.value) || {},
      goal: f.goal.value.trim() || null, title: f.title.value.trim() || null,
      policies: {misfire: f.misfire.value, overlap: f.overlap.value},
    };
    b.target = f.kindRepo.checked
      ? {repository: {origin_url: f.origin.value.trim(), ref: f.ref.value.trim() || 'main'}, workflow: f.workflow.value.trim()}
      : {workflow_version_id: f.version.value.trim()};
    if (!editing) b.id = f.id.value.trim();
    return b;
  }

  // The input a field path names, else the closest enclosing one (`triggers[1].inputs.pr`
  // -> `triggers[1].inputs` -> `triggers[1]` -> `triggers`).
  function inputFor(key) {
    while (key) {
      const n = f.form.querySelector(`[data-field="${CSS.escape(key)}"]`);
      if (n) return n;
      const cut = Math.max(key.lastIndexOf('.'), key.lastIndexOf('['));
      key = cut > 0 ? key.slice(0, cut) : '';
    }
    return null;
  }

  // Each 422 entry beside the input its `field` names (or the closest enclosing one).
  function showErrors(err) {
    const entries = (err.body && err.body.errors) || [];
    let placed = 0;
    for (const e of entries) {
      const input = inputFor(e.field || '');
      if (!input) continue;
      input.setAttribute('aria-invalid', 'true');
      input.after(el('p', {class: 'field-error', role: 'alert', 'data-for': e.field}, e.detail));
      placed += 1;
    }
    if (!placed || placed < entries.length) svc.fill(f.msg, errorBox(err, 'Not saved'));
  }

  async function submit(e) {
    e.preventDefault();
    f.form.querySelectorAll('.field-error').forEach((n) => n.remove());
    f.form.querySelectorAll('[aria-invalid]').forEach((n) => n.removeAttribute('aria-invalid'));
    svc.fill(f.msg);
    f.save.disabled = true;
    try {
      let saved;
      if (editing) {
        const r = await fetch(`/api/v1/automations/${encodeURIComponent(editing)}`, {
          method: 'PUT', credentials: 'same-origin',
          headers: {'Content-Type': 'application/json', Accept: 'application/json', 'If-Match': `"${current.revision}"`},
          body: JSON.stringify(body())});
        const data = await r.json().catch(() => null);
        if (!r.ok) throw new svc.ApiError(r.status, (data && data.errors && data.errors[0].detail) || `The server answered ${r.status}.`, data);
        saved = data;
      } else {
        saved = await api('POST', '/api/v1/automations', body());
      }
      location.assign('/automations/' + encodeURIComponent(saved.id));
    } catch (err) {
      f.save.disabled = false;
      if (err.status === 422) showErrors(err);
      else svc.fill(f.msg, errorBox(err, 'Not saved'));
    }
  }

  function form(a) {
    f.id = el('input', {id: 'a-id', value: a.id || '', autocomplete: 'off', disabled: !!editing});
    f.name = el('input', {id: 'a-name', value: a.name || ''});
    f.description = el('input', {id: 'a-description', value: a.description || ''});
    const t = a.target || {};
    const repo = !!t.repository;
    f.kindVersion = el('input', {type: 'radio', name: 'target', id: 'target-version', checked: !repo});
    f.kindRepo = el('input', {type: 'radio', name: 'target', id: 'target-repo', checked: repo});
    f.version = el('input', {id: 'a-version', value: t.workflow_version_id || '', autocomplete: 'off'});
    f.origin = el('input', {id: 'a-origin', value: (t.repository || {}).origin_url || ''});
    f.ref = el('input', {id: 'a-ref', value: (t.repository || {}).ref || '', placeholder: 'main'});
    f.workflow = el('input', {id: 'a-workflow', value: t.workflow || '', placeholder: 'flows/review.dot'});
    f.inputs = el('textarea', {id: 'a-inputs', rows: 2, class: 'code'}, toLines(a.inputs));
    f.labels = el('textarea', {id: 'a-labels', rows: 2, class: 'code'}, toLines(a.labels));
    f.goal = el('textarea', {id: 'a-goal', rows: 2}, a.goal || '');
    f.title = el('input', {id: 'a-title', value: a.title || ''});
    const pol = a.policies || {};
    f.misfire = el('select', {id: 'a-misfire'}, ['fire_once', 'skip'].map((v) => el('option', {value: v, selected: pol.misfire === v}, v)));
    f.overlap = el('select', {id: 'a-overlap'}, ['allow', 'skip', 'queue_one'].map((v) => el('option', {value: v, selected: pol.overlap === v}, v)));
    f.triggers = el('div', {id: 'triggers'});
    f.msg = el('div', {id: 'form-msg'});
    f.save = el('button', {type: 'submit', class: 'primary', id: 'save'}, editing ? 'Save' : 'Create automation');
    f.form = el('form', {class: 'new-run automation-form', on: {submit}, novalidate: true},
      field('Id', f.id, 'id', 'Lowercase letters, digits and dashes; fixed once created.'),
      field('Name', f.name, 'name'), field('Description', f.description, 'description'),
      el('fieldset', {}, el('legend', {}, 'What it runs'),
        el('label', {class: 'check'}, f.kindVersion, ' A registered workflow version'),
        field('Version id', f.version, 'target.workflow_version_id'),
        el('label', {class: 'check'}, f.kindRepo, ' A workflow file in a repository, read at each fire'),
        field('Repository', f.origin, 'target.repository.origin_url'), field('Ref', f.ref, 'target.repository.ref'),
        field('Workflow path', f.workflow, 'target.workflow')),
      el('fieldset', {'data-field': 'triggers'}, el('legend', {}, 'Triggers'), f.triggers,
        el('button', {type: 'button', id: 'add-trigger', on: {click: () => triggerRow({kind: 'schedule'})}}, 'Add trigger')),
      field('Inputs', f.inputs, 'inputs', 'key=value per line.'), field('Labels', f.labels, 'labels'),
      field('Goal', f.goal, 'goal'), field('Title', f.title, 'title'),
      field('Missed while the server was down', f.misfire, 'policies.misfire'),
      field('While its previous run is still going', f.overlap, 'policies.overlap'),
      f.msg, el('div', {class: 'actions'}, f.save));
    f.target = f.form.querySelector('fieldset');
    f.target.dataset.field = 'target';
    triggers = [];
    (a.triggers || []).forEach(triggerRow);
    return f.form;
  }

  async function fires(box) {
    try {
      const r = await api('GET', `/api/v1/automations/${encodeURIComponent(editing)}/fires?page[limit]=20`);
      const sched = (r.meta.schedules || []).map((s) => el('li', {}, `${s.trigger_id}: next due ${fmtTime(s.next_due_at)}`));
      svc.fill(box, sched.length ? el('ul', {}, sched) : null,
        r.data.length ? el('table', {class: 'usage-table', id: 'fires'},
          el('thead', {}, el('tr', {}, ['Due', 'Fired', 'Trigger', 'Outcome', 'Run / why'].map((h) => el('th', {}, h)))),
          el('tbody', {}, r.data.map((x) => el('tr', {class: 'fire o-' + x.outcome},
            el('td', {}, fmtTime(x.due_at)), el('td', {}, fmtTime(x.fired_at)), el('td', {}, x.trigger_id),
            el('td', {}, x.outcome + (x.policy ? ` (${x.policy})` : '')),
            el('td', {}, x.run_id && x.outcome === 'created'
              ? el('a', {class: 'fire-run', href: '/runs/' + encodeURIComponent(x.run_id)}, x.run_id)
              : (x.error || x.detail || '')))))) : el('p', {class: 'muted'}, 'No fires yet.'));
    } catch (e) {
      svc.fill(box, errorBox(e));
    }
  }

  async function fireNow(box, msg) {
    svc.fill(msg);
    try {
      const run = await api('POST', `/api/v1/automations/${encodeURIComponent(editing)}/runs`);
      svc.fill(msg, el('p', {class: 'ok', role: 'status'}, 'Started ',
        el('a', {id: 'fired-run', href: '/runs/' + encodeURIComponent(run.id || '')}, run.id ? 'run ' + run.id : 'a queued fire')));
    } catch (e) {
      svc.fill(msg, errorBox(e, 'Not fired'));
    }
    fires(box);
  }

  async function remove() {
    if (!confirm(`Delete automation ${editing}? Its runs stay.`)) return;
    const r = await fetch(`/api/v1/automations/${encodeURIComponent(editing)}`, {
      method: 'DELETE', credentials: 'same-origin', headers: {'If-Match': `"${current.revision}"`}});
    if (r.ok) location.assign('/automations');
  }

  async function fromRun(id) {
    const run = await api('GET', `/api/v1/runs/${encodeURIComponent(id)}`);
    const ev = await api('GET', `/api/v1/runs/${encodeURIComponent(id)}/events?limit=1`);
    const created = (ev.data && ev.data[0] && ev.data[0].properties) || {};
    return {
      name: run.title, goal: run.goal, labels: run.labels, inputs: created.inputs || {},
      target: {workflow_version_id: (run.workflow && run.workflow.version_id) || ''},
      triggers: [{id: 'manual', kind: 'api'}],
    };
  }

  async function start() {
    if (!editing) {
      const from = new URLSearchParams(location.search).get('from_run');
      let a = {triggers: [{id: 'manual', kind: 'api'}]};
      let note = null;
      if (from) {
        try { a = await fromRun(from); note = el('p', {class: 'muted'}, `Filled in from run ${from}.`); } catch (e) { note = errorBox(e, 'The run could not be read'); }
      }
      show(el('nav', {class: 'crumbs'}, el('a', {href: '/automations'}, '← Automations')),
        el('h1', {}, 'New automation'), note, form(a));
      return;
    }
    try {
      current = await api('GET', `/api/v1/automations/${encodeURIComponent(editing)}`);
    } catch (e) {
      show(el('h1', {}, 'Automation'), errorBox(e, e.status === 404 ? 'This automation does not exist' : 'It could not be loaded'));
      return;
    }
    const box = el('div', {id: 'fires-box'});
    const msg = el('div', {id: 'fire-msg'});
    const hasApi = current.triggers.some((t) => t.kind === 'api' && t.enabled);
    show(el('nav', {class: 'crumbs'}, el('a', {href: '/automations'}, '← Automations')),
      el('h1', {id: 'automation-name'}, current.name),
      el('div', {class: 'controls'},
        hasApi ? el('button', {type: 'button', class: 'primary', id: 'fire-now', on: {click: () => fireNow(box, msg)}}, 'Fire now') : null,
        el('button', {type: 'button', class: 'danger', id: 'delete', on: {click: remove}}, 'Delete')),
      msg,
      el('section', {class: 'panel'}, el('h2', {}, 'Fires'), box),
      el('section', {class: 'panel'}, el('h2', {}, 'Edit'), form(current)));
    fires(box);
  }
  start();
})();
