/** No entity (running or finished) has this key's workflow id. */
export class BreakerNotFoundError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    readonly namespace: string,
    hint = '',
  ) {
    super(
      `no breaker entity for key ${key}: workflow id "${workflowId}" not found in namespace "${namespace}". ` +
        `An entity is created by the first outcome a guard reports for the key; "tilebreaker breaker list" lists the running ones.${hint}`,
    );
    this.name = 'BreakerNotFoundError';
  }
}

/** The entity exists but is not running (it finished idle, or was terminated): there is nothing to signal. */
export class BreakerNotRunningError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    readonly status: string,
    readonly closeTime: Date | undefined,
  ) {
    super(
      `breaker ${key} (workflow "${workflowId}") is not running: its latest run is ${status}` +
        `${closeTime ? ` since ${closeTime.toISOString()}` : ''}` +
        (status === 'COMPLETED' ? ' (a closed breaker with no reports finishes; the next report starts it again)' : ''),
    );
    this.name = 'BreakerNotRunningError';
  }
}

/**
 * An admin signal the server accepted, whose effect could not be read back before `confirmTimeoutMs`: the
 * entity answered no status query in time (under load its workflow tasks wait their turn). The signal is in the
 * entity's history: it takes effect when the entity's next workflow task runs, without being sent again.
 * (When the status was read but does not show the action yet, adminBreaker returns `confirmed: false` instead.)
 */
export class AdminNotConfirmedError extends Error {
  constructor(
    readonly key: string,
    readonly workflowId: string,
    /** force-open, force-close, reset or configure. */
    readonly action: string,
    /** When the signal was sent (this machine's clock). */
    readonly sentAt: number,
    /** Why it is not confirmed: the read-back's last failure. */
    readonly why: string,
  ) {
    super(
      `the ${action} signal was sent to breaker ${key} (workflow "${workflowId}") and accepted by the server, but is not yet confirmed: ${why}`,
    );
    this.name = 'AdminNotConfirmedError';
  }
}
