import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { MockActivityEnvironment } from '@temporalio/testing';
import { confinePath, makeDirs } from '../../src/activities/confine/confine';
import { makeFetchBatch, type TileResult } from '../../src/activities/fetch/fetch-batch';
import { EndpointPools } from '../../src/activities/http/endpoint-pool';
import { rootsFromEnv, withRoots } from '../../src/activities/confine/roots';
import { planMosaic } from '../../src/activities/mosaic/plan';
import { loadSource } from '../../src/activities/sources-file';
import { TileStore } from '../../src/activities/tile-store/tile-store';
import { parseSource, parseSourcesFile } from '../../src/sources/schema';
import type { MosaicRequest } from '../../src/messages/mosaic-types';

const dir = mkdtempSync(path.join(tmpdir(), 'tilebreaker-confine-'));
const out = path.join(dir, 'out');
const conf = path.join(dir, 'conf');
const elsewhere = path.join(dir, 'elsewhere');
for (const d of [out, conf, elsewhere]) mkdirSync(d);
const roots = { sources: [conf], outputs: [out] };
after(() => rmSync(dir, { recursive: true, force: true }));

/** What a secret in a file the worker is pointed at looks like: it must come back in no message. */
const CANARY = 'CANARY-7f3a9c1e';
const source = { type: 'xyz', url: 'http://127.0.0.1:9/{z}/{x}/{y}.png' } as const;
const req = (extra: Partial<MosaicRequest> = {}): MosaicRequest => ({
  source,
  bbox: [5.7, 44.0, 6.0, 44.3],
  zoom: 5,
  output: path.join(out, 'm.tif'),
  ...extra,
});

/** The error `p` rejects with, as text; fails when it resolves. */
async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail('expected a refusal');
}

describe('roots', () => {
  test('from TILEBREAKER_SOURCES_DIR and TILEBREAKER_OUTPUT_DIR, several each, else the working directory', () => {
    assert.deepEqual(
      rootsFromEnv({ TILEBREAKER_SOURCES_DIR: '/etc/tb:conf', TILEBREAKER_OUTPUT_DIR: '/srv/a::/srv/b' }, '/w'),
      { sources: ['/etc/tb', '/w/conf'], outputs: ['/srv/a', '/srv/b'] },
    );
    assert.deepEqual(rootsFromEnv({}, '/w'), { sources: ['/w'], outputs: ['/w'] });
    assert.deepEqual(withRoots(rootsFromEnv({}, '/w'), { outputs: ['x'] }, '/w'), {
      sources: ['/w'],
      outputs: ['/w/x'],
    });
  });

  test('bucket prefixes from TILEBREAKER_OUTPUT_BUCKETS or --output-bucket; a malformed one stops the worker, naming it', () => {
    assert.deepEqual(
      rootsFromEnv({ TILEBREAKER_OUTPUT_BUCKETS: 's3://maps/nightly/, s3://maps/weekly' }, '/w').buckets,
      ['s3://maps/nightly', 's3://maps/weekly'],
    );
    assert.deepEqual(withRoots(rootsFromEnv({}, '/w'), { buckets: ['s3://maps/x'] }, '/w').buckets, ['s3://maps/x']);
    assert.throws(
      () => rootsFromEnv({ TILEBREAKER_OUTPUT_BUCKETS: '/srv/out' }, '/w'),
      /TILEBREAKER_OUTPUT_BUCKETS: "\/srv\/out" must start with s3:\/\//,
    );
    assert.throws(
      () => rootsFromEnv({ TILEBREAKER_OUTPUT_BUCKETS: 's3://maps/a/../b' }, '/w'),
      /TILEBREAKER_OUTPUT_BUCKETS: "s3:\/\/maps\/a\/..\/b" has an empty, '.' or '..' segment/,
    );
    assert.throws(
      () => withRoots(rootsFromEnv({}, '/w'), { buckets: ['s3://UPPER/x'] }, '/w'),
      /--output-bucket: "s3:\/\/UPPER\/x" has no valid bucket name/,
    );
  });
});

describe('confinePath', () => {
  test('a path under a root resolves to its real path; relative paths are taken from the first root', async () => {
    assert.equal(await confinePath(path.join(out, 'a', 'b.tif'), [out], 'output', 'req'), path.join(out, 'a', 'b.tif'));
    assert.equal(
      await confinePath('rel/b.tif', [elsewhere, out], 'output', 'req'),
      path.join(elsewhere, 'rel', 'b.tif'),
    );
  });

  test('outside every root: refused with the field, the path and the roots', async () => {
    const msg = await refusal(confinePath(path.join(elsewhere, 'x.tif'), [out, conf], 'output', 'mosaic request'));
    assert.match(
      msg,
      /^mosaic request: output: ".*elsewhere\/x\.tif" is outside this worker's roots \(.*out, .*conf\); set TILEBREAKER_OUTPUT_DIR/,
    );
    assert.match(
      await refusal(confinePath(path.join(out, '..', 'elsewhere', 'x.tif'), [out], 'output', 'r')),
      /outside this worker's roots/,
    );
    assert.match(
      await refusal(confinePath('/etc/passwd', [conf], 'sourcesFile', 'r')),
      /sourcesFile: "\/etc\/passwd" is outside .*set TILEBREAKER_SOURCES_DIR/,
    );
  });

  test('a symlink out of the root is followed before the check', async () => {
    symlinkSync(elsewhere, path.join(out, 'escape'));
    const msg = await refusal(confinePath(path.join(out, 'escape', 'new', 'x.tif'), [out], 'output', 'r'));
    assert.match(msg, /leads outside this worker's roots \(.*\/out\) through a symlink/);
    assert.ok(!msg.includes('elsewhere'), 'the target outside the roots is not named');
  });

  test('/proc, /sys and /dev are refused whatever the roots, before any file system call', async () => {
    for (const p of ['/proc/self/cwd/x.tif', '/sys/kernel/x.tif', '/dev/shm/x.tif', '/proc']) {
      assert.match(
        await refusal(confinePath(p, ['/'], 'output', 'r')),
        /lies under \/proc, \/sys, \/dev, which a worker never touches/,
      );
    }
    // A symlink into /proc is caught after resolution.
    symlinkSync('/proc/self', path.join(out, 'proc-link'));
    assert.match(
      await refusal(confinePath(path.join(out, 'proc-link', 'x.tif'), [out], 'output', 'r')),
      /leads through a symlink under \/proc, \/sys, \/dev, which a worker never touches/,
    );
  });

  test('NUL characters and absurd depths are refused', async () => {
    assert.match(await refusal(confinePath(`${out}/a\0b.tif`, [out], 'output', 'r')), /NUL/);
    assert.match(
      await refusal(confinePath(`${out}/${'d/'.repeat(80)}x.tif`, [out], 'output', 'r')),
      /more than 64 folders deep/,
    );
    // Outside as written: refused before any file system call, so "a file is in the way" tells nothing.
    writeFileSync(path.join(elsewhere, 'exists.txt'), '');
    const a = await refusal(confinePath(path.join(elsewhere, 'exists.txt', 'm.tif'), [out], 'output', 'r'));
    const b = await refusal(confinePath(path.join(elsewhere, 'missing', 'm.tif'), [out], 'output', 'r'));
    assert.equal(a.replace('exists.txt', 'X'), b.replace('missing', 'X'));
  });
});

describe('makeDirs', () => {
  test('makes missing folders one by one, and refuses more than its bound', async () => {
    const deep = path.join(out, 'mk', 'a', 'b', 'c');
    assert.equal(await makeDirs(deep), true);
    assert.ok(existsSync(deep));
    assert.equal(await makeDirs(deep), false);
    await Promise.all([1, 2, 3, 4].map(() => makeDirs(path.join(out, 'mk', 'race', 'x'))));
    await assert.rejects(makeDirs(path.join(out, 'mk', ...'abcdefghij'.split('')), 4), /more than 4 folders to make/);
    writeFileSync(path.join(out, 'mk', 'file'), '');
    await assert.rejects(makeDirs(path.join(out, 'mk', 'file', 'sub')), /not a folder|ENOTDIR/);
  });
});

describe('sources files read on a worker', () => {
  const write = (name: string, text: string) => {
    const f = path.join(conf, name);
    writeFileSync(f, text);
    return f;
  };
  const load = (f: string) => refusal(loadSource(f, undefined, { roots: [conf], subject: 'mosaic request' }));

  test('a file that is not a sources file: the error says so and quotes nothing of it', async () => {
    const cases: [string, string, RegExp][] = [
      [
        'env.yaml',
        `SECRET=${CANARY}\n`,
        /\(root\): not a sources file: expected a mapping with a "sources" field \(found a string\)/,
      ],
      [
        'map.yaml',
        `password: ${CANARY}\nuser: ${CANARY}\n`,
        /not a sources file: .*found a mapping with 2 other fields/,
      ],
      [
        'key.yaml',
        `-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU${CANARY}\n-----END OPENSSH PRIVATE KEY-----\n`,
        /not a sources file/,
      ],
      ['bad.yaml', `a: b: ${CANARY}\n`, /not valid YAML at line 1, column 4: block as implicit key/],
      ['bad.json', `{"SECRET": ${CANARY}}`, /not valid JSON at line 1, column 12: invalid symbol/],
      [
        'git.yaml',
        `[core]\n\trepositoryformatversion = 0\n[remote "origin"]\n\turl = https://user:${CANARY}@example.org/x.git\n`,
        /not valid YAML|not a sources file/,
      ],
      ['beside.yaml', `sources: {}\n${CANARY}: 1\n`, /\(root\): 1 unknown field \(not shown\)/],
      ['list.yaml', `sources: ${CANARY}\n`, /sources: .*expected record/],
      [
        'laughs.yaml',
        `a: &a ["${CANARY}", "${CANARY}", "${CANARY}"]\n${'bcdefghij'
          .split('')
          .map((c, i) => `${c}: &${c} [${Array(9).fill(`*${'abcdefghij'[i]}`).join(', ')}]`)
          .join('\n')}\nsources: *j\n`,
        /not valid YAML: too many alias expansions/,
      ],
    ];
    for (const [name, text, expected] of cases) {
      const msg = await load(write(name, text));
      assert.match(msg, expected, name);
      assert.ok(!msg.includes(CANARY), `${name}: ${msg}`);
      assert.ok(msg.includes(path.join(conf, name)), `${name} names the file: ${msg}`);
    }
  });

  test('only .yaml, .yml and .json files under the sources roots, regular and small', async () => {
    assert.match(
      await load(write('.env', `SECRET=${CANARY}`)),
      /sourcesFile: ".*\.env" must name a \.yaml, \.yml or \.json file/,
    );
    assert.match(await load(path.join(elsewhere, 's.yaml')), /outside this worker's roots/);
    symlinkSync('/etc/passwd', path.join(conf, 'passwd.yaml'));
    assert.match(await load(path.join(conf, 'passwd.yaml')), /leads outside this worker's roots .* through a symlink/);
    mkdirSync(path.join(conf, 'dir.yaml'));
    assert.match(await load(path.join(conf, 'dir.yaml')), /is not a regular file/);
    execFileSync('mkfifo', [path.join(conf, 'fifo.yaml')]);
    assert.match(await load(path.join(conf, 'fifo.yaml')), /is not a regular file/);
    assert.match(await load(write('big.yaml', `# ${'x'.repeat(1024 * 1024)}\n`)), /larger than 262144 bytes/);
    assert.match(await load(path.join(conf, 'missing.yaml')), /cannot be resolved|cannot be read \(ENOENT\)/);
    assert.match(await load(write('long.yaml', 'a: 1\n'.repeat(10_001))), /more than 10000 lines/);
    // A relative path is taken from the first sources root, not from the worker's working directory.
    write('rel.yaml', `sources:\n  osm: { type: xyz, url: "http://127.0.0.1:9/{z}/{x}/{y}.png" }\n`);
    assert.equal((await loadSource('rel.yaml', undefined, { roots: [conf] })).name, 'osm');
    // Only the file's own source names: nothing off Object.prototype.
    assert.match(
      await refusal(loadSource(path.join(conf, 'rel.yaml'), 'constructor', { roots: [conf] })),
      /no source named "constructor" \(it has "osm"\)/,
    );
  });

  test('inside a sources file, errors name the field and quote the offending value, secrets masked', async () => {
    const f = write(
      'typo.yaml',
      `sources:\n  osm:\n    type: xyz\n    url: http://127.0.0.1/{z}/{x}/{y}.png\n    concurency: 4\n    tileSize: 7\n`,
    );
    const msg = await load(f);
    assert.match(msg, /sources\.osm: unknown field "concurency"/);
    assert.match(msg, /sources\.osm\.tileSize: .*\(got 7\)/);
    const secret = await load(
      write(
        'cred.yaml',
        `sources:\n  osm:\n    type: xyz\n    url: http://user:${CANARY}@127.0.0.1/{z}/{x}/{y}.png\n    headers:\n      Authorization: Bearer ${CANARY}\n`,
      ),
    );
    assert.match(secret, /url: must not embed credentials.*\(got "http:\/\/\*\*\*@127\.0\.0\.1/);
    assert.match(secret, /headers: must not carry credentials.*"Authorization":"\*\*\*"/);
    assert.ok(!secret.includes(CANARY), secret);
  });

  test("the CLI reading the user's own file shows a code frame for a syntax error", async () => {
    const f = path.join(elsewhere, 'mine.yaml');
    writeFileSync(f, 'sources:\n  a: b: c\n');
    assert.match(await refusal(loadSource(f)), /not valid YAML: .*line 2, column 6:\n\n {2}a: b: c\n/s);
  });
});

describe('source names', () => {
  test('`.`, `..` and paths are refused with the rule, not zod\'s "Invalid key in record"', () => {
    for (const name of ['..', '.', '.hidden', 'a/b', '']) {
      assert.throws(
        () => parseSourcesFile({ sources: { [name]: source } }),
        (err: Error) =>
          /must be a source name: a letter or digit, then letters, digits/.test(err.message) &&
          !/Invalid key/.test(err.message),
        name,
      );
    }
    assert.doesNotThrow(() => parseSourcesFile({ sources: { 'osm.v2_b-1': source } }));
  });

  test('the tile store refuses a name that would leave its root', async () => {
    await assert.rejects(
      new TileStore(out).put('..', { z: 1, x: 0, y: 0 }, Buffer.from('x'), {
        fetchedAt: Date.now(),
        contentType: 'image/png',
      }),
      /tile store: source name must be a source name/,
    );
  });
});

describe('planning on a worker', () => {
  test('outputs, tile stores and work folders outside the output roots are refused at planning, naming path and roots', async () => {
    const plan = await planMosaic(req(), { roots });
    assert.deepEqual(
      [plan.output, plan.workDir, plan.storeRoot],
      [path.join(out, 'm.tif'), path.join(out, 'm.work'), path.join(out, 'm.tiles')],
    );
    assert.match(
      await refusal(planMosaic(req({ output: path.join(elsewhere, 'm.tif') }), { roots })),
      /^mosaic request: output: ".*elsewhere\/m\.tif" is outside this worker's roots \(.*\/out\)/,
    );
    assert.match(
      await refusal(planMosaic(req({ storeRoot: elsewhere }), { roots })),
      /storeRoot: .* is outside this worker's roots/,
    );
    assert.match(
      await refusal(planMosaic(req({ output: '/proc/self/cwd/m.tif' }), { roots: { ...roots, outputs: ['/'] } })),
      /output: "\/proc\/self\/cwd\/m\.tif" lies under \/proc/,
    );
    assert.match(await refusal(planMosaic(req({ sourceName: '..' }), { roots })), /sourceName: must be a source name/);
  });

  test('a plan holds at most 4,194,304 tiles: the assembly keeps a record of each in memory', async () => {
    assert.match(await refusal(planMosaic(req({ maxTiles: 5_000_000_000 }), { roots })), /maxTiles: .*<=4194304/);
  });

  test('a sources file outside the sources roots is refused before it is read', async () => {
    const f = path.join(elsewhere, 'sources.yaml');
    writeFileSync(f, `SECRET=${CANARY}`);
    const { source: _inline, ...noSource } = req();
    const msg = await refusal(planMosaic({ ...noSource, sourcesFile: f }, { roots }));
    assert.match(msg, /sourcesFile: ".*elsewhere\/sources\.yaml" is outside this worker's roots \(.*\/conf\)/);
    assert.ok(!msg.includes(CANARY));
  });
});

describe('a resumed batch', () => {
  test('a heartbeat naming a file outside the tile store is not believed: the tile is fetched again', async () => {
    const pools = new EndpointPools();
    try {
      // Heartbeat details can be written by anyone who may heartbeat activities by id.
      const forged: TileResult = { z: 1, x: 0, y: 0, status: 'ok', reason: 'forged', attempts: 1, path: '/etc/passwd' };
      const env = new MockActivityEnvironment({ heartbeatDetails: { results: [forged] } });
      const fetchTiles = makeFetchBatch({ pools, roots });
      const [r]: TileResult[] = await env.run(fetchTiles, {
        sourceName: 'x',
        source: parseSource(source),
        tiles: [{ z: 1, x: 0, y: 0 }],
        storeRoot: path.join(out, 'store'),
        breaker: false,
        retry: { attempts: 1 },
      });
      assert.notEqual(r!.path, '/etc/passwd');
      assert.notEqual(r!.reason, 'forged');
      assert.equal(r!.attempts, 1, 'a request was made for it');
    } finally {
      await pools.close();
    }
  });
});
