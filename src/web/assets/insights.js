// Insights (admins only): read-only SQL over the store's documented views, the answer as a
// table and as a chart this script draws in SVG (the first numeric column over the first
// column), the built-in examples, and saved queries (the catalog at
// /api/v1/insights/queries, changed with If-Match revisions).
'use strict';
(() => {
  const {el, api, request, fill, show, errorBox, fmtInt} = svc;
  const QUERY = '/api/v1/insights/query';
  const SAVED = '/api/v1/insights/queries';
  // Rows drawn in the table; the chart and the CSV use every row.
  const TABLE_ROWS = 1000;
  const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
  // Series named like a run status get that status's colour.
  const STATUS_CLASS = {succeeded: 'st-ok', failed: 'st-bad', dead: 'st-bad', running: 'st-run',
    blocked: 'st-warn', paused: 'st-warn', runnable: 'st-muted', pending: 'st-muted', submitted: 'st-muted'};

  const state = {saved: [], answer: null, kind: 'bar', sql: ''};
  const ui = {};

  function panel(id, title, ...kids) {
    return el('section', {class: 'panel', id}, el('h2', {}, title), ...kids);
  }

  // ------------------------------------------------------------------ running a query

  async function run(sql) {
    if (sql !== undefined) ui.sql.value = sql;
    const text = ui.sql.value;
    if (!text.trim()) {
      fill(ui.status, errorBox('Write a query first, or pick an example.'));
      return;
    }
    ui.run.disabled = true;
    fill(ui.status, 'Running…');
    try {
      const r = await api('POST', QUERY, {sql: text});
      state.answer = r;
      state.sql = text;
      fill(ui.status, `${fmtInt(r.row_count)} row${r.row_count === 1 ? '' : 's'} in ${r.elapsed_ms} ms.`);
      drawResult();
    } catch (e) {
      // The answer shown is never one of an earlier query.
      state.answer = null;
      ui.result.hidden = true;
      fill(ui.status, errorBox(e, e.status === 422 || e.status === 400 ? 'The query was not run' : 'The query failed'));
    } finally {
      ui.run.disabled = false;
    }
  }

  async function downloadCsv() {
    const text = ui.sql.value;
    if (!text.trim()) return;
    try {
      const csv = await request('POST', QUERY, {sql: text}, 'text/csv');
      const url = URL.createObjectURL(new Blob([csv], {type: 'text/csv'}));
      const a = el('a', {href: url, download: 'insights.csv', hidden: true});
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
      fill(ui.status, `Downloaded ${fmtInt(Math.max(0, csv.split('\r\n').length - 2))} rows as CSV.`);
    } catch (e) {
      fill(ui.status, errorBox(e, 'The CSV could not be made'));
    }
  }

  // ------------------------------------------------------------------ the answer

  function isNum(v) {
    return typeof v === 'number' && Number.isFinite(v);
  }

  function cell(v) {
    if (v === null || v === undefined) return el('td', {class: 'muted'}, 'null');
    if (isNum(v)) return el('td', {class: 'num'}, String(v));
    return el('td', {}, typeof v === 'string' ? v : JSON.stringify(v));
  }

  function table(r) {
    const shown = r.rows.slice(0, TABLE_ROWS);
    return [
      el('div', {class: 'table-wrap'},
        el('table', {class: 'usage-table', id: 'result-table'},
          el('thead', {}, el('tr', {}, r.columns.map((c, i) => el('th', {scope: 'col',
            class: r.rows.some((row) => isNum(row[i])) ? 'num' : null}, c)))),
          el('tbody', {}, shown.map((row) => el('tr', {}, row.map(cell)))))),
      r.rows.length > shown.length
        ? el('p', {class: 'help'}, `The table shows the first ${fmtInt(shown.length)} of ${fmtInt(r.rows.length)} rows; the chart and the CSV have them all.`)
        : null,
    ];
  }

  // Which columns to chart: x is the first column, y the first numeric column after it, and
  // a text column between them (e.g. `status`) names the series.
  function plan(columns, rows) {
    if (!rows.length) return {why: 'No rows to chart.'};
    const numeric = (i) => rows.some((r) => isNum(r[i])) && rows.every((r) => r[i] === null || isNum(r[i]));
    let y = -1;
    for (let i = 1; i < columns.length && y < 0; i++) if (numeric(i)) y = i;
    if (y < 0) return {why: 'No chart: it needs a numeric column after the first column.'};
    let series = -1;
    for (let i = 1; i < y && series < 0; i++) if (!numeric(i)) series = i;
    return {x: 0, y, series};
  }

  function label(v) {
    const s = v === null || v === undefined ? 'null' : String(v);
    return s.length > 16 ? s.slice(0, 15) + '…' : s;
  }

  function fmtNum(v) {
    return Math.abs(v) >= 1e6
      ? v.toLocaleString('en', {notation: 'compact', maximumFractionDigits: 1})
      : v.toLocaleString('en', {maximumFractionDigits: 2});
  }

  // About four round steps between lo and hi.
  function ticks(lo, hi) {
    const raw = (hi - lo) / 4;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
    const out = [];
    for (let t = Math.floor(lo / step) * step; t <= hi + step / 2; t += step) out.push(Math.round(t / step) * step);
    return out;
  }

  function chart(r, p) {
    const rows = r.rows;
    const W = Math.max(300, Math.round(ui.chartBox.clientWidth || 800));
    const H = W < 500 ? 240 : 300;
    const m = {left: 56, right: 12, top: 12, bottom: 40};
    const plotW = W - m.left - m.right, plotH = H - m.top - m.bottom;
    const vals = rows.map((row) => (isNum(row[p.y]) ? row[p.y] : 0));
    const vmin = Math.min(0, ...vals), vmax = Math.max(0, ...vals);
    const ts = ticks(vmin, vmax > vmin ? vmax : vmin + 1);
    const lo = ts[0], hi = ts[ts.length - 1];
    const yOf = (v) => m.top + plotH - ((v - lo) / (hi - lo)) * plotH;

    // Series: one colour class each, in order of first appearance.
    const seriesOf = (row) => (p.series >= 0 ? String(row[p.series]) : '');
    const names = [...new Set(rows.map(seriesOf))];
    const nth = new Map(names.map((n, i) => [n, i]));
    const cls = (name) => STATUS_CLASS[name] || 's' + (nth.get(name) % 6);

    const svg = el('svg:svg', {class: 'chart', id: 'chart-svg', width: W, height: H, viewBox: `0 0 ${W} ${H}`,
      role: 'img', 'data-kind': state.kind,
      'aria-label': `${state.kind === 'bar' ? 'Bar' : 'Line'} chart of ${r.columns[p.y]} over ${r.columns[p.x]}`});
    const grid = el('svg:g', {class: 'grid'});
    for (const t of ts) {
      grid.append(el('svg:line', {x1: m.left, x2: W - m.right, y1: yOf(t), y2: yOf(t)}),
        el('svg:text', {x: m.left - 6, y: yOf(t) + 4, 'text-anchor': 'end'}, fmtNum(t)));
    }
    svg.append(grid, el('svg:line', {class: 'axis', x1: m.left, x2: W - m.right, y1: yOf(0), y2: yOf(0)}));

    // x positions: bars get one band per row; a line gets one band per distinct x value.
    const xs = rows.map((row) => label(row[p.x]));
    const cats = state.kind === 'bar' ? xs.map((_, i) => i) : [...new Set(xs)];
    const catIndex = new Map(cats.map((c, k) => [c, k]));
    const catOf = state.kind === 'bar' ? (i) => i : (i) => catIndex.get(xs[i]);
    const band = plotW / cats.length;
    const cx = (c) => m.left + band * (c + 0.5);

    const marks = el('svg:g', {class: 'marks'});
    if (state.kind === 'bar') {
      const bw = Math.min(band > 3 ? band * 0.8 : band, 72);
      rows.forEach((row, i) => {
        const v = vals[i], top = Math.min(yOf(v), yOf(0));
        marks.append(el('svg:rect', {class: 'bar ' + cls(seriesOf(row)), 'data-row': i,
          x: (cx(i) - bw / 2).toFixed(2), y: top.toFixed(2), width: bw.toFixed(2),
          height: Math.abs(yOf(v) - yOf(0)).toFixed(2)},
        el('svg:title', {}, tip(r, p, row))));
      });
    } else {
      const pts = new Map(names.map((n) => [n, []]));
      rows.forEach((row, i) => pts.get(seriesOf(row)).push(`${cx(catOf(i)).toFixed(2)},${yOf(vals[i]).toFixed(2)}`));
      for (const name of names) marks.append(el('svg:polyline', {class: 'line ' + cls(name), points: pts.get(name).join(' ')}));
      rows.forEach((row, i) => marks.append(el('svg:circle', {class: 'point ' + cls(seriesOf(row)), 'data-row': i,
        cx: cx(catOf(i)).toFixed(2), cy: yOf(vals[i]).toFixed(2), r: rows.length > 200 ? 1.5 : 3.5},
      el('svg:title', {}, tip(r, p, row)))));
    }
    svg.append(marks);

    // x labels: each run of equal values once, under its middle, thinned to fit.
    const runs = [];
    cats.forEach((c, k) => {
      const name = state.kind === 'bar' ? xs[c] : c;
      const last = runs[runs.length - 1];
      if (last && last.name === name) last.end = k;
      else runs.push({name, start: k, end: k});
    });
    const every = Math.max(1, Math.ceil(runs.length / Math.max(1, Math.floor(plotW / 90))));
    const xl = el('svg:g', {class: 'x-labels'});
    runs.forEach((g, k) => {
      if (k % every) return;
      xl.append(el('svg:text', {x: ((cx(g.start) + cx(g.end)) / 2).toFixed(2), y: H - m.bottom + 16,
        'text-anchor': 'middle'}, g.name));
    });
    svg.append(xl, el('svg:text', {class: 'axis-name', x: m.left, y: H - 4}, `${r.columns[p.y]} by ${r.columns[p.x]}`));

    const legend = p.series >= 0
      ? el('ul', {class: 'legend', id: 'chart-legend'}, names.map((n) =>
        el('li', {}, el('span', {class: 'swatch ' + cls(n)}), n)))
      : null;
    return [svg, legend];
  }

  function tip(r, p, row) {
    const parts = [row[p.x], p.series >= 0 ? row[p.series] : null].filter((v) => v !== null && v !== undefined);
    return `${parts.join(' · ')}: ${r.columns[p.y]} = ${row[p.y] === null ? 'null' : row[p.y]}`;
  }

  function drawChart() {
    const r = state.answer;
    if (!r) return;
    const p = plan(r.columns, r.rows);
    if (p.why) {
      fill(ui.chartBox, el('p', {class: 'muted', id: 'chart-none'}, p.why));
      ui.kind.hidden = true;
      return;
    }
    ui.kind.hidden = false;
    fill(ui.chartBox);
    fill(ui.chartBox, chart(r, p));
  }

  function drawResult() {
    ui.result.hidden = false;
    drawChart();
    fill(ui.tableBox, table(state.answer));
  }

  // ------------------------------------------------------------------ saved queries

  // The address names the saved query in the box (`?query=<id>`), so a reload or a shared
  // link opens it again.
  function address(id) {
    history.replaceState(null, '', id ? '/insights?query=' + encodeURIComponent(id) : '/insights');
  }

  function useSaved(q) {
    address(q.id);
    ui.saveId.value = q.id;
    ui.saveName.value = q.name;
    run(q.sql);
  }

  async function remove(q, button) {
    if (button.dataset.armed !== 'true') {
      button.dataset.armed = 'true';
      button.textContent = 'Really delete?';
      return;
    }
    let said;
    try {
      await api('DELETE', `${SAVED}/${encodeURIComponent(q.id)}`, undefined, {'If-Match': `"${q.revision}"`});
      said = `Deleted “${q.name}”.`;
      if (new URLSearchParams(location.search).get('query') === q.id) address(null);
    } catch (e) {
      said = errorBox(e, `“${q.name}” was not deleted`);
    }
    await loadSaved();
    fill(ui.savedStatus, said);
  }

  function savedItem(q) {
    const load = el('button', {type: 'button', class: 'link load-query', title: q.sql},
      q.name, ' ', el('span', {class: 'muted'}, `(${q.id})`));
    load.addEventListener('click', () => useSaved(q));
    const del = el('button', {type: 'button', class: 'danger delete-query', 'aria-label': `Delete ${q.name}`}, 'Delete');
    del.addEventListener('click', () => remove(q, del));
    return el('li', {'data-query': q.id}, load, del);
  }

  async function loadSaved() {
    try {
      const r = await api('GET', SAVED);
      state.saved = r.data;
      fill(ui.savedList, r.data.length
        ? r.data.map(savedItem)
        : el('li', {class: 'muted', id: 'saved-none'}, 'No saved queries yet.'));
    } catch (e) {
      fill(ui.savedList, el('li', {}, errorBox(e, 'The saved queries could not be read')));
    }
  }

  async function save() {
    const id = ui.saveId.value.trim();
    const name = ui.saveName.value.trim() || id;
    ui.saveId.setAttribute('aria-invalid', String(!SLUG.test(id)));
    if (!SLUG.test(id)) {
      fill(ui.savedStatus, errorBox('The id is a slug: lowercase letters, digits and dashes, starting with a letter or digit (at most 63).'));
      return;
    }
    const body = {name, sql: ui.sql.value};
    const old = state.saved.find((q) => q.id === id);
    let said;
    try {
      if (old) {
        const kept = typeof old.description === 'string' ? {description: old.description} : {};
        await api('PUT', `${SAVED}/${encodeURIComponent(id)}`, {...body, ...kept},
          {'If-Match': `"${old.revision}"`});
        said = `Replaced “${name}”.`;
      } else {
        await api('POST', SAVED, {id, ...body});
        said = `Saved “${name}”.`;
      }
    } catch (e) {
      said = errorBox(e, `“${name}” was not saved`);
    }
    // The list (and the revisions a next Save sends) is fresh before the outcome shows.
    await loadSaved();
    fill(ui.savedStatus, said);
  }

  // ------------------------------------------------------------------ the page

  function queryPanel(schema) {
    ui.sql = el('textarea', {id: 'sql', class: 'code', rows: 8, spellcheck: 'false', autocomplete: 'off',
      'aria-label': 'SQL query', placeholder: 'SELECT status, count(*) AS runs FROM insights_runs GROUP BY status'});
    ui.sql.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        run();
      }
    });
    ui.run = el('button', {type: 'button', id: 'run-query', class: 'primary'}, 'Run');
    ui.run.addEventListener('click', () => run());
    const csv = el('button', {type: 'button', id: 'csv-query'}, 'Download CSV');
    csv.addEventListener('click', downloadCsv);
    ui.status = el('div', {id: 'query-status', role: 'status', class: 'muted'});
    const samples = schema.samples.map((s, i) => {
      const b = el('button', {type: 'button', class: 'sample' + (i === 0 ? ' primary-sample' : ''), 'data-sample': s.id,
        title: s.sql}, s.name);
      b.addEventListener('click', () => {
        address(null);
        ui.saveName.value = s.name;
        run(s.sql);
      });
      return b;
    });
    const l = schema.limits;
    return panel('query', 'Query',
      el('p', {class: 'help'}, 'Read-only SQL (SQLite) over the views below. Ctrl+Enter runs it.'),
      ui.sql,
      el('div', {class: 'query-actions'}, ui.run, csv),
      el('div', {class: 'samples', id: 'samples'}, el('span', {class: 'muted'}, 'Examples:'), samples),
      ui.status,
      el('details', {id: 'views-help'},
        el('summary', {}, 'Views you can query'),
        el('ul', {class: 'views'}, schema.views.map((v) => el('li', {'data-view': v.name},
          el('code', {}, v.name), ': ', v.columns.join(', ')))),
        el('p', {class: 'help'}, `Limits: ${fmtInt(l.max_rows)} rows, ${fmtInt(Math.round(l.max_bytes / 1048576))} MiB of values, ` +
          `${l.timeout_ms / 1000} s per query, ${fmtInt(Math.round(l.max_sql_bytes / 1024))} KiB of SQL.`)));
  }

  function resultPanel() {
    ui.kind = el('select', {id: 'chart-kind', 'aria-label': 'Chart kind'},
      el('option', {value: 'bar'}, 'Bars'), el('option', {value: 'line'}, 'Line'));
    ui.kind.addEventListener('change', () => {
      state.kind = ui.kind.value;
      drawChart();
    });
    ui.chartBox = el('div', {class: 'chart-wrap', id: 'chart'});
    ui.tableBox = el('div', {id: 'result-rows'});
    ui.result = el('section', {class: 'panel', id: 'result', hidden: true},
      el('div', {class: 'result-head'}, el('h2', {}, 'Result'), ui.kind),
      ui.chartBox, ui.tableBox);
    let pending = 0;
    window.addEventListener('resize', () => {
      clearTimeout(pending);
      pending = setTimeout(drawChart, 150);
    });
    return ui.result;
  }

  function savedPanel() {
    ui.savedList = el('ul', {class: 'saved-list', id: 'saved-list'});
    ui.savedStatus = el('div', {id: 'saved-status', role: 'status', class: 'muted'});
    ui.saveId = el('input', {id: 'save-id', autocomplete: 'off', spellcheck: 'false', placeholder: 'runs-per-day',
      'aria-describedby': 'save-id-help'});
    ui.saveName = el('input', {id: 'save-name', autocomplete: 'off', placeholder: 'Runs per day'});
    const saveButton = el('button', {type: 'button', id: 'save-query'}, 'Save query');
    saveButton.addEventListener('click', save);
    return panel('saved', 'Saved queries',
      ui.savedList,
      el('div', {class: 'save-form'},
        el('label', {for: 'save-id'}, 'Id'), ui.saveId,
        el('p', {class: 'help', id: 'save-id-help'}, 'Lowercase letters, digits and dashes. An existing id is replaced.'),
        el('label', {for: 'save-name'}, 'Name'), ui.saveName,
        el('div', {}, saveButton)),
      ui.savedStatus);
  }

  async function start() {
    let schema;
    try {
      schema = await api('GET', '/api/v1/insights/schema');
    } catch (e) {
      const denied = e.status === 403;
      show(el('h1', {}, 'Insights'), denied
        ? el('p', {class: 'error', role: 'alert', id: 'insights-denied'},
          'Insights are for the server\'s admins only: the dev token\'s user and the logins in [server.auth] admins. ' +
          'Ask an admin to run the query for you.')
        : errorBox(e, 'Insights could not be loaded'));
      return;
    }
    show(el('h1', {}, 'Insights'),
      el('div', {class: 'insights-grid'},
        el('div', {class: 'insights-main'}, queryPanel(schema), resultPanel()),
        el('div', {class: 'insights-side'}, savedPanel())));
    await loadSaved();
    const wanted = new URLSearchParams(location.search).get('query');
    if (wanted) {
      const q = state.saved.find((x) => x.id === wanted);
      if (q) useSaved(q);
      else fill(ui.status, errorBox(`There is no saved query \`${wanted}\` (any more).`));
    }
  }
  start();
})();
