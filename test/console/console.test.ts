import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Worker } from '@temporalio/worker';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { breakerKey, breakerWorkflowId } from '../../src/breaker';
import { mosaicStatus, mosaicWorkflowId, startMosaic } from '../../src/client/mosaics';
import { createWorker } from '../../src/client/worker';
import { startConsole, type ConsoleServer } from '../../src/console/server';
import { startDemoTileServer, type DemoTileServer } from '../../src/demo/tile-server';
import { statusQuery } from '../../src/messages/breaker';
import type { MosaicResult } from '../../src/messages/mosaic-types';
import { BREAKER_SEARCH_ATTRIBUTES } from '../../src/messages/search-attributes';
import { demoRequest, readManifest, type Manifest } from '../helpers/mosaic';
import { devServerEnv, TEST_ROOTS, uniqueTaskQueue } from '../helpers/temporal-env';

/** Debian's browser: no browser can be downloaded here, and .ci/run installs this one. */
const CHROMIUM = process.env['TILEBREAKER_CHROMIUM'] ?? '/usr/bin/chromium';
/** Screenshots are kept as the test's artefacts (the README's picture is one of them). */
const ARTEFACTS = path.resolve(process.env['TILEBREAKER_TEST_ARTEFACTS'] ?? 'out/test-artefacts', 'console');

let env: TestWorkflowEnvironment;
let worker: Worker;
let running: Promise<void>;
let browser: Browser;
let tiles: DemoTileServer;
let readOnly: ConsoleServer;
let withActions: ConsoleServer;
const taskQueue = uniqueTaskQueue('console');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-console-'));
const BREAKER = { config: { minSamples: 4, fastMinSamples: 4, cooldownMs: 1_000, cooldownMaxFactor: 2, rampMs: 500 } };

before(async () => {
  assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM}: apt-get install chromium (or set TILEBREAKER_CHROMIUM)`);
  mkdirSync(ARTEFACTS, { recursive: true });
  env = await devServerEnv(BREAKER_SEARCH_ATTRIBUTES);
  worker = await createWorker({
    connection: env.nativeConnection,
    client: env.client,
    namespace: 'default',
    taskQueue,
    breaker: BREAKER,
    roots: TEST_ROOTS,
  });
  running = worker.run();
  readOnly = await startConsole({ client: env.client, taskQueue, roots: TEST_ROOTS });
  withActions = await startConsole({
    client: env.client,
    taskQueue,
    roots: TEST_ROOTS,
    allowActions: true,
    actor: 'console:test',
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});
after(async () => {
  await browser?.close();
  await readOnly?.close();
  await withActions?.close();
  worker?.shutdown();
  await running;
  await env?.teardown();
  await tiles?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function openPage(server: ConsoleServer): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.waitForSelector('#updated:not(:empty)');
  assert.deepEqual(errors, [], 'the page runs without a script error');
  return page;
}

/** The map's screenshot: pixels of its bare background (#dfe3e8, where no image is) and of the red holes. */
async function mapPixels(page: Page): Promise<{ background: number; red: number; px: number }> {
  const shot = await page.locator('#map').screenshot({ path: path.join(ARTEFACTS, 'map.png') });
  const { data, info } = await sharp(shot).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  let background = 0;
  let red = 0;
  for (let p = 0; p < data.length; p += 3) {
    const [r, g, b] = [data[p]!, data[p + 1]!, data[p + 2]!];
    if (Math.abs(r - 0xdf) < 4 && Math.abs(g - 0xe3) < 4 && Math.abs(b - 0xe8) < 4) background++;
    if (r > g + 70 && r > b + 70) red++;
  }
  return { background, red, px: info.width * info.height };
}

const entity = (s: DemoTileServer) => env.client.workflow.getHandle(breakerWorkflowId(breakerKey(s.url)));

let result: MosaicResult;
let manifest: Manifest;
let key: string;
let workflowId: string;

test('during a mosaic with an outage, the breaker opening shows on the page while it is open; the finished mosaic is drawn on a map with its holes', async () => {
  // Down from its 91st request (of 130) until 3 s after the breaker opened: refused tiles become holes.
  tiles = await startDemoTileServer({ latencyMs: 5, outageAfterRequests: 90, outageMs: 120_000 });
  key = breakerKey(tiles.url);
  const page = await openPage(readOnly);
  const req = demoRequest(tiles, dir, 'console', { fallback: 'hole', extraFormats: ['png'] });
  const handle = await startMosaic(env.client, taskQueue, req, `mosaic-console-${process.pid}`);
  workflowId = handle.workflowId;

  // The page polls every second: the trip appears as a transition and as the card's state while it lasts.
  const card = page.locator(`.breaker[data-key="${key}"]`);
  await card.locator('li.transition', { hasText: 'closed -> open' }).first().waitFor({ timeout: 120_000 });
  const shownState = await card.getAttribute('data-state');
  const actual = (await entity(tiles).query(statusQuery)).view.state;
  assert.notEqual(shownState, 'closed', 'the card shows the breaker out of closed');
  assert.notEqual(actual, 'closed', 'and the breaker is still out of closed: the page showed the trip as it happened');
  // The timeline draws the open band.
  assert.ok((await card.locator('svg.timeline rect[data-state="open"]').count()) > 0, 'the timeline has an open band');
  await page.screenshot({ path: path.join(ARTEFACTS, 'breaker-open.png'), fullPage: true });
  await delay(3_000);
  tiles.setDown(false);

  result = await handle.result();
  manifest = readManifest(result);
  assert.ok(manifest.counts.hole > 0, `the outage left holes: ${JSON.stringify(manifest.counts)}`);
  assert.equal((await mosaicStatus(env.client, handle.workflowId)).status, 'COMPLETED');

  // The finished mosaic: its map, drawn from the mosaic's own image, with the holes painted over it.
  await page.locator(`#mosaics tr[data-workflow-id="${handle.workflowId}"]`).click();
  // Drawn for this mosaic, as it is now (the page may have drawn it while it ran, before the click).
  await page.locator(`#mosaic-detail[data-workflow-id="${handle.workflowId}"]`).waitFor({ timeout: 30_000 });
  // The image is read only when asked for: showing the mosaic decodes no image of its own accord.
  await page.locator('#show-image:not([hidden])').waitFor({ timeout: 30_000 });
  assert.equal(await page.locator('img.leaflet-image-layer').count(), 0, 'no image before it is asked for');
  await page.locator('#show-image').click();
  await page.waitForSelector('#map-wrap:not([hidden]) img.leaflet-image-layer', { timeout: 30_000 });
  const image = page.locator('img.leaflet-image-layer');
  for (
    let i = 0;
    i < 300 &&
    !(await image.evaluate((img: { complete: boolean; naturalWidth: number }) => img.complete && img.naturalWidth > 0));
    i++
  )
    await delay(100);
  // Holes are painted red over the image: about their share of the grid, give or take the margins. The map
  // draws its overlay a frame after the image: read the screenshot until both are there (or give up).
  const holeShare = manifest.counts.hole / manifest.total;
  let seen = { background: 0, red: 0, px: 0 };
  for (let i = 0; i < 100; i++) {
    seen = await mapPixels(page);
    if (seen.background < seen.px * 0.6 && seen.red > seen.px * holeShare * 0.2) break;
    await delay(200);
  }
  assert.ok(
    seen.background < seen.px * 0.6,
    `the mosaic's image fills the map (${seen.background} of ${seen.px} pixels are the bare background)`,
  );
  assert.ok(
    seen.red > seen.px * holeShare * 0.2,
    `hole tiles show red: ${seen.red} of ${seen.px} pixels for ${manifest.counts.hole} of ${manifest.total} tiles`,
  );
  await page.screenshot({ path: path.join(ARTEFACTS, 'console.png'), fullPage: true });

  // A click on a hole shows its manifest record.
  const hole = manifest.tiles.find((t) => t.status === 'hole')!;
  // The page's own map (a global of its script) says where the tile's centre is drawn.
  const point = await page.evaluate<{ x: number; y: number }>(
    `(() => { const m = detailShown.map; const row = Math.floor(${hole.i} / m.cols); const col = ${hole.i} % m.cols; return map.latLngToContainerPoint([-(row + 0.5) * m.tileSize, (col + 0.5) * m.tileSize]); })()`,
  );
  // Relative to the map itself, so a card above it growing by a line between the two reads moves nothing.
  await page.locator('#map').click({ position: point });
  const record = page.locator('#tile-record');
  await record.waitFor({ state: 'visible' });
  await page.locator('#tile-record', { hasText: `(#${hole.i})` }).waitFor();
  const text = (await record.textContent()) ?? '';
  assert.match(text, /status: hole/);
  assert.ok(text.includes(`reason: ${hole.reason}`), `the record shows the hole's reason: ${text}`);
  assert.ok(text.includes(`breaker state that decided it: ${hole.breakerState ?? '-'}`), text);
  await page.screenshot({ path: path.join(ARTEFACTS, 'hole-clicked.png'), fullPage: true });
  await page.close();
});

test('a read-only console refuses actions, on the page and on the wire; one started with actions takes them (open, reset, a re-drive), recorded with its sender', async () => {
  assert.ok(key, 'the first test ran');
  const page = await openPage(readOnly);
  assert.equal(await page.textContent('#mode'), 'read-only');
  const card = page.locator(`.breaker[data-key="${key}"]`);
  await card.locator('button[data-action="open"]').click();
  await page.locator('#message', { hasText: 'refused: actions are off' }).waitFor();
  assert.notEqual((await entity(tiles).query(statusQuery)).view.state, 'forced-open', 'nothing was sent');
  // Straight to the server: the same refusal, whatever the page shows.
  const wire = await page.evaluate(async (k) => {
    const r = await fetch('/api/breakers/open', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ key: k }),
    });
    return { status: r.status, body: (await r.json()) as { error: string } };
  }, key);
  assert.equal(wire.status, 403);
  assert.match(wire.body.error, /--allow-actions/);
  await page.close();

  const acting = await openPage(withActions);
  assert.equal(await acting.textContent('#mode'), 'actions on');
  await acting.locator(`.breaker[data-key="${key}"] button[data-action="open"]`).click();
  await acting.locator('#message', { hasText: 'done: open' }).waitFor();
  const forced = await entity(tiles).query(statusQuery);
  assert.equal(forced.view.state, 'forced-open');
  await acting.locator(`.breaker[data-key="${key}"][data-state="forced-open"]`).waitFor();
  const recorded = acting.locator(`.breaker[data-key="${key}"] li.transition`, { hasText: 'forced-open' }).first();
  assert.match((await recorded.textContent()) ?? '', /by "console:test", claimed; sent by .+ as .+@.+/);
  await acting.screenshot({ path: path.join(ARTEFACTS, 'forced-open.png'), fullPage: true });
  await acting.locator(`.breaker[data-key="${key}"] button[data-action="reset"]`).click();
  await acting.locator(`.breaker[data-key="${key}"][data-state="closed"]`).waitFor();

  // A re-drive of the finished mosaic, under the output's own id as the CLI's.
  await acting.locator(`#mosaics tr[data-workflow-id="${workflowId}"]`).click();
  await acting.locator(`#mosaic-detail[data-workflow-id="${workflowId}"] button[data-action="redrive"]`).click();
  await acting.locator('#message', { hasText: 'done: redrive' }).waitFor();
  const redrive = env.client.workflow.getHandle(mosaicWorkflowId(result.manifest));
  assert.equal((await redrive.describe()).type, 'redriveMosaicWorkflow');
  await redrive.result();
  await acting.close();
});

test('the console answers only under its own address, takes actions only from its own page as JSON, and never shows a stored path', async () => {
  const u = new URL(withActions.url);
  const raw = async (opts: { host?: string; origin?: string; type?: string; pathname?: string; method?: string }) => {
    const { request } = await import('node:http');
    return new Promise<{ status: number; body: string }>((resolve, reject) => {
      const r = request(
        {
          host: u.hostname,
          port: u.port,
          agent: false,
          path: opts.pathname ?? '/api/breakers/reset',
          method: opts.method ?? 'POST',
          headers: {
            host: opts.host ?? u.host,
            ...(opts.origin ? { origin: opts.origin } : {}),
            'content-type': opts.type ?? 'application/json',
          },
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      r.on('error', reject);
      r.end((opts.method ?? 'POST') === 'POST' ? JSON.stringify({ key }) : undefined);
    });
  };
  // A page on another name that resolves here (DNS rebinding) is not answered.
  assert.equal(
    (await raw({ host: 'attacker.example:80', origin: `http://${u.host}`, pathname: '/api/overview', method: 'GET' }))
      .status,
    421,
  );
  // A form on another site cannot post an action.
  assert.equal((await raw({ origin: 'http://attacker.example' })).status, 403);
  assert.equal((await raw({ origin: `http://${u.host}`, type: 'text/plain' })).status, 415);
  // The tile record a click shows carries no stored path.
  const ok = manifest.tiles.find((t) => t.status === 'ok')!;
  const shown = await raw({ pathname: `/api/mosaics/${encodeURIComponent(workflowId)}/tiles/${ok.i}`, method: 'GET' });
  assert.equal(shown.status, 200);
  const tile = JSON.parse(shown.body) as Record<string, unknown>;
  assert.equal(tile['status'], 'ok');
  assert.equal(tile['path'], undefined);
  assert.ok(!shown.body.includes(dir), 'no worker path in the answer');
});
