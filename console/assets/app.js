// fencer console: one page, no framework, no build step (see console/doc.go).
//
// What the page shows is kept per lock with the log position it came from;
// a listing or an event replaces it only if it comes from a later position
// (a listing answered by a new leader that is behind what the page has
// seen, or an event replayed after a reconnect, never takes it back).
'use strict';

const $ = (id) => document.getElementById(id);

const state = {
  token: '', user: '', admin: false,
  prefix: '',
  rows: new Map(),      // lock name -> row (see rowFromListing)
  listPos: 0, listLeader: '', listMore: false,
  feedPos: 0,           // the last event position the feed delivered
  history: [], seen: new Set(),
  selected: '',
  sessions: { pos: -1, list: [], at: 0 },
  health: null, healthPos: -1,
  cluster: null,
  errors: {},
  feedCtl: null, feedGen: 0,
};

// ---- requests ----

async function post(path, body) {
  const res = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Fencer-Token': state.token },
    body: body === undefined ? '{}' : JSON.stringify(body),
  });
  let data = {};
  try { data = await res.json(); } catch (e) { /* empty body */ }
  return { status: res.status, ok: res.ok, data };
}

// ---- login ----

function showLogin(message) {
  stopFeed();
  state.token = '';
  $('app').hidden = true;
  $('whoami').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login-user').focus();
}

function loggedIn(data) {
  state.token = data.token; state.user = data.user; state.admin = data.admin;
  $('login').hidden = true;
  $('app').hidden = false;
  $('whoami').hidden = false;
  $('user').textContent = `${data.user}${data.admin ? ' (admin)' : ''}`;
  $('members-note').textContent = data.admin ? '' : 'The members and their health are shown to admin users (pattern *) only.';
  resetView();
  startFeed();
}

$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  $('login-error').textContent = '';
  const r = await post('/api/login', { user: $('login-user').value, password: $('login-password').value });
  $('login-password').value = '';
  if (r.ok) loggedIn(r.data); else $('login-error').textContent = r.data.error || `login failed (${r.status})`;
});

$('logout').addEventListener('click', async () => {
  await post('/api/logout');
  showLogin('Logged out.');
});

// ---- the feed ----

function stopFeed() {
  state.feedGen++;
  if (state.feedCtl) state.feedCtl.abort();
  state.feedCtl = null;
}

function startFeed() {
  stopFeed();
  runFeed(state.feedGen);
}

async function runFeed(gen) {
  while (gen === state.feedGen) {
    const ctl = new AbortController();
    state.feedCtl = ctl;
    // Resume the watch where the feed stopped, so the history has no gap
    // (the listing already shows the state past it).
    const from = state.feedPos > 0 ? state.feedPos : state.listPos;
    const url = `/api/feed?prefix=${encodeURIComponent(state.prefix)}${from > 0 ? `&from=${from}` : ''}`;
    try {
      const res = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'X-Fencer-Token': state.token }, signal: ctl.signal });
      if (res.status === 401) { showLogin('Your session ended: log in again.'); return; }
      if (!res.ok) throw new Error(`feed: ${res.status}`);
      setStatus('live', 'live');
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line && gen === state.feedGen) handle(JSON.parse(line));
        }
      }
    } catch (e) {
      if (gen !== state.feedGen) return;
    }
    if (gen !== state.feedGen) return;
    setStatus('reconnecting', 'connection lost: reconnecting (what is shown is kept, and replaced only by later positions)');
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function setStatus(kind, text) {
  document.body.dataset.feed = kind;
  $('status').textContent = text;
}

function handle(m) {
  switch (m.type) {
    case 'locks': onListing(m); break;
    case 'event': onEvent(m); break;
    case 'sessions':
      if (m.position >= state.sessions.pos) state.sessions = { pos: m.position, list: m.sessions || [], at: performance.now() };
      break;
    case 'health':
      // A later reading of the same leader, or any reading of another one
      // (whose Raft index may start lower: a cluster restored from a
      // snapshot counts its log from the start again).
      if (m.commit_index >= state.healthPos || !state.health || m.leader !== state.health.leader) {
        state.healthPos = m.commit_index; state.health = m;
      }
      break;
    case 'cluster': state.cluster = m; break;
    case 'error': state.errors[m.source] = m.error; break;
    case 'paced': state.errors.feed = m.error; state.pacedAt = performance.now(); break;
  }
  if (m.type !== 'error' && m.type !== 'event' && m.type !== 'paced') delete state.errors[m.type];
  if (state.errors.feed && performance.now() - (state.pacedAt || 0) > 3000) delete state.errors.feed;
  scheduleRender();
}

function rowFromListing(l, pos, now) {
  return {
    name: l.name, kind: l.kind, permits: l.permits, value: l.value, pos,
    holders: (l.holders || []).map((h) => ({
      owner: h.owner, token: h.token, mode: h.mode, session: h.session, client: h.client,
      deadline: h.remaining_ms < 0 ? null : now + h.remaining_ms,
    })),
    waiters: (l.waiters || []).map((w) => ({ owner: w.owner, mode: w.mode, waited: w.waited_ms })),
  };
}

function onListing(m) {
  const pos = m.position;
  if (pos < state.listPos) return; // an older reading (a leader behind the last one): keep what is shown
  state.listPos = pos; state.listLeader = m.leader; state.listMore = !!m.next;
  const now = performance.now();
  const listed = new Set();
  for (const l of m.locks || []) {
    listed.add(l.name);
    const row = state.rows.get(l.name);
    if (!row || row.pos <= pos) state.rows.set(l.name, rowFromListing(l, pos, now));
  }
  for (const [name, row] of state.rows) {
    if (listed.has(name) || row.pos > pos) continue;
    if (m.next && name > m.next) continue; // beyond this page: not known to be gone
    state.rows.delete(name);
  }
}

function onEvent(ev) {
  if (ev.position > state.feedPos) state.feedPos = ev.position;
  const id = `${ev.position}/${ev.key}/${ev.kind}/${ev.token}/${ev.owner}`;
  if (!state.seen.has(id)) {
    state.seen.add(id);
    state.history.push(ev);
    if (state.history.length > 500) state.seen.delete(histID(state.history.shift()));
  }
  if (!ev.key) return;
  let row = state.rows.get(ev.key);
  if (row && ev.position <= row.pos) return; // already shown from a later (or the same) position
  if (!row) row = { name: ev.key, kind: 'lock', permits: 0, value: '', holders: [], waiters: [], pos: 0 };
  const shared = row.kind === 'read-write' || row.kind === 'semaphore';
  switch (ev.kind) {
    case 'granted':
      row.holders = shared ? row.holders.concat([{ owner: ev.owner, token: ev.token, deadline: undefined }])
        : [{ owner: ev.owner, token: ev.token, deadline: undefined }];
      row.waiters = row.waiters.filter((w) => w.owner !== ev.owner);
      if (ev.value) row.value = ev.value;
      break;
    case 'released': case 'expired': case 'revoked':
      row.holders = row.holders.filter((h) => h.token !== ev.token || h.owner !== ev.owner);
      break;
    case 'reset':
      row.holders = ev.token ? [{ owner: ev.owner, token: ev.token, deadline: undefined }] : [];
      break;
    case 'proclaimed':
      row.value = ev.value;
      break;
  }
  row.pos = ev.position;
  if (row.holders.length === 0 && row.waiters.length === 0) state.rows.delete(ev.key);
  else state.rows.set(ev.key, row);
}

function histID(ev) { return `${ev.position}/${ev.key}/${ev.kind}/${ev.token}/${ev.owner}`; }

function resetView() {
  state.rows = new Map(); state.listPos = 0; state.feedPos = 0; state.listMore = false;
  state.history = []; state.seen = new Set(); state.selected = '';
  state.sessions = { pos: -1, list: [], at: 0 }; state.health = null; state.healthPos = -1; state.errors = {};
  scheduleRender();
}

// ---- rendering ----

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => { renderQueued = false; render(); });
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v; else if (k.startsWith('on')) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// clientText is the connection that took a grant, as the leader recorded
// it: unknown for a grant made under an earlier leader, pending for one
// seen on the feed before the next listing.
function clientText(h) {
  if (!h) return '';
  if (h.client === undefined) return '…';
  if (h.client === null) return 'unknown (an earlier leader)';
  return `${h.client.user || 'default'} from ${h.client.addr}${h.client.name ? ` (${h.client.name})` : ''}`;
}

function ttlText(deadline, now) {
  if (deadline === null) return 'no expiry';
  if (deadline === undefined) return '…';
  return `${(Math.max(0, deadline - now) / 1000).toFixed(1)} s`;
}

function render() {
  const now = performance.now();
  $('list-pos').textContent = state.listPos || '–';
  $('list-leader').textContent = state.listLeader || '–';
  $('feed-pos').textContent = state.feedPos || '–';
  $('locks-more').hidden = !state.listMore;
  const errs = Object.entries(state.errors).map(([s, e]) => `${s}: ${e}`);
  if (document.body.dataset.feed === 'live') $('status').textContent = errs.length ? `live; ${errs.join('; ')}` : 'live';
  renderLocks(now);
  renderHistory();
  renderElections(now);
  renderSessions(now);
  renderMembers();
  const c = state.cluster;
  $('cluster').textContent = c ? `cluster ${c.id}` : '';
}

// syncRows makes the table's body show rows, in order, each {key, sig,
// build, live}: a row whose sig is unchanged is kept (so a button under
// the pointer or the keyboard focus stays where it is while the page
// counts down), and only its live cells are updated (live(tr)); a row
// whose sig changed is rebuilt (build()).
function syncRows(table, rows) {
  const tb = $(table).tBodies[0];
  const old = new Map([...tb.rows].map((r) => [r.dataset.key, r]));
  let prev = null;
  for (const r of rows) {
    let tr = old.get(r.key);
    old.delete(r.key);
    if (!tr || tr.dataset.sig !== r.sig) {
      const nu = r.build();
      nu.dataset.key = r.key;
      nu.dataset.sig = r.sig;
      if (tr) {
        const hadFocus = tr.contains(document.activeElement);
        tr.replaceWith(nu);
        if (hadFocus) nu.focus();
      }
      tr = nu;
    }
    if (r.live) r.live(tr);
    const want = prev ? prev.nextSibling : tb.firstChild;
    if (want !== tr) tb.insertBefore(tr, want);
    prev = tr;
  }
  for (const tr of old.values()) tr.remove();
}

function setText(node, text) { if (node.textContent !== text) node.textContent = text; }

function renderLocks(now) {
  const names = [...state.rows.keys()].sort();
  syncRows('locks', names.map((name) => {
    const r = state.rows.get(name);
    const holders = r.holders.length ? r.holders : [null];
    const ttl = () => holders.map((h) => (h ? ttlText(h.deadline, now) : '')).join(', ');
    return {
      key: name,
      sig: JSON.stringify([r.kind, r.permits, r.pos, holders, r.waiters.map((w) => [w.owner, w.mode]), state.selected === name, state.admin]),
      live: (tr) => setText(tr.querySelector('td.ttl'), ttl()),
      build: () => el('tr', { 'data-lock': name, 'data-pos': r.pos, tabindex: 0, 'aria-selected': String(state.selected === name) },
        el('td', { class: 'mono' }, name),
        el('td', {}, r.kind + (r.permits ? ` (${r.permits})` : '')),
        el('td', { class: 'holder' }, holders.map((h) => (h ? h.owner + (h.mode ? ` (${h.mode})` : '') : 'free')).join(', ')),
        el('td', { class: 'client' }, holders.map((h) => clientText(h)).join(', ')),
        el('td', { class: 'num token' }, holders.map((h) => (h ? String(h.token) : '')).join(', ')),
        el('td', { class: 'num ttl' }, ttl()),
        el('td', { class: 'waiters' }, r.waiters.length
          ? el('ol', { class: 'waiters', 'aria-label': "leader's current queue" }, ...r.waiters.map((w) => el('li', {}, w.owner + (w.mode ? ` (${w.mode})` : ''))))
          : ''),
        el('td', { class: 'num' }, String(r.pos)),
        el('td', {}, state.admin ? el('button', { type: 'button', class: 'danger', 'data-action': 'revoke', onclick: () => confirmAction('revoke', name) }, 'Revoke') : '')),
    };
  }));
}

function renderHistory() {
  const sel = state.selected;
  setText($('history-of'), sel ? `of ${sel}` : '(all shown locks)');
  const evs = state.history.filter((e) => !sel || e.key === sel).slice(-100);
  const ol = $('history');
  const sig = `${sel}|${evs.length}|${evs.length ? histID(evs[evs.length - 1]) : ''}`;
  if (ol.dataset.sig === sig) return;
  ol.dataset.sig = sig;
  ol.replaceChildren(...evs.reverse().map((e) => el('li', { 'data-kind': e.kind, 'data-key': e.key }, e.key
    ? `@${e.position} ${e.kind} ${e.key} ${e.owner}${e.token ? ` token ${e.token}` : ''}${e.value ? ` value ${e.value}` : ''}`
    : `@${e.position} feed (re)started: the state at this position is the listing's`)));
}

function renderElections(now) {
  const rows = [...state.rows.values()].filter((r) => r.kind === 'lock' && r.holders.length && r.holders[0].session)
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  syncRows('elections', rows.map((r) => ({
    key: r.name,
    sig: JSON.stringify([r.holders[0].owner, r.holders[0].token, r.value]),
    live: (tr) => setText(tr.querySelector('td.ttl'), ttlText(r.holders[0].deadline, now)),
    build: () => el('tr', {},
      el('td', { class: 'mono' }, r.name), el('td', {}, r.holders[0].owner), el('td', { class: 'num' }, String(r.holders[0].token)),
      el('td', {}, r.value || ''), el('td', { class: 'num ttl' }, '')),
  })));
}

function renderSessions(now) {
  const s = state.sessions;
  syncRows('sessions', s.list.map((x) => ({
    key: String(x.id),
    sig: JSON.stringify([x.user, x.locks, x.names]),
    live: (tr) => setText(tr.querySelector('td.ttl'), ttlText(s.at + x.remaining_ms, now)),
    build: () => el('tr', {},
      el('td', { class: 'num' }, String(x.id)), el('td', {}, x.user),
      el('td', { class: 'num ttl' }, ''),
      el('td', { class: 'num' }, String(x.locks)), el('td', { class: 'mono' }, (x.names || []).join(', '))),
  })));
}

function renderMembers() {
  const h = state.health;
  if (!state.admin || !h) { syncRows('members', []); return; }
  const versions = {};
  for (const m of (state.cluster && state.cluster.members) || []) versions[m.id] = m.version;
  syncRows('members', (h.members || []).map((m) => {
    const isLeader = m.id === h.leader;
    // A member a new leader has not asked yet is healthy and not
    // reachable: it is not known to be stopped.
    const kind = isLeader || (m.reachable && m.healthy) ? 'healthy' : !m.reachable && m.healthy ? 'pending' : !m.reachable ? 'stopped' : 'unhealthy';
    const words = { healthy: 'healthy', pending: 'not asked yet (a new leader)', stopped: 'stopped or unreachable', unhealthy: 'unhealthy' }[kind];
    const canTransfer = !isLeader && kind === 'healthy' && m.role === 'follower';
    return {
      key: m.id,
      sig: JSON.stringify([isLeader, m.role, kind, m.version || versions[m.id], m.client_addr, canTransfer, state.admin]),
      live: (tr) => {
        setText(tr.querySelector('td.problem'), words + (m.problem && kind !== 'pending' ? `: ${m.problem}` : ''));
        setText(tr.querySelector('td.lag'), String(m.lag));
        setText(tr.querySelector('td.applied'), String(m.applied_index));
      },
      build: () => el('tr', { 'data-member': m.id, 'data-leader': String(isLeader), 'data-health': kind },
        el('td', { class: 'mono' }, m.id),
        el('td', {}, isLeader ? el('span', { class: 'leader' }, '★ leader') : m.role),
        el('td', { class: `problem ${kind}` }, ''),
        el('td', { class: 'num lag' }, ''),
        el('td', { class: 'num applied' }, ''),
        el('td', {}, m.version || versions[m.id] || '–'),
        el('td', { class: 'mono' }, m.client_addr || ''),
        el('td', {}, canTransfer ? el('button', { type: 'button', 'data-action': 'transfer', onclick: () => confirmAction('transfer', m.id) }, 'Make leader') : '')),
    };
  }));
}

setInterval(() => { if (!$('app').hidden) scheduleRender(); }, 250); // the countdowns

// ---- actions ----

function confirmAction(action, target) {
  const d = $('confirm');
  $('confirm-h').textContent = action === 'revoke' ? 'Revoke a lock' : 'Transfer leadership';
  $('confirm-text').textContent = action === 'revoke'
    ? `Revoke ${target}: its holder loses it now, and its fencing token no longer passes the store's check once another grant is made.`
    : `Transfer the leadership to ${target}: writes pause for an election.`;
  $('confirm-want').textContent = target;
  $('confirm-input').value = '';
  $('confirm-error').textContent = '';
  d.dataset.action = action; d.dataset.target = target;
  d.showModal();
  $('confirm-input').focus();
}

$('confirm-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const d = $('confirm');
  const r = await post(`/api/${d.dataset.action}`, { target: d.dataset.target, confirm: $('confirm-input').value });
  if (!r.ok) { $('confirm-error').textContent = r.data.error || `refused (${r.status})`; return; }
  d.close();
  $('status').textContent = `${d.dataset.action} ${d.dataset.target}: done`;
});
$('confirm-cancel').addEventListener('click', () => $('confirm').close());
$('confirm-input').addEventListener('input', () => { $('confirm-error').textContent = ''; });

// ---- keyboard ----

$('filter-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.prefix = $('prefix').value;
  resetView();
  startFeed();
});

document.addEventListener('keydown', (e) => {
  const t = e.target;
  const typing = t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement;
  if (e.key === '/' && !typing && !$('app').hidden) { e.preventDefault(); $('prefix').focus(); return; }
  if (!(t instanceof HTMLTableRowElement)) return;
  if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    e.preventDefault();
    const sib = e.key === 'ArrowDown' ? t.nextElementSibling : t.previousElementSibling;
    if (sib) sib.focus();
  } else if ((e.key === 'Enter' || e.key === ' ') && t.dataset.lock !== undefined) {
    e.preventDefault();
    state.selected = state.selected === t.dataset.lock ? '' : t.dataset.lock;
    scheduleRender();
  } else if (e.key === 'Escape') {
    state.selected = '';
    scheduleRender();
  }
});

// ---- start ----

(async () => {
  const r = await post('/api/session');
  if (r.ok) loggedIn(r.data); else showLogin();
})();
