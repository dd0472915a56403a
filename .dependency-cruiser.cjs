/**
 * The import rules of src/ (`npm run depcheck`; CI runs it before the tests). Floors, lowest first:
 *
 *   src/breaker    the pure breaker policy: imports only itself (and zod)
 *   src/geo        Web Mercator tile math: imports only itself
 *   src/sources    source configuration and request URLs: itself, src/geo, and src/breaker/config-error.ts
 *                  (the one error type every configuration problem is reported with), nothing else of ours
 *   src/messages   what workflows, activities and clients exchange (signals, queries, payload and activity
 *                  types, and the check of a plan handed in by a requester): the workflow SDK's definitions,
 *                  itself and the pure floors below it (src/breaker, src/sources, src/geo)
 *   src/workflows  deterministic code: only @temporalio/workflow, src/breaker, src/messages and itself
 *   src/activities all I/O: never src/workflows, src/client or src/cli
 *   src/client, src/cli, src/index.ts, src/api   the top; nothing imports src/cli
 *
 * The package's entry points (package.json "exports"): src/index.ts (`tilebreaker`, the client side),
 * src/workflows/index.ts (`tilebreaker/workflows`, a worker's workflowsPath), src/api/activities.ts
 * (`tilebreaker/activities`) and src/api/testing.ts (`tilebreaker/testing`). Nothing in src/ imports
 * src/index.ts or src/api, and `tilebreaker` reaches no worker, activity or test-server code, at run time or
 * for types: a program that only starts mosaics and reads breakers loads none of it.
 *
 * The pure floors (breaker, geo, sources, messages) use no Node API and no Temporal client or worker: the
 * workflow bundle loads them. There is no import circle anywhere, type-only imports included
 * (tsPreCompilationDeps makes `import type` visible to the cruiser).
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment:
        'An import circle (type-only imports count too). Move what both sides need into a lower module, e.g. src/messages.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'breaker-imports-only-breaker',
      severity: 'error',
      comment: 'src/breaker is the pure policy at the bottom: it imports nothing else of ours.',
      from: { path: '^src/breaker/' },
      to: { path: '^src/', pathNot: '^src/breaker/' },
    },
    {
      name: 'geo-imports-only-geo',
      severity: 'error',
      comment: 'src/geo is pure tile math at the bottom: it imports nothing else of ours.',
      from: { path: '^src/geo/' },
      to: { path: '^src/', pathNot: '^src/geo/' },
    },
    {
      name: 'sources-imports-only-geo-and-config-error',
      severity: 'error',
      comment:
        'src/sources may import src/geo and src/breaker/config-error.ts (the error every configuration problem is reported with), nothing else of ours.',
      from: { path: '^src/sources/' },
      to: { path: '^src/', pathNot: ['^src/(sources|geo)/', '^src/breaker/config-error[.]ts$'] },
    },
    {
      name: 'messages-import-only-pure-floors',
      severity: 'error',
      comment:
        'src/messages sits below workflows, activities and clients: it imports itself and the pure floors (src/breaker, src/sources, src/geo).',
      from: { path: '^src/messages/' },
      to: { path: '^src/', pathNot: '^src/(messages|breaker|sources|geo)/' },
    },
    {
      name: 'workflows-import-only-workflow-sdk-breaker-messages',
      severity: 'error',
      comment:
        'Workflow code must stay deterministic and bundle-safe: it imports @temporalio/workflow, src/breaker, src/messages and itself. ' +
        'Type activities with the contracts in src/messages/activities.ts, not the activity modules.',
      from: { path: '^src/workflows/' },
      to: { pathNot: ['^src/(workflows|breaker|messages)/', '^node_modules/@temporalio/workflow/'] },
    },
    {
      name: 'activities-not-up',
      severity: 'error',
      comment:
        'Activities are below workflows and clients: take message definitions from src/messages, never from src/workflows, src/client or src/cli.',
      from: { path: '^src/activities/' },
      to: { path: '^src/(workflows|client|cli)/' },
    },
    {
      name: 'nothing-imports-cli',
      severity: 'error',
      comment: 'src/cli is the top: put what others need in src/client or below.',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/cli/' },
    },
    {
      name: 'nothing-imports-entry-points',
      severity: 'error',
      comment:
        "src/index.ts and src/api/ are the package's entry points (re-exports for users): import the module that defines a thing instead.",
      from: { path: '^src/' },
      to: { path: ['^src/index[.]ts$', '^src/api/'] },
    },
    {
      name: 'main-entry-client-side',
      severity: 'error',
      comment:
        '`tilebreaker` (src/index.ts) is the client side: it must not reach the worker, the activities, the test server, sharp or undici. ' +
        'Put what a client needs in src/client, src/messages or a pure floor; worker-side exports go in src/api/activities.ts.',
      from: { path: '^src/index[.]ts$' },
      to: {
        path: [
          '^src/(activities|api|cli)/',
          '^node_modules/(@temporalio/(worker|testing|activity|core-bridge)|sharp|undici)/',
        ],
        reachable: true,
      },
    },
    {
      name: 'pure-floors-no-node',
      severity: 'error',
      comment: 'src/breaker, src/geo, src/sources and src/messages use no Node API: the workflow bundle loads them.',
      from: { path: '^src/(breaker|geo|sources|messages)/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'messages-only-temporal-definitions',
      severity: 'error',
      comment:
        'src/messages takes only definitions from Temporal (@temporalio/workflow, @temporalio/common): clients and workflows both load it.',
      from: { path: '^src/messages/' },
      to: { path: '^node_modules/@temporalio/', pathNot: '^node_modules/@temporalio/(workflow|common)/' },
    },
    {
      name: 'pure-floors-no-temporal',
      severity: 'error',
      comment: 'src/breaker, src/geo and src/sources know nothing of Temporal.',
      from: { path: '^src/(breaker|geo|sources)/' },
      to: { path: '^node_modules/@temporalio/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing (a moved module?).',
      from: { path: '^src/' },
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // See `import type` too: a circle of type-only imports is still a circle of modules.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
