// shardcron's dashboard: plain browser JavaScript, no build step. It polls the console's HTTP API
// (DESIGN.md "Console contract") every POLL_MS and renders jobs, the selected job's shard map and
// executions, and the instances. Text goes in with textContent only: nothing from the API is HTML.
'use strict';

const POLL_MS = 1500;
const $ = (id) => document.getElementById(id);

const state = { role: undefined, selected: new URLSearchParams(location.search).get('job') || undefined, editing: false, timer: undefined };

/** Calls the API with the session cookie; writes carry the CSRF header the console asks for. */
async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') headers['X-Shardcron-Csrf'] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) {
    showLogin();
    throw new ApiError(401, { code: 'SHARDCRON_UNAUTHORIZED', message: 'log in' });
  }
  const text = await res.text();
  const json = text ? JSON.parse(text) : undefined;
  if (!res.ok) throw new ApiError(res.status, (json && json.error) || { message: res.statusText });
  return json;
}

class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== false) node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child);
  return node;
}

function when(ms) {
  if (ms === null || ms === undefined) return '-';
  const delta = ms - Date.now();
  const abs = Math.abs(delta);
  const rel = abs < 1000 ? 'now' : abs < 60_000 ? `${Math.round(abs / 1000)} s` : abs < 3_600_000 ? `${Math.round(abs / 60_000)} min` : `${Math.round(abs / 3_600_000)} h`;
  const text = rel === 'now' ? 'now' : delta > 0 ? `in ${rel}` : `${rel} ago`;
  return el('time', { datetime: new Date(ms).toISOString(), title: new Date(ms).toLocaleString(), text });
}

function badge(status) {
  return el('span', { class: `badge s-${String(status).toLowerCase()}`, text: status });
}

function notice(text, kind = 'info') {
  const box = $('notice');
  box.textContent = text;
  box.className = `notice ${kind}`;
  if (text) setTimeout(() => box.textContent === text && (box.textContent = ''), 6000);
}

function showLogin() {
  $('app').hidden = true;
  $('login').hidden = false;
  $('logout').hidden = true;
  clearTimeout(state.timer);
}

async function start() {
  try {
    const session = await api('GET', '/api/session');
    state.role = session.role;
  } catch (err) {
    if (err.status === 401) return;
    notice(`console unreachable: ${err.message}`, 'error');
    state.timer = setTimeout(start, POLL_MS);
    return;
  }
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = state.role === 'open';
  $('role').textContent = state.role === 'read' ? 'read-only' : state.role === 'admin' ? 'admin' : '';
  document.body.classList.toggle('read-only', state.role === 'read');
  poll();
}

async function poll() {
  clearTimeout(state.timer);
  try {
    await Promise.all([renderCluster(), renderJobs(), renderInstances(), state.selected ? renderJob(state.selected) : undefined]);
  } catch (err) {
    if (err.status === 401) return;
    notice(err.message, 'error');
  }
  state.timer = setTimeout(poll, POLL_MS);
}

async function renderCluster() {
  const ready = await fetch('/readyz').then((r) => r.json()).catch(() => ({}));
  const parts = [['ZooKeeper', ready.zookeeper], ['Redis', ready.redis], ['leader', ready.leader]];
  $('cluster').replaceChildren(...parts.map(([name, value]) => el('span', { class: `dot ${value === 'ok' || (typeof value === 'string' && value !== 'none' && value !== 'down') ? 'up' : 'down'}`, title: `${name}: ${value ?? 'unknown'}`, text: `${name}: ${value ?? '?'}` })));
}

async function renderJobs() {
  const { jobs } = await api('GET', '/api/jobs');
  $('jobs-count').textContent = `(${jobs.length})`;
  const rows = jobs.map((job) =>
    el('tr', { class: job.name === state.selected ? 'selected' : '', 'data-job': job.name, onclick: () => select(job.name) },
      el('td', {}, el('a', { href: `?job=${encodeURIComponent(job.name)}`, text: job.name, onclick: (e) => { e.preventDefault(); select(job.name); } })),
      el('td', { text: job.type }),
      el('td', {}, badge(job.status)),
      el('td', {}, el('code', { text: job.cron || '(trigger only)' }), job.timeZone && job.timeZone !== 'UTC' ? el('span', { class: 'muted', text: ` ${job.timeZone}` }) : undefined),
      el('td', { text: String(job.shardingTotalCount) }),
      el('td', { text: String(job.instances) }),
      el('td', {}, when(job.nextFireTime)),
      el('td', {}, when(job.lastFireTime)),
      el('td', {}, job.lastExecution ? badge(job.lastExecution.status) : '-', job.lastExecution && job.lastExecution.error ? el('span', { class: 'error', text: ` ${job.lastExecution.error.message}` }) : undefined),
    ),
  );
  $('jobs').tBodies[0].replaceChildren(...rows);
}

function select(name) {
  state.selected = name;
  state.editing = false;
  $('config-form').hidden = true;
  history.replaceState(null, '', `?job=${encodeURIComponent(name)}`);
  poll();
}

async function renderJob(name) {
  let job;
  try {
    job = await api('GET', `/api/jobs/${encodeURIComponent(name)}`);
  } catch (err) {
    if (err.status === 404) {
      $('job').hidden = true;
      state.selected = undefined;
      return;
    }
    throw err;
  }
  $('job').hidden = false;
  $('job-name').textContent = job.name;
  $('job-status').replaceWith(Object.assign(badge(job.status), { id: 'job-status' }));
  $('job-toggle').textContent = job.config.disabled ? 'Enable job' : 'Disable job';
  $('job-toggle').dataset.action = job.config.disabled ? 'enable' : 'disable';
  $('job-facts').textContent = `${job.config.type} · ${job.config.cron ? `cron ${job.config.cron} (${job.config.timeZone})` : 'trigger only'} · ${job.config.shardingTotalCount} items · failover ${job.config.failover ? 'on' : 'off'} · misfire ${job.config.misfire ? 'on' : 'off'} · next ${job.nextFireTime ? new Date(job.nextFireTime).toLocaleString() : '-'}`;
  if (!state.editing) $('config-text').value = JSON.stringify(job.config, null, 2);
  $('shards').replaceChildren(...job.items.map((item) =>
    el('div', { class: `shard s-${item.status.toLowerCase()}${item.failover ? ' failover' : ''}`, 'data-item': item.item, 'data-status': item.status, 'data-instance': item.instanceId || '' },
      el('div', { class: 'shard-head' }, el('strong', { text: `#${item.item}` }), item.parameter ? el('span', { class: 'muted', text: ` ${item.parameter}` }) : undefined),
      el('div', { class: 'shard-status', text: item.status }),
      el('div', { class: 'shard-instance', text: item.instanceId || 'unassigned' }),
      item.failover ? el('div', { class: 'shard-failover', text: 'failed over' }) : undefined,
      el('button', { type: 'button', class: 'admin-only small', onclick: () => act(`/api/jobs/${encodeURIComponent(name)}/sharding/${item.item}/${item.status === 'DISABLED' ? 'enable' : 'disable'}`, `item ${item.item} ${item.status === 'DISABLED' ? 'enabled' : 'disabled'}`), text: item.status === 'DISABLED' ? 'Enable' : 'Disable' }),
    ),
  ));
  const { executions } = await api('GET', `/api/jobs/${encodeURIComponent(name)}/executions?limit=50`);
  $('executions').tBodies[0].replaceChildren(...executions.map((x) =>
    el('tr', { class: x.status === 'completed' ? '' : `row-${x.status}` },
      el('td', {}, when(x.finishedAt)),
      el('td', { text: new Date(x.fireTime).toLocaleTimeString() }),
      el('td', { text: String(x.item) }),
      el('td', { text: x.source }),
      el('td', { text: x.instanceId }),
      el('td', {}, badge(x.status)),
      el('td', { text: String(x.attempts) }),
      el('td', { text: `${x.durationMs} ms` }),
      el('td', { class: 'error', text: x.error ? `${x.error.name}: ${x.error.message}` : (x.reason || '') }),
    ),
  ));
}

async function renderInstances() {
  const { instances } = await api('GET', '/api/instances');
  $('instances-count').textContent = `(${instances.length})`;
  $('instances').tBodies[0].replaceChildren(...instances.map((i) =>
    el('tr', { 'data-instance': i.instanceId },
      el('td', { text: i.instanceId }), el('td', { text: i.hostname }), el('td', { text: i.ip }), el('td', { text: String(i.pid) }),
      el('td', {}, badge(i.state)), el('td', { text: i.jobs.join(', ') }),
    ),
  ));
}

async function act(path, done, body) {
  try {
    const result = await api('POST', path, body);
    notice(typeof done === 'function' ? done(result) : done);
  } catch (err) {
    notice(`${err.message}`, 'error');
  }
  poll();
}

$('job-trigger').addEventListener('click', () => act(`/api/jobs/${encodeURIComponent(state.selected)}/trigger`, (r) => `triggered (request ${r.requestId})`));
$('job-toggle').addEventListener('click', (e) => act(`/api/jobs/${encodeURIComponent(state.selected)}/${e.target.dataset.action}`, `job ${e.target.dataset.action}d`));
$('job-edit').addEventListener('click', () => {
  state.editing = true;
  // What the editor showed when editing began: only the fields changed from it are sent, so a
  // change another operator made meanwhile (a disable from the CLI) is not undone by a stale copy.
  state.editBase = JSON.parse($('config-text').value || '{}');
  $('config-form').hidden = false;
  $('config-errors').replaceChildren();
});
$('config-cancel').addEventListener('click', () => {
  state.editing = false;
  $('config-form').hidden = true;
});
$('config-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const list = $('config-errors');
  list.replaceChildren();
  let edited;
  try {
    edited = JSON.parse($('config-text').value);
  } catch (err) {
    list.append(el('li', { text: `not valid JSON: ${err.message}` }));
    return;
  }
  // A partial config (the API merges it over the stored one): the fields changed in the editor.
  const base = state.editBase || {};
  const body = edited !== null && typeof edited === 'object' && !Array.isArray(edited)
    ? Object.fromEntries(Object.entries(edited).filter(([key, value]) => JSON.stringify(value) !== JSON.stringify(base[key])))
    : edited;
  if (body && typeof body === 'object' && !Array.isArray(body) && Object.keys(body).length === 0) {
    state.editing = false;
    $('config-form').hidden = true;
    notice('nothing changed');
    return;
  }
  try {
    await api('PUT', `/api/jobs/${encodeURIComponent(state.selected)}/config`, body);
    state.editing = false;
    $('config-form').hidden = true;
    notice('config saved');
    poll();
  } catch (err) {
    const fields = (err.error && err.error.details && err.error.details.fields) || [];
    if (fields.length === 0) list.append(el('li', { text: err.message }));
    for (const f of fields) list.append(el('li', { 'data-field': f.field, text: `${f.field}: ${f.message}` }));
  }
});
$('login-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  $('login-error').textContent = '';
  const res = await fetch('/login', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Shardcron-Csrf': '1' }, credentials: 'same-origin', body: JSON.stringify({ token: $('login-token').value }) });
  if (!res.ok) {
    $('login-error').textContent = res.status === 401 ? 'unknown token' : `login failed (HTTP ${res.status})`;
    return;
  }
  $('login-token').value = '';
  // Sent here from Bull Board (or another console page) to log in: back there.
  const next = new URLSearchParams(location.search).get('next');
  if (next && next.startsWith('/') && !next.startsWith('//')) {
    location.assign(next);
    return;
  }
  start();
});
$('logout').addEventListener('click', async () => {
  await fetch('/logout', { method: 'POST', headers: { 'X-Shardcron-Csrf': '1' }, credentials: 'same-origin' });
  showLogin();
});

start();
