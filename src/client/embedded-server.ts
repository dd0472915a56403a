import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { ALL_SEARCH_ATTRIBUTES } from '../messages/search-attributes';
import { localBinaries, packageRoot } from './local-server';
import { withStartRetries } from './server-start';

export interface EmbeddedServer {
  address: string;
  namespace: string;
  /** Stops the server process; its SQLite file stays for the next start. */
  stop(): Promise<void>;
}

/**
 * Starts a local Temporal dev server (`temporal server start-dev`) on 127.0.0.1 with its state in a SQLite
 * file under .temporal/ (git-ignored) and tilebreaker's search attributes registered. Uses the binary that
 * scripts/setup-temporal.sh installed, or the SDK's download when that is missing and the machine is online.
 */
export async function startEmbeddedServer(opts: { dbFile?: string; uiPort?: number } = {}): Promise<EmbeddedServer> {
  const root = packageRoot();
  const dbFile = opts.dbFile ?? path.join(root, '.temporal', 'dev-server.sqlite');
  mkdirSync(path.dirname(dbFile), { recursive: true });
  const { cli } = localBinaries();
  const env = await withStartRetries(() =>
    TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path', path: cli } } : {}),
        ip: '127.0.0.1',
        dbFilename: dbFile,
        searchAttributes: ALL_SEARCH_ATTRIBUTES,
        ...(opts.uiPort ? { ui: true, uiPort: opts.uiPort } : {}),
      },
    }),
  );
  return { address: env.address, namespace: env.namespace ?? 'default', stop: () => env.teardown() };
}
