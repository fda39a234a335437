// demo_page.mjs - what a newcomer does with the page of `make run`
// (tools/demo.sh), in headless Chromium: sign in with a team's token, press
// "Create server" on a challenge, wait until its card says Running, and
// print what the card offers to copy, one JSON line: {"challenge", "copy":
// [the Copy buttons' commands], "links": [the card's links]}. The caller
// (test/e2e/demo_check.sh) runs the commands from the host. Nothing is
// assumed about the commands here: they are read as the page shows them.
//
// Env: PAGE_URL (default http://127.0.0.1:8080/), PAGE_TOKEN, PAGE_CHALLENGE,
// CHROMIUM. Exits non-zero with a FAIL line on the first failure.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const URL_ = process.env.PAGE_URL || 'http://127.0.0.1:8080/';
const TOKEN = process.env.PAGE_TOKEN;
const CHALLENGE = process.env.PAGE_CHALLENGE;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const LONG = 180_000; // a first start pulls the image: generous, never a timing assertion

async function main() {
  if (!TOKEN || !CHALLENGE) throw new Error('PAGE_TOKEN and PAGE_CHALLENGE must be set');
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'kopc-demo-page-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage', '--disable-extensions', '--disable-default-apps'],
  });
  try {
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(URL_);
    await page.getByLabel('Team token').fill(TOKEN);
    await page.getByLabel('Team token').press('Enter');
    const card = page.locator(`[data-challenge="${CHALLENGE}"]`);
    await card.waitFor();
    // A card still Stopping (an earlier run's instance going away) has no
    // Create button yet: wait until it is Stopped, Starting or Running.
    await page.locator(['Stopped', 'Starting', 'Running']
      .map((s) => `[data-challenge="${CHALLENGE}"][data-state="${s}"]`).join(', '))
      .first().waitFor({ timeout: LONG });
    const create = card.locator('[data-action="create"]');
    if (await create.count() === 1) await create.click();
    await page.locator(`[data-challenge="${CHALLENGE}"][data-state="Running"]`).waitFor({ timeout: LONG });
    const running = page.locator(`[data-challenge="${CHALLENGE}"][data-state="Running"]`);
    const copy = await running.locator('[data-action="copy"]').evaluateAll(
      (bs) => bs.map((b) => b.getAttribute('data-copy')));
    const links = await running.locator('.endpoint a').evaluateAll((as) => as.map((a) => a.href));
    console.log(JSON.stringify({ challenge: CHALLENGE, copy, links }));
  } finally {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(`FAIL: ${err.message.split('\n').slice(0, 6).join('\n  ')}`);
  process.exit(1);
});
