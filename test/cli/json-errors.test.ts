import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { errorBody, fieldOf, wantsJson } from '../../src/cli/errors';
import { ConfigError } from '../../src/breaker/config-error';

// Errors under --json: one JSON object on stdout, `{ "error": { message, kind, exitCode, field?, ... } }`,
// nothing on stderr, and the exit code the text form has (docs/cli.md, "Errors under --json").
const main = path.join(__dirname, '..', '..', 'src', 'cli', 'main.js');
const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-json-errors-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function cli(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<{ code: number; out: string; err: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  // No server: every case here fails before connecting, or because none is named.
  delete childEnv['TEMPORAL_ADDRESS'];
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) delete childEnv[k];
    else childEnv[k] = v;
  }
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { env: childEnv, timeout: 60_000 }, (err, out, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out, err: stderr }),
    );
  });
}

interface ErrorDoc {
  error: { message: string; kind: string; exitCode: number; field?: string; code?: string; issues?: string[] };
}

/** The one JSON object on stdout, with nothing on stderr. */
function jsonError(r: { code: number; out: string; err: string }): ErrorDoc['error'] {
  assert.equal(r.err, '', `stderr should be empty under --json: ${r.err}`);
  const lines = r.out.trim().split('\n');
  assert.equal(lines.length, 1, r.out);
  const doc = JSON.parse(lines[0]!) as ErrorDoc;
  assert.deepEqual(Object.keys(doc), ['error']);
  assert.equal(doc.error.exitCode, r.code);
  return doc.error;
}

test("usage errors under --json: commander's invalid value, unknown option and missing option as JSON on stdout, exit 2", async () => {
  const state = await cli(['breaker', 'list', '--state', 'bogus', '--json']);
  assert.equal(state.code, 2);
  const e = jsonError(state);
  assert.equal(e.kind, 'usage');
  assert.equal(e.field, '--state');
  assert.equal(e.code, 'commander.invalidArgument');
  assert.match(e.message, /^option '--state <state>' argument 'bogus' is invalid\. must be one of closed, /);

  const unknown = jsonError(await cli(['schedule', 'list', '--bogus', '--json']));
  assert.deepEqual(
    [unknown.kind, unknown.code, unknown.field, unknown.exitCode],
    ['usage', 'commander.unknownOption', '--bogus', 2],
  );

  const missing = jsonError(await cli(['schedule', 'create', 'x', '--json']));
  assert.deepEqual(
    [missing.kind, missing.code, missing.field],
    ['usage', 'commander.missingMandatoryOptionValue', '--cron'],
  );

  const command = jsonError(await cli(['mosaic', 'frobnicate', '--json']));
  assert.equal(command.kind, 'usage');

  // Without --json, the text on stderr as before, the help after it, and nothing on stdout.
  const text = await cli(['breaker', 'list', '--state', 'bogus']);
  assert.equal(text.code, 2);
  assert.equal(text.out, '');
  assert.match(text.err, /^error: option '--state <state>' argument 'bogus' is invalid/m);
});

test('errors a command throws under --json: the flag named as field; a refused plan with its issues; no server named', async () => {
  const limit = await cli(['mosaic', 'list', '--limit', 'x', '--json']);
  assert.equal(limit.code, 2);
  const l = jsonError(limit);
  assert.deepEqual([l.kind, l.field, l.message], ['error', '--limit', '--limit: must be a number (got "x")']);

  const sources = path.join(dir, 'sources.yaml');
  writeFileSync(sources, 'sources:\n  demo:\n    type: xyz\n    url: http://127.0.0.1:9/{z}/{x}/{y}.png\n');
  const plan = await cli([
    'mosaic',
    'start',
    '--sources',
    sources,
    '--source',
    'demo',
    '--bbox',
    '5.7,44,19.5,49.9',
    '--zoom',
    '7',
    '--out',
    path.join(dir, 'x.tif'),
    '--max-tiles',
    '3',
    '--json',
  ]);
  assert.equal(plan.code, 2);
  const p = jsonError(plan);
  assert.equal(p.kind, 'invalid');
  assert.equal(p.field, 'maxTiles');
  assert.match(
    p.issues?.[0] ?? '',
    /^maxTiles: the plan has 20 tiles .* more than maxTiles 3; raise maxTiles to 20 or more/,
  );

  const noServer = jsonError(await cli(['breaker', 'list', '--json']));
  assert.deepEqual([noServer.kind, noServer.exitCode], ['error', 2]);
  assert.match(noServer.message, /^breaker commands need TEMPORAL_ADDRESS: name the Temporal frontend/);

  const drill = path.join(dir, 'drill.json');
  writeFileSync(drill, '{ not json');
  const d = jsonError(await cli(['drill', drill, '--json']));
  assert.match(d.message, /^drill file .*drill\.json: not valid JSON/);

  // Before any command is parsed: the log settings.
  const log = jsonError(await cli(['mosaic', 'list', '--json'], { TILEBREAKER_LOG_LEVEL: 'loud' }));
  assert.match(log.message, /^TILEBREAKER_LOG_LEVEL must be one of /);

  // The same error as text, without --json.
  const text = await cli(['mosaic', 'list', '--limit', 'x']);
  assert.deepEqual([text.code, text.out, text.err.trim()], [2, '', 'tilebreaker: --limit: must be a number (got "x")']);
});

test('errorBody: kind, field and issues from the error; --json after -- is an operand', () => {
  assert.equal(wantsJson(['mosaic', 'list', '--json']), true);
  assert.equal(wantsJson(['tile', '--', '--json']), false);
  assert.equal(fieldOf(`--sources "s.yaml": no such file on this machine`), '--sources');
  assert.equal(fieldOf("error: required option '--cron <expr>' not specified"), '--cron');
  assert.equal(fieldOf('mosaic request: deadline: at most 7 days ahead (got "30d")'), 'deadline');
  assert.equal(fieldOf('no mosaic with id or name "x"'), undefined);
  const config = errorBody(
    new ConfigError('breaker policy', ['windowMs: must be >= 1000 (got 5)', 'cooldownMs: too small (got 1)']),
    2,
  );
  assert.deepEqual(config, {
    message: 'breaker policy: windowMs: must be >= 1000 (got 5); cooldownMs: too small (got 1)',
    kind: 'invalid',
    exitCode: 2,
    field: 'windowMs',
    issues: ['windowMs: must be >= 1000 (got 5)', 'cooldownMs: too small (got 1)'],
  });
});

test('"--json" taken as an option\'s value is that value, not the flag: the error is text on stderr, as the command line asked', async () => {
  const r = await cli(['mosaic', 'list', '--limit', '--json']);
  assert.equal(r.code, 2);
  assert.equal(r.out, '');
  assert.match(r.err, /--limit: must be a number \(got "--json"\)/);
});

test('seed refusals of --levels and --into under --json are kind invalid with their issues, as other refused values are', async () => {
  const area = ['seed', '--sources', path.join(dir, 'unused.yaml'), '--source', 'osm', '--bbox', '5.7,44,6.5,44.6'];
  const notARange = jsonError(
    await cli([...area, '--levels', '14-twelve', '--into', path.join(dir, 'a.mbtiles'), '--json']),
  );
  assert.deepEqual([notARange.kind, notARange.exitCode, notARange.field], ['invalid', 2, '--levels']);
  assert.deepEqual(notARange.issues, ['--levels: must be a zoom level or a range such as 10-14 (got "14-twelve")']);
  const inverted = jsonError(await cli([...area, '--levels', '9-3', '--into', path.join(dir, 'a.mbtiles'), '--json']));
  assert.deepEqual([inverted.kind, inverted.field], ['invalid', 'levels']);
  assert.deepEqual(inverted.issues, ['levels: the first level must not be after the last (got [9,3])']);
  const into = jsonError(await cli([...area, '--levels', '3', '--into', path.join(dir, 'a.sqlite'), '--json']));
  assert.deepEqual([into.kind, into.field], ['invalid', 'into']);
  assert.match(
    into.issues?.[0] ?? '',
    /^into: must be a path or an s3:\/\/ URL ending in \.mbtiles \(got ".*a\.sqlite"\)$/,
  );
});
