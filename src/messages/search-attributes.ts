// @temporalio/common is the workflow SDK's own Node-free base package (it is what @temporalio/workflow re-exports from).
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Search attributes that breaker workflows keep current, so that
 * `temporal workflow list --query 'BreakerState="open"'` lists open breakers.
 * A server must have them registered (`temporal operator search-attribute create`); the dev server started
 * by tilebreaker registers them itself.
 */
export const BREAKER_STATE = defineSearchAttributeKey('BreakerState', SearchAttributeType.KEYWORD);
export const BREAKER_KEY = defineSearchAttributeKey('BreakerKey', SearchAttributeType.KEYWORD);

export const BREAKER_SEARCH_ATTRIBUTES = [BREAKER_STATE, BREAKER_KEY];
