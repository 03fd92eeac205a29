// Settings (admins only): LLM providers with a test button, the integrations' status, run
// defaults, and the vault's secrets by name with set/replace/remove. Values never come back.
'use strict';
(() => {
  const {el, api, show, fill, errorBox, fmtTime} = svc;

  function panel(id, title, ...kids) {
    return el('section', {class: 'panel', id}, el('h2', {}, title), ...kids);
  }

  // POST /api/v1/providers/test: one row per provider, its failure in words.
  function providers(view) {
    const endpoints = (view.settings.llm && view.settings.llm.providers) || {};
    const rows = el('tbody', {});
    const out = el('p', {class: 'muted', role: 'status', id: 'provider-test-status'});
    const button = el('button', {type: 'button', id: 'test-providers', class: 'button'}, 'Test providers');
    button.addEventListener('click', async () => {
      button.disabled = true;
      out.textContent = 'Testing…';
      try {
        const r = await api('POST', '/api/v1/providers/test', {});
        fill(rows, r.data.map((p) => el('tr', {'data-provider': p.provider, class: 'probe-' + p.status},
          el('td', {}, p.provider),
          el('td', {}, endpoints[p.provider] && endpoints[p.provider].base_url || 'default endpoint'),
          el('td', {}, p.model_id || '—'),
          el('td', {class: 'status'}, p.status === 'ok' ? 'works' : p.status === 'skip' ? 'no key stored' : 'fails'),
          el('td', {class: 'message'}, p.error_message || (p.status === 'ok' ? `answered in ${p.latency_ms} ms` : '')))));
        const failed = r.data.filter((p) => p.status === 'error').length;
        out.textContent = failed ? `${failed} provider(s) failed.` : 'Every provider with a key works.';
      } catch (e) {
        fill(out, errorBox(e, 'The test could not run'));
      } finally {
        button.disabled = false;
      }
    });
    return panel('providers', 'LLM providers',
      el('p', {class: 'help'}, 'Each provider with a key gets one small call with its default model.'),
      button, ' ', out,
      el('table', {class: 'usage-table', id: 'provider-results'},
        el('thead', {}, el('tr', {}, ['Provider', 'Endpoint', 'Model', 'Status', 'Details'].map((h) => el('th', {}, h)))),
        rows));
  }

  async function integrations() {
    const box = el('ul', {class: 'fires', id: 'integrations-list'});
    try {
      const r = await api('GET', '/api/v1/system/integrations');
      fill(box, r.data.map((i) => el('li', {'data-integration': i.provider},
        el('strong', {}, i.provider), ' · ', i.status,
        i.missing_credentials && i.missing_credentials.length ? ` · missing ${i.missing_credentials.join(', ')}` : '',
        i.last_error ? el('span', {class: 'muted'}, ' · ' + i.last_error) : null)));
    } catch (e) {
      fill(box, errorBox(e, 'The integrations could not be read'));
    }
    return panel('integrations', 'Integrations', box);
  }

  function runDefaults(view) {
    return panel('run-defaults', 'Run defaults',
      el('p', {class: 'help'}, `[run] of ${view.file}; change it with PATCH /api/v1/settings or in the file.`),
      el('pre', {id: 'run-defaults-json'}, JSON.stringify(view.settings.run || {}, null, 2)));
  }

  function secretRow(s, reload, msg) {
    const input = el('input', {type: 'password', autocomplete: 'off', 'aria-label': 'New value of ' + s.name,
      placeholder: s.set ? 'new value' : 'value'});
    const act = async (method, body, words) => {
      try {
        await api(method, '/api/v1/secrets/' + encodeURIComponent(s.name), body);
        msg.textContent = `${s.name} ${words}.`;
        await reload();
      } catch (e) {
        fill(msg, errorBox(e, s.name));
      }
    };
    const set = el('button', {type: 'button', class: 'button set-secret'}, s.set ? 'Replace' : 'Set');
    set.addEventListener('click', () => input.value && act('PUT', {value: input.value}, s.set ? 'replaced' : 'set'));
    const remove = s.set ? el('button', {type: 'button', class: 'button remove-secret'}, 'Remove') : null;
    if (remove) remove.addEventListener('click', () => act('DELETE', undefined, 'removed'));
    return el('tr', {'data-secret': s.name, 'data-set': String(s.set)},
      el('td', {}, el('code', {}, s.name)),
      el('td', {class: 'muted'}, s.purpose || ''),
      el('td', {class: 'state'}, s.set ? `set ${fmtTime(s.updated_at)}` : 'not set'),
      el('td', {}, input, ' ', set, ' ', remove));
  }

  function secrets() {
    const rows = el('tbody', {});
    const msg = el('p', {role: 'status', id: 'secret-status', class: 'muted'});
    const reload = async () => {
      const r = await api('GET', '/api/v1/secrets');
      fill(rows, r.data.map((s) => secretRow(s, reload, msg)));
    };
    reload().catch((e) => fill(msg, errorBox(e, 'The secrets could not be read')));
    return panel('secrets', 'Secrets',
      el('p', {class: 'help'}, 'Stored in the server\'s vault. Values are write-only: nobody can read them back.'),
      msg,
      el('table', {class: 'usage-table', id: 'secrets-table'},
        el('thead', {}, el('tr', {}, ['Name', 'Used for', 'State', ''].map((h) => el('th', {}, h)))),
        rows));
  }

  async function start() {
    let view;
    try {
      view = await api('GET', '/api/v1/settings');
    } catch (e) {
      const words = e.status === 403
        ? 'Settings are for the server\'s admins: the dev token\'s user and the logins in [server.auth] admins.'
        : 'The settings could not be loaded';
      show(el('h1', {}, 'Settings'), errorBox(e.status === 403 ? words : e, e.status === 403 ? null : words));
      return;
    }
    show(el('h1', {}, 'Settings'), providers(view), await integrations(), runDefaults(view), secrets());
  }
  start();
})();
