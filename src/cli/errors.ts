// How the CLI says that a command failed: as text on stderr, or, when the command line has --json, as one JSON
// object on stdout (docs/cli.md, "Errors under --json"). The exit code is the same either way.
import type { CommanderError } from 'commander';

/**
 * An error under --json: `{ "error": CliErrorBody }`, one object on stdout. `kind` says what went wrong:
 * `usage` (the command line: unknown command or option, a missing or malformed value, as commander checks
 * it), `invalid` (a value the CLI or the planner refused: a request field, a policy field, a file that is not
 * valid), `failed` (the command ran and its work failed: a seed level), `error` (anything else that stopped it:
 * an unreachable server, a mosaic not found). `field` names the flag or field at fault when the message does.
 */
export interface CliErrorBody {
  message: string;
  kind: 'usage' | 'invalid' | 'failed' | 'error';
  exitCode: number;
  field?: string;
  /** commander's error code, for a usage error (e.g. commander.unknownOption). */
  code?: string;
  /** Each problem a refused configuration names, `field: why (got value)`. */
  issues?: readonly string[];
  /** The workflow the failure belongs to, when one ran. */
  workflowId?: string;
}

/** Whether the command line asks for JSON: a `--json` before any `--` (everything after it is an operand). */
export function wantsJson(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
}

/** The flag or field an error's message starts with or names, if any. */
export function fieldOf(message: string): string | undefined {
  // commander: "option '--limit <n>' argument 'x' is invalid", "required option '--cron <expr>' not specified", "unknown option '--x'".
  const option = /option '(--?[A-Za-z][\w-]*)/.exec(message);
  if (option) return option[1];
  // The CLI's own: "--bbox: must be ...", `--sources "x": no such file`, "--for must be at most 30d".
  const flag = /^(--[A-Za-z][\w-]*)\b/.exec(message);
  if (flag) return flag[1];
  // A ConfigError: "mosaic request: maxTiles: the plan has ..." (the first issue's field).
  const issue = /^[^:]+: ([A-Za-z_][\w.[\]]*): /.exec(message);
  return issue ? issue[1] : undefined;
}

/** The JSON body of an error the CLI stops with. */
export function errorBody(err: unknown, exitCode: number, extra: Partial<CliErrorBody> = {}): CliErrorBody {
  const message = err instanceof Error ? err.message : String(err);
  const listed =
    err instanceof Error && err.name === 'ConfigError' ? (err as Error & { issues?: unknown }).issues : undefined;
  const issues = Array.isArray(listed) ? listed.map(String) : undefined;
  const invalid = issues !== undefined || (err instanceof Error && err.name === 'InvalidArgumentError');
  const field = issues?.[0] !== undefined ? /^([^:\s]+): /.exec(issues[0])?.[1] : fieldOf(message);
  return {
    message,
    kind: invalid ? 'invalid' : 'error',
    exitCode,
    ...(field !== undefined ? { field } : {}),
    ...(issues !== undefined ? { issues } : {}),
    ...extra,
  };
}

/** A commander usage error's body: its message without commander's "error: " prefix. */
export function usageBody(err: CommanderError): CliErrorBody {
  // A group named without a subcommand: commander prints the group's help and exits 1, message "(outputHelp)".
  const message =
    err.code === 'commander.help' || err.message === '(outputHelp)'
      ? 'a subcommand is needed: see --help for the list'
      : err.message.replace(/^error: /, '');
  const field = fieldOf(message);
  return { message, kind: 'usage', exitCode: 2, ...(field !== undefined ? { field } : {}), code: err.code };
}

/** Prints an error the way the command line asks: JSON on stdout under --json, else `tilebreaker: message` on stderr. */
export function printError(body: CliErrorBody, json: boolean): void {
  if (json) process.stdout.write(`${JSON.stringify({ error: body })}\n`);
  else console.error(`tilebreaker: ${body.message}`);
}
