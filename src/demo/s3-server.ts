import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import path from 'node:path';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { adopt } from './children';

/** Where scripts/setup-s3.sh builds the server. */
export const s3ServerBinary = (root: string) => path.join(root, '.s3', 'bin', 'versitygw');

export interface LocalS3 {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** The environment a worker needs to use it (the AWS SDK's own variables, plus path-style addressing). */
  env: Record<string, string>;
  /** A client for the test or demo itself. */
  client: S3Client;
  /** Stops the server (SIGKILL when `hard`); its objects stay on disk. */
  stop(hard?: boolean): Promise<void>;
  /** Starts it again on the same port and folder. */
  start(): Promise<void>;
}

/** A port free on 127.0.0.1 now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function listening(port: number, deadline: number, child: ChildProcess): Promise<void> {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`S3 server exited with code ${child.exitCode} before it listened`);
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`S3 server did not listen on 127.0.0.1:${port} within the time allowed`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Where the gateway listens, with which keys, over which folders. */
interface GatewayOptions {
  binary: string;
  port: number;
  accessKeyId: string;
  secretAccessKey: string;
  /** The objects. */
  data: string;
  /** Their metadata. */
  meta: string;
}

/** Starts the gateway process, adopted (it ends with this process). */
function spawnGateway(g: GatewayOptions): ChildProcess {
  // Metadata in a sidecar folder, not extended attributes: any file system will do.
  const c = adopt(
    spawn(
      g.binary,
      [
        '--access',
        g.accessKeyId,
        '--secret',
        g.secretAccessKey,
        '--port',
        `127.0.0.1:${g.port}`,
        '--quiet',
        'posix',
        '--sidecar',
        g.meta,
        g.data,
      ],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    ),
  );
  c.stderr?.resume();
  return c;
}

/** Makes the bucket (one already there will do); on any other failure stops the server and throws. */
async function makeBucket(client: S3Client, bucket: string, stop: (hard?: boolean) => Promise<void>): Promise<void> {
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (err) {
    if (!['BucketAlreadyOwnedByYou', 'BucketAlreadyExists'].includes((err as { name?: string }).name ?? '')) {
      await stop(true);
      throw err;
    }
  }
}

export interface LocalS3Options {
  /** The checkout, whose .s3/bin holds the server. */
  root: string;
  /** Where objects and their metadata live. */
  dir: string;
  /** Default tilebreaker. */
  bucket?: string;
  /** Default any free port. */
  port?: number;
  /** How long the server may take to listen (default 30 s). */
  startWithinMs?: number;
}

/**
 * A real S3-compatible server on loopback (Versity S3 Gateway over a local folder, built by
 * scripts/setup-s3.sh), with one bucket made. Objects and their metadata live under `dir`, so a restart
 * keeps them.
 */
export async function startLocalS3(opts: LocalS3Options): Promise<LocalS3> {
  const binary = s3ServerBinary(opts.root);
  if (!existsSync(binary))
    throw new Error(`S3 test server not built: run bash scripts/setup-s3.sh (expected ${binary})`);
  const port = opts.port ?? (await freePort());
  const bucket = opts.bucket ?? 'tilebreaker';
  const accessKeyId = `tb${randomBytes(6).toString('hex')}`;
  const secretAccessKey = randomBytes(18).toString('hex');
  const data = path.join(opts.dir, 'data');
  const meta = path.join(opts.dir, 'meta');
  await mkdir(data, { recursive: true });
  await mkdir(meta, { recursive: true });
  const endpoint = `http://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;
  const start = async () => {
    const c = spawnGateway({ binary, port, accessKeyId, secretAccessKey, data, meta });
    child = c;
    await listening(port, Date.now() + (opts.startWithinMs ?? 30_000), c);
  };
  const stop = async (hard = false) => {
    const c = child;
    child = null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill(hard ? 'SIGKILL' : 'SIGTERM');
    await exited;
  };
  await start();
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
  });
  await makeBucket(client, bucket, stop);
  return {
    endpoint,
    bucket,
    accessKeyId,
    secretAccessKey,
    env: {
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: accessKeyId,
      AWS_SECRET_ACCESS_KEY: secretAccessKey,
      TILEBREAKER_S3_PATH_STYLE: '1',
    },
    client,
    stop,
    start,
  };
}
