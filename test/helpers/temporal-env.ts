import type { SearchAttributeType } from '@temporalio/common';
import type { SearchAttributeKey } from '@temporalio/common/lib/search-attributes';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { connectionConfigFromEnv } from '../../src/client/connection-config';
import { localBinaries } from '../../src/client/local-server';

// Workers log every state change at INFO; tests only want warnings and errors (TEMPORAL_LOG_LEVEL overrides).
Runtime.install({ logger: new DefaultLogger((process.env.TEMPORAL_LOG_LEVEL as 'WARN' | undefined) ?? 'WARN') });

/**
 * Test environments on a real Temporal server, in this order of preference:
 *   1. an existing server named by TEMPORAL_ADDRESS (dev-server tests only: it cannot skip time);
 *   2. the project-local binaries installed by scripts/setup-temporal.sh;
 *   3. the SDK's own download (needs internet).
 */
export async function timeSkippingEnv(): Promise<TestWorkflowEnvironment> {
  const { testServer } = localBinaries();
  return TestWorkflowEnvironment.createTimeSkipping(
    testServer ? { server: { executable: { type: 'existing-path', path: testServer } } } : {},
  );
}

export async function devServerEnv(searchAttributes: SearchAttributeKey<SearchAttributeType>[] = [], extraNamespaces: string[] = []): Promise<TestWorkflowEnvironment> {
  const conn = connectionConfigFromEnv();
  if (conn.address) {
    return TestWorkflowEnvironment.createFromExistingServer({
      address: conn.address,
      namespace: conn.namespace,
      connectionOptions: { tls: conn.tls, ...(conn.apiKey ? { apiKey: conn.apiKey } : {}) },
    });
  }
  const { cli } = localBinaries();
  return TestWorkflowEnvironment.createLocal({
    server: {
      ...(cli ? { executable: { type: 'existing-path', path: cli } } : {}),
      ip: '127.0.0.1',
      searchAttributes,
      extraArgs: extraNamespaces.flatMap((ns) => ['--namespace', ns]),
    },
  });
}

/** The worker's workflow code, as the compiled workflows module beside this file's build. */
export const workflowsPath = require.resolve('../../src/workflows');

let counter = 0;
/** A task queue of its own per test, so tests sharing a server never take each other's tasks. */
export function uniqueTaskQueue(prefix = 'test'): string {
  return `${prefix}-${process.pid}-${Date.now()}-${++counter}`;
}
