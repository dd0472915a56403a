import { defineQuery } from '@temporalio/workflow';
import type { MosaicProgress } from './mosaic-types';

/** Done / total / counts by status / ETA / breakers: answered by mosaic, block and re-drive workflows. */
export const progressQuery = defineQuery<MosaicProgress>('progress');
