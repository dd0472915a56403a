import { Context } from '@temporalio/activity';

/** The running activity's context, or undefined when the code is called directly (the `tile` command, benchmarks). */
export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}
