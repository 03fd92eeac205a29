// The sign-in page (`/login`: dev-token form; the code-host button when that method is on)
// and the sign-out page (`/logout`). The endpoints belong to the server's auth module
// (`GET /api/v1/auth/config`, `POST /auth/dev-token`, `POST /auth/logout`); these pages only
// call them.
'use strict';
(() => {
  const {el, show, errorBox} = svc;
  const page = document.body.dataset.page;
  const params = new URLSearchParams(location.search);
  // Only a path on this server, by the server's rule (auth::redirect::local_path): a single
  // leading '/' and no whitespace, and neither the value nor what it decodes to (up to three
  // times) starts with a second '/' or holds a backslash or a control character; then the
  // URL parser must agree it stays on this origin. Anything else is '/'.
  const next = (() => {
    const n = params.get('next') || '/';
    const plain = (s) => s.startsWith('/') && !s.startsWith('//') && !/[\\\u0000-\u001f\u007f-\u009f]/.test(s);
    if (n.length > 2048 || /\s/.test(n)) return '/';
    let text = n;
    for (let i = 0; ; i++) {
      if (!plain(text)) return '/';
      let d;
      try { d = decodeURIComponent(text); } catch (e) { return '/'; }
      if (d === text) break;
      if (i === 3) return '/';
      text = d;
    }
    try {
      const u = new URL(n, location.origin);
      return u.origin === location.origin ? n : '/';
    } catch (e) { return '/'; }
  })();

  function demoButton() {
    return el('button', {type: 'button', id: 'demo-enter', on: {click: () => {
      document.cookie = 'svc-demo=1; path=/; samesite=lax';
      location.assign('/');
    }}}, 'Explore demo data');
  }

  async function config() {
    try {
      const r = await fetch('/api/v1/auth/config', {credentials: 'same-origin', headers: {Accept: 'application/json'}});
      if (r.ok) return await r.json();
    } catch (e) { /* fall back to the dev-token form */ }
    return {dev_token_login_url: '/auth/dev-token', codehost_login_url: null};
  }

  async function wordsOf(r, fallback) {
    try {
      const b = await r.json();
      if (b && b.errors && b.errors[0]) return b.errors[0].detail || fallback;
    } catch (e) { /* keep the fallback */ }
    return fallback;
  }

  async function signIn() {
    const cfg = await config();
    const msg = el('div', {id: 'signin-msg'});
    if (params.get('error') === 'invalid_token') svc.fill(msg, errorBox('That dev token is not valid.'));
    const url = cfg.dev_token_login_url;
    const token = el('input', {type: 'password', id: 'dev-token', name: 'token', autocomplete: 'current-password',
      required: true, placeholder: 'svc_dev_…'});
    // A plain form (works without the script); the script posts JSON to show errors in place.
    const form = url ? el('form', {class: 'signin', method: 'post', action: url},
      el('input', {type: 'hidden', name: 'next', value: next}),
      el('div', {class: 'field'}, el('label', {for: 'dev-token'}, 'Dev token'), token,
        el('p', {class: 'help'}, 'The server prints it when it starts and keeps it in <state-dir>/dev-token.')),
      el('button', {type: 'submit', class: 'primary', id: 'signin-submit'}, 'Sign in')) : null;
    if (form) {
      form.addEventListener('submit', async (e) => {
        e.preventDefault();
        svc.fill(msg);
        if (!token.value.trim()) { svc.fill(msg, errorBox('Enter the dev token.')); return; }
        let r;
        try {
          r = await fetch(url, {method: 'POST', credentials: 'same-origin',
            headers: {'Content-Type': 'application/json', Accept: 'application/json'},
            body: JSON.stringify({token: token.value.trim()})});
        } catch (err) {
          svc.fill(msg, errorBox('The server could not be reached. Check the connection and try again.'));
          return;
        }
        if (r.ok) { location.assign(next); return; }
        svc.fill(msg, errorBox(r.status === 401 ? 'That dev token is not valid.'
          : await wordsOf(r, `Sign-in failed: the server answered ${r.status}.`)));
      });
    }
    const host = cfg.codehost_login_url;
    show(el('h1', {}, 'Sign in'),
      host ? el('p', {}, el('a', {class: 'button primary', id: 'codehost-login',
        href: host + (host.includes('?') ? '&' : '?') + 'next=' + encodeURIComponent(next)}, 'Sign in with the code host')) : null,
      form, msg,
      !form && !host ? el('p', {class: 'error'}, 'No sign-in method is available on this server.') : null,
      el('p', {class: 'muted'}, 'Just looking? The demo shows sample runs without signing in.'), demoButton());
  }

  function signOut() {
    const msg = el('div');
    const button = el('button', {type: 'button', class: 'primary', id: 'signout-submit', on: {click: async () => {
      try {
        const r = await fetch('/auth/logout', {method: 'POST', credentials: 'same-origin',
          headers: {Accept: 'application/json', 'Content-Type': 'application/json'}});
        if (!r.ok && r.status !== 401) throw new Error(await wordsOf(r, `The server answered ${r.status}.`));
        show(el('h1', {}, 'Signed out'), el('p', {}, 'You are signed out. ', el('a', {href: '/login'}, 'Sign in again')));
      } catch (err) {
        svc.fill(msg, errorBox(err, 'Sign-out failed'));
      }
    }}}, 'Sign out');
    show(el('h1', {}, 'Sign out'), el('p', {}, 'End this browser\u2019s session on the server.'), button, msg);
  }

  if (page === 'sign-out') signOut(); else signIn();
})();
