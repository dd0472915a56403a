/**
 * One worker process of bench:force-open: a real tilebreaker worker (its own breaker guard, HTTP pools and
 * identity) on the bench's dev server. argv: address, namespace, task queue, work folder.
 */
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createWorker } from '../../src/client/worker';

Runtime.install({ logger: new DefaultLogger('WARN') });

async function main(): Promise<void> {
  const [address, namespace, taskQueue, work] = process.argv.slice(2) as [string, string, string, string];
  const client = new Client({ connection: await Connection.connect({ address }), namespace });
  const connection = await NativeConnection.connect({ address });
  const worker = await createWorker({
    connection,
    client,
    namespace,
    taskQueue,
    roots: { sources: [work], outputs: [work] },
  });
  process.on('disconnect', () => worker.shutdown());
  const running = worker.run();
  process.send?.('ready');
  await running;
  await connection.close();
  process.exit(0);
}

void main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
