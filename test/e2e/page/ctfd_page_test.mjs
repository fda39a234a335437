// ctfd_page_test.mjs - the kopc plugin in headless Chromium, through CTFd's
// own pages (run by test/e2e/ctfd_test.sh after ctfd_test.py has set CTFd
// up): a player logs in with CTFd's login form, opens the kopc challenge
// from the challenge board, presses Start, sees Starting then Running with
// the connection line, reloads the page (the window reopens from the URL's
// hash) and still sees Running, presses Stop and sees the instance go.
// Then the organizer's side: the player starts again, an admin (a browser of
// their own) opens the plugin's admin page (/admin/kopc), finds the team's
// Running row, cancels a Stop at the confirmation (nothing happens), then
// confirms it: the page says it stopped, the row is no longer Running, and
// the player's window, reloaded, shows Not running.
// Each step asserts, then keeps a screenshot in ARTIFACTS (admin-overview is
// docs/ctfd-admin.png).
//
// Env: CTFD (CTFd's URL), STATE_FILE (JSON: player, password, challenge_id,
// challenge_name, kopc_team, definition, admin, admin_password), ARTIFACTS,
// CHROMIUM (default /usr/bin/chromium).
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const CTFD = need('CTFD').replace(/\/$/, '');
const STATE = JSON.parse(fs.readFileSync(need('STATE_FILE'), 'utf8'));
const ARTIFACTS = need('ARTIFACTS');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const LONG = 180_000; // generous bounds, never timing assertions

let page;
let shot = 0;
let passed = 0;
const problems = [];

async function screenshot(name, of = page) {
  shot += 1;
  await of.screenshot({ path: path.join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`), fullPage: true });
}

async function step(title, fn) {
  try {
    await fn();
  } catch (err) {
    console.error(`FAIL: ${title}: ${err.message.split('\n').slice(0, 6).join('\n  ')}`);
    try {
      await page.screenshot({ path: path.join(ARTIFACTS, 'failure.png'), fullPage: true });
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

const panel = () => page.locator('#kopc-instance');
const state = () => panel().locator('.kopc-state');
const waitState = (s) => panel().locator(`.kopc-state[data-state="${s}"]`).waitFor({ timeout: LONG });

const profiles = [];

// browser(): a Chromium of its own (its own profile, so its own CTFd login).
async function browser() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kopc-ctfd-chromium-'));
  profiles.push(profile);
  return chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-dev-shm-usage',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-extensions'],
  });
}

let adminContext = null;

async function main() {
  const context = await browser();
  try {
    page = context.pages()[0] || (await context.newPage());
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await run();
  } finally {
    await context.close();
    if (adminContext) await adminContext.close();
    for (const p of profiles) fs.rmSync(p, { recursive: true, force: true });
  }
}

async function login(p, name, password) {
  await p.goto(`${CTFD}/login`);
  await p.locator('input[name="name"]').fill(name);
  await p.locator('input[name="password"]').fill(password);
  await Promise.all([p.waitForNavigation(), p.locator('form [type="submit"]').first().click()]);
  assert(!p.url().includes('/login'), `still on the login page: ${p.url()}`);
}

async function run() {
  await step(`${STATE.player} logs in through CTFd's login page`, async () => {
    await login(page, STATE.player, STATE.password);
    await screenshot('logged-in');
  });

  await step('the challenge window shows the instance panel, Not running, with Start', async () => {
    await page.goto(`${CTFD}/challenges`);
    await page.getByRole('button', { name: new RegExp(STATE.challenge_name) }).first().click();
    await waitState('Stopped');
    assert(await panel().locator('.kopc-start').isVisible(), 'no Start button');
    assert(!(await panel().locator('.kopc-stop').isVisible()), 'a Stop button for no instance');
    await screenshot('window-stopped');
  });

  let connection = '';
  await step('Start: Starting, then Running with the connection line and a countdown', async () => {
    await panel().locator('.kopc-start').click();
    await waitState('Running');
    connection = (await panel().locator('.kopc-endpoint code').first().innerText()).trim();
    assert(/^nc \d+\.\d+\.\d+\.\d+ \d+$/.test(connection), `connection line ${JSON.stringify(connection)}`);
    const expiry = await panel().locator('.kopc-expiry').innerText();
    assert(/^Expires in \d+:\d\d/.test(expiry), `expiry ${JSON.stringify(expiry)}`);
    assert(await panel().locator('.kopc-stop').isVisible(), 'no Stop button while Running');
    await screenshot('running');
  });

  await step('after a reload the window reopens and still shows Running, same connection', async () => {
    await page.reload();
    await waitState('Running');
    const again = (await panel().locator('.kopc-endpoint code').first().innerText()).trim();
    assert(again === connection, `after reload ${again}, before ${connection}`);
    await screenshot('reloaded-running');
  });

  await step('Stop: the instance goes, Start comes back', async () => {
    await panel().locator('.kopc-stop').click();
    await waitState('Stopped');
    assert(await panel().locator('.kopc-start').isVisible(), 'no Start button after Stop');
    await screenshot('stopped');
  });

  await step('Start again: Running (a new instance, a new connection line), for the organizer to see', async () => {
    await panel().locator('.kopc-start').click();
    await waitState('Running');
    connection = (await panel().locator('.kopc-endpoint code').first().innerText()).trim();
    assert(/^nc \d+\.\d+\.\d+\.\d+ \d+$/.test(connection), `connection line ${JSON.stringify(connection)}`);
  });

  let admin;
  const row = () => admin.locator(
    `tr.kopc-instance-row[data-team="${STATE.kopc_team}"][data-challenge="${STATE.definition}"]`);
  await step("the admin page lists the team's Running instance with its endpoint", async () => {
    adminContext = await browser();
    admin = adminContext.pages()[0] || (await adminContext.newPage());
    admin.on('pageerror', (e) => problems.push(`admin pageerror: ${e.message}`));
    await login(admin, STATE.admin, STATE.admin_password);
    await admin.goto(`${CTFD}/admin/kopc`);
    await row().waitFor({ timeout: LONG });
    assert((await row().getAttribute('data-state')) === 'Running', `state ${await row().getAttribute('data-state')}`);
    const [host, port] = (await row().getAttribute('data-endpoint')).split(':');
    assert(connection === `nc ${host} ${port}`, `endpoint ${host}:${port}, the player sees ${connection}`);
    assert((await row().locator('td').first().innerText()).includes('Red Team'), 'no CTFd team name in the row');
    await row().scrollIntoViewIfNeeded();
    await screenshot('admin-overview', admin);
  });

  await step('a Stop cancelled at the confirmation stops nothing', async () => {
    const asked = new Promise((resolve) => admin.once('dialog', (d) => { resolve(d.message()); d.dismiss(); }));
    await row().locator('button.kopc-stop').click();
    const question = await asked;
    assert(question.includes(STATE.kopc_team) && question.startsWith('Stop '), `the question: ${question}`);
    assert((await row().count()) === 1 && (await row().getAttribute('data-state')) === 'Running',
      'the row changed after a cancelled Stop');
    assert(admin.url().endsWith('/admin/kopc'), `the page moved: ${admin.url()}`);
  });

  await step('a Stop confirmed: the page says so, the row is no longer Running', async () => {
    admin.once('dialog', (d) => d.accept());
    await Promise.all([admin.waitForNavigation(), row().locator('button.kopc-stop').click()]);
    const notice = await admin.locator('.kopc-notice').innerText();
    assert(notice.includes(`Stopped ${STATE.definition} of Red Team (${STATE.kopc_team})`), `notice ${notice}`);
    const left = await row().count();
    assert(left === 0 || (await row().getAttribute('data-state')) === 'Stopping', 'the row is still Running');
    await screenshot('admin-stopped', admin);
  });

  await step("the player's window, reloaded, shows Not running", async () => {
    await page.reload();
    await waitState('Stopped');
    assert(await panel().locator('.kopc-start').isVisible(), 'no Start button after the admin stopped it');
    await screenshot('player-after-admin-stop');
  });

  await step('no page errors', async () => {
    assert(problems.length === 0, problems.join('\n'));
    assert((await state().count()) === 1, 'the panel is gone');
  });
  console.log(`${passed} passed; screenshots in ${ARTIFACTS}`);
}

main().catch((err) => {
  console.error(`FAIL: ${err.stack || err.message}`);
  process.exit(1);
});
