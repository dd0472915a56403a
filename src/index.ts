/**
 * `tilebreaker`: the client side, for programs. Start, follow, cancel and re-drive mosaics; read and
 * administer the fleet's breakers; schedules; connecting to Temporal; breaker keys, the pure breaker policy,
 * source parsing, and the messages and result types. Everything here goes through a @temporalio/client
 * Client: it loads no worker, activity or workflow code (a test checks). The other entry points:
 *
 *   tilebreaker/workflows    the workflow functions: the workflowsPath of a worker (bundle-safe)
 *   tilebreaker/activities   the activities, the breaker guard, and tilebreaker's worker
 *   tilebreaker/testing      replaying recorded histories against tilebreaker's workflows
 */

// Connecting
export { connectionConfigFromEnv, type ConnectionConfig, type TlsSettings } from './client/connection-config';
export { connectClient } from './client/temporal';

// Mosaics
export {
  cancelMosaic,
  exitCodeFor,
  liveCounts,
  mosaicStatus,
  MosaicAlreadyRunningError,
  resolveRequestPaths,
  startMosaic,
  startRedrive,
  watchMosaic,
  type MosaicStatus,
  type StartMosaicOptions,
} from './client/mosaics';
export {
  listMosaics,
  mosaicWorkflowId,
  resolveMosaicId,
  LIST_STATUSES,
  type ListedMosaic,
  type MosaicListResult,
} from './client/mosaic-names';
export { checkMosaicName, defaultMosaicName } from './messages/mosaic-names';
// Seeds: zoom levels into MBTiles
export { seedExitCode, seedWorkflowId, startSeed } from './client/seeds';
export { checkSeedRequest, type SeedRequest, type SeedResult } from './messages/seed-types';
export { parseMosaicRequest, type ParsedMosaicRequest } from './messages/mosaic-request';
export { progressQuery } from './messages/mosaic';
export {
  MANIFEST_STATUSES,
  type AfterDeadline,
  type FallbackPolicy,
  type ManifestStatus,
  type ManifestTile,
  type MosaicPlan,
  type MosaicProgress,
  type MosaicRequest,
  type MosaicResult,
  type RedriveSources,
  type StatusCounts,
  type TileGrid,
  type TileSelection,
} from './messages/mosaic-types';

// Schedules
export { createMosaicSchedule, deleteSchedule, listSchedules, type ScheduleSummary } from './client/schedules';
export { SCHEDULE_OVERLAPS, type ScheduledMosaicResult, type ScheduleOverlap } from './messages/scheduled-mosaic';

// Breakers: reading and administering them
export {
  adminBreaker,
  AdminNotConfirmedError,
  adminSender,
  BREAKER_STATES,
  BREAKER_WORKFLOW_TYPE,
  breakerStatus,
  breakerTransitions,
  BreakerNotFoundError,
  BreakerNotRunningError,
  configureBreaker,
  DEFAULT_CONFIRM_TIMEOUT_MS,
  defaultActor,
  listBreakers,
  resolveBreakerKey,
  showBreaker,
  type AdminResult,
  type BreakerAdminAction,
  type ConfigureResult,
  type ListedBreaker,
  type ListResult,
  type ResolvedKey,
  type ShownBreaker,
} from './client/breakers';
export { breakerKey, breakerWorkflowId, isCanonicalKey, isNamedKey, namedBreakerKey } from './breaker/key';
// The pure breaker policy: its state machine (`step`), configuration and types.
export {
  breakerView,
  ConfigError,
  DEFAULT_POLICY_CONFIG,
  initialState,
  migratePolicyState,
  nextDeadline,
  parsePolicyConfig,
  permit,
  POLICY_BOUNDS,
  stateName,
  step,
  windowFigures,
  type BreakerStateName,
  type BreakerView,
  type Mode,
  type OutcomeCounts,
  type OutcomeKind,
  type Permit,
  type Phase,
  type PolicyConfig,
  type PolicyConfigInput,
  type PolicyEvent,
  type PolicyState,
  type ProbeDecision,
  type ProbeToken,
  type StepResult,
  type TransitionReason,
  type TransitionRecord,
  type WindowFigures,
} from './breaker';
// The entity's signals, queries and payload types.
export {
  adminSignal,
  BREAKER_ENTITY_WORKFLOW,
  cancelProbeSignal,
  probeDecisionQuery,
  probeResultSignal,
  reportSignal,
  requestProbeSignal,
  statusQuery,
  transitionsQuery,
  viewQuery,
  type AdminAction,
  type BreakerEntityWorkflow,
  type BreakerStatus,
  type EntityCounters,
  type EntityExit,
  type EntityInput,
  type EntityOptions,
  type OutcomeReport,
  type ProbeRequest,
  type ProbeResult,
  type ProbeSpec,
} from './messages/breaker';
export {
  ALL_SEARCH_ATTRIBUTES,
  BREAKER_KEY,
  BREAKER_SEARCH_ATTRIBUTES,
  BREAKER_STATE,
  MOSAIC_NAME,
  MOSAIC_PROGRESS,
  MOSAIC_SEARCH_ATTRIBUTES,
  MOSAIC_SOURCE,
  MOSAIC_STATUS,
  MOSAIC_STATUSES,
  MOSAIC_ZOOM,
  type MosaicMemo,
  type MosaicStatusName,
} from './messages/search-attributes';
export {
  drillStatusQuery,
  type DrillInput,
  type DrillResult,
  type DrillStatus,
  type DrillStep,
} from './messages/drill';

// Tile sources
export {
  parseSource,
  parseSourcesFile,
  sourceSchema,
  type SourceConfig,
  type SourceInput,
  type SourcesFile,
} from './sources/schema';
export { geographicBbox, getMapUrl, tileUrl, type TileAddress } from './sources/request-url';
