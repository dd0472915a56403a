import { log, proxyActivities, upsertMemo, upsertSearchAttributes, workflowInfo } from '@temporalio/workflow';
import type { MosaicActivities } from '../messages/activities';
import { defaultMosaicName, isMosaicName } from '../messages/mosaic-names';
import { allServed, type MosaicProgress, type MosaicResult } from '../messages/mosaic-types';
import {
  MOSAIC_NAME,
  MOSAIC_PROGRESS,
  MOSAIC_SOURCE,
  MOSAIC_STATUS,
  MOSAIC_ZOOM,
  type MosaicMemo,
  type MosaicStatusName,
} from '../messages/search-attributes';

const { mosaicSearchAttributesRegistered } = proxyActivities<MosaicActivities>({
  startToCloseTimeout: '10s',
  scheduleToCloseTimeout: '30s',
  retry: { maximumAttempts: 2 },
});

/** Progress is published in steps of this many percent, so a run upserts a few times, not per batch. */
const STEP_PERCENT = 25;

export interface MosaicLabel {
  /** Where the name comes from when the start carried none in its memo. */
  output: string;
  source?: string;
  zoom?: number;
}

/**
 * What a mosaic shows outside its queries: a memo (name, source, zoom, output, status, progress) and, where
 * the namespace has them, the Mosaic* search attributes, updated at coarse steps only (each upsert is a
 * command in the history).
 */
export class MosaicPublication {
  private lastPercent = -1;
  private lastStatus: MosaicStatusName | null = null;

  private constructor(
    private readonly attributes: boolean,
    private label: Required<Pick<MosaicMemo, 'name'>> & MosaicMemo,
  ) {}

  /**
   * Starts publishing. A start that carried MosaicName proves the attributes registered;
   * otherwise an activity asks the operator service once (upserting an unregistered attribute would fail
   * every workflow task). No answer counts as no.
   */
  static async open(label: MosaicLabel): Promise<MosaicPublication> {
    const memo = (workflowInfo().memo ?? {}) as MosaicMemo;
    // Anyone may start a mosaic workflow: what goes into a keyword or an INT attribute is checked first.
    const name = typeof memo.name === 'string' && isMosaicName(memo.name) ? memo.name : defaultMosaicName(label.output);
    const full = {
      name,
      output: typeof memo.output === 'string' ? memo.output : label.output,
      ...(typeof label.source === 'string' ? { source: label.source.slice(0, 200) } : {}),
      ...(Number.isInteger(label.zoom) ? { zoom: label.zoom } : {}),
    };
    let attributes = workflowInfo().typedSearchAttributes.get(MOSAIC_NAME) !== undefined;
    if (!attributes) {
      try {
        attributes = await mosaicSearchAttributesRegistered();
      } catch (err) {
        log.warn('could not check the mosaic search attributes; keeping the memo only', {
          error: err instanceof Error ? err.message : String(err),
        });
      }
    }
    return new MosaicPublication(attributes, full);
  }

  /** What became known later (a re-drive's source and zoom, from its plan). */
  relabel(label: { source: string; zoom: number }): void {
    this.label = { ...this.label, source: label.source.slice(0, 200), zoom: label.zoom };
    this.lastStatus = null;
  }

  /** Publishes progress when it has crossed another step (and always the first time). */
  progress(p: Pick<MosaicProgress, 'done' | 'total'>): void {
    const percent = percentOf(p);
    if (
      this.lastStatus === 'running' &&
      Math.floor(percent / STEP_PERCENT) === Math.floor(this.lastPercent / STEP_PERCENT)
    )
      return;
    this.publish('running', percent, p);
  }

  /** The end: completed (every tile ok) or partial from the result, or failed / cancelled. */
  finished(result: MosaicResult): void {
    const complete = result.configError === undefined && allServed(result);
    this.publish(complete ? 'completed' : 'partial', 100, { done: result.total, total: result.total });
  }

  stopped(status: 'failed' | 'cancelled', p: Pick<MosaicProgress, 'done' | 'total'>): void {
    this.publish(status, percentOf(p), p);
  }

  private publish(status: MosaicStatusName, percent: number, p: Pick<MosaicProgress, 'done' | 'total'>): void {
    this.lastStatus = status;
    this.lastPercent = percent;
    const memo: MosaicMemo = { ...this.label, status, progress: percent, done: p.done, total: p.total };
    upsertMemo({ ...memo });
    if (!this.attributes) return;
    upsertSearchAttributes([
      { key: MOSAIC_NAME, value: this.label.name },
      ...(this.label.source !== undefined ? [{ key: MOSAIC_SOURCE, value: this.label.source }] : []),
      ...(this.label.zoom !== undefined ? [{ key: MOSAIC_ZOOM, value: this.label.zoom }] : []),
      { key: MOSAIC_STATUS, value: status },
      { key: MOSAIC_PROGRESS, value: percent },
    ]);
  }
}

function percentOf(p: Pick<MosaicProgress, 'done' | 'total'>): number {
  return p.total > 0 ? Math.min(100, Math.floor((p.done * 100) / p.total)) : 0;
}
