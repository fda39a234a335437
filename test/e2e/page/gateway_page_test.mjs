// gateway_page_test.mjs - what a participant sees of an instance in the
// gateway mode (issue 29), in headless Chromium: run by ctf_gateway_test.sh
// against the real CTF operator started with --gateway-domain, once a TCP and
// an HTTP instance of the team are Running behind routes the gateway accepted.
//   - The participant page: the TCP instance's card shows the three commands
//     with the instance's own host, `ncat --ssl <host> 443`,
//     `openssl s_client -quiet -connect <host>:443 -servername <host>` and
//     `remote("<host>", 443, ssl=True, sni="<host>")`, and no `nc` line; each
//     Copy puts exactly its command in the clipboard. The HTTP instance's card
//     links to https://<host>. Another team's host appears nowhere. On a
//     phone the commands wrap inside the card. A screenshot of the cards is
//     kept (docs/page-gateway.png is one).
//   - The CTFd plugin's player view (integrations/ctfd/kopc_ctfd/assets/
//     view.js and view.html): given what the plugin's route answers for the
//     same instances (the operator's Instance view through mapping.player_view,
//     written by the script), it shows the same commands with Copy and the
//     same https link. CTFd itself is not here (e2e_ctfd runs the plugin
//     inside CTFd); the page around the panel is view.html's block with a
//     CTFd object giving what view.js uses of CTFd (its fetch, its challenge
//     hooks).
//
// Env: PAGE_URL (the operator's page), PAGE_TEAM, PAGE_TOKEN, PAGE_TCP and
// PAGE_TCP_HOST (a TCP challenge of the team and its host), PAGE_HTTP and
// PAGE_HTTP_HOST (an HTTP one), PAGE_OTHER_HOST (another team's host),
// PAGE_CTFD_TCP and PAGE_CTFD_HTTP (files: the plugin route's JSON answer for
// each), PAGE_SRC (the repository), PAGE_ARTIFACTS, CHROMIUM.
// Exits non-zero with a FAIL line on the first failure.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const env = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`FAIL: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const URL_ = env('PAGE_URL');
const TEAM = env('PAGE_TEAM');
const TOKEN = env('PAGE_TOKEN');
const TCP = env('PAGE_TCP');
const TCP_HOST = env('PAGE_TCP_HOST');
const HTTP = env('PAGE_HTTP');
const HTTP_HOST = env('PAGE_HTTP_HOST');
const OTHER_HOST = env('PAGE_OTHER_HOST');
const CTFD_TCP = env('PAGE_CTFD_TCP');
const CTFD_HTTP = env('PAGE_CTFD_HTTP');
const SRC = env('PAGE_SRC');
const ARTIFACTS = env('PAGE_ARTIFACTS');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const LONG = 120_000; // generous bounds, never timing assertions

// What a participant types, exactly as docs/api.md and docs/running-a-ctf.md say.
const commands = (host) => ({
  ncat: `ncat --ssl ${host} 443`,
  openssl: `openssl s_client -quiet -connect ${host}:443 -servername ${host}`,
  pwntools: `remote("${host}", 443, ssl=True, sni="${host}")`,
});

let page;
let passed = 0;
const problems = [];

async function step(title, fn) {
  try {
    await fn();
  } catch (err) {
    console.error(`FAIL: ${title}: ${err.message.split('\n').slice(0, 6).join('\n  ')}`);
    try {
      const file = path.join(ARTIFACTS, 'failure.png');
      await page.screenshot({ path: file, fullPage: true });
      console.error(`  screenshot: ${file}`);
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

// copies(scope, host): every command of host is shown under scope with a
// Copy button whose click puts exactly that command in the clipboard.
async function copies(scope, lineSel, host) {
  for (const [tool, cmd] of Object.entries(commands(host))) {
    const line = scope.locator(`${lineSel}[data-tool="${tool}"]`);
    assert(await line.count() === 1, `${await line.count()} ${tool} lines, not 1`);
    const shown = (await line.locator('code').innerText()).trim();
    assert(shown === cmd, `the ${tool} line says ${JSON.stringify(shown)}, not ${JSON.stringify(cmd)}`);
    const copy = line.getByRole('button', { name: `Copy ${cmd}`, exact: true });
    await page.evaluate(() => navigator.clipboard.writeText('(nothing copied yet)'));
    await copy.click();
    await page.waitForFunction((want) => navigator.clipboard.readText().then((t) => t === want), cmd,
      { timeout: 10_000, polling: 100 }).catch(async () => {
      throw new Error(`after Copy the clipboard holds ${JSON.stringify(await page.evaluate(() => navigator.clipboard.readText()))}, not ${JSON.stringify(cmd)}`);
    });
  }
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  if (!fs.existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (tools/install-deps.sh installs it)`);
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kopc-gateway-page-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1100, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage', '--disable-extensions', '--disable-default-apps'],
  });
  try {
    page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(30_000);
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(`console error: ${m.text()}`);
    });
    await participantPage(context);
    await ctfdView(context);
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
  console.log(`${passed} passed; screenshots in ${ARTIFACTS}`);
}

async function participantPage(context) {
  const origin = new URL(URL_).origin;
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
  const card = (c) => page.locator(`[data-challenge="${c}"]`);

  await step(`${TEAM} signs in and sees ${TCP} and ${HTTP} Running`, async () => {
    await page.goto(URL_);
    await page.getByLabel('Team token').fill(TOKEN);
    await page.getByLabel('Team token').press('Enter');
    for (const c of [TCP, HTTP]) {
      await page.locator(`[data-challenge="${c}"][data-state="Running"]`).waitFor({ timeout: LONG });
    }
    assert((await page.locator('#team-name').innerText()) === TEAM, 'wrong team name shown');
  });

  await step(`${TCP}: the gateway commands with its own host ${TCP_HOST}, no nc line`, async () => {
    const ep = card(TCP).locator('.endpoint.gateway');
    await ep.first().waitFor();
    assert((await ep.first().getAttribute('data-host')) === TCP_HOST, `the endpoint's host is ${await ep.first().getAttribute('data-host')}`);
    const text = await card(TCP).innerText();
    assert(!/(^|\n)\s*nc /.test(text) && !text.includes(`nc ${TCP_HOST}`), `an nc line is shown:\n${text}`);
    assert(text.includes('TLS on port 443'), `no "TLS on port 443" hint:\n${text}`);
  });

  await step('each Copy puts exactly its command in the clipboard', async () => {
    await copies(card(TCP), '.command', TCP_HOST);
  });

  await step(`${HTTP}: a link to https://${HTTP_HOST} in a new tab`, async () => {
    const link = card(HTTP).locator('.endpoint.gateway a');
    await link.first().waitFor();
    const want = `https://${HTTP_HOST}`;
    assert((await link.first().innerText()).trim() === want, `the link says ${await link.first().innerText()}`);
    assert((await link.first().getAttribute('href')) === want, `the link goes to ${await link.first().getAttribute('href')}`);
    assert((await link.first().getAttribute('target')) === '_blank', 'the link does not open a new tab');
    assert(/noopener/.test(await link.first().getAttribute('rel')), 'the link lacks rel=noopener');
  });

  await step(`another team's host (${OTHER_HOST}) appears nowhere; a screenshot of the two cards`, async () => {
    const html = await page.content();
    assert(!html.includes(OTHER_HOST), "another team's host is in the page");
    assert(problems.length === 0, problems.join('\n'));
    await page.screenshot({ path: path.join(ARTIFACTS, 'page-gateway.png'), fullPage: true });
  });

  await step('on a phone (390x844): the commands wrap inside the card, nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    assert(wide <= 390, `the page is ${wide}px wide on a 390px screen`);
    const cardBox = await card(TCP).boundingBox();
    for (const code of await card(TCP).locator('.command code').all()) {
      const b = await code.boundingBox();
      assert(b && b.x >= cardBox.x && b.x + b.width <= cardBox.x + cardBox.width + 0.5,
        `a command sticks out of its card (${JSON.stringify(b)} in ${JSON.stringify(cardBox)})`);
    }
    await card(TCP).screenshot({ path: path.join(ARTIFACTS, 'page-gateway-phone.png') });
    await page.setViewportSize({ width: 1100, height: 900 });
  });
}

// The CTFd plugin's player view. view.html is a Jinja template extending
// CTFd's challenge.html: its #kopc-instance block is taken with the
// challenge id filled in, and view.js runs as CTFd runs it (its postRender).
async function ctfdView(context) {
  const assets = path.join(SRC, 'integrations/ctfd/kopc_ctfd/assets');
  const tpl = fs.readFileSync(path.join(assets, 'view.html'), 'utf8');
  const block = tpl.match(/<div id="kopc-instance"[\s\S]*<\/div>\s*(?={% endblock %})/);
  if (!block) throw new Error('view.html has no #kopc-instance block');
  const panel = (id) => block[0].replace('{{ challenge.id }}', String(id));
  const viewJs = fs.readFileSync(path.join(assets, 'view.js'), 'utf8');
  const answers = { 1: fs.readFileSync(CTFD_TCP, 'utf8'), 2: fs.readFileSync(CTFD_HTTP, 'utf8') };
  // https: the clipboard is there only for a secure origin (Playwright answers
  // every request of it, so no certificate is involved).
  const ctfd = 'https://ctfd.test';
  const ctfdStub = `window.CTFd = { _internal: { challenge: {} }, lib: {}, api: {},
    fetch: (url, init) => fetch(url, init) };`;
  await context.route(`${ctfd}/**`, (route) => {
    const u = new URL(route.request().url());
    const m = u.pathname.match(/^\/plugins\/kopc_ctfd\/api\/instances\/(\d+)$/);
    if (m && answers[m[1]]) return route.fulfill({ status: 200, contentType: 'application/json', body: answers[m[1]] });
    if (u.pathname === '/view.js') return route.fulfill({ status: 200, contentType: 'text/javascript', body: viewJs });
    const id = Number(u.searchParams.get('id') || 1);
    return route.fulfill({
      status: 200,
      contentType: 'text/html',
      body: `<!doctype html><html><head><meta charset="utf-8"><title>challenge</title></head><body>
        ${panel(id)}<script>${ctfdStub}</script><script src="/view.js"></script>
        <script>CTFd._internal.challenge.postRender();</script></body></html>`,
    });
  });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: ctfd });
  const p = () => page.locator('#kopc-instance');

  await step("the CTFd plugin's view: the TCP instance's commands, each Copy exact", async () => {
    await page.goto(`${ctfd}/challenge?id=1`);
    await p().locator('.kopc-state[data-state="Running"]').waitFor({ timeout: 30_000 });
    const ep = p().locator('.kopc-endpoint.kopc-gateway');
    await ep.first().waitFor();
    assert((await ep.first().getAttribute('data-host')) === TCP_HOST, `the host is ${await ep.first().getAttribute('data-host')}`);
    assert(!(await p().innerText()).includes(`nc ${TCP_HOST}`), 'an nc line is shown');
    await copies(p(), '.kopc-command', TCP_HOST);
    await p().screenshot({ path: path.join(ARTIFACTS, 'ctfd-gateway-tcp.png') });
  });

  await step("the CTFd plugin's view: the HTTP instance's https link", async () => {
    await page.goto(`${ctfd}/challenge?id=2`);
    await p().locator('.kopc-state[data-state="Running"]').waitFor({ timeout: 30_000 });
    const link = p().locator('.kopc-endpoint.kopc-gateway a');
    await link.first().waitFor();
    const want = `https://${HTTP_HOST}`;
    assert((await link.first().innerText()).trim() === want, `the link says ${await link.first().innerText()}`);
    assert((await link.first().getAttribute('href')) === want, `the link goes to ${await link.first().getAttribute('href')}`);
    assert(problems.length === 0, problems.join('\n'));
  });
}

main().catch((err) => {
  console.error(`FAIL: ${err.message}`);
  process.exit(1);
});
