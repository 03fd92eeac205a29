// New run: paste or upload a workflow (or name a registered version), goal, inputs,
// repository and branch, model, and the environment (or a sandbox provider). The server
// validates before creating anything; its diagnostics are shown inline with line and
// column, and nothing is created when there is an error.
'use strict';
(() => {
  const {el, api, show, errorBox} = svc;
  const f = {};

  function field(label, input, help) {
    const hid = input.id + '-help';
    if (help) input.setAttribute('aria-describedby', hid);
    return el('div', {class: 'field'}, el('label', {for: input.id}, label), input,
      help ? el('p', {class: 'help', id: hid}, help) : null);
  }

  // `key=value` lines → object; returns [object, error words].
  function parseInputs(text) {
    const out = {};
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i].trim();
      if (!line || line.startsWith('#')) continue;
      const eq = line.indexOf('=');
      if (eq <= 0) return [null, `Line ${i + 1} of the inputs is not key=value.`];
      out[line.slice(0, eq).trim()] = line.slice(eq + 1).trim();
    }
    return [out, null];
  }

  function showDiagnostics(list, source) {
    const lines = source.split('\n');
    svc.fill(f.diag, el('p', {class: 'error', role: 'alert'},
      'The workflow has errors; nothing was created. Fix them and submit again.'),
    el('ul', {class: 'diagnostics', id: 'diagnostics'}, list.map((d) => {
      const where = d.line ? `Line ${d.line}${d.column ? ', column ' + d.column : ''}` : (d.node_id ? `Node ${d.node_id}` : 'Workflow');
      const snippet = d.line && lines[d.line - 1] !== undefined ? lines[d.line - 1] : null;
      return el('li', {class: 'diag d-' + (d.severity || 'error'), 'data-line': d.line || ''},
        el('strong', {}, `${where}: `), `${d.message}`, d.rule ? el('span', {class: 'muted'}, ` (${d.rule})`) : null,
        snippet !== null ? el('pre', {class: 'snippet'}, snippet + (d.column ? '\n' + ' '.repeat(Math.max(0, d.column - 1)) + '^' : '')) : null,
        d.line ? el('button', {type: 'button', class: 'link', on: {click: () => jump(d.line, d.column)}}, 'Show in editor') : null);
    })));
    f.source.setAttribute('aria-invalid', 'true');
    // The list sits under the editor, often above the fold once the form is scrolled to its
    // button: bring it into view, and say so beside the button too.
    svc.fill(f.msg, el('p', {class: 'error', id: 'form-errors'}, 'The workflow has errors (listed under the editor). ',
      el('button', {type: 'button', class: 'link', on: {click: () => reveal(true)}}, 'Show them')));
    reveal(false);
  }

  function reveal(focus) {
    const first = f.diag.querySelector('.error, li') || f.diag;
    first.scrollIntoView({block: 'center'});
    if (focus) f.source.focus({preventScroll: true});
  }

  // Moves the editor's caret to line/column.
  function jump(line, column) {
    const lines = f.source.value.split('\n');
    let pos = 0;
    for (let i = 0; i < line - 1 && i < lines.length; i++) pos += lines[i].length + 1;
    pos += Math.max(0, (column || 1) - 1);
    f.source.focus();
    f.source.setSelectionRange(pos, pos);
  }

  async function submit(e) {
    e.preventDefault();
    svc.fill(f.diag);
    svc.fill(f.msg);
    f.source.removeAttribute('aria-invalid');
    const source = f.source.value;
    const version = f.version.value.trim();
    const body = {};
    if (version && source.trim()) {
      svc.fill(f.msg, errorBox('Give either a workflow to paste or a registered version id, not both.'));
      return;
    }
    if (version) body.workflow_version_id = version;
    else if (source.trim()) {
      const graph = /^\s*digraph\s+"?([A-Za-z_][A-Za-z0-9_]*)/m.exec(source);
      const name = (f.fileName || (graph ? graph[1] + '.dot' : 'workflow.dot')).replace(/[^A-Za-z0-9._-]/g, '_');
      body.workflow = {entrypoint: name, files: {[name]: source}};
    } else {
      svc.fill(f.diag, errorBox('Paste or upload a workflow, or give a registered version id.'));
      f.source.focus();
      return;
    }
    if (f.goal.value.trim()) body.goal = f.goal.value;
    if (f.title.value.trim()) body.title = f.title.value.trim();
    const [inputs, bad] = parseInputs(f.inputs.value);
    if (bad) { svc.fill(f.inputsMsg, errorBox(bad)); f.inputs.focus(); return; }
    svc.fill(f.inputsMsg);
    if (Object.keys(inputs).length) body.inputs = inputs;
    if (f.repo.value.trim()) {
      body.repository = {origin_url: f.repo.value.trim()};
      if (f.branch.value.trim()) body.repository.branch = f.branch.value.trim();
    } else if (f.branch.value.trim()) {
      svc.fill(f.msg, errorBox('A branch needs a repository.'));
      f.repo.focus();
      return;
    }
    if (f.model.value.trim()) body.model = {name: f.model.value.trim()};
    if (f.environment.value) body.environment = f.environment.value;
    else if (f.sandbox.value) body.sandbox = {provider: f.sandbox.value};
    f.button.disabled = true;
    try {
      const run = await api('POST', '/api/v1/runs', body);
      if (f.start.checked) await api('POST', `/api/v1/runs/${encodeURIComponent(run.id)}/start`, {});
      location.assign('/runs/' + encodeURIComponent(run.id));
    } catch (err) {
      f.button.disabled = false;
      const entry = err.entry;
      if (entry && Array.isArray(entry.diagnostics) && entry.diagnostics.length) {
        const errors = entry.diagnostics.filter((d) => d.severity !== 'warning' && d.severity !== 'info');
        showDiagnostics(errors.length ? errors : entry.diagnostics, source);
      } else {
        svc.fill(f.msg, errorBox(err, 'The run was not created'));
      }
    }
  }

  function upload(e) {
    const file = e.target.files && e.target.files[0];
    if (!file) return;
    if (file.size > 512 * 1024) { svc.fill(f.diag, errorBox('That file is larger than 512 KiB.')); return; }
    const r = new FileReader();
    r.onload = () => { f.source.value = String(r.result); f.fileName = file.name; };
    r.onerror = () => svc.fill(f.diag, errorBox('The file could not be read.'));
    r.readAsText(file);
  }

  f.source = el('textarea', {id: 'wf-source', name: 'source', rows: 14, spellcheck: 'false', class: 'code',
    placeholder: 'digraph my_flow {\n  start [shape=Mdiamond]\n  ...\n}'});
  f.fileInput = el('input', {type: 'file', id: 'wf-file', accept: '.dot,.gv,.fabro,text/plain', on: {change: upload}});
  f.version = el('input', {id: 'wf-version', name: 'version', autocomplete: 'off'});
  f.goal = el('textarea', {id: 'goal', name: 'goal', rows: 2});
  f.title = el('input', {id: 'title', name: 'title'});
  f.inputs = el('textarea', {id: 'inputs', name: 'inputs', rows: 3, class: 'code', placeholder: 'key=value'});
  f.inputsMsg = el('div');
  f.repo = el('input', {id: 'repository', name: 'repository', autocomplete: 'off', placeholder: 'git URL or /path/to/repo'});
  f.branch = el('input', {id: 'branch', name: 'branch', autocomplete: 'off', placeholder: 'default branch'});
  f.model = el('input', {id: 'model', name: 'model', placeholder: 'default from settings'});
  f.sandbox = el('select', {id: 'sandbox', name: 'sandbox'},
    el('option', {value: ''}, 'Default from settings'), el('option', {value: 'local'}, 'local'),
    el('option', {value: 'container'}, 'container'), el('option', {value: 'hosted'}, 'hosted'));
  f.environment = el('select', {id: 'environment', name: 'environment', 'aria-describedby': 'environment-help'},
    el('option', {value: ''}, 'Loading environments…'));
  f.envHelp = el('p', {class: 'help', id: 'environment-help'}, 'The sandbox the run gets, frozen when it is created. ',
    el('a', {href: '/environments'}, 'Manage environments'));
  f.sandboxField = field('Sandbox provider', f.sandbox, 'Used only when the run names no environment.');
  f.environment.addEventListener('change', () => { f.sandboxField.hidden = !!f.environment.value; });
  f.start = el('input', {type: 'checkbox', id: 'start-now', checked: true});
  f.button = el('button', {type: 'submit', class: 'primary', id: 'create'}, 'Create run');
  f.diag = el('div', {id: 'wf-errors'});
  f.msg = el('div', {id: 'form-msg'});
  show(el('h1', {}, 'New run'),
    el('form', {class: 'new-run', on: {submit}, novalidate: true},
      el('fieldset', {}, el('legend', {}, 'Workflow'),
        field('Workflow source (DOT)', f.source, 'Paste a workflow, or upload a file below.'),
        f.diag,
        field('Upload a file', f.fileInput),
        field('Or a registered version id', f.version, 'The id returned by POST /api/v1/workflow-versions.')),
      field('Goal', f.goal, 'Leave empty to use the workflow\u2019s goal.'),
      field('Title', f.title, 'Leave empty to use the goal\u2019s first line.'),
      field('Inputs', f.inputs, 'One key=value per line; read in prompts as $inputs.key.'), f.inputsMsg,
      field('Repository', f.repo, 'A git URL or path the run works on (a copy); leave empty for none.'),
      field('Branch', f.branch),
      field('Model', f.model),
      el('div', {class: 'field'}, el('label', {for: 'environment'}, 'Environment'), f.environment, f.envHelp),
      f.sandboxField,
      el('label', {class: 'check'}, f.start, ' Start the run now'),
      f.msg, el('div', {class: 'actions'}, f.button)));

  // The chooser: every environment, the server's `[run] environment` preselected, and "none"
  // (the sandbox provider field) when it names none, so a run made here gets what the same
  // create body gets from the API (a fresh machine without bubblewrap keeps working).
  async function loadEnvironments() {
    const none = el('option', {value: ''}, 'None: the sandbox provider below');
    try {
      const r = await api('GET', '/api/v1/environments');
      const ids = r.data.map((e) => e.id);
      const chosen = ids.includes(r.meta.run_default) ? r.meta.run_default : '';
      svc.fill(f.environment, r.data.map((e) => el('option', {value: e.id, selected: e.id === chosen},
        `${e.id} (${e.provider}${e.resources && e.resources.cpu ? `, ${e.resources.cpu} CPU` : ''}` +
        `${e.resources && e.resources.memory ? `, ${e.resources.memory}` : ''})` +
        (e.id === r.meta.run_default ? ' · server default' : ''))), none);
      f.environment.value = chosen;
    } catch (err) {
      svc.fill(f.environment, none);
      svc.fill(f.envHelp, errorBox(err, 'The environments could not be loaded'));
    }
    f.sandboxField.hidden = !!f.environment.value;
  }
  loadEnvironments();
})();
