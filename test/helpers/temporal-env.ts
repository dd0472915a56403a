import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, type LogEntry, type LogLevel } from '@temporalio/worker';
import { tmpdir } from 'node:os';
import { inspect } from 'node:util';
import { connectionConfigFromEnv } from '../../src/client/connection-config';
import { localBinaries } from '../../src/client/local-server';
import { withStartRetries } from '../../src/client/server-start';

const LEVELS: LogLevel[] = ['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'];
const printFrom = LEVELS.indexOf((process.env.TEMPORAL_LOG_LEVEL as LogLevel | undefined) ?? 'WARN');
let captured: string[] | null = null;

/**
 * From now on, keep every worker log line from INFO up as text (what a worker with INFO logging would print),
 * for tests that check what reaches the logs.
 */
export function captureWorkerLogs(): string[] {
  captured ??= [];
  return captured;
}

// Workers log every state change at INFO; tests print only warnings and errors (TEMPORAL_LOG_LEVEL overrides).
Runtime.install({
  logger: new DefaultLogger('INFO', (entry: LogEntry) => {
    const line = `[${entry.level}] ${entry.message}${entry.meta ? ` ${inspect(entry.meta, { depth: 8, breakLength: Infinity })}` : ''}`;
    captured?.push(line);
    if (LEVELS.indexOf(entry.level) >= printFrom) process.stderr.write(`${line}\n`);
  }),
});

/**
 * Test environments on a real Temporal server, in this order of preference:
 *   1. an existing server named by TEMPORAL_ADDRESS (dev-server tests only: it cannot skip time);
 *   2. the project-local binaries installed by scripts/setup-temporal.sh;
 *   3. the SDK's own download (needs internet).
 */
export async function timeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const { testServer } = localBinaries();
  return withStartRetries(() =>
    TestWorkflowEnvironment.createTimeSkipping(
      testServer ? { server: { executable: { type: 'existing-path', path: testServer } } } : {},
    ),
  );
}

export async function devServerEnv(
  searchAttributes: SearchAttributeKey<SearchAttributeType>[] = [],
  extraNamespaces: string[] = [],
): Promise<TestWorkflowEnvironment> {
  const conn = connectionConfigFromEnv();
  if (conn.address) {
    return TestWorkflowEnvironment.createFromExistingServer({
      address: conn.address,
      namespace: conn.namespace,
      connectionOptions: { tls: conn.tls, ...(conn.apiKey ? { apiKey: conn.apiKey } : {}) },
    });
  }
  const { cli } = localBinaries();
  return withStartRetries(() =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path', path: cli } } : {}),
        ip: '127.0.0.1',
        searchAttributes,
        extraArgs: extraNamespaces.flatMap((ns) => ['--namespace', ns]),
      },
    }),
  );
}

/** Where the tests' workers may read sources files and write mosaics: each test works in its own temp folder. */
export const TEST_ROOTS = { sources: [tmpdir()], outputs: [tmpdir()] };

/** The worker's workflow code, as the compiled workflows module beside this file's build. */
export const workflowsPath = require.resolve('../../src/workflows');

let counter = 0;
/** A task queue of its own per test, so tests sharing a server never take each other's tasks. */
export function uniqueTaskQueue(prefix = 'test'): string {
  return `${prefix}-${process.pid}-${Date.now()}-${++counter}`;
}
