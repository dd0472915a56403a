import { readFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import { checkDrillInput, type DrillInput, type DrillResult } from '../messages/drill';
import { breakerDrillWorkflow } from '../workflows/drill';
import { formatTransitions } from './format';

export function readDrillFile(file: string): DrillInput {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`drill file ${file}: ${(err as Error).message}`, { cause: err });
  }
  let input: DrillInput;
  try {
    input = JSON.parse(text) as DrillInput;
  } catch (err) {
    throw new Error(`drill file ${file}: not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  // Checked here too, before a server is started for it: the error names the file, the field and the value.
  try {
    checkDrillInput(input);
  } catch (err) {
    throw new Error(`drill file ${file}: ${(err as Error).message}`, { cause: err });
  }
  return input;
}

export async function runDrill(client: Client, taskQueue: string, input: DrillInput): Promise<DrillResult> {
  return client.workflow.execute(breakerDrillWorkflow, {
    args: [input],
    taskQueue,
    workflowId: `drill/${input.key ?? 'drill'}/${Date.now()}`,
  });
}

export function printDrill(result: DrillResult, json: boolean): void {
  if (json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(`breaker drill: final state ${result.finalState}`);
  console.log(formatTransitions(result.transitions, result.startedAt));
  const granted = result.decisions.filter((d) => d.kind === 'granted').length;
  console.log(
    `  probe requests: ${result.decisions.length}, granted: ${granted}, ignored events: ${result.ignored.length}`,
  );
  for (const i of result.ignored) console.log(`    +${(i.atMs / 1000).toFixed(3)}s ${i.why}`);
}
