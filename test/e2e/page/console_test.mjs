// console_test.mjs - the organizer's console (the page's admin mode) driven
// in headless Chromium against a running CTF operator (ctf_console_test.sh
// sets it up: team-a/web and team-b/web Running, team-b/broken in Error):
// the admin token opens the console, which lists the three instances with
// their states and the Error's reason; a filter by team shows only that
// team's; Stop (confirmed) stops team-b/web, whose row goes and which leaves
// team-b's own list; a column sorts both ways. Then CONSOLE_SCALE instances
// (admin PUTs of one per team): the console renders them all while they
// start (the stream's changes pouring in), then, reloaded, renders them and
// a filter narrows them to one and back, all while the operator is still
// starting them on the loaded test machine; the times are printed with the
// states at that moment (measurements, bounded only by generous timeouts).
// Each step asserts, then takes a screenshot.
//
// Env: CONSOLE_URL (the page), CONSOLE_ADMIN_TOKEN, CONSOLE_TEAM_B_TOKEN,
// CONSOLE_SCALE (default 2000), CONSOLE_ARTIFACTS (screenshot directory),
// CHROMIUM (default /usr/bin/chromium). Exits non-zero with a FAIL line on the
// first failure.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
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

const SHORT = 30_000;
const LONG = 180_000;

let passed = 0;
let shot = 0;
let page;
const problems = [];

const rows = () => page.locator('#console-rows tr');

async function screenshot(name) {
  shot += 1;
  await page.screenshot({ path: path.join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`) });
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

// cells(): the team and challenge of every row shown, in order.
async function cells() {
  return page.$$eval('#console-rows tr', (trs) => trs.map((tr) => [tr.children[0].textContent,
    tr.children[1].textContent, tr.dataset.state]));
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  for (const f of fs.readdirSync(ARTIFACTS)) if (f.endsWith('.png')) fs.rmSync(path.join(ARTIFACTS, f));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kopc-console-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage', '--disable-extensions', '--disable-default-apps'],
  });
  try {
    await run(context);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

async function run(context) {
  page = context.pages()[0] || await context.newPage();
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
    const totals = await page.locator('#console-totals').innerText();
    assert(/^3 of \d+ instances: 2 running, 0 starting, 1 failed, 0 stopping\.$/.test(totals), `totals: ${totals}`);
    assert((await rows().nth(0).locator('td.col-endpoint').innerText()).trim(), 'no endpoint for team-a/web');
    assert(problems.length === 0, problems.join('; '));
    await screenshot('console');
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

  await step('Stop, confirmed, stops team-b/web: its row goes and team-b\'s own list no longer has it', async () => {
    let asked = '';
    page.once('dialog', (d) => { asked = d.message(); d.accept(); });
    await page.getByRole('button', { name: 'Stop web of team team-b' }).click();
    await page.waitForFunction(() => ![...document.querySelectorAll('#console-rows tr')]
      .some((tr) => tr.children[0].textContent === 'team-b' && tr.children[1].textContent === 'web'),
    null, { timeout: LONG });
    assert(/Stop web of team team-b/.test(asked), `the confirmation asked: ${asked}`);
    const mine = await api('GET', '/teams/team-b/instances', TEAM_B);
    assert(mine.status === 200 && !mine.body.instances.some((i) => i.challenge === 'web'),
      `team-b's own list: ${JSON.stringify(mine.body)}`);
    const a = await api('GET', '/teams/team-a/instances/web', ADMIN);
    assert(a.status === 200 && a.body.state === 'Running', `team-a/web after the stop: ${JSON.stringify(a.body)}`);
    await screenshot('stopped');
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

  await step(`${SCALE} instances: the console renders them all and filters them`, async () => {
    const teams = Array.from({ length: SCALE }, (_, i) => `s${String(i).padStart(4, '0')}`);
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
    console.log(`# ${SCALE} instances made through the API in ${made} ms; all ${want} rows in the open console ` +
      `${live} ms later; then the console reloaded and rendered ${want} rows in ${rendered} ms, filtered them ` +
      `to one in ${filtered} ms and back to all in ${cleared} ms (at the end: ${totals})`);
  });
}

main().catch((err) => {
  console.error(`FAIL: ${err.message}`);
  process.exit(1);
});
