// Sign-in (dev token form; the code-host button when that method is on) and sign-out pages.
// The endpoints belong to the server's auth module; these pages only post to them.
'use strict';
(() => {
  const {el, show, errorBox} = svc;
  const page = document.body.dataset.page;
  const next = (() => {
    const n = new URLSearchParams(location.search).get('next') || '/';
    // Only same-site paths: never an open redirect.
    return n.startsWith('/') && !n.startsWith('//') ? n : '/';
  })();

  function demoButton() {
    return el('button', {type: 'button', id: 'demo-enter', on: {click: () => {
      document.cookie = 'svc-demo=1; path=/; samesite=lax';
      location.assign('/');
    }}}, 'Explore demo data');
  }

  async function methods() {
    try {
      const r = await fetch('/auth/methods', {credentials: 'same-origin', headers: {Accept: 'application/json'}});
      if (r.ok) return (await r.json()).methods || ['dev-token'];
    } catch (e) { /* fall through */ }
    return ['dev-token'];
  }

  async function signIn() {
    const msg = el('div', {id: 'signin-msg'});
    const token = el('input', {type: 'password', id: 'dev-token', name: 'token', autocomplete: 'current-password',
      required: true, placeholder: 'svc_dev_…'});
    const form = el('form', {class: 'signin', method: 'post', action: '/auth/dev-token'},
      el('input', {type: 'hidden', name: 'next', value: next}),
      el('div', {class: 'field'}, el('label', {for: 'dev-token'}, 'Dev token'), token,
        el('p', {class: 'help'}, 'The server prints it at start and keeps it in <state-dir>/dev-token.')),
      el('button', {type: 'submit', class: 'primary', id: 'signin-submit'}, 'Sign in'), msg);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      svc.fill(msg);
      if (!token.value.trim()) { svc.fill(msg, errorBox('Enter the dev token.')); return; }
      let r;
      try {
        r = await fetch('/auth/dev-token', {method: 'POST', credentials: 'same-origin',
          headers: {'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json'},
          body: new URLSearchParams({token: token.value.trim(), next}).toString(), redirect: 'manual'});
      } catch (err) {
        svc.fill(msg, errorBox('The server could not be reached. Check the connection and try again.'));
        return;
      }
      if (r.ok || r.type === 'opaqueredirect' || (r.status >= 300 && r.status < 400)) {
        location.assign(next);
        return;
      }
      let words = `Sign-in failed (${r.status}).`;
      try { const b = await r.json(); if (b.errors && b.errors[0]) words = b.errors[0].detail; } catch (err) { /* keep words */ }
      svc.fill(msg, errorBox(words));
    });
    const ms = await methods();
    show(el('h1', {}, 'Sign in'),
      ms.includes('codehost') ? el('p', {}, el('a', {class: 'button primary', id: 'codehost-login',
        href: '/auth/login?next=' + encodeURIComponent(next)}, 'Sign in with the code host')) : null,
      ms.includes('dev-token') ? form : null,
      el('p', {class: 'muted'}, 'Just looking? '), demoButton());
  }

  function signOut() {
    const msg = el('div');
    const button = el('button', {type: 'button', class: 'primary', id: 'signout-submit', on: {click: async () => {
      try {
        const r = await fetch('/auth/logout', {method: 'POST', credentials: 'same-origin', headers: {Accept: 'application/json'}});
        if (!r.ok && r.status !== 401) throw new Error(`The server answered ${r.status}.`);
        show(el('h1', {}, 'Signed out'), el('p', {}, 'You are signed out. ', el('a', {href: '/sign-in'}, 'Sign in again')));
      } catch (err) {
        svc.fill(msg, errorBox(err, 'Sign-out failed'));
      }
    }}}, 'Sign out');
    show(el('h1', {}, 'Sign out'), el('p', {}, 'End this browser\u2019s session on the server.'), button, msg);
  }

  if (page === 'sign-out') signOut(); else signIn();
})();
