/** Reports built from the named queries. */
export { buildContinuityReport } from './continuity.ts';
export type { ContinuityReport, LineCounts, ReportParams } from './continuity.ts';
export { renderContinuityText } from './render-text.ts';
