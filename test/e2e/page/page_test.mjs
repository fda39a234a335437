// page_test.mjs - the CTF participant page driven in headless Chromium, as a
// team would use it, against a running CTF operator (ctf_page_test.sh sets
// it up): a wrong token is refused; signing in shows the challenge Stopped;
// Create server goes Starting, then Running with an http:// endpoint; a
// reload keeps it Running with the same endpoint and never offers Create
// server; Extend moves the expiry later; when the operator is killed the
// page says it is reconnecting, and once it is back the page is live again
// with the instance as the new snapshot has it; a new version of the
// challenge pushed with Recreate shows Starting, then Running with the
// notice that the instance was updated, same endpoint and expiry; the page
// fits a phone;
// Stop goes Stopping, then Stopped; Sign out forgets the token; an admin
// token acts for a chosen team. Each step asserts, then takes a screenshot.
//
// Env: PAGE_URL (the page, e.g. http://127.0.0.1:8080/), PAGE_TEAM,
// PAGE_TOKEN (that team's token), PAGE_ADMIN_TOKEN (optional),
// PAGE_CHALLENGE (a definition with an HTTP expose), PAGE_ARTIFACTS
// (screenshot directory), PAGE_CONTROL (a directory: the test writes "stop"
// or "start" there and waits for "stopped" or "started"; without it the
// restart step is left out), CHROMIUM (default /usr/bin/chromium).
// Exits non-zero with a FAIL line on the first failure.
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
const URL_ = env('PAGE_URL');
const TEAM = env('PAGE_TEAM');
const TOKEN = env('PAGE_TOKEN');
const ADMIN_TOKEN = process.env.PAGE_ADMIN_TOKEN || '';
const CHALLENGE = env('PAGE_CHALLENGE', 'web');
const ARTIFACTS = env('PAGE_ARTIFACTS');
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const CONTROL = process.env.PAGE_CONTROL || '';
// The flag the web challenge serves behind the path its robots.txt names:
// the endpoint the page shows must lead to the running program.
const FLAG = process.env.PAGE_FLAG || '';

// Generous bounds, never timing assertions.
const SHORT = 30_000;
const LONG = 120_000;

let passed = 0;
let shot = 0;
let page;
const problems = []; // page errors and console errors (CSP violations among them)

const card = () => page.locator(`[data-challenge="${CHALLENGE}"]`);
const button = (name) => card().getByRole('button', { name, exact: true });

async function screenshot(name, opts = {}) {
  shot += 1;
  const file = path.join(ARTIFACTS, `${String(shot).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true, ...opts });
  return file;
}

// step(title, fn): run one step; on failure say which, keep a screenshot, exit 1.
async function step(title, fn) {
  try {
    await fn();
  } catch (err) {
    console.error(`FAIL: ${title}: ${err.message.split('\n').slice(0, 6).join('\n  ')}`);
    try {
      const file = path.join(ARTIFACTS, 'failure.png');
      await page.screenshot({ path: file, fullPage: true });
      console.error(`  screenshot: ${file}`);
      console.error(`  states seen: ${JSON.stringify(await statesSeen())}`);
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

async function noAlert() {
  const alert = page.getByRole('alert');
  if (await alert.isVisible()) throw new Error(`the page shows an error: ${await alert.innerText()}`);
}

// operator('stop' | 'start' | 'update'): ask ctf_page_test.sh to kill or
// start the operator, or to push a new version of the challenge (Recreate),
// and wait until it has.
async function operator(what) {
  const done = path.join(CONTROL, { stop: 'stopped', start: 'started', update: 'updated' }[what]);
  fs.rmSync(done, { force: true });
  fs.writeFileSync(path.join(CONTROL, what), '');
  const end = Date.now() + LONG;
  while (!fs.existsSync(done)) {
    if (Date.now() > end) throw new Error(`the operator did not ${what} within ${LONG / 1000} s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// gotoSoon(tab, url): tab.goto, again while the connection is refused, for
// up to 10 s. Running means the Service has a ready endpoint; kube-proxy
// programs the node port a moment after it hears of that endpoint (about a
// second, longer on a loaded machine), so the first click may come before
// the rule. The challenge's program waits 15 s before it listens, so had
// Running come before it answered, the 10 s here would not cover it.
async function gotoSoon(tab, url) {
  const end = Date.now() + 10_000;
  for (;;) {
    try {
      return await tab.goto(url);
    } catch (err) {
      if (!/ERR_CONNECTION_REFUSED/.test(err.message) || Date.now() > end) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

async function waitState(state, timeout = LONG) {
  await page.waitForSelector(`[data-challenge="${CHALLENGE}"][data-state="${state}"]`, { timeout });
}

// Every data-state the challenge's card has had since the document loaded,
// recorded by a MutationObserver (the init script below), so that states
// too short-lived to catch by waiting can still be asserted.
async function statesSeen() {
  return page.evaluate(() => window.__kopcStates || []);
}

function recordStates(challenge) {
  window.__kopcStates = [];
  const note = (el) => {
    if (el.nodeType !== 1 || el.dataset.challenge !== challenge) return;
    const s = el.dataset.state;
    const seen = window.__kopcStates;
    if (s && seen[seen.length - 1] !== s) seen.push(s);
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === 'attributes') note(r.target);
      for (const n of r.addedNodes || []) note(n);
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  for (const f of fs.readdirSync(ARTIFACTS)) if (f.endsWith('.png')) fs.rmSync(path.join(ARTIFACTS, f));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (tools/install-deps.sh installs it)`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kopc-page-'));
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
  await context.addInitScript(recordStates, CHALLENGE);
  page = context.pages()[0] || await context.newPage();
  page.setDefaultTimeout(SHORT);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Console errors but the browser's own note of an HTTP error status (the
  // wrong-token step causes one; the API's refusals are checked in the page).
  page.on('console', (m) => {
    if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });

  await step('the page loads and asks for a team token', async () => {
    await page.goto(URL_);
    await page.getByLabel('Team token').waitFor();
    assert(await page.getByRole('button', { name: 'Sign in' }).isVisible(), 'no Sign in button');
    await screenshot('sign-in');
  });

  await step('a wrong token is refused with a message in the alert region', async () => {
    await page.getByLabel('Team token').fill('not-a-token-anybody-has');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    assert(/not accepted/i.test(await alert.innerText()), `alert says: ${await alert.innerText()}`);
    assert(await page.getByLabel('Team token').isVisible(), 'the sign-in form went away');
    await screenshot('wrong-token');
  });

  await step(`signing in shows team ${TEAM} and ${CHALLENGE} Stopped with a Create server button`, async () => {
    await page.getByLabel('Team token').fill(TOKEN);
    await page.getByLabel('Team token').press('Enter');
    await card().waitFor({ timeout: LONG });
    await waitState('Stopped', SHORT);
    assert((await page.locator('#team-name').innerText()) === TEAM, 'wrong team name shown');
    await button('Create server').waitFor();
    await noAlert();
    const title = await card().locator('h3').innerText();
    assert(title.length > 0, 'the card has no title');
    assert(/\d+ points/.test(await card().innerText()), 'the card shows no points');
    await page.locator('#live[data-live="live"]').waitFor({ timeout: LONG });
    await screenshot('signed-in');
  });

  await step('Create server (pressed with the keyboard) shows Starting, with no Create server button', async () => {
    await button('Create server').focus();
    await page.keyboard.press('Enter');
    await waitState('Starting');
    assert(await button('Create server').count() === 0, 'Create server is offered while starting');
    await screenshot('starting');
  });

  let endpoint;
  await step('then Running, with an http:// endpoint, a countdown, Extend and Stop', async () => {
    await waitState('Running');
    const link = card().locator('.endpoints a');
    await link.first().waitFor();
    endpoint = await link.first().innerText();
    assert(/^https?:\/\/\S+$/.test(endpoint), `endpoint '${endpoint}' is not a URL`);
    assert((await link.first().getAttribute('href')) === endpoint, 'the link does not go to the endpoint');
    assert((await link.first().getAttribute('target')) === '_blank', 'the link does not open a new tab');
    assert(/noopener/.test(await link.first().getAttribute('rel')), 'the link lacks rel=noopener');
    await page.waitForFunction((c) => /\d+:\d\d/.test(
      document.querySelector(`[data-challenge="${c}"] .countdown`)?.textContent || ''), CHALLENGE);
    await button('Extend').waitFor();
    await button('Stop').waitFor();
    assert(await button('Create server').count() === 0, 'Create server is offered while running');
    const seen = await statesSeen();
    assert(seen.join(',') === 'Stopped,Starting,Running', `states went ${seen.join(' -> ')}`);
    await screenshot('running');
  });

  if (FLAG) {
    await step('the endpoint the page shows leads to the running challenge and its flag', async () => {
      const tab = await page.context().newPage();
      try {
        const front = await gotoSoon(tab, endpoint);
        assert(front && front.ok(), `GET ${endpoint}: ${front && front.status()}`);
        await tab.getByRole('heading', { name: 'Nothing to see here' }).waitFor();
        await tab.screenshot({ path: path.join(ARTIFACTS, `${String(++shot).padStart(2, '0')}-challenge.png`) });
        const robots = await (await tab.goto(new URL('/robots.txt', endpoint).href)).text();
        const hidden = (robots.match(/^Disallow:\s*(\S+)/m) || [])[1];
        assert(hidden, `robots.txt names no path: ${robots}`);
        const flag = (await (await tab.goto(new URL(hidden, endpoint).href)).text()).trim();
        assert(flag === FLAG, `the challenge served '${flag}', not the team's flag`);
      } finally {
        await tab.close();
      }
    });
  }

  await step('after a reload: still Running, the same endpoint, never a Create server button', async () => {
    await page.reload();
    await waitState('Running');
    await card().locator('.endpoints a').first().waitFor();
    const again = await card().locator('.endpoints a').first().innerText();
    assert(again === endpoint, `endpoint was ${endpoint}, after the reload ${again}`);
    assert(await button('Create server').count() === 0, 'Create server is offered after the reload');
    const seen = await statesSeen();
    assert(seen.join(',') === 'Running', `after the reload the card was ${seen.join(' -> ')}`);
    assert(await page.getByLabel('Team token').isHidden(), 'the reload asked for the token again');
    await screenshot('reloaded');
  });

  await step('Extend moves the expiry later', async () => {
    const before = await card().getAttribute('data-expires-at');
    assert(before && !Number.isNaN(Date.parse(before)), `no expiry before: ${before}`);
    await button('Extend').click();
    await page.waitForFunction(([c, b]) => {
      const e = document.querySelector(`[data-challenge="${c}"]`)?.dataset.expiresAt;
      return e && Date.parse(e) > Date.parse(b);
    }, [CHALLENGE, before], { timeout: SHORT });
    const after = await card().getAttribute('data-expires-at');
    assert(Date.parse(after) > Date.parse(before), `expiry ${before} -> ${after}`);
    await noAlert();
    await screenshot('extended');
  });

  if (CONTROL) {
    await step('the operator restarts: the page says it is reconnecting, then is live again, same instance', async () => {
      const expires = await card().getAttribute('data-expires-at');
      await operator('stop');
      await page.locator('#live[data-live="retrying"]').waitFor({ timeout: LONG });
      assert(/reconnecting/i.test(await page.locator('#live').innerText()), 'no word of reconnecting');
      assert((await card().getAttribute('data-state')) === 'Running', 'the card lost its state');
      await screenshot('reconnecting');
      await operator('start');
      await page.locator('#live[data-live="live"]').waitFor({ timeout: LONG });
      await waitState('Running', SHORT);
      const again = await card().locator('.endpoints a').first().innerText();
      assert(again === endpoint, `endpoint was ${endpoint}, after the restart ${again}`);
      assert((await card().getAttribute('data-expires-at')) === expires, 'the expiry changed over the restart');
      await noAlert();
      await screenshot('reconnected');
    });
    await step('a new version of the challenge: Starting, then Running with the notice, same endpoint and expiry', async () => {
      const expires = await card().getAttribute('data-expires-at');
      const seenBefore = (await statesSeen()).length;
      await operator('update');
      await card().locator('[data-notice="updated"]').waitFor({ timeout: LONG });
      await waitState('Running', SHORT);
      assert(/updated to the new version/i.test(await card().locator('[data-notice="updated"]').innerText()),
        'the notice does not say the instance was updated');
      const again = await card().locator('.endpoints a').first().innerText();
      assert(again === endpoint, `endpoint was ${endpoint}, after the update ${again}`);
      assert((await card().getAttribute('data-expires-at')) === expires, 'the expiry changed over the update');
      assert((await statesSeen()).slice(seenBefore).includes('Starting'),
        'the card never showed the update in progress');
      await noAlert();
      await screenshot('updated');
    });
  } else {
    console.log('# PAGE_CONTROL is not set: the operator restart and update steps are left out');
  }

  await step('on a phone (390x844): one column, nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert(wide <= 390, `the page is ${wide}px wide on a 390px screen`);
    const box = await card().boundingBox();
    assert(box && box.width <= 390, 'the card is wider than the screen');
    await screenshot('phone');
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  await step('Stop goes Stopping, then Stopped, and Create server is back', async () => {
    await page.evaluate(() => { window.__kopcStates = ['Running']; });
    await button('Stop').click();
    await page.waitForFunction(() => (window.__kopcStates || []).includes('Stopping'), null, { timeout: LONG });
    if ((await card().getAttribute('data-state')) === 'Stopping') await screenshot('stopping');
    await waitState('Stopped');
    await button('Create server').waitFor();
    const seen = await statesSeen();
    assert(seen.join(',') === 'Running,Stopping,Stopped', `states went ${seen.join(' -> ')}`);
    await screenshot('stopped');
  });

  await step('Sign out forgets the token, also across a reload', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Team token').waitFor();
    assert(await page.evaluate(() => localStorage.length) === 0, 'something is left in localStorage');
    await page.reload();
    await page.getByLabel('Team token').waitFor();
    assert(await card().count() === 0, 'challenges are shown while signed out');
    await screenshot('signed-out');
  });

  if (ADMIN_TOKEN) {
    await step(`an admin token asks for a team, then acts for ${TEAM}`, async () => {
      await page.getByLabel('Team token').fill(ADMIN_TOKEN);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByLabel('Team name').fill(TEAM);
      await page.getByRole('button', { name: 'Act for this team' }).click();
      await waitState('Stopped');
      assert((await page.locator('#team-name').innerText()) === TEAM, 'wrong team name shown');
      await button('Create server').waitFor();
      await screenshot('admin');
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('Team token').waitFor();
    });
  }

  await step('no page errors and no console errors (CSP violations among them)', async () => {
    assert(problems.length === 0, problems.join('\n'));
  });
  console.log(`${passed} passed, 0 failed; screenshots in ${ARTIFACTS}`);
}

main().catch((err) => {
  console.error(`FAIL: ${err.stack || err.message}`);
  process.exit(1);
});
