// console_test.mjs - the organizer's console (the page's admin mode) driven
// in headless Chromium against a running CTF operator (ctf_console_test.sh
// sets it up: team-a/web and team-b/web Running, team-b/broken in Error):
// the admin token opens the console, which lists the three instances with
// their states and the Error's reason; the panel's numbers equal what
// kubectl reads from the cluster (per definition: Challenges by state and
// the pool's status.pool; the totals against --max-instances; the teams at
// their quota of 2: team-b); the last-Events column shows each instance's
// newest Event as kubectl lists it (team-b/broken's a Warning, team-a/web's
// list holds Running); a filter by team shows only that
// team's. Team-b's own page, signed in with team-b's token in a second
// browser context, lists web Running and offers no console; Stop (confirmed)
// in the console stops team-b/web, whose row goes, and which leaves team-b's
// open page live (its event stream says web Stopped; the page reads its list
// no more) and after a reload, and team-b's own list; a column sorts both
// ways. Extend (a dismissed confirmation first, then a confirmed one) moves
// team-a/web's spec.expiresAt, as kubectl reads it, by exactly its renewBy
// (30 minutes), the row's time left grows by as much, and one Event
// AdminExtend is about the Challenge. Then CONSOLE_SCALE instances
// (admin PUTs of one per team): the console renders them all while they
// start (the stream's changes pouring in), then, reloaded, renders them and
// a filter narrows them to one and back, all while the operator is still
// starting them on the loaded test machine; the times are printed with the
// states at that moment (measurements, bounded only by generous timeouts).
// Last, team-b's page (open all along) asked for the console (the stored
// choice) shows team-b's instances and says that the console needs the admin
// token; every response it received from the API since it opened (the JSON,
// and its event streams' text as far as read, through the stop and the
// CONSOLE_SCALE other teams' instances) names no other team (team-a, s0000...),
// while team-b's own name is in each stream (so the capture holds what came);
// and the admin routes (the stream, lists, stops, renew), fetched from that
// page with its token, answer 403 and change nothing. Then the bulk stops,
// each through the console's button with the filter set, confirmed: Stop all
// of this team's (team-a: web and a broken made for it) and Stop all of this
// challenge's (broken: team-b's and three scale teams'); kubectl then shows
// every Challenge stopped deleted or being deleted and every other one
// standing, one Event AdminStop naming the bulk action about each stopped
// one, and their rows leave the console.
// Each step asserts, then takes a screenshot.
//
// Env: CONSOLE_URL (the page), CONSOLE_ADMIN_TOKEN, CONSOLE_TEAM_B_TOKEN,
// CONSOLE_KUBECTL and CONSOLE_KUBECONFIG (the cluster's truth),
// CONSOLE_MAX_INSTANCES (--max-instances),
// CONSOLE_SCALE (default 2000), CONSOLE_ARTIFACTS (screenshot directory),
// CHROMIUM (default /usr/bin/chromium). Exits non-zero with a FAIL line on the
// first failure.
import { chromium } from 'playwright-core';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined || v === '') {
    console.error(`FAIL: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const URL_ = env('CONSOLE_URL');
const ADMIN = env('CONSOLE_ADMIN_TOKEN');
const TEAM_B = env('CONSOLE_TEAM_B_TOKEN');
const SCALE = Number(env('CONSOLE_SCALE', '2000'));
const ARTIFACTS = env('CONSOLE_ARTIFACTS');
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const KUBECTL = env('CONSOLE_KUBECTL');
const KUBECONFIG = env('CONSOLE_KUBECONFIG');
const MAX_INSTANCES = Number(env('CONSOLE_MAX_INSTANCES'));

const SHORT = 30_000;
const LONG = 180_000;

let passed = 0;
let shot = 0;
let page;
const problems = [];

const rows = () => page.locator('#console-rows tr');

async function screenshot(name, tab = page) {
  shot += 1;
  await tab.screenshot({ path: path.join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`) });
}

async function step(title, fn) {
  try {
    await fn();
  } catch (err) {
    console.error(`FAIL: ${title}: ${err.message.split('\n').slice(0, 6).join('\n  ')}`);
    try {
      await page.screenshot({ path: path.join(ARTIFACTS, 'failure.png') });
      console.error(`  page text:\n${(await page.locator('body').innerText()).slice(0, 1500)}`);
    } catch (_) { /* the page may be gone */ }
    if (teamPage) {
      try {
        await teamPage.screenshot({ path: path.join(ARTIFACTS, 'failure-team.png') });
        console.error(`  team page text:\n${(await teamPage.locator('body').innerText()).slice(0, 800)}`);
      } catch (_) { /* the page may be gone */ }
    }
    if (problems.length) console.error(`  page problems:\n  ${problems.join('\n  ')}`);
    process.exit(1);
  }
  passed += 1;
  console.log(`ok ${passed} - ${title}`);
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

// api(method, path, token): the API from Node, for setup and for what a team sees.
async function api(method, p, token) {
  const res = await fetch(new URL(`api/v1${p}`, URL_), { method, headers: { Authorization: `Bearer ${token}` } });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// kget(...args): kubectl get ... -o json in the challenge namespace, parsed: the cluster's truth.
function kget(...args) {
  const out = execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, '-n', 'ctf', 'get', ...args, '-o', 'json'],
    { encoding: 'utf8', maxBuffer: 256 << 20 });
  return JSON.parse(out);
}

// pageState(c): a Challenge's state as the API derives it (views.c), in the panel's words.
function pageState(c) {
  const phase = (c.status || {}).currentStatus;
  if (c.metadata.deletionTimestamp || phase === 'Terminating' || phase === 'Deleted') return 'stopping';
  if (phase === 'Error') return 'failed';
  if (phase === 'Running') return 'running';
  return 'starting';
}

// truth(): the panel's rows, totals and quota line as kubectl counts them now.
function truth() {
  const chals = kget('challenges').items;
  const defs = kget('challengedefinitions').items;
  const rows = new Map();
  const num = (p, k) => (p && Number.isInteger(p[k]) && p[k] >= 0 ? String(p[k]) : '—');
  for (const d of defs) {
    const p = (d.status || {}).pool || null;
    rows.set(d.metadata.name, { running: 0, starting: 0, failed: 0, stopping: 0, pool: [num(p, 'ready'), num(p, 'claimed'), num(p, 'target')] });
  }
  const perTeam = new Map();
  const totals = { running: 0, starting: 0, failed: 0, stopping: 0 };
  let admitted = 0;
  for (const c of chals) {
    const s = pageState(c);
    rows.get(c.spec.definition)[s] += 1;
    totals[s] += 1;
    // Admitted: given a namespace and not refused for quota (the ledger's rule).
    const st = c.status || {};
    if (st.namespace && !(st.currentStatus === 'Error' && st.reason === 'QuotaExceeded')) {
      admitted += 1;
      perTeam.set(c.spec.team, (perTeam.get(c.spec.team) || 0) + 1);
    }
  }
  const table = [...rows].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, r]) =>
    [name, String(r.running), String(r.starting), String(r.failed), String(r.stopping), ...r.pool]);
  const warm = defs.reduce((n, d) => n + (((d.status || {}).pool || {}).size || 0), 0);
  const teams = new Set(chals.map((c) => c.spec.team)).size;
  const full = [...perTeam].filter(([, n]) => n >= 2).map(([t]) => t).sort();
  return {
    table,
    totals: `${admitted + warm} of ${MAX_INSTANCES} instances in use (${admitted} for ${teams} teams, ${warm} warm; ` +
      `room for ${MAX_INSTANCES - admitted - warm} more): ${totals.running} running, ${totals.starting} starting, ` +
      `${totals.failed} failed, ${totals.stopping} stopping.`,
    quota: full.length ? `Teams at their quota of 2 (${full.length}): ${full.join(', ')}.` : 'No team is at its quota of 2.',
  };
}

// panel(): what the panel shows now, in truth()'s shape.
async function panel() {
  const table = await page.$$eval('#console-defs tr', (trs) => trs.map((tr) => [tr.dataset.definition,
    ...[...tr.querySelectorAll('td')].map((td) => td.textContent)]));
  return { table, totals: await page.locator('#console-totals').innerText(),
    quota: await page.locator('#console-quota').innerText() };
}

// settledPanel(until, what): waits until the panel equals kubectl's count and until(truth) holds.
async function settledPanel(until, what) {
  const end = Date.now() + LONG;
  let seen;
  let want;
  for (;;) {
    want = truth();
    seen = await panel();
    if (JSON.stringify(seen) === JSON.stringify(want) && until(want)) return want;
    if (Date.now() > end) break;
    await page.waitForTimeout(500);
  }
  throw new Error(`${what}: the panel ${JSON.stringify(seen)} is not the cluster's ${JSON.stringify(want)}`);
}

// newestEvent(team, challenge): the newest Event kubectl lists about that Challenge
// (by last time, then by name, as the API orders them).
function newestEvent(team, challenge) {
  const c = kget('challenges').items.find((x) => x.spec.team === team && x.spec.definition === challenge &&
    !x.metadata.deletionTimestamp);
  const evs = kget('events', '--field-selector', `involvedObject.uid=${c.metadata.uid}`).items;
  const when = (e) => e.lastTimestamp || e.eventTime || e.firstTimestamp || '';
  evs.sort((a, b) => (when(a) === when(b) ? (a.metadata.name < b.metadata.name ? 1 : -1) : (when(a) < when(b) ? 1 : -1)));
  return { newest: evs[0], all: evs };
}

// cells(): the team and challenge of every row shown, in order.
async function cells() {
  return page.$$eval('#console-rows tr', (trs) => trs.map((tr) => [tr.children[0].textContent,
    tr.children[1].textContent, tr.dataset.state]));
}

// liveChallenges(): the Challenges kubectl lists that are not being deleted.
function liveChallenges() {
  return kget('challenges').items.filter((c) => !c.metadata.deletionTimestamp);
}

// eventsAbout(uid, reason): the Events kubectl lists about one object with that reason
// (an Event outlives its object, so a stopped instance's can still be read).
function eventsAbout(uid, reason) {
  return kget('events', '--field-selector', `involvedObject.uid=${uid},reason=${reason}`).items;
}

// until(what, fn): polls fn (kubectl, the API) until it returns a true value, which it returns.
async function until(what, fn, timeout = LONG) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(500);
  }
}

// seconds(text): a time-left cell's h:mm:ss or m:ss in seconds.
function seconds(text) {
  return text.trim().split(':').reduce((n, part) => n * 60 + Number(part), 0);
}

// consoleRow(team, challenge): the console's row of one instance.
const consoleRow = (team, challenge) =>
  page.locator(`#console-rows tr:has(td:text-is("${team}")):has(td:text-is("${challenge}"))`);

// confirmOnce(accept): answers the next confirmation; resolves to what it asked once answered.
function confirmOnce(accept) {
  return new Promise((resolve) => {
    page.once('dialog', (d) => {
      const asked = d.message();
      (accept ? d.accept() : d.dismiss()).then(() => resolve(asked), () => resolve(asked));
    });
  });
}

// stopAllThroughConsole(kind, name, uids, others): presses Stop all of this
// team's (kind "team") or challenge's ("challenge") with the filter set to
// name, confirms, and checks the server's state: every Challenge of uids is
// deleted or being deleted, every one of others still stands, each of uids
// has an Event AdminStop naming the bulk action, and their rows leave the console.
async function stopAllThroughConsole(kind, name, uids, others) {
  await page.locator('#filter-state').selectOption('');
  await page.locator(kind === 'team' ? '#filter-challenge' : '#filter-team').fill('');
  await page.locator(`#filter-${kind}`).fill(name);
  await page.waitForFunction((n) => document.querySelectorAll('#console-rows tr').length === n, uids.length,
    { timeout: LONG });
  const button = page.getByRole('button', { name: `Stop all of this ${kind}'s` });
  assert(await button.isEnabled(), `Stop all of this ${kind}'s is not enabled with the filter ${name}`);
  const asked = confirmOnce(true);
  await button.click();
  assert(await asked === `Stop all ${uids.length} instances of ${kind} ${name}?`, `the confirmation asked: ${await asked}`);
  // The server's state: kubectl's Challenges, not the page.
  await until(`every instance of ${kind} ${name} deleted or being deleted`, () => {
    const live = new Set(liveChallenges().map((c) => c.metadata.uid));
    return uids.every((u) => !live.has(u));
  });
  const live = new Set(liveChallenges().map((c) => c.metadata.uid));
  const hit = others.filter((c) => !live.has(c.metadata.uid));
  assert(hit.length === 0, `stop all of ${kind} ${name}'s stopped others too: ` +
    hit.slice(0, 5).map((c) => `${c.spec.team}/${c.spec.definition}`).join(', '));
  const said = `stop all of ${kind} ${name}'s`;
  await until(`an Event AdminStop (${said}) about each of the ${uids.length}`, () =>
    uids.every((u) => eventsAbout(u, 'AdminStop').some((e) => e.message.includes(said))));
  for (const u of uids) {
    const n = eventsAbout(u, 'AdminStop').length;
    assert(n === 1, `${n} AdminStop Events about one instance of ${kind} ${name}`);
  }
  await page.waitForFunction(() => document.querySelectorAll('#console-rows tr').length === 0, null, { timeout: LONG });
  assert(problems.length === 0, problems.join('; '));
}

// The participant page of team-b, in a browser context of its own (its own
// localStorage, so its token and the admin's do not meet): every response it
// receives is kept, the JSON by Playwright's response events, the event
// stream's text by the DevTools protocol (Network.streamResourceContent: a
// stream never ends, so its body is read as it arrives).
let teamPage;
const teamResponses = []; // { url, status, type, text: Promise<string> } of every response but the streams'
const teamStreams = new Map(); // DevTools requestId -> { url, buffered, chunks } of each event stream
let teamInstanceGets = 0; // GETs of team-b's instances (the list or one) the page has sent

// Every other team's name: team-a and the scale step's teams. A name counts
// where it stands alone or inside a longer name (a namespace, a label), not
// as a part of a longer word.
const SCALE_TEAMS = Array.from({ length: SCALE }, (_, i) => `s${String(i).padStart(4, '0')}`);
const OTHER_TEAMS = ['team-a', ...SCALE_TEAMS];
const OTHERS_RE = new RegExp(`(?<![a-z0-9])(${OTHER_TEAMS.join('|')})(?![a-z0-9])`);

// streamText(s): what has been read of one event stream so far.
const streamText = (s) => Buffer.concat([Buffer.from(s.buffered, 'base64'),
  ...s.chunks.map((c) => Buffer.from(c, 'base64'))]).toString('utf8');

async function openTeamPage(context) {
  teamPage = await context.newPage();
  teamPage.setDefaultTimeout(SHORT);
  teamPage.on('pageerror', (e) => problems.push(`team page error: ${e.message}`));
  teamPage.on('request', (r) => {
    if (r.method() === 'GET' && /\/api\/v1\/teams\/team-b\/instances([/?]|$)/.test(r.url())) teamInstanceGets += 1;
  });
  teamPage.on('response', (r) => {
    const type = r.headers()['content-type'] || '';
    if (type.startsWith('text/event-stream')) return; // read below, as it arrives
    const text = r.text();
    text.catch(() => {}); // awaited (and its failure reported) when the responses are checked
    teamResponses.push({ url: r.url(), status: r.status(), type, text });
  });
  const cdp = await context.newCDPSession(teamPage);
  cdp.on('Network.responseReceived', (e) => {
    if (!e.response.mimeType.startsWith('text/event-stream')) return;
    const s = { url: e.response.url, buffered: '', chunks: [] };
    teamStreams.set(e.requestId, s);
    s.ready = cdp.send('Network.streamResourceContent', { requestId: e.requestId })
      .then((r) => { s.buffered = r.bufferedData; })
      .catch((err) => { s.error = err.message; });
  });
  cdp.on('Network.dataReceived', (e) => {
    const s = teamStreams.get(e.requestId);
    if (s && e.data) s.chunks.push(e.data);
  });
  await cdp.send('Network.enable');
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  for (const f of fs.readdirSync(ARTIFACTS)) if (f.endsWith('.png')) fs.rmSync(path.join(ARTIFACTS, f));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}`);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage', '--disable-extensions', '--disable-default-apps'],
  });
  try {
    const admin = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const team = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await run(admin, team);
  } finally {
    await browser.close();
  }
}

async function run(context, teamContext) {
  page = await context.newPage();
  page.setDefaultTimeout(SHORT);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });

  await step('the admin token signs in and opens the console', async () => {
    await page.goto(URL_);
    await page.getByLabel('Team token').fill(ADMIN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: "Open the organizer's console" }).click();
    await page.getByRole('heading', { name: "Organizer's console" }).waitFor();
    await page.waitForSelector('#console-live[data-live="live"]');
  });

  await step('the console lists both teams\' instances with their states, and the Error\'s reason', async () => {
    await page.waitForFunction(() => document.querySelectorAll('#console-rows tr').length === 3);
    const got = await cells();
    const want = [['team-a', 'web', 'Running'], ['team-b', 'broken', 'Error'], ['team-b', 'web', 'Running']];
    assert(JSON.stringify(got) === JSON.stringify(want), `rows ${JSON.stringify(got)}`);
    const broken = page.locator('#console-rows tr[data-state="Error"]');
    assert(/ImagePullFailed/.test(await broken.innerText()), `the Error row: ${await broken.innerText()}`);
    assert((await rows().nth(0).locator('td.col-endpoint').innerText()).trim(), 'no endpoint for team-a/web');
    assert(problems.length === 0, problems.join('; '));
    await screenshot('console');
  });

  await step('the panel shows per definition, the totals and the teams at their quota as the cluster counts them', async () => {
    const want = await settledPanel((t) => t.table.some(([n, , , , , ready, , target]) =>
      n === 'pooled' && ready === '2' && target === '2'), 'the panel');
    const byName = Object.fromEntries(want.table.map((r) => [r[0], r.slice(1)]));
    assert(JSON.stringify(byName.web) === JSON.stringify(['2', '0', '0', '0', '—', '—', '—']), `web: ${byName.web}`);
    assert(JSON.stringify(byName.broken.slice(0, 4)) === JSON.stringify(['0', '0', '1', '0']), `broken: ${byName.broken}`);
    assert(JSON.stringify(byName.pooled) === JSON.stringify(['0', '0', '0', '0', '2', '0', '2']), `pooled: ${byName.pooled}`);
    assert(/^5 of \d+ instances in use \(3 for 2 teams, 2 warm; room for \d+ more\): 2 running, 0 starting, 1 failed, 0 stopping\.$/
      .test(want.totals), `totals: ${want.totals}`);
    assert(want.quota === 'Teams at their quota of 2 (1): team-b.', `quota: ${want.quota}`);
    await page.locator('#console-panel').scrollIntoViewIfNeeded();
    await screenshot('panel');
  });

  await step('the last-Events column shows each instance\'s newest Event as kubectl lists it', async () => {
    const cell = (team, ch) => page.locator(`#console-rows tr:has(td:text-is("${team}")):has(td:text-is("${ch}")) td.col-events`);
    const end = Date.now() + LONG;
    let shown = '';
    let want;
    for (;;) {
      want = newestEvent('team-b', 'broken').newest;
      shown = (await cell('team-b', 'broken').locator('summary').innerText().catch(() => '')).trim();
      if (want && shown === want.reason) break;
      if (Date.now() > end) throw new Error(`team-b/broken's last Event shows ${shown}, kubectl's newest is ${want && want.reason}`);
      await page.waitForTimeout(500);
    }
    // The newest Event's type decides its colour. Which Event is newest is
    // kubectl's answer at that moment: under load the Normal Pending and the
    // Warning of the failed pull can share a second (then the name decides).
    const warned = await cell('team-b', 'broken').locator('summary .event-warning').count();
    assert(warned === (want.type === 'Warning' ? 1 : 0),
      `team-b/broken's newest Event ${want.type} ${want.reason} is shown ${warned ? '' : 'not '}as a warning`);
    await cell('team-b', 'broken').locator('summary').click();
    const list = await cell('team-b', 'broken').locator('li').first().innerText();
    assert(list.includes(want.message.slice(0, 60)), `the opened list ${list} lacks kubectl's message ${want.message}`);
    await page.waitForFunction(() => [...document.querySelectorAll('#console-rows tr')].some((tr) =>
      tr.children[0].textContent === 'team-a' && tr.children[1].textContent === 'web' &&
      [...tr.querySelectorAll('td.col-events li')].some((li) => li.textContent.startsWith('Running'))), null, { timeout: LONG });
    const a = newestEvent('team-a', 'web').all;
    assert(a.some((e) => e.reason === 'Running'), `kubectl lists no Running Event for team-a/web: ${a.map((e) => e.reason)}`);
    await screenshot('last-events');
    await cell('team-b', 'broken').locator('summary').click();
  });

  await step('a filter by team shows only that team\'s instances', async () => {
    await page.locator('#filter-team').fill('team-b');
    await page.waitForFunction(() => document.querySelectorAll('#console-rows tr').length === 2);
    const got = await cells();
    assert(got.every(([t]) => t === 'team-b'), `filtered rows ${JSON.stringify(got)}`);
    assert(await page.locator('#stop-team').isEnabled(), 'Stop all of this team\'s is not enabled');
    await page.locator('#filter-state').selectOption('Error');
    await page.waitForFunction(() => document.querySelectorAll('#console-rows tr').length === 1);
    await screenshot('filter-team-error');
    await page.locator('#filter-state').selectOption('');
  });

  await step('team-b\'s own page (its token, a second browser context) lists web Running and offers no console', async () => {
    await openTeamPage(teamContext);
    await teamPage.goto(URL_);
    await teamPage.getByLabel('Team token').fill(TEAM_B);
    await teamPage.getByRole('button', { name: 'Sign in' }).click();
    await teamPage.waitForSelector('#live[data-live="live"]');
    await teamPage.waitForSelector('[data-challenge="web"][data-state="Running"]');
    await teamPage.waitForSelector('[data-challenge="broken"][data-state="Error"]');
    assert(await teamPage.locator('#team-name').innerText() === 'team-b', 'the team page is not team-b\'s');
    assert(await teamPage.locator('#open-console').isHidden(), 'the team page offers the console');
    assert(await teamPage.locator('#console').isHidden(), 'the team page shows the console');
    assert(await teamPage.getByRole('button', { name: "Open the organizer's console" }).count() === 0 ||
      await teamPage.getByRole('button', { name: "Open the organizer's console" }).isHidden(), 'the team page offers the console');
    await screenshot('team-b-before-stop', teamPage);
  });

  await step('Stop, confirmed, stops team-b/web: its row goes, it leaves team-b\'s open page live and after a reload', async () => {
    let asked = '';
    const gets = teamInstanceGets;
    await Promise.all([...teamStreams.values()].map((st) => st.ready));
    page.once('dialog', (d) => { asked = d.message(); d.accept(); });
    await page.getByRole('button', { name: 'Stop web of team team-b' }).click();
    // The team's page hears it from its event stream: it asks for its list no more.
    await teamPage.waitForSelector('[data-challenge="web"][data-state="Stopped"]', { timeout: LONG });
    assert(teamInstanceGets === gets, `the team page read its list ${teamInstanceGets - gets} times more: not live`);
    const told = [...teamStreams.values()].map(streamText).join('').split('\n\n').some((ev) =>
      /^event: instance$/m.test(ev) && /"challenge":"web"/.test(ev) && /"state":"Stopped"/.test(ev));
    assert(told, 'the team page\'s event stream, as read, never said web Stopped');
    assert(await teamPage.locator('[data-challenge="broken"][data-state="Error"]').count() === 1, 'team-b/broken left the team page');
    await screenshot('team-b-stopped-live', teamPage);
    await page.waitForFunction(() => ![...document.querySelectorAll('#console-rows tr')]
      .some((tr) => tr.children[0].textContent === 'team-b' && tr.children[1].textContent === 'web'),
    null, { timeout: LONG });
    assert(/Stop web of team team-b/.test(asked), `the confirmation asked: ${asked}`);
    await settledPanel((t) => t.quota === 'No team is at its quota of 2.' && !t.table.some((r) => r[4] !== '0'),
      'the panel after the stop');
    const mine = await api('GET', '/teams/team-b/instances', TEAM_B);
    assert(mine.status === 200 && !mine.body.instances.some((i) => i.challenge === 'web'),
      `team-b's own list: ${JSON.stringify(mine.body)}`);
    const a = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(a.status === 200 && a.body.state === 'Running', `team-a/web after the stop: ${JSON.stringify(a.body)}`);
    await screenshot('stopped');
    await teamPage.reload();
    await teamPage.waitForSelector('#live[data-live="live"]');
    await teamPage.waitForSelector('[data-challenge="broken"][data-state="Error"]');
    const web = await teamPage.locator('[data-challenge="web"]').getAttribute('data-state');
    assert(web === 'Stopped', `team-b/web after the team page's reload: ${web}`);
  });

  await step('a cancelled Stop stops nothing; a column sorts both ways', async () => {
    await page.locator('#filter-team').fill('');
    page.once('dialog', (d) => d.dismiss());
    await page.getByRole('button', { name: 'Stop web of team team-a' }).click();
    await page.waitForTimeout(500);
    const a = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(a.status === 200 && a.body.state === 'Running', 'a dismissed confirmation stopped team-a/web');
    await page.locator('button[data-sort="team"]').click();
    await page.waitForSelector('th[aria-sort="descending"] button[data-sort="team"]');
    const down = (await cells()).map(([t]) => t);
    assert(JSON.stringify(down) === JSON.stringify([...down].sort().reverse()), `descending: ${down}`);
    await page.locator('button[data-sort="team"]').click();
    await page.waitForSelector('th[aria-sort="ascending"] button[data-sort="team"]');
  });

  await step('Extend, confirmed, extends team-a/web by its renewBy: the Challenge\'s expiresAt, the row\'s time left, an Event AdminExtend', async () => {
    const before = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(before.status === 200 && before.body.renewable && before.body.expiresAt,
      `team-a/web is not renewable: ${JSON.stringify(before.body)}`);
    const was = Date.parse(before.body.expiresAt);
    const chal = liveChallenges().find((c) => c.spec.team === 'team-a' && c.spec.definition === 'web');
    const uid = chal.metadata.uid;
    const left = consoleRow('team-a', 'web').locator('td.col-left');
    assert(Date.parse(await left.getAttribute('data-until')) === was, 'the row\'s time left is not the API\'s expiresAt');
    const leftBefore = seconds(await left.innerText());
    // A dismissed confirmation extends nothing: the confirmed one then moves the expiry by one renewBy, not two.
    const dismissed = confirmOnce(false);
    await page.getByRole('button', { name: 'Extend web of team team-a' }).click();
    await dismissed;
    const asked = confirmOnce(true);
    await page.getByRole('button', { name: 'Extend web of team team-a' }).click();
    assert(await asked === 'Extend web of team team-a?', `the confirmation asked: ${await asked}`);
    // The server's state: the Challenge's spec.expiresAt as kubectl reads it, 30 minutes (renewBy) later.
    const now = await until('team-a/web\'s spec.expiresAt to move', () => {
      const c = kget('challenges').items.find((x) => x.metadata.uid === uid);
      const at = Date.parse((c && c.spec.expiresAt) || '');
      return at > was ? at : 0;
    });
    assert(now - was === 1800 * 1000, `the expiry moved by ${(now - was) / 1000} s, not renewBy's 1800`);
    // The console shows it from its event stream: the row's time left grew by as much.
    await page.waitForFunction((at) => [...document.querySelectorAll('#console-rows tr')].some((tr) =>
      tr.children[0].textContent === 'team-a' && tr.children[1].textContent === 'web' &&
      Date.parse(tr.querySelector('td.col-left').dataset.until) === at), now, { timeout: LONG });
    const leftAfter = seconds(await left.innerText());
    assert(leftAfter - leftBefore > 1800 - 300 && leftAfter - leftBefore <= 1801,
      `the time left went from ${leftBefore} s to ${leftAfter} s`);
    await until('the Event AdminExtend about team-a/web', () =>
      eventsAbout(uid, 'AdminExtend').some((e) => /extended by the admin \(extend instance\): web of team team-a/.test(e.message)));
    assert(eventsAbout(uid, 'AdminExtend').length === 1, 'more than one AdminExtend Event: the dismissed Extend extended');
    const a = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(a.status === 200 && a.body.state === 'Running' && Date.parse(a.body.expiresAt) === now,
      `team-a/web after the extend: ${JSON.stringify(a.body)}`);
    assert(problems.length === 0, problems.join('; '));
    await screenshot('extended');
  });

  await step(`${SCALE} instances: the console renders them all and filters them`, async () => {
    const teams = SCALE_TEAMS;
    const t0 = Date.now();
    for (let i = 0; i < teams.length; i += 16) {
      const batch = await Promise.all(teams.slice(i, i + 16).map((t) => api('PUT', `/teams/${t}/instances/web`, ADMIN)));
      for (const r of batch) assert(r.status === 201, `PUT answered ${r.status} ${JSON.stringify(r.body)}`);
    }
    const made = Date.now() - t0;
    const want = SCALE + 2;
    const t0b = Date.now();
    await page.waitForFunction((n) => document.querySelectorAll('#console-rows tr').length === n, want,
      { timeout: LONG });
    const live = Date.now() - t0b;
    const t1 = Date.now();
    await page.reload();
    await page.waitForFunction((n) => document.querySelectorAll('#console-rows tr').length === n, want,
      { timeout: LONG });
    const rendered = Date.now() - t1;
    await screenshot(`scale-${SCALE}`);
    const t2 = Date.now();
    await page.locator('#filter-team').fill(teams[SCALE - 1]);
    await page.waitForFunction(() => document.querySelectorAll('#console-rows tr').length === 1);
    const filtered = Date.now() - t2;
    const t3 = Date.now();
    await page.locator('#filter-team').fill('');
    await page.waitForFunction((n) => document.querySelectorAll('#console-rows tr').length === n, want,
      { timeout: LONG });
    const cleared = Date.now() - t3;
    const shown = await page.locator('#console-shown').innerText();
    const totals = await page.locator('#console-totals').innerText();
    assert(shown === `${want} of ${want} instances shown.`, `shown: ${shown}`);
    assert(problems.length === 0, problems.join('; '));
    // The summary's cost as the API answers it (a measurement): it reads every Challenge of the cache.
    const took = [];
    for (let k = 0; k < 5; k += 1) {
      const t = performance.now();
      const r = await api('GET', '/admin/summary', ADMIN);
      took.push(performance.now() - t);
      assert(r.status === 200 && r.body.totals.teams >= SCALE, `the summary at scale: ${r.status}`);
    }
    took.sort((x, y) => x - y);
    console.log(`# GET /api/v1/admin/summary with ${want} instances: median ${took[2].toFixed(1)} ms of 5 ` +
      `(min ${took[0].toFixed(1)}, max ${took[4].toFixed(1)}), as answered over loopback`);
    // What a platform's backend reads for its own overview (the CTFd plugin's admin page reads
    // it whole on each view): every instance with its last Events (a measurement).
    const listed = [];
    let bytes = 0;
    for (let k = 0; k < 5; k += 1) {
      const t = performance.now();
      const res = await fetch(new URL('api/v1/admin/instances', URL_), { headers: { Authorization: `Bearer ${ADMIN}` } });
      const text = await res.text();
      listed.push(performance.now() - t);
      bytes = Buffer.byteLength(text);
      assert(res.status === 200 && JSON.parse(text).instances.length >= SCALE, `the admin list at scale: ${res.status}`);
    }
    listed.sort((x, y) => x - y);
    console.log(`# GET /api/v1/admin/instances with ${want} instances: ${bytes} bytes, median ` +
      `${listed[2].toFixed(1)} ms of 5 (min ${listed[0].toFixed(1)}, max ${listed[4].toFixed(1)}), over loopback`);
    console.log(`# ${SCALE} instances made through the API in ${made} ms; all ${want} rows in the open console ` +
      `${live} ms later; then the console reloaded and rendered ${want} rows in ${rendered} ms, filtered them ` +
      `to one in ${filtered} ms and back to all in ${cleared} ms (at the end: ${totals})`);
  });

  await step('a team token asking for the console gets its own page and why; nothing team-b\'s page received names another team', async () => {
    // The page remembers the console as the stored choice; a team token that sets it gets its own page.
    await teamPage.evaluate(() => localStorage.setItem('kopc-ctf-team', '-console'));
    await teamPage.reload();
    await teamPage.waitForSelector('#live[data-live="live"]');
    await teamPage.waitForSelector('[data-challenge="broken"][data-state="Error"]');
    const why = await teamPage.getByRole('alert').innerText();
    assert(/console needs the admin token.*team team-b/.test(why), `the page says: ${why}`);
    assert(await teamPage.locator('#team-name').innerText() === 'team-b', 'not team-b\'s page');
    assert(await teamPage.locator('#console').isHidden() && await teamPage.locator('#open-console').isHidden(),
      'the team page shows or offers the console');
    await screenshot('team-b-asks-for-console', teamPage);
    // Everything the page received from the API while it loaded, ran through the stop and the scale step, and reloaded.
    const api_ = teamResponses.filter((r) => new URL(r.url).pathname.startsWith('/api/'));
    const texts = await Promise.all(api_.map((r) => r.text.catch((err) => { throw new Error(`${r.url}: ${err.message}`); })));
    const streams = [...teamStreams.values()];
    await Promise.all(streams.map((st) => st.ready));
    for (const st of streams) assert(!st.error, `the stream ${st.url} could not be read: ${st.error}`);
    const streamTexts = streams.map(streamText);
    assert(api_.length >= 9 && texts.every((t, k) => api_[k].status !== 200 || t.length > 0), `API responses read: ${api_.length}`);
    assert(streams.length >= 3 && streamTexts.every((t) => /^event: snapshot$/m.test(t) && t.includes('"team":"team-b"')),
      `team-b's streams as read: ${streamTexts.map((t) => t.slice(0, 80))}`);
    const all = [...api_.map((r, k) => [r.url, texts[k]]), ...streams.map((st, k) => [st.url, streamTexts[k]])];
    for (const [url, text] of all) {
      const m = OTHERS_RE.exec(text);
      assert(!m, `${url} names team ${m && m[1]}: ${text.slice(Math.max(0, m ? m.index - 80 : 0), (m ? m.index : 0) + 80)}`);
    }
    console.log(`# team-b's page: ${api_.length} API responses (${texts.reduce((n, t) => n + t.length, 0)} bytes) and ` +
      `${streams.length} event streams (${streamTexts.reduce((n, t) => n + t.length, 0)} bytes read) name no other team`);
    // The admin routes, called from the page with its own token: 403, every one.
    const routes = [['GET', '/admin/instances'], ['GET', '/admin/summary'], ['GET', '/admin/events'],
      ['DELETE', '/admin/teams/team-a/instances'], ['DELETE', '/admin/challenges/web/instances'],
      ['DELETE', '/admin/teams/team-a/instances/web'], ['POST', '/admin/teams/team-a/instances/web/renew'],
      ['DELETE', '/admin/teams/team-b/instances/broken']];
    const got = await teamPage.evaluate(async (list) => {
      const token = localStorage.getItem('kopc-ctf-token');
      const out = [];
      for (const [method, p] of list) {
        const ctl = new AbortController();
        const res = await fetch(`/api/v1${p}`, { method, headers: { Authorization: `Bearer ${token}` }, signal: ctl.signal });
        out.push(`${method} ${p} ${res.status}`);
        ctl.abort();
      }
      return out;
    }, routes);
    const want = routes.map(([method, p]) => `${method} ${p} 403`);
    assert(JSON.stringify(got) === JSON.stringify(want), `the admin routes from the team page: ${got.join(', ')}`);
    const a = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(a.status === 200 && a.body.state === 'Running', `team-a/web after the team's tries: ${JSON.stringify(a.body)}`);
    const b = await api('GET', '/teams/team-b/instances/broken', ADMIN);
    assert(b.status === 200 && b.body.state === 'Error', `team-b/broken after the team's tries: ${JSON.stringify(b.body)}`);
  });

  await step('Stop all of this team\'s, confirmed, stops both of team-a\'s instances and no other team\'s; an Event AdminStop each', async () => {
    // team-a holds web; broken, made now, fills its quota of 2.
    const r = await api('PUT', '/teams/team-a/instances/broken', ADMIN);
    assert(r.status === 201, `PUT team-a/broken answered ${r.status} ${JSON.stringify(r.body)}`);
    const all = liveChallenges().filter((c) => c.spec.team);
    const mine = all.filter((c) => c.spec.team === 'team-a');
    assert(mine.length === 2, `team-a's Challenges: ${mine.map((c) => c.spec.definition)}`);
    const others = all.filter((c) => c.spec.team !== 'team-a');
    assert(others.some((c) => c.spec.team === 'team-b') && others.length >= SCALE + 1, `others: ${others.length}`);
    await stopAllThroughConsole('team', 'team-a', mine.map((c) => c.metadata.uid), others);
    await screenshot('stopped-all-of-team-a');
  });

  await step('Stop all of this challenge\'s, confirmed, stops every team\'s broken and nothing else; an Event AdminStop each', async () => {
    // broken: team-b's, and three more teams' made now (each of them keeps its web).
    for (const t of SCALE_TEAMS.slice(0, 3)) {
      const r = await api('PUT', `/teams/${t}/instances/broken`, ADMIN);
      assert(r.status === 201, `PUT ${t}/broken answered ${r.status} ${JSON.stringify(r.body)}`);
    }
    const all = liveChallenges().filter((c) => c.spec.team);
    const mine = all.filter((c) => c.spec.definition === 'broken');
    assert(mine.length === 4, `broken's Challenges: ${mine.map((c) => c.spec.team)}`);
    const others = all.filter((c) => c.spec.definition !== 'broken');
    assert(others.filter((c) => SCALE_TEAMS.slice(0, 3).includes(c.spec.team)).length === 3,
      'the three teams do not hold web');
    await stopAllThroughConsole('challenge', 'broken', mine.map((c) => c.metadata.uid), others);
    await screenshot('stopped-all-of-broken');
    await page.locator('#filter-challenge').fill('');
  });
}

main().catch((err) => {
  console.error(`FAIL: ${err.message}`);
  process.exit(1);
});
