/** Named queries (DESIGN §4): SQL files with bound {name:Type} parameters, their params and row shapes. */
export { NAMED_QUERIES, CommonParams, INTERNAL_PARAM_TYPES, bindParams, checkMcpPaths, checkReportParams, countChallenges, countSessionOutcomes, countSessionsAcross, bindInternalParams, getQuery, listServerRestarts, querySql, resolveEndpointPaths, runQuery, wholeHours, withFragments, withQueryDefaults } from './registry.ts';
export type { ChallengeCount, EndpointPathsMemo, McpPathsCheck, NamedQuery, QueryDefaults, RestartSpan, ServerRestart, SessionOutcomes } from './registry.ts';
