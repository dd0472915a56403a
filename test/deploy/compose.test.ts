import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { parseBucketList } from '../../src/activities/confine/roots';
import { planMosaic } from '../../src/activities/mosaic/plan';
import { locationWithin } from '../../src/activities/storage/location';
import type { MosaicRequest } from '../../src/messages/mosaic-types';

// No Docker engine in the tests: the stack is checked as files, against the CLI it runs and the examples it documents.
const repo = path.join(__dirname, '..', '..', '..');
const cliMain = path.join(repo, 'dist', 'src', 'cli', 'main.js');
const read = (rel: string) => readFileSync(path.join(repo, rel), 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  env_file?: string | (string | { path: string })[];
  healthcheck?: { test?: string | string[]; disable?: boolean };
  volumes?: (string | { source?: string; target?: string; read_only?: boolean })[];
  profiles?: string[];
}
interface Compose {
  services: Record<string, Service>;
}
interface Files {
  compose: Compose;
  dockerfile: string;
  /** config/nightly.yaml, the documented nightly request. */
  nightly: Partial<MosaicRequest>;
  /** CLI command lines the docs tell people to run (`docker compose run --rm cli ...`), as argument lists. */
  documented: string[][];
  gitignore: string;
  /** The git-tracked templates of the env files: name -> text. */
  templates: Record<string, string>;
}

/**
 * Compose's interpolation of a value for what the file pins by itself: `${X:-default}` and `${X-default}` give
 * their default, `$$` a dollar; a variable without a default (`${X}`, `${X:?message}`) yields null (its value
 * comes from outside the file).
 */
function interpolate(value: string): string | null {
  let unresolved = false;
  const out = value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*)|(:?\?)[^}]*)?\}/g,
    (m, _name, dash: string | undefined, def: string | undefined) => {
      if (m === '$$') return '$';
      if (dash !== undefined) return def ?? '';
      unresolved = true;
      return '';
    },
  );
  return unresolved ? null : out;
}

/** A service's environment as name -> raw value, from either of compose's forms. */
function environment(s: Service): Map<string, string> {
  const env = new Map<string, string>();
  if (Array.isArray(s.environment)) {
    for (const e of s.environment) {
      const i = e.indexOf('=');
      env.set(i < 0 ? e : e.slice(0, i), i < 0 ? '' : e.slice(i + 1));
    }
  } else {
    for (const [k, v] of Object.entries(s.environment ?? {})) env.set(k, v === null ? '' : String(v));
  }
  return env;
}

const words = (v: string | string[] | undefined): string[] =>
  v === undefined ? [] : Array.isArray(v) ? v.map(String) : v.split(/\s+/).filter(Boolean);
const isTilebreaker = (s: Service) => s.build !== undefined || /^tilebreaker(:|$)/.test(s.image ?? '');

/** An image reference pinned to a version: a digest, or a tag with a digit in it that is not a moving name. */
function imageProblem(name: string, image: string): string | null {
  const resolved = interpolate(image);
  if (resolved === null)
    return `${name}: image ${image} depends on a variable without a default (pin a default version)`;
  if (/@sha256:[0-9a-f]{64}$/.test(resolved)) return null;
  const last = resolved.slice(resolved.lastIndexOf('/') + 1);
  const colon = last.indexOf(':');
  if (colon < 0) return `${name}: image ${resolved} has no tag (pin a version)`;
  const tag = last.slice(colon + 1);
  if (/^(latest|stable|edge|main|master|nightly|lts|current)$/i.test(tag) || !/\d/.test(tag))
    return `${name}: image ${resolved} is not pinned to a version (tag ${tag})`;
  return null;
}

interface Help {
  ok: boolean;
  text: string;
  commands: string[];
  options: Map<string, boolean>;
  required: number;
  optional: number;
  variadic: boolean;
}
const helps = new Map<string, Promise<Help>>();
/** `tilebreaker <path...> --help`, parsed: its subcommands, its options (and whether each takes a value), its arguments. */
function help(cmdPath: readonly string[]): Promise<Help> {
  const key = cmdPath.join(' ');
  let p = helps.get(key);
  if (!p) {
    p = new Promise<Help>((resolve) => {
      execFile(
        process.execPath,
        [cliMain, ...cmdPath, '--help'],
        { timeout: 30_000, env: { ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:1' } },
        (err, stdout) => {
          const text = String(stdout);
          const usage = /^Usage: tilebreaker(.*)$/m.exec(text)?.[1] ?? '';
          const section = (title: string) => {
            const m = new RegExp(`^${title}:\\n((?:  .*\\n?)*)`, 'm').exec(text);
            return m?.[1] ?? '';
          };
          const commands = [...section('Commands').matchAll(/^ {2}(\S+)/gm)].map((m) => m[1]!);
          const options = new Map<string, boolean>();
          for (const m of section('Options').matchAll(/^ {2}(?:-\w, )?(--[\w-]+)( [<[])?/gm))
            options.set(m[1]!, m[2] !== undefined);
          resolve({
            ok: !err && usage.startsWith(` ${key}`.trimEnd()),
            text,
            commands,
            options,
            required: (usage.match(/<[^>]+>/g) ?? []).length,
            optional: (usage.match(/\[(?!options\])[^\]]+\]/g) ?? []).length,
            variadic: /\.\.\.[\]>]/.test(usage),
          });
        },
      );
    });
    helps.set(key, p);
  }
  return p;
}

/** Why the CLI would refuse these arguments (an unknown command, option or argument count), or null. */
async function cliProblem(args: readonly string[]): Promise<string | null> {
  const cmdPath: string[] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const h = await help(cmdPath);
    if (!h.commands.includes(args[i]!) || args[i] === 'help') break;
    cmdPath.push(args[i]!);
  }
  const h = await help(cmdPath);
  if (!h.ok) return `tilebreaker ${cmdPath.join(' ')}: --help failed`;
  if (h.commands.length > 0 && cmdPath.length > 0 && !(args[i] ?? '').startsWith('-')) {
    return `tilebreaker ${cmdPath.join(' ')}: no subcommand ${JSON.stringify(args[i] ?? '')} (has ${h.commands.join(', ')})`;
  }
  if (cmdPath.length === 0 && i < args.length && !args[i]!.startsWith('-'))
    return `tilebreaker: no command ${JSON.stringify(args[i])}`;
  let positionals = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('-')) {
      const [flag, inline] = a.split('=', 2) as [string, string | undefined];
      if (flag === '-h' || flag === '--help' || (cmdPath.length === 0 && flag === '--version')) continue;
      const takesValue = h.options.get(flag);
      if (takesValue === undefined) return `tilebreaker ${cmdPath.join(' ')}: unknown option ${flag}`;
      if (takesValue && inline === undefined) i++;
    } else {
      positionals++;
    }
  }
  if (positionals < h.required)
    return `tilebreaker ${cmdPath.join(' ')}: ${h.required} argument(s) required, ${positionals} given`;
  if (!h.variadic && positionals > h.required + h.optional)
    return `tilebreaker ${cmdPath.join(' ')}: too many arguments (${positionals})`;
  return null;
}

const SECRET_NAME = /PASSWORD|PASSWD|PWD$|SECRET|TOKEN|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL/i;
const SECRET_FLAG = /^--?(secret|password|passwd|token|access(-key)?|api-key)(=|$)/i;
/** A value that only refers to a variable from outside the file, with no default: `${X}`, `${X:?why}`, `${X?why}`. */
const isReference = (v: string) => /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::?\?[^}]*)?\}$/.test(v);

/** Everything wrong with the stack's files; empty when all is well. */
async function composeProblems(f: Files): Promise<string[]> {
  const problems: string[] = [];
  const services = Object.entries(f.compose.services ?? {});

  // Every image pinned; the one built here is pinned by its Dockerfile's base image.
  for (const [name, s] of services) {
    if (s.image === undefined && s.build === undefined) problems.push(`${name}: neither image nor build`);
    if (s.image !== undefined && s.build === undefined) {
      const why = imageProblem(name, s.image);
      if (why) problems.push(why);
    }
  }
  const nodeImage = /^ARG NODE_IMAGE=(\S+)$/m.exec(f.dockerfile)?.[1];
  if (!nodeImage || !/^node:\d+\.\d+\.\d+-/.test(nodeImage))
    problems.push(
      `Dockerfile: NODE_IMAGE ${nodeImage ?? '(none)'} is not pinned to a Node.js release (node:X.Y.Z-...)`,
    );
  for (const m of f.dockerfile.matchAll(/^FROM\s+(\S+)/gm)) {
    if (m[1] !== '${NODE_IMAGE}') {
      const why = imageProblem('Dockerfile FROM', m[1]!);
      if (why) problems.push(why);
    }
  }

  // Commands the CLI accepts: the services that run tilebreaker's image with its entrypoint, and the documented ones.
  for (const [name, s] of services) {
    if (!isTilebreaker(s) || s.entrypoint !== undefined) continue;
    const why = await cliProblem(words(s.command));
    if (why) problems.push(`${name}: command ${JSON.stringify(words(s.command))}: ${why}`);
  }
  for (const args of f.documented) {
    const why = await cliProblem(args);
    if (why) problems.push(`documented command ${JSON.stringify(args.join(' '))}: ${why}`);
  }

  // Workers: a healthcheck that reads the port their metrics are served on.
  const workers = services.filter(
    ([, s]) => isTilebreaker(s) && words(s.command)[0] === 'worker' && s.entrypoint === undefined,
  );
  if (workers.length === 0) problems.push('no worker service');
  for (const [name, s] of workers) {
    const hc = s.healthcheck;
    const testWords = words(hc?.test);
    if (!hc || hc.disable || testWords.length === 0 || testWords[0] === 'NONE') {
      problems.push(`${name}: worker without a healthcheck`);
      continue;
    }
    const env = environment(s);
    const addr = interpolate(env.get('TILEBREAKER_METRICS_ADDR') ?? '') ?? '';
    const port = /:(\d+)$/.exec(addr)?.[1];
    const probed = /127\.0\.0\.1:(\d+)\/metrics/.exec(testWords.join(' '))?.[1];
    if (port === undefined)
      problems.push(`${name}: healthcheck needs TILEBREAKER_METRICS_ADDR (the endpoint it reads)`);
    else if (probed !== port)
      problems.push(`${name}: healthcheck reads port ${probed ?? '(none)'}, metrics are served on ${port}`);
  }

  // No secret written in the file: secret-named variables only refer to a variable (no default), secret flags likewise.
  for (const [name, s] of services) {
    for (const [k, v] of environment(s)) {
      if (SECRET_NAME.test(k) && v !== '' && !isReference(v))
        problems.push(`${name}: ${k} is written in the file (give it as \${${k}} from .env)`);
    }
    const argv = [...words(s.entrypoint), ...words(s.command)];
    argv.forEach((a, i) => {
      const m = SECRET_FLAG.exec(a);
      if (!m) return;
      const v = m[2] === '=' ? a.slice(a.indexOf('=') + 1) : argv[i + 1];
      if (v !== undefined && !isReference(v))
        problems.push(`${name}: ${a.split('=')[0]} is given a value written in the file`);
    });
    for (const e of Array.isArray(s.env_file) ? s.env_file : s.env_file !== undefined ? [s.env_file] : []) {
      const file = typeof e === 'string' ? e : e.path;
      if (!f.gitignore.split('\n').some((l) => l.trim() === file.replace(/^\.\//, '')))
        problems.push(`${name}: env_file ${file} is not git-ignored`);
    }
  }
  for (const [file, text] of Object.entries(f.templates)) {
    for (const line of text.split('\n')) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
      if (m && SECRET_NAME.test(m[1]!) && m[2]!.trim() !== '')
        problems.push(`${file}: ${m[1]} has a value (a template leaves secrets empty)`);
    }
  }

  // The documented nightly output lies under every worker's bucket prefixes, and its sources file under /config.
  const output = f.nightly.output;
  if (typeof output !== 'string') problems.push('config/nightly.yaml: no output');
  for (const [name, s] of workers) {
    const env = environment(s);
    const buckets = parseBucketList(interpolate(env.get('TILEBREAKER_OUTPUT_BUCKETS') ?? '') ?? '');
    if (typeof output === 'string' && !buckets.some((b) => locationWithin(output, b))) {
      problems.push(
        `${name}: TILEBREAKER_OUTPUT_BUCKETS (${buckets.join(', ') || 'none'}) does not allow config/nightly.yaml's output ${output}`,
      );
    }
    const sourcesDir = env.get('TILEBREAKER_SOURCES_DIR') ?? '';
    const sourcesFile = f.nightly.sourcesFile;
    if (typeof sourcesFile !== 'string' || !locationWithin(sourcesFile, sourcesDir))
      problems.push(
        `${name}: config/nightly.yaml's sourcesFile ${String(sourcesFile)} is not under TILEBREAKER_SOURCES_DIR ${sourcesDir}`,
      );
    const mounted = (s.volumes ?? []).some((v) => typeof v === 'string' && v === `./config:${sourcesDir}:ro`);
    if (!mounted) problems.push(`${name}: ./config is not mounted read-only at ${sourcesDir}`);
  }
  return problems;
}

/** `docker compose run --rm cli <args>` lines in a text (one per line, shell quotes honoured), as argument lists. */
function documentedCommands(text: string): string[][] {
  const out: string[][] = [];
  for (const m of text.matchAll(/docker compose run --rm cli ([^\n`#]*)/g)) {
    const args = [...m[1]!.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((w) => w[1] ?? w[2] ?? w[3]!);
    // `...` stands for any command in prose.
    if (args.length > 0 && !args.includes('...')) out.push(args);
  }
  return out;
}

function loadFiles(): Files {
  const composeText = read('docker-compose.yml');
  return {
    compose: parse(composeText) as Compose,
    dockerfile: read('Dockerfile'),
    nightly: parse(read('config/nightly.yaml')) as Partial<MosaicRequest>,
    documented: [
      ...documentedCommands(composeText),
      ...documentedCommands(read('docs/fleet.md')),
      ...documentedCommands(read('README.md')),
    ],
    gitignore: read('.gitignore'),
    templates: { '.env.example': read('.env.example'), 'tiles.env.example': read('tiles.env.example') },
  };
}

const service = (f: Files, name: string): Service => {
  const s = f.compose.services[name];
  assert.ok(s, `docker-compose.yml has a ${name} service`);
  return s;
};
const setEnv = (s: Service, key: string, value: string | undefined) => {
  assert.ok(s.environment && !Array.isArray(s.environment));
  if (value === undefined) delete s.environment[key];
  else s.environment[key] = value;
};

test('docker-compose.yml: images pinned, tilebreaker commands the CLI accepts, worker healthchecks, no secret in the file, the nightly output allowed', async () => {
  const f = loadFiles();
  assert.ok(f.documented.length >= 3, `documented CLI commands found: ${f.documented.length}`);
  assert.deepEqual(await composeProblems(f), []);
  // What the stack needs besides: the object store, its bucket, the CLI on demand.
  for (const name of ['s3', 's3-create-bucket', 'cli', 'aws', 'prometheus']) service(f, name);
  assert.deepEqual(service(f, 'cli').profiles, ['cli']);
});

test('the nightly request and sample sources plan with the worker planner (the sources file read where ./config is)', async () => {
  const f = loadFiles();
  const request = {
    ...f.nightly,
    sourcesFile: path.join(repo, 'config', path.basename(String(f.nightly.sourcesFile))),
  } as MosaicRequest;
  const plan = await planMosaic(request);
  assert.equal(plan.output, f.nightly.output);
  assert.ok(plan.total > 0 && plan.total <= 1_000, `tiles: ${plan.total}`);
});

test('each broken rule is caught: a mutated copy of the files fails, naming the service and the rule', async () => {
  const cases: [string, (f: Files) => void, RegExp][] = [
    [
      'an image on latest',
      (f) => (service(f, 'prometheus').image = 'prom/prometheus:latest'),
      /prometheus: image prom\/prometheus:latest is not pinned/,
    ],
    [
      'an image without a tag',
      (f) => (service(f, 's3').image = 'versity/versitygw'),
      /s3: image versity\/versitygw has no tag/,
    ],
    [
      'a version variable without a default',
      (f) => (service(f, 's3').image = 'versity/versitygw:${VERSITYGW_VERSION}'),
      /s3: image .* variable without a default/,
    ],
    [
      'a default of latest',
      (f) => (service(f, 'aws').image = 'amazon/aws-cli:${AWS_CLI_VERSION:-latest}'),
      /aws: image amazon\/aws-cli:latest is not pinned/,
    ],
    [
      'the Dockerfile on a floating Node',
      (f) => (f.dockerfile = f.dockerfile.replace(/^ARG NODE_IMAGE=.*$/m, 'ARG NODE_IMAGE=node:24-bookworm-slim')),
      /Dockerfile: NODE_IMAGE node:24-bookworm-slim/,
    ],
    [
      'a worker command the CLI lacks',
      (f) => (service(f, 'worker').command = ['wroker']),
      /worker: command .*no command "wroker"/,
    ],
    [
      'a worker option the CLI lacks',
      (f) => (service(f, 'worker').command = ['worker', '--output-buckets', 's3://mosaics/nightly']),
      /worker: command .*unknown option --output-buckets/,
    ],
    [
      'a cli subcommand the CLI lacks',
      (f) => (service(f, 'cli').command = ['mosaic', 'begin']),
      /cli: command .*no subcommand "begin"/,
    ],
    [
      'a documented command with a missing argument',
      (f) => f.documented.push(['schedule', 'create', '--cron', '0 2 * * *', '--request', '/config/nightly.yaml']),
      /documented command .*1 argument\(s\) required, 0 given/,
    ],
    [
      'a documented command with an unknown option',
      (f) => f.documented.push(['mosaic', 'start', '--requests', '/config/nightly.yaml']),
      /documented command .*unknown option --requests/,
    ],
    [
      'a worker without a healthcheck',
      (f) => delete service(f, 'worker').healthcheck,
      /worker: worker without a healthcheck/,
    ],
    [
      'a disabled healthcheck',
      (f) => (service(f, 'worker').healthcheck = { disable: true }),
      /worker: worker without a healthcheck/,
    ],
    [
      'a healthcheck on another port',
      (f) => setEnv(service(f, 'worker'), 'TILEBREAKER_METRICS_ADDR', '0.0.0.0:9465'),
      /worker: healthcheck reads port 9464, metrics are served on 9465/,
    ],
    [
      'a secret written in the file',
      (f) => setEnv(service(f, 'worker'), 'AWS_SECRET_ACCESS_KEY', 'wJalrXUtnFEMI'),
      /worker: AWS_SECRET_ACCESS_KEY is written in the file/,
    ],
    [
      'a secret with a default',
      (f) => setEnv(service(f, 'postgresql'), 'POSTGRES_PASSWORD', '${POSTGRES_PASSWORD:-temporal}'),
      /postgresql: POSTGRES_PASSWORD is written in the file/,
    ],
    [
      'a secret in list form',
      (f) => (service(f, 'temporal').environment = ['POSTGRES_PWD=temporal']),
      /temporal: POSTGRES_PWD is written in the file/,
    ],
    [
      'a tile credential in the file',
      (f) => setEnv(service(f, 'cli'), 'TILES_API_KEY', 'k-123'),
      /cli: TILES_API_KEY is written in the file/,
    ],
    [
      'a secret flag',
      (f) => (service(f, 's3').command = ['--access', 'admin', '--secret', 'hunter2', 'posix', '/data']),
      /s3: --access is given a value.*s3: --secret is given a value/s,
    ],
    [
      'an env file git does not ignore',
      (f) => (service(f, 'worker').env_file = ['tiles.env.example']),
      /worker: env_file tiles.env.example is not git-ignored/,
    ],
    [
      'a template with a value',
      (f) => (f.templates['tiles.env.example'] += '\nAERIAL_TOKEN=abc\n'),
      /tiles.env.example: AERIAL_TOKEN has a value/,
    ],
    [
      'a bucket prefix beside the output',
      (f) => setEnv(service(f, 'worker'), 'TILEBREAKER_OUTPUT_BUCKETS', 's3://mosaics/nightly2'),
      /worker: TILEBREAKER_OUTPUT_BUCKETS \(s3:\/\/mosaics\/nightly2\) does not allow/,
    ],
    [
      'another bucket',
      (f) => setEnv(service(f, 'worker'), 'TILEBREAKER_OUTPUT_BUCKETS', 's3://${S3_BUCKET:-archive}/nightly'),
      /worker: TILEBREAKER_OUTPUT_BUCKETS \(s3:\/\/archive\/nightly\) does not allow/,
    ],
    [
      'no bucket prefix',
      (f) => setEnv(service(f, 'worker'), 'TILEBREAKER_OUTPUT_BUCKETS', undefined),
      /worker: TILEBREAKER_OUTPUT_BUCKETS \(none\) does not allow/,
    ],
    [
      'an output outside the prefix',
      (f) => (f.nightly.output = 's3://mosaics/adhoc/alps.tif'),
      /does not allow config\/nightly.yaml's output s3:\/\/mosaics\/adhoc\/alps.tif/,
    ],
    [
      'config mounted writable',
      (f) => (service(f, 'worker').volumes = ['./config:/config', 'scratch:/scratch']),
      /worker: .\/config is not mounted read-only at \/config/,
    ],
  ];
  for (const [what, mutate, expected] of cases) {
    const f = structuredClone(loadFiles());
    mutate(f);
    const problems = await composeProblems(f);
    assert.match(problems.join('\n'), expected, `${what}: ${problems.join('; ') || 'no problem found'}`);
  }
  // Through the text too, as a careless edit would make it.
  const f = loadFiles();
  f.compose = parse(
    read('docker-compose.yml').replace(/versitygw:\$\{VERSITYGW_VERSION:-v[\d.]+\}/, 'versitygw:latest'),
  ) as Compose;
  assert.match((await composeProblems(f)).join('\n'), /s3: image versity\/versitygw:latest is not pinned/);
});
