import { InvalidArgumentError } from 'commander';

/** A commander parser for a port flag (`--port`, `--console-port`): a whole number from 0 (any free port) to 65535. */
export function portOption(flag: string): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n > 65535)
      throw new InvalidArgumentError(`${flag}: a port number from 0 to 65535 (got ${JSON.stringify(value)})`);
    return n;
  };
}
