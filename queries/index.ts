/** Named queries (DESIGN §4): SQL files with bound {name:Type} parameters, their params and row shapes. */
export { NAMED_QUERIES, CommonParams, bindParams, getQuery, querySql, runQuery, withFragments } from './registry.ts';
export type { NamedQuery } from './registry.ts';
