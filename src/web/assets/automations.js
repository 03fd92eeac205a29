// Automations: every automation with its triggers, next due times and last fires (each with
// its run), and the way to a new one.
'use strict';
(() => {
  const {el, api, show, errorBox, fmtTime} = svc;
  const DETAILED = 50;

  function triggerWords(t) {
    const off = t.enabled === false ? ' (off)' : '';
    switch (t.kind) {
      case 'schedule': return `${t.id}: schedule ${t.expression} ${t.timezone || 'UTC'}${off}`;
      case 'webhook': return `${t.id}: webhook${off}`;
      case 'codehost': return `${t.id}: ${(t.events || []).join(', ')}${off}`;
      default: return `${t.id}: ${t.kind}${off}`;
    }
  }

  function fireItem(f) {
    return el('li', {class: 'fire o-' + f.outcome},
      el('span', {class: 'badge'}, f.outcome), ' ', fmtTime(f.due_at || f.fired_at), ' · ', f.trigger_id,
      f.run_id && f.outcome === 'created' ? [' · ', el('a', {href: '/runs/' + encodeURIComponent(f.run_id)}, 'run')] : null,
      f.error ? el('span', {class: 'muted'}, ' · ' + f.error) : null,
      f.policy ? el('span', {class: 'muted'}, ` · skipped by ${f.policy}`) : null);
  }

  async function details(a, box) {
    try {
      const r = await api('GET', `/api/v1/automations/${encodeURIComponent(a.id)}/fires?page[limit]=3`);
      const next = (r.meta.schedules || []).map((s) => s.next_due_at).filter(Boolean).sort()[0];
      svc.fill(box,
        el('p', {class: 'muted'}, next ? `Next due ${fmtTime(next)}` : 'Nothing scheduled'),
        r.data.length ? el('ul', {class: 'fires'}, r.data.map(fireItem)) : el('p', {class: 'muted'}, 'No fires yet.'));
    } catch (e) {
      svc.fill(box, errorBox(e));
    }
  }

  function row(a, i) {
    const box = el('div', {class: 'auto-details'});
    if (i < DETAILED) details(a, box);
    else svc.fill(box, el('button', {type: 'button', class: 'link', on: {click: () => details(a, box)}}, 'Show fires'));
    return el('li', {class: 'automation card', 'data-id': a.id},
      el('a', {class: 'card-title', href: '/automations/' + encodeURIComponent(a.id)}, a.name),
      el('div', {class: 'card-meta'}, el('span', {}, a.id),
        a.description ? el('span', {}, a.description) : null),
      el('ul', {class: 'triggers'}, a.triggers.map((t) => el('li', {}, triggerWords(t)))),
      box);
  }

  async function start() {
    let list;
    try {
      list = await api('GET', '/api/v1/automations');
    } catch (e) {
      show(el('h1', {}, 'Automations'), errorBox(e, 'The automations could not be loaded'));
      return;
    }
    show(el('div', {class: 'toolbar'}, el('h1', {}, 'Automations'),
      el('a', {class: 'button primary', id: 'new-automation', href: '/automations/new'}, 'New automation')),
    list.data.length
      ? el('ul', {class: 'cards automations', id: 'automations'}, list.data.map(row))
      : el('p', {class: 'muted', id: 'automations'}, 'No automations yet.'));
  }
  start();
})();
