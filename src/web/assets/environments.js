// Environments: every named sandbox configuration (provider, network, resources, lifecycle,
// labels, its variables by name) with what each provider would honour (preflight), and the
// form to create, edit and delete one on the catalog's revision guard (If-Match). Variable
// values are write-only: the server never sends them back, so the page shows only names.
'use strict';
(() => {
  const {el, api, show, fill, errorBox} = svc;
  const base = '/api/v1/environments';
  const path = (id) => `${base}/${encodeURIComponent(id)}`;
  const f = {};
  let editing = null; // the environment the form edits ({id, revision, env_keys}), or null
  let vars = []; // the form's variable rows
  let varsTouched = false;
  let runDefault = null;

  // ---- words for the list ----

  function resourcesWords(r) {
    const parts = [['cpu', r.cpu], ['memory', r.memory], ['processes', r.pids], ['disk', r.disk]]
      .filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => `${k} ${v}`);
    return parts.length ? parts.join(' · ') : 'no limits';
  }

  function lifecycleWords(l) {
    if (!l) return '–';
    if (l.stop_on_terminal) return 'removed when its run ends';
    if (l.retention_hours !== null && l.retention_hours !== undefined) return `kept ${l.retention_hours} h after its run`;
    return 'kept as [run.sandbox] says';
  }

  function labelsWords(labels) {
    const e = Object.entries(labels || {});
    return e.length ? e.map(([k, v]) => `${k}=${v}`).join(', ') : 'none';
  }

  function variables(keys) {
    if (!keys || !keys.length) return 'none';
    return el('ul', {class: 'env-keys'}, keys.map((k) =>
      el('li', {'data-key': k}, el('code', {}, k), ' ', el('span', {class: 'muted'}, 'set'))));
  }

  // GET .../preflight: one line per provider, what it would refuse and why.
  async function preflight(e, box) {
    try {
      const p = await api('GET', path(e.id) + '/preflight');
      fill(box, el('h3', {}, 'What each provider would honour'),
        el('ul', {class: 'preflight'}, p.providers.map((x) => el('li', {'data-provider': x.provider, 'data-ok': String(x.ok)},
          el('strong', {}, x.provider), x.provider === e.provider ? ' (chosen)' : '', ': ',
          x.ok ? el('span', {class: 'ok'}, 'honours everything') : el('span', {class: 'refused'},
            x.refused.map((r) => `refuses ${r.field}: ${r.reason}`).join('; '))))),
        el('p', {class: 'help'}, `Limits on this host are enforced with ${p.limits}.`));
    } catch (err) {
      fill(box, errorBox(err, 'The preflight could not run'));
    }
  }

  function card(e) {
    const facts = [
      ['Provider', e.provider], ['Network', e.network === 'block' ? 'blocked' : 'allowed'],
      ['Resources', resourcesWords(e.resources || {})], ['Lifecycle', lifecycleWords(e.lifecycle)],
      ['Labels', labelsWords(e.labels)], ['Variables', variables(e.env_keys)],
    ];
    if (e.image) facts.push(['Image', e.image]);
    if (e.snapshot) facts.push(['Snapshot', e.snapshot]);
    const pre = el('div', {class: 'env-preflight'}, el('p', {class: 'muted'}, 'Checking the providers…'));
    preflight(e, pre);
    return el('li', {class: 'env-card panel', id: 'env-' + e.id, 'data-id': e.id, 'data-revision': e.revision},
      el('div', {class: 'env-head'}, el('h2', {}, e.id),
        e.id === runDefault ? el('span', {class: 'badge', title: '[run] environment'}, 'runs get this by default') : null,
        el('span', {class: 'env-actions'},
          el('button', {type: 'button', class: 'edit', on: {click: () => edit(e.id)}}, 'Edit'),
          el('button', {type: 'button', class: 'danger delete', on: {click: () => remove(e)}}, 'Delete'))),
      e.description ? el('p', {class: 'muted'}, e.description) : null,
      el('dl', {class: 'facts'}, facts.map(([k, v]) => el('div', {class: 'fact', 'data-fact': k.toLowerCase()},
        el('dt', {}, k), el('dd', {}, v)))),
      pre);
  }

  async function loadList() {
    try {
      const r = await api('GET', base);
      runDefault = r.meta.run_default || null;
      fill(f.list, r.data.length ? r.data.map(card) : el('li', {class: 'muted'}, 'No environments yet: runs use [run.sandbox].'));
      // A link from a run page (`#env-<id>`): the cards came after the browser looked.
      const target = location.hash.length > 1 && document.getElementById(decodeURIComponent(location.hash.slice(1)));
      if (target && !loadList.scrolled) { loadList.scrolled = true; target.scrollIntoView({block: 'start'}); }
    } catch (err) {
      fill(f.list, errorBox(err, 'The environments could not be loaded'));
    }
  }

  async function remove(e) {
    if (!confirm(`Delete environment ${e.id}? Runs that used it keep their frozen copy.`)) return;
    fill(f.status);
    try {
      await api('DELETE', path(e.id), undefined, {'If-Match': `"${e.revision}"`});
      fill(f.status, el('p', {class: 'ok', role: 'status'}, `Deleted ${e.id}.`));
      if (editing && editing.id === e.id) reset();
    } catch (err) {
      fill(f.status, errorBox(err, `${e.id} was not deleted`));
    }
    loadList();
  }

  // ---- the form ----

  function field(label, input, key, help) {
    input.dataset.field = key;
    const hid = input.id + '-help';
    if (help) input.setAttribute('aria-describedby', hid);
    return el('div', {class: 'field'}, el('label', {for: input.id}, label), input,
      help ? el('p', {class: 'help', id: hid}, help) : null);
  }

  function varRow(key, existing) {
    const i = vars.length;
    const row = {existing};
    const touch = () => { varsTouched = true; };
    row.key = el('input', {id: `var-key-${i}`, class: 'var-key', value: key || '', autocomplete: 'off',
      'aria-label': 'Variable name', placeholder: 'NAME', on: {input: touch}});
    row.value = el('input', {id: `var-value-${i}`, class: 'var-value', type: 'password', autocomplete: 'new-password',
      'aria-label': 'Value of ' + (key || 'the variable'),
      placeholder: existing ? 'set (unchanged)' : 'value or {{ secrets.NAME }}', on: {input: touch}});
    row.node = el('div', {class: 'var-row', 'data-index': i}, row.key, row.value,
      el('button', {type: 'button', class: 'link remove-var', on: {click: () => {
        touch(); row.removed = true; row.node.remove();
      }}}, 'Remove'));
    vars.push(row);
    f.vars.append(row.node);
  }

  function setForm(e) {
    editing = e;
    vars = [];
    varsTouched = false;
    const r = (e && e.resources) || {};
    const l = (e && e.lifecycle) || {};
    const text = (v) => (v === null || v === undefined ? '' : String(v));
    f.heading.textContent = e ? `Edit ${e.id}` : 'New environment';
    f.id.value = e ? e.id : '';
    f.id.disabled = !!e;
    f.description.value = text(e && e.description);
    f.provider.value = (e && e.provider) || 'container';
    f.network.value = (e && e.network) || 'allow';
    f.cpu.value = text(r.cpu);
    f.memory.value = text(r.memory);
    f.pids.value = text(r.pids);
    f.disk.value = text(r.disk);
    f.retention.value = text(l.retention_hours);
    f.stop.checked = !!l.stop_on_terminal;
    f.labels.value = Object.entries((e && e.labels) || {}).map(([k, v]) => `${k}=${v}`).join('\n');
    f.image.value = text(e && e.image);
    f.snapshot.value = text(e && e.snapshot);
    fill(f.vars);
    ((e && e.env_keys) || []).forEach((k) => varRow(k, true));
    f.cancel.hidden = !e;
    f.save.textContent = e ? 'Save' : 'Create environment';
    clearErrors();
  }

  function reset() {
    setForm(null);
  }

  async function edit(id) {
    fill(f.status);
    try {
      setForm(await api('GET', path(id)));
      f.panel.scrollIntoView({block: 'start'});
      f.description.focus({preventScroll: true});
    } catch (err) {
      fill(f.status, errorBox(err, `${id} could not be read`));
    }
  }

  // A count: empty → null, digits → a number, anything else as written (the server says why).
  function count(v) {
    const t = v.trim();
    if (!t) return null;
    return /^\d+$/.test(t) ? Number(t) : t;
  }

  function parseLabels(text) {
    const out = {};
    for (const line of text.split('\n')) {
      const t = line.trim();
      if (!t) continue;
      const eq = t.indexOf('=');
      if (eq <= 0) return null;
      out[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
    }
    return out;
  }

  // The variables to send, or undefined to keep the stored ones (the API replaces the whole
  // map when `env` is sent and cannot send values back, so kept ones must be entered again).
  function envBody(problems) {
    if (editing && !varsTouched) return undefined;
    const out = {};
    for (const row of vars.filter((r) => !r.removed)) {
      const key = row.key.value.trim();
      delete row.key.dataset.field;
      if (!key && !row.value.value) continue;
      row.key.dataset.field = 'env.' + key;
      if (row.existing && !row.value.value) {
        problems.push([row.value, `Enter the value of ${key} again: changing the variables replaces them all, and stored values cannot be read back.`]);
        continue;
      }
      out[key] = row.value.value;
    }
    return out;
  }

  function body(problems) {
    const labels = parseLabels(f.labels.value);
    if (labels === null) problems.push([f.labels, 'Each line must be key=value.']);
    const b = {
      description: f.description.value.trim() || null,
      provider: f.provider.value,
      network: f.network.value,
      resources: {cpu: count(f.cpu.value), memory: count(f.memory.value), pids: count(f.pids.value), disk: count(f.disk.value)},
      lifecycle: {retention_hours: count(f.retention.value), stop_on_terminal: f.stop.checked},
      labels: labels || {},
      image: f.image.value.trim() || null,
      snapshot: f.snapshot.value.trim() || null,
    };
    const env = envBody(problems);
    if (env !== undefined) b.env = env;
    if (!editing) b.id = f.id.value.trim();
    return b;
  }

  function clearErrors() {
    f.form.querySelectorAll('.field-error').forEach((n) => n.remove());
    f.form.querySelectorAll('[aria-invalid]').forEach((n) => n.removeAttribute('aria-invalid'));
    fill(f.msg);
  }

  // The input a field path names, else the closest enclosing one (`env.TOKEN` -> `env`).
  function inputFor(key) {
    while (key) {
      const n = f.form.querySelector(`[data-field="${CSS.escape(key)}"]`);
      if (n) return n;
      const cut = key.lastIndexOf('.');
      key = cut > 0 ? key.slice(0, cut) : '';
    }
    return null;
  }

  function mark(input, words, key) {
    input.setAttribute('aria-invalid', 'true');
    const at = input.closest('.var-row') || input;
    at.after(el('p', {class: 'field-error', role: 'alert', 'data-for': key || input.dataset.field || ''}, words));
  }

  // Each 422 entry beside the input its `field` names; the rest above the button.
  function showErrors(err) {
    const entries = (err.body && err.body.errors) || [];
    const left = [];
    for (const e of entries) {
      const input = inputFor(e.field || '');
      if (input) mark(input, e.detail, e.field);
      else left.push(e.detail);
    }
    fill(f.msg, el('p', {class: 'error', role: 'alert', id: 'env-form-errors'},
      `Not saved: ${entries.length} field${entries.length === 1 ? '' : 's'} to fix${left.length ? ': ' + left.join('; ') : ' (marked above)'}.`));
    reveal();
  }

  // The first error in view: the form is long, its button far below the top fields.
  function reveal() {
    const first = f.form.querySelector('.field-error');
    if (first) first.scrollIntoView({block: 'center'});
  }

  // A stale revision: someone saved this environment since it was read.
  function showStale(err) {
    fill(f.msg, el('div', {class: 'error', role: 'alert', id: 'env-stale'},
      `Not saved: ${err.message} `,
      el('button', {type: 'button', class: 'link', id: 'env-reload', on: {click: () => edit(editing.id)}},
        'Load the current version (your changes are dropped)')));
  }

  async function submit(ev) {
    ev.preventDefault();
    clearErrors();
    fill(f.status);
    const problems = [];
    const b = body(problems);
    if (problems.length) {
      problems.forEach(([input, words]) => mark(input, words));
      fill(f.msg, errorBox('Not saved: fix the fields marked above.'));
      reveal();
      return;
    }
    f.save.disabled = true;
    try {
      const saved = editing
        ? await api('PUT', path(editing.id), b, {'If-Match': `"${editing.revision}"`})
        : await api('POST', base, b);
      reset();
      fill(f.status, el('p', {class: 'ok', role: 'status'}, `Saved ${saved.id}.`));
      await loadList();
    } catch (err) {
      if (err.status === 422) showErrors(err);
      else if (err.status === 409 && editing) showStale(err);
      else fill(f.msg, errorBox(err, 'Not saved'));
    } finally {
      f.save.disabled = false;
    }
  }

  function form() {
    const opt = (v, words) => el('option', {value: v}, words || v);
    f.heading = el('h2', {id: 'env-form-title'}, 'New environment');
    f.id = el('input', {id: 'env-id', autocomplete: 'off', placeholder: 'small'});
    f.description = el('input', {id: 'env-description'});
    f.provider = el('select', {id: 'env-provider'}, opt('container', 'container (bubblewrap on this host)'),
      opt('local', 'local (processes on the host)'), opt('hosted'));
    f.network = el('select', {id: 'env-network'}, opt('allow'), opt('block'));
    f.cpu = el('input', {id: 'env-cpu', inputmode: 'numeric', placeholder: 'no limit'});
    f.memory = el('input', {id: 'env-memory', placeholder: 'e.g. 512MB, 4GB'});
    f.pids = el('input', {id: 'env-pids', inputmode: 'numeric', placeholder: 'no limit'});
    f.disk = el('input', {id: 'env-disk', placeholder: 'e.g. 1GB'});
    f.retention = el('input', {id: 'env-retention', inputmode: 'numeric', placeholder: '[run.sandbox] retention'});
    f.stop = el('input', {type: 'checkbox', id: 'env-stop'});
    f.stop.dataset.field = 'lifecycle.stop_on_terminal';
    f.labels = el('textarea', {id: 'env-labels', rows: 2, class: 'code', placeholder: 'team=web'});
    f.image = el('input', {id: 'env-image', autocomplete: 'off'});
    f.snapshot = el('input', {id: 'env-snapshot', autocomplete: 'off'});
    f.vars = el('div', {id: 'env-vars'});
    f.msg = el('div', {id: 'env-form-msg'});
    f.save = el('button', {type: 'submit', class: 'primary', id: 'env-save'}, 'Create environment');
    f.cancel = el('button', {type: 'button', id: 'env-cancel', hidden: true, on: {click: reset}}, 'Cancel editing');
    f.form = el('form', {class: 'env-form', novalidate: true, on: {submit}},
      field('Id', f.id, 'id', 'Lowercase letters, digits and dashes; fixed once created. `local` is reserved.'),
      field('Description', f.description, 'description'),
      el('div', {class: 'env-grid'}, field('Provider', f.provider, 'provider'), field('Network', f.network, 'network')),
      el('fieldset', {'data-field': 'resources'}, el('legend', {}, 'Resources (empty: no limit)'),
        el('div', {class: 'env-grid'}, field('CPUs', f.cpu, 'resources.cpu'), field('Memory', f.memory, 'resources.memory'),
          field('Processes', f.pids, 'resources.pids'), field('Disk (largest file)', f.disk, 'resources.disk'))),
      el('fieldset', {'data-field': 'lifecycle'}, el('legend', {}, 'Lifecycle'),
        field('Keep the sandbox for (hours after its run)', f.retention, 'lifecycle.retention_hours'),
        el('label', {class: 'check'}, f.stop, ' Remove the sandbox as soon as its run ends')),
      el('fieldset', {'data-field': 'env'}, el('legend', {}, 'Variables'),
        el('p', {class: 'help'}, 'Every process of the run gets these. Values are write-only: once saved only the names show. ',
          'To keep the stored ones, leave them as they are; changing any variable replaces them all, so enter the values again.'),
        f.vars,
        el('button', {type: 'button', id: 'add-var', on: {click: () => { varsTouched = true; varRow('', false); }}}, 'Add variable')),
      field('Labels', f.labels, 'labels', 'key=value per line.'),
      el('div', {class: 'env-grid'}, field('Image', f.image, 'image', 'Hosted providers only.'),
        field('Snapshot', f.snapshot, 'snapshot', 'Hosted providers only.')),
      f.msg, el('div', {class: 'actions'}, f.save, ' ', f.cancel));
    f.panel = el('section', {class: 'panel', id: 'env-form-panel'}, f.heading, f.form);
    return f.panel;
  }

  f.list = el('ul', {class: 'env-list', id: 'env-list'}, el('li', {class: 'muted'}, 'Loading…'));
  f.status = el('div', {id: 'env-status'});
  show(el('div', {class: 'toolbar'}, el('h1', {}, 'Environments'),
    el('button', {type: 'button', class: 'primary', id: 'new-env', on: {click: () => {
      reset(); f.panel.scrollIntoView({block: 'start'}); f.id.focus({preventScroll: true});
    }}}, 'New environment')),
  el('p', {class: 'help'}, 'Named sandboxes a run chooses on the new-run form. A run freezes its environment when it is created: editing one later changes no existing run.'),
  f.status, f.list, form());
  reset();
  loadList();
})();
