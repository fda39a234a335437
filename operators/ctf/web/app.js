/*
 * app.js - the CTF participant page's behaviour (served at /app.js).
 *
 * Signs a team in with its token (kept in localStorage until "Sign out"),
 * asks GET /api/v1/whoami who that is (an admin token picks a team to act
 * for), lists the challenges and the team's instances, and offers per
 * instance state the matching action: Create server, Extend, Stop, Retry.
 *
 * State comes from the API and then from the team's event stream
 * (GET /api/v1/teams/{team}/events), read with fetch() because EventSource
 * cannot send an Authorization header. The stream is the source of truth:
 * every connection starts with a snapshot, and it is reopened with backoff
 * whenever it ends. The answer to a write (PUT, DELETE, renew) is shown at
 * once only if the stream has said nothing newer about that challenge since
 * the write was sent, so a late answer never undoes a newer event.
 *
 * Signed in with the admin token, the page has a second mode, the
 * organizer's console: every team's instances from the admin stream
 * (GET /api/v1/admin/events), filtered and sorted, with stop and extend
 * per instance and stop-all per team or challenge, each confirmed. A team
 * token never gets it: asked for it (the stored choice), the page shows the
 * team's own instances and says why.
 *
 * Server strings are only ever put in the page as text (textContent), never
 * as HTML. See docs/api.md for the API.
 */
(() => {
  'use strict';

  const TOKEN_KEY = 'kopc-ctf-token';
  const TEAM_KEY = 'kopc-ctf-team'; // the team an admin token acts for
  const TEAM_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
  const STALE_MS = 60000; // no byte (not even a heartbeat) for this long: reconnect
  const BACKOFF_MIN_MS = 1000;
  const BACKOFF_MAX_MS = 30000;
  const WARN_SECONDS = 300; // countdown turns to a warning, announced once

  // The start of an instance's message once the organizers updated it.
  const UPDATED_NOTICE = 'updated to the new version';

  // A host the gateway mode's commands are built from. It is put into shell
  // and Python text, so only a DNS name (lower-case letters, digits, '-' and
  // '.') is used; anything else is shown as plain text, no command made of it.
  const DNS_NAME_RE = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/;

  const STATE_LABELS = {
    Stopped: 'Not running',
    Starting: 'Starting…',
    Running: 'Running',
    Error: 'Error',
    Stopping: 'Stopping…',
  };

  const state = {
    token: null,
    team: null,
    admin: false,
    session: 0, // bumped by sign-out and team switches: stale async work stops
    challenges: [], // Challenge objects, sorted by name
    instances: new Map(), // challenge -> Instance (absent: Stopped)
    deadlines: new Map(), // challenge -> local time (ms) the instance expires
    warned: new Set(), // challenges whose "minutes left" was announced
    streamSeen: new Map(), // challenge -> number of stream updates applied
    busy: new Map(), // challenge -> the action in flight
    retrying: new Set(), // challenges to create again once stopped (Retry)
    refreshing: false, // the challenge list is being fetched again
    stream: null, // AbortController of the open event stream
    backoff: BACKOFF_MIN_MS,
    retryMs: 0, // the stream's "retry:" field
  };

  const $ = (id) => document.getElementById(id);

  /* ---------- small DOM helpers ---------- */

  // el('p', {class: 'x', 'data-a': 'b'}, child...): an element; children are
  // nodes or strings (strings become text nodes, never HTML).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v === null || v === undefined) continue;
      node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      node.append(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return node;
  }

  function show(id, visible) {
    $(id).hidden = !visible;
  }

  // announce(text): read out by screen readers (polite live region).
  function announce(text) {
    const region = $('announce');
    region.textContent = '';
    window.setTimeout(() => { region.textContent = text; }, 50);
  }

  /* ---------- errors ---------- */

  class ApiError extends Error {
    constructor(status, code, message, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter;
    }
  }

  function showError(err) {
    let text = err.message || 'Something went wrong.';
    if (err.code) text += ` (${err.code})`;
    if (err.retryAfter) text += ` Try again in ${err.retryAfter} s.`;
    const dismiss = el('button', { type: 'button', class: 'button subtle' }, 'Dismiss');
    dismiss.addEventListener('click', clearError);
    $('error').replaceChildren(el('div', { class: 'notice error' }, el('p', {}, text), dismiss));
  }

  function clearError() {
    $('error').replaceChildren();
  }

  /* ---------- the API ---------- */

  function teamPath(rest) {
    return `/teams/${encodeURIComponent(state.team)}${rest}`;
  }

  function authHeaders(extra) {
    return Object.assign({ Authorization: `Bearer ${state.token}` }, extra || {});
  }

  // errorFrom(response): the ApiError a failed response carries.
  async function errorFrom(res) {
    let body = null;
    try {
      body = JSON.parse(await res.text());
    } catch (_) {
      body = null;
    }
    const e = (body && body.error) || {};
    return new ApiError(res.status, e.code || `HTTP ${res.status}`,
      e.message || res.statusText || 'The request failed.', res.headers.get('Retry-After'));
  }

  // api(method, path): the parsed JSON answer of /api/v1<path>, or an ApiError.
  async function api(method, path) {
    let res;
    try {
      res = await fetch(`/api/v1${path}`, { method, headers: authHeaders(), cache: 'no-store' });
    } catch (_) {
      throw new ApiError(0, 'NetworkError', 'Cannot reach the server; check your connection.');
    }
    if (!res.ok) throw await errorFrom(res);
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }

  // failed(err): what every caller does with an API error. A token nobody
  // owns any more ends the session.
  function failed(err) {
    if (err.status === 401) {
      signOut('Your token is no longer accepted. Sign in again.');
      return;
    }
    showError(err);
  }

  /* ---------- signing in and out ---------- */

  function showSignIn(message) {
    show('session', false);
    show('board', false);
    show('pick-team', false);
    show('sign-in', true);
    if (message) showError({ message });
    $('token').focus();
  }

  function showPickTeam() {
    show('board', false);
    show('sign-in', false);
    show('session', true);
    $('team-name').textContent = '(none yet)';
    show('switch-team', false);
    show('open-console', false);
    show('pick-team', true);
    $('team-input').focus();
  }

  async function signIn(token, fromStorage) {
    const session = ++state.session;
    state.token = token;
    let who;
    try {
      who = await api('GET', '/whoami');
    } catch (err) {
      if (session !== state.session) return;
      if (err.status === 401) {
        localStorage.removeItem(TOKEN_KEY);
        showSignIn('That token was not accepted. Check it and try again.');
      } else if (fromStorage) {
        showError(err); // the server is away: try again soon, still signed in
        window.setTimeout(() => { if (session === state.session) signIn(token, true); }, 5000);
      } else {
        showError(err);
      }
      return;
    }
    if (session !== state.session) return;
    localStorage.setItem(TOKEN_KEY, token);
    $('token').value = '';
    clearError();
    state.admin = who.admin === true;
    if (!state.admin) {
      // A team token asked for the console (the stored choice says so): the
      // team's own page instead, and why (the API refuses it the admin routes).
      const asked = localStorage.getItem(TEAM_KEY) === CONSOLE;
      localStorage.removeItem(TEAM_KEY);
      openBoard(who.team);
      if (asked) {
        showError({ message: `The organizer's console needs the admin token; this is team ${who.team}'s ` +
          'token, so this page shows that team\'s instances only.' });
      }
      return;
    }
    const team = localStorage.getItem(TEAM_KEY);
    if (team === CONSOLE) openConsole();
    else if (team && TEAM_RE.test(team)) openBoard(team);
    else showPickTeam();
  }

  // reset(): forget the team's state and close the stream.
  function reset() {
    state.session++;
    if (state.stream) state.stream.abort();
    state.stream = null;
    state.team = null;
    state.challenges = [];
    state.instances.clear();
    state.deadlines.clear();
    state.warned.clear();
    state.streamSeen.clear();
    state.busy.clear();
    state.retrying.clear();
    state.backoff = BACKOFF_MIN_MS;
    $('challenges').replaceChildren();
    closeConsole();
  }

  function signOut(message) {
    reset();
    state.token = null;
    state.admin = false;
    localStorage.removeItem(TOKEN_KEY);
    localStorage.removeItem(TEAM_KEY);
    clearError();
    showSignIn(message);
    if (!message) announce('Signed out.');
  }

  function switchTeam() {
    reset();
    localStorage.removeItem(TEAM_KEY);
    clearError();
    showPickTeam();
  }

  /* ---------- the board ---------- */

  async function openBoard(team) {
    state.team = team;
    if (state.admin) localStorage.setItem(TEAM_KEY, team);
    const session = state.session;
    show('sign-in', false);
    show('pick-team', false);
    show('session', true);
    show('switch-team', state.admin);
    show('open-console', state.admin);
    $('team-name').textContent = team;
    show('board', true);
    show('loading', true);
    show('empty', false);
    setLive('connecting', 'Connecting…');
    await loadBoard(session);
  }

  // loadBoard: the challenges and the team's instances, then the stream.
  async function loadBoard(session) {
    let challenges;
    let instances;
    try {
      [challenges, instances] = await Promise.all([
        api('GET', '/challenges'),
        api('GET', teamPath('/instances')),
      ]);
    } catch (err) {
      if (session !== state.session) return;
      failed(err);
      if (err.status !== 401 && err.status !== 403) {
        window.setTimeout(() => { if (session === state.session) loadBoard(session); }, 5000);
      }
      return;
    }
    if (session !== state.session) return;
    state.challenges = challenges.challenges || [];
    replaceInstances(instances.instances || [], false);
    show('loading', false);
    show('empty', state.challenges.length === 0);
    renderAll();
    openStream(session);
  }

  function stateOf(name) {
    const inst = state.instances.get(name);
    return inst ? inst.state : 'Stopped';
  }

  function titleOf(name) {
    const c = state.challenges.find((x) => x.name === name);
    return (c && c.title) || name;
  }

  function setDeadline(inst) {
    const name = inst.challenge;
    if (typeof inst.secondsLeft === 'number') {
      state.deadlines.set(name, Date.now() + inst.secondsLeft * 1000);
    } else if (inst.expiresAt) {
      state.deadlines.set(name, Date.parse(inst.expiresAt));
    } else {
      state.deadlines.delete(name);
    }
    if (!inst.secondsLeft || inst.secondsLeft > WARN_SECONDS) state.warned.delete(name);
  }

  // applyInstance(inst, fromStream): take in one Instance (state "Stopped":
  // it is gone) and show it.
  function applyInstance(inst, fromStream) {
    const name = inst.challenge;
    if (typeof name !== 'string') return;
    const before = stateOf(name);
    if (fromStream) state.streamSeen.set(name, (state.streamSeen.get(name) || 0) + 1);
    if (inst.state === 'Stopped') {
      state.instances.delete(name);
      state.deadlines.delete(name);
    } else {
      state.instances.set(name, inst);
      setDeadline(inst);
    }
    const after = stateOf(name);
    // Changes are read out, but not what the page finds when it loads.
    if (before !== after && cardOf(name)) announce(`${titleOf(name)}: ${describeState(name)}`);
    if (fromStream && before === 'Starting' && after === 'Running' && updatedNotice(inst) && cardOf(name)) {
      announce(`${titleOf(name)}: updated to the new version.`);
    }
    if (after !== 'Stopped' && !state.challenges.some((c) => c.name === name)) refreshChallenges();
    renderCard(name);
    maybeRecreate(name);
  }

  // refreshChallenges: the list again, when the stream names a challenge
  // the page does not know yet (a definition added since it loaded).
  async function refreshChallenges() {
    if (state.refreshing) return;
    state.refreshing = true;
    const session = state.session;
    try {
      const answer = await api('GET', '/challenges');
      if (session !== state.session) return;
      state.challenges = answer.challenges || [];
      show('empty', state.challenges.length === 0);
      renderAll();
    } catch (err) {
      if (session === state.session) failed(err);
    } finally {
      state.refreshing = false;
    }
  }

  // replaceInstances(list, fromStream): the whole of the team's instances
  // (a snapshot): those not in the list are stopped.
  function replaceInstances(list, fromStream) {
    const names = new Set([...state.instances.keys(), ...list.map((i) => i.challenge)]);
    const byName = new Map(list.map((i) => [i.challenge, i]));
    for (const name of names) {
      applyInstance(byName.get(name) || { challenge: name, state: 'Stopped' }, fromStream);
    }
  }

  function describeState(name) {
    if (state.retrying.has(name)) return 'restarting…';
    const inst = state.instances.get(name);
    const s = stateOf(name);
    if (s === 'Error' && inst && inst.reason) return `error, ${inst.reason}`;
    return STATE_LABELS[s] || s;
  }

  /* ---------- actions ---------- */

  const ACTIONS = {
    create: { method: 'PUT', path: '', done: 'Server requested.' },
    extend: { method: 'POST', path: '/renew', done: 'Time extended.' },
    stop: { method: 'DELETE', path: '', done: 'Stopping the server.' },
  };

  // act(name, kind): one write for one challenge. Its answer is shown unless
  // the stream has spoken about that challenge meanwhile (it is newer).
  async function act(name, kind) {
    if (state.busy.has(name)) return false;
    const a = ACTIONS[kind];
    const session = state.session;
    const seen = state.streamSeen.get(name) || 0;
    state.busy.set(name, kind);
    renderCard(name);
    let ok = true;
    try {
      const path = teamPath(`/instances/${encodeURIComponent(name)}${a.path}`);
      const inst = await api(a.method, path);
      if (session !== state.session) return false;
      clearError();
      if (inst && (state.streamSeen.get(name) || 0) === seen) applyInstance(inst, false);
      if (kind === 'extend') announce(`${titleOf(name)}: ${a.done}`);
    } catch (err) {
      if (session !== state.session) return false;
      ok = false;
      if (kind === 'stop' && err.status === 404) {
        ok = true; // already gone
        if ((state.streamSeen.get(name) || 0) === seen) applyInstance({ challenge: name, state: 'Stopped' }, false);
      } else {
        failed(err);
      }
    } finally {
      if (session === state.session) {
        state.busy.delete(name);
        renderCard(name);
      }
    }
    return ok;
  }

  // Retry of an instance in Error: stop it (DELETE), and once it is gone
  // (Stopped, as the stream or a 404 tells) create it again (PUT). The
  // Challenge is made anew, so the operator starts from scratch rather than
  // from whatever state the failed one was in.
  async function retry(name) {
    if (state.busy.has(name)) return;
    state.retrying.add(name);
    renderCard(name);
    announce(`${titleOf(name)}: restarting…`);
    const ok = await act(name, 'stop');
    if (!ok) state.retrying.delete(name);
    renderCard(name);
    maybeRecreate(name);
  }

  function maybeRecreate(name) {
    if (!state.retrying.has(name) || state.busy.has(name) || stateOf(name) !== 'Stopped') return;
    state.retrying.delete(name);
    act(name, 'create');
  }

  async function copyText(text, button) {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
      announce('Copied to the clipboard.');
    } catch (_) {
      // No clipboard (e.g. a page not served over https): select the text instead.
      const code = button.parentElement.querySelector('code');
      const range = document.createRange();
      range.selectNodeContents(code);
      const sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      announce('Selected: press Ctrl+C to copy.');
    }
    window.setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  }

  function onBoardClick(event) {
    const button = event.target.closest('button[data-action]');
    if (!button || button.getAttribute('aria-disabled') === 'true' || button.disabled) return;
    const name = button.closest('[data-challenge]').dataset.challenge;
    const kind = button.dataset.action;
    if (kind === 'copy') copyText(button.dataset.copy, button);
    else if (kind === 'retry') retry(name);
    else act(name, kind);
  }

  /* ---------- rendering ---------- */

  function renderAll() {
    const list = $('challenges');
    const names = new Set(state.challenges.map((c) => c.name));
    for (const card of [...list.children]) {
      if (!names.has(card.dataset.challenge)) card.remove();
    }
    state.challenges.forEach((c, i) => {
      let card = cardOf(c.name);
      if (!card) card = makeCard(c);
      if (list.children[i] !== card) list.insertBefore(card, list.children[i] || null);
      renderCard(c.name);
    });
  }

  function cardOf(name) {
    for (const card of $('challenges').children) {
      if (card.dataset.challenge === name) return card;
    }
    return null;
  }

  // makeCard(challenge): the card's fixed part (title, category, points,
  // description) and an empty instance part that renderCard fills.
  function makeCard(c) {
    const id = `c-${c.name}`;
    const meta = el('p', { class: 'meta' },
      el('span', { class: 'category' }, c.category || 'misc'),
      el('span', { class: 'points' }, `${Number(c.points) || 0} points`));
    const head = el('div', { class: 'card-head' },
      el('h3', { id: `${id}-title`, tabindex: '-1' }, c.title || c.name), meta);
    const body = el('article', { 'aria-labelledby': `${id}-title` }, head,
      c.description ? el('p', { class: 'description' }, c.description) : null,
      el('div', { class: 'instance' }));
    return el('li', { class: 'card', 'data-challenge': c.name, 'data-state': stateOf(c.name) }, body);
  }

  // renderCard(name): the instance part of a card, rebuilt only when what it
  // shows changed; keyboard focus stays on the same action.
  function renderCard(name) {
    const card = cardOf(name);
    if (!card) return;
    const inst = state.instances.get(name) || null;
    const s = stateOf(name);
    const sig = JSON.stringify([inst, state.busy.get(name) || '', state.retrying.has(name)]);
    if (card.dataset.sig === sig) return;
    card.dataset.sig = sig;
    card.dataset.state = s;
    if (inst && inst.expiresAt) card.dataset.expiresAt = inst.expiresAt;
    else delete card.dataset.expiresAt;
    const focused = card.contains(document.activeElement) ? document.activeElement.dataset.action : undefined;
    card.querySelector('.instance').replaceChildren(...instanceView(name, inst, s));
    restoreFocus(card, focused);
    tickCard(card);
  }

  function restoreFocus(card, action) {
    if (action === undefined) return;
    const button = action && card.querySelector(`button[data-action="${action}"]`);
    if (button && !button.disabled) button.focus();
    else card.querySelector('h3').focus();
  }

  function instanceView(name, inst, s) {
    const retrying = state.retrying.has(name);
    const nodes = [stateLine(s, retrying, inst)];
    if (s === 'Error' && inst) nodes.push(errorBox(inst));
    if (s === 'Running' && inst) nodes.push(endpointList(inst.endpoints || []), expiryLine(inst));
    if (s === 'Running' && updatedNotice(inst)) nodes.push(updatedNotice(inst));
    nodes.push(actionRow(name, s, inst, retrying));
    return nodes;
  }

  function stateLine(s, retrying, inst) {
    const busy = retrying || s === 'Starting' || s === 'Stopping';
    const label = retrying ? 'Restarting…' : STATE_LABELS[s];
    const line = el('p', { class: 'state' },
      el('span', { class: `badge state-${s.toLowerCase()}${busy ? ' busy' : ''}` }, label));
    if (s === 'Starting' && inst && inst.message) line.append(' ', el('span', { class: 'muted' }, inst.message));
    return line;
  }

  // updatedNotice(inst): the organizers replaced a running instance with a
  // new version of the challenge (its message says so, see docs/api.md):
  // same address, flag and time left, but whatever the team did in it is gone.
  function updatedNotice(inst) {
    if (!inst || typeof inst.message !== 'string' || !inst.message.startsWith(UPDATED_NOTICE)) return null;
    return el('p', { class: 'notice', 'data-notice': 'updated' },
      'Updated to the new version of this challenge: same address, flag and time left; ',
      'anything stored in the old instance is gone.');
  }

  function errorBox(inst) {
    return el('div', { class: 'problem' },
      el('p', {}, el('strong', {}, inst.reason || 'Error')),
      inst.message ? el('p', {}, inst.message) : null);
  }

  function endpointList(endpoints) {
    if (endpoints.length === 0) return el('p', { class: 'muted' }, 'No endpoint yet.');
    return el('ul', { class: 'endpoints', 'aria-label': 'Endpoints' }, ...endpoints.map(endpointItem));
  }

  function endpointItem(ep) {
    const label = el('span', { class: 'ep-name' }, ep.name || ep.type || 'endpoint');
    if (isGateway(ep)) return gatewayItem(ep, label);
    if (ep.type === 'HTTP' && isWebUrl(ep.address)) {
      return el('li', { class: 'endpoint', 'data-endpoint': ep.address }, label,
        el('a', { href: ep.address, target: '_blank', rel: 'noopener noreferrer' }, ep.address));
    }
    const cmd = ep.type === 'TCP' ? ncCommand(ep.address) : ep.address;
    return el('li', { class: 'endpoint', 'data-endpoint': ep.address }, label,
      el('code', {}, cmd), copyButton(cmd));
  }

  function copyButton(cmd) {
    return el('button', { type: 'button', class: 'button small', 'data-action': 'copy', 'data-copy': cmd,
      'aria-label': `Copy ${cmd}` }, 'Copy');
  }

  // The gateway mode (docs/api.md): an endpoint that carries `host`, the
  // instance's own <id>.<domain>, and `port` (443) is reached through the
  // gateway with TLS and that name as SNI.
  function isGateway(ep) {
    return ep.host !== undefined && ep.host !== null;
  }

  // gatewayTarget(ep): {host, port, dial} when all are safe to build
  // commands from, else null. dial is where to connect: the host, or for
  // TCP the other name an address "<dial>:<port>" gives (the operator's
  // --gateway-connect-address, when hosts do not resolve to the gateway).
  function gatewayTarget(ep) {
    const port = ep.port === undefined || ep.port === null ? 443 : ep.port;
    if (typeof ep.host !== 'string' || !DNS_NAME_RE.test(ep.host)) return null;
    if (!Number.isInteger(port) || port < 1 || port > 65535) return null;
    let dial = ep.host;
    const m = ep.type === 'TCP' && /^([^:]+):(\d+)$/.exec(String(ep.address || ''));
    if (m && Number(m[2]) === port && DNS_NAME_RE.test(m[1])) dial = m[1];
    return { host: ep.host, port, dial };
  }

  // gatewayCommands(host, port, dial): what a participant types, per tool;
  // the host is the SNI, dialled itself unless dial says otherwise.
  function gatewayCommands(host, port, dial) {
    if (dial && dial !== host) {
      return [
        ['ncat', `ncat --ssl --ssl-servername ${host} ${dial} ${port}`],
        ['openssl', `openssl s_client -quiet -connect ${dial}:${port} -servername ${host}`],
        ['pwntools', `remote("${dial}", ${port}, ssl=True, sni="${host}")`],
      ];
    }
    return [
      ['ncat', `ncat --ssl ${host} ${port}`],
      ['openssl', `openssl s_client -quiet -connect ${host}:${port} -servername ${host}`],
      ['pwntools', `remote("${host}", ${port}, ssl=True, sni="${host}")`],
    ];
  }

  // unbroken('a -b c'): the words as spans a narrow card wraps between but
  // never inside (so '-servername' is not split at its dash), spaces between.
  function unbroken(cmd) {
    const out = [];
    cmd.split(' ').forEach((word, i) => {
      if (i > 0) out.push(' ');
      out.push(el('span', { class: 'word' }, word));
    });
    return out;
  }

  function gatewayItem(ep, label) {
    const t = gatewayTarget(ep);
    const item = el('li', { class: 'endpoint gateway', 'data-endpoint': ep.address || '' }, label);
    if (!t) {
      item.append(el('code', {}, String(ep.address || ep.host)));
      return item;
    }
    item.dataset.host = t.host;
    if (ep.type === 'HTTP') {
      const url = `https://${t.host}${t.port === 443 ? '' : `:${t.port}`}`;
      item.append(el('a', { href: url, target: '_blank', rel: 'noopener noreferrer' }, url));
      return item;
    }
    item.append(el('span', { class: 'hint' }, `TLS on port ${t.port}, with any of:`),
      el('ul', { class: 'commands', 'aria-label': `Connect to ${ep.name || 'the endpoint'}` },
        ...gatewayCommands(t.host, t.port, t.dial).map(([tool, cmd]) =>
          el('li', { class: 'command', 'data-tool': tool },
            el('span', { class: 'tool' }, tool), el('code', {}, ...unbroken(cmd)), copyButton(cmd)))));
    return item;
  }

  function isWebUrl(address) {
    try {
      const u = new URL(address);
      return u.protocol === 'http:' || u.protocol === 'https:';
    } catch (_) {
      return false;
    }
  }

  // ncCommand('host:port'): 'nc host port' (IPv6 hosts lose their brackets).
  function ncCommand(address) {
    const at = String(address).lastIndexOf(':');
    if (at < 0) return `nc ${address}`;
    const host = address.slice(0, at).replace(/^\[(.*)\]$/, '$1');
    return `nc ${host} ${address.slice(at + 1)}`;
  }

  function expiryLine(inst) {
    if (!inst.expiresAt) return el('p', { class: 'expiry muted' }, 'No expiry yet.');
    const until = new Date(inst.expiresAt);
    return el('p', { class: 'expiry' }, 'Time left ',
      el('strong', { class: 'countdown' }, ''),
      el('span', { class: 'muted' }, ` (until ${until.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })})`));
  }

  function actionRow(name, s, inst, retrying) {
    const row = el('div', { class: 'actions' });
    const b = (action, text, cls, extra) => row.append(actionButton(name, action, text, cls, extra));
    if (retrying) return row;
    if (s === 'Stopped') b('create', 'Create server', 'primary');
    if (s === 'Running') {
      const renewable = !!(inst && inst.renewable);
      b('extend', 'Extend', 'primary', { disabled: !renewable });
      b('stop', 'Stop', 'danger');
      if (!renewable) row.append(el('span', { class: 'hint' }, 'At the longest lifetime allowed.'));
    }
    if (s === 'Error') {
      b('retry', 'Retry', 'primary');
      b('stop', 'Stop', 'danger');
    }
    return row;
  }

  // actionButton: busy buttons stay focusable (aria-disabled, not disabled),
  // so keyboard focus is not lost while a request runs.
  function actionButton(name, action, text, cls, extra) {
    const busy = state.busy.get(name) === action;
    const blocked = state.busy.has(name);
    return el('button', {
      type: 'button',
      class: `button ${cls}${busy ? ' busy' : ''}`,
      'data-action': action,
      'aria-disabled': blocked ? 'true' : null,
      'aria-busy': busy ? 'true' : null,
      'aria-describedby': `c-${name}-title`,
      disabled: extra && extra.disabled,
    }, text);
  }

  /* ---------- the countdown ---------- */

  function formatLeft(ms) {
    const total = Math.max(0, Math.round(ms / 1000));
    const h = Math.floor(total / 3600);
    const m = Math.floor((total % 3600) / 60);
    const sec = String(total % 60).padStart(2, '0');
    return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${sec}` : `${m}:${sec}`;
  }

  function tickCard(card) {
    const countdown = card.querySelector('.countdown');
    if (!countdown) return;
    const name = card.dataset.challenge;
    const deadline = state.deadlines.get(name);
    if (deadline === undefined) return;
    const left = deadline - Date.now();
    countdown.textContent = formatLeft(left);
    const low = left <= WARN_SECONDS * 1000;
    countdown.classList.toggle('low', low);
    if (low && left > 0 && !state.warned.has(name)) {
      state.warned.add(name);
      announce(`${titleOf(name)}: ${Math.ceil(left / 60000)} minutes left.`);
    }
  }

  function tick() {
    for (const card of $('challenges').children) tickCard(card);
  }

  /* ---------- the event stream ---------- */

  function setLive(mode, text) {
    const live = $('live');
    live.dataset.live = mode;
    live.textContent = text;
  }

  // sseParser(onEvent): a function taking decoded text chunks and calling
  // onEvent(type, data) for each complete event; comments (": heartbeat")
  // are skipped, "retry:" sets the reconnect delay.
  function sseParser(onEvent) {
    let buffer = '';
    let type = '';
    let data = [];
    const line = (text) => {
      if (text === '') {
        if (data.length) onEvent(type || 'message', data.join('\n'));
        type = '';
        data = [];
        return;
      }
      if (text.startsWith(':')) return;
      const colon = text.indexOf(':');
      const field = colon < 0 ? text : text.slice(0, colon);
      let value = colon < 0 ? '' : text.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      else if (field === 'retry' && /^\d+$/.test(value)) state.retryMs = Number(value);
    };
    return (chunk) => {
      buffer += chunk;
      let m;
      while ((m = /\r\n|\r|\n/.exec(buffer)) !== null) {
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (m[0] === '\r' && m.index === buffer.length - 1) break;
        line(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
      }
    };
  }

  // readEventStream(path, onEvent, signal, onChunk): GET an event stream and
  // feed it to an sseParser until it ends; onChunk() on every chunk read (the
  // callers' staleness clocks). Throws an ApiError for a refused request.
  async function readEventStream(path, onEvent, signal, onChunk) {
    const res = await fetch(path, {
      headers: authHeaders({ Accept: 'text/event-stream' }), cache: 'no-store', signal,
    });
    if (!res.ok) throw await errorFrom(res);
    const push = sseParser(onEvent);
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      onChunk();
      push(decoder.decode(value, { stream: true }));
    }
  }

  function onStreamEvent(type, data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch (_) {
      return;
    }
    if (type === 'snapshot' && msg.team === state.team) {
      replaceInstances(msg.instances || [], true);
      state.backoff = BACKOFF_MIN_MS;
      setLive('live', 'Live');
    } else if (type === 'instance' && msg.team === state.team) {
      applyInstance(msg, true);
    }
  }

  // openStream(session): read the team's events until the stream ends, then
  // open it again after a backoff (1 s doubling to 30 s, at least the
  // server's "retry:"); the next snapshot brings the state back.
  async function openStream(session) {
    if (session !== state.session) return;
    const ctl = new AbortController();
    state.stream = ctl;
    let last = Date.now();
    const watchdog = window.setInterval(() => {
      if (Date.now() - last > STALE_MS) ctl.abort();
    }, 5000);
    let why = 'the stream ended';
    try {
      await readEventStream(`/api/v1${teamPath('/events')}`, onStreamEvent, ctl.signal, () => {
        last = Date.now();
      });
    } catch (err) {
      if (session !== state.session) return;
      if (err instanceof ApiError) {
        if (err.status === 401 || err.status === 403) {
          failed(err);
          if (err.status === 401) return;
        }
        why = err.message;
      } else {
        why = ctl.signal.aborted ? 'no heartbeat' : 'the connection dropped';
      }
    } finally {
      window.clearInterval(watchdog);
    }
    if (session !== state.session) return;
    reconnectLater(session, why);
  }

  function reconnectLater(session, why) {
    const delay = Math.max(state.backoff, state.retryMs);
    state.backoff = Math.min(state.backoff * 2, BACKOFF_MAX_MS);
    setLive('retrying', `Reconnecting in ${Math.round(delay / 1000)} s (${why})…`);
    window.setTimeout(() => openStream(session), delay);
  }

  /* ---------- the organizer's console (admin token) ---------- */

  // The console lists every team's instances from GET /api/v1/admin/instances,
  // then keeps them live from the admin stream (GET /api/v1/admin/events): its
  // snapshot replaces the list, each instance event replaces one row (a
  // Stopped one removes it). A row's element is kept until its Instance
  // changes (compared as text without secondsLeft, so a snapshot that repeats
  // what is shown rebuilds nothing), so a render builds only the rows that changed; renders caused by
  // the stream come at most every RENDER_MS (a CTF's first minute brings
  // thousands of changes), those caused by the organizer at the next frame;
  // the age and time-left cells are updated in place every second. Every
  // action asks for confirmation first. Above the table, the panel shows the
  // API's summary (GET /api/v1/admin/instances carries one, the stream sends
  // each change as event: summary): per definition its instances by state and
  // its warm pool, the totals against --max-instances and the teams at their
  // quota; it is the cluster's count, not the rows'. Each row's last Events
  // (the admin views' "events", newest first) show in a column of their own.

  const CONSOLE = '-console'; // stored as the "team" an admin acts for: no team has this name
  const RENDER_MS = 250; // the stream re-renders the table at most this often
  const SORTS = {
    team: (i) => i.team,
    challenge: (i) => i.challenge,
    state: (i) => i.state,
    age: (i) => -(Date.parse(i.createdAt || '') || 0),
    left: (i) => Date.parse(i.expiresAt || '') || Infinity,
    endpoint: (i) => ((i.endpoints && i.endpoints[0] && i.endpoints[0].address) || ''),
    events: (i) => ((i.events && i.events[0] && i.events[0].reason) || ''),
  };

  const desk = {
    rows: new Map(), // "team/challenge" -> Instance
    trs: new Map(), // "team/challenge" -> {inst, key, tr}: the row element built for that Instance
    rendered: 0, // when the table was last rendered (performance.now())
    timer: 0, // a pending throttled render, or 0
    limits: null, // {maxInstances, maxInstancesPerTeam}
    summary: null, // the API's AdminSummary: per definition, totals, teams at their quota
    sort: { key: 'team', dir: 1 },
    frame: 0, // a pending requestAnimationFrame, or 0
    stream: null, // AbortController of the admin stream
  };

  const rowKey = (i) => `${i.team}/${i.challenge}`;
  // viewKey(i): what of an Instance a row shows, as text (secondsLeft is the clock's).
  const viewKey = (i) => {
    const { secondsLeft, ...shown } = i;
    return JSON.stringify(shown);
  };

  function openConsole() {
    reset();
    const session = state.session;
    localStorage.setItem(TEAM_KEY, CONSOLE);
    show('sign-in', false);
    show('pick-team', false);
    show('board', false);
    show('session', true);
    $('team-name').textContent = '(organizer)';
    show('switch-team', true);
    show('open-console', false);
    show('console', true);
    setConsoleLive('connecting', 'Connecting…');
    loadConsole(session);
  }

  function closeConsole() {
    if (desk.stream) desk.stream.abort();
    desk.stream = null;
    desk.rows.clear();
    desk.trs.clear();
    desk.summary = null;
    if (desk.frame) window.cancelAnimationFrame(desk.frame);
    if (desk.timer) window.clearTimeout(desk.timer);
    desk.frame = 0;
    desk.timer = 0;
    $('console-rows').replaceChildren();
    show('console', false);
  }

  function setConsoleLive(mode, text) {
    const live = $('console-live');
    live.dataset.live = mode;
    live.textContent = text;
  }

  async function loadConsole(session) {
    let all;
    try {
      all = await api('GET', '/admin/instances');
    } catch (err) {
      if (session !== state.session) return;
      failed(err);
      if (err.status !== 401 && err.status !== 403) {
        window.setTimeout(() => { if (session === state.session) loadConsole(session); }, 5000);
      }
      return;
    }
    if (session !== state.session) return;
    desk.limits = all.limits || null;
    desk.summary = all.summary || null;
    renderSummary();
    replaceRows(all.instances || []);
    openAdminStream(session);
  }

  function replaceRows(list) {
    desk.rows.clear();
    for (const i of list) desk.rows.set(rowKey(i), i);
    for (const key of [...desk.trs.keys()]) if (!desk.rows.has(key)) desk.trs.delete(key);
    scheduleRender(true);
  }

  function onAdminEvent(type, data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch (_) {
      return;
    }
    if (type === 'snapshot') {
      replaceRows(msg.instances || []);
      state.backoff = BACKOFF_MIN_MS;
      setConsoleLive('live', 'Live');
    } else if (type === 'instance' && msg.team && msg.challenge) {
      if (msg.state === 'Stopped') {
        desk.rows.delete(rowKey(msg));
        desk.trs.delete(rowKey(msg));
      } else {
        desk.rows.set(rowKey(msg), msg);
      }
      scheduleRender(false);
    } else if (type === 'summary' && Array.isArray(msg.definitions)) {
      desk.summary = msg;
      renderSummary();
    }
  }

  // openAdminStream(session): as openStream, on the admin stream.
  async function openAdminStream(session) {
    if (session !== state.session) return;
    const ctl = new AbortController();
    desk.stream = ctl;
    let last = Date.now();
    const watchdog = window.setInterval(() => {
      if (Date.now() - last > STALE_MS) ctl.abort();
    }, 5000);
    let why = 'the stream ended';
    try {
      await readEventStream('/api/v1/admin/events', onAdminEvent, ctl.signal, () => {
        last = Date.now();
      });
    } catch (err) {
      if (session !== state.session) return;
      if (err instanceof ApiError) {
        if (err.status === 401 || err.status === 403) {
          failed(err);
          return;
        }
        why = err.message;
      } else {
        why = ctl.signal.aborted ? 'no heartbeat' : 'the connection dropped';
      }
    } finally {
      window.clearInterval(watchdog);
    }
    if (session !== state.session) return;
    const delay = Math.max(state.backoff, state.retryMs);
    state.backoff = Math.min(state.backoff * 2, BACKOFF_MAX_MS);
    setConsoleLive('retrying', `Reconnecting in ${Math.round(delay / 1000)} s (${why})…`);
    window.setTimeout(() => openAdminStream(session), delay);
  }

  // scheduleRender(now): render at the next frame (now: the organizer did
  // something), or no sooner than RENDER_MS after the last render.
  function scheduleRender(now) {
    if (desk.frame) return;
    const wait = now ? 0 : desk.rendered + RENDER_MS - performance.now();
    if (wait > 0) {
      if (!desk.timer) {
        desk.timer = window.setTimeout(() => {
          desk.timer = 0;
          scheduleRender(true);
        }, wait);
      }
      return;
    }
    if (desk.timer) window.clearTimeout(desk.timer);
    desk.timer = 0;
    desk.frame = window.requestAnimationFrame(() => {
      desk.frame = 0;
      desk.rendered = performance.now();
      renderConsole();
    });
  }

  function filters() {
    return {
      team: $('filter-team').value.trim().toLowerCase(),
      challenge: $('filter-challenge').value.trim().toLowerCase(),
      state: $('filter-state').value,
    };
  }

  function shownRows() {
    const f = filters();
    const list = [];
    for (const i of desk.rows.values()) {
      if (f.team && !i.team.includes(f.team)) continue;
      if (f.challenge && !i.challenge.includes(f.challenge)) continue;
      if (f.state && i.state !== f.state) continue;
      list.push(i);
    }
    const by = SORTS[desk.sort.key];
    const dir = desk.sort.dir;
    list.sort((a, b) => {
      const x = by(a);
      const y = by(b);
      if (x < y) return -dir;
      if (x > y) return dir;
      return rowKey(a) < rowKey(b) ? -1 : 1;
    });
    return list;
  }

  function renderConsole() {
    const list = shownRows();
    const frag = document.createDocumentFragment();
    for (const i of list) {
      const key = rowKey(i);
      let kept = desk.trs.get(key);
      if (kept && kept.inst !== i) {
        const k = viewKey(i);
        if (k === kept.key) kept.inst = i;
        else kept = null;
      }
      if (!kept) {
        kept = { inst: i, key: viewKey(i), tr: consoleRow(i) };
        desk.trs.set(key, kept);
      }
      frag.append(kept.tr);
    }
    $('console-rows').replaceChildren(frag);
    $('console-shown').textContent = `${list.length} of ${desk.rows.size} instances shown.`;
    const f = filters();
    const teams = new Set();
    const challenges = new Set();
    for (const i of desk.rows.values()) {
      teams.add(i.team);
      challenges.add(i.challenge);
    }
    $('stop-team').disabled = !teams.has(f.team);
    $('stop-challenge').disabled = !challenges.has(f.challenge);
    for (const b of document.querySelectorAll('#console .sort')) {
      const th = b.parentElement;
      if (b.dataset.sort === desk.sort.key) {
        th.setAttribute('aria-sort', desk.sort.dir > 0 ? 'ascending' : 'descending');
      } else {
        th.removeAttribute('aria-sort');
      }
    }
  }

  // renderSummary: the panel, from the API's summary (the cluster's
  // Challenges by state, the pools' status, the quotas' ledger): the totals
  // against --max-instances, the teams at their quota and one row per
  // definition. Small (a row per definition), so it is rebuilt whole.
  function renderSummary() {
    const sum = desk.summary;
    if (!sum) {
      $('console-totals').textContent = 'Counting instances…';
      $('console-quota').textContent = '';
      $('console-defs').replaceChildren();
      return;
    }
    const t = sum.totals;
    const used = t.instances + t.warm;
    $('console-totals').textContent = `${used} of ${t.maxInstances} instances in use ` +
      `(${t.instances} for ${t.teams} teams, ${t.warm} warm; room for ${t.room} more): ` +
      `${t.running} running, ${t.starting} starting, ${t.failed} failed, ${t.stopping} stopping.`;
    const q = sum.quota;
    const more = q.teamsAtQuota > q.teams.length ? `, and ${q.teamsAtQuota - q.teams.length} more` : '';
    $('console-quota').textContent = q.teamsAtQuota
      ? `Teams at their quota of ${q.maxInstancesPerTeam} (${q.teamsAtQuota}): ${q.teams.join(', ')}${more}.`
      : `No team is at its quota of ${q.maxInstancesPerTeam}.`;
    const pool = (d, k) => (d.pool && d.pool[k] >= 0 ? String(d.pool[k]) : '—');
    const num = (text) => el('td', { class: 'num' }, String(text));
    $('console-defs').replaceChildren(...sum.definitions.map((d) => el('tr', { 'data-definition': d.name },
      el('th', { scope: 'row', title: d.title || '' }, d.exists ? d.name : `${d.name} (deleted)`),
      num(d.running), num(d.starting), num(d.failed), num(d.stopping),
      num(pool(d, 'ready')), num(pool(d, 'claimed')), num(pool(d, 'target')))));
  }

  function consoleRow(i) {
    const ep = (i.endpoints && i.endpoints[0] && i.endpoints[0].address) || '';
    const why = i.reason ? el('span', { class: 'reason', title: i.message || '' }, ` ${i.reason}`) : null;
    const actions = el('td', { class: 'col-actions' });
    if (i.renewable) actions.append(rowButton('extend', i, 'Extend', 'button small'));
    if (i.state !== 'Stopping') actions.append(rowButton('stop', i, 'Stop', 'button small danger'));
    return el('tr', { 'data-state': i.state },
      el('td', {}, i.team),
      el('td', {}, i.challenge),
      el('td', {}, el('span', { class: `badge state-${String(i.state).toLowerCase()}` }, i.state), why),
      el('td', { class: 'col-age', 'data-since': i.createdAt || '' }, ageText(i.createdAt)),
      el('td', { class: 'col-left', 'data-until': i.expiresAt || '' }, leftText(i.expiresAt)),
      el('td', { class: 'col-endpoint' }, ep),
      eventsCell(i.events || []),
      actions);
  }

  // eventsCell(events): the newest Event's reason, opening onto the last few
  // (newest first) with their messages, counts and times.
  function eventsCell(events) {
    const td = el('td', { class: 'col-events' });
    if (!events.length) return td;
    const line = (e) => el('span', { class: e.type === 'Warning' ? 'event-warning' : '' }, e.reason);
    const items = events.map((e) => el('li', {}, line(e),
      `${e.count > 1 ? ` ×${e.count}` : ''}: ${e.message}`,
      e.lastSeen ? ` (${ageText(e.lastSeen)} ago)` : ''));
    td.append(el('details', {}, el('summary', {}, line(events[0])), el('ul', {}, ...items)));
    return td;
  }

  function rowButton(action, i, text, cls) {
    return el('button', {
      type: 'button', class: cls, 'data-action': action, 'data-team': i.team,
      'data-challenge': i.challenge, 'aria-label': `${text} ${i.challenge} of team ${i.team}`,
    }, text);
  }

  function ageText(since) {
    const t = Date.parse(since || '');
    return t ? formatLeft(Date.now() - t) : '';
  }

  function leftText(until) {
    const t = Date.parse(until || '');
    return t ? formatLeft(Math.max(0, t - Date.now())) : '';
  }

  // tickConsole: the age and time-left cells, in place.
  function tickConsole() {
    if ($('console').hidden) return;
    for (const td of $('console-rows').querySelectorAll('td.col-age')) td.textContent = ageText(td.dataset.since);
    for (const td of $('console-rows').querySelectorAll('td.col-left')) td.textContent = leftText(td.dataset.until);
  }

  async function consoleAction(what, method, path) {
    if (!window.confirm(`${what}?`)) return;
    try {
      const r = await api(method, path);
      const n = r && typeof r.stopped === 'number' ? ` (${r.stopped} stopped, ${r.failed} failed)` : '';
      announce(`${what}: done${n}.`);
      clearError();
    } catch (err) {
      failed(err);
    }
  }

  function onConsoleClick(event) {
    const b = event.target.closest('button[data-action]');
    if (!b) return;
    const t = b.dataset.team;
    const c = b.dataset.challenge;
    const path = `/admin/teams/${encodeURIComponent(t)}/instances/${encodeURIComponent(c)}`;
    if (b.dataset.action === 'stop') consoleAction(`Stop ${c} of team ${t}`, 'DELETE', path);
    else consoleAction(`Extend ${c} of team ${t}`, 'POST', `${path}/renew`);
  }

  function onSortClick(event) {
    const b = event.target.closest('button[data-sort]');
    if (!b) return;
    const key = b.dataset.sort;
    desk.sort = { key, dir: desk.sort.key === key ? -desk.sort.dir : 1 };
    scheduleRender(true);
  }

  function stopAll(kind) {
    const name = filters()[kind];
    const n = [...desk.rows.values()].filter((i) => i[kind] === name && i.state !== 'Stopping').length;
    const path = kind === 'team'
      ? `/admin/teams/${encodeURIComponent(name)}/instances`
      : `/admin/challenges/${encodeURIComponent(name)}/instances`;
    consoleAction(`Stop all ${n} instances of ${kind} ${name}`, 'DELETE', path);
  }

  /* ---------- start ---------- */

  function onSignInSubmit(event) {
    event.preventDefault();
    const token = $('token').value.trim();
    if (!token) {
      showError({ message: 'Enter your team token.' });
      $('token').focus();
      return;
    }
    signIn(token, false);
  }

  function onPickTeamSubmit(event) {
    event.preventDefault();
    const team = $('team-input').value.trim();
    if (!TEAM_RE.test(team) || team.length > 63) {
      showError({ message: 'A team name is lower-case letters, digits and dashes, e.g. team-a.' });
      $('team-input').focus();
      return;
    }
    clearError();
    state.session++;
    openBoard(team);
  }

  function boot() {
    $('sign-in-form').addEventListener('submit', onSignInSubmit);
    $('pick-team-form').addEventListener('submit', onPickTeamSubmit);
    $('sign-out').addEventListener('click', () => signOut());
    $('switch-team').addEventListener('click', switchTeam);
    $('challenges').addEventListener('click', onBoardClick);
    $('pick-console').addEventListener('click', openConsole);
    $('open-console').addEventListener('click', openConsole);
    $('console-rows').addEventListener('click', onConsoleClick);
    $('console-head').addEventListener('click', onSortClick);
    for (const id of ['filter-team', 'filter-challenge', 'filter-state']) {
      $(id).addEventListener('input', () => scheduleRender(true));
    }
    $('console-filters').addEventListener('submit', (e) => e.preventDefault());
    $('stop-team').addEventListener('click', () => stopAll('team'));
    $('stop-challenge').addEventListener('click', () => stopAll('challenge'));
    window.setInterval(tick, 1000);
    window.setInterval(tickConsole, 1000);
    const token = localStorage.getItem(TOKEN_KEY);
    if (token) signIn(token, true);
    else showSignIn();
  }

  boot();
})();
